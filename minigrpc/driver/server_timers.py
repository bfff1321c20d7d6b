"""The timed decisions both servers make, with no clock of their own: the caller passes ``now``.

The server driver (:mod:`minigrpc.driver.server_driver`) asks these for both servers, which
wait in different ways (the blocking one a heap of timers in its selector loop, the asyncio one
the event loop's ``call_later``) but decide alike when a wait is over:

* ``grpc.max_connection_idle_ms``: a connection without calls for that long is drained, and
  only calls count as activity, as in grpc-go's MaxConnectionIdle, so a client that merely
  pings, or sends SETTINGS, cannot keep an unused connection (and its socket) forever
  (:func:`idle_recheck`);
* ``minigrpc.request_stall_timeout_ms``: a call whose request stops arriving before it is
  whole is cancelled with RST_STREAM(CANCEL) (PROTOCOL-HTTP2.md, Errors), its handler never
  run, so a slowloris client cannot hold calls open with a byte now and then
  (:func:`stall_due`, :func:`cancel_stalled`);
* ``stop(grace)``: the calls still running when the grace ends are cancelled, and a later
  ``stop()`` may shorten the grace, never lengthen it, which is grpcio's rule
  (:func:`stop_deadline`);
* how long a drain waits for its PING's ACK, a failed connection for its GOAWAY to be written,
  and a drained one for the client to close its end (the ``*_TIMEOUT`` constants);
* ``grpc.max_connection_age_ms`` and ``grpc.max_connection_age_grace_ms`` (gRFC A9): a
  connection older than its max age, spread by ±10% per connection so that connections opened
  together are not all closed together, is drained with the two-GOAWAY sequence the servers
  already use for ``stop()`` (:meth:`ServerGrpcConnection.start_drain`, then
  :meth:`ServerGrpcConnection.send_final_goaway` when the PING is answered), each GOAWAY
  NO_ERROR with debug data ``max_age``; the calls still running a grace later are cut: they end
  UNAVAILABLE "max connection age" and the connection closes (:class:`ConnectionAge`,
  :meth:`ServerGrpcConnection.cut_after_drain`).  Both options default to never, as in grpcio.

What grpcio 1.85's server sends, measured with ``max_connection_age_ms=500`` and a grace of 1 s
and of 3 s, a scripted HTTP/2 client holding one unary call (its request whole, END_STREAM
sent), the grace counted from the first GOAWAY (as grpc core counts it; gRFC A9 prefers the
second, an RTT later):

* the client ACKs the drain's PING: GOAWAY(2^31-1, NO_ERROR, "max_age") and a PING, the final
  GOAWAY(1, NO_ERROR, "max_age") on the ACK; at the end of the grace Trailers-Only
  (``grpc-status`` 14, ``grpc-message`` "max connection age"), RST_STREAM(NO_ERROR), and the
  close, with no further GOAWAY;
* the client never ACKs it: GOAWAY(2^31-1, NO_ERROR, "max_age"), no final GOAWAY (grpc core
  waits 20 s for the ACK), and at the end of the grace GOAWAY(1, INTERNAL_ERROR, "max connection
  age") (:data:`MAX_AGE_CUT_DEBUG_DATA`; its last stream the highest the client opened, 3 with
  two calls), then the same trailers and RST_STREAM(NO_ERROR) for each call, and the close.
  Without calls the same GOAWAY(0, INTERNAL_ERROR, "max connection age") ends the connection at
  the end of the grace.

minigrpc's servers send the same, with two differences: the final GOAWAY(NO_ERROR, "max_age")
goes out :data:`DRAIN_PING_TIMEOUT` after the first even without the ACK (so a grace longer than
that sees it before the GOAWAY(INTERNAL_ERROR)), and a call whose request had ended gets no
RST_STREAM after its trailers: its END_STREAM closed the stream, on which RFC 9113 §5.1 allows
nothing more.

The idle drain's GOAWAYs carry ``max_idle`` (:data:`MAX_IDLE_DEBUG_DATA`, gRFC A9).  grpcio
1.85 instead ends an idle connection at once with GOAWAY(INTERNAL_ERROR, "connection idle"), and
spreads its idle time by the same ±10% (:func:`jittered` gives the spread, should the idle check
want it too).
"""

from typing import TYPE_CHECKING, Any, Iterable, List, NamedTuple, Optional, Tuple

from ..protocol.server_protocol import CallEvent, ServerGrpcConnection
from .channel_args import duration, option_value

if TYPE_CHECKING:
    import random

__all__ = [
    "CLOSE_FLUSH_TIMEOUT",
    "CUT",
    "DRAIN",
    "DRAIN_PING_TIMEOUT",
    "LINGER_TIMEOUT",
    "MAX_AGE_CUT_DEBUG_DATA",
    "MAX_AGE_DEBUG_DATA",
    "MAX_AGE_DETAILS",
    "MAX_AGE_JITTER",
    "MAX_IDLE_DEBUG_DATA",
    "NOTHING",
    "ConnectionAge",
    "ConnectionAgeOptions",
    "cancel_stalled",
    "idle_recheck",
    "jittered",
    "stall_due",
    "stop_deadline",
]

#: How long to wait for the ACK of the drain PING before sending the final GOAWAY anyway
#: (grpc-go waits 5 s, grpc-core 20 s; a refused late stream is retried, so shorter is safe).
DRAIN_PING_TIMEOUT = 1.0
#: How long a connection that failed may take to flush its GOAWAY before it is closed anyway.
CLOSE_FLUSH_TIMEOUT = 5.0
#: How long a drained connection waits, write side shut, for the client to close its end.
LINGER_TIMEOUT = 1.0


