"""Client interceptors of the asyncio API (grpcio's ``grpc.aio`` client interceptor classes).

An interceptor's ``intercept_*`` coroutine gets a ``continuation``, the
:class:`ClientCallDetails` and the request (or request iterator).  ``await continuation(...)``
starts the rest of the chain and returns a call; the interceptor returns that call, another
one, or (for a unary response) the response itself, or (for a streaming response) an async
iterator of responses.  What the application holds meanwhile is an :class:`InterceptedCall`:
awaitable, iterable, readable and writable at once, while the chain runs in a task.
"""

import abc
import asyncio
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence

from ..status import CallStatus, StatusCode
from ._errors import EOF, AioRpcError
from ._metadata import Metadata
from ._transport import CANCELLED


class ClientCallDetails:
    """What a client interceptor sees of a call and may change (``grpc.aio.ClientCallDetails``)."""

    def __init__(
        self,
        method: str,
        timeout: Optional[float],
        metadata: Any,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int] = None,
    ) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression

    def _replace(self, **changes: Any) -> "ClientCallDetails":
        values = dict(vars(self))
        values.update(changes)
        return ClientCallDetails(**values)

    def __repr__(self) -> str:
        return f"ClientCallDetails(method={self.method!r}, timeout={self.timeout!r})"


class ClientInterceptor(metaclass=abc.ABCMeta):  # noqa: B024 - a marker base, as grpcio
    """The base of the four client interceptor kinds."""


class UnaryUnaryClientInterceptor(ClientInterceptor):
    @abc.abstractmethod
    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        """Intercept a unary call; return a call or the response."""


class UnaryStreamClientInterceptor(ClientInterceptor):
    @abc.abstractmethod
    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        """Intercept a server-streaming call; return a call or an async iterator of responses."""


class StreamUnaryClientInterceptor(ClientInterceptor):
    @abc.abstractmethod
    async def intercept_stream_unary(
        self,
        continuation: Callable[..., Any],
        client_call_details: ClientCallDetails,
        request_iterator: Any,
    ) -> Any:
        """Intercept a client-streaming call; return a call or the response."""


class StreamStreamClientInterceptor(ClientInterceptor):
    @abc.abstractmethod
    async def intercept_stream_stream(
        self,
        continuation: Callable[..., Any],
        client_call_details: ClientCallDetails,
        request_iterator: Any,
    ) -> Any:
        """Intercept a bidirectional call; return a call or an async iterator of responses."""


#: Each interceptor class and the multi-callable kind it intercepts.
_KINDS = (
    (UnaryUnaryClientInterceptor, "unary_unary"),
    (UnaryStreamClientInterceptor, "unary_stream"),
    (StreamUnaryClientInterceptor, "stream_unary"),
    (StreamStreamClientInterceptor, "stream_stream"),
)


def split_interceptors(interceptors: Optional[Sequence[Any]]) -> Dict[str, List[Any]]:
    """The channel's interceptors by kind, in order; anything else is refused, as grpcio does."""
    by_kind: Dict[str, List[Any]] = {}
    for interceptor in interceptors or ():
        kinds = [kind for cls, kind in _KINDS if isinstance(interceptor, cls)]
        if not kinds:
            raise ValueError(
                f"Interceptor {interceptor} must be {UnaryUnaryClientInterceptor.__name__} or "
                f"{UnaryStreamClientInterceptor.__name__} or "
                f"{StreamUnaryClientInterceptor.__name__} or "
                f"{StreamStreamClientInterceptor.__name__}. "
            )
        for kind in kinds:
            by_kind.setdefault(kind, []).append(interceptor)
    return by_kind


def _is_call(value: Any) -> bool:
    return callable(getattr(value, "code", None)) and callable(getattr(value, "cancel", None))


class _Chain:
    """One run of the interceptor chain: the real call it made last (what write() reaches)."""

    def __init__(self) -> None:
        self.call: Any = None
        self.started = asyncio.get_running_loop().create_future()

    def made(self, call: Any) -> Any:
        self.call = call
        if not self.started.done():
            self.started.set_result(None)
        return call


