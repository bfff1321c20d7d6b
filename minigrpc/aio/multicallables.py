"""The four multi-callables of the asyncio API, with grpcio's ``grpc.aio`` signatures.

A call starts as on the blocking API: :class:`minigrpc.driver.invocation.Invocation` validates
the metadata, builds the header factory, chooses the compression and frames each message; only
the transport that runs it is the asyncio one (:class:`~minigrpc.aio.transport.AsyncTransport`),
and a call made through the channel's interceptors of its kind is an ``InterceptedCall``
(:mod:`minigrpc.aio.interceptors`).
"""

from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    Iterable,
    List,
    Optional,
    Tuple,
    Type,
    TypeVar,
    cast,
)

from ..driver.invocation import CallFailed, Invocation, Method
from ..protocol.wire import MetadataTypeError
from . import interfaces
from .call import Call, StreamStreamCall, StreamUnaryCall, UnaryStreamCall, UnaryUnaryCall
from .errors import UsageError
from .interceptors import ClientCallDetails, intercept
from .metadata import Metadata
from .transport import AsyncTransport

MetadataArg = Optional[Iterable[Tuple[str, Any]]]

__all__ = [
    "StreamStreamMultiCallable",
    "StreamUnaryMultiCallable",
    "UnaryStreamMultiCallable",
    "UnaryUnaryMultiCallable",
]

CallT = TypeVar("CallT", bound=Call)


class _MultiCallable(Generic[CallT]):
    """What the four share: the method, the channel's transport (None: the channel has no
    target, and its calls fail UNAVAILABLE), its client interceptors by kind, and ``track``,
    which the channel hears each call it starts from."""

    _call_class: Type[Call] = Call
    _kind = ""
    #: The argument is a request iterator (or None: the call's ``write()``), not a request.
    _request_streams = False

    def __init__(
        self,
        method: Method,
        transport: Optional[AsyncTransport],
        interceptors: Dict[str, List[Any]],
        track: Callable[[Call], None],
    ) -> None:
        self._method = method
        self._transport = transport
        self._interceptors = interceptors.get(self._kind)
        self._track = track

    def _start(
        self,
        argument: Any,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
    ) -> CallT:
        """Start a call with ``argument`` (a request, or a request iterator), through the
        channel's interceptors of this kind if it has any."""
        interceptors = self._interceptors
        if not interceptors:
            return self._start_call(
                self._method, argument, timeout, metadata, credentials, wait_for_ready, compression
            )
        details = ClientCallDetails(
            self._method.path, timeout, metadata, credentials, wait_for_ready, compression
        )
        if metadata is None:  # grpcio's interceptors always see a Metadata to extend
            details.metadata = Metadata()
        # An InterceptedCall: every method of the call it stands for (grpcio's too).
        return cast(CallT, intercept(interceptors, self._kind, self._invoke, details, argument))

    def _invoke(self, details: ClientCallDetails, argument: Any) -> CallT:
        """Start the call described by ``details`` (what the last interceptor continues to)."""
        return self._start_call(
            self._method.with_path(details.method),
            argument,
            details.timeout,
            details.metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def _start_call(
        self,
        method: Method,
        argument: Any,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
    ) -> CallT:
        call_class: Any = self._call_class
        request, request_iterator = (
            (None, argument) if self._request_streams else (argument, None)
        )
        try:
            invocation = Invocation(
                method,
                timeout,
                _plain_metadata(metadata),
                credentials,
                compression,
                wait_for_ready,
            )
            method.raise_if_no_target()
        except MetadataTypeError:
            raise
        except ValueError as exc:  # a closed channel
            raise UsageError(str(exc)) from None
        except CallFailed as exc:
            return cast(CallT, call_class(None, None, request, request_iterator, exc.status))
        call = call_class(self._transport, invocation, request, request_iterator)
        self._track(call)
        return cast(CallT, call)


def _plain_metadata(metadata: Any) -> Any:
    """``aio.Metadata`` or pairs; the header encoder takes pairs."""
    if metadata is None:
        return None
    return tuple(metadata)


class _UnaryRequestMultiCallable(_MultiCallable[CallT]):
    """A method whose request is one message: ``stub.Method(request, *, timeout=...)``."""

    def __call__(
        self,
        request: Any,
        *,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> CallT:
        return self._start(request, timeout, metadata, credentials, wait_for_ready, compression)


class _StreamRequestMultiCallable(_MultiCallable[CallT]):
    """A method whose request streams: a request iterator (sync or async), or none and then
    the call's ``write()`` and ``done_writing()``."""

    _request_streams = True

    def __call__(
        self,
        request_iterator: Any = None,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> CallT:
        return self._start(
            request_iterator, timeout, metadata, credentials, wait_for_ready, compression
        )


class UnaryUnaryMultiCallable(
    _UnaryRequestMultiCallable[UnaryUnaryCall], interfaces.UnaryUnaryMultiCallable
):
    """Invokes a unary method: ``await stub.Method(request)``."""

    _call_class = UnaryUnaryCall
    _kind = "unary_unary"


class UnaryStreamMultiCallable(
    _UnaryRequestMultiCallable[UnaryStreamCall], interfaces.UnaryStreamMultiCallable
):
    """Invokes a server-streaming method: ``async for response in stub.Method(request)``."""

    _call_class = UnaryStreamCall
    _kind = "unary_stream"


class StreamUnaryMultiCallable(
    _StreamRequestMultiCallable[StreamUnaryCall], interfaces.StreamUnaryMultiCallable
):
    """Invokes a client-streaming method, with a request iterator or ``write()``."""

    _call_class = StreamUnaryCall
    _kind = "stream_unary"


class StreamStreamMultiCallable(
    _StreamRequestMultiCallable[StreamStreamCall], interfaces.StreamStreamMultiCallable
):
    """Invokes a bidirectional-streaming method, with a request iterator or ``write()``."""

    _call_class = StreamStreamCall
    _kind = "stream_stream"
