"""Keepalive: PINGs that find dead connections, and the limits a server sets on a client's PINGs.

Decided here for both ends and both transports (gRFC A8, client-side keepalive; gRFC A9,
server-side connection management; gRPC's ``doc/keepalive.md``):

**The end that pings** (:class:`KeepalivePinger`, one per connection).  It sends a PING
``keepalive_time`` after the last byte it received, and declares the connection dead when
nothing at all arrives within the timeout after that PING.  Any frame counts as life, not only
the PING's ACK (gRFC A8: "the time between sending a PING and not receiving any bytes"), so a
connection busy receiving is never killed for a late ACK.  The timeout is the shorter of
``grpc.keepalive_timeout_ms`` (20 s) and ``grpc.http2.ping_timeout_ms`` (60 s):

* in grpcio 1.85 only the second works: its write path arms the keepalive-timeout timer only
  when a timer is already armed (``keepalive_ping_timeout_handle != kInvalid`` in
  ``grpc_chttp2_end_write``), which it never is, so ``grpc.keepalive_timeout_ms`` has no effect
  and a silent peer is found ``keepalive_time`` plus 60 s later, unless
  ``grpc.http2.ping_timeout_ms`` is set lower (measured: 61 s with keepalive 1 s and timeout
  1 s; 2 s once ``ping_timeout_ms`` is 1000).  minigrpc honours both, so a setting written for
  either finds a dead peer in time;
* grpcio's ping timeout also ignores the data that arrives meanwhile; minigrpc does not (A8).

A client pings only while calls are open, unless ``grpc.keepalive_permit_without_calls`` is
set; a call that starts on a connection silent for ``keepalive_time`` pings at once, before
its HEADERS (gRFC A8; grpc-go does; grpc core waits for its timer).  A server pings whether or
not calls are open (gRFC A9; grpcio's server only pings connections with calls unless
``grpc.keepalive_permit_without_calls=1``), every ``grpc.keepalive_time_ms`` (2 hours by
default).  After ``grpc.http2.max_pings_without_data`` PINGs (client default 2, 0 for no limit)
with no HEADERS or DATA sent, further PINGs are spaced a minute apart, as in grpcio 1.85
(proposal L116's throttle; measured: PINGs at 1 s, 2 s, then 62 s).  A dead connection's calls
fail UNAVAILABLE and the channel reconnects, as grpcio does (its subchannel goes IDLE).

When a server answers a client's PINGs with GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") the
client logs it and doubles the keepalive time of the channel's next connections
(:func:`keepalive_time_after_too_many_pings`; gRFC A8; grpc core and grpc-go do).

**The server's limits** (:class:`PingStrikes`, one per server connection), as grpc core
enforces them: a PING that arrives sooner than ``grpc.http2.min_ping_interval_without_data_ms``
(5 minutes) after the previous one is a strike; with no call open and without
``grpc.keepalive_permit_without_calls`` the interval is 2 hours (RFC 1122's TCP keepalive).
Sending HEADERS, DATA or a connection WINDOW_UPDATE forgives every strike.  More than
``grpc.http2.max_ping_strikes`` (2; 0 for no limit) strikes and the server sends
GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") and closes.  The first PING is never a strike (the
previous one is at the beginning of time), so with the defaults the 4th PING in quick
succession is the one sent away, which is what grpcio does (measured: PINGs 10 ms apart, GOAWAY
after the 4th; ``max_ping_strikes=5``: after the 7th).  Unlike gRFC A8's suggested algorithm,
grpc core restarts the interval at every PING, strike or not; so does this.

**How this sits beside flood protection** (:mod:`minigrpc.http2.flood`): the flood budget
counts every PING against a token bucket refilled at 200 frames a second, to stop a client that
makes the server spend its time answering frames; it never fires for keepalive rates.  The
strikes enforce the service owner's keepalive policy at human rates (minutes): a client that
pings every few seconds while the server sends nothing is sent away here long before it could
touch the flood budget, and a PING flood interleaved with data (which resets the strikes) is
still caught by the budget.  Each sends its own GOAWAY(ENHANCE_YOUR_CALM) with its own debug
data; whichever fires first closes the connection.
"""

from typing import Any, Iterable, NamedTuple, Optional, Tuple

from ..http2.frames import ENHANCE_YOUR_CALM
from .channel_args import INT_MAX, duration, integer, option_value

__all__ = [
    "DEAD",
    "NOTHING",
    "PING",
    "PING_TIMEOUT_DEBUG_DATA",
    "TOO_MANY_PINGS_DEBUG_DATA",
    "KeepaliveOptions",
    "KeepalivePinger",
    "PingStrikes",
    "is_too_many_pings",
    "keepalive_time_after_too_many_pings",
]

