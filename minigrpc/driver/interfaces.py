"""grpcio's abstract classes, for code that subclasses them or checks ``isinstance`` against them.

grpcio's API is a set of abstract classes (``grpc.Future``, ``grpc.Call``, ``grpc.Channel``,
``grpc.ServicerContext``, ``grpc.RpcMethodHandler``, the interceptors, ...) with private concrete
implementations.  Code written for grpcio relies on that shape in two ways: it subclasses them
(a handler that sets the eight ``RpcMethodHandler`` attributes in its own ``__init__``, a test
double that is a ``grpc.ServicerContext``, an interceptor's own ``grpc.Call``), and it checks what
it is given (``isinstance(response, grpc.Future)``).  So minigrpc exports these classes under the
same names, with the same abstract methods, and its own objects derive from them: a call from
``with_call``, a failed call's :class:`~minigrpc.RpcError`, a streaming call, every future and
every context is an instance of the grpcio class it stands for.

These are definitions only: no behaviour, no imports beyond the standard library (the status
codes are named in annotations only), so that both transports and the API layer can build on
them.  The signatures carry type hints, which is what ``mypy --strict`` checks user code against
when it does ``import minigrpc as grpc``.
"""

import abc
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ..protocol.enums import StatusCode
    from ..protocol.status import Metadata, Status

__all__ = [
    "AuthMetadataContext",
    "AuthMetadataPlugin",
    "AuthMetadataPluginCallback",
    "Call",
    "Channel",
    "ClientCallDetails",
    "Future",
    "GenericRpcHandler",
    "HandlerCallDetails",
    "RpcContext",
    "RpcMethodHandler",
    "Server",
    "ServerInterceptor",
    "ServiceRpcHandler",
    "ServicerContext",
    "StreamStreamClientInterceptor",
    "StreamStreamMultiCallable",
    "StreamUnaryClientInterceptor",
    "StreamUnaryMultiCallable",
    "UnaryStreamClientInterceptor",
    "UnaryStreamMultiCallable",
    "UnaryUnaryClientInterceptor",
    "UnaryUnaryMultiCallable",
]

#: Metadata as callers pass it: ``(key, value)`` pairs, ``bytes`` values for ``-bin`` keys.
MetadataArg = Optional[Sequence[Tuple[str, Union[str, bytes]]]]


# -- client: futures and calls --------------------------------------------------------------------


class Future(abc.ABC):
    """A computation that finishes later: grpcio's ``grpc.Future`` (after ``concurrent.futures``).

    ``result()`` and ``exception()`` raise ``FutureTimeoutError`` when ``timeout`` passes first
    and ``FutureCancelledError`` for a cancelled computation.
    """

    __slots__ = ()

    @abc.abstractmethod
    def cancel(self) -> bool:
        """Try to cancel; False if the computation has already finished."""

    @abc.abstractmethod
    def cancelled(self) -> bool:
        """Whether it was cancelled before it finished."""

    @abc.abstractmethod
    def running(self) -> bool:
        """Whether it is still going on (neither finished nor cancelled)."""

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether it has finished or was cancelled."""

    @abc.abstractmethod
    def result(self, timeout: Optional[float] = None) -> Any:
        """Wait for the value; raise the computation's exception if it failed."""

    @abc.abstractmethod
    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """Wait for the end; the exception it failed with, or None."""

    @abc.abstractmethod
    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        """Wait for the end; the traceback of its exception, or None."""

    @abc.abstractmethod
    def add_done_callback(self, fn: Callable[["Future"], None]) -> None:
        """Call ``fn(self)`` once it is done (at once if it already is)."""


