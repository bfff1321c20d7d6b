"""One blocking client connection: one HTTP/2 connection per channel, shared by all threads.

:class:`BlockingClientConnection` owns a socket and a
:class:`~minigrpc.protocol.client_protocol.ClientGrpcConnection` behind one lock (the HTTP/2
connection is not thread-safe). There is no reader thread: a thread that needs something
from the server (a response, send window, a free stream slot) takes the *reader role*
if nobody holds it, reads the socket without the lock, feeds the bytes to the protocol under the
lock, flushes what the connection queued (ACKs, WINDOW_UPDATEs, PING replies) and wakes every
waiter. Other threads wait on a condition variable and take over the role when the reader's
own call is done.
A call that another thread can end (a streaming call, a future) makes the connection
*wakeable*: its reader then polls a :class:`~minigrpc.net.sockets.Waker` beside the socket, so that
the end of the call it reads for wakes it even though the peer sends nothing more.
So the one-shot path (connect, one call, close) starts no thread at all and costs one
``connect()``, one ``send()`` (preface, SETTINGS, WINDOW_UPDATE, HEADERS and DATA together) and
the ``recv()`` calls the response needs.

Writes go through an outbox: frames are taken from the connection under the lock, in order, and
written by whichever thread holds the *writer role*, without the lock. A thread blocked in
``send()`` (the peer is slow to read) therefore never stops another thread from reading, which
is what keeps two peers that are both blocked on writing from deadlocking (docs/wire-rules.md,
"Flow control and sizes").

:class:`minigrpc.blocking.transport.BlockingTransport` creates and replaces these connections for
a channel.
"""

import math
import select
import socket
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

from ..driver.attempts import CHANNEL_CLOSED, deadline_status, passed
from ..driver.channel_core import TransportOptions
from ..driver.invocation import CANCELLED
from ..driver.logs import get_logger
from ..net import sockets
from ..net.sockets import Waker, client_tracer, os_error_text
from ..protocol import wire
from ..protocol.client_protocol import (
    CallEvent,
    ClientCall,
    ConnectionFailed,
    GoAwayReceived,
)
from ..protocol.grpc_connection import Message
from ..protocol.status import CallStatus
from ..protocol.targets import Target
from .timers import CLIENT_TIMERS, TimerHandle

__all__ = ["BlockingClientConnection"]

_LOG = get_logger("minigrpc.blocking.transport")

#: How often a connection's watch thread checks that someone still watches the channel.
WATCH_INTERVAL = 1.0


#: Non-blocking flag for one ``send()`` on a blocking socket (Linux, macOS); 0 where missing.
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0) if hasattr(select, "poll") else 0
#: The most a TLS connection writes from the shared timer thread, and only when poll() finds
#: room: a PING or a GOAWAY, never a backlog that could block the thread on a full socket.
_AT_ONCE_TLS = 1024


class _WriteTimeout(OSError):
    """The peer did not read before the writing thread's deadline; ``unsent`` is what is left."""

    def __init__(self, unsent: bytes) -> None:
        super().__init__("timed out writing to the server")
        self.unsent = unsent


