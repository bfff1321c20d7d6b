"""Client interceptors of the asyncio API (grpcio's ``grpc.aio`` client interceptor classes).

An interceptor's ``intercept_*`` coroutine gets a ``continuation``, the
:class:`ClientCallDetails` and the request (or request iterator).  ``await continuation(...)``
starts the rest of the chain and returns a call; the interceptor returns that call, another
one, or (for a unary response) the response itself, or (for a streaming response) an async
iterator of responses.  What the application holds meanwhile is an :class:`InterceptedCall`:
awaitable, iterable, readable and writable at once, while the chain runs in a task.  It is
also the call class of its kind (``InterceptedUnaryUnaryCall`` is a ``grpc.aio.UnaryUnaryCall``,
as in grpcio), so that code checking ``isinstance(call, grpc.aio.Call)`` accepts it.
"""

import abc
import asyncio
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Type

from ..driver.invocation import CANCELLED
from ..protocol.codes import Code
from ..protocol.enums import StatusCode
from ..protocol.status import CallStatus
from .call import FINISHED, HALF_CLOSED
from .errors import EOF, AioRpcError
from .interfaces import StreamStreamCall, StreamUnaryCall, UnaryStreamCall, UnaryUnaryCall
from .metadata import Metadata


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


_END_OF_REQUESTS = object()


