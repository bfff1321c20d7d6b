"""Every channel and server argument grpcio documents, and what minigrpc does with each.

grpcio takes its options as gRPC core's channel arguments: the names of
``include/grpc/impl/channel_arg_names.h`` (and the compression ones of
``compression_types.h``), plus a few that gRPC core reads without documenting them there
(``grpc.http2.ping_timeout_ms``, ``grpc.http2.max_inflight_pings``,
``grpc.http2.settings_timeout``).  :data:`ARGUMENTS` lists them all, each marked:

* :data:`IMPLEMENTED`: carried out today, by the module named;
* :data:`DECIDED`: decided by the sans-IO module named, not yet carried out by the transports
  (docs/long-lived-channels.md says how each is to be wired; the entry turns
  :data:`IMPLEMENTED` when it is);
* :data:`UNSUPPORTED`: not carried out, with the reason;
* :data:`INERT`: nothing to carry out: grpcio 1.85 ignores it too (the ObjC and Cronet
  arguments, ``grpc.optimization_target``), or it only tunes gRPC core's own machinery.

:func:`arguments_to_warn_about` takes the options a user passed and returns those that deserve a
warning: unknown names, and known ones that are not carried out (:data:`DECIDED` or
:data:`UNSUPPORTED`) unless their value asks for what minigrpc does anyway
(``grpc.enable_http_proxy=0``); :func:`warning_messages` words a warning for each.  Every
channel logs its own (:mod:`minigrpc.driver.channel_core`); :func:`warn_once` logs each name
once per process.

What grpcio itself does with an argument it does not know (the floor this improves on): nothing.
gRPC core keeps channel arguments as a map and reads only the keys it looks for, so an unknown
name, or a known one with a value of the wrong type (``("grpc.keepalive_time_ms", "soon")``), is
silently ignored, with no log at the default verbosity.  Only grpcio's Python layer checks the
option pairs themselves: a key that is not a ``str`` or a value that is not an ``int``, ``str``
or ``bytes`` raises TypeError when the channel is made.

It also reads the values: :func:`duration` for the ``*_ms`` arguments and :func:`integer`.

:data:`FEATURES` names grpcio's long-lived channel features (retries, balancing, keepalive...)
with the arguments each rests on; :meth:`Feature.verdict` derives how far minigrpc carries one
out from those arguments' statuses, so the README's compatibility rows (rendered by
``tools/render_docs.py``) never claim more than :data:`ARGUMENTS` says.
"""

from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

__all__ = [
    "ARGUMENTS",
    "DECIDED",
    "FEATURES",
    "IMPLEMENTED",
    "INERT",
    "UNSUPPORTED",
    "Argument",
    "Feature",
    "arguments_to_warn_about",
    "duration",
    "find",
    "integer",
    "option_value",
    "warn_once",
    "warning_messages",
]

IMPLEMENTED = "implemented"
DECIDED = "decided, not yet carried out"
UNSUPPORTED = "not supported"
INERT = "no effect"

#: Which end an argument configures.
CLIENT = "client"
SERVER = "server"
BOTH = "both"

#: The largest value of a gRPC core integer argument; a ``*_ms`` argument set to it means never.
INT_MAX = 2**31 - 1


class Argument(NamedTuple):
    """One channel or server argument and what minigrpc does with it."""

    name: str
    side: str
    status: str
    #: The minigrpc module that reads it (:data:`IMPLEMENTED`, :data:`DECIDED`), or "".
    module: str
    #: What it means, or why minigrpc does not carry it out.
    note: str
    #: Values that ask for what minigrpc does anyway: passing one deserves no warning.
    fine_values: Tuple[Any, ...] = ()

    def applies_to(self, side: str) -> bool:
        return self.side in (side, BOTH)


def _implemented(name: str, side: str, module: str, note: str) -> Argument:
    return Argument(name, side, IMPLEMENTED, module, note)


def _decided(name: str, side: str, module: str, note: str) -> Argument:
    return Argument(name, side, DECIDED, module, note)


def _unsupported(name: str, side: str, why: str, fine_values: Tuple[Any, ...] = ()) -> Argument:
    return Argument(name, side, UNSUPPORTED, "", why, fine_values)


def _inert(name: str, side: str, why: str) -> Argument:
    return Argument(name, side, INERT, "", why)