class BlockingClientConnection:
    """One HTTP/2 connection: a socket, its protocol state, a lock and the reader/writer roles."""

    def __init__(
        self,
        target: Target,
        sock: socket.socket,
        options: TransportOptions,
        on_unusable: Optional[Callable[[], None]] = None,
    ) -> None:
        self.target = target
        #: Told when this connection can take no new calls (a GOAWAY, a failure).
        self._on_unusable = on_unusable
        self._sock: Any = sock  # a socket, or a TLSSocket on a secure channel
        #: ``send()`` flag for writes that must not block; TLS writes go through ``sendall``.
        self._dontwait = _MSG_DONTWAIT if isinstance(sock, socket.socket) else 0
        #: A TLSSocket's ``pending()``: bytes it already holds, which poll() cannot see.
        self._tls_pending: Optional[Callable[[], bool]] = getattr(sock, "pending", None)
        self.protocol = options.new_protocol(target.display)
        # Reentrant: a signal handler runs in the main thread wherever it was interrupted, maybe
        # inside this lock while received bytes are absorbed, and a handler that cancels the call
        # (grpcio's _signal_handling_test does) must not deadlock on it.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._reading = False
        self._writing = False
        self._outbox: List[bytes] = []
        #: Set when a write failed (peer closed or reset); reads go on until EOF (see _send).
        self._write_error: Optional[BaseException] = None
        self._used = False
        #: A call has been registered on this connection (set under the lock, after
        #: ``start_call``); ``_used`` is set before that, while other threads may look.
        self._started = False
        self._closed = False
        #: The channel sends no new calls here (:meth:`retire`).
        self._retired = False
        self._tracer = client_tracer(target.display)
        self._poller: Any = None
        #: Wakes the reader when another thread ends a call (:meth:`make_wakeable`); None until
        #: such a call runs here. ``_poller_wakes``: the poller has its descriptor.
        self._waker: Optional[Waker] = None
        self._poller_wakes = False
        #: Size of the next ``recv()`` (:func:`minigrpc.net.sockets.next_read_size`); reader role
        #: only.
        self._read_size = sockets.SMALL_READ
        #: The call and deadline of the thread inside run(), for deadline-bounded writes.
        self._local = threading.local()
        #: A watch thread reads this connection while it is idle (:meth:`watch`).
        self._watching = False
        #: Client keepalive (:mod:`minigrpc.driver.client_keepalive`), None when the channel
        #: does not ping; it keeps its one timer, on the process's shared timer thread
        #: (:data:`minigrpc.blocking.timers.CLIENT_TIMERS`).
        self._keepalive = None if options.keepalive is None else options.keepalive.connection(
            self.protocol, time.monotonic())
        if self._keepalive is not None:
            self._arm_keepalive_locked()

    # -- state ----------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """New calls may go here (no GOAWAY, no failure, not closed or retired)."""
        return (
            not self._closed
            and not self._retired
            and not self.protocol.draining
            and self._write_error is None
        )

    def retire(self) -> None:
        """The channel sends no new calls here any more (its address left the policy): close it
        now if idle, else once its last call is over."""
        with self._lock:
            self._retired = True
            idle = self.protocol.idle
        if idle:
            self.close()

    @property
    def started(self) -> bool:
        """A call has been started here (set once the protocol registered it; calls that start
        together on a new connection share it, stale or not: :mod:`minigrpc.driver.subchannel`)."""
        return self._started

    @property
    def peer_accept_encodings(self) -> Optional[frozenset]:
        return self.protocol.peer_accept_encodings

    # -- the call -------------------------------------------------------------------------

    def run(self, call: ClientCall, deadline: Optional[float]) -> bool:
        """Run a unary call to its end on this connection; False if it could not start here.

        A call that could not start (the connection is draining or failed before the call got a
        stream) never reached the server; the transport moves it to a new connection. A call
        above the peer's MAX_CONCURRENT_STREAMS waits here for a slot up to its deadline.
        """
        return self._operate(call, deadline, self._run_locked)

    def open(self, call: ClientCall, deadline: Optional[float]) -> bool:
        """Start a call on this connection and write what its request has queued.

        False if it could not start here (see :meth:`run`); otherwise the call is open or, if
        it ended already, has its status.
        """

        def open_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            self._make_wakeable_locked()  # the caller holds the call: it can end it any time
            return self._open_locked(call, deadline)

        return self._operate(call, deadline, open_locked)

    def send(
        self, call: ClientCall, framed: wire.Framed, last: bool, deadline: Optional[float]
    ) -> bool:
        """Queue one request message and wait until the connection has framed all of it; False
        if it ended.

        The wait bounds memory: a sender never gets ahead of the peer's flow-control window by
        more than the message it is sending.
        """

        def send_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            self.protocol.send_message(call, framed, last)
            if self._keepalive is not None:
                self._keepalive.data_sent()
            self._settle([])
            self._write_request_locked(call, deadline)
            return not call.done

        return self._operate(call, deadline, send_locked)

    def close_request(self, call: ClientCall, deadline: Optional[float]) -> None:
        """End the request stream (END_STREAM) after the messages already sent."""

        def close_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            self.protocol.close_request(call)
            self._settle([])
            self._write_request_locked(call, deadline)
            return True

        self._operate(call, deadline, close_locked)

    def receive(self, call: ClientCall, deadline: Optional[float]) -> Optional[Message]:
        """The next response message, waiting for it; None once the call has ended."""
        taken: List[Optional[Message]] = [None]

        def receive_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            self._wait(lambda: call.done or bool(call.messages_waiting), deadline, call)
            taken[0] = self.protocol.take_message(call)
            self._settle([])
            self._after_call_locked(call)
            return True

        self._operate(call, deadline, receive_locked)
        return taken[0]

    def wait_for_headers(self, call: ClientCall, deadline: Optional[float]) -> None:
        """Wait until the response headers arrived or the call ended."""

        def headers_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            self._wait(lambda: call.done or call.response_head is not None, deadline, call)
            return True

        self._operate(call, deadline, headers_locked)

    def wait_done(
        self, call: ClientCall, deadline: Optional[float], timeout: Optional[float] = None
    ) -> None:
        """Wait until the call has its status (messages not taken stay queued).

        ``timeout`` bounds only this wait: unlike the call's ``deadline`` it does not end the
        call when it passes.
        """

        def done_locked(call: ClientCall, deadline: Optional[float]) -> bool:
            if timeout is not None:
                until = time.monotonic() + timeout
                if deadline is None or until < deadline:
                    self._wait(lambda: call.done, until, None)
                    return True
            self._wait(lambda: call.done, deadline, call)
            self._after_call_locked(call)
            return True

        self._operate(call, deadline, done_locked)

    def _operate(
        self,
        call: ClientCall,
        deadline: Optional[float],
        operation: Callable[[ClientCall, Optional[float]], bool],
    ) -> bool:
        """Run ``operation`` under the lock, then write what it queued.

        Whatever interrupts a waiting thread (KeyboardInterrupt and the like) cancels its call
        first, so no stream is left open behind it (PROTOCOL-HTTP2.md, Errors).
        """
        self._local.call, self._local.deadline = call, deadline
        try:
            with self._lock:
                try:
                    result = operation(call, deadline)
                except BaseException:
                    if not call.done:
                        self._settle(self.protocol.cancel(call, CANCELLED))
                    raise
            self._drain_outbox()
        finally:
            self._local.call = self._local.deadline = None
        return result

    def _open_locked(self, call: ClientCall, deadline: Optional[float]) -> bool:
        if self._used and not self._reading and self.protocol.idle:
            self._peek()
        self._used = True
        self._wait(
            lambda: call.done or self.protocol.can_start_call() or not self.usable, deadline, None
        )
        if call.done:  # cancelled while it waited for a stream slot
            return True
        if not self.protocol.can_start_call():
            if self.usable and passed(deadline):
                self._settle(self.protocol.abandon(call, deadline_status()))
                return True
            return False
        keepalive = self._keepalive
        if keepalive is not None:
            keepalive.call_starting(time.monotonic())  # may queue a PING before the HEADERS
        self._settle(self.protocol.start_call(call))
        if keepalive is not None:
            self._arm_keepalive_locked()
        # Only now: "used and idle" read by another thread between ``_used = True`` and
        # ``start_call`` would call a connection that has not had a call yet stale, and closing
        # it would end the calls that are starting on it "Channel closed!" (seen on PyPy).
        self._started = True
        return True

    def _run_locked(self, call: ClientCall, deadline: Optional[float]) -> bool:
        if not self._open_locked(call, deadline):
            return False
        self._write_request_locked(call, deadline)
        self._wait(lambda: call.done, deadline, call)
        self._after_call_locked(call)
        return True

    def _write_request_locked(self, call: ClientCall, deadline: Optional[float]) -> None:
        """Write the call's queued request, waiting for window while reading the socket.

        The deadline is checked on every round, not only while waiting for window: a peer that
        grants a large window and stops reading leaves the window open while every write times
        out, and the call must still end at its deadline rather than queue its whole request.
        """
        while not call.done and not self.protocol.write_request(call):
            self._settle([])
            if passed(deadline):
                self._settle(self.protocol.expire(call))
                break
            self._wait(lambda: call.done or self.protocol.window_available(call), deadline, call)
        self._settle([])

    def _after_call_locked(self, call: ClientCall) -> None:
        """Close a connection that can take no new call once its last call is over."""
        if call.done and not self.usable and self.protocol.idle:
            self._shutdown_locked()

    def make_wakeable(self) -> None:
        """A call that another thread may end (a future) is about to run here."""
        with self._lock:
            self._make_wakeable_locked()

    def _make_wakeable_locked(self) -> None:
        if self._waker is None and not self._closed:
            self._waker = Waker()

    def cancel(self, call: ClientCall, status: CallStatus) -> None:
        """End ``call`` from another thread: RST_STREAM(CANCEL) and ``status``.

        The thread running the call wakes up: from the condition variable, or, if it holds the
        reader role, from ``poll()`` through the waker. The peer does not answer RST_STREAM
        (RFC 9113 §6.4), so without the waker a reader with no deadline would wait for ever.
        """
        with self._lock:
            if not call.done:
                self._settle(self.protocol.abandon(call, status))
            self._changed.notify_all()
            self._wake_reader_locked()
        self._drain_outbox()

    def expire_if_overdue(self, call: ClientCall) -> None:
        """End ``call`` DEADLINE_EXCEEDED now if its deadline passed and nobody noticed yet."""
        if call.done or not passed(call.deadline):
            return
        with self._lock:
            if not call.done:
                self._settle(self.protocol.expire(call))
                self._wake_reader_locked()
        self._drain_outbox()

    def _wake_reader_locked(self) -> None:
        """A call ended on this thread: a reader blocked in ``poll()`` looks at its call again."""
        if self._reading and self._waker is not None:
            self._waker.wake()

    def _wait(
        self, ready: Callable[[], bool], deadline: Optional[float], call: Optional[ClientCall]
    ) -> None:
        """Wait (lock held) until ``ready()``, reading the socket if nobody else is.

        Reading while waiting is what lets WINDOW_UPDATEs, SETTINGS and PINGs arrive while a
        sender is blocked on the window; without it two peers that both wait for window would
        deadlock. When the deadline passes the call is cancelled with RST_STREAM(CANCEL). The
        thread that reads also enforces the deadlines of calls nobody is waiting on (a response
        stream the application stopped reading), so their streams do not outlive them.
        """
        while not ready():
            if self.protocol.failure is not None or self._closed:
                return
            timeout: Optional[float] = None
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    if call is not None:
                        self._settle(self.protocol.expire(call))
                    return
            if self._reading:
                self._changed.wait(timeout)
                continue
            others = self.protocol.next_deadline()
            read_timeout = timeout
            if others is not None:
                until_others = max(0.0, others - time.monotonic())
                read_timeout = until_others if timeout is None else min(timeout, until_others)
            self._reading = True
            self._lock.release()
            try:
                self._drain_outbox()
                data, error = self._read(read_timeout)
            finally:
                self._lock.acquire()
                self._reading = False
            self._absorb(data, error)
            if others is not None and others <= time.monotonic():
                self._settle(self.protocol.expire_overdue())
                self._changed.notify_all()

    def _read(self, timeout: Optional[float]) -> Any:
        """One ``recv()`` without the lock: (data, None); (None, None) on timeout or when woken
        (:meth:`_wake_reader_locked`); (None, error)."""
        try:
            if (timeout is not None or self._waker is not None) and not self._readable(timeout):
                return None, None
            return self._recv(), None
        except OSError as exc:
            return None, exc

    def _recv(self) -> bytes:
        data = self._sock.recv(self._read_size)
        self._read_size = sockets.next_read_size(len(data))
        return data

    def _readable(self, timeout: Optional[float]) -> bool:
        """The socket has bytes (or EOF) within ``timeout`` (None: no limit); False when the
        time passed or the waker woke this thread first (reader role, or the lock held)."""
        if self._tls_pending is not None and self._tls_pending():
            return True  # TLS already holds bytes that poll() on the descriptor cannot see
        waker = self._waker
        wake_fd = -1 if waker is None else waker.fd
        if hasattr(select, "poll"):
            if self._poller is None:
                self._poller = select.poll()
                self._poller.register(self._sock, select.POLLIN)
            if waker is not None and not self._poller_wakes:
                self._poller.register(wake_fd, select.POLLIN)
                self._poller_wakes = True
            wait_ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
            ready = [fd for fd, _ in self._poller.poll(wait_ms)]
        else:
            watched = [self._sock.fileno()] + ([wake_fd] if waker is not None else [])
            ready, _, _ = select.select(watched, [], [], timeout)
        if waker is not None and wake_fd in ready:
            waker.clear()
            return len(ready) > 1
        return bool(ready)

    def _peek(self) -> None:
        """Before reusing an idle connection, take in what arrived meanwhile (GOAWAY, EOF, PING).

        Nobody reads an idle connection, so a server that went away since the last call is only
        noticed here; noticing it before sending lets the call go to a new connection instead of
        failing: after a lost connection or a GOAWAY the next call reconnects.
        """
        self._take_in_locked(lambda: self.usable)

    def _take_in_locked(self, more: Callable[[], bool]) -> None:
        """Read and absorb what the socket holds already, without waiting, while ``more()``.

        Nobody read these bytes as they came: the keepalive hears of them as late
        (:meth:`minigrpc.driver.client_keepalive.ConnectionKeepalive.received`).  Every PING
        goes out right after such a take-in (the timer's, and a call's, which peeks first),
        so what is found here arrived after it."""
        # Only while nobody holds the reader role (checked again after every _absorb(), which
        # may release the lock to write): one poll()/recv() per socket at a time.
        while more() and not self._reading:
            try:
                if not self._readable(0):
                    return
                data, error = self._recv(), None
            except OSError as exc:
                data, error = None, exc
            self._absorb(data, error, late=True)

    def watch(self, watched: Callable[[], bool]) -> None:
        """Read this connection in the background while ``watched()`` (the channel has
        connectivity subscribers), so that EOF, a reset or a GOAWAY that arrives while no call
        runs changes the channel's state at once, as grpcio reports it.

        The watch thread is one more reader among the calls' threads (:meth:`_wait`: one reads,
        the others wait for what it reads), so calls are unaffected.  It looks at ``watched()``
        at least every :data:`WATCH_INTERVAL` seconds and ends when it turns False or the
        connection ends.
        """
        with self._lock:
            if self._watching or self._closed:
                return
            self._watching = True
        threading.Thread(
            target=self._watch, args=(watched,), name="minigrpc-watch", daemon=True
        ).start()

    def _watch(self, watched: Callable[[], bool]) -> None:
        with self._lock:
            try:
                while watched() and not self._closed and self.protocol.failure is None:
                    self._wait(
                        lambda: self._closed or self.protocol.failure is not None,
                        time.monotonic() + WATCH_INTERVAL,
                        None,
                    )
            finally:
                self._watching = False
        self._drain_outbox()

    def _absorb(
        self, data: Optional[bytes], error: Optional[BaseException], late: bool = False
    ) -> None:
        """Feed one read result to the protocol (lock held), flush, and wake every waiter;
        ``late``: the bytes waited in the socket while nobody read it."""
        if error is not None:
            self._settle(self.protocol.socket_lost(os_error_text(error)))
        elif data == b"":
            # After a TCP reset the kernel reports ECONNRESET once: to a write, if one came first.
            reset = self._write_error
            text = os_error_text(reset) if isinstance(reset, ConnectionResetError) else None
            self._settle(self.protocol.socket_lost(text))
        elif data is not None:
            if self._tracer is not None:
                self._tracer.received(data)
            if self._keepalive is not None:
                self._keepalive.received(time.monotonic(), late)
            self._settle(self.protocol.receive_data(data))
        if self.protocol.failure is not None:
            self._shutdown_locked()
        self._release_socket_if_closed()
        self._changed.notify_all()

    def _settle(self, events: Sequence[CallEvent]) -> None:
        """After protocol work (lock held): queue the connection's output and act on the
        protocol's events.

        Every event wakes the threads waiting on this connection (for a call's headers, a
        message, its end, or send window); a failed connection is shut down, and a GOAWAY or a
        failure is reported to the channel's connectivity watcher.
        """
        data = self.protocol.data_to_send()
        if data and self._write_error is None:
            self._outbox.append(data)
        if events:
            for event in events:
                if isinstance(event, ConnectionFailed):
                    self._shutdown_locked()
                    self._report_unusable()
                elif isinstance(event, GoAwayReceived):
                    _LOG.debug("%s sent GOAWAY %s", self.target.display, event)
                    if self._keepalive is not None:
                        self._keepalive.goaway_received(event.error_code, event.debug_data)
                    self._report_unusable()
            self._changed.notify_all()
        if self._outbox and not self._writing:
            # Write now; the lock is released during the send (writer role).
            self._write_locked()

    # -- keepalive (gRFC A8; minigrpc.driver.client_keepalive) -----------------------------

    def _arm_keepalive_locked(self) -> None:
        """(Re)arm the keepalive timer when the keepalive wants it sooner than it is armed."""
        assert self._keepalive is not None
        if not self._closed:
            self._keepalive.arm(time.monotonic(), self._start_keepalive_timer)

    def _start_keepalive_timer(self, delay: float) -> TimerHandle:
        return CLIENT_TIMERS.call_later(delay, self._keepalive_due)

    def _keepalive_due(self) -> None:
        """The keepalive timer went off: ping, or give the connection up.

        What arrived while nobody read the socket (an idle connection, or a call whose
        application is not reading) is taken in first: it is life, and only the reader knows.
        This runs on the timer thread every blocking connection shares, so nothing here waits
        for the peer: reads take what the socket holds, and writes what it takes at once (the
        rest stays queued for the next writer; a peer that takes nothing answers no PING and
        is found dead at the timeout).
        """
        keepalive = self._keepalive
        assert keepalive is not None
        self._local.at_once = True
        try:
            with self._lock:
                if self._closed:
                    return
                self._take_in_locked(lambda: not self._closed and self.protocol.failure is None)
                if self._closed or self.protocol.failure is not None:
                    return
                events = keepalive.on_timer(time.monotonic())
                if self.protocol.failure is not None:
                    self._send_last_words_locked()  # the GOAWAY, if the socket takes it at once
                self._settle(events)
                self._arm_keepalive_locked()
            self._drain_outbox()
        finally:
            self._local.at_once = False

    def _report_unusable(self) -> None:
        if self._on_unusable is not None:
            self._on_unusable()

    def _write_locked(self) -> None:
        """Write the outbox with the lock released, keeping frame order (writer role)."""
        self._writing = True
        try:
            while self._outbox and not self._closed and self._write_error is None:
                chunk = b"".join(self._outbox) if len(self._outbox) > 1 else self._outbox[0]
                self._outbox.clear()
                self._lock.release()
                try:
                    error = self._send(chunk)
                finally:
                    self._lock.acquire()
                if isinstance(error, _WriteTimeout):
                    # This thread's deadline passed while the peer was slow to read. The bytes
                    # not yet written go back to the front of the outbox (frame order is kept,
                    # nothing is torn) and the next writer carries on; this thread returns to
                    # end its own call DEADLINE_EXCEEDED (PROTOCOL-HTTP2.md, Client Cancellation).
                    self._outbox.insert(0, error.unsent)
                    break
                elif error is not None:
                    # The peer closed or reset the connection. Its response may still be
                    # waiting in our receive buffer (a server that answers and closes), so the
                    # calls are not failed here: reading continues until EOF or the reset,
                    # which also names the real cause. No new call starts here meanwhile.
                    self._write_error = error
                    self._outbox.clear()
                    self._changed.notify_all()
        finally:
            self._writing = False
            self._release_socket_if_closed()

    def _drain_outbox(self) -> None:
        """Write whatever other threads queued (called without the lock)."""
        with self._lock:
            if self._outbox and not self._writing:
                self._write_locked()

    def _send(self, data: bytes) -> Optional[BaseException]:
        """Write ``data`` (lock released); an error, or None once everything is written.

        With a deadline, the writer never blocks past it: ``send(MSG_DONTWAIT)`` and ``poll()``
        for room. Flow control bounds what we write, but not the kernel's buffer, so a peer that
        reads slowly (or not at all) could otherwise hold a caller beyond its deadline. What is
        left then comes back as :class:`_WriteTimeout` for the next writer to finish.
        """
        deadline = getattr(self._local, "deadline", None)
        if getattr(self._local, "at_once", False):
            deadline = 0.0  # the shared timer thread: what the socket takes now, no more
            if self._dontwait == 0 and not self._small_and_writable(data):
                return _WriteTimeout(data)  # a TLS record is written whole or not at all
        try:
            if deadline is None or self._dontwait == 0:
                self._sock.sendall(data)
                self._trace_sent(data)
                return None
            view = memoryview(data)
            while view:
                try:
                    view = view[self._sock.send(view, self._dontwait) :]
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._writable(left):
                        self._trace_sent(data[: len(data) - len(view)])
                        return _WriteTimeout(bytes(view))
        except OSError as exc:
            return exc
        self._trace_sent(data)
        return None

    def _trace_sent(self, data: bytes) -> None:
        if self._tracer is not None and data:
            self._tracer.sent(data)

    def _small_and_writable(self, data: bytes) -> bool:
        """``data`` is small and the socket has room for it now (where poll() exists)."""
        return len(data) <= _AT_ONCE_TLS and (not hasattr(select, "poll") or self._writable(0))

    def _writable(self, timeout: float) -> bool:
        poller = select.poll()
        poller.register(self._sock, select.POLLOUT)
        return bool(poller.poll(math.ceil(timeout * 1000)))

    # -- closing --------------------------------------------------------------------------

    def _shutdown_locked(self) -> None:
        """Stop the socket; a reader blocked in ``recv()`` wakes up with EOF."""
        if self._closed:
            return
        self._closed = True
        if self._keepalive is not None:
            self._keepalive.stop()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._release_socket_if_closed()

    def _release_socket_if_closed(self) -> None:
        """Close the file descriptor once shut down and no thread is inside recv()/send()."""
        if self._closed and not self._reading and not self._writing:
            self._sock.close()
            if self._waker is not None:
                self._waker.close()
                self._waker = None

    def close(self, status: Optional[CallStatus] = None) -> None:
        """Close the connection; calls still running end with ``status`` (CANCELLED by default).

        A GOAWAY(NO_ERROR) goes out first when it can, so the server sees a clean close.
        """
        with self._lock:
            if self._closed:
                return
            self.protocol.close(status or CHANNEL_CLOSED)
            self._send_last_words_locked()  # the GOAWAY, unless one went out already
            self._shutdown_locked()
            self._changed.notify_all()

    def _send_last_words_locked(self) -> None:
        """Write what the protocol queued (a closing GOAWAY) if the socket takes it at once:
        best effort and never blocking, so a peer that does not read gets no GOAWAY."""
        data = self.protocol.data_to_send()
        if data and not self._writing and not self._outbox and self._write_error is None:
            try:
                sent = self._sock.send(data, self._dontwait) if self._dontwait else 0
                self._trace_sent(data[:sent])
            except OSError:
                pass
