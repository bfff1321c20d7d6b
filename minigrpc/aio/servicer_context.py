"""The ``context`` an asyncio handler receives: grpcio's ``grpc.aio.ServicerContext``.

What it records (code, details, trailing metadata, compression) and what it reads (metadata,
peer, deadline, auth context) is :class:`minigrpc.driver.server_call_state.CallState`, shared
with the blocking server; so is the status a call ends with
(:mod:`minigrpc.driver.server_dispatch`).  What is asyncio here are the methods that wait or
touch the wire: ``read()``, ``write()``, ``send_initial_metadata()`` and ``abort()`` are
coroutines run on the server's event loop, and they hand the work to the server's calls
(:mod:`minigrpc.aio.server_handlers`).

A synchronous handler (a plain function, as written for ``grpc.server``) runs on an executor,
as grpcio runs it, and gets a :class:`SyncServicerContext`: the blocking context's API whose
wire operations are passed to the event loop.
"""

import asyncio
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    List,
    NoReturn,
    Optional,
    Tuple,
)

from ..driver import server_dispatch as _dispatch
from ..driver.server_call_state import CallState
from ..driver.server_dispatch import CallEndedError
from ..driver.server_driver import RESPONSES_PER_TURN
from ..protocol import wire
from ..protocol.enums import StatusCode
from ..protocol.server_events import CallStarted
from . import interfaces as _interfaces
from .errors import EOF, AbortError, UsageError
from .metadata import Metadata as AioMetadata

if TYPE_CHECKING:  # pragma: no cover
    from typing import Protocol

    from ..driver.server_call_state import CallServer
    from ..driver.server_driver import ServedConnection

    class CallTaskServer(CallServer, Protocol):
        """What the context hands to the server's calls
        (:class:`minigrpc.aio.server_handlers.CallTasks`): the wire, and the waits."""

        async def read_request(self, call: "ServicerContext") -> Optional[bytes]: ...

        async def send_response(self, call: "ServicerContext", response: Any) -> None: ...

        def run_callbacks(self, call: Any, callbacks: List[Callable[..., Any]]) -> None: ...

__all__ = ["ServicerContext", "SyncServicerContext"]


