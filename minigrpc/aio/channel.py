"""The asyncio channel and its four multi-callables, with grpcio's ``grpc.aio`` signatures.

A channel's options, credentials, header block, compression choice and message framing are the
blocking channel's (:mod:`minigrpc.blocking.channel`, :mod:`minigrpc.blocking.multicallables`): the
asyncio channel keeps one of those as its *settings* and swaps only the transport
(:class:`~minigrpc.aio.transport.AioTransport`).
"""

import asyncio
from typing import (
    Any,
    Callable,
    Generic,
    Iterable,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    TypeVar,
    cast,
    overload,
)

from ..blocking import channel as blocking
from ..blocking.multicallables import _Invocation, _Method
from ..driver.connectivity import ChannelConnectivity
from ..protocol.status import RpcError
from ..protocol.targets import Target
from ..protocol.wire import MetadataTypeError
from . import interfaces
from .call import (
    Call,
    Invocation,
    StreamStreamCall,
    StreamUnaryCall,
    UnaryStreamCall,
    UnaryUnaryCall,
    failed_status,
)
from .errors import UsageError
from .interceptors import ClientCallDetails, intercept, split_interceptors
from .metadata import Metadata
from .transport import AioTransport

Options = Optional[Sequence[Tuple[str, Any]]]
MetadataArg = Optional[Iterable[Tuple[str, Any]]]
#: The response type of a channel's multi-callables: what their deserializer returns, else bytes.
Response = TypeVar("Response")


class _Settings(blocking.Channel):
    """A plaintext channel's settings, with an asyncio transport behind them."""

    def __init__(self, owner: "Channel", *args: Any) -> None:
        self._owner = owner
        super().__init__(*args)

    def _make_transport(self, target: Target) -> Any:
        return AioTransport(
            target, self.config.transport, self.client_tls(target), self._owner._set_state
        )


class _SecureSettings(_Settings, blocking.SecureChannel):
    """A secure channel's settings: TLS and call credentials as in the blocking API."""


class Channel(interfaces.Channel):
    """An asyncio channel (grpcio's ``grpc.aio.Channel``): one HTTP/2 connection for every call
    made from its event loop.  ``await channel.close()`` or ``async with`` closes it."""

    def __init__(
        self,
        target: str,
        options: Options = None,
        compression: Optional[int] = None,
        credentials: Any = None,
        interceptors: Optional[Sequence[Any]] = None,
    ) -> None:
        self._state = ChannelConnectivity.IDLE
        self._state_changed: Optional[asyncio.Event] = None
        self._calls: Set[Call] = set()
        self._connecting: Optional[asyncio.Task[None]] = None
        if credentials is None:
            self._settings: blocking.Channel = _Settings(self, target, options, compression)
        else:
            self._settings = _SecureSettings(self, target, credentials, options, compression)
        if self._settings.transport is None:
            self._state = ChannelConnectivity.TRANSIENT_FAILURE
        self._interceptors = split_interceptors(interceptors)

    @property
    def _transport(self) -> Optional[AioTransport]:
        return self._settings.transport  # type: ignore[return-value]

    # -- connectivity -----------------------------------------------------------------------

    def _set_state(self, state: ChannelConnectivity) -> None:
        if state is self._state or self._state is ChannelConnectivity.SHUTDOWN:
            return
        self._state = state
        changed, self._state_changed = self._state_changed, None
        if changed is not None:
            changed.set()

    def get_state(self, try_to_connect: bool = False) -> ChannelConnectivity:
        """The connectivity state; ``try_to_connect`` starts connecting an IDLE channel."""
        if try_to_connect and self._state in (
            ChannelConnectivity.IDLE,
            ChannelConnectivity.TRANSIENT_FAILURE,
        ):
            self._try_to_connect()
        return self._state

    def _try_to_connect(self) -> None:
        transport = self._transport
        if transport is None or (self._connecting is not None and not self._connecting.done()):
            return

        async def connect() -> None:
            backoff = transport.options.initial_backoff
            while not transport.closed:
                try:
                    await transport.connection(None)
                    return
                except Exception:
                    pass
                await asyncio.sleep(backoff)
                backoff = min(
                    backoff * transport.options.backoff_multiplier, transport.options.max_backoff
                )

        self._connecting = asyncio.get_running_loop().create_task(connect())

    async def wait_for_state_change(self, last_observed_state: ChannelConnectivity) -> None:
        """Return once the state differs from ``last_observed_state``; UsageError on a closed
        channel (as grpcio: SHUTDOWN never changes)."""
        if self._state is ChannelConnectivity.SHUTDOWN:
            raise UsageError("Channel is closed.")
        while self._state is last_observed_state:
            if self._state_changed is None:
                self._state_changed = asyncio.Event()
            await self._state_changed.wait()

    async def channel_ready(self) -> None:
        """Connect if needed and return once the channel is READY."""
        while True:
            state = self.get_state(try_to_connect=True)
            if state is ChannelConnectivity.READY:
                return
            if state is ChannelConnectivity.SHUTDOWN:
                raise asyncio.InvalidStateError("the channel is closed")
            await self.wait_for_state_change(state)

    # -- closing ----------------------------------------------------------------------------

    async def close(self, grace: Optional[float] = None) -> None:
        """Close the channel.  Calls still running get ``grace`` seconds to end, then end
        CANCELLED ("Channel closed!"), as in grpcio."""
        self._settings.closed = True
        running = [call._running() for call in self._calls if not call.done()]
        if grace and running:
            await asyncio.wait(running, timeout=grace)
        if self._connecting is not None:
            self._connecting.cancel()
        transport = self._transport
        if transport is not None:
            transport.close()
        self._set_state(ChannelConnectivity.SHUTDOWN)
        running = [call._running() for call in self._calls if not call.done()]
        if running:
            await asyncio.wait(running)

    async def __aenter__(self) -> "Channel":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(None)

    # -- multi-callables --------------------------------------------------------------------

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryUnaryMultiCallable[Any, bytes]": ...

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]],
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryUnaryMultiCallable[Any, Response]": ...

    @overload
    def unary_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryUnaryMultiCallable[Any, Response]": ...

    def unary_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: Optional[Callable[[bytes], Any]] = None,
        _registered_method: Optional[bool] = False,
    ) -> "UnaryUnaryMultiCallable":
        return UnaryUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryStreamMultiCallable[Any, bytes]": ...

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]],
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryStreamMultiCallable[Any, Response]": ...

    @overload
    def unary_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.UnaryStreamMultiCallable[Any, Response]": ...

    def unary_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: Optional[Callable[[bytes], Any]] = None,
        _registered_method: Optional[bool] = False,
    ) -> "UnaryStreamMultiCallable":
        return UnaryStreamMultiCallable(self, method, request_serializer, response_deserializer)

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamUnaryMultiCallable[Any, bytes]": ...

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]],
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamUnaryMultiCallable[Any, Response]": ...

    @overload
    def stream_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamUnaryMultiCallable[Any, Response]": ...

    def stream_unary(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: Optional[Callable[[bytes], Any]] = None,
        _registered_method: Optional[bool] = False,
    ) -> "StreamUnaryMultiCallable":
        return StreamUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: None = None,
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamStreamMultiCallable[Any, bytes]": ...

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]],
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamStreamMultiCallable[Any, Response]": ...

    @overload
    def stream_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        *,
        response_deserializer: Callable[[bytes], Response],
        _registered_method: Optional[bool] = False,
    ) -> "interfaces.StreamStreamMultiCallable[Any, Response]": ...

    def stream_stream(
        self,
        method: str,
        request_serializer: Optional[Callable[[Any], bytes]] = None,
        response_deserializer: Optional[Callable[[bytes], Any]] = None,
        _registered_method: Optional[bool] = False,
    ) -> "StreamStreamMultiCallable":
        return StreamStreamMultiCallable(self, method, request_serializer, response_deserializer)

    def __repr__(self) -> str:
        return f"<minigrpc.aio.Channel {self._state.name}>"