_CHANNEL = "blocking.channel"  # both APIs' channels read their options there
_SERVER = "driver.server_options"
_SERVER_KEEPALIVE = "driver.server_driver, driver.keepalive"
_SERVER_AGE = "driver.server_driver, driver.server_timers"
_NO_XDS = "xDS and grpclb are not implemented"
_NO_HEALTH = "client-side health checking is not implemented"
_CORE_TCP = "tunes gRPC core's TCP reads and writes; minigrpc reads with its own sizes"
_NO_CHANNELZ = "channelz is not implemented"
_KEEPALIVE = "driver.keepalive, driver.client_keepalive"

#: Every argument, by name and side.
ARGUMENTS: Tuple[Argument, ...] = (
    # -- message and metadata limits
    _implemented("grpc.max_receive_message_length", BOTH, _CHANNEL + ", " + _SERVER,
                 "largest message received; -1: no limit"),
    _implemented("grpc.max_send_message_length", BOTH, _CHANNEL + ", " + _SERVER,
                 "largest message sent; -1: no limit"),
    _implemented("grpc.max_metadata_size", BOTH, _CHANNEL + ", " + _SERVER,
                 "largest header block received"),
    _unsupported("grpc.absolute_max_metadata_size", BOTH,
                 "one limit, grpc.max_metadata_size, applies; there is no soft limit"),
    _implemented("grpc.max_concurrent_streams", SERVER, _SERVER,
                 "calls per connection (SETTINGS_MAX_CONCURRENT_STREAMS)"),
    _unsupported("grpc.max_concurrent_streams", CLIENT, "a server setting; a client obeys the "
                 "server's SETTINGS"),
    # -- HTTP/2
    _implemented("grpc.http2.max_frame_size", SERVER, _SERVER, "largest frame received"),
    _unsupported("grpc.http2.max_frame_size", CLIENT, "the client's option is "
                 "minigrpc.max_frame_size"),
    _unsupported("grpc.http2.lookahead_bytes", BOTH, "the stream window is "
                 "minigrpc.initial_window_size"),
    _unsupported("grpc.http2.bdp_probe", BOTH, "windows are fixed and large, not probed",
                 fine_values=(0, False)),
    _unsupported("grpc.http2.hpack_table_size.decoder", BOTH, "the HPACK tables keep the "
                 "RFC 7541 default of 4096 bytes"),
    _unsupported("grpc.http2.hpack_table_size.encoder", BOTH, "the HPACK tables keep the "
                 "RFC 7541 default of 4096 bytes"),
    _unsupported("grpc.http2.initial_sequence_number", BOTH, "streams start at 1 (client) as "
                 "RFC 9113 §5.1.1 has them", fine_values=(1,)),
    _unsupported("grpc.http2_scheme", CLIENT, ":scheme is http, or https over TLS"),
    _unsupported("grpc.http2.write_buffer_size", BOTH, "writes are flushed per call, not held "
                 "back for GRPC_WRITE_BUFFER_HINT"),
    _unsupported("grpc.http2.true_binary", BOTH, "binary metadata is always base64 on the wire",
                 fine_values=(0, False)),
    _inert("grpc.experimental.http2.enable_preferred_frame_size", BOTH,
           "a gRPC core SETTINGS extension for its TLS frame sizes"),
    _unsupported("grpc.http2.settings_timeout", BOTH, "a peer that never acknowledges SETTINGS "
                 "is not timed out"),
    _unsupported("grpc.http2.max_inflight_pings", BOTH, "one keepalive PING is in flight at a "
                 "time"),
    _inert("grpc.http2.min_time_between_pings_ms", CLIENT, "deprecated; grpcio 1.85 ignores it"),
    # -- keepalive (gRFC A8, A9): the client's connections and the server driver carry it out
    _implemented("grpc.keepalive_time_ms", CLIENT, _KEEPALIVE,
                 "PING a connection this long after the last byte received"),
    _implemented("grpc.keepalive_time_ms", SERVER, _SERVER_KEEPALIVE,
                 "PING a connection this long after the last byte received (2 h)"),
    _implemented("grpc.keepalive_timeout_ms", CLIENT, _KEEPALIVE,
                 "close a connection that receives nothing this long after a PING"),
    _implemented("grpc.keepalive_timeout_ms", SERVER, _SERVER_KEEPALIVE,
                 "close a connection that receives nothing this long after a PING"),
    _implemented("grpc.http2.ping_timeout_ms", CLIENT, _KEEPALIVE,
                 "close a connection whose PING goes unanswered this long (grpcio's real bound)"),
    _implemented("grpc.http2.ping_timeout_ms", SERVER, _SERVER_KEEPALIVE,
                 "close a connection whose PING goes unanswered this long (grpcio's real bound)"),
    _implemented("grpc.keepalive_permit_without_calls", CLIENT, _KEEPALIVE,
                 "PING while no call is open too"),
    _implemented("grpc.keepalive_permit_without_calls", SERVER, _SERVER_KEEPALIVE,
                 "accept a client's PINGs while no call is open"),
    _implemented("grpc.http2.max_pings_without_data", CLIENT, _KEEPALIVE,
                 "PINGs sent without data before they slow to one a minute"),
    _implemented("grpc.http2.min_ping_interval_without_data_ms", SERVER, _SERVER_KEEPALIVE,
                 "the shortest interval between a client's PINGs that is no strike"),
    _implemented("grpc.http2.max_ping_strikes", SERVER, _SERVER_KEEPALIVE,
                 "strikes allowed before GOAWAY(ENHANCE_YOUR_CALM, too_many_pings)"),
    # -- server connection management (gRFC A9)
    _implemented("grpc.max_connection_idle_ms", SERVER, _SERVER + ", driver.server_timers",
                 "drain a connection without calls this long"),
    _implemented("grpc.max_connection_age_ms", SERVER, _SERVER_AGE,
                 "drain a connection this old (±10% jitter)"),
    _implemented("grpc.max_connection_age_grace_ms", SERVER, _SERVER_AGE,
                 "then cut its calls still running this much later"),
    _implemented("grpc.server_handshake_timeout_ms", SERVER, _SERVER,
                 "close a client that sends no preface and SETTINGS in time"),
    _unsupported("grpc.client_idle_timeout_ms", CLIENT, "an idle channel keeps its connection "
                 "until the server closes it"),
    _unsupported("grpc.max_allowed_incoming_connections", SERVER, "connections are bounded by "
                 "memory (minigrpc.max_buffered_bytes), not counted"),
    _unsupported("grpc.server_max_unrequested_time_in_server", SERVER, "every request is "
                 "dispatched as it arrives; there is no completion queue to wait in"),
    _inert("grpc.experimental.server_config_change_drain_grace_time_ms", SERVER,
           "applies to xDS server config updates, which are not implemented"),
    # -- retries (gRFC A6)
    _implemented("grpc.enable_retries", CLIENT, "driver.retries",
                 "transparent and configured retries; 0 turns both off"),
    _implemented("grpc.per_rpc_retry_buffer_size", CLIENT, "driver.retries",
                 "request bytes a call buffers for retries (256 KiB)"),
    _implemented("grpc.experimental.enable_hedging", CLIENT,
                 "driver.service_config, driver.hedging, driver.hedged_steps",
                 "read and carry out the service config's hedgingPolicy (gRFC A6)"),
    _implemented("minigrpc.retry_buffer_size", CLIENT, "driver.retries",
                 "request bytes all calls of the channel buffer for retries (16 MiB)"),
    # -- service config, naming, load balancing
    _implemented("grpc.service_config", CLIENT, "driver.service_config, driver.channel_core",
                 "the service config (JSON): timeout, waitForReady, message sizes, retryPolicy, "
                 "retryThrottling, loadBalancingConfig; hedgingPolicy with "
                 "grpc.experimental.enable_hedging"),
    _unsupported("grpc.service_config_disable_resolution", CLIENT,
                 "no service config is looked up in DNS, which is grpcio's default too",
                 fine_values=(1, True)),
    _implemented("grpc.lb_policy_name", CLIENT, "driver.balancing",
                 "pick_first or round_robin, when the service config chooses none"),
    _unsupported("grpc.dns_min_time_between_resolutions_ms", CLIENT, "a name is resolved "
                 "again at most every 30 s, grpcio's default"),
    _unsupported("grpc.dns_enable_srv_queries", CLIENT, "grpclb is not implemented",
                 fine_values=(0, False)),
    _unsupported("grpc.dns_ares_query_timeout", CLIENT, "names are resolved by the system's "
                 "resolver, not c-ares"),
    _unsupported("grpc.lb.ring_hash.ring_size_cap", CLIENT, "ring_hash is not implemented"),
    _unsupported("grpc.grpclb_call_timeout_ms", CLIENT, _NO_XDS),
    _unsupported("grpc.grpclb_fallback_timeout_ms", CLIENT, _NO_XDS),
    _unsupported("grpc.experimental.grpclb_channel_args", CLIENT, _NO_XDS),
    _unsupported("grpc.priority_failover_timeout_ms", CLIENT, _NO_XDS),
    _unsupported("grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config", CLIENT, _NO_XDS),
    _unsupported("grpc.use_local_subchannel_pool", CLIENT, "each channel has its own "
                 "connections anyway", fine_values=(1, True)),
    _unsupported("grpc.happy_eyeballs_connection_attempt_delay_ms", CLIENT, "pick_first tries "
                 "the addresses one after the other"),
    _unsupported("grpc.inhibit_health_checking", CLIENT, _NO_HEALTH, fine_values=(1, True)),
    # -- connecting
    _implemented("grpc.initial_reconnect_backoff_ms", CLIENT, _CHANNEL,
                 "the first wait between connection attempts"),
    _implemented("grpc.max_reconnect_backoff_ms", CLIENT, _CHANNEL,
                 "the longest wait between connection attempts"),
    _implemented("grpc.min_reconnect_backoff_ms", CLIENT, _CHANNEL,
                 "how long one connection attempt may take (20 s)"),
    _implemented("grpc.default_authority", CLIENT, _CHANNEL, ":authority of every call"),
    _implemented("grpc.primary_user_agent", CLIENT, _CHANNEL, "put before minigrpc's user-agent"),
    _implemented("grpc.secondary_user_agent", CLIENT, _CHANNEL, "put after minigrpc's user-agent"),
    _unsupported("grpc.surface_user_agent", SERVER, "the server always shows the user-agent",
                 fine_values=(1, True)),
    _implemented("grpc.ssl_target_name_override", CLIENT, _CHANNEL,
                 "the name the server's certificate must carry"),
    _implemented("grpc.ssl_session_cache", CLIENT, _CHANNEL, "TLS sessions to resume"),
    _unsupported("grpc.enable_http_proxy", CLIENT, "HTTP CONNECT proxies are not implemented",
                 fine_values=(0, False)),
    _unsupported("grpc.http_proxy", CLIENT, "HTTP CONNECT proxies are not implemented"),
    _unsupported("grpc.address_http_proxy", CLIENT, "HTTP CONNECT proxies are not implemented"),
    _unsupported("grpc.address_http_proxy_enabled_addresses", CLIENT,
                 "HTTP CONNECT proxies are not implemented"),
    _unsupported("grpc.disable_client_authority_filter", CLIENT, ":authority is always sent",
                 fine_values=(0, False)),
    _unsupported("grpc.tsi.max_frame_size", BOTH, "TLS is Python's ssl module, which frames "
                 "records itself"),
    _unsupported("grpc.security_frame_allowed", BOTH, "the security frame is an ALTS feature; "
                 "ALTS is not implemented", fine_values=(0, False)),
    # -- compression
    _implemented("grpc.default_compression_algorithm", SERVER, _SERVER,
                 "compress responses"),
    _unsupported("grpc.default_compression_algorithm", CLIENT, "a channel compresses with its "
                 "compression= argument"),
    _implemented("grpc.compression_enabled_algorithms_bitset", SERVER, _SERVER,
                 "the encodings the server accepts and uses"),
    _unsupported("grpc.compression_enabled_algorithms_bitset", CLIENT,
                 "a channel accepts every encoding it implements"),
    _unsupported("grpc.default_compression_level", BOTH, "compression levels are not "
                 "implemented; an algorithm is chosen directly"),
    _unsupported("grpc.per_message_compression", BOTH, "messages are compressed as the call's "
                 "compression says", fine_values=(1, True)),
    _unsupported("grpc.per_message_decompression", BOTH, "messages are always decompressed",
                 fine_values=(1, True)),
    # -- sockets
    _implemented("grpc.so_reuseport", SERVER, _SERVER, "SO_REUSEPORT on TCP ports"),
    _unsupported("grpc.expand_wildcard_addrs", SERVER, "a wildcard address is bound as given"),
    _unsupported("grpc.tcp_receive_buffer_size", BOTH, "the system's socket buffer sizes apply"),
    _unsupported("grpc.dscp", BOTH, "packets are not marked"),
    _unsupported("grpc.socket_mutator", BOTH, "a gRPC core C object"),
    _unsupported("grpc.socket_factory", BOTH, "a gRPC core C object"),
    _inert("grpc.experimental.tcp_read_chunk_size", BOTH, _CORE_TCP),
    _inert("grpc.experimental.tcp_min_read_chunk_size", BOTH, _CORE_TCP),
    _inert("grpc.experimental.tcp_max_read_chunk_size", BOTH, _CORE_TCP),
    _inert("grpc.experimental.tcp_tx_zerocopy_enabled", BOTH, _CORE_TCP),
    _inert("grpc.experimental.tcp_tx_zerocopy_send_bytes_threshold", BOTH, _CORE_TCP),
    _inert("grpc.experimental.tcp_tx_zerocopy_max_simultaneous_sends", BOTH, _CORE_TCP),
    # -- gRPC core's machinery, observability, and other stacks
    _unsupported("grpc.resource_quota", BOTH, "a gRPC core C object; the server's memory is "
                 "bounded by minigrpc.max_buffered_bytes"),
    _inert("grpc.event_engine_use_memory_allocator_factory", BOTH, "a gRPC core C object"),
    _inert("grpc.minimal_stack", BOTH, "minigrpc has no optional filters to leave out"),
    _unsupported("grpc.enable_channelz", BOTH, _NO_CHANNELZ, fine_values=(0, False)),
    _inert("grpc.max_channel_trace_event_memory_per_node", BOTH, _NO_CHANNELZ),
    _unsupported("grpc.census", BOTH, "OpenCensus is not implemented", fine_values=(0, False)),
    _unsupported("grpc.server_call_metric_recording", SERVER, "ORCA metrics are not implemented",
                 fine_values=(0, False)),
    _unsupported("grpc.experimental.stats_plugins", BOTH, "a gRPC core C object"),
    _unsupported("grpc.authorization_policy_provider", SERVER, "authorization policies are not "
                 "implemented"),
    _inert("grpc.optimization_target", BOTH, "grpcio 1.85 ignores it"),
    _inert("grpc.loadreporting", SERVER, "grpcio 1.85 ignores it"),
    _inert("grpc.workaround.cronet_compression", SERVER, "Cronet only; grpcio 1.85 ignores it"),
    _inert("grpc.use_cronet_packet_coalescing", CLIENT, "Cronet only; grpcio 1.85 ignores it"),
    _inert("grpc.mobile_log_context", CLIENT, "Objective-C only; grpcio 1.85 ignores it"),
    _inert("grpc.channel_pooling_domain", CLIENT, "Objective-C only; grpcio 1.85 ignores it"),
    _inert("grpc.channel_id", CLIENT, "Objective-C only"),
    # -- minigrpc's own
    _implemented("minigrpc.initial_window_size", BOTH, _CHANNEL + ", " + _SERVER,
                 "per-stream receive window"),
    _implemented("minigrpc.connection_window_size", BOTH, _CHANNEL + ", " + _SERVER,
                 "connection receive window"),
    _implemented("minigrpc.max_frame_size", BOTH, _CHANNEL + ", " + _SERVER,
                 "largest frame received"),
    _implemented("minigrpc.unix_socket_mode", SERVER, _SERVER, "permission bits of a socket file"),
    _implemented("minigrpc.max_output_buffer", SERVER, _SERVER,
                 "unsent bytes per connection before backpressure"),
    _implemented("minigrpc.max_buffered_bytes", SERVER, _SERVER,
                 "memory all connections may buffer"),
    _implemented("minigrpc.max_connection_buffered_bytes", SERVER, _SERVER,
                 "memory one connection may buffer"),
    _implemented("minigrpc.request_stall_timeout_ms", SERVER, _SERVER,
                 "cancel a call whose request stops arriving"),
    _implemented("minigrpc.unary_handlers_on_io_thread", SERVER, _SERVER,
                 "run unary handlers on the I/O thread"),
)

