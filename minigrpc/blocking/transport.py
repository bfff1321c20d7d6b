"""The blocking client transport: a channel's connections, dialled, waited for and retried on
with sockets and threads.

:class:`BlockingTransport` carries out what the sans-IO core decides: a call's steps
(:mod:`minigrpc.driver.call_steps`: start, wait for the channel, back off, end) and the
channel's work (:mod:`minigrpc.driver.subchannel`: dial an address, resolve the name, retire a
connection, wake up when a backoff ends).  The decisions (which address, when to dial, which
backoff, when a call is retried, the channel's connectivity state) are all there, shared with
the asyncio transport; here is only how threads do them: a lock around the channel's state, a
condition variable for the calls waiting on it, a thread per dial or name lookup (neither runs
on a call's thread, so a slow address holds no call beyond its deadline), a timer on the
process's shared timer thread while a backoff runs, and a sleep (that a cancelled future cuts
short) for a call's own backoff.

Each connection is a :class:`~minigrpc.blocking.client_connection.BlockingClientConnection`.
"""

import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..driver.attempts import finished
from ..driver.call_steps import FINISH, SLEEP, START, WAIT, CallSteps
from ..driver.channel_core import TransportOptions
from ..driver.invocation import CANCELLED
from ..driver.subchannel import DIAL, RESOLVE, Subchannels, Work
from ..net.sockets import (
    ConnectFailed,
    DeadlineReached,
    dial_timeout_error,
    handshake_error,
    open_socket,
    resolve_name,
)
from ..protocol.client_protocol import ClientCall
from ..protocol.status import CallStatus
from ..protocol.targets import Target
from ..protocol.wire import Framed
from .client_connection import BlockingClientConnection
from .connectivity import ConnectivityWatch
from .timers import CLIENT_TIMERS, TimerHandle

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.invocation import Invocation
    from ..net.tls import ClientTLS

__all__ = ["BlockingTransport", "CallHandle"]

Attempt = Tuple[Optional[BlockingClientConnection], Optional[ClientCall]]