CallT = TypeVar("CallT", bound=Call)


class _MultiCallable(Generic[CallT]):
    """What the four share: the channel, the path, the (de)serializers and call start-up.

    A call starts as in the blocking API (:class:`minigrpc.blocking.multicallables._Invocation`
    validates the metadata, builds the header factory, chooses the compression and frames each
    message); only the transport that runs it is the asyncio one.
    """

    _call_class: Type[Call] = Call
    _kind = ""

    def __init__(
        self,
        channel: Channel,
        method: Any,
        request_serializer: Optional[Callable[[Any], bytes]],
        response_deserializer: Optional[Callable[[bytes], Any]],
    ) -> None:
        self._channel = channel
        self._method = _Method(channel._settings, method, request_serializer, response_deserializer)

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
        interceptors = self._channel._interceptors.get(self._kind)
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
        method = self._method
        if details.method != method.path:
            method = _Method(
                self._channel._settings, details.method, method.serializer, method.deserializer
            )
        return self._start_call(
            method,
            argument,
            details.timeout,
            details.metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def _start_call(
        self,
        method: _Method,
        argument: Any,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
    ) -> CallT:
        channel = self._channel
        call_class: Any = self._call_class
        request, request_iterator = (
            (None, argument) if call_class._streaming_request else (argument, None)
        )
        try:
            start = _Invocation(
                method, timeout, _plain_metadata(metadata), credentials, compression
            )
            method.raise_if_no_target()
        except MetadataTypeError:
            raise
        except ValueError as exc:  # a closed channel
            raise UsageError(str(exc)) from None
        except RpcError as exc:
            return call_class(None, request, request_iterator, failed_status(exc))
        transport = channel._transport
        assert transport is not None
        invocation = Invocation(transport, start, bool(wait_for_ready))
        call = call_class(invocation, request, request_iterator)
        channel._calls.add(call)
        call.add_done_callback(channel._calls.discard)
        return call


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


def insecure_channel(
    target: str,
    options: Options = None,
    compression: Optional[int] = None,
    interceptors: Optional[Sequence[Any]] = None,
) -> Channel:
    """A plaintext asyncio channel to ``target`` (``unix:path``, ``unix-abstract:name``,
    ``host:port``); nothing connects until the first call or ``channel_ready()``."""
    return Channel(target, options, compression, None, interceptors)


def secure_channel(
    target: str,
    credentials: Any,
    options: Options = None,
    compression: Optional[int] = None,
    interceptors: Optional[Sequence[Any]] = None,
) -> Channel:
    """A TLS asyncio channel (``asyncio``'s ssl) with the blocking API's credentials."""
    return Channel(target, options, compression, credentials, interceptors)


__all__: List[str] = [
    "Channel",
    "ClientCallDetails",
    "StreamStreamMultiCallable",
    "StreamUnaryMultiCallable",
    "UnaryStreamMultiCallable",
    "UnaryUnaryMultiCallable",
    "insecure_channel",
    "secure_channel",
]
