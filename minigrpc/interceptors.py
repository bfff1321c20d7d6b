"""Client and server interceptors with grpcio's classes and semantics.

Client side: ``intercept_channel(channel, a, b, c)`` returns a channel whose calls go through
``a``, then ``b``, then ``c``, then the real call.  Each interceptor gets a ``continuation``, the
call's :class:`ClientCallDetails` and the request (or request iterator); it may change the
details (method, timeout, metadata, ...) before calling ``continuation(details, request)``, look
at or replace what comes back, or answer without calling it at all (short-circuit).  An
interceptor only sees the call shapes whose class it derives from; other calls pass it by.

What ``continuation`` returns is what grpcio returns: for a unary response, an object that is
both a ``Call`` and a ``Future`` (``result()`` is the response or raises the ``RpcError``); for a
streamed response, the response iterator that is also the ``Call``.

Server side: ``server(interceptors=[a, b])`` asks ``a.intercept_service(continuation,
handler_call_details)`` for each incoming call's handler; ``continuation`` asks ``b``, and the
last one the registered handlers.  Returning another ``RpcMethodHandler`` wraps or replaces the
method; returning None makes the call UNIMPLEMENTED.
"""

import abc
from typing import Any, Callable, NamedTuple, Optional, Sequence

from .status import RpcError

__all__ = [
    "ClientCallDetails",
    "ServerInterceptor",
    "StreamStreamClientInterceptor",
    "StreamUnaryClientInterceptor",
    "UnaryStreamClientInterceptor",
    "UnaryUnaryClientInterceptor",
    "intercept_channel",
    "intercept_handler_lookup",
]


class ClientCallDetails(abc.ABC):
    """grpcio's abstract ``ClientCallDetails``: method, timeout, metadata, credentials,
    wait_for_ready and compression of one call, as an interceptor sees them."""

    method: str
    timeout: Optional[float]
    metadata: Any
    credentials: Any
    wait_for_ready: Optional[bool]
    compression: Any


class _CallDetails(
    NamedTuple(
        "_CallDetails",
        [
            ("method", str),
            ("timeout", Optional[float]),
            ("metadata", Any),
            ("credentials", Any),
            ("wait_for_ready", Optional[bool]),
            ("compression", Any),
        ],
    ),
    ClientCallDetails,
):
    pass


class UnaryUnaryClientInterceptor(abc.ABC):
    @abc.abstractmethod
    def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        raise NotImplementedError()


class UnaryStreamClientInterceptor(abc.ABC):
    @abc.abstractmethod
    def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        raise NotImplementedError()


class StreamUnaryClientInterceptor(abc.ABC):
    @abc.abstractmethod
    def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        raise NotImplementedError()


class StreamStreamClientInterceptor(abc.ABC):
    @abc.abstractmethod
    def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        raise NotImplementedError()


class ServerInterceptor(abc.ABC):
    @abc.abstractmethod
    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        raise NotImplementedError()


# -- what a unary continuation returns --------------------------------------------------------


class _UnaryOutcome:
    """A finished unary call that succeeded: ``Call`` and ``Future`` at once (grpcio's shape)."""

    def __init__(self, response: Any, call: Any) -> None:
        self._response = response
        self._call = call

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._response

    def exception(self, timeout: Optional[float] = None) -> None:
        return None

    def traceback(self, timeout: Optional[float] = None) -> None:
        return None

    def done(self) -> bool:
        return True

    def running(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)

    def __getattr__(self, name: str) -> Any:  # code(), details(), metadata, is_active(), ...
        return getattr(self._call, name)


class _FailedOutcome(_UnaryOutcome):
    """A unary call that ended with an error: ``result()`` raises it, as in grpcio."""

    def __init__(self, error: BaseException, call: Any = None) -> None:
        super().__init__(None, call if call is not None else error)
        self._error = error

    def result(self, timeout: Optional[float] = None) -> Any:
        raise self._error

    def exception(self, timeout: Optional[float] = None) -> Any:
        return self._error

    def traceback(self, timeout: Optional[float] = None) -> Any:
        return self._error.__traceback__


def _options(details: Any) -> "dict[str, Any]":
    return {
        "timeout": getattr(details, "timeout", None),
        "metadata": getattr(details, "metadata", None),
        "credentials": getattr(details, "credentials", None),
        "wait_for_ready": getattr(details, "wait_for_ready", None),
        "compression": getattr(details, "compression", None),
    }


# -- intercepted multicallables ---------------------------------------------------------------


class _Intercepted:
    """One multi-callable of an intercepted channel: the interceptor, then the real one."""

    def __init__(self, make: Callable[[str], Any], method: str, interceptor: Any) -> None:
        self._make = make  # method -> the next channel's multi-callable
        self._method = method
        self._interceptor = interceptor

    def _details(
        self,
        timeout: Optional[float],
        metadata: Any,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Any,
    ) -> _CallDetails:
        return _CallDetails(
            self._method, timeout, metadata, credentials, wait_for_ready, compression
        )