def idle_recheck(now: float, idle: float, idle_since: float, busy: bool) -> Optional[float]:
    """When to look at a connection's idleness again, or None to drain it now.

    ``idle_since`` is when the connection last started or ended a call (or was accepted);
    ``busy`` says it has calls now (the server's, or streams the protocol still counts).
    """
    if busy:
        return now + idle
    if now - idle_since < idle:
        return idle_since + idle
    return None


def stall_due(protocol: ServerGrpcConnection, stream_id: int, stall: float) -> Optional[float]:
    """When the still incomplete request of ``stream_id`` counts as stalled (its last progress
    plus ``stall``); None when it cannot stall: it is whole, streamed, or its call is gone."""
    progress = protocol.request_progress(stream_id)
    return None if progress is None else progress + stall


def cancel_stalled(protocol: ServerGrpcConnection, stream_id: int, stall: float) -> List[CallEvent]:
    """Cancel the call whose request made no progress for ``stall`` seconds; its events."""
    return protocol.cancel_call(stream_id, f"the request made no progress for {stall:g} s")


def stop_deadline(current: Optional[float], now: float, grace: Optional[float]) -> Optional[float]:
    """When the calls still running are cancelled, after ``stop(grace)`` at ``now``.

    ``current`` is the deadline an earlier ``stop()`` set (None if none did).  No grace (None
    or not positive) means now; otherwise ``now + grace``.  None when this ``stop()`` changes
    nothing, because an earlier one set a deadline as soon or sooner.
    """
    deadline = now if grace is None or grace <= 0 else now + grace
    if current is not None and deadline >= current:
        return None
    return deadline


#: The debug data of the GOAWAYs that drain a connection for its age (gRFC A9; grpc core's).
MAX_AGE_DEBUG_DATA = b"max_age"
#: The debug data of the GOAWAYs that drain an idle connection (gRFC A9).
MAX_IDLE_DEBUG_DATA = b"max_idle"
#: The details of the calls still running when the grace after the max age ends (grpcio's).
MAX_AGE_DETAILS = "max connection age"
#: The debug data of the GOAWAY(INTERNAL_ERROR) that ends a connection at the end of the grace
#: when the client never answered the drain's PING (grpcio's, measured).
MAX_AGE_CUT_DEBUG_DATA = MAX_AGE_DETAILS.encode()
#: The spread of each connection's max age: ±10% (gRFC A9).
MAX_AGE_JITTER = 0.1

#: What :meth:`ConnectionAge.poll` answers.
NOTHING = "nothing"
DRAIN = "drain"
CUT = "cut"


def jittered(seconds: float, rng: "random.Random") -> float:
    """``seconds`` spread by ±:data:`MAX_AGE_JITTER`, once per connection."""
    return seconds * rng.uniform(1.0 - MAX_AGE_JITTER, 1.0 + MAX_AGE_JITTER)


class ConnectionAgeOptions(NamedTuple):
    """``grpc.max_connection_age_ms`` and ``grpc.max_connection_age_grace_ms``, in seconds;
    None is never (the default of both, and what 0, negative values and INT_MAX mean)."""

    max_age: Optional[float] = None
    grace: Optional[float] = None

    @classmethod
    def from_options(cls, options: Optional[Iterable[Tuple[Any, Any]]]) -> "ConnectionAgeOptions":
        """Read them from a server's options; ValueError naming one that is not an integer."""
        items = list(options or ())

        def read(name: str) -> Optional[float]:
            value = option_value(items, name)
            return None if value is None else duration(value, name)

        return cls(read("grpc.max_connection_age_ms"), read("grpc.max_connection_age_grace_ms"))


class ConnectionAge:
    """When one connection is drained for its age, and when its remaining calls are cut.

    :meth:`poll` at :meth:`next_wakeup` says :data:`DRAIN` once (start the graceful drain with
    :data:`MAX_AGE_DEBUG_DATA`), then :data:`CUT` once when the grace is over (end the calls
    still running UNAVAILABLE :data:`MAX_AGE_DETAILS`, send the final GOAWAY if the drain has
    not, and close); a connection that closes sooner simply stops asking.
    """

    __slots__ = ("cut_at", "drain_at", "grace")

    def __init__(self, options: ConnectionAgeOptions, accepted_at: float,
                 rng: "random.Random") -> None:
        self.grace = options.grace
        #: When the drain starts; None once it has, or when the connection has no max age.
        self.drain_at: Optional[float] = None
        if options.max_age is not None:
            self.drain_at = accepted_at + jittered(options.max_age, rng)
        #: When the remaining calls are cut; set when the drain starts, None without a grace.
        self.cut_at: Optional[float] = None

    def next_wakeup(self) -> Optional[float]:
        return self.drain_at if self.drain_at is not None else self.cut_at

    def poll(self, now: float) -> str:
        """:data:`DRAIN`, :data:`CUT` or :data:`NOTHING`."""
        if self.drain_at is not None:
            if now < self.drain_at:
                return NOTHING
            self.drain_at = None
            if self.grace is not None:
                self.cut_at = now + self.grace
            return DRAIN
        if self.cut_at is not None and now >= self.cut_at:
            self.cut_at = None
            return CUT
        return NOTHING
