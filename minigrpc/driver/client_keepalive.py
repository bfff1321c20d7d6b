"""Client keepalive, wired once for both client transports (gRFC A8, client-side keepalive).

:mod:`minigrpc.driver.keepalive` decides when a connection's end pings and when it is dead;
this module is what the blocking and asyncio client connections share to carry that out, so
that each of them only keeps one timer per connection, writes what the protocol queued, and
closes:

* :class:`ChannelKeepalive`, one per channel (None when ``grpc.keepalive_time_ms`` is not set:
  then nothing here runs and a connection costs nothing more).  It holds the channel's
  keepalive time, which a GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") doubles for the channel's
  later connections, and logs it, as grpc core and grpc-go do (gRFC A8);
* :class:`ConnectionKeepalive`, one per connection, made by :meth:`ChannelKeepalive.connection`.
  The transport reports every read that carried bytes (:meth:`~ConnectionKeepalive.received`:
  any frame is life, not only the PING's ACK), each call about to send its HEADERS
  (:meth:`~ConnectionKeepalive.call_starting`, which may queue a PING first) and each request
  message (:meth:`~ConnectionKeepalive.data_sent`), and every GOAWAY
  (:meth:`~ConnectionKeepalive.goaway_received`).  When the connection starts, when a call
  starts and after each time the timer went off it calls :meth:`~ConnectionKeepalive.arm`,
  which (re)arms the transport's one timer if it must go off sooner, and when the timer goes
  off it calls :meth:`~ConnectionKeepalive.on_timer`: the PING is queued on the
  protocol, or, when nothing arrived within the timeout, the connection is given up
  (GOAWAY(ENHANCE_YOUR_CALM, "ping_timeout"), its calls UNAVAILABLE) and the transport closes
  it and reports it lost, so the channel goes IDLE and the next call reconnects, as grpcio's
  subchannel does.

The timer is re-armed lazily: reads do not move it (that would cost a timer operation per read);
when it goes off early, :meth:`~ConnectionKeepalive.on_timer` does nothing and
:meth:`~ConnectionKeepalive.arm` sets it for the new time.  That only works for times that move
later, and a PING's answer moves the next PING earlier than the timeout the timer waits for; so
while a PING awaits its answer the timer also goes off a keepalive time after it was sent (or at
the timeout, if that is sooner): the earliest the next PING can be due, since the answer comes
after the PING (:meth:`KeepalivePinger.next_wakeup`, the rule the server's keepalive shares).
There the transport finds the answer and the next PING goes out a keepalive
time after it (gRFC A8: keepalive time after the last byte received; grpcio 1.85 measured the
same, PINGs a keepalive time after the previous ACK), not after the keepalive time plus the
timeout; no answer yet, and it looks again at the timeout.  A transport that reads the socket
only when the timer goes off (the blocking client's idle connection) reports what it takes in
there as ``received(now, late=True)``: it emptied the socket just before it sent the PING, so
those bytes came after it, and they count from when it was sent, which keeps such a connection's
PINGs a keepalive time apart without a thread reading its socket.  A connection without calls (and
without ``grpc.keepalive_permit_without_calls``) has no timer at all, so idle channels cost no
CPU between PINGs.

Like the protocol state it drives, nothing here is thread-safe: the blocking transport calls it
under the connection's lock, the asyncio one from the event loop.
"""

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..http2.frames import ENHANCE_YOUR_CALM
from ..protocol.client_protocol import CallEvent, ClientGrpcConnection
from .keepalive import (
    DEAD,
    PING,
    PING_TIMEOUT_DEBUG_DATA,
    KeepaliveOptions,
    KeepalivePinger,
    is_too_many_pings,
    keepalive_time_after_too_many_pings,
)
from .logs import get_logger

if TYPE_CHECKING:  # pragma: no cover - what a transport's timer offers
    from typing import Protocol

    class Timer(Protocol):
        """A transport's armed timer: the blocking client's shared timer's handle, an
        ``asyncio.TimerHandle``."""

        def cancel(self) -> None: ...

__all__ = ["PING_TIMEOUT_DETAILS", "ChannelKeepalive", "ConnectionKeepalive"]

_LOG = get_logger("minigrpc.channel")

#: The details of the calls a dead connection ends (UNAVAILABLE), after what grpcio reports.
PING_TIMEOUT_DETAILS = "ping timeout: nothing received within {:g} s of a keepalive PING"


