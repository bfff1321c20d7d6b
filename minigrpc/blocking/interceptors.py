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

import sys
from types import TracebackType
from typing import Any, Callable, Dict, NamedTuple, Optional

from ..driver.interfaces import (
    Call,
    Channel,
    ClientCallDetails,
    Future,
    ServerInterceptor,
    StreamStreamClientInterceptor,
    StreamStreamMultiCallable,
    StreamUnaryClientInterceptor,
    StreamUnaryMultiCallable,
    UnaryStreamClientInterceptor,
    UnaryStreamMultiCallable,
    UnaryUnaryClientInterceptor,
    UnaryUnaryMultiCallable,
)
from ..driver.server_dispatch import intercept_handler_lookup
from ..protocol.enums import StatusCode
from ..protocol.status import RpcError

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


# -- what a unary continuation returns --------------------------------------------------------


class _FailureOutcome(RpcError, Call, Future):
    """An exception raised while intercepting a call, delivered as a failed call (INTERNAL).

    grpcio turns an exception that an interceptor (or the call set-up beneath it) raises into
    this object instead of letting it out of ``future()`` or a streaming call: ``result()`` and
    iteration re-raise the original exception, ``code()`` is INTERNAL.
    """

    def __init__(self, exception: BaseException, traceback: Optional[TracebackType]) -> None:
        super().__init__(str(exception))
        self._exception = exception
        self._traceback = traceback

    def initial_metadata(self) -> Any:
        return None

    def trailing_metadata(self) -> Any:
        return None

    def code(self) -> StatusCode:
        return StatusCode.INTERNAL

    def details(self) -> str:
        return "Exception raised while intercepting the RPC"

    def debug_error_string(self) -> str:
        return f"{self.details()}: {self._exception!r}"

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> Optional[float]:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self, timeout: Optional[float] = None) -> Any:
        raise self._exception

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return self._exception

    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        return self._traceback

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)

    def __iter__(self) -> "_FailureOutcome":
        return self

    def __next__(self) -> Any:
        raise self._exception

    def next(self) -> Any:
        return self.__next__()


def _failure() -> _FailureOutcome:
    """The exception being handled, as a failed call."""
    _, exception, traceback = sys.exc_info()
    assert exception is not None
    return _FailureOutcome(exception, traceback)


class _UnaryOutcome(Call, Future):
    """A unary call that succeeded under ``with_call``: the response and the call, as one
    finished ``Call`` and done ``Future`` (what a continuation returns to its interceptor)."""

    def __init__(self, response: Any, call: Any) -> None:
        self._response = response
        self._call = call

    def initial_metadata(self) -> Any:
        return self._call.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._call.trailing_metadata()

    def code(self) -> StatusCode:
        code: StatusCode = self._call.code()
        return code

    def details(self) -> Optional[str]:
        details: Optional[str] = self._call.details()
        return details

    def debug_error_string(self) -> str:
        return str(getattr(self._call, "debug_error_string", lambda: "")())

    def is_active(self) -> bool:
        return bool(self._call.is_active())

    def time_remaining(self) -> Optional[float]:
        remaining: Optional[float] = self._call.time_remaining()
        return remaining

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return bool(self._call.add_callback(callback))

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._response

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return None

    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        return None

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)


def _unwrap(details: Any, original: _CallDetails) -> Dict[str, Any]:
    """The call options in the details an interceptor passed on; where its object lacks an
    attribute (it need not be a complete ClientCallDetails), the call's own value stays."""
    return {
        name: getattr(details, name, getattr(original, name))
        for name in ("timeout", "metadata", "credentials", "wait_for_ready", "compression")
    }


# -- intercepted multicallables ---------------------------------------------------------------


class _Intercepted:
    """One multi-callable of an intercepted channel: the interceptor, then the real one."""

    intercept_name = ""

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

    def _next(self, details: Any, original: _CallDetails) -> Any:
        """The next multi-callable, for the method the interceptor's details name."""
        return self._make(getattr(details, "method", original.method))

    def _intercept(self, continuation: Callable[[Any, Any], Any], details: _CallDetails,
                   request: Any) -> Any:
        return getattr(self._interceptor, self.intercept_name)(continuation, details, request)


class _UnaryResponse(_Intercepted):
    """unary_unary and stream_unary: ``__call__``, ``with_call`` and ``future``."""

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
        """The interceptor sees a finished call: the RpcError itself when it failed, and an
        exception from beneath it as a failed call; what it returns is waited on here."""
        original = self._details(timeout, metadata, credentials, wait_for_ready, compression)

        def continuation(details: Any, new_request: Any) -> Any:
            target = self._next(details, original)
            try:
                response, call = target.with_call(new_request, **_unwrap(details, original))
            except RpcError as error:
                return error
            except Exception:
                return _failure()
            return _UnaryOutcome(response, call)

        outcome = self._intercept(continuation, original, request)
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
        """Never raises: an exception from the interceptor becomes a failed future."""
        original = self._details(timeout, metadata, credentials, wait_for_ready, compression)

        def continuation(details: Any, new_request: Any) -> Any:
            target = self._next(details, original)
            return target.future(new_request, **_unwrap(details, original))

        try:
            return self._intercept(continuation, original, request)
        except Exception:
            return _failure()


class _StreamResponse(_Intercepted):
    """unary_stream and stream_stream: ``__call__`` returns the response iterator."""

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Never raises: an exception from the interceptor becomes a failed call, which raises
        it again when iterated."""
        original = self._details(timeout, metadata, credentials, wait_for_ready, compression)

        def continuation(details: Any, new_request: Any) -> Any:
            return self._next(details, original)(new_request, **_unwrap(details, original))

        try:
            return self._intercept(continuation, original, request)
        except Exception:
            return _failure()


class _InterceptedUnaryUnary(_UnaryResponse, UnaryUnaryMultiCallable):
    intercept_name = "intercept_unary_unary"


class _InterceptedStreamUnary(_UnaryResponse, StreamUnaryMultiCallable):
    intercept_name = "intercept_stream_unary"


class _InterceptedUnaryStream(_StreamResponse, UnaryStreamMultiCallable):
    intercept_name = "intercept_unary_stream"


class _InterceptedStreamStream(_StreamResponse, StreamStreamMultiCallable):
    intercept_name = "intercept_stream_stream"


class _InterceptedChannel(Channel):
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
