"""The public client API: grpcio's unary subset, with the same names and semantics, so
code written for grpcio runs unchanged.

::

    import minigrpc as grpc

    with grpc.insecure_channel("unix:///run/agent.sock") as channel:
        call = channel.unary_unary("/pkg.Service/Method",
                                   request_serializer=Req.SerializeToString,
                                   response_deserializer=Resp.FromString)
        reply = call(Req(...), timeout=5, metadata=[("x-trace", "1")])
        reply, info = call.with_call(Req(...))   # info.code(), info.trailing_metadata(), ...

Every outcome other than OK raises :class:`minigrpc.RpcError` (``code()``, ``details()``, both
metadata tuples and the raw ``grpc-status-details-bin``). Code generated for grpcio
(``*_pb2_grpc.py`` stubs) works unchanged with a minigrpc channel.

Channel options (``options=[(name, value), ...]``); unknown names are ignored, as in grpcio:

* ``grpc.max_receive_message_length``: largest response message in bytes; default 4 MiB,
  -1 for no limit. Larger: RESOURCE_EXHAUSTED, decided on the length prefix.
* ``grpc.max_send_message_length``: largest request message; default -1 (no limit).
* ``grpc.max_metadata_size``: largest response header block (or trailers) of one call, bytes
  as HTTP/2 counts them; default 16 KiB, -1 for none. Larger: INTERNAL.
* ``grpc.default_authority``: the ``:authority`` to send instead of the target's.
* ``grpc.primary_user_agent`` / ``grpc.secondary_user_agent``: put before / after minigrpc's
  product token in ``user-agent`` (``<primary> grpc-python-minigrpc/<v> <secondary>``), as
  grpcio places them.
* ``grpc.initial_reconnect_backoff_ms`` / ``grpc.max_reconnect_backoff_ms``: the waits between
  connection attempts of a ``wait_for_ready`` call (defaults 1 s and 120 s,
  ``doc/connection-backoff.md``).
* ``minigrpc.initial_window_size``: per-stream receive window we advertise; default 4 MiB.
* ``minigrpc.connection_window_size``: connection receive window; default 16 MiB.
* ``minigrpc.max_frame_size``: largest frame we accept (16 KiB to 16 MiB); default 1 MiB.

The windows are large because every DATA frame is acknowledged as soon as it is read, and Python
pays per frame (docs/wire-rules.md, "Flow control and sizes").
"""

from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..driver import interfaces
from ..driver.connectivity import ChannelConnectivity
from ..protocol import headers, wire
from ..protocol.codes import Code
from ..protocol.targets import Target, parse_target
from .call import Call, CallFuture, FutureCancelledError, FutureTimeoutError, StreamingCall
from .client_connection import TransportOptions
from .connectivity import ConnectivityWatch
from .multicallables import (
    StreamStreamMultiCallable,
    StreamUnaryMultiCallable,
    UnaryStreamMultiCallable,
    UnaryUnaryMultiCallable,
)
from .transport import ClientTLS, Transport

__all__ = [
    "Call",
    "CallFuture",
    "Channel",
    "FutureCancelledError",
    "FutureTimeoutError",
    "SecureChannel",
    "StreamStreamMultiCallable",
    "StreamUnaryMultiCallable",
    "StreamingCall",
    "UnaryStreamMultiCallable",
    "UnaryUnaryMultiCallable",
    "insecure_channel",
    "secure_channel",
]

#: The ``user-agent`` product token (PROTOCOL-HTTP2.md: ``grpc-<lang>-<variant>/<version>``).
USER_AGENT = headers.USER_AGENT

_MAX_WINDOW = 2**31 - 1
_MIN_FRAME, _MAX_FRAME = 16384, 2**24 - 1

Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]


def _limit_option(value: Any, name: str) -> Optional[int]:
    """grpcio's message-size options: a negative value means no limit."""
    number = int(value)
    if number < 0:
        return None
    return number


def _ranged_option(value: Any, name: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"channel option {name!r} must be between {low} and {high}, got {number}")
    return number