_BY_NAME: Dict[Tuple[str, str], Argument] = {}
for _argument in ARGUMENTS:
    for _side in ((CLIENT, SERVER) if _argument.side == BOTH else (_argument.side,)):
        _BY_NAME[(_argument.name, _side)] = _argument


def find(name: str, side: str) -> Optional[Argument]:
    """The entry of ``name`` for ``side`` (:data:`CLIENT` or :data:`SERVER`), or None."""
    return _BY_NAME.get((name, side))


class Feature(NamedTuple):
    """One of grpcio's features for long-lived channels that no single API name stands for, and
    the :data:`ARGUMENTS` entries it rests on, as ``(name, side)``."""

    name: str
    #: What minigrpc does, beyond the arguments' own statuses.
    note: str
    #: The heading of docs/long-lived-channels.md that describes it.
    section: str
    arguments: Tuple[Tuple[str, str], ...] = ()

    def statuses(self) -> List[Tuple[str, str]]:
        """``(argument name, status)`` of each of :attr:`arguments`, as :data:`ARGUMENTS` has
        it; LookupError for a name it lacks, so that a renamed entry cannot go unnoticed."""
        found = []
        for name, side in self.arguments:
            argument = find(name, side)
            if argument is None:
                raise LookupError(f"{self.name}: no {side} argument {name!r} in ARGUMENTS")
            found.append((name, argument.status))
        return found

    def verdict(self) -> str:
        """``yes`` when every argument is carried out (or it rests on none), ``not yet`` when
        none is, ``partly`` otherwise."""
        implemented = [status == IMPLEMENTED for _, status in self.statuses()]
        if all(implemented):
            return "yes"
        return "partly" if any(implemented) else "not yet"


