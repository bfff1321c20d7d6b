"""The blocking client transport: a channel's connections, dialled, waited for and retried on
with sockets and threads.

:class:`BlockingTransport` carries out a call's steps (:mod:`minigrpc.driver.call_steps`):
dial, wait for another thread's dial, start the call, back off, end it.  The decisions (when to
dial, which backoff, when a call is retried transparently, the channel's connectivity state)
are the steps' and the subchannel's, shared with the asyncio transport; here is only how a
thread does them: a lock around the channel's state, a condition variable for the threads
waiting on a dial, a sleep (that a cancelled future cuts short) for the backoff.

Each connection is a :class:`~minigrpc.blocking.client_connection.BlockingClientConnection`.
"""

import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from ..driver.attempts import finished
from ..driver.call_steps import DIAL, FINISH, SLEEP, START, WAIT, CallSteps
from ..driver.channel_core import TransportOptions
from ..driver.invocation import CANCELLED
from ..driver.subchannel import Subchannel
from ..net.sockets import ConnectFailed, DeadlineReached, handshake_error, open_socket
from ..protocol.client_protocol import ClientCall
from ..protocol.targets import Target
from ..protocol.wire import Framed
from .client_connection import BlockingClientConnection
from .connectivity import ConnectivityWatch

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.invocation import Invocation
    from ..net.tls import ClientTLS

__all__ = ["BlockingTransport", "CallHandle"]

Attempt = Tuple[Optional[BlockingClientConnection], Optional[ClientCall]]


class BlockingTransport:
    """The channel's connections: lazy connect, reconnect, wait-for-ready, transparent retry."""

    def __init__(
        self,
        target: Target,
        options: TransportOptions,
        tls: "Optional[ClientTLS]",
        subchannel: "Subchannel[BlockingClientConnection]",
        connectivity: ConnectivityWatch,
    ) -> None:
        self.target = target
        self.options = options
        #: The TLS context and the name to verify, on a secure channel.
        self.tls = tls
        self.subchannel = subchannel
        self._connectivity = connectivity
        #: Guards the subchannel (short holds, never across I/O); notified when a dial ends.
        self._lock = threading.Lock()
        self._dial_ended = threading.Condition(self._lock)

    def steps(
        self, invocation: "Invocation", request: Optional[Framed], unary_response: bool
    ) -> CallSteps:
        """A new call's steps: its retries, its attempts' making, this channel's backoff.
        ``request`` is a unary request's message (None when the request streams)."""
        return invocation.new_steps(self.subchannel, self.options, request, unary_response)

    def guarded(self, decision: Callable[..., Any], *args: Any) -> Any:
        """Run one of a call's decisions (:class:`CallSteps`) under the lock: the channel's
        retry buffer and throttle are shared by the threads of all its calls."""
        with self._lock:
            return decision(*args)

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

    def connect_until_ready(self) -> None:
        """``try_to_connect``: dial, backing off between failures, until READY or closed."""
        steps = CallSteps(self.subchannel, self.options, None, True, connect_only=True)
        self._carry_out(steps, None, False)

    def _carry_out(
        self,
        steps: CallSteps,
        handle: "Optional[CallHandle]",
        to_the_end: bool,
    ) -> Attempt:
        """Do the steps until the call has an attempt that is its outcome (the call None: it
        ends without a stream, ``steps.status``)."""
        while True:
            if handle is not None and handle.cancelled:
                steps.cancel(handle.status)
            with self._lock:
                step = steps.next()
            if step is START:
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
            elif step is DIAL:
                self._dial(steps)
            elif step is WAIT:
                self._wait_for_dial(steps.deadline)
            elif step is SLEEP:
                if handle is not None:
                    handle.wake.wait(steps.delay)  # a cancel ends the backoff at once
                else:
                    time.sleep(steps.delay)
            elif step is FINISH:
                return None, None
            else:  # DONE: connected
                return steps.connection, None

    def _dial(self, steps: CallSteps) -> None:
        """Dial for the channel and report how it went to the steps (and the waiting threads)."""
        if steps.retired is not None:
            steps.retired.close()
        try:
            sock = self._connect(steps.deadline)
        except ConnectFailed as exc:
            self._report(steps.dial_failed, exc.details)
            return
        except DeadlineReached:
            self._report(steps.dial_timed_out)
            return
        except BaseException:
            self._report(steps.dial_abandoned)
            raise

        def unusable() -> None:
            with self._lock:
                self.subchannel.connection_unusable(connection)

        connection = BlockingClientConnection(self.target, sock, self.options, unusable)
        if not self._report(steps.dialled, connection):
            connection.close()
        elif self._connectivity.watched:
            connection.watch(lambda: self._connectivity.watched)

    def _report(self, outcome: Callable[..., Any], *args: Any) -> Any:
        with self._dial_ended:
            result = outcome(*args)
            self._dial_ended.notify_all()
        return result

    def _connect(self, deadline: Optional[float]) -> Any:
        """A connected socket; on a secure channel, with its TLS handshake done."""
        sock = open_socket(self.target, deadline)
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
            raise handshake_error(self.target, exc) from None

    def _wait_for_dial(self, deadline: Optional[float]) -> None:
        """Wait until the dial another thread runs has ended, or ``deadline``."""
        with self._dial_ended:
            if self.subchannel.dialling:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._dial_ended.wait(timeout)

    def watch_connection(self) -> None:
        """The channel got its first subscriber: watch the current connection while idle."""
        connection = self.subchannel.connection
        if connection is not None and connection.usable:
            connection.watch(lambda: self._connectivity.watched)

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!", like grpcio)."""
        connection = self._report(self.subchannel.close)
        if connection is not None:
            connection.close()


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
        if connection is not None and call is not None:
            connection.cancel(call, self.status)
