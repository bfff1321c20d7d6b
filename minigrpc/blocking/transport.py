"""The blocking client transport: a channel's connections, made, replaced and retried on.

:class:`Transport` is the channel's view: it connects lazily, replaces a connection after a GOAWAY
or a failure, waits for a connection when ``wait_for_ready`` is set (with gRPC's connection
backoff, ``doc/connection-backoff.md``), and retries a call once, transparently, when the server
provably never processed it (REFUSED_STREAM or above a GOAWAY's last-stream-id; docs/wire-rules.md,
"Deadlines and cancellation").

Each connection is a :class:`~minigrpc.blocking.client_connection.BlockingClientConnection`.
"""

import socket
import threading
import time
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from ..driver.attempts import BACK_OFF, RETRY_NOW, Attempts, deadline_status, finished
from ..driver.connectivity import ChannelConnectivity
from ..net.sockets import ConnectFailed, DeadlineReached, handshake_error, open_socket
from ..protocol import wire
from ..protocol.client_protocol import ClientCall, Header
from ..protocol.codes import Code
from ..protocol.status import CallStatus
from ..protocol.targets import Target
from .client_connection import CANCELLED_DETAILS, BlockingClientConnection, TransportOptions
from .connectivity import ConnectivityWatch

__all__ = ["CallHandle", "ClientTLS", "Transport"]


class ClientTLS(NamedTuple):
    """TLS settings of a secure channel's connections."""

    context: Any  # ssl.SSLContext
    #: The name the server's certificate must carry (SNI too): the target's host, or
    #: ``grpc.ssl_target_name_override``.
    server_hostname: str
    #: ``grpc.ssl_session_cache``: where sessions are kept to resume (a ``tls.SSLSessionCache``).
    session_cache: Any = None