class ChannelKeepalive:
    """One channel's keepalive: its options, and the keepalive time of its next connections."""

    __slots__ = ("options", "time")

    def __init__(self, options: KeepaliveOptions) -> None:
        self.options = options
        #: ``grpc.keepalive_time_ms``, doubled at each too_many_pings.
        self.time: Optional[float] = options.time

    @classmethod
    def from_options(
        cls, options: Optional[Iterable[Tuple[Any, Any]]]
    ) -> "Optional[ChannelKeepalive]":
        """The channel's keepalive; None when it sets no ``grpc.keepalive_time_ms`` (a client
        then never pings, grpc core's default).  ValueError names an option that is not an
        integer."""
        parsed = KeepaliveOptions.client(options)
        return None if parsed.time is None else cls(parsed)

    def connection(self, protocol: ClientGrpcConnection, now: float) -> "ConnectionKeepalive":
        """The keepalive of a new connection, with the channel's keepalive time as it is now."""
        return ConnectionKeepalive(self, protocol, now)

    def too_many_pings(self, peer: str) -> None:
        """The server sent GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings"): double the keepalive
        time of the next connections (gRFC A8) and say so."""
        if self.time is None:
            return
        before, self.time = self.time, keepalive_time_after_too_many_pings(self.time)
        _LOG.warning(
            "%s sent GOAWAY(ENHANCE_YOUR_CALM, too_many_pings): the keepalive time of this "
            "channel's next connections goes from %g s to %g s", peer, before, self.time)


class ConnectionKeepalive:
    """One connection's keepalive: its :class:`KeepalivePinger` and its protocol state."""

    __slots__ = ("_calmed", "_channel", "_protocol", "_timer", "_timer_at", "pinger")

    def __init__(
        self, channel: ChannelKeepalive, protocol: ClientGrpcConnection, now: float
    ) -> None:
        self._channel = channel
        self._protocol = protocol
        options = channel.options
        self.pinger = KeepalivePinger(options, now, options.permit_without_calls, channel.time)
        #: The transport's timer, and when it is armed to go off (None: it is not).
        self._timer: Optional[Timer] = None
        self._timer_at: Optional[float] = None
        #: This connection's too_many_pings was counted (a second GOAWAY doubles nothing).
        self._calmed = False

    def received(self, now: float, late: bool = False) -> None:
        """A read carried bytes: the connection is alive.

        ``late``: the bytes waited in the socket while nobody read it, and were taken in only
        now that the timer went off.  With a PING in flight they count from when it was sent:
        the transport emptied the socket just before sending it, so they arrived after it, and
        the next PING is due a keepalive time after the last one, as when read at once.
        """
        sent = self.pinger.ping_sent_at
        self.pinger.on_bytes_received(sent if late and sent is not None else now)

    def call_starting(self, now: float) -> None:
        """A call's HEADERS are about to be queued: on a connection silent for the keepalive
        time a PING goes first (gRFC A8), and the HEADERS count as data sent."""
        if self.pinger.on_call_started(now):
            self._protocol.send_ping()
        self.pinger.on_data_sent()

    def data_sent(self) -> None:
        """A request message was queued: PINGs are no longer "without data"."""
        self.pinger.on_data_sent()

    def goaway_received(self, error_code: int, debug_data: bytes) -> None:
        """A GOAWAY arrived; a too_many_pings one slows the channel's next connections."""
        if not self._calmed and is_too_many_pings(error_code, debug_data):
            self._calmed = True
            self._channel.too_many_pings(self._protocol.peer)

    def timer_due(self) -> Optional[float]:
        """When the transport's one timer is to go off, if it must be armed anew: the next
        wakeup (with a PING in flight, the look for its answer, then the timeout) when none
        is armed or it comes before the armed one (the transport cancels that one), else None
        (the armed timer will do, or there is nothing to wake for)."""
        if self._protocol.failure is not None:
            return None
        due = self.pinger.next_wakeup(len(self._protocol.calls))
        if due is None or (self._timer_at is not None and self._timer_at <= due):
            return None
        self._timer_at = due
        return due

    def arm(self, now: float, start: "Callable[[float], Timer]") -> None:
        """Arm the transport's one timer if :meth:`timer_due` says so: the timer armed before
        is cancelled and ``start(delay)`` starts the new one, which calls :meth:`on_timer`.
        A timer that goes off after it was replaced only finds nothing due."""
        due = self.timer_due()
        if due is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = start(max(0.0, due - now))

    def stop(self) -> None:
        """The connection closed: cancel its timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = None

    def on_timer(self, now: float) -> List[CallEvent]:
        """The transport's timer went off: queue a PING, or give a dead connection up (the
        events of its calls' ends, and :class:`ConnectionFailed` last: the transport closes the
        connection and reports it lost).  Then :meth:`arm` again."""
        self._timer = self._timer_at = None
        protocol = self._protocol
        if protocol.failure is not None:
            return []
        verdict = self.pinger.poll(now, len(protocol.calls))
        if verdict is PING:
            protocol.send_ping()
        elif verdict is DEAD:
            dead_after = self.pinger.options.dead_after or 0.0
            _LOG.info("%s: no answer to a keepalive PING within %g s; closing the connection",
                      protocol.peer, dead_after)
            return protocol.abort(PING_TIMEOUT_DETAILS.format(dead_after), ENHANCE_YOUR_CALM,
                                  PING_TIMEOUT_DEBUG_DATA)
        return []