class RpcContext(abc.ABC):
    """What every RPC offers, on either side: grpcio's ``grpc.RpcContext``."""

    __slots__ = ()

    @abc.abstractmethod
    def is_active(self) -> bool:
        """Whether the RPC is still running."""

    @abc.abstractmethod
    def time_remaining(self) -> Optional[float]:
        """Seconds left before the deadline, or None without one."""

    @abc.abstractmethod
    def cancel(self) -> Any:
        """Cancel the RPC (a no-op once it has ended)."""

    @abc.abstractmethod
    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Run ``callback()`` when the RPC ends; False, without it, if it has ended already."""


class Call(RpcContext):
    """An RPC seen from the client: grpcio's ``grpc.Call``.

    The accessors wait: ``initial_metadata()`` for the response headers, the others for the end.
    """

    __slots__ = ()

    @abc.abstractmethod
    def initial_metadata(self) -> "Metadata":
        """The server's response headers, as metadata."""

    @abc.abstractmethod
    def trailing_metadata(self) -> "Metadata":
        """The server's trailers, as metadata."""

    @abc.abstractmethod
    def code(self) -> "StatusCode":
        """The status code the RPC ended with."""

    @abc.abstractmethod
    def details(self) -> Optional[str]:
        """The status message the RPC ended with."""


class ClientCallDetails(abc.ABC):
    """What a client interceptor may read and replace about a call: grpcio's class."""

    method: str
    timeout: Optional[float]
    metadata: MetadataArg
    credentials: Any
    wait_for_ready: Optional[bool]
    compression: Any


# -- client: multi-callables and channels ---------------------------------------------------------