class _ChannelConfig:
    """The parsed ``options`` of one channel."""

    def __init__(self, target: Optional[Target], options: Optional[Sequence[Tuple[str, Any]]]):
        self.max_receive: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
        self.max_send: Optional[int] = None
        self.authority = target.authority if target is not None else "localhost"
        primary_agent = secondary_agent = ""
        transport: dict = {}
        for item in options or ():
            name, value = item
            if name == "grpc.max_receive_message_length":
                self.max_receive = _limit_option(value, name)
            elif name == "grpc.max_send_message_length":
                self.max_send = _limit_option(value, name)
            elif name == "grpc.default_authority":
                self.authority = str(value)
            elif name == "grpc.primary_user_agent":
                primary_agent = str(value)
            elif name == "grpc.secondary_user_agent":
                secondary_agent = str(value)
            elif name == "grpc.max_metadata_size":
                transport["max_header_list_size"] = _limit_option(value, name)
            elif name == "grpc.initial_reconnect_backoff_ms":
                transport["initial_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "grpc.max_reconnect_backoff_ms":
                transport["max_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "minigrpc.initial_window_size":
                transport["stream_window"] = _ranged_option(value, name, 1, _MAX_WINDOW)
            elif name == "minigrpc.connection_window_size":
                transport["connection_window"] = _ranged_option(value, name, 65535, _MAX_WINDOW)
            elif name == "minigrpc.max_frame_size":
                transport["max_frame_size"] = _ranged_option(value, name, _MIN_FRAME, _MAX_FRAME)
            # Anything else (grpc.keepalive_time_ms, grpc.enable_retries, ...) is ignored, as
            # grpcio ignores arguments it does not know.
        self.user_agent = " ".join(
            part for part in (primary_agent, USER_AGENT, secondary_agent) if part
        )
        self.transport = TransportOptions(max_receive_message_length=self.max_receive, **transport)


class Channel(interfaces.Channel):
    """A client channel: one lazily opened HTTP/2 connection shared by every call.

    Thread-safe: calls from many threads are multiplexed on the connection. ``close()`` (or
    leaving a ``with`` block) closes it; calls still running end CANCELLED, as in grpcio.
    """

    #: ``:scheme`` of the requests: ``http`` here, ``https`` on a secure channel.
    scheme = "http"

    def __init__(
        self,
        target: str,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        compression: Optional[int] = None,
    ) -> None:
        self._target_text = target
        self._options = options
        self._target: Optional[Target]
        #: Why calls fail UNAVAILABLE when the target does not parse.
        self.target_error = ""
        try:
            self._target = parse_target(target)
        except ValueError as exc:
            # grpcio accepts any target and fails each call UNAVAILABLE; so do we.
            self._target = None
            self.target_error = f"failed to parse target {target!r}: {exc}"
        if self._target is not None:
            self.target_error = self._refusal(self._target)
            if self.target_error:  # the channel's credentials do not serve this target
                self._target = None
        self.config = _ChannelConfig(self._target, options)
        self._compression = compression
        self.closed = False
        self.transport: Optional[Transport] = None
        if self._target is not None:
            self.transport = self._make_transport(self._target)
            self._connectivity = self.transport.connectivity
        else:
            self._connectivity = ConnectivityWatch(lambda: None)
            self._connectivity.set(ChannelConnectivity.TRANSIENT_FAILURE)

    def _make_transport(self, target: Target) -> Transport:
        return Transport(target, self.config.transport, self.client_tls(target))

    def client_tls(self, target: Target) -> Optional[ClientTLS]:
        """The TLS settings of this channel's connections to ``target``; None: plaintext.

        The asyncio channel asks the same question, so both transports dial alike.
        """
        return None

    def _refusal(self, target: Target) -> str:
        """Why this channel cannot use ``target`` ("" if it can); its calls then fail
        UNAVAILABLE with this text, as those of a target that does not parse."""
        return ""

    def request_encoding(self, compression: Optional[int]) -> Optional[str]:
        """The compression for a call's requests, if any: the call's choice, else the channel's,
        and only when the server has not left it out of its ``grpc-accept-encoding``
        (doc/compression.md)."""
        choice = compression if compression is not None else self._compression
        name = wire.compression_name(choice)
        if name is not None and self.transport is not None and self.transport.peer_accepts(name):
            return name
        return None

    def call_credentials_headers(
        self, credentials: Any, path: str, timeout: Optional[float] = None
    ) -> List[Tuple[bytes, bytes]]:
        """Metadata that per-call credentials add; they need a secure channel (as in grpcio)."""
        if credentials is not None:
            raise ValueError(
                "Call credentials are only valid on secure channels (minigrpc.secure_channel)"
            )
        return []

    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable:
        """A callable for the unary method ``method`` (``/package.Service/Method``).

        ``_registered_method`` is accepted and ignored, here and in the three streaming
        factories: stubs generated by grpcio-tools 1.64 and later pass ``True``.  In grpcio it
        lets the C core register the path once per channel instead of interning it per call; it
        changes nothing on the wire, and minigrpc builds each call's headers from the path
        anyway, so there is nothing for it to do.
        """
        return UnaryUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryStreamMultiCallable:
        """A callable for the server-streaming method ``method``."""
        return UnaryStreamMultiCallable(self, method, request_serializer, response_deserializer)

    def stream_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamUnaryMultiCallable:
        """A callable for the client-streaming method ``method``."""
        return StreamUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    def stream_stream(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> StreamStreamMultiCallable:
        """A callable for the bidirectional-streaming method ``method``."""
        return StreamStreamMultiCallable(self, method, request_serializer, response_deserializer)

    def subscribe(self, callback: Callable[..., None], try_to_connect: bool = False) -> None:
        """Call ``callback(ChannelConnectivity)`` now and on every change (see
        :mod:`minigrpc.blocking.connectivity`); ``try_to_connect`` dials an idle channel."""
        self._connectivity.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Callable[..., None]) -> None:
        self._connectivity.unsubscribe(callback)

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!")."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        else:
            self._connectivity.set(ChannelConnectivity.SHUTDOWN)

    def __del__(self) -> None:
        # Like grpcio: a channel dropped without close() still releases its socket. Nothing else
        # can hold its locks then, since every running call keeps the channel alive.
        try:
            if not self.closed:
                self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<minigrpc.Channel target={self._target_text!r}>"


class SecureChannel(Channel):
    """A channel whose connections run over TLS (``:scheme`` ``https``, ALPN ``h2``).

    Channel options it adds: ``grpc.ssl_target_name_override``, the name the server's
    certificate must carry (and the ``:authority``, unless ``grpc.default_authority`` is set);
    ``grpc.ssl_session_cache``, a ``grpc.experimental.session_cache.ssl_session_cache_lru()``
    that new connections resume their TLS sessions from.
    Per-call ``credentials`` and the call credentials of a composite channel credential add
    their metadata to every call.
    """

    scheme = "https"

    def __init__(
        self,
        target: str,
        credentials: Any,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        compression: Optional[int] = None,
    ) -> None:
        if not callable(getattr(credentials, "client_context", None)):
            raise TypeError(
                "secure_channel() needs minigrpc channel credentials, e.g. "
                f"minigrpc.ssl_channel_credentials(), not {type(credentials).__name__}"
            )
        self._credentials = credentials
        #: Local credentials (``local_channel_credentials``): plaintext to a local peer.
        self._local = getattr(credentials, "local", None)
        if self._local is not None:
            self.scheme = "http"
        self._name_override: Optional[str] = None
        self._session_cache: Any = None
        for name, value in options or ():
            if name == "grpc.ssl_target_name_override":
                self._name_override = str(value)
            elif name == "grpc.ssl_session_cache":
                self._session_cache = value
        super().__init__(target, options, compression)
        if self._name_override is not None and not any(
            name == "grpc.default_authority" for name, _ in options or ()
        ):
            self.config.authority = self._name_override

    def _refusal(self, target: Target) -> str:
        if self._local is None:
            return ""
        from ..net.tls import local_target_error

        host = str(target.address[0]) if isinstance(target.address, tuple) else None
        return local_target_error(self._local, target.is_unix, host)

    def client_tls(self, target: Target) -> Optional[ClientTLS]:
        context = self._credentials.client_context()
        if context is None:  # local credentials: plaintext
            return None
        if self._name_override is not None:
            hostname = self._name_override
        elif isinstance(target.address, tuple):
            hostname = str(target.address[0])
        else:
            hostname = "localhost"  # a unix socket has no host name; grpc uses the authority
        return ClientTLS(context, hostname, self._session_cache)

    def call_credentials_headers(
        self, credentials: Any, path: str, timeout: Optional[float] = None
    ) -> List[Tuple[bytes, bytes]]:
        """The metadata of the channel's and the call's call credentials (grpcio's order)."""
        sources = [self._credentials.call_credentials, credentials]
        plugins = [source for source in sources if source is not None]
        if not plugins:
            return []
        from ..net.tls import TLSFailure
        from ..protocol.status import CallStatus
        from .call import InactiveRpcError

        service, _, method_name = path.rpartition("/")
        service_url = f"https://{self.config.authority}{service}"
        metadata: list = []
        try:
            for source in plugins:
                metadata.extend(source.metadata(service_url, method_name, timeout))
        except TLSFailure as exc:
            raise InactiveRpcError(CallStatus(Code.UNAVAILABLE, str(exc))) from None
        except Exception as exc:
            details = f"Getting metadata from plugin failed with error: {exc}"
            raise InactiveRpcError(CallStatus(Code.UNAVAILABLE, details)) from None
        try:
            return wire.encode_metadata(metadata)
        except ValueError as exc:
            status = CallStatus(Code.INTERNAL, f"Invalid metadata: {exc}")
            raise InactiveRpcError(status) from None


def secure_channel(
    target: str,
    credentials: Any,
    options: Optional[Sequence[Tuple[str, Any]]] = None,
    compression: Optional[int] = None,
) -> Channel:
    """A TLS channel to ``target`` (grpcio's ``secure_channel``); see :class:`SecureChannel`."""
    return SecureChannel(target, credentials, options, compression)


def insecure_channel(
    target: str,
    options: Optional[Sequence[Tuple[str, Any]]] = None,
    compression: Optional[int] = None,
) -> Channel:
    """A plaintext channel to ``target`` (``unix:path``, ``unix-abstract:name``, ``host:port``,
    ``dns:///host:port``); nothing is connected until the first call."""
    return Channel(target, options, compression)
