"""What a channel is without I/O, once for the blocking and the asyncio API: its target, its
parsed options, what its credentials and compression mean for a call, and its subchannels.

Channel options (``options=[(name, value), ...]``), the same for both APIs.  grpcio ignores a
name it does not know, or one it knows but does not carry out, without a word; a minigrpc
channel logs one warning for each (``minigrpc.channel`` logger), naming it and saying why
(:func:`minigrpc.driver.channel_args.warning_messages`), and otherwise ignores it too.  The
options it carries out:

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
  connection attempts to an address (defaults 1 s and 120 s, ``doc/connection-backoff.md``),
  and between the tries of a ``wait_for_ready`` call whose server closed before it spoke;
  ``grpc.min_reconnect_backoff_ms``: how long one connection attempt may take (20 s).
* ``grpc.lb_policy_name``: ``pick_first`` (the default) or ``round_robin``, for a target of
  several addresses (``ipv4:a,b``, a DNS name with several records); a service config's
  ``loadBalancingConfig`` comes first (:mod:`minigrpc.driver.balancing`).
* ``grpc.keepalive_time_ms``, ``grpc.keepalive_timeout_ms``, ``grpc.http2.ping_timeout_ms``,
  ``grpc.keepalive_permit_without_calls``, ``grpc.http2.max_pings_without_data``: client
  keepalive (gRFC A8), each connection PINGs after that long without a byte received and is
  closed when nothing answers in time (:mod:`minigrpc.driver.client_keepalive`).
* ``grpc.service_config``: the service config (JSON, gRPC's ``doc/service_config.md``), read
  and validated by :mod:`minigrpc.driver.service_config` when the channel is made: a config
  that does not validate raises ValueError there.  A method's ``timeout`` caps its calls'
  deadlines, ``waitForReady`` applies to calls that do not say, ``maxRequestMessageBytes`` and
  ``maxResponseMessageBytes`` tighten the two limits above
  (:class:`minigrpc.driver.invocation.Method`).
* ``minigrpc.initial_window_size``: per-stream receive window we advertise; default 4 MiB.
* ``minigrpc.connection_window_size``: connection receive window; default 16 MiB.
* ``minigrpc.max_frame_size``: largest frame we accept (16 KiB to 16 MiB); default 1 MiB.

A secure channel adds ``grpc.ssl_target_name_override``, the name the server's certificate must
carry (and the ``:authority``, unless ``grpc.default_authority`` is set), and
``grpc.ssl_session_cache``, a ``grpc.experimental.session_cache.ssl_session_cache_lru()`` that
new connections resume their TLS sessions from.

The windows are large because every DATA frame is acknowledged as soon as it is read, and Python
pays per frame (docs/wire-rules.md, "Flow control and sizes").

The credentials are :mod:`minigrpc.net.tls`'s; this module only asks them what they decide (the
TLS settings of a connection, whether a target is local enough), so that a plaintext channel
never loads ``ssl``.
"""

import _socket
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

from ..http2 import streams
from ..protocol import headers, wire
from ..protocol.client_protocol import ClientGrpcConnection
from ..protocol.targets import Target, TargetAddresses, parse_target_addresses
from .attempts import Attempts
from .balancing import choose_policy
from .channel_args import CLIENT, warning_messages
from .client_keepalive import ChannelKeepalive
from .connectivity import ChannelConnectivity
from .retries import CallRetries, RetryBuffer, RetryOptions, RetryThrottle
from .service_config import MethodConfig, ServiceConfig, service_config_option
from .subchannel import Subchannels

__all__ = ["ChannelConfig", "ChannelCore", "TransportOptions"]

Options = Optional[Sequence[Tuple[str, Any]]]

_MAX_WINDOW = 2**31 - 1
_MIN_FRAME, _MAX_FRAME = 16384, 2**24 - 1