def intercept(
    interceptors: List[Any],
    kind: str,
    invoke: Callable[[ClientCallDetails, Any], Any],
    details: ClientCallDetails,
    argument: Any,
) -> "InterceptedCall":
    """Start ``details`` through ``interceptors`` (first = outermost) and then ``invoke``."""
    chain = _Chain()

    async def run(index: int, details: ClientCallDetails, argument: Any) -> Any:
        if index == len(interceptors):
            return chain.made(invoke(details, argument))

        async def continuation(new_details: ClientCallDetails, new_argument: Any) -> Any:
            if index + 1 == len(interceptors):
                return chain.made(invoke(new_details, new_argument))
            return InterceptedCall(run(index + 1, new_details, new_argument), chain)

        method = getattr(interceptors[index], f"intercept_{kind}")
        return await method(continuation, details, argument)

    return InterceptedCall(run(0, details, argument), chain)


class InterceptedCall:
    """The call an intercepted multi-callable returns, whatever the interceptors return."""

    def __init__(self, outcome: Any, chain: _Chain) -> None:
        self._chain = chain
        self._task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(outcome)
        self._task.add_done_callback(_retrieve)
        self._responses: Optional[AsyncIterator[Any]] = None

    async def _outcome(self) -> Any:
        return await asyncio.shield(self._task)

    def __await__(self) -> Any:
        return self._response().__await__()

    async def _response(self) -> Any:
        outcome = await self._outcome()
        return (await outcome) if _is_call(outcome) else outcome

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        outcome = await self._outcome()
        async for response in outcome:
            yield response

    async def read(self) -> Any:
        outcome = await self._outcome()
        if _is_call(outcome):
            return await outcome.read()
        if self._responses is None:
            self._responses = outcome.__aiter__()
        try:
            return await self._responses.__anext__()
        except StopAsyncIteration:
            return EOF

    async def _call(self) -> Any:
        await asyncio.shield(self._chain.started)
        return self._chain.call

    async def write(self, request: Any) -> None:
        await (await self._call()).write(request)

    async def done_writing(self) -> None:
        await (await self._call()).done_writing()

    async def wait_for_connection(self) -> None:
        await (await self._call()).wait_for_connection()

    async def _status(self) -> CallStatus:
        try:
            await self._outcome()
        except AioRpcError as exc:
            return exc.status
        except asyncio.CancelledError:
            return CANCELLED
        call = self._chain.call
        if call is None:
            return CallStatus(StatusCode.OK, "")
        code = await call.code()
        return CallStatus(code, await call.details(), (), tuple(await call.trailing_metadata()))

    async def code(self) -> StatusCode:
        return (await self._status()).code

    async def details(self) -> str:
        return (await self._status()).details

    async def trailing_metadata(self) -> Metadata:
        return Metadata.from_tuple((await self._status()).trailing_metadata)

    async def initial_metadata(self) -> Metadata:
        call = await self._call()
        return await call.initial_metadata() if call is not None else Metadata()

    async def debug_error_string(self) -> str:
        status = await self._status()
        return "" if status.code is StatusCode.OK else str(status)

    def cancel(self) -> bool:
        call = self._chain.call
        cancelled = call.cancel() if call is not None else False
        if not self._task.done():
            self._task.cancel()
            cancelled = True
        return bool(cancelled)

    def cancelled(self) -> bool:
        call = self._chain.call
        return self._task.cancelled() or (call is not None and call.cancelled())

    def done(self) -> bool:
        call = self._chain.call
        return self._task.done() and (call is None or call.done())

    def time_remaining(self) -> Optional[float]:
        call = self._chain.call
        return call.time_remaining() if call is not None else None

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        def outcome_done(_task: Any) -> None:
            call = self._chain.call
            if call is not None and not call.done():
                call.add_done_callback(lambda _call: callback(self))
            else:
                callback(self)

        self._task.add_done_callback(outcome_done)


def _retrieve(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled():
        task.exception()
