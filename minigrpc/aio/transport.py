"""The asyncio client transport: a channel's connections, dialled, waited for and retried on
from the event loop.

:class:`AsyncTransport` carries out a call's steps (:mod:`minigrpc.driver.call_steps`): dial,
wait for another task's dial, start the call, back off, end it.  The decisions (when to dial,
which backoff, when a call is retried transparently, the channel's connectivity state) are the
steps' and the subchannel's, shared with the blocking transport; here is only how the event loop
does them: ``loop.create_connection`` (with asyncio's TLS), a future the calls waiting for a dial
await, ``asyncio.sleep`` for the backoff.

Each connection is an :class:`~minigrpc.aio.client_connection.AsyncClientConnection`.
"""

import asyncio
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from ..driver.call_steps import DIAL, FINISH, SLEEP, START, WAIT, CallSteps
from ..driver.channel_core import TransportOptions
from ..driver.subchannel import Subchannel, reusable
from ..net.sockets import ConnectFailed, dial_error, handshake_error, lookup_error
from ..protocol.client_protocol import ClientCall
from ..protocol.targets import Target
from ..protocol.wire import Framed
from .client_connection import AsyncClientConnection

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.invocation import Invocation
    from ..net.tls import ClientTLS

__all__ = ["AsyncTransport"]

Attempt = Tuple[Optional[AsyncClientConnection], Optional[ClientCall]]