#: grpcio's long-lived channel features, for the README's compatibility table.
FEATURES: Tuple[Feature, ...] = (
    Feature(
        "service config (`grpc.service_config`)",
        "validated as grpcio validates it; per method `timeout`, `waitForReady`, "
        "`maxRequestMessageBytes`, `maxResponseMessageBytes`, `retryPolicy`; per channel "
        "`retryThrottling` and `loadBalancingConfig`; a config grpcio refuses fails the "
        "channel with ValueError when it is made",
        "Service config", (("grpc.service_config", CLIENT),)),
    Feature(
        "hedging (`hedgingPolicy`)",
        "when `grpc.experimental.enable_hedging` is set (grpcio only validates it): every "
        "`hedgingDelay` another attempt, up to `maxAttempts`, on all four call shapes of both "
        "APIs; the first Response-Headers win and the others are cancelled, as in grpc-java; "
        "`grpc.enable_retries=0` turns it off",
        "Retries and hedging", (("grpc.experimental.enable_hedging", CLIENT),)),
    Feature(
        "retries (gRFC A6)",
        "`retryPolicy` with its backoff, `grpc-previous-rpc-attempts`, server pushback "
        "(`grpc-retry-pushback-ms`), throttling, transparent retries of attempts the server "
        "never saw; `grpc.enable_retries=0` turns them off",
        "Retries and hedging",
        (("grpc.enable_retries", CLIENT), ("grpc.per_rpc_retry_buffer_size", CLIENT),
         ("minigrpc.retry_buffer_size", CLIENT))),
    Feature(
        "address lists and name resolution",
        "`ipv4:` and `ipv6:` lists of addresses; a `dns:` name (or `host:port`) resolves to "
        "every address, A and AAAA, again when connections fail",
        "Targets"),
    Feature(
        "load balancing: `pick_first`, `round_robin`",
        "chosen by the service config's `loadBalancingConfig`, else `grpc.lb_policy_name`; "
        "`pick_first` sticks to the first address that connects, `round_robin` spreads calls "
        "over every ready one",
        "Load balancing", (("grpc.lb_policy_name", CLIENT),)),
    Feature(
        "warnings for options not carried out",
        "grpcio ignores unknown options silently; each minigrpc channel logs a warning for "
        "every option it does not carry out (unknown, not supported, not yet), naming it and "
        "saying why",
        "The argument table"),
    Feature(
        "client keepalive (gRFC A8)", "", "Keepalive",
        (("grpc.keepalive_time_ms", CLIENT), ("grpc.keepalive_timeout_ms", CLIENT),
         ("grpc.http2.ping_timeout_ms", CLIENT), ("grpc.keepalive_permit_without_calls", CLIENT),
         ("grpc.http2.max_pings_without_data", CLIENT))),
    Feature(
        "server keepalive and ping limits (gRFC A9)", "", "Keepalive",
        (("grpc.keepalive_time_ms", SERVER), ("grpc.keepalive_timeout_ms", SERVER),
         ("grpc.keepalive_permit_without_calls", SERVER),
         ("grpc.http2.min_ping_interval_without_data_ms", SERVER),
         ("grpc.http2.max_ping_strikes", SERVER))),
    Feature(
        "server connection management (gRFC A9)", "", "Server connection management",
        (("grpc.max_connection_idle_ms", SERVER), ("grpc.max_connection_age_ms", SERVER),
         ("grpc.max_connection_age_grace_ms", SERVER))),
)


