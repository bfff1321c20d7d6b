"""Blocking socket transport for the client: one HTTP/2 connection per channel, for all threads.

:class:`ClientConnection` owns a socket and a
:class:`~minigrpc.client_protocol.ClientConnectionProtocol` behind one lock (h2 is not
thread-safe; grpc-wire.md §7, pitfall 6). There is no reader thread: a thread that needs
something from the server (a response, send window, a free stream slot) takes the *reader role*
if nobody holds it, reads the socket without the lock, feeds the bytes to the protocol under the
lock, flushes what h2 queued (ACKs, WINDOW_UPDATEs, PING replies) and wakes every waiter. Other
threads wait on a condition variable and take over the role when the reader's own call is done.
So the one-shot path (connect, one call, close) starts no thread at all and costs one
``connect()``, one ``send()`` (preface, SETTINGS, WINDOW_UPDATE, HEADERS and DATA together) and
the ``recv()`` calls the response needs (issue 2 §4).

Writes go through an outbox: frames are taken from h2 under the lock, in order, and written by
whichever thread holds the *writer role*, without the lock. A thread blocked in ``send()`` (the
peer is slow to read) therefore never stops another thread from reading, which is what keeps two
peers that are both blocked on writing from deadlocking (grpc-wire.md §6, Sending).

:class:`Transport` is the channel's view: it connects lazily, replaces a connection after a GOAWAY
or a failure, waits for a connection when ``wait_for_ready`` is set (with gRPC's connection
backoff, ``doc/connection-backoff.md``), and retries a call once, transparently, when the server
provably never processed it (REFUSED_STREAM or above a GOAWAY's last-stream-id; grpc-wire.md §5).
"""

import logging
import math
import os
import select
import socket
import threading
import time
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from . import http2, wire
from .client_protocol import (
    DEADLINE_EXCEEDED_DETAILS,
    CallFinished,
    ClientCall,
    ClientConnectionProtocol,
    Header,
)
from .status import Status, StatusCode
from .targets import Target

_LOG = logging.getLogger("minigrpc.transport")


class TransportOptions(NamedTuple):
    """What a channel's options mean for its connections (see :mod:`minigrpc.channel`)."""

    max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
    stream_window: int = http2.DEFAULT_STREAM_WINDOW
    connection_window: int = http2.DEFAULT_CONNECTION_WINDOW
    max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE
    #: Largest response header block / trailers per call (grpc-wire.md §6); None: no limit.
    max_header_list_size: Optional[int] = http2.CALL_MAX_HEADER_LIST_SIZE
    #: gRPC connection backoff (connection-backoff.md): used only while wait_for_ready waits.
    initial_backoff: float = 1.0
    max_backoff: float = 120.0
    backoff_multiplier: float = 1.6
    backoff_jitter: float = 0.2


#: Non-blocking flag for one ``send()`` on a blocking socket (Linux, macOS); 0 where missing.
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0) if hasattr(select, "poll") else 0


class _WriteTimeout(OSError):
    """The peer did not read before the writing thread's deadline; ``unsent`` is what is left."""

    def __init__(self, unsent: bytes) -> None:
        super().__init__("timed out writing to the server")
        self.unsent = unsent


class ConnectFailed(Exception):
    """The connection could not be established; ``details`` reads like grpc-go's."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self.details = details


class DeadlineReached(Exception):
    """The call's deadline passed before a connection was ready."""


def os_error_text(error: BaseException) -> str:
    """An OS error the way Go prints it: the lower-case C strerror (``connection refused``)."""
    if isinstance(error, OSError) and error.errno:
        text = os.strerror(error.errno)
        return text[:1].lower() + text[1:]
    if isinstance(error, socket.gaierror) and error.args:
        return str(error.args[-1]).lower()
    return str(error) or type(error).__name__


def _dial_error(target: Target, error: BaseException, op: str = "connect") -> ConnectFailed:
    """grpc-go's wording: ``connection error: desc = "transport: Error while dialing: …"``."""
    return ConnectFailed(
        'connection error: desc = "transport: Error while dialing: '
        f'dial {target.dial_text}: {op}: {os_error_text(error)}"'
    )