#: The debug data of the GOAWAY(ENHANCE_YOUR_CALM) a server sends a client that pings too often.
TOO_MANY_PINGS_DEBUG_DATA = b"too_many_pings"
#: The debug data of the GOAWAY(ENHANCE_YOUR_CALM) grpc core sends when its PING goes unanswered.
PING_TIMEOUT_DEBUG_DATA = b"ping_timeout"
#: How often PINGs may go out once ``max_pings_without_data`` were sent without data.
THROTTLED_PING_INTERVAL = 60.0
#: The shortest interval between PINGs a server accepts while no call is open and pings without
#: calls are not permitted (RFC 1122's TCP keepalive interval).
IDLE_PING_INTERVAL = 7200.0

#: What :meth:`KeepalivePinger.poll` answers.
NOTHING = "nothing"
PING = "ping"
DEAD = "dead"


class KeepaliveOptions(NamedTuple):
    """One end's keepalive options, with grpc core's defaults for that end."""

    #: ``grpc.keepalive_time_ms``: seconds of silence before a PING; None: never ping.
    time: Optional[float]
    #: ``grpc.keepalive_timeout_ms``: seconds without a byte after a PING before the end.
    timeout: Optional[float] = 20.0
    #: ``grpc.http2.ping_timeout_ms``: the same bound under grpcio's other name.
    ping_timeout: Optional[float] = 60.0
    #: ``grpc.keepalive_permit_without_calls``.
    permit_without_calls: bool = False
    #: ``grpc.http2.max_pings_without_data`` (0: no limit).
    max_pings_without_data: int = 2
    #: ``grpc.http2.min_ping_interval_without_data_ms`` (server).
    min_ping_interval: float = 300.0
    #: ``grpc.http2.max_ping_strikes`` (server; 0: no limit).
    max_ping_strikes: int = 2

    @property
    def dead_after(self) -> Optional[float]:
        """How long after a PING a connection that received nothing counts as dead."""
        bounds = [bound for bound in (self.timeout, self.ping_timeout) if bound is not None]
        return min(bounds) if bounds else None

    @classmethod
    def client(cls, options: Optional[Iterable[Tuple[Any, Any]]]) -> "KeepaliveOptions":
        """A channel's options; ValueError naming one whose value is not an integer."""
        return _read(cls(time=None), options)

    @classmethod
    def server(cls, options: Optional[Iterable[Tuple[Any, Any]]]) -> "KeepaliveOptions":
        """A server's options."""
        return _read(cls(time=7200.0, max_pings_without_data=0), options)


def _read(defaults: KeepaliveOptions, options: Optional[Iterable[Tuple[Any, Any]]]
          ) -> KeepaliveOptions:
    items = list(options or ())

    def seconds(name: str, default: Optional[float]) -> Optional[float]:
        value = option_value(items, name)
        return default if value is None else duration(value, name)

    def number(name: str, default: int) -> int:
        value = option_value(items, name)
        return default if value is None else max(0, integer(value, name))

    interval = "grpc.http2.min_ping_interval_without_data_ms"  # 0 allows any interval
    return KeepaliveOptions(
        time=seconds("grpc.keepalive_time_ms", defaults.time),
        timeout=seconds("grpc.keepalive_timeout_ms", defaults.timeout),
        ping_timeout=seconds("grpc.http2.ping_timeout_ms", defaults.ping_timeout),
        permit_without_calls=bool(number("grpc.keepalive_permit_without_calls",
                                         defaults.permit_without_calls)),
        max_pings_without_data=number("grpc.http2.max_pings_without_data",
                                      defaults.max_pings_without_data),
        min_ping_interval=number(interval, round(defaults.min_ping_interval * 1000)) / 1000.0,
        max_ping_strikes=number("grpc.http2.max_ping_strikes", defaults.max_ping_strikes),
    )


