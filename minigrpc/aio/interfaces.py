"""grpc.aio's abstract classes, for code that subclasses them or checks ``isinstance`` against them.

grpcio's asyncio API, like its blocking one (:mod:`minigrpc.driver.interfaces`), is a set of
abstract classes with private implementations: the calls (``RpcContext``, ``Call`` and one class per
kind), the four multi-callables, ``Channel``, ``Server`` and the handler's ``ServicerContext``.
Code relies on that shape: a test double or a wrapper subclasses ``grpc.aio.Channel`` and must
implement what it declares (instantiating it without raises TypeError), and code checks what it
is given (``isinstance(call, grpc.aio.UnaryUnaryCall)``).  So minigrpc.aio exports these classes
under the same names with the same abstract methods, and its own objects are private subclasses
of them (:mod:`minigrpc.aio.call`, ``_channel``, ``_server``, ``_servicer_context``).

Definitions only: no behaviour and no imports beyond the standard library (the types in the
signatures are named in annotations only), so that the client and the server build on them alike.
The calls, the multi-callables and the context are generic in the request and response types,
as grpcio's are, so that ``grpc.aio.UnaryUnaryCall[Request, Response]`` is a valid annotation.

An ``isinstance`` check against one of these classes goes through ``ABCMeta``, far slower than
against a plain class: nothing on a call's path checks against them.
"""

import abc
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Generator,
    Generic,
    Iterable,
    Mapping,
    NoReturn,
    Optional,
    Tuple,
    TypeVar,
    overload,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ..driver.connectivity import ChannelConnectivity
    from ..protocol.enums import StatusCode
    from .metadata import Metadata

__all__ = [
    "Call",
    "Channel",
    "RpcContext",
    "Server",
    "ServicerContext",
    "StreamStreamCall",
    "StreamStreamMultiCallable",
    "StreamUnaryCall",
    "StreamUnaryMultiCallable",
    "UnaryStreamCall",
    "UnaryStreamMultiCallable",
    "UnaryUnaryCall",
    "UnaryUnaryMultiCallable",
]

RequestType = TypeVar("RequestType")
ResponseType = TypeVar("ResponseType")
#: What a channel's response deserializer returns: the type its calls' responses have (bytes
#: without a deserializer), so that ``await channel.unary_unary(...)(request)`` is typed.
Response = TypeVar("Response")

#: Metadata as callers pass it: an ``aio.Metadata`` or ``(key, value)`` pairs.
MetadataArg = Optional[Iterable[Tuple[str, Any]]]
#: A message's (de)serializer, None for bytes as they are.
Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]


# -- client: the calls ----------------------------------------------------------------------------


class RpcContext(metaclass=abc.ABCMeta):
    """What every asyncio call is: something that ends, may be cancelled and has a deadline."""

    __slots__ = ()

    @abc.abstractmethod
    def cancelled(self) -> bool:
        """True if the call ended cancelled."""

    @abc.abstractmethod
    def done(self) -> bool:
        """True once the call has ended, however it ended."""

    @abc.abstractmethod
    def time_remaining(self) -> Optional[float]:
        """Seconds left before the deadline, or None without one."""

    @abc.abstractmethod
    def cancel(self) -> bool:
        """End the call CANCELLED; False if it had already ended."""

    @abc.abstractmethod
    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Run ``callback(call)`` once the call has ended (at once if it has)."""


class Call(RpcContext, metaclass=abc.ABCMeta):
    """A client call: its metadata both ways and its status, each awaited until known."""

    __slots__ = ()

    @abc.abstractmethod
    async def initial_metadata(self) -> "Metadata":
        """The server's response headers, once they arrive."""

    @abc.abstractmethod
    async def trailing_metadata(self) -> "Metadata":
        """The server's trailers, once the call has ended."""

    @abc.abstractmethod
    async def code(self) -> "StatusCode":
        """The call's status code, once it has ended."""

    @abc.abstractmethod
    async def details(self) -> str:
        """The call's status message, once it has ended."""

    @abc.abstractmethod
    async def wait_for_connection(self) -> None:
        """Return once the call is on a connection; raise the error it ended with before."""


class UnaryUnaryCall(Generic[RequestType, ResponseType], Call, metaclass=abc.ABCMeta):
    """A call with one request and one response: ``await`` it for the response."""

    __slots__ = ()

    @abc.abstractmethod
    def __await__(self) -> Generator[Any, None, ResponseType]:
        """The response, or the call's error raised."""