class BlockingTransport:
    """The channel's connections: dials, name lookups, waits, retries, backoff timers."""

    def __init__(
        self,
        subchannels: "Subchannels[BlockingClientConnection]",
        options: TransportOptions,
        tls: "Optional[ClientTLS]",
        connectivity: ConnectivityWatch,
    ) -> None:
        self.subchannels = subchannels
        self.options = options
        #: The TLS context and the name to verify, on a secure channel.
        self.tls = tls
        self._connectivity = connectivity
        #: Guards the subchannels (short holds, never across I/O); notified at each change.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        #: Wakes the subchannels when a backoff ends, on the shared timer thread.
        self._timer: Optional[TimerHandle] = None

    def steps(
        self, invocation: "Invocation", request: Optional[Framed], unary_response: bool
    ) -> CallSteps:
        """A new call's steps: its retries, its attempts' making, this channel's backoff.
        ``request`` is a unary request's message (None when the request streams)."""
        return invocation.new_steps(self.subchannels, self.options, request, unary_response)

    def guarded(self, decision: Callable[..., Any], *args: Any) -> Any:
        """Run one of a call's decisions (:class:`CallSteps`) under the lock: the channel's
        retry buffer and throttle are shared by the threads of all its calls."""
        with self._lock:
            return decision(*args)

    def new_condition(self) -> threading.Condition:
        """A condition variable on the lock :meth:`guarded` holds (a hedged call waits on its
        attempts' news with it: :mod:`minigrpc.blocking.hedge`)."""
        return threading.Condition(self._lock)

    def run(self, steps: CallSteps, handle: "Optional[CallHandle]" = None) -> ClientCall:
        """Run a unary call to its end; the returned call always has a status."""
        _connection, call = self.open(steps, handle, True)
        return call

    def open(
        self,
        steps: CallSteps,
        handle: "Optional[CallHandle]" = None,
        to_the_end: bool = False,
    ) -> Tuple[Optional[BlockingClientConnection], ClientCall]:
        """Open a call (``to_the_end``: run it to its end): its HEADERS (and any request it
        queued) are sent.  Returns the connection the call runs on (None when it ended before it
        had one) and the call, open or already ended."""
        connection, call = self._carry_out(steps, handle, to_the_end)
        if call is None:
            assert steps.status is not None
            call = finished(steps.new_attempt(), steps.status)
        return connection, call

    def try_to_connect(self) -> None:
        """``try_to_connect``: an IDLE channel starts connecting (in the background)."""
        self._report(self.subchannels.exit_idle)

    def _carry_out(
        self,
        steps: CallSteps,
        handle: "Optional[CallHandle]",
        to_the_end: bool,
    ) -> Attempt:
        """Do the steps until the call has an attempt that is its outcome (the call None: it
        ends without a stream, ``steps.status``)."""
        if handle is not None:
            handle.transport = self
        while True:
            if handle is not None and handle.cancelled:
                steps.cancel(handle.status)
            with self._lock:
                step = steps.next()
                version = self.subchannels.version
                work = self.subchannels.take_work()
            dial_here = _first_dial(work) if step is WAIT else None
            if work:
                self._do(work)
            if dial_here is not None:
                # This thread would only wait for the dial: it dials itself (no thread for a
                # channel's first call), and hands the dial on if its deadline comes first.
                self._dial(dial_here, steps.deadline)
            elif step is START:
                connection: BlockingClientConnection = steps.connection
                call = steps.new_attempt()
                if handle is not None and not handle.attach(connection, call):
                    self.guarded(steps.finish)
                    return None, finished(call, handle.status)
                deadline = steps.deadline
                if to_the_end:
                    started = connection.run(call, deadline)
                else:
                    started = connection.open(call, deadline)
                if started and self.guarded(steps.attempt_ended, call):
                    return connection, call
            elif step is WAIT:
                self._wait_for_change(version, steps.deadline, handle)
            elif step is SLEEP:
                if handle is not None:
                    handle.wake.wait(steps.delay)  # a cancel ends the backoff at once
                else:
                    time.sleep(steps.delay)
            else:
                assert step is FINISH
                return None, None

    def _wait_for_change(
        self, version: int, deadline: Optional[float], handle: "Optional[CallHandle]"
    ) -> None:
        """Wait until the channel changed since ``version`` (a dial or lookup ended, a backoff
        ran out, the channel closed), the deadline, or a cancel."""
        with self._changed:
            while self.subchannels.version == version and not (handle and handle.cancelled):
                timeout = None
                if deadline is not None:
                    timeout = deadline - time.monotonic()
                    if timeout <= 0:
                        return
                self._changed.wait(timeout)

    def wake(self) -> None:
        """Wake the calls waiting on the channel (one of them was cancelled)."""
        with self._changed:
            self._changed.notify_all()

    # -- the channel's work ---------------------------------------------------------------

    def _report(self, outcome: Callable[..., Any], *args: Any) -> Any:
        """Tell the subchannels what happened (``outcome(*args, now)``), wake the waiting calls,
        and carry out the work that follows."""
        with self._changed:
            result = outcome(*args, time.monotonic())
            work = self.subchannels.take_work()
            self._changed.notify_all()
        self._do(work)
        return result

    def _do(self, work: List[Work]) -> None:
        for item in work:
            if item.kind is DIAL:
                assert item.address is not None
                _spawn(self._dial, item.address, name="minigrpc-dial")
            elif item.kind is RESOLVE:
                _spawn(self._resolve, name="minigrpc-resolve")
            else:
                item.connection.retire()
        self._arm_timer()

    def _arm_timer(self) -> None:
        """Wake the subchannels when their next backoff ends (one timer at a time, on the
        process's shared timer thread, :data:`~minigrpc.blocking.timers.CLIENT_TIMERS`: a
        thousand channels backing off from a server that is down hold no thread each)."""
        with self._lock:
            due = self.subchannels.timer_due()
            if due is None:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = CLIENT_TIMERS.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
        self._report(self.subchannels.on_timer)

    def _resolve(self) -> None:
        """Look the channel's name up (every A and AAAA record) and report what came of it."""
        target = self.subchannels.target
        assert target is not None
        try:
            records = resolve_name(target.host, target.port)
        except ConnectFailed as exc:
            self._report(self.subchannels.resolve_failed, exc.details)
        else:
            self._report(self.subchannels.resolved, records)

    def _dial(self, address: Target, call_deadline: Optional[float] = None) -> None:
        """Dial ``address`` and report how it went (to the subchannels and the waiting calls).

        A call's thread that dials passes its deadline: when that comes first, or the thread is
        interrupted, the dial starts again on a thread of its own, as if the call had never
        carried it (a dial belongs to the channel, not to the call that happened to start it).
        """
        connect_deadline = time.monotonic() + self.options.connect_timeout
        deadline = connect_deadline
        if call_deadline is not None and call_deadline < connect_deadline:
            deadline = call_deadline
        try:
            sock = self._connect(address, deadline)
        except ConnectFailed as exc:
            self._report(self.subchannels.dial_failed, address, exc.details)
            return
        except DeadlineReached:
            if deadline is not connect_deadline:
                _spawn(self._dial, address, name="minigrpc-dial")
                return
            self._report(self.subchannels.dial_failed, address,
                         dial_timeout_error(address).details)
            return
        except BaseException:
            _spawn(self._dial, address, name="minigrpc-dial")
            raise

        def unusable() -> None:
            self._report(self.subchannels.connection_lost, connection)

        connection = BlockingClientConnection(address, sock, self.options, unusable)
        if not self._report(self.subchannels.dialled, address, connection):
            connection.close()
        elif self._connectivity.watched:
            connection.watch(lambda: self._connectivity.watched)

    def _connect(self, address: Target, deadline: float) -> Any:
        """A connected socket; on a secure channel, with its TLS handshake done."""
        sock = open_socket(address, deadline)
        if self.tls is None:
            return sock
        from ..net.tls import TLSSocket

        try:
            return TLSSocket.connect(
                sock, self.tls.context, self.tls.server_hostname, deadline, self.tls.session_cache
            )
        except socket.timeout:
            sock.close()
            raise DeadlineReached() from None
        except OSError as exc:
            sock.close()
            raise handshake_error(address, exc) from None

    def watch_connection(self) -> None:
        """The channel got its first subscriber: watch its connections while idle."""
        with self._lock:
            connections = list(self.subchannels.connections.values())
        for connection in connections:
            if connection.usable:
                connection.watch(lambda: self._connectivity.watched)

    def close(self) -> None:
        """Close the connections; running calls end CANCELLED ("Channel closed!", like
        grpcio)."""
        with self._changed:
            connections = self.subchannels.close()
            self._changed.notify_all()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        for connection in connections:
            connection.close()


