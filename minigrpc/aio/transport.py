"""The asyncio client transport: a channel's connections, dialled, waited for and retried on
from the event loop.

:class:`AsyncTransport` carries out what the sans-IO core decides: a call's steps
(:mod:`minigrpc.driver.call_steps`: start, wait for the channel, back off, end) and the
channel's work (:mod:`minigrpc.driver.subchannel`: dial an address, resolve the name, retire a
connection, wake up when a backoff ends).  The decisions are all there, shared with the
blocking transport; here is only how the event loop does them: a task per dial
(``loop.create_connection``, with asyncio's TLS) or name lookup (``loop.getaddrinfo``), a future
the calls waiting on the channel await, a timer handle while a backoff runs, ``asyncio.sleep``
for a call's own backoff.

Each connection is an :class:`~minigrpc.aio.client_connection.AsyncClientConnection`.
"""

import asyncio
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Set, Tuple

from ..driver.call_steps import FINISH, SLEEP, START, WAIT, CallSteps
from ..driver.channel_core import TransportOptions
from ..driver.subchannel import DIAL, RESOLVE, Subchannels, Work
from ..net.sockets import (
    ConnectFailed,
    address_records,
    dial_error,
    dial_timeout_error,
    handshake_error,
    lookup_error,
)
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
    """The channel's connections: dials, name lookups, waits, retries, backoff timers."""

    def __init__(
        self,
        subchannels: "Subchannels[AsyncClientConnection]",
        options: TransportOptions,
        tls: "Optional[ClientTLS]",
    ) -> None:
        self.subchannels = subchannels
        self.options = options
        self.tls = tls
        #: Resolved at the subchannels' next change (None: nobody waits).
        self._change: Optional[asyncio.Future[None]] = None
        #: The dials and lookups running, cancelled when the channel closes.
        self._tasks: Set[asyncio.Task[None]] = set()
        #: The timer that wakes the subchannels when a backoff ends.
        self._timer: Optional[asyncio.TimerHandle] = None

    def steps(
        self, invocation: "Invocation", request: Optional[Framed], unary_response: bool
    ) -> CallSteps:
        """A new call's steps: its retries, its attempts' making, this channel's backoff.
        ``request`` is a unary request's message (None when the request streams)."""
        return invocation.new_steps(self.subchannels, self.options, request, unary_response)

    def next_step(self, steps: CallSteps) -> str:
        """``steps.next()``, and the channel's work that follows carried out."""
        step = steps.next()
        work = self.subchannels.take_work()
        if work:
            self._do(work)
        return step

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
            version = self.subchannels.version
            step = self.next_step(steps)
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
            elif step is WAIT:
                await self._wait_for_change(version, steps.deadline)
            elif step is SLEEP:
                await asyncio.sleep(steps.delay)
            else:
                assert step is FINISH
                return None, None

    async def _wait_for_change(self, version: int, deadline: Optional[float]) -> None:
        """Wait until the channel changed since ``version``, or the deadline."""
        while self.subchannels.version == version:
            timeout = None
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    return
            change = self._change
            if change is None:
                change = self._change = asyncio.get_running_loop().create_future()
            await asyncio.wait((change,), timeout=timeout)

    def try_to_connect(self) -> None:
        """``try_to_connect``: an IDLE channel starts connecting (in the background)."""
        self._report(self.subchannels.exit_idle)

    # -- the channel's work ---------------------------------------------------------------

    def _report(self, outcome: Callable[..., Any], *args: Any) -> Any:
        """Tell the subchannels what happened (``outcome(*args, now)``), wake the waiting calls,
        and carry out the work that follows."""
        result = outcome(*args, time.monotonic())
        change, self._change = self._change, None
        if change is not None and not change.done():
            change.set_result(None)
        self._do(self.subchannels.take_work())
        return result

    def _do(self, work: List[Work]) -> None:
        loop = asyncio.get_running_loop()
        for item in work:
            if item.kind is DIAL:
                assert item.address is not None
                self._start(loop, self._dial(item.address))
            elif item.kind is RESOLVE:
                self._start(loop, self._resolve())
            else:
                item.connection.retire()
        self._arm_timer(loop)

    def _start(self, loop: asyncio.AbstractEventLoop, work: Any) -> None:
        task = loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _arm_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the subchannels when their next backoff ends (one timer at a time)."""
        due = self.subchannels.timer_due()
        if due is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(max(0.0, due - time.monotonic()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._report(self.subchannels.on_timer)

    async def _resolve(self) -> None:
        """Look the channel's name up (every A and AAAA record) and report what came of it."""
        target = self.subchannels.target
        assert target is not None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                target.host, target.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            self._report(self.subchannels.resolve_failed, lookup_error(target.host, exc).details)
        else:
            self._report(self.subchannels.resolved, address_records(infos))

    async def _dial(self, address: Target) -> None:
        """Dial ``address`` and report how it went (to the subchannels and the waiting calls)."""
        try:
            connection = await self._connect(address)
        except ConnectFailed as exc:
            self._report(self.subchannels.dial_failed, address, exc.details)
        except asyncio.TimeoutError:
            self._report(self.subchannels.dial_failed, address,
                         dial_timeout_error(address).details)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._report(self.subchannels.dial_failed, address, str(exc))
        else:
            if not self._report(self.subchannels.dialled, address, connection):
                connection.close()

    async def _connect(self, address: Target) -> AsyncClientConnection:
        """A new connection to ``address``, its preface written; raises ConnectFailed or
        TimeoutError."""
        loop = asyncio.get_running_loop()
        tls = self.tls
        subchannels = self.subchannels

        def unusable() -> None:
            self._report(subchannels.connection_lost, connection)

        connection = AsyncClientConnection(self.options, unusable, address.display)
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
        if isinstance(address.address, tuple):
            host, port = address.address
            opening: Any = loop.create_connection(lambda: connection, host, port, **ssl_args)
        else:
            path = address.address
            path = path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path
            opening = loop.create_unix_connection(lambda: connection, path, **ssl_args)
        try:
            await asyncio.wait_for(opening, self.options.connect_timeout)
        except asyncio.TimeoutError:
            raise
        except OSError as exc:
            if tls is not None and _is_tls_error(exc):
                raise handshake_error(address, exc) from None
            if isinstance(exc, socket.gaierror) and isinstance(address.address, tuple):
                raise lookup_error(address.address[0], exc) from None
            raise dial_error(address, exc) from None
        if tls is not None:
            self._check_tls(connection, address, tls)
        connection.flush()
        return connection

    def _check_tls(
        self, connection: AsyncClientConnection, address: Target, tls: "ClientTLS"
    ) -> None:
        """The server must have chosen h2 (RFC 9113 §3.2); keep the session to resume."""
        from ..net.tls import alpn_refusal

        selected = connection.tls_object()
        refusal = alpn_refusal(selected.selected_alpn_protocol() if selected else None)
        if refusal is not None:
            connection.close()
            raise handshake_error(address, refusal)
        cache = tls.session_cache
        if cache is not None and selected is not None:
            name, ssl_object = tls.server_hostname, selected
            connection.keep_session(lambda: cache.keep(name, ssl_object.session))

    def close(self) -> None:
        """Close the connections; running calls end CANCELLED ("Channel closed!")."""
        for connection in self.subchannels.close():
            connection.close()
        change, self._change = self._change, None
        if change is not None and not change.done():
            change.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()


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
