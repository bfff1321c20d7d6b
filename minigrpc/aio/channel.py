"""The asyncio channel, with grpcio's ``grpc.aio.Channel`` signatures.

A channel's options, credentials, compression and connectivity state are
:class:`minigrpc.driver.channel_core.ChannelCore`'s, as the blocking channel's are; its
connections are :class:`~minigrpc.aio.transport.AsyncTransport`'s and its calls start from the
multi-callables of :mod:`minigrpc.aio.multicallables`.
"""

import asyncio
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, overload

from ..driver.channel_core import ChannelCore
from ..driver.connectivity import ChannelConnectivity
from ..driver.invocation import Method
from . import interfaces
from .call import Call
from .errors import UsageError
from .interceptors import ClientCallDetails, split_interceptors
from .multicallables import (
    StreamStreamMultiCallable,
    StreamUnaryMultiCallable,
    UnaryStreamMultiCallable,
    UnaryUnaryMultiCallable,
)
from .transport import AsyncTransport

Options = Optional[Sequence[Tuple[str, Any]]]
#: The response type of a channel's multi-callables: what their deserializer returns, else bytes.
Response = TypeVar("Response")


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
        self._state_changed: Optional[asyncio.Event] = None
        self._calls: Set[Call] = set()
        self._core = ChannelCore(target, options, compression, credentials, self._on_state)
        core = self._core
        self._transport: Optional[AsyncTransport] = None
        if core.target is not None:
            self._transport = AsyncTransport(
                core.subchannels, core.config.transport, core.client_tls()
            )
        self._interceptors: Dict[str, List[Any]] = split_interceptors(interceptors)

    def _method(self, method: Any, serializer: Any, deserializer: Any) -> Method:
        return Method(self._core, method, serializer, deserializer)

    def _track(self, call: Call) -> None:
        """A call started: ``close()`` waits for it (and cancels it, after the grace)."""
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)

    # -- connectivity -----------------------------------------------------------------------

    def _on_state(self, state: ChannelConnectivity) -> None:
        """The channel changed state: wake ``wait_for_state_change``."""
        changed, self._state_changed = self._state_changed, None
        if changed is not None:
            changed.set()

    @property
    def _state(self) -> ChannelConnectivity:
        return self._core.subchannels.state

    def get_state(self, try_to_connect: bool = False) -> ChannelConnectivity:
        """The connectivity state; ``try_to_connect`` starts connecting an IDLE channel (the
        state returned is the one it was in, as in grpcio: the change is for
        ``wait_for_state_change`` to see)."""
        state = self._state
        if try_to_connect and state is ChannelConnectivity.IDLE:
            self._try_to_connect()
        return state

    def _try_to_connect(self) -> None:
        if self._transport is not None:
            self._transport.try_to_connect()

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
        self._core.close()
        running = [call._running() for call in self._calls if not call.done()]
        if grace and running:
            await asyncio.wait(running, timeout=grace)
        if self._transport is not None:
            self._transport.close()
        else:
            self._core.subchannels.close()
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
        return UnaryUnaryMultiCallable(
            self._method(method, request_serializer, response_deserializer),
            self._transport,
            self._interceptors,
            self._track,
        )

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
        return UnaryStreamMultiCallable(
            self._method(method, request_serializer, response_deserializer),
            self._transport,
            self._interceptors,
            self._track,
        )

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
        return StreamUnaryMultiCallable(
            self._method(method, request_serializer, response_deserializer),
            self._transport,
            self._interceptors,
            self._track,
        )

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
        return StreamStreamMultiCallable(
            self._method(method, request_serializer, response_deserializer),
            self._transport,
            self._interceptors,
            self._track,
        )

    def __repr__(self) -> str:
        return f"<minigrpc.aio.Channel {self._state.name}>"


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