class ServicerContext(CallState, _interfaces.ServicerContext):
    """minigrpc's ``grpc.aio.ServicerContext`` (module docstring), beneath the abstract one
    (:class:`minigrpc.aio.interfaces.ServicerContext`)."""

    __slots__ = ("_changed", "_sent_in_turn", "_task")

    _server: "CallTaskServer"

    def __init__(
        self, server: "CallTaskServer", connection: "ServedConnection", event: CallStarted
    ) -> None:
        super().__init__(server, connection, event)
        #: Set when something this call waits for may have changed (replaced on each wake).
        self._changed: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task[None]] = None
        #: Responses handed over since the call's task last let the event loop run.
        self._sent_in_turn = 0

    # -- waiting (event loop) ----------------------------------------------------------------

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def _wait(self) -> Awaitable[Any]:
        """Until the connection reports a change for this call (a message, window, its end).

        Not a coroutine: the event exists as soon as this returns, so a change reported before
        the awaitable first runs (``asyncio.wait_for`` starts it in a task) is not lost."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed.wait()

    # -- grpc.aio.ServicerContext --------------------------------------------------------------

    async def read(self) -> Any:
        """The next request message of a request-streaming call, or :data:`~minigrpc.aio.EOF`.

        As in grpcio's server, it may be mixed with the request iterator: both take the next
        message from the same stream."""
        return await self._next_request()

    async def _next_request(self) -> Any:
        handler = self._handler
        if handler is None or not handler.request_streaming:
            raise UsageError("read() is only for request-streaming methods")
        message = await self._server.read_request(self)
        if message is None:
            return EOF
        deserializer = handler.request_deserializer
        if deserializer is None:
            return message
        try:
            return deserializer(message)
        except Exception:
            _dispatch.record_bad_request(self)
            raise AbortError() from None

    async def write(self, message: Any) -> None:
        """Send one response of a response-streaming call; waits while the client's flow-control
        window and the connection's output bound hold earlier responses back."""
        handler = self._handler
        if handler is None or not handler.response_streaming:
            raise UsageError("write() is only for response-streaming methods")
        await self._server.send_response(self, message)

    def set_trailing_metadata(self, trailing_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Metadata for the trailers: an :class:`~minigrpc.aio.Metadata`, or a tuple or list
        of ``(key, value)`` pairs, as grpcio's asyncio server requires (anything else, a dict
        included, is a TypeError)."""
        if isinstance(trailing_metadata, AioMetadata):
            trailing_metadata = tuple(trailing_metadata)
        if not isinstance(trailing_metadata, (tuple, list)) or not all(
            isinstance(item, (tuple, list)) and len(item) == 2 for item in trailing_metadata
        ):
            raise TypeError(
                "trailing metadata must be a tuple or list of (key, value) pairs, not "
                f"{trailing_metadata!r}"
            )
        super().set_trailing_metadata(trailing_metadata)

    def set_compression(self, compression: Optional[int]) -> None:
        """Compress the responses with this ``Compression`` if the client accepts it; only
        before the response headers went out (they name the encoding): RuntimeError after,
        as in grpcio."""
        if self._initial_metadata_sent:
            raise RuntimeError(
                "Compression setting must be specified before sending initial metadata"
            )
        super().set_compression(compression)

    async def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Send the response headers now, with this metadata (at most once, as in grpcio)."""
        headers = wire.encode_metadata(initial_metadata)
        if self._initial_metadata_sent:
            raise UsageError("Initial metadata no longer allowed!")
        self._initial_metadata_sent = True
        self._server.send_initial_metadata(self, headers, self._initial_metadata_encoding())

    async def abort(
        self, code: Any, details: str = "", trailing_metadata: Iterable[Tuple[str, Any]] = ()
    ) -> NoReturn:
        """End the call with ``code`` and ``details``: raises :class:`~minigrpc.aio.AbortError`,
        which the server turns into that status (grpcio's contract, OK included)."""
        if self._aborted:
            raise UsageError("Abort already called!")
        if trailing_metadata:
            self.set_trailing_metadata(trailing_metadata)
        self._record_abort(code, details)
        raise AbortError()

    async def abort_with_status(self, status: Any) -> NoReturn:
        """``abort`` with a ``grpc.Status``-like object (code, details, trailing_metadata)."""
        await self.abort(status.code, status.details, getattr(status, "trailing_metadata", ()))

    def add_done_callback(self, callback: Callable[[Any], Any]) -> None:
        """Call ``callback(context)`` on the event loop when the call ends, however it ends;
        at once if it already has."""
        if not self._add_callback(callback):
            self._server.run_callbacks(self, [callback])

    def done(self) -> bool:
        """True once the call has ended (answered, cancelled, expired, disconnected)."""
        return self._terminated

    def cancelled(self) -> bool:
        """True if the call ended cancelled: the client reset it, the connection went away, or
        the server stopped without waiting for it."""
        return self._termination_code is StatusCode.CANCELLED

    # -- the server's ----------------------------------------------------------------------------

    def _run_in(self, task: "asyncio.Task[None]") -> None:
        """The call's task: cancelled if the call ends without the handler's answer."""
        self._task = task

    def _count_response(self) -> bool:
        """A streamed response went out: the first sent the response headers; True once the
        handler has handed over its allowance in a row and must let the event loop run."""
        self._initial_metadata_sent = True
        self._sent_in_turn += 1
        if self._sent_in_turn < RESPONSES_PER_TURN:
            return False
        self._sent_in_turn = 0
        return True

    def _cancel_task(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()

    async def _requests(self) -> AsyncIterator[Any]:
        """The ``request_iterator`` an asyncio request-streaming handler gets."""
        while True:
            message = await self._next_request()
            if message is EOF:
                return
            yield message

    def __repr__(self) -> str:
        return f"<aio.ServicerContext {self._method} stream={self._stream_id} peer={self.peer()}>"


class SyncServicerContext:
    """The context of a synchronous handler run on the executor: grpcio's blocking
    ``ServicerContext`` API on an asyncio call.  Wire operations run on the event loop; the
    rest reads and writes the call's :class:`ServicerContext` directly."""

    def __init__(self, context: ServicerContext, loop: asyncio.AbstractEventLoop) -> None:
        self._context = context
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def _on_loop(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def is_active(self) -> bool:
        context = self._context
        remaining = context.time_remaining()
        return not context._terminated and (remaining is None or remaining > 0)

    def cancel(self) -> None:
        """RST_STREAM(CANCEL): the client sees CANCELLED (PROTOCOL-HTTP2.md, Errors)."""
        self._loop.call_soon_threadsafe(self._context._server.cancel, self._context)

    def add_callback(self, callback: Callable[[], Any]) -> bool:
        if self._context._terminated:
            return False
        self._loop.call_soon_threadsafe(
            self._context.add_done_callback, lambda _context: callback()
        )
        return True

    def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        self._on_loop(self._context.send_initial_metadata(initial_metadata))

    def abort(self, code: Any, details: str) -> NoReturn:
        self._context._record_abort(code, details)
        raise Exception()  # bare, as the blocking context's abort (and grpcio's)

    def abort_with_status(self, status: Any) -> NoReturn:
        self._context.set_trailing_metadata(getattr(status, "trailing_metadata", None) or ())
        self.abort(status.code, status.details)


class SyncRequests(Iterator[Any]):
    """The ``request_iterator`` of a synchronous request-streaming handler: each message is
    read on the event loop (so the connection's flow control stays there)."""

    def __init__(self, context: ServicerContext, loop: asyncio.AbstractEventLoop) -> None:
        self._context = context
        self._loop = loop

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        future = asyncio.run_coroutine_threadsafe(self._context._next_request(), self._loop)
        try:
            message = future.result()
        except asyncio.CancelledError:
            raise CallEndedError(StatusCode.CANCELLED) from None
        if message is EOF:
            raise StopIteration
        return message