class _WrittenRequests:
    """The request iterator interceptors see of a call the application feeds by ``write()``.

    grpcio's interceptors get an async iterator in both cases, so that they can wrap it (count,
    log, change the requests) without knowing how the application sends them; what ``write()``
    queues, the call's sender takes from here.  One request waits at most, so a writer is held
    back as the call's flow control holds its sender back.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)
        #: ``done_writing()`` was called.
        self.closed = False
        #: The call ended: nothing takes requests any more.
        self.ended = False

    async def put(self, request: Any) -> None:
        await self._queue.put(request)

    async def close(self) -> None:
        """``done_writing()``: the requests end after those written (once)."""
        if not self.closed:
            self.closed = True
            await self._queue.put(_END_OF_REQUESTS)

    def end(self, _call: Any = None) -> None:
        """Release a writer waiting for room that the ended call will never make."""
        self.ended = True
        while not self._queue.empty():
            self._queue.get_nowait()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._requests()

    async def _requests(self) -> AsyncIterator[Any]:
        while True:
            request = await self._queue.get()
            if request is _END_OF_REQUESTS:
                return
            yield request


class _Chain:
    """One run of the interceptor chain: the real call it made last (what write() reaches),
    and the requests the application writes, when it writes them."""

    def __init__(self, requests: Optional[_WrittenRequests]) -> None:
        self.call: Any = None
        self.requests = requests
        self.started = asyncio.get_running_loop().create_future()

    def made(self, call: Any) -> Any:
        self.call = call
        if self.requests is not None:
            call.add_done_callback(self.requests.end)
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
    requests = None
    if kind.startswith("stream_") and argument is None:  # the application will write()
        requests = _WrittenRequests()
        argument = requests
    chain = _Chain(requests)

    async def run(index: int, details: ClientCallDetails, argument: Any) -> Any:
        if index == len(interceptors):
            return chain.made(invoke(details, argument))

        async def continuation(new_details: ClientCallDetails, new_argument: Any) -> Any:
            if index + 1 == len(interceptors):
                return chain.made(invoke(new_details, new_argument))
            return intercepted(run(index + 1, new_details, new_argument), chain)

        method = getattr(interceptors[index], f"intercept_{kind}")
        return await method(continuation, details, argument)

    intercepted = _INTERCEPTED[kind]
    return intercepted(run(0, details, argument), chain)


class InterceptedCall:
    """The call an intercepted multi-callable returns, whatever the interceptors return."""

    def __init__(self, outcome: Any, chain: _Chain) -> None:
        self._chain = chain
        self._chain_task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(outcome)
        self._chain_task.add_done_callback(_retrieve)
        if chain.requests is not None:
            self._chain_task.add_done_callback(self._end_requests_on_failure)
        self._response_iterator: Optional[AsyncIterator[Any]] = None

    def _end_requests_on_failure(self, task: "asyncio.Task[Any]") -> None:
        if (task.cancelled() or task.exception() is not None) and self._chain.requests:
            self._chain.requests.end()

    async def _chain_outcome(self) -> Any:
        return await asyncio.shield(self._chain_task)

    def __await__(self) -> Any:
        return self._response().__await__()

    async def _response(self) -> Any:
        outcome = await self._chain_outcome()
        return (await outcome) if _is_call(outcome) else outcome

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        outcome = await self._chain_outcome()
        async for response in outcome:
            yield response

    async def read(self) -> Any:
        outcome = await self._chain_outcome()
        if _is_call(outcome):
            return await outcome.read()
        if self._response_iterator is None:
            self._response_iterator = outcome.__aiter__()
        try:
            return await self._response_iterator.__anext__()
        except StopAsyncIteration:
            return EOF

    async def _real_call(self) -> Any:
        """The real call, once the chain made it (None if the chain ended without one)."""
        if not self._chain.started.done():
            await asyncio.wait((self._chain.started, self._chain_task),
                               return_when=asyncio.FIRST_COMPLETED)
        return self._chain.call

    async def _call_to_write(self, requests: _WrittenRequests) -> Any:
        """The call the chain made, once it has; InvalidStateError if it has ended (grpcio: a
        write to an intercepted call that ended, however it ended, says so and no more)."""
        try:
            await self._chain_outcome()
        except (asyncio.CancelledError, AioRpcError):
            raise asyncio.InvalidStateError(FINISHED) from None
        call = self._chain.call
        if call is None or call.done() or requests.ended:
            raise asyncio.InvalidStateError(FINISHED)
        return call

    async def write(self, request: Any) -> None:
        requests = self._chain.requests
        if requests is None:  # the application gave a request iterator: the call says no
            await (await self._real_call()).write(request)
            return
        call = await self._call_to_write(requests)
        if requests.closed:
            raise asyncio.InvalidStateError(HALF_CLOSED)
        await requests.put(request)
        if requests.ended or call.done():  # the call ended while the request waited
            raise asyncio.InvalidStateError(FINISHED)

    async def done_writing(self) -> None:
        requests = self._chain.requests
        if requests is None:
            await (await self._real_call()).done_writing()
            return
        await self._call_to_write(requests)
        await requests.close()

    async def wait_for_connection(self) -> None:
        await (await self._real_call()).wait_for_connection()

    async def _final_status(self) -> CallStatus:
        try:
            await self._chain_outcome()
        except AioRpcError as exc:
            return exc.status
        except asyncio.CancelledError:
            return CANCELLED
        call = self._chain.call
        if call is None:
            return CallStatus(Code.OK, "")
        code = await call.code()
        return CallStatus(
            code.number, await call.details(), (), tuple(await call.trailing_metadata())
        )

    async def code(self) -> StatusCode:
        return (await self._final_status()).code

    async def details(self) -> str:
        return (await self._final_status()).details

    def _no_call(self) -> bool:
        """No real call stands behind: the chain was cancelled, or an interceptor answered
        itself (grpcio has no metadata then)."""
        return self._chain_task.cancelled() or self._chain.call is None

    async def trailing_metadata(self) -> Optional[Metadata]:
        status = await self._final_status()
        return None if self._no_call() else Metadata.from_tuple(status.trailing_metadata)

    async def initial_metadata(self) -> Optional[Metadata]:
        call = await self._real_call()
        return None if self._no_call() else await call.initial_metadata()

    async def debug_error_string(self) -> Optional[str]:
        status = await self._final_status()
        if self._no_call():
            return None
        return "" if status.code is StatusCode.OK else str(status)

    def cancel(self) -> bool:
        call = self._chain.call
        cancelled = call.cancel() if call is not None else False
        if not self._chain_task.done():
            self._chain_task.cancel()
            cancelled = True
        return bool(cancelled)

    def cancelled(self) -> bool:
        call = self._chain.call
        return self._chain_task.cancelled() or (call is not None and call.cancelled())

    def done(self) -> bool:
        call = self._chain.call
        return self._chain_task.done() and (call is None or call.done())

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

        self._chain_task.add_done_callback(outcome_done)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {'done' if self.done() else 'running'}>"


# Each kind's intercepted call is also that kind's call class (grpcio's names).  Every method the
# application uses is InterceptedCall's, which comes first; the call class adds its type.  Its
# metadata and debug string may be None where the plain call's never are (an interceptor that
# answered itself made no call), as in grpcio: hence the ignores.


class InterceptedUnaryUnaryCall(InterceptedCall, UnaryUnaryCall):  # type: ignore[misc]
    """An intercepted unary call (grpcio's ``grpc.aio.InterceptedUnaryUnaryCall``)."""


class InterceptedUnaryStreamCall(InterceptedCall, UnaryStreamCall):  # type: ignore[misc]
    """An intercepted call with a response stream."""


class InterceptedStreamUnaryCall(InterceptedCall, StreamUnaryCall):  # type: ignore[misc]
    """An intercepted call with a request stream."""


class InterceptedStreamStreamCall(InterceptedCall, StreamStreamCall):  # type: ignore[misc]
    """An intercepted call streaming both ways."""


_INTERCEPTED: Dict[str, Type[InterceptedCall]] = {
    "unary_unary": InterceptedUnaryUnaryCall,
    "unary_stream": InterceptedUnaryStreamCall,
    "stream_unary": InterceptedStreamUnaryCall,
    "stream_stream": InterceptedStreamStreamCall,
}


def _retrieve(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled():
        task.exception()