def open_socket(target: Target, deadline: Optional[float]) -> socket.socket:
    """Connect to ``target``; raise ConnectFailed (UNAVAILABLE) or DeadlineReached.

    TCP targets may name a host: every address it resolves to is tried in order. The socket is
    left blocking (writes are bounded by flow control; reads wait in ``poll()`` with the call's
    deadline) and TCP_NODELAY is set, since gRPC writes whole frames and waits for answers.
    """
    candidates: List[Tuple[int, Any]]
    if target.family == socket.AF_UNIX:
        candidates = [(socket.AF_UNIX, target.address)]
    else:
        assert isinstance(target.address, tuple)
        host, port = target.address
        try:
            infos = socket.getaddrinfo(host, port, target.family, socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConnectFailed(
                'connection error: desc = "transport: Error while dialing: '
                f'dial tcp: lookup {host}: {os_error_text(exc)}"'
            ) from None
        candidates = [(info[0], info[4]) for info in infos]
    last_error: Optional[BaseException] = None
    for family, address in candidates:
        timeout = None
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise DeadlineReached()
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.settimeout(None)
        except socket.timeout:
            sock.close()
            raise DeadlineReached() from None
        except OSError as exc:
            sock.close()
            last_error = exc
            continue
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    assert last_error is not None
    raise _dial_error(target, last_error)


def _make_tracer(peer: str) -> Any:
    """The frame tracer for a new connection, or None; cheap when tracing is off (issue 2 §5)."""
    if not os.environ.get("MINIGRPC_TRACE") and not logging.getLogger("minigrpc.wire").isEnabledFor(
        logging.DEBUG
    ):
        return None
    try:
        from . import trace
    except ImportError:  # pragma: no cover - trace ships with minigrpc
        return None
    return trace.tracer_for("client", peer)


class ClientConnection:
    """One HTTP/2 connection: a socket, its protocol state, a lock and the reader/writer roles."""

    def __init__(self, target: Target, sock: socket.socket, options: TransportOptions) -> None:
        self.target = target
        self._sock = sock
        self.protocol = ClientConnectionProtocol(
            max_receive_message_length=options.max_receive_message_length,
            stream_window=options.stream_window,
            connection_window=options.connection_window,
            max_frame_size=options.max_frame_size,
            max_header_list_size=options.max_header_list_size,
        )
        self.protocol.initiate()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._reading = False
        self._writing = False
        self._outbox: List[bytes] = []
        #: Set when a write failed (peer closed or reset); reads go on until EOF (see _send).
        self._write_error: Optional[BaseException] = None
        self._used = False
        self._closed = False
        self._tracer = _make_tracer(target.display)
        self._poller: Any = None
        #: Size of the next ``recv()`` (:func:`minigrpc.http2.next_read_size`); reader role only.
        self._read_size = http2.SMALL_READ
        #: The call and deadline of the thread inside run(), for deadline-bounded writes.
        self._local = threading.local()

    # -- state ----------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """New calls may go here (no GOAWAY, no failure, not closed)."""
        return not self._closed and not self.protocol.draining and self._write_error is None

    @property
    def stale(self) -> bool:
        """Used, now idle, and the server never sent its SETTINGS: do not reuse it.

        A call on it already waited for the handshake in vain (a server that accepts but never
        speaks HTTP/2); grpc-go would not have used such a connection at all, so the next call
        starts afresh. Calls that start together on a new connection still share it.
        """
        return self._used and self.protocol.idle and not self.protocol.settings_received

    @property
    def peer_accept_encodings(self) -> Optional[frozenset]:
        return self.protocol.peer_accept_encodings

    # -- the call -------------------------------------------------------------------------

    def run(self, call: ClientCall, deadline: Optional[float]) -> bool:
        """Run ``call`` to its end on this connection; False if it could not start here.

        A call that could not start (the connection is draining or failed before the call got a
        stream) never reached the server; the transport moves it to a new connection. A call
        above the peer's MAX_CONCURRENT_STREAMS waits here for a slot (grpc-wire.md §7, pitfall
        3) up to its deadline.
        """
        self._local.call, self._local.deadline = call, deadline
        try:
            with self._lock:
                try:
                    if not self._run_locked(call, deadline):
                        return False
                except BaseException:
                    # KeyboardInterrupt and the like: do not leave the stream open (§5).
                    if not call.done:
                        cancelled = Status(
                            StatusCode.CANCELLED, "Locally cancelled by application!"
                        )
                        self._settle(self.protocol.cancel(call, cancelled))
                    raise
            self._drain_outbox()
        finally:
            self._local.call = self._local.deadline = None
        return True

    def _run_locked(self, call: ClientCall, deadline: Optional[float]) -> bool:
        if self._used and not self._reading and self.protocol.idle:
            self._peek()
        self._used = True
        self._wait(
            lambda: call.done or self.protocol.can_start_call() or not self.usable, deadline, None
        )
        if call.done:  # cancelled while it waited for a stream slot
            return True
        if not self.protocol.can_start_call():
            if self.usable and _expired(deadline):
                self._settle(self.protocol.abandon(call, _deadline_status()))
                return True
            return False
        self._settle(self.protocol.start_call(call))
        while not call.done and not call.request_complete:
            self._wait(lambda: call.done or self.protocol.window_available(call), deadline, call)
            if not call.done:
                self.protocol.send_request(call)
                self._settle([])
        self._wait(lambda: call.done, deadline, call)
        if not self.usable and self.protocol.idle:
            self._shutdown_locked()
        return True

    def cancel(self, call: ClientCall, status: Status) -> None:
        """End ``call`` from another thread: RST_STREAM(CANCEL) and ``status`` (grpc-wire.md §5).

        The thread running the call wakes up; if it holds the reader role it leaves it after
        its next read, which any traffic on the connection provides.
        """
        with self._lock:
            if not call.done:
                self._settle(self.protocol.abandon(call, status))
            self._changed.notify_all()

    def _wait(
        self, ready: Callable[[], bool], deadline: Optional[float], call: Optional[ClientCall]
    ) -> None:
        """Wait (lock held) until ``ready()``, reading the socket if nobody else is.

        Reading while waiting is what lets WINDOW_UPDATEs, SETTINGS and PINGs arrive while a
        sender is blocked on the window (grpc-wire.md §6, "Keep reading the socket"). When the
        deadline passes the call is cancelled with RST_STREAM(CANCEL) (§5).
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
            self._reading = True
            self._lock.release()
            try:
                self._drain_outbox()
                data, error = self._read(timeout)
            finally:
                self._lock.acquire()
                self._reading = False
            self._absorb(data, error)

    def _read(self, timeout: Optional[float]) -> Any:
        """One ``recv()`` without the lock: (data, None); (None, None) on timeout; (None, error)."""
        try:
            if timeout is not None and not self._readable(timeout):
                return None, None
            return self._recv(), None
        except OSError as exc:
            return None, exc

    def _recv(self) -> bytes:
        data = self._sock.recv(self._read_size)
        self._read_size = http2.next_read_size(len(data))
        return data

    def _readable(self, timeout: float) -> bool:
        if hasattr(select, "poll"):
            if self._poller is None:
                self._poller = select.poll()
                self._poller.register(self._sock, select.POLLIN)
            return bool(self._poller.poll(0 if timeout <= 0 else math.ceil(timeout * 1000)))
        readable, _, _ = select.select([self._sock], [], [], timeout)
        return bool(readable)

    def _peek(self) -> None:
        """Before reusing an idle connection, take in what arrived meanwhile (GOAWAY, EOF, PING).

        Nobody reads an idle connection, so a server that went away since the last call is only
        noticed here; noticing it before sending lets the call go to a new connection instead of
        failing (issue 2 §4: "after a lost connection or a GOAWAY the next call reconnects").
        """
        # Only while nobody holds the reader role (checked again after every _absorb(), which
        # may release the lock to write): one poll()/recv() per socket at a time.
        while self.usable and not self._reading:
            try:
                if not self._readable(0):
                    return
                data, error = self._recv(), None
            except OSError as exc:
                data, error = None, exc
            self._absorb(data, error)

    def _absorb(self, data: Optional[bytes], error: Optional[BaseException]) -> None:
        """Feed one read result to the protocol (lock held), flush, and wake every waiter."""
        if error is not None:
            self._settle(self.protocol.connection_lost(self._lost_details(error)))
        elif data == b"":
            # After a TCP reset the kernel reports ECONNRESET once: to a write, if one came first.
            reset = (
                self._write_error if isinstance(self._write_error, ConnectionResetError) else None
            )
            self._settle(self.protocol.connection_lost(self._lost_details(reset)))
        elif data is not None:
            if self._tracer is not None:
                self._tracer.received(data)
            self._settle(self.protocol.receive_data(data))
        if self.protocol.failure is not None:
            self._shutdown_locked()
        self._release_socket_if_closed()
        self._changed.notify_all()

    def _lost_details(self, error: Optional[BaseException]) -> str:
        """Why the connection ended, in the words grpc-go uses where it has some (§5)."""
        cause = "EOF" if error is None else os_error_text(error)
        if self.protocol.bytes_received == 0 or not self.protocol.settings_received:
            return f'connection error: desc = "error reading server preface: {cause}"'
        if error is None:
            return "connection closed before the response was complete"
        return f"connection lost before the response was complete: {cause}"

    def _settle(self, events: Sequence[object]) -> None:
        """After protocol work (lock held): queue h2's output and wake waiters if a call ended."""
        data = self.protocol.data_to_send()
        if data and self._write_error is None:
            self._outbox.append(data)
        if events and any(isinstance(event, CallFinished) for event in events):
            self._changed.notify_all()
        if self._outbox and not self._writing:
            # Write now; the lock is released during the send (writer role).
            self._write_locked()

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
                    # end its own call DEADLINE_EXCEEDED (grpc-wire.md §5).
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
        try:
            if deadline is None or _MSG_DONTWAIT == 0:
                self._sock.sendall(data)
                self._trace_sent(data)
                return None
            view = memoryview(data)
            while view:
                try:
                    view = view[self._sock.send(view, _MSG_DONTWAIT) :]
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
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._release_socket_if_closed()

    def _release_socket_if_closed(self) -> None:
        """Close the file descriptor once shut down and no thread is inside recv()/send()."""
        if self._closed and not self._reading and not self._writing:
            self._sock.close()

    def close(self, status: Optional[Status] = None) -> None:
        """Close the connection; calls still running end with ``status`` (CANCELLED by default).

        A GOAWAY(NO_ERROR) goes out first when it can, so the server sees a clean close.
        """
        with self._lock:
            if self._closed:
                return
            ending = status or Status(StatusCode.CANCELLED, "Channel closed!")
            for call in list(self.protocol.calls.values()):
                self.protocol.cancel(call, ending)
            if self.protocol.failure is None:
                try:
                    self.protocol.conn.close_connection()
                except Exception:  # h2 already closed (GOAWAY received): nothing to say
                    pass
                data = self.protocol.data_to_send()
                if data and not self._writing and not self._outbox and self._write_error is None:
                    # Best effort and never blocking: a peer that does not read gets no GOAWAY.
                    try:
                        sent = self._sock.send(data, _MSG_DONTWAIT) if _MSG_DONTWAIT else 0
                        self._trace_sent(data[:sent])
                    except OSError:
                        pass
                self.protocol.failure = "connection closed by the client"
            self._shutdown_locked()
            self._changed.notify_all()


def _expired(deadline: Optional[float]) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _deadline_status() -> Status:
    return Status(StatusCode.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)


class Transport:
    """The channel's connection manager: lazy connect, reconnect, transparent retry (§4, §5)."""

    def __init__(self, target: Target, options: TransportOptions) -> None:
        self.target = target
        self.options = options
        self._lock = threading.Lock()
        self._connection: Optional[ClientConnection] = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def peer_accepts(self, encoding: str) -> bool:
        """False only when the current server listed its encodings and ``encoding`` is not one
        of them (grpc-wire.md §2: never compress with an algorithm the peer left out)."""
        connection = self._connection
        accepted = connection.peer_accept_encodings if connection is not None else None
        return accepted is None or encoding in accepted

    def _connection_for(self, deadline: Optional[float]) -> ClientConnection:
        """The current usable connection, or a new one (lazy connect; reconnect after loss)."""
        timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=timeout):
            raise DeadlineReached()
        try:
            if self._closed:
                raise ConnectFailed("Channel closed!")
            connection = self._connection
            if connection is not None and connection.usable and not connection.stale:
                return connection
            if connection is not None and connection.protocol.idle:
                connection.close()
            sock = open_socket(self.target, deadline)
            connection = ClientConnection(self.target, sock, self.options)
            self._connection = connection
            return connection
        finally:
            self._lock.release()

    def call(
        self,
        request: bytes,
        make_headers: Callable[[Optional[float]], List[Header]],
        deadline: Optional[float],
        wait_for_ready: bool = False,
        handle: "Optional[CallHandle]" = None,
    ) -> ClientCall:
        """Run one unary call to its end; the returned call always has a status.

        ``make_headers(timeout)`` builds the header block for each attempt, so ``grpc-timeout``
        carries the time left when the attempt starts (grpc-wire.md §1.2).
        """
        retries_left = 1
        backoff = self.options.initial_backoff
        while True:
            if handle is not None and handle.cancelled:
                return _finished(request, handle.status)
            if self._closed:
                return _finished(request, Status(StatusCode.CANCELLED, "Channel closed!"))
            if _expired(deadline):
                return _finished(request, _deadline_status())
            try:
                connection = self._connection_for(deadline)
            except DeadlineReached:
                return _finished(request, _deadline_status())
            except ConnectFailed as exc:
                if not wait_for_ready or self._closed:
                    return _finished(request, Status(StatusCode.UNAVAILABLE, exc.details))
                if not self._back_off(backoff, deadline, handle):
                    return _finished(request, _deadline_status())
                backoff = min(backoff * self.options.backoff_multiplier, self.options.max_backoff)
                continue
            call = ClientCall(
                request=request, headers=[], deadline=deadline, header_factory=make_headers
            )
            if handle is not None and not handle.attach(connection, call):
                return _finished(request, handle.status)
            if not connection.run(call, deadline):
                continue  # never started here: the connection was draining; take a new one
            assert call.status is not None
            if call.retryable and retries_left:
                retries_left -= 1
                continue
            if (
                wait_for_ready
                and call.status.code is StatusCode.UNAVAILABLE
                and connection.protocol.bytes_received == 0
                and not self._closed
            ):
                # The server closed before saying anything: like a failed connect (§4).
                if not self._back_off(backoff, deadline, handle):
                    return _finished(request, _deadline_status())
                backoff = min(backoff * self.options.backoff_multiplier, self.options.max_backoff)
                continue
            return call

    def _back_off(
        self, backoff: float, deadline: Optional[float], handle: "Optional[CallHandle]" = None
    ) -> bool:
        """Sleep one backoff step (connection-backoff.md); False if the deadline comes first."""
        import random  # only a waiting wait_for_ready call needs it

        jitter = self.options.backoff_jitter
        delay = backoff * random.uniform(1 - jitter, 1 + jitter)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            delay = min(delay, left)
        if handle is not None:
            handle.wake.wait(delay)
        else:
            time.sleep(delay)
        return not _expired(deadline)

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!", like grpcio)."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class CallHandle:
    """Lets another thread cancel a call the transport is running (``Future.cancel()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Optional[ClientConnection] = None
        self._call: Optional[ClientCall] = None
        self.status: Status = Status(StatusCode.CANCELLED, "Locally cancelled by application!")
        self.cancelled = False
        #: Set on cancel, so a wait_for_ready backoff ends at once.
        self.wake = threading.Event()

    def attach(self, connection: ClientConnection, call: ClientCall) -> bool:
        """Record the attempt about to run; False if the call was cancelled already."""
        with self._lock:
            if self.cancelled:
                return False
            self._connection, self._call = connection, call
            return True

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            connection, call = self._connection, self._call
        self.wake.set()
        if connection is not None and call is not None:
            connection.cancel(call, self.status)


def _finished(request: bytes, status: Status) -> ClientCall:
    """A call that ended before it had a stream (deadline, connect failure)."""
    call = ClientCall(request=request, headers=[])
    call.status = status
    return call
