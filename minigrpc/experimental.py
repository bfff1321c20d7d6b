"""grpcio's ``grpc.experimental`` on minigrpc: the channel-less calls generated code makes.

Every ``*_pb2_grpc.py`` module from grpcio-tools ends with an "EXPERIMENTAL API" class whose
static methods call a method without a channel of the caller's own::

    reply = test_pb2_grpc.TestService.UnaryCall(request, "localhost:50051", insecure=True)

They land here, in :func:`unary_unary` and its three streaming siblings, with grpcio's
signatures and defaults (``grpc/_simple_stubs.py``):

* **Channels are cached**, one per ``(target, options, credentials, compression)``, as grpcio
  caches them, so repeated calls share one HTTP/2 connection.  grpcio also evicts a channel
  unused for 10 minutes from a thread of its own; minigrpc keeps no thread for that and closes
  only the least recently used channel beyond ``GRPC_PYTHON_MANAGED_CHANNEL_MAXIMUM`` (default
  256, grpcio's variable and default), and every cached channel at interpreter exit.  An idle
  minigrpc channel holds just a socket.
* **timeout** defaults to ``GRPC_PYTHON_DEFAULT_TIMEOUT_SECONDS`` or 60 s; ``None`` means none.
* **wait_for_ready** defaults to True, as in grpcio.
* **Credentials**, as in grpcio: ``insecure=True`` (or ``channel_credentials=
  insecure_channel_credentials()``) makes a plaintext channel; other ``channel_credentials``
  a TLS channel with them; neither, a TLS channel with ``ssl_channel_credentials()`` (the
  system's root certificates).  Both ``insecure=True`` and credentials: ValueError.
* ``_registered_method`` is accepted and ignored, as by :meth:`minigrpc.Channel.unary_unary`.

grpcio also warns (:class:`ExperimentalApiWarning`) the first time each function is used; these
are called by generated code the user did not write, so minigrpc stays quiet.
"""

import atexit
import collections
import os
import threading
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

from .blocking.channel import Channel, insecure_channel
from .driver.handlers import RpcMethodHandler

__all__ = [
    "ChannelOptions",
    "ExperimentalApiWarning",
    "UsageError",
    "insecure_channel_credentials",
    "stream_stream",
    "stream_unary",
    "unary_stream",
    "unary_unary",
    "wrap_server_method_handler",
]

_DEFAULT_TIMEOUT = float(os.environ.get("GRPC_PYTHON_DEFAULT_TIMEOUT_SECONDS", "60"))
_MAXIMUM_CHANNELS = int(os.environ.get("GRPC_PYTHON_MANAGED_CHANNEL_MAXIMUM", str(2**8)))

Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]


class ChannelOptions:
    """grpcio's Python-only channel options; minigrpc accepts and ignores them.

    ``SingleThreadedUnaryStream`` makes grpcio read a server stream without a helper thread;
    minigrpc's client never starts a thread to read one anyway.
    """

    SingleThreadedUnaryStream = "SingleThreadedUnaryStream"


class UsageError(Exception):
    """Raised by the gRPC library to indicate usage not allowed by the API (grpcio's class)."""


class ExperimentalApiWarning(Warning):
    """grpcio's warning category for experimental APIs (never raised by minigrpc)."""


class _InsecureChannelCredentials:
    """What :func:`insecure_channel_credentials` returns: "plaintext, on purpose"."""

    def __repr__(self) -> str:
        return "<minigrpc insecure channel credentials>"


_INSECURE = _InsecureChannelCredentials()


def insecure_channel_credentials() -> Any:
    """Credentials that ask for a plaintext channel (grpcio's function of the same name)."""
    return _INSECURE


def wrap_server_method_handler(
    wrapper: Callable[[Any], Any],
    handler: Optional[RpcMethodHandler],
) -> Optional[RpcMethodHandler]:
    """The handler with its behavior replaced by ``wrapper(behavior)`` (grpcio's helper for
    server interceptors; minigrpc's RpcMethodHandler is the same named tuple)."""
    if not handler:
        return None
    if not handler.request_streaming:
        if not handler.response_streaming:
            return handler._replace(unary_unary=wrapper(handler.unary_unary))
        return handler._replace(unary_stream=wrapper(handler.unary_stream))
    if not handler.response_streaming:
        return handler._replace(stream_unary=wrapper(handler.stream_unary))
    return handler._replace(stream_stream=wrapper(handler.stream_stream))


def _secure_channel(
    target: str,
    options: Sequence[Tuple[str, Any]],
    credentials: Any,
    compression: Optional[int],
) -> Channel:
    """A TLS channel; without credentials, grpcio's default: the system's root certificates."""
    from .blocking.channel import secure_channel
    from .net.tls import ssl_channel_credentials

    if credentials is None:
        credentials = ssl_channel_credentials()
    return secure_channel(target, credentials, options=options, compression=compression)