def _is_fine(argument: Argument, value: Any) -> bool:
    return any(value == fine and type(value) is type(fine) for fine in argument.fine_values)


def arguments_to_warn_about(
    options: Optional[Iterable[Tuple[Any, Any]]], side: str
) -> List[Tuple[str, str]]:
    """The options worth a warning, each as ``(name, why)``: names no table knows, and known
    ones minigrpc does not carry out (:data:`DECIDED`, :data:`UNSUPPORTED`) whose value asks
    for something minigrpc does not do.  In the order given, each name once."""
    found: List[Tuple[str, str]] = []
    seen: Set[str] = set()
    for item in options or ():
        try:
            name, value = item
        except (TypeError, ValueError):
            continue  # the channel's own parsing refuses malformed pairs
        name = str(name)
        if name in seen:
            continue
        seen.add(name)
        argument = find(name, side)
        if argument is None:
            other = find(name, SERVER if side == CLIENT else CLIENT)
            why = (f"a {other.side} argument, ignored by a {side}" if other is not None
                   else "not an argument minigrpc knows; ignored")
            found.append((name, why))
        elif argument.status == DECIDED:
            found.append((name, f"not carried out yet ({argument.module} decides it)"))
        elif argument.status == UNSUPPORTED and not _is_fine(argument, value):
            found.append((name, f"not supported: {argument.note}"))
    return found


