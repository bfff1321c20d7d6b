"""The options of ``minigrpc.server()``, parsed once into :class:`ServerOptions`.

Options (``options=[(key, value), ...]``; a key minigrpc does not know, or knows and does not
carry out, is ignored with one warning naming it (:mod:`minigrpc.driver.channel_args`), where
grpcio ignores it in silence):

========================================  ==========  ==============================================
key                                       default     meaning
========================================  ==========  ==============================================
``grpc.max_receive_message_length``       4 MiB       largest request message (-1: no limit)
``grpc.max_send_message_length``          no limit    largest response message (-1: no limit)
``grpc.max_concurrent_streams``           100         calls per connection; more are refused
``grpc.max_metadata_size``                16 KiB      request header list size per call
``grpc.http2.max_frame_size``             1 MiB       largest frame we accept (SETTINGS)
``minigrpc.max_frame_size``               1 MiB       the same (the client's option name)
``grpc.default_compression_algorithm``    none        compress responses (a ``Compression``)
``grpc.compression_enabled_algorithms_bitset``  all   bit n enables ``Compression(n)`` both ways
``minigrpc.initial_window_size``          4 MiB       per-stream receive window (SETTINGS)
``minigrpc.connection_window_size``       16 MiB      connection receive window (WINDOW_UPDATE)
``minigrpc.unix_socket_mode``             ``0o600``   permission bits of a unix socket file
``minigrpc.max_output_buffer``            2 MiB       unsent bytes per connection, then backpressure
``minigrpc.max_buffered_bytes``           64 MiB      memory all connections may buffer together
``minigrpc.max_connection_buffered_bytes``  16 MiB    memory one connection may buffer
``grpc.server_handshake_timeout_ms``      120000      close a client that sends no preface+SETTINGS
``grpc.max_connection_idle_ms``           300000      GOAWAY a connection without calls this long
``grpc.max_connection_age_ms``            never       GOAWAY a connection this old (±10%)
``grpc.max_connection_age_grace_ms``      never       then cut its calls this much later
``grpc.keepalive_time_ms``                7200000     PING a connection silent this long
``grpc.keepalive_timeout_ms``             20000       close it if nothing arrives in this time
``grpc.http2.ping_timeout_ms``            60000       the same bound, under grpcio's other name
``grpc.keepalive_permit_without_calls``   0           1: a client may ping without calls
``grpc.http2.min_ping_interval_without_data_ms``  300000  a client's PINGs closer are strikes
``grpc.http2.max_ping_strikes``           2           strikes, then GOAWAY too_many_pings
``minigrpc.request_stall_timeout_ms``     30000       cancel a call whose request stops arriving
``minigrpc.unary_handlers_on_io_thread``  0           1: run unary-unary handlers on the I/O thread
``grpc.so_reuseport``                     0           1: SO_REUSEPORT on TCP ports (port sharing)
========================================  ==========  ==============================================

For the ``*_ms`` options, 0, a negative value or INT_MAX (2147483647) means "never".

Connection age and keepalive (gRFC A9, A8) are decided by :mod:`minigrpc.driver.server_timers`
and :mod:`minigrpc.driver.keepalive`, and carried out per connection by the server driver.

Timeouts that bound what an idle or stalling client can hold, so that such clients
cannot exhaust the server's file descriptors or memory:

* ``grpc.max_connection_idle_ms`` is grpc-go's ``keepalive.ServerParameters.MaxConnectionIdle``
  under grpc-core's option name: a connection that has had no call for that long (counted, as in
  grpc-go, from connection setup or from when its last call ended; PINGs do not count) gets the
  graceful two-GOAWAY shutdown, and a client simply reconnects for its next call.  grpc-go
  defaults it to infinity; minigrpc defaults to 5 minutes because a server without it keeps
  every connection a client ever opened and left idle, and 1,000s of those cost 1,000s of file
  descriptors.  5 minutes is long enough that a client making calls now and then keeps its
  connection, and matches grpc-core's minimum ping interval without calls
  (``doc/keepalive.md``).
* ``minigrpc.request_stall_timeout_ms`` is slowloris protection that does not depend on the
  client sending a deadline: a call whose request headers arrived but whose message or
  END_STREAM has not, and which receives no request DATA for that long, is cancelled with
  RST_STREAM(CANCEL).  Its handler never ran, so nothing else needs cancelling.

``minigrpc.unary_handlers_on_io_thread`` trades grpcio's threading for speed, for servers whose
unary-unary handlers only compute: such a handler then runs on the I/O thread, as grpclib runs
its handlers on its event loop, instead of on the executor.  That saves the two thread
hand-overs of every call (docs/benchmarks.md, "Server throughput").  While such a handler runs,
the server reads, writes and times out nothing else, so it must not block: no sleeping, no I/O
that can wait, and no call to a server whose answer needs this one.  Streaming handlers, whose
requests or flow control make them wait for the I/O thread, use the executor either way.

``minigrpc.max_buffered_bytes`` and ``minigrpc.max_connection_buffered_bytes`` bound what the
server holds for clients, at its real cost in memory: request messages no handler has taken
yet, responses and output a client has not read (:mod:`minigrpc.protocol.memory_budget`).  Over
budget, a connection gets no more flow-control window, is no longer read once what it sent alone is
over, and its new streams are refused with RST_STREAM(REFUSED_STREAM).  The flow-control
windows (``minigrpc.initial_window_size``, ``minigrpc.connection_window_size``) never exceed a
connection's budget, so that a client is never granted more than it may make the server hold.
The defaults suit a node agent; a server for large messages raises them.

``grpc.so_reuseport`` lets several processes (or a server and a socket reserving its port)
bind one TCP port.  grpc-core turns it on by default on Linux; minigrpc does not, so that a
second server on a port in use fails to bind instead of silently sharing the port's
connections.
"""