class UnaryStreamCall(Generic[RequestType, ResponseType], Call, metaclass=abc.ABCMeta):
    """A call with a response stream: ``async for`` over it, or ``read()`` each response."""

    __slots__ = ()

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[ResponseType]:
        """The responses, in order."""

    @abc.abstractmethod
    async def read(self) -> Any:
        """The next response, or ``aio.EOF`` once the stream has ended."""


class StreamUnaryCall(Generic[RequestType, ResponseType], Call, metaclass=abc.ABCMeta):
    """A call with a request stream: ``write()`` then ``done_writing()``, then ``await`` it."""

    __slots__ = ()

    @abc.abstractmethod
    async def write(self, request: RequestType) -> None:
        """Send one request."""

    @abc.abstractmethod
    async def done_writing(self) -> None:
        """End the request stream (half-close)."""

    @abc.abstractmethod
    def __await__(self) -> Generator[Any, None, ResponseType]:
        """The response, or the call's error raised."""


class StreamStreamCall(Generic[RequestType, ResponseType], Call, metaclass=abc.ABCMeta):
    """A call streaming both ways: ``write()``/``done_writing()`` and ``read()``/``async for``."""

    __slots__ = ()

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[ResponseType]:
        """The responses, in order."""

    @abc.abstractmethod
    async def read(self) -> Any:
        """The next response, or ``aio.EOF`` once the stream has ended."""

    @abc.abstractmethod
    async def write(self, request: RequestType) -> None:
        """Send one request."""

    @abc.abstractmethod
    async def done_writing(self) -> None:
        """End the request stream (half-close)."""


# -- client: the multi-callables and the channel --------------------------------------------------


class UnaryUnaryMultiCallable(Generic[RequestType, ResponseType], abc.ABC):
    """Starts calls of a unary method: ``await stub.Method(request)``."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request: RequestType,
        *,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> UnaryUnaryCall[RequestType, ResponseType]:
        """Start a call with ``request``; its outcome is the call's."""


class UnaryStreamMultiCallable(Generic[RequestType, ResponseType], abc.ABC):
    """Starts calls of a server-streaming method."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request: RequestType,
        *,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> UnaryStreamCall[RequestType, ResponseType]:
        """Start a call with ``request``; iterate it for the responses."""


class StreamUnaryMultiCallable(Generic[RequestType, ResponseType], abc.ABC):
    """Starts calls of a client-streaming method."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request_iterator: Any = None,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> StreamUnaryCall[RequestType, ResponseType]:
        """Start a call sending ``request_iterator``'s messages, or none: then ``write()``."""