class _ChannelCache:
    """One channel per configuration, least recently used first; closed at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: collections.OrderedDict[Tuple[Any, ...], Channel] = (
            collections.OrderedDict()
        )

    def get(
        self,
        target: str,
        options: Sequence[Tuple[str, Any]],
        channel_credentials: Any,
        insecure: bool,
        compression: Optional[int],
    ) -> Channel:
        if insecure and channel_credentials is not None:
            # grpcio's check and wording.
            raise ValueError(
                "The insecure option is mutually exclusive with the channel_credentials "
                "option. Please use one or the other."
            )
        plaintext = insecure or channel_credentials is _INSECURE
        options = tuple(tuple(option) for option in options or ())
        key = (target, options, None if plaintext else channel_credentials, compression)
        with self._lock:
            channel = self._channels.get(key)
            if channel is not None and not channel.closed:
                self._channels.move_to_end(key)
                return channel
            if plaintext:
                channel = insecure_channel(target, options=options, compression=compression)
            else:
                channel = _secure_channel(target, options, channel_credentials, compression)
            self._channels[key] = channel
            while len(self._channels) > max(1, _MAXIMUM_CHANNELS):
                _, evicted = self._channels.popitem(last=False)
                evicted.close()
            return channel

    def close(self) -> None:
        """Close every cached channel (atexit, and tests that want a fresh start)."""
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            channel.close()


_CACHE = _ChannelCache()
atexit.register(_CACHE.close)


def unary_unary(
    request: Any,
    target: str,
    method: str,
    request_serializer: Serializer = None,
    response_deserializer: Deserializer = None,
    options: Sequence[Tuple[str, Any]] = (),
    channel_credentials: Any = None,
    insecure: bool = False,
    call_credentials: Any = None,
    compression: Optional[int] = None,
    wait_for_ready: Optional[bool] = None,
    timeout: Optional[float] = _DEFAULT_TIMEOUT,
    metadata: Optional[Sequence[Tuple[str, Any]]] = None,
    _registered_method: Optional[bool] = False,
) -> Any:
    """Call a unary method of ``target`` on a cached channel; returns the response."""
    channel = _CACHE.get(target, options, channel_credentials, insecure, compression)
    multicallable = channel.unary_unary(method, request_serializer, response_deserializer)
    return multicallable(
        request,
        timeout=timeout,
        metadata=metadata,
        credentials=call_credentials,
        wait_for_ready=True if wait_for_ready is None else wait_for_ready,
    )


def unary_stream(
    request: Any,
    target: str,
    method: str,
    request_serializer: Serializer = None,
    response_deserializer: Deserializer = None,
    options: Sequence[Tuple[str, Any]] = (),
    channel_credentials: Any = None,
    insecure: bool = False,
    call_credentials: Any = None,
    compression: Optional[int] = None,
    wait_for_ready: Optional[bool] = None,
    timeout: Optional[float] = _DEFAULT_TIMEOUT,
    metadata: Optional[Sequence[Tuple[str, Any]]] = None,
    _registered_method: Optional[bool] = False,
) -> Iterator[Any]:
    """Call a server-streaming method; returns the iterator of responses (also a Call)."""
    channel = _CACHE.get(target, options, channel_credentials, insecure, compression)
    multicallable = channel.unary_stream(method, request_serializer, response_deserializer)
    return multicallable(
        request,
        timeout=timeout,
        metadata=metadata,
        credentials=call_credentials,
        wait_for_ready=True if wait_for_ready is None else wait_for_ready,
    )


def stream_unary(
    request_iterator: Iterator[Any],
    target: str,
    method: str,
    request_serializer: Serializer = None,
    response_deserializer: Deserializer = None,
    options: Sequence[Tuple[str, Any]] = (),
    channel_credentials: Any = None,
    insecure: bool = False,
    call_credentials: Any = None,
    compression: Optional[int] = None,
    wait_for_ready: Optional[bool] = None,
    timeout: Optional[float] = _DEFAULT_TIMEOUT,
    metadata: Optional[Sequence[Tuple[str, Any]]] = None,
    _registered_method: Optional[bool] = False,
) -> Any:
    """Call a client-streaming method with every request of the iterator; returns the reply."""
    channel = _CACHE.get(target, options, channel_credentials, insecure, compression)
    multicallable = channel.stream_unary(method, request_serializer, response_deserializer)
    return multicallable(
        request_iterator,
        timeout=timeout,
        metadata=metadata,
        credentials=call_credentials,
        wait_for_ready=True if wait_for_ready is None else wait_for_ready,
    )


def stream_stream(
    request_iterator: Iterator[Any],
    target: str,
    method: str,
    request_serializer: Serializer = None,
    response_deserializer: Deserializer = None,
    options: Sequence[Tuple[str, Any]] = (),
    channel_credentials: Any = None,
    insecure: bool = False,
    call_credentials: Any = None,
    compression: Optional[int] = None,
    wait_for_ready: Optional[bool] = None,
    timeout: Optional[float] = _DEFAULT_TIMEOUT,
    metadata: Optional[Sequence[Tuple[str, Any]]] = None,
    _registered_method: Optional[bool] = False,
) -> Iterator[Any]:
    """Call a bidirectional-streaming method; returns the iterator of responses."""
    channel = _CACHE.get(target, options, channel_credentials, insecure, compression)
    multicallable = channel.stream_stream(method, request_serializer, response_deserializer)
    return multicallable(
        request_iterator,
        timeout=timeout,
        metadata=metadata,
        credentials=call_credentials,
        wait_for_ready=True if wait_for_ready is None else wait_for_ready,
    )