class AsyncTransport:
    """The channel's connections: lazy connect, reconnect, wait-for-ready, transparent retry."""

    def __init__(
        self,
        target: Target,
        options: TransportOptions,
        tls: "Optional[ClientTLS]",
        subchannel: "Subchannel[AsyncClientConnection]",
    ) -> None:
        self.target = target
        self.options = options
        self.tls = tls
        self.subchannel = subchannel
        #: Resolved when the dial that runs ends (None: no dial runs).
        self._dial_ended: Optional[asyncio.Future[None]] = None

    def steps(
        self, invocation: "Invocation", request: Optional[Framed], unary_response: bool
    ) -> CallSteps:
        """A new call's steps: its retries, its attempts' making, this channel's backoff.
        ``request`` is a unary request's message (None when the request streams)."""
        return invocation.new_steps(self.subchannel, self.options, request, unary_response)

    def ready_connection(self) -> Optional[AsyncClientConnection]:
        """The channel's connection if a call can start on it without waiting, else None (no
        connection yet, draining, stale, at the stream limit, or its write buffer is full)."""
        connection = self.subchannel.connection
        if connection is None or not reusable(connection) or not connection.can_start_now():
            return None
        return connection

    async def attempt(
        self,
        steps: CallSteps,
        to_the_end: bool,
        opened: Optional[Callable[[AsyncClientConnection, ClientCall], None]] = None,
    ) -> Attempt:
        """Do the steps until the call has an attempt that is its outcome: open (``to_the_end``:
        ended), or the call None when it ends without a stream (``steps.status``).  ``opened``
        hears of each attempt that got a stream."""
        while True:
            step = steps.next()
            if step is START:
                connection: AsyncClientConnection = steps.connection
                call = steps.new_attempt()
                if not await connection.open(call, steps.deadline):
                    continue  # never started here: the connection was draining
                if opened is not None:
                    opened(connection, call)
                if to_the_end:
                    await connection.wait_done(call, steps.deadline)
                if steps.attempt_ended(call):
                    return connection, call
            elif step is DIAL:
                await self._dial(steps)
            elif step is WAIT:
                await self._wait_for_dial(steps.deadline)
            elif step is SLEEP:
                await asyncio.sleep(steps.delay)
            elif step is FINISH:
                return None, None
            else:  # DONE: connected
                return steps.connection, None

    async def connect_until_ready(self) -> None:
        """``try_to_connect``: dial, backing off between failures, until READY or closed."""
        steps = CallSteps(self.subchannel, self.options, None, True, connect_only=True)
        await self.attempt(steps, False)

    async def _dial(self, steps: CallSteps) -> None:
        """Dial for the channel and report how it went to the steps (and the waiting calls)."""
        if steps.retired is not None:
            steps.retired.close()
        self._dial_ended = ended = asyncio.get_running_loop().create_future()
        try:
            connection = await self._connect(steps.deadline)
        except ConnectFailed as exc:
            steps.dial_failed(exc.details)
        except asyncio.TimeoutError:
            steps.dial_timed_out()
        except BaseException:
            steps.dial_abandoned()
            raise
        else:
            if not steps.dialled(connection):
                connection.close()
        finally:
            self._dial_ended = None
            ended.set_result(None)

    async def _wait_for_dial(self, deadline: Optional[float]) -> None:
        """Wait until the dial another task runs has ended, or ``deadline``."""
        ended = self._dial_ended
        if ended is not None:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            await asyncio.wait((ended,), timeout=timeout)

    async def _connect(self, deadline: Optional[float]) -> AsyncClientConnection:
        """A new connection, its preface written; raises ConnectFailed or TimeoutError."""
        loop = asyncio.get_running_loop()
        target, tls = self.target, self.tls
        subchannel = self.subchannel

        def unusable() -> None:
            subchannel.connection_unusable(connection)

        connection = AsyncClientConnection(self.options, unusable, target.display)
        ssl_args: dict = {}
        if tls is not None:
            context: Any = tls.context
            cache = tls.session_cache
            session = cache.get(tls.server_hostname) if cache is not None else None
            # asyncio's own loops build the TLS object through the context's wrap_bio();
            # other loops (uvloop) may want a real SSLContext, and connect without resuming.
            if session is not None and isinstance(loop, asyncio.BaseEventLoop):
                context = _ResumingContext(context, session)
            ssl_args = {"ssl": context, "server_hostname": tls.server_hostname}
        if isinstance(target.address, tuple):
            host, port = target.address
            opening: Any = loop.create_connection(lambda: connection, host, port, **ssl_args)
        else:
            address = target.address
            path = (
                address.decode("utf-8", "surrogateescape")
                if isinstance(address, bytes)
                else address
            )
            opening = loop.create_unix_connection(lambda: connection, path, **ssl_args)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            await asyncio.wait_for(opening, timeout)
        except asyncio.TimeoutError:
            raise
        except OSError as exc:
            if tls is not None and _is_tls_error(exc):
                raise handshake_error(target, exc) from None
            if isinstance(exc, socket.gaierror) and isinstance(target.address, tuple):
                raise lookup_error(target.address[0], exc) from None
            raise dial_error(target, exc) from None
        if tls is not None:
            self._check_tls(connection, tls)
        connection.flush()
        return connection

    def _check_tls(self, connection: AsyncClientConnection, tls: "ClientTLS") -> None:
        """The server must have chosen h2 (RFC 9113 §3.2); keep the session to resume."""
        from ..net.tls import alpn_refusal

        selected = connection.tls_object()
        refusal = alpn_refusal(selected.selected_alpn_protocol() if selected else None)
        if refusal is not None:
            connection.close()
            raise handshake_error(self.target, refusal)
        cache = tls.session_cache
        if cache is not None and selected is not None:
            name, ssl_object = tls.server_hostname, selected
            connection.keep_session(lambda: cache.keep(name, ssl_object.session))

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!")."""
        connection = self.subchannel.close()
        if connection is not None:
            connection.close()


class _ResumingContext:
    """A client SSLContext whose next connection resumes ``session`` (RFC 8446 §2.2).

    ``loop.create_connection()`` takes no TLS session; asyncio's SSL protocol makes its TLS
    object with the context's ``wrap_bio()``, where this one adds the session.  A session the
    context cannot resume (another context made it) is left out: a full handshake instead.
    """

    def __init__(self, context: Any, session: Any) -> None:
        self._context = context
        self._session = session

    def wrap_bio(
        self,
        incoming: Any,
        outgoing: Any,
        server_side: bool = False,
        server_hostname: Optional[str] = None,
        session: Any = None,
    ) -> Any:
        try:
            return self._context.wrap_bio(
                incoming,
                outgoing,
                server_side=server_side,
                server_hostname=server_hostname,
                session=self._session,
            )
        except ValueError:  # "Session refers to a different SSLContext"
            return self._context.wrap_bio(
                incoming, outgoing, server_side=server_side, server_hostname=server_hostname
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _is_tls_error(exc: OSError) -> bool:
    import ssl

    return isinstance(exc, (ssl.SSLError, ssl.CertificateError))