class KeepalivePinger:
    """When one connection's end sends keepalive PINGs, and when it gives the connection up.

    The transport reports what it reads and writes and asks :meth:`poll` what to do at
    :meth:`next_wakeup` (and whenever it likes: :meth:`poll` only acts when something is due).
    ``pings_without_calls`` is True for a server (gRFC A9) and for a client with
    ``grpc.keepalive_permit_without_calls``.
    """

    __slots__ = (
        "_last_ping",
        "_pings_without_data",
        "last_read",
        "look_at",
        "options",
        "ping_sent_at",
        "pings_without_calls",
        "time",
    )

    def __init__(self, options: KeepaliveOptions, now: float, pings_without_calls: bool,
                 time: Optional[float] = None) -> None:
        self.options = options
        self.pings_without_calls = pings_without_calls
        #: The keepalive time of this connection (the channel's, doubled after too_many_pings).
        self.time = options.time if time is None else time
        #: When the last byte arrived (the connection's start, to begin with).
        self.last_read = now
        #: When the PING now awaiting life was sent; None when none is.
        self.ping_sent_at: Optional[float] = None
        #: When to look whether that PING was answered: a keepalive time after it, the
        #: earliest the next PING can be due; None once looked (then the timeout is next).
        self.look_at: Optional[float] = None
        self._last_ping: Optional[float] = None
        self._pings_without_data = 0

    def on_bytes_received(self, now: float) -> None:
        """Anything arrived (a frame, a PING ACK): the connection is alive."""
        self.last_read = now
        self.ping_sent_at = None

    def on_data_sent(self) -> None:
        """HEADERS or DATA went out: PINGs are no longer "without data"."""
        self._pings_without_data = 0

    def _ping_allowed_at(self) -> float:
        """The earliest a PING may go out, by ``max_pings_without_data``'s throttle."""
        limit = self.options.max_pings_without_data
        if limit and self._pings_without_data >= limit and self._last_ping is not None:
            return self._last_ping + THROTTLED_PING_INTERVAL
        return float("-inf")

    def next_wakeup(self, active_calls: int) -> Optional[float]:
        """When :meth:`poll` has something to do, or None while nothing can become due.

        With a PING in flight that is the look for its answer (:attr:`look_at`), then the
        timeout.  A transport's timer is not moved at every read (that would cost a timer
        operation per read), and the answer makes the next PING due earlier than the timeout:
        without the look, a keepalive time shorter than the timeout would send PINGs a
        timeout apart instead of a keepalive time after the answer (gRFC A8: after the last
        byte received; grpcio 1.85 measured the same).
        """
        if self.ping_sent_at is not None:
            dead_after = self.options.dead_after
            dead_at = None if dead_after is None else self.ping_sent_at + dead_after
            look_at = self.look_at
            if look_at is None or (dead_at is not None and dead_at <= look_at):
                return dead_at
            return look_at
        if self.time is None or not (active_calls or self.pings_without_calls):
            return None
        return max(self.last_read + self.time, self._ping_allowed_at())

    def poll(self, now: float, active_calls: int) -> str:
        """:data:`PING` (send one now; it is counted as sent), :data:`DEAD` (close the
        connection: no byte arrived in time after the PING) or :data:`NOTHING`."""
        if self.ping_sent_at is not None:
            if self.look_at is not None and now >= self.look_at:
                self.look_at = None  # looked: not answered yet, so the timeout is next
            dead_after = self.options.dead_after
            if dead_after is not None and now >= self.ping_sent_at + dead_after:
                return DEAD
            return NOTHING
        due = self.next_wakeup(active_calls)
        if due is None or now < due:
            return NOTHING
        self._sent_ping(now)
        return PING

    def _sent_ping(self, now: float) -> None:
        self.ping_sent_at = now
        self.look_at = None if self.time is None else now + self.time
        self._last_ping = now
        self._pings_without_data += 1

    def on_call_started(self, now: float) -> bool:
        """A call is about to send its HEADERS: True to send a PING first, when the connection
        has been silent for the keepalive time (gRFC A8), which detects a dead connection within
        the timeout instead of the keepalive time plus the timeout."""
        if (self.time is None or self.ping_sent_at is not None
                or now < max(self.last_read + self.time, self._ping_allowed_at())):
            return False
        self._sent_ping(now)
        return True


class PingStrikes:
    """The server's count of a client's PINGs that came too soon (grpc core's ping abuse
    policy); one per connection."""

    __slots__ = ("_last_ping", "options", "strikes")

    def __init__(self, options: KeepaliveOptions) -> None:
        self.options = options
        self.strikes = 0
        self._last_ping: Optional[float] = None

    def on_ping_received(self, now: float, active_calls: int) -> bool:
        """A PING (not an ACK) arrived: True when it is one strike too many, and the server
        sends GOAWAY(ENHANCE_YOUR_CALM, :data:`TOO_MANY_PINGS_DEBUG_DATA`) and closes."""
        if active_calls or self.options.permit_without_calls:
            interval = self.options.min_ping_interval
        else:
            interval = IDLE_PING_INTERVAL
        previous, self._last_ping = self._last_ping, now
        if previous is None or previous + interval <= now:
            return False
        self.strikes += 1
        limit = self.options.max_ping_strikes
        return bool(limit) and self.strikes > limit

    def on_data_sent(self) -> None:
        """HEADERS, DATA or a connection WINDOW_UPDATE went out: every strike is forgiven."""
        self.strikes = 0
        self._last_ping = None


def is_too_many_pings(error_code: int, debug_data: bytes) -> bool:
    """A GOAWAY that says the client pings too often (gRFC A8)."""
    return error_code == ENHANCE_YOUR_CALM and debug_data == TOO_MANY_PINGS_DEBUG_DATA


def keepalive_time_after_too_many_pings(time: float) -> float:
    """The keepalive time for the channel's next connections: doubled, at most gRPC core's
    INT_MAX milliseconds."""
    return min(time * 2, INT_MAX / 1000.0)