from typing import Any, FrozenSet, Iterable, Optional, Sequence, Tuple

from ..http2 import streams
from ..protocol import codes, wire
from ..protocol.memory_budget import DEFAULT_CONNECTION_LIMIT, DEFAULT_SERVER_LIMIT, MemoryBudget
from ..protocol.server_settings import ServerSettings
from .channel_args import SERVER, arguments_to_warn_about
from .keepalive import KeepaliveOptions
from .logs import get_logger
from .server_timers import ConnectionAgeOptions

__all__ = ["ServerOptions"]

_LOGGER = get_logger("minigrpc.server")

#: Unsent bytes per connection above which we stop reading from it and stop producing DATA.
DEFAULT_MAX_OUTPUT_BUFFER = 2 * 1024 * 1024
#: grpc-core's default for ``grpc.server_handshake_timeout_ms``.
DEFAULT_HANDSHAKE_TIMEOUT = 120.0
#: ``grpc.max_connection_idle_ms`` default: 5 minutes (see the module docstring for why).
DEFAULT_MAX_CONNECTION_IDLE = 300.0
#: ``minigrpc.request_stall_timeout_ms`` default: a request that makes no progress for 30 s.
DEFAULT_REQUEST_STALL_TIMEOUT = 30.0


def _limit(value: Any) -> Optional[int]:
    number = int(value)
    return None if number < 0 else number


def _at_least(value: Any, minimum: int, name: str) -> int:
    number = int(value)
    if number < minimum:
        raise ValueError(f"at least {minimum} ({name}) is expected")
    return number


def _milliseconds(value: Any) -> Optional[float]:
    """A grpc-core ``*_ms`` duration in seconds; 0, negative or INT_MAX means "never"."""
    number = int(value)
    if number <= 0 or number >= 2**31 - 1:
        return None
    return number / 1000.0