class StreamStreamMultiCallable(Generic[RequestType, ResponseType], abc.ABC):
    """Starts calls of a bidirectional-streaming method."""

    __slots__ = ()

    @abc.abstractmethod
    def __call__(
        self,
        request_iterator: Any = None,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> StreamStreamCall[RequestType, ResponseType]:
        """Start a call sending ``request_iterator``'s messages, or none: then ``write()``."""


class Channel(abc.ABC):
    """A client's way to a server: multi-callables per method, a connectivity state, ``close``."""

    __slots__ = ()

    @abc.abstractmethod
    async def __aenter__(self) -> Any:
        """The channel itself."""

    @abc.abstractmethod
    async def __aexit__(self, *exc_info: object) -> None:
        """Close the channel (no grace)."""

    @abc.abstractmethod
    async def close(self, grace: Optional[float] = None) -> None:
        """Close the channel; calls still running get ``grace`` seconds, then are cancelled."""

    @abc.abstractmethod
    def get_state(self, try_to_connect: bool = False) -> "ChannelConnectivity":
        """The connectivity state; ``try_to_connect`` starts connecting an idle channel."""

    @abc.abstractmethod
    async def wait_for_state_change(self, last_observed_state: "ChannelConnectivity") -> None:
        """Return once the state differs from ``last_observed_state``."""

    @abc.abstractmethod
    async def channel_ready(self) -> None:
        """Connect if needed; return once the channel is READY."""

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable[Any, bytes]: ...

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable[Any, Response]: ...

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable[Any, Response]: ...

    @abc.abstractmethod
    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable[Any, Any]:
        """The multi-callable of a unary method (``/package.Service/Method``)."""

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable[Any, bytes]: ...

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable[Any, Response]: ...

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable[Any, Response]: ...

    @abc.abstractmethod
    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable[Any, Any]:
        """The multi-callable of a server-streaming method."""

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable[Any, bytes]: ...

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable[Any, Response]: ...

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable[Any, Response]: ...

    @abc.abstractmethod
    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable[Any, Any]:
        """The multi-callable of a client-streaming method."""

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable[Any, bytes]: ...

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable[Any, Response]: ...

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable[Any, Response]: ...

    @abc.abstractmethod
    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable[Any, Any]:
        """The multi-callable of a bidirectional-streaming method."""


# -- server ---------------------------------------------------------------------------------------


class Server(abc.ABC):
    """An asyncio server: handlers and ports added before ``start()``, then ``stop(grace)``."""

    __slots__ = ()

    @abc.abstractmethod
    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Serve the methods these handlers (each with ``service(details)``) know."""

    def add_registered_method_handlers(  # noqa: B027 - a no-op on purpose (docstring)
        self, service_name: str, method_handlers: Mapping[str, Any]
    ) -> None:
        """Serve ``{method: RpcMethodHandler}`` of ``service_name``.

        Not abstract, and a no-op here, as in grpcio: code generated by grpcio-tools >= 1.62
        calls it after ``add_generic_rpc_handlers`` with the same methods, so a server that
        implements only the generic registration still serves them.
        """

    @abc.abstractmethod
    def add_insecure_port(self, address: str) -> int:
        """Listen in plaintext on ``address``; the port bound."""

    @abc.abstractmethod
    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen with these credentials on ``address``; the port bound."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Start serving."""

    @abc.abstractmethod
    async def stop(self, grace: Optional[float]) -> None:
        """Stop serving; calls in flight get ``grace`` seconds (none with None)."""

    @abc.abstractmethod
    async def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Wait until the server has stopped; True if ``timeout`` passed first."""


class ServicerContext(Generic[RequestType, ResponseType], abc.ABC):
    """What an asyncio handler gets besides its request: the call's metadata, its peer, and the
    means to read, write, set the status or abort.

    The abstract methods are grpcio's.  The status accessors and the call's lifecycle below
    are not abstract in grpcio either (a subclass written against an older grpcio need not
    have them): here they raise NotImplementedError until a subclass provides them.
    """

    __slots__ = ()

    @abc.abstractmethod
    async def read(self) -> Any:
        """The next request of a request-streaming call, or ``aio.EOF``."""

    @abc.abstractmethod
    async def write(self, message: Any) -> None:
        """Send one response of a response-streaming call."""

    @abc.abstractmethod
    async def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Send the response headers now, with this metadata."""

    @abc.abstractmethod
    async def abort(
        self, code: Any, details: str = "", trailing_metadata: Iterable[Tuple[str, Any]] = ()
    ) -> NoReturn:
        """End the call with this status; always raises."""

    @abc.abstractmethod
    async def abort_with_status(self, status: Any) -> NoReturn:
        """``abort`` with a ``grpc.Status``; always raises."""

    @abc.abstractmethod
    def set_trailing_metadata(self, trailing_metadata: Iterable[Tuple[str, Any]]) -> None:
        """The metadata the trailers will carry."""

    @abc.abstractmethod
    def invocation_metadata(self) -> Any:
        """The metadata the client sent."""

    @abc.abstractmethod
    def set_code(self, code: Any) -> None:
        """The status code the call will end with."""

    @abc.abstractmethod
    def set_details(self, details: str) -> None:
        """The status message the call will end with."""

    @abc.abstractmethod
    def set_compression(self, compression: Optional[int]) -> None:
        """Compress the responses with this algorithm."""

    @abc.abstractmethod
    def disable_next_message_compression(self) -> None:
        """Send the next response uncompressed."""

    @abc.abstractmethod
    def peer(self) -> str:
        """The client's address (``ipv4:host:port``, ``unix:path``)."""

    @abc.abstractmethod
    def peer_identities(self) -> Optional[Iterable[bytes]]:
        """The client's authenticated identities, or None."""

    @abc.abstractmethod
    def peer_identity_key(self) -> Optional[str]:
        """The auth context property that names the identities, or None."""

    @abc.abstractmethod
    def auth_context(self) -> Mapping[str, Iterable[bytes]]:
        """The call's auth context properties."""

    def time_remaining(self) -> Optional[float]:
        """Seconds left before the deadline, or None without one."""
        raise NotImplementedError()

    def trailing_metadata(self) -> Any:
        """The trailing metadata set so far."""
        raise NotImplementedError()

    def code(self) -> Any:
        """The status code set so far."""
        raise NotImplementedError()

    def details(self) -> Any:
        """The status message set so far."""
        raise NotImplementedError()

    def add_done_callback(self, callback: Callable[[Any], Any]) -> None:
        """Run ``callback(context)`` once the call has ended."""
        raise NotImplementedError()

    def cancelled(self) -> bool:
        """True if the call ended cancelled."""
        raise NotImplementedError()

    def done(self) -> bool:
        """True once the call has ended."""
        raise NotImplementedError()