class Transport:
    """The channel's connection manager: lazy connect, reconnect, transparent retry."""

    def __init__(
        self, target: Target, options: TransportOptions, tls: "Optional[ClientTLS]" = None
    ) -> None:
        self.target = target
        self.options = options
        #: The TLS context and the name to verify, on a secure channel.
        self.tls = tls
        self._lock = threading.Lock()
        self._connection: Optional[BlockingClientConnection] = None
        self._closed = False
        self.connectivity = ConnectivityWatch(self._connect_until_ready)
        self.connectivity.on_watched = self._watch_connection

    @property
    def closed(self) -> bool:
        return self._closed

    def peer_accepts(self, encoding: str) -> bool:
        """False only when the current server listed its encodings and ``encoding`` is not one
        of them (``doc/compression.md``: never compress with an algorithm the peer left out)."""
        connection = self._connection
        accepted = connection.peer_accept_encodings if connection is not None else None
        return accepted is None or encoding in accepted

    def _connection_for(self, deadline: Optional[float]) -> BlockingClientConnection:
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
            self.connectivity.set(ChannelConnectivity.CONNECTING)
            try:
                sock = self._dial(deadline)
            except ConnectFailed:
                self.connectivity.set(ChannelConnectivity.TRANSIENT_FAILURE)
                raise
            except DeadlineReached:
                self.connectivity.set(ChannelConnectivity.IDLE)
                raise
            connection = BlockingClientConnection(
                self.target, sock, self.options, self._connection_ended
            )
            self._connection = connection
            self.connectivity.set(ChannelConnectivity.READY)
            if self.connectivity.watched:
                connection.watch(lambda: self.connectivity.watched)
            return connection
        finally:
            self._lock.release()

    def _dial(self, deadline: Optional[float]) -> Any:
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

    def _watch_connection(self) -> None:
        """The channel got its first subscriber: watch the current connection while idle."""
        connection = self._connection
        if connection is not None and connection.usable:
            connection.watch(lambda: self.connectivity.watched)

    def _connection_ended(self, what: str) -> None:
        """A connection took its last call (GOAWAY) or failed: the channel is IDLE again."""
        self.connectivity.set(ChannelConnectivity.IDLE)

    def _connect_until_ready(self) -> None:
        """``try_to_connect``: dial, backing off between failures, until READY or closed."""
        attempts = self.attempts(None, True)
        while not self._closed:
            try:
                self._connection_for(None)
                return
            except (ConnectFailed, DeadlineReached):
                pass
            self._back_off(attempts)

    def call(
        self,
        request: wire.Framed,
        make_headers: Callable[[Optional[float]], List[Header]],
        deadline: Optional[float],
        wait_for_ready: bool = False,
        handle: "Optional[CallHandle]" = None,
    ) -> ClientCall:
        """Run one unary call to its end; the returned call always has a status.

        ``make_headers(timeout)`` builds the header block for each attempt, so ``grpc-timeout``
        carries the time left when the attempt starts.
        """

        def make_call() -> ClientCall:
            return ClientCall(request=request, deadline=deadline, header_factory=make_headers)

        _connection, call = self._attempt(make_call, deadline, wait_for_ready, handle, True)
        return call

    def open_stream(
        self,
        make_call: Callable[[], ClientCall],
        deadline: Optional[float],
        wait_for_ready: bool = False,
        handle: "Optional[CallHandle]" = None,
    ) -> "Tuple[Optional[BlockingClientConnection], ClientCall]":
        """Open a streaming call: its HEADERS (and any request it queued) are sent.

        Returns the connection the call runs on (None when it ended before it had one) and the
        call, open or already ended.  Attempts are made as for :meth:`call`.
        """
        return self._attempt(make_call, deadline, wait_for_ready, handle, False)

    def _attempt(
        self,
        make_call: Callable[[], ClientCall],
        deadline: Optional[float],
        wait_for_ready: bool,
        handle: "Optional[CallHandle]",
        to_the_end: bool,
    ) -> "Tuple[Optional[BlockingClientConnection], ClientCall]":
        """Find a connection and start (``to_the_end``: run) a call on it, retrying when safe.

        A call that provably never reached the server (the connection was draining before it
        got a stream, REFUSED_STREAM, a stream above a GOAWAY's last-stream-id) is retried once on
        a new connection, transparently. With ``wait_for_ready`` a failed connect, or a server
        that closed before saying anything, waits and tries again with gRPC's connection backoff
        (doc/connection-backoff.md) until the deadline.
        """
        attempts = self.attempts(deadline, wait_for_ready)
        while True:
            if handle is not None and handle.cancelled:
                return None, finished(make_call(), handle.status)
            ending = attempts.before_attempt(self._closed)
            if ending is not None:
                return None, finished(make_call(), ending)
            try:
                connection = self._connection_for(deadline)
            except DeadlineReached:
                return None, finished(make_call(), deadline_status())
            except ConnectFailed as exc:
                ending = attempts.after_connect_failure(exc.details, self._closed)
                if ending is not None:
                    return None, finished(make_call(), ending)
                self._back_off(attempts, handle)
                continue
            call = make_call()
            if handle is not None and not handle.attach(connection, call):
                return None, finished(call, handle.status)
            started = (
                connection.run(call, deadline) if to_the_end else connection.open(call, deadline)
            )
            if not started:
                continue  # never started here: the connection was draining; take a new one
            if not call.done:
                return connection, call
            verdict = attempts.after_attempt(call, connection.protocol.bytes_received, self._closed)
            if verdict == RETRY_NOW:
                continue
            if verdict == BACK_OFF:  # the server closed before saying anything
                self._back_off(attempts, handle)
                continue
            return connection, call

    def attempts(self, deadline: Optional[float], wait_for_ready: bool) -> Attempts:
        """A call's retry and backoff state, with this channel's backoff options."""
        options = self.options
        return Attempts(
            deadline,
            wait_for_ready,
            options.initial_backoff,
            options.max_backoff,
            options.backoff_multiplier,
            options.backoff_jitter,
        )

    @staticmethod
    def _back_off(attempts: Attempts, handle: "Optional[CallHandle]" = None) -> None:
        """Sleep one backoff step (a cancelled call wakes at once); the deadline ends it."""
        delay = attempts.next_delay()
        if delay is None:
            return
        if handle is not None:
            handle.wake.wait(delay)
        else:
            time.sleep(delay)

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!", like grpcio)."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        self.connectivity.set(ChannelConnectivity.SHUTDOWN)


class CallHandle:
    """Lets another thread cancel a call the transport is running (``Future.cancel()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Optional[BlockingClientConnection] = None
        self._call: Optional[ClientCall] = None
        self.status = CallStatus(Code.CANCELLED, CANCELLED_DETAILS)
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