class TransportOptions(NamedTuple):
    """What a channel's options mean for its connections."""

    max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
    stream_window: int = streams.DEFAULT_STREAM_WINDOW
    connection_window: int = streams.DEFAULT_CONNECTION_WINDOW
    max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE
    #: Largest response header block / trailers per call (docs/wire-rules.md, "Flow control and
    #: sizes"); None: no limit.
    max_header_list_size: Optional[int] = streams.CALL_MAX_HEADER_LIST_SIZE
    #: gRPC connection backoff (connection-backoff.md): between connection attempts to an
    #: address, and between the tries of a wait_for_ready call whose server never spoke.
    initial_backoff: float = 1.0
    max_backoff: float = 120.0
    backoff_multiplier: float = 1.6
    backoff_jitter: float = 0.2
    #: How long one connection attempt may take (connection-backoff.md's MIN_CONNECT_TIMEOUT,
    #: ``grpc.min_reconnect_backoff_ms``): dials run apart from the calls that wait for them.
    connect_timeout: float = 20.0
    #: The channel's keepalive (gRFC A8), which each connection carries out
    #: (:mod:`minigrpc.driver.client_keepalive`); None: the channel never pings.  The one
    #: mutable field: a too_many_pings GOAWAY doubles its keepalive time for later connections.
    keepalive: Optional[ChannelKeepalive] = None

    def new_protocol(self, peer: str) -> ClientGrpcConnection:
        """A connection's sans-IO protocol state with these limits, its preface queued (both
        transports start a connection this way); ``peer`` is the target as the user gave it,
        which its connection errors name."""
        protocol = ClientGrpcConnection(
            max_receive_message_length=self.max_receive_message_length,
            stream_window=self.stream_window,
            connection_window=self.connection_window,
            max_frame_size=self.max_frame_size,
            max_header_list_size=self.max_header_list_size,
            peer=peer,
        )
        protocol.initiate()
        return protocol

    def attempts(
        self,
        deadline: Optional[float],
        wait_for_ready: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> Attempts:
        """A call's retry budget and backoff, with these backoff settings."""
        return Attempts(
            deadline,
            wait_for_ready,
            self.initial_backoff,
            self.max_backoff,
            self.backoff_multiplier,
            self.backoff_jitter,
            clock,
        )


def _limit_option(value: Any) -> Optional[int]:
    """grpcio's message-size options: a negative value means no limit."""
    number = int(value)
    return None if number < 0 else number


def _ranged_option(value: Any, name: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"channel option {name!r} must be between {low} and {high}, got {number}")
    return number


class ChannelConfig:
    """The parsed ``options`` of one channel (module docstring)."""

    __slots__ = (
        "authority",
        "max_receive",
        "max_send",
        "name_override",
        "session_cache",
        "transport",
        "user_agent",
    )

    def __init__(self, target: Optional[Target], options: Options, secure: bool) -> None:
        self.max_receive: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
        self.max_send: Optional[int] = None
        #: ``grpc.ssl_target_name_override`` and ``grpc.ssl_session_cache`` (secure channels).
        self.name_override: Optional[str] = None
        self.session_cache: Any = None
        authority: Optional[str] = None
        primary_agent = secondary_agent = ""
        transport: dict = {}
        for item in options or ():
            name, value = item
            if name == "grpc.max_receive_message_length":
                self.max_receive = _limit_option(value)
            elif name == "grpc.max_send_message_length":
                self.max_send = _limit_option(value)
            elif name == "grpc.default_authority":
                authority = str(value)
            elif name == "grpc.primary_user_agent":
                primary_agent = str(value)
            elif name == "grpc.secondary_user_agent":
                secondary_agent = str(value)
            elif name == "grpc.max_metadata_size":
                transport["max_header_list_size"] = _limit_option(value)
            elif name == "grpc.initial_reconnect_backoff_ms":
                transport["initial_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "grpc.max_reconnect_backoff_ms":
                transport["max_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "grpc.min_reconnect_backoff_ms":
                transport["connect_timeout"] = max(0.001, float(value) / 1000.0)
            elif name == "minigrpc.initial_window_size":
                transport["stream_window"] = _ranged_option(value, name, 1, _MAX_WINDOW)
            elif name == "minigrpc.connection_window_size":
                transport["connection_window"] = _ranged_option(value, name, 65535, _MAX_WINDOW)
            elif name == "minigrpc.max_frame_size":
                transport["max_frame_size"] = _ranged_option(value, name, _MIN_FRAME, _MAX_FRAME)
            elif name == "grpc.ssl_target_name_override" and secure:
                self.name_override = str(value)
            elif name == "grpc.ssl_session_cache" and secure:
                self.session_cache = value
            # Anything else is read elsewhere (keepalive, retries, the service config) or
            # ignored, as grpcio ignores arguments it does not know.
        if authority is None:
            authority = self.name_override
        if authority is None:
            authority = target.authority if target is not None else "localhost"
        self.authority = authority
        self.user_agent = " ".join(
            part for part in (primary_agent, headers.USER_AGENT, secondary_agent) if part
        )
        self.transport = TransportOptions(
            max_receive_message_length=self.max_receive,
            keepalive=ChannelKeepalive.from_options(options),
            **transport,
        )


class ChannelCore:
    """A channel as both APIs share it: target, options, credentials, compression, whether it
    still takes calls, and its :class:`~minigrpc.driver.subchannel.Subchannels` (whose state
    changes ``on_state`` hears).

    ``credentials`` (None: plaintext) are :mod:`minigrpc.net.tls`'s channel credentials.  A
    target that does not parse, or that local credentials refuse, gives the channel no target:
    grpcio accepts any target and fails each call UNAVAILABLE with :attr:`target_error`, and so
    does minigrpc; such a channel is in TRANSIENT_FAILURE from the start.
    """

    def __init__(
        self,
        target: str,
        options: Options,
        compression: Optional[int],
        credentials: Any,
        on_state: Callable[[ChannelConnectivity], None],
    ) -> None:
        if credentials is not None and not callable(getattr(credentials, "client_context", None)):
            raise TypeError(
                "secure_channel() needs minigrpc channel credentials, e.g. "
                f"minigrpc.ssl_channel_credentials(), not {type(credentials).__name__}"
            )
        self.credentials = credentials
        #: ``:scheme``: ``https`` over TLS; local credentials speak plaintext.
        self.scheme = (
            "https" if credentials is not None and credentials.local is None else "http"
        )
        #: What the target names: its addresses, or the DNS name to resolve.
        self.addresses: Optional[TargetAddresses] = None
        #: The target as one :class:`Target`, for what concerns it as a whole (its
        #: ``:authority``, the name TLS verifies, messages): the one address, a DNS name (an
        #: ``AF_UNSPEC`` Target), or the first address of a list, shown as the list.
        self.target: Optional[Target] = None
        #: Why calls fail UNAVAILABLE when the channel has no target.
        self.target_error = ""
        try:
            self.addresses = parse_target_addresses(target)
        except ValueError as exc:
            self.target_error = f"failed to parse target {target!r}: {exc}"
        else:
            self.target = _as_one_target(self.addresses)
        if self.addresses is not None and credentials is not None:
            named = self.addresses.addresses or (self.target,)
            self.target_error = next(
                filter(None, (credentials.target_refusal(one) for one in named)), "")
            if self.target_error:
                self.addresses = self.target = None
        self.config = ChannelConfig(self.target, options, credentials is not None)
        _warn_about(options)
        #: ``grpc.service_config``, validated: a config grpcio would refuse fails the channel
        #: here (ServiceConfigError, a ValueError naming every problem), not its calls later.
        self.service_config: Optional[ServiceConfig] = service_config_option(options)
        #: Retries (gRFC A6): the channel's options, the request bytes all its calls keep for
        #: replay, and its token bucket when the service config throttles retries.
        self.retry_options = RetryOptions.from_options(options)
        self.retry_buffer = RetryBuffer(self.retry_options.channel_buffer)
        throttling = self.service_config.retry_throttling if self.service_config else None
        self.retry_throttle = RetryThrottle(throttling) if throttling is not None else None
        self.compression = compression
        #: Set by :meth:`close`: no new call starts (calls already running may finish).
        self.closed = False
        transport = self.config.transport
        #: The channel's connections, one per address, under its load-balancing policy: the
        #: service config's ``loadBalancingConfig``, else ``grpc.lb_policy_name``, else
        #: pick_first (:mod:`minigrpc.driver.balancing`).
        self.subchannels: Subchannels[Any] = Subchannels(
            on_state,
            self.addresses,
            choose_policy(self.service_config.load_balancing if self.service_config else None,
                          options),
            transport.initial_backoff,
            transport.max_backoff,
        )

    def method_config(self, path: str) -> Optional[MethodConfig]:
        """What the service config says about the method ``path`` (None: no service config)."""
        config = self.service_config
        return None if config is None else config.for_method(path)

    def call_retries(
        self, config: Optional[MethodConfig], streaming_request: bool
    ) -> Optional[CallRetries]:
        """A new call's retries, under its method's retry policy; None for a unary request
        without one (its steps decide its transparent retries alone:
        :class:`~minigrpc.driver.call_steps.CallSteps`)."""
        policy = config.retry_policy if config is not None else None
        if policy is None and not streaming_request:
            return None
        return CallRetries(policy, self.retry_options, self.retry_buffer, self.retry_throttle)

    def client_tls(self) -> Any:
        """The TLS settings of the channel's connections (``minigrpc.net.tls.ClientTLS``), or
        None for plaintext; the transports of both APIs dial with them."""
        if self.credentials is None or self.target is None:
            return None
        config = self.config
        return self.credentials.client_tls(self.target, config.name_override, config.session_cache)

    def request_encoding(self, compression: Optional[int]) -> Optional[str]:
        """The compression for a call's requests, if any: the call's choice, else the channel's,
        and only when the server has not left it out of its ``grpc-accept-encoding``
        (doc/compression.md)."""
        choice = compression if compression is not None else self.compression
        name = wire.compression_name(choice)
        if name is not None and self.subchannels.peer_accepts(name):
            return name
        return None

    def close(self) -> None:
        """No new call starts from now on; the transport closes the connections."""
        self.closed = True


def _warn_about(options: Options) -> None:
    """Log a warning for each option the channel leaves unknown or does not carry out."""
    found = warning_messages(options, CLIENT)
    if found:
        from .logs import get_logger

        log = get_logger("minigrpc.channel")
        for _name, message in found:
            log.warning(message)


def _as_one_target(addresses: TargetAddresses) -> Target:
    """The target as one :class:`Target` (see :attr:`ChannelCore.target`)."""
    if not addresses.addresses:
        return Target(_socket.AF_UNSPEC, (addresses.host, addresses.port), addresses.authority,
                      addresses.display)
    first = addresses.addresses[0]
    if len(addresses.addresses) == 1 and addresses.scheme != "ipv4" and (
            addresses.scheme != "ipv6"):
        return first
    return first._replace(display=addresses.display)