class _UnaryResponse(_Intercepted):
    """unary_unary and stream_unary: ``__call__``, ``with_call`` and ``future``."""

    intercept_name = ""

    def _intercept(self, request: Any, details: _CallDetails, use_future: bool) -> Any:
        def continuation(new_details: Any, new_request: Any) -> Any:
            target = self._make(new_details.method)
            if use_future:
                return target.future(new_request, **_options(new_details))
            try:
                response, call = target.with_call(new_request, **_options(new_details))
            except RpcError as error:
                return _FailedOutcome(error)
            except Exception as error:
                return _FailedOutcome(error)
            return _UnaryOutcome(response, call)

        intercept = getattr(self._interceptor, self.intercept_name)
        return intercept(continuation, details, request)

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        response, _call = self.with_call(
            request, timeout, metadata, credentials, wait_for_ready, compression
        )
        return response

    def with_call(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        details = self._details(timeout, metadata, credentials, wait_for_ready, compression)
        outcome = self._intercept(request, details, use_future=False)
        return outcome.result(), outcome

    def future(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        details = self._details(timeout, metadata, credentials, wait_for_ready, compression)
        return self._intercept(request, details, use_future=True)


class _StreamResponse(_Intercepted):
    """unary_stream and stream_stream: ``__call__`` returns the response iterator."""

    intercept_name = ""

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        details = self._details(timeout, metadata, credentials, wait_for_ready, compression)

        def continuation(new_details: Any, new_request: Any) -> Any:
            return self._make(new_details.method)(new_request, **_options(new_details))

        return getattr(self._interceptor, self.intercept_name)(continuation, details, request)


class _InterceptedUnaryUnary(_UnaryResponse):
    intercept_name = "intercept_unary_unary"


class _InterceptedStreamUnary(_UnaryResponse):
    intercept_name = "intercept_stream_unary"


class _InterceptedUnaryStream(_StreamResponse):
    intercept_name = "intercept_unary_stream"


class _InterceptedStreamStream(_StreamResponse):
    intercept_name = "intercept_stream_stream"


class _InterceptedChannel:
    """A channel with one interceptor in front of another channel (grpcio's ``_Channel``)."""

    def __init__(self, channel: Any, interceptor: Any) -> None:
        self._channel = channel
        self._interceptor = interceptor

    def _factory(
        self,
        shape: str,
        interceptor_class: type,
        wrapper: type,
        method: str,
        request_serializer: Any,
        response_deserializer: Any,
    ) -> Any:
        make_next = getattr(self._channel, shape)

        def make(path: str) -> Any:
            return make_next(path, request_serializer, response_deserializer)

        if isinstance(self._interceptor, interceptor_class):
            return wrapper(make, method, self._interceptor)
        return make(method)

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: Optional[bool] = False,
    ) -> Any:
        return self._factory(
            "unary_unary",
            UnaryUnaryClientInterceptor,
            _InterceptedUnaryUnary,
            method,
            request_serializer,
            response_deserializer,
        )

    def unary_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: Optional[bool] = False,
    ) -> Any:
        return self._factory(
            "unary_stream",
            UnaryStreamClientInterceptor,
            _InterceptedUnaryStream,
            method,
            request_serializer,
            response_deserializer,
        )

    def stream_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: Optional[bool] = False,
    ) -> Any:
        return self._factory(
            "stream_unary",
            StreamUnaryClientInterceptor,
            _InterceptedStreamUnary,
            method,
            request_serializer,
            response_deserializer,
        )

    def stream_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: Optional[bool] = False,
    ) -> Any:
        return self._factory(
            "stream_stream",
            StreamStreamClientInterceptor,
            _InterceptedStreamStream,
            method,
            request_serializer,
            response_deserializer,
        )

    def subscribe(self, callback: Callable[..., None], try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Callable[..., None]) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "_InterceptedChannel":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_CLIENT_INTERCEPTOR_CLASSES = (
    UnaryUnaryClientInterceptor,
    UnaryStreamClientInterceptor,
    StreamUnaryClientInterceptor,
    StreamStreamClientInterceptor,
)


def intercept_channel(channel: Any, *interceptors: Any) -> Any:
    """``channel`` with ``interceptors`` in front, the first one outermost (grpcio's order)."""
    for interceptor in reversed(interceptors):
        if not isinstance(interceptor, _CLIENT_INTERCEPTOR_CLASSES):
            raise TypeError(
                f"{interceptor!r} must derive from UnaryUnaryClientInterceptor, "
                "UnaryStreamClientInterceptor, StreamUnaryClientInterceptor or "
                "StreamStreamClientInterceptor"
            )
        channel = _InterceptedChannel(channel, interceptor)
    return channel


def intercept_handler_lookup(
    interceptors: Sequence[Any], lookup: Callable[[Any], Any], handler_call_details: Any
) -> Any:
    """Run ``handler_call_details`` through the server interceptors, then ``lookup``."""

    def step(index: int) -> Callable[[Any], Any]:
        if index == len(interceptors):
            return lookup
        interceptor = interceptors[index]
        following = step(index + 1)
        return lambda details: interceptor.intercept_service(following, details)

    return step(0)(handler_call_details)