class ServerOptions:
    """Parsed ``options`` (see the table in the module docstring), with ``server()``'s other
    arguments: ``compression`` (a ``Compression``, over
    ``grpc.default_compression_algorithm``), ``maximum_concurrent_rpcs`` (None: no limit) and
    the server ``interceptors``, the first one outermost."""

    def __init__(
        self,
        options: Optional[Iterable[Tuple[str, Any]]],
        compression: Optional[int] = None,
        maximum_concurrent_rpcs: Optional[int] = None,
        interceptors: Sequence[Any] = (),
    ) -> None:
        self.max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
        self.max_send_message_length: Optional[int] = None
        self.max_concurrent_streams = 100
        self.max_header_list_size = streams.CALL_MAX_HEADER_LIST_SIZE
        self.max_frame_size = streams.DEFAULT_MAX_FRAME_SIZE
        self.initial_window_size = streams.DEFAULT_STREAM_WINDOW
        self.connection_window = streams.DEFAULT_CONNECTION_WINDOW
        self.unix_socket_mode = 0o600
        self.max_output_buffer = DEFAULT_MAX_OUTPUT_BUFFER
        self.max_buffered_bytes = DEFAULT_SERVER_LIMIT
        self.max_connection_buffered_bytes: Optional[int] = None
        self.compression: Optional[int] = None
        self.enabled_encodings: FrozenSet[str] = frozenset(wire.SUPPORTED_ENCODINGS)
        self.handshake_timeout: Optional[float] = DEFAULT_HANDSHAKE_TIMEOUT
        self.max_connection_idle: Optional[float] = DEFAULT_MAX_CONNECTION_IDLE
        self.request_stall_timeout: Optional[float] = DEFAULT_REQUEST_STALL_TIMEOUT
        self.unary_handlers_on_io_thread = False
        self.reuse_port = False
        items = list(options or ())
        for item in items:
            try:
                key, value = item
            except (TypeError, ValueError):
                raise ValueError(
                    f"server options must be (key, value) pairs, got {item!r}"
                ) from None
            try:
                self._apply(str(key), value)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"invalid value {value!r} for server option {key!r}: {exc}"
                ) from None
        #: gRFC A9's connection age and A8's keepalive, each read by its own module.
        self.connection_age = ConnectionAgeOptions.from_options(items)
        self.keepalive = KeepaliveOptions.server(items)
        # One warning per server for each option it will not carry out: grpcio ignores such
        # an option in silence, and a typo or an unsupported setting then goes unnoticed.
        for name, why in arguments_to_warn_about(items, SERVER):
            _LOGGER.warning("server option %r: %s", name, why)
        if compression is not None:
            self.compression = compression
        self.maximum_concurrent_rpcs = maximum_concurrent_rpcs
        self.interceptors = tuple(interceptors)

    def _apply(self, key: str, value: Any) -> None:
        if key == "grpc.max_receive_message_length":
            self.max_receive_message_length = _limit(value)
        elif key == "grpc.max_send_message_length":
            self.max_send_message_length = _limit(value)
        elif key == "grpc.max_concurrent_streams":
            self.max_concurrent_streams = int(value)
        elif key == "grpc.max_metadata_size":
            self.max_header_list_size = int(value)
        elif key in ("grpc.http2.max_frame_size", "minigrpc.max_frame_size"):
            self.max_frame_size = int(value)
        elif key == "grpc.compression_enabled_algorithms_bitset":
            # grpc-core's bitset: bit n enables Compression(n); a disabled encoding is refused
            # in requests (UNIMPLEMENTED) and never chosen for responses.
            bits = int(value)
            self.enabled_encodings = frozenset(
                wire.compression_name(algorithm) or "identity"
                for algorithm in range(len(codes.COMPRESSIONS))
                if bits & (1 << algorithm)
            )
        elif key == "grpc.default_compression_algorithm":
            self.compression = wire.compression_number(int(value))
        elif key == "minigrpc.initial_window_size":
            self.initial_window_size = int(value)
        elif key == "minigrpc.connection_window_size":
            self.connection_window = int(value)
        elif key == "minigrpc.unix_socket_mode":
            mode = int(value)
            if not 0 <= mode <= 0o777:
                raise ValueError("a permission mode between 0 and 0o777 is expected")
            self.unix_socket_mode = mode
        elif key == "grpc.server_handshake_timeout_ms":
            self.handshake_timeout = _milliseconds(value)
        elif key == "grpc.max_connection_idle_ms":
            self.max_connection_idle = _milliseconds(value)
        elif key == "minigrpc.request_stall_timeout_ms":
            self.request_stall_timeout = _milliseconds(value)
        elif key == "minigrpc.unary_handlers_on_io_thread":
            self.unary_handlers_on_io_thread = bool(int(value))
        elif key == "grpc.so_reuseport":
            self.reuse_port = bool(int(value))
        elif key == "minigrpc.max_output_buffer":
            self.max_output_buffer = max(64 * 1024, int(value))
        elif key == "minigrpc.max_buffered_bytes":
            self.max_buffered_bytes = _at_least(value, 1024 * 1024, "1 MiB")
        elif key == "minigrpc.max_connection_buffered_bytes":
            self.max_connection_buffered_bytes = _at_least(value, 256 * 1024, "256 KiB")

    def _connection_budget(self) -> int:
        connection = self.max_connection_buffered_bytes
        if connection is None:
            connection = min(DEFAULT_CONNECTION_LIMIT, self.max_buffered_bytes // 4)
        return min(self.max_buffered_bytes, max(256 * 1024, connection))

    def memory_budget(self) -> MemoryBudget:
        """The budget the server's connections share (at most the total for one connection,
        and a quarter of it by default when the total is set lower than the default)."""
        return MemoryBudget(self.max_buffered_bytes, self._connection_budget())

    def protocol_settings(self) -> ServerSettings:
        return ServerSettings(
            max_receive_message_length=self.max_receive_message_length,
            max_send_message_length=self.max_send_message_length,
            max_concurrent_streams=self.max_concurrent_streams,
            max_header_list_size=self.max_header_list_size,
            # Never grant a client more window than its connection may buffer (RFC 9113 §5.2):
            # the budget is then only exceeded by what was granted before it was spent.
            initial_window_size=min(self.initial_window_size, self._connection_budget()),
            connection_window=min(self.connection_window, self._connection_budget()),
            max_frame_size=self.max_frame_size,
            enabled_encodings=self.enabled_encodings,
        )