class UnaryUnaryMultiCallable(abc.ABC):
    """Invokes one unary-unary method: grpcio's ``grpc.UnaryUnaryMultiCallable``."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Call and wait: the response, or an ``RpcError``."""

    @abc.abstractmethod
    def with_call(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Tuple[Any, Call]:
        """Call and wait: the response and the :class:`Call`."""

    @abc.abstractmethod
    def future(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Start the call: an object that is both a :class:`Call` and a :class:`Future`."""


class UnaryStreamMultiCallable(abc.ABC):
    """Invokes one unary-stream method: grpcio's ``grpc.UnaryStreamMultiCallable``."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Start the call: an iterator of responses that is also a Call and a Future."""


class StreamUnaryMultiCallable(abc.ABC):
    """Invokes one stream-unary method: grpcio's ``grpc.StreamUnaryMultiCallable``."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request_iterator: Iterator[Any],
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Send every request and wait: the response, or an ``RpcError``."""

    @abc.abstractmethod
    def with_call(
        self,
        request_iterator: Iterator[Any],
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Tuple[Any, Call]:
        """Send every request and wait: the response and the :class:`Call`."""

    @abc.abstractmethod
    def future(
        self,
        request_iterator: Iterator[Any],
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Start the call: an object that is both a :class:`Call` and a :class:`Future`."""


class StreamStreamMultiCallable(abc.ABC):
    """Invokes one stream-stream method: grpcio's ``grpc.StreamStreamMultiCallable``."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request_iterator: Iterator[Any],
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Any = None,
    ) -> Any:
        """Start the call: an iterator of responses that is also a Call and a Future."""


Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]


class Channel(abc.ABC):
    """A client's view of a server: grpcio's ``grpc.Channel``."""

    __slots__ = ()

    @abc.abstractmethod
    def subscribe(self, callback: Callable[[Any], None], try_to_connect: bool = False) -> None:
        """Call ``callback(ChannelConnectivity)`` now and on every change."""

    @abc.abstractmethod
    def unsubscribe(self, callback: Callable[[Any], None]) -> None:
        """Stop telling ``callback``."""

    @abc.abstractmethod
    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable:
        """A multi-callable for one unary-unary method (``/package.Service/Method``)."""

    @abc.abstractmethod
    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable:
        """A multi-callable for one unary-stream method."""

    @abc.abstractmethod
    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable:
        """A multi-callable for one stream-unary method."""

    @abc.abstractmethod
    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable:
        """A multi-callable for one stream-stream method."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the channel; calls still running end CANCELLED."""

    def __enter__(self) -> "Channel":
        raise NotImplementedError()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Optional[bool]:
        raise NotImplementedError()


# -- client: interceptors -------------------------------------------------------------------------

#: What a client interceptor's ``continuation`` is: ``continuation(details, request)``.
Continuation = Callable[[ClientCallDetails, Any], Any]


class UnaryUnaryClientInterceptor(abc.ABC):
    """Sees every unary-unary call of an intercepted channel (``intercept_channel``)."""

    @abc.abstractmethod
    def intercept_unary_unary(
        self, continuation: Continuation, client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        """Return what ``continuation(details, request)`` returns, or an equivalent."""


class UnaryStreamClientInterceptor(abc.ABC):
    """Sees every unary-stream call of an intercepted channel."""

    @abc.abstractmethod
    def intercept_unary_stream(
        self, continuation: Continuation, client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        """Return what ``continuation(details, request)`` returns, or an equivalent."""


class StreamUnaryClientInterceptor(abc.ABC):
    """Sees every stream-unary call of an intercepted channel."""

    @abc.abstractmethod
    def intercept_stream_unary(
        self,
        continuation: Continuation,
        client_call_details: ClientCallDetails,
        request_iterator: Iterator[Any],
    ) -> Any:
        """Return what ``continuation(details, request_iterator)`` returns, or an equivalent."""


class StreamStreamClientInterceptor(abc.ABC):
    """Sees every stream-stream call of an intercepted channel."""

    @abc.abstractmethod
    def intercept_stream_stream(
        self,
        continuation: Continuation,
        client_call_details: ClientCallDetails,
        request_iterator: Iterator[Any],
    ) -> Any:
        """Return what ``continuation(details, request_iterator)`` returns, or an equivalent."""


# -- call credentials -----------------------------------------------------------------------------


class AuthMetadataContext(abc.ABC):
    """What a metadata plugin is told about a call: ``service_url`` and ``method_name``."""

    service_url: str
    method_name: str


class AuthMetadataPluginCallback(abc.ABC):  # noqa: B024 - not abstract in grpcio either
    """How a metadata plugin answers: ``callback(metadata, error)``."""

    def __call__(self, metadata: MetadataArg, error: Optional[BaseException]) -> None:
        """Give the call's metadata, or the error that prevents it."""
        raise NotImplementedError()


class AuthMetadataPlugin(abc.ABC):  # noqa: B024 - not abstract in grpcio either
    """The source of per-call metadata behind ``metadata_call_credentials``."""

    def __call__(self, context: AuthMetadataContext, callback: AuthMetadataPluginCallback) -> None:
        """Answer through ``callback`` (now or later, from any thread)."""
        raise NotImplementedError()


# -- server ---------------------------------------------------------------------------------------


class ServicerContext(RpcContext):
    """What a handler is given beside its request: grpcio's ``grpc.ServicerContext``.

    ``abort`` and ``abort_with_status`` never return: they raise, and the server ends the call
    with the status they recorded.
    """

    __slots__ = ()

    @abc.abstractmethod
    def invocation_metadata(self) -> Sequence[Tuple[str, Union[str, bytes]]]:
        """The client's metadata."""

    @abc.abstractmethod
    def peer(self) -> str:
        """The client's address (``ipv4:127.0.0.1:5432``, ``unix:/path``, ...)."""

    @abc.abstractmethod
    def peer_identities(self) -> Optional[Sequence[bytes]]:
        """The authenticated client's identities, or None."""

    @abc.abstractmethod
    def peer_identity_key(self) -> Optional[str]:
        """The auth context key the identities come from, or None."""

    @abc.abstractmethod
    def auth_context(self) -> Mapping[str, Sequence[bytes]]:
        """The connection's authentication properties."""

    def set_compression(self, compression: Any) -> None:
        """Compress the responses with this ``grpc.Compression``."""
        raise NotImplementedError()

    @abc.abstractmethod
    def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Send the response headers now, with this metadata."""

    @abc.abstractmethod
    def set_trailing_metadata(self, trailing_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Metadata for the trailers."""

    def trailing_metadata(self) -> Any:
        """The trailing metadata set so far."""
        raise NotImplementedError()

    @abc.abstractmethod
    def abort(self, code: "StatusCode", details: str) -> NoReturn:
        """End the call with ``code`` and ``details`` by raising; never returns."""

    @abc.abstractmethod
    def abort_with_status(self, status: "Status") -> NoReturn:
        """``abort`` with a ``grpc.Status`` (code, details and trailing metadata)."""

    @abc.abstractmethod
    def set_code(self, code: "StatusCode") -> None:
        """The status code the call ends with when the handler returns."""

    @abc.abstractmethod
    def set_details(self, details: str) -> None:
        """The status message the call ends with when the handler returns."""

    def code(self) -> Any:
        """The code set so far, or None."""
        raise NotImplementedError()

    def details(self) -> Any:
        """The details set so far (bytes, as grpcio), or None."""
        raise NotImplementedError()

    def disable_next_message_compression(self) -> None:
        """Send the next response uncompressed."""
        raise NotImplementedError()


class HandlerCallDetails(abc.ABC):
    """What a generic handler is told about an incoming call: ``method`` and metadata."""

    method: str
    invocation_metadata: Any


class RpcMethodHandler(abc.ABC):
    """How to run one method: grpcio's ``grpc.RpcMethodHandler``.

    Eight attributes, no methods: ``request_streaming`` and ``response_streaming`` choose the
    shape, the (de)serializers convert messages (None: bytes as they are), and the one of
    ``unary_unary``, ``unary_stream``, ``stream_unary`` and ``stream_stream`` that matches the
    shape is the behaviour (the others are None).  Subclasses set them however they like, in
    ``__init__`` or as class attributes; minigrpc's own (from ``unary_unary_rpc_method_handler``
    and its siblings) is a named tuple.
    """

    request_streaming: bool
    response_streaming: bool
    request_deserializer: Deserializer
    response_serializer: Serializer
    unary_unary: Optional[Callable[[Any, Any], Any]]
    unary_stream: Optional[Callable[[Any, Any], Iterator[Any]]]
    stream_unary: Optional[Callable[[Iterator[Any], Any], Any]]
    stream_stream: Optional[Callable[[Iterator[Any], Any], Iterator[Any]]]


class GenericRpcHandler(abc.ABC):
    """Finds the handler of an incoming call by its method path: grpcio's class."""

    @abc.abstractmethod
    def service(self, handler_call_details: HandlerCallDetails) -> Optional[RpcMethodHandler]:
        """The handler for this call, or None when this object does not serve it."""


class ServiceRpcHandler(GenericRpcHandler):
    """A generic handler for the methods of one service (``/<service>/<method>``)."""

    @abc.abstractmethod
    def service_name(self) -> str:
        """The service's full name, e.g. ``grpc.health.v1.Health``."""


class ServerInterceptor(abc.ABC):
    """Sees every incoming call before its handler is looked up (``server(interceptors=)``)."""

    @abc.abstractmethod
    def intercept_service(
        self,
        continuation: Callable[[HandlerCallDetails], Optional[RpcMethodHandler]],
        handler_call_details: HandlerCallDetails,
    ) -> Optional[RpcMethodHandler]:
        """The handler to run (``continuation(details)`` asks the next one), or None."""


class Server(abc.ABC):
    """Serves RPCs: grpcio's ``grpc.Server``."""

    __slots__ = ()

    @abc.abstractmethod
    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[GenericRpcHandler]) -> None:
        """Serve the methods these generic handlers answer for."""

    def add_registered_method_handlers(  # noqa: B027 - optional, as in grpcio
        self, service_name: str, method_handlers: Mapping[str, RpcMethodHandler]
    ) -> None:
        """Serve ``{method: handler}`` for one service (generated code of grpcio 1.62+)."""

    @abc.abstractmethod
    def add_insecure_port(self, address: str) -> int:
        """Listen for plaintext HTTP/2 on ``address``; the port (for port 0, the one chosen)."""

    @abc.abstractmethod
    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen for HTTP/2 over TLS on ``address``; the port."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start serving (once)."""

    @abc.abstractmethod
    def stop(self, grace: Optional[float]) -> Any:
        """Stop serving; an event that is set once the server has stopped."""

    def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Block until the server has stopped; True if ``timeout`` passed first."""
        raise NotImplementedError()