def _first_dial(work: List[Work]) -> Optional[Target]:
    """The first address ``work`` says to dial, taken out of it (None if there is none)."""
    for index, item in enumerate(work):
        if item.kind is DIAL:
            del work[index]
            return item.address
    return None


def _spawn(target: Callable[..., None], *args: Any, name: str) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


class CallHandle:
    """Lets another thread cancel a call the transport is running (``Future.cancel()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Optional[BlockingClientConnection] = None
        self._call: Optional[ClientCall] = None
        self.status = CANCELLED
        self.cancelled = False
        #: Set on cancel, so a wait_for_ready backoff ends at once.
        self.wake = threading.Event()
        #: The transport running the call, whose waiting calls a cancel wakes.
        self.transport: Optional[BlockingTransport] = None
        #: Told of a cancel besides (a hedged call cancels its attempts).
        self.on_cancel: Optional[Callable[[CallStatus], Any]] = None

    def attach(self, connection: BlockingClientConnection, call: ClientCall) -> bool:
        """Record the attempt about to run; False if the call was cancelled already."""
        with self._lock:
            if self.cancelled:
                return False
            self._connection, self._call = connection, call
        connection.make_wakeable()
        return True

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            connection, call = self._connection, self._call
        self.wake.set()
        if self.on_cancel is not None:
            self.on_cancel(self.status)
        if self.transport is not None:
            self.transport.wake()
        if connection is not None and call is not None:
            connection.cancel(call, self.status)