def warning_messages(
    options: Optional[Iterable[Tuple[Any, Any]]], side: str
) -> List[Tuple[str, str]]:
    """The warning for each option :func:`arguments_to_warn_about` returns, as ``(name,
    message)``: the message names the option and says why it deserves one."""
    return [(name, f"{side} option {name!r}: {why}")
            for name, why in arguments_to_warn_about(options, side)]


#: The names :func:`warn_once` has logged, in this process.
_WARNED: Set[Tuple[str, str]] = set()


def warn_once(
    options: Optional[Iterable[Tuple[Any, Any]]], side: str, log: Callable[[str], None]
) -> List[str]:
    """Log each of :func:`warning_messages` the first time this process sees its option on this
    side; returns the messages logged."""
    logged = []
    for name, message in warning_messages(options, side):
        if (name, side) in _WARNED:
            continue
        _WARNED.add((name, side))
        log(message)
        logged.append(message)
    return logged


def option_value(options: Optional[Iterable[Tuple[Any, Any]]], name: str) -> Any:
    """The value of the last ``(name, value)`` pair in ``options`` (grpcio lets a later pair
    win), or None."""
    found = None
    for item in options or ():
        if isinstance(item, tuple) and len(item) == 2 and item[0] == name:
            found = item[1]
    return found


def integer(value: Any, name: str) -> int:
    """An integer argument's value; ValueError naming the argument otherwise.  A bool counts
    as 0 or 1: grpcio's Python layer passes any ``int`` on as an integer argument, so
    ``("grpc.keepalive_permit_without_calls", True)`` means 1 there."""
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, (int, str, bytes)):
        raise ValueError(f"option {name!r} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {value!r}") from None


def duration(value: Any, name: str) -> Optional[float]:
    """A ``*_ms`` argument in seconds; None (never) for 0, a negative value or INT_MAX, the
    values gRPC core's ``*_ms`` arguments use for "never"."""
    milliseconds = integer(value, name)
    if milliseconds <= 0 or milliseconds >= INT_MAX:
        return None
    return milliseconds / 1000.0
