"""The client keepalive both transports share (minigrpc.driver.client_keepalive), on a fake
clock, between a real client protocol and a real server-side h2 connection in memory: what goes
on the wire (PING, GOAWAY), when the timer is due, and what a dead connection's calls become."""

from typing import Any, List, Tuple

import h2.events
import pytest

from minigrpc.driver.client_keepalive import ChannelKeepalive, ConnectionKeepalive
from minigrpc.http2.frames import ENHANCE_YOUR_CALM
from minigrpc.protocol.client_protocol import CallFinished, ConnectionFailed
from minigrpc.protocol.codes import Code
from tests.support.scripted_peer import MemoryServer, make_call

OPTIONS = [("grpc.keepalive_time_ms", 1000), ("grpc.keepalive_timeout_ms", 500)]


def channel_keepalive(options: Any = OPTIONS) -> ChannelKeepalive:
    keepalive = ChannelKeepalive.from_options(options)
    assert keepalive is not None
    return keepalive


def connected(
    keepalive: ChannelKeepalive, now: float = 0.0
) -> Tuple[MemoryServer, ConnectionKeepalive]:
    server = MemoryServer()
    return server, keepalive.connection(server.client, now)


def pings_at_server(server: MemoryServer) -> List[Any]:
    return [event for event in server.to_server() if isinstance(event, h2.events.PingReceived)]


def test_no_keepalive_time_means_no_keepalive_at_all() -> None:
    assert ChannelKeepalive.from_options(None) is None
    assert ChannelKeepalive.from_options([("grpc.keepalive_timeout_ms", 1000)]) is None


def test_the_timer_is_armed_only_while_a_ping_can_be_due() -> None:
    server, keepalive = connected(channel_keepalive())
    assert keepalive.timer_due() is None  # no call, no permit_without_calls: no timer
    call = make_call(b"hi")
    keepalive.call_starting(0.1)
    server.start(call)
    assert keepalive.timer_due() == 1.0  # a keepalive time after the last byte (the start)
    assert keepalive.timer_due() is None  # armed already for then
    keepalive.received(0.5)
    assert keepalive.timer_due() is None  # lazily: the armed timer will find the new time
    assert keepalive.on_timer(1.0) == []  # early: nothing due
    assert pings_at_server(server) == []
    assert keepalive.timer_due() == 1.5


def test_a_silent_connection_is_pinged_then_given_up_with_its_calls() -> None:
    server, keepalive = connected(channel_keepalive())
    call = make_call(b"hi")
    keepalive.call_starting(0.0)
    server.start(call)
    keepalive.received(0.0)
    assert keepalive.timer_due() == 1.0
    assert keepalive.on_timer(1.0) == []
    assert len(pings_at_server(server)) == 1
    assert keepalive.timer_due() == 1.5  # the timeout after the PING
    events = keepalive.on_timer(1.5)
    assert isinstance(events[-1], ConnectionFailed)
    assert [event.call for event in events if isinstance(event, CallFinished)] == [call]
    assert call.status is not None and call.status.code_number == Code.UNAVAILABLE
    assert "ping timeout" in call.status.details
    goaways = [event for event in server.to_server()
               if isinstance(event, h2.events.ConnectionTerminated)]
    assert [(goaway.error_code, goaway.additional_data) for goaway in goaways] == [
        (ENHANCE_YOUR_CALM, b"ping_timeout")]
    assert keepalive.timer_due() is None  # nothing more to wake for


def test_an_answer_keeps_the_connection() -> None:
    server, keepalive = connected(channel_keepalive())
    keepalive.call_starting(0.0)
    server.start(make_call(b"hi"))
    keepalive.received(0.0)
    keepalive.on_timer(1.0)
    server.to_server()
    server.to_client()  # the PING's ACK
    keepalive.received(1.2)
    assert keepalive.on_timer(1.5) == []
    assert server.client.failure is None
    assert keepalive.timer_due() == 2.2


def test_a_call_on_a_silent_connection_sends_its_ping_before_its_headers() -> None:
    server, keepalive = connected(channel_keepalive())
    keepalive.call_starting(5.0)
    server.client.start_call(make_call(b"hi"))
    events = server.to_server()
    kinds = [type(event) for event in events]
    assert kinds.index(h2.events.PingReceived) < kinds.index(h2.events.RequestReceived)


def test_permit_without_calls_arms_the_timer_on_an_idle_connection() -> None:
    _server, keepalive = connected(
        channel_keepalive([*OPTIONS, ("grpc.keepalive_permit_without_calls", 1)]), now=2.0)
    assert keepalive.timer_due() == 3.0


def test_too_many_pings_doubles_the_channel_keepalive_time_once_per_connection() -> None:
    channel = channel_keepalive()
    _server, first = connected(channel)
    first.goaway_received(ENHANCE_YOUR_CALM, b"too_many_pings")
    first.goaway_received(ENHANCE_YOUR_CALM, b"too_many_pings")  # a second GOAWAY: once
    assert channel.time == 2.0
    first.goaway_received(0, b"")
    assert channel.time == 2.0
    server, second = connected(channel, now=10.0)
    second.call_starting(10.0)
    server.start(make_call(b"hi"))
    assert second.timer_due() == 12.0  # the doubled time, for the next connection
    assert first.pinger.time == 1.0  # the first keeps its own


class Timers:
    """The transport's side of :meth:`ConnectionKeepalive.arm`: the timers it was asked to start
    (a delay each) and the ones cancelled."""

    def __init__(self) -> None:
        self.started: List[float] = []
        self.cancelled: List[int] = []

    def start(self, delay: float) -> "Timers.Handle":
        self.started.append(delay)
        return Timers.Handle(self, len(self.started) - 1)

    class Handle:
        def __init__(self, timers: "Timers", index: int) -> None:
            self.timers, self.index = timers, index

        def cancel(self) -> None:
            self.timers.cancelled.append(self.index)


def test_one_timer_per_connection_rearmed_only_when_due_sooner() -> None:
    server, keepalive = connected(channel_keepalive())
    timers = Timers()
    keepalive.arm(0.0, timers.start)
    assert timers.started == []  # no call: nothing armed
    keepalive.call_starting(0.0)
    server.start(make_call(b"hi"))
    keepalive.arm(0.0, timers.start)
    keepalive.arm(0.2, timers.start)  # armed already for 1.0
    assert timers.started == [1.0] and timers.cancelled == []
    keepalive.on_timer(1.0)  # it went off: PING
    keepalive.arm(1.0, timers.start)
    assert timers.started == [1.0, 0.5]  # the timeout after the PING
    keepalive.stop()
    assert timers.cancelled == [1]


#: An idle connection that pings: a keepalive time shorter than the timeout, as with the
#: defaults (20 s timeout), so the look for the answer comes before the timeout.
IDLE = [("grpc.keepalive_time_ms", 1000), ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]


def fire(keepalive: ConnectionKeepalive, timers: Timers, now: float) -> float:
    """The armed timer goes off at ``now``; the transport re-arms it: when it next goes off."""
    assert keepalive.on_timer(now) == []
    keepalive.arm(now, timers.start)
    return now + timers.started[-1]


def test_an_idle_connection_read_at_once_pings_a_keepalive_time_after_each_answer() -> None:
    """The asyncio transport reads every byte as it comes: the ACK moves the next PING earlier
    than the timeout the timer waits for, so the timer looks a keepalive time after the PING
    and then goes off a keepalive time after the ACK (grpcio: the same, measured); two timer
    wakeups a PING, no more."""
    server, keepalive = connected(channel_keepalive(IDLE))
    timers = Timers()
    keepalive.arm(0.0, timers.start)
    now, sent, wakeups = timers.started[-1], [], 0
    while now < 5.0:
        due = fire(keepalive, timers, now)
        wakeups += 1
        if pings_at_server(server):
            sent.append(now)
            server.to_client()
            keepalive.received(now + 0.1)  # the ACK, 100 ms later
            assert keepalive.timer_due() is None  # armed already, for the look
        now = due
    assert sent == pytest.approx([1.0, 2.1, 3.2, 4.3])
    assert wakeups == 2 * len(sent) - 1  # the last PING's look is after 5.0
    assert server.client.failure is None


def test_an_idle_connection_read_late_pings_every_keepalive_time() -> None:
    """The blocking transport's idle connection is read only when its timer goes off: the ACK
    it takes in at the look counts from the PING's send time, so the PING goes out at the
    look, a keepalive time after the previous one, not the time plus the timeout."""
    server, keepalive = connected(channel_keepalive(IDLE))
    timers = Timers()
    keepalive.arm(0.0, timers.start)
    now = timers.started[-1]
    sent = []
    for _ in range(4):
        due = fire(keepalive, timers, now)
        assert len(pings_at_server(server)) == 1
        sent.append(now)
        server.to_client()  # the ACK waits in the socket,
        now = due
        keepalive.received(now, late=True)  # and is taken in when the timer goes off
    assert sent == [1.0, 2.0, 3.0, 4.0]
    assert server.client.failure is None


def test_no_answer_at_the_look_waits_for_the_timeout_then_gives_up() -> None:
    server, keepalive = connected(channel_keepalive(IDLE))
    timers = Timers()
    keepalive.arm(0.0, timers.start)
    look = fire(keepalive, timers, 1.0)  # PING
    assert len(pings_at_server(server)) == 1
    assert look == 2.0
    # Nothing in the socket at the look: no received().
    timeout = fire(keepalive, timers, look)
    assert timeout == 6.0  # the timeout after the PING, once: no second look
    assert pings_at_server(server) == []
    events = keepalive.on_timer(timeout)
    assert isinstance(events[-1], ConnectionFailed)


def test_a_late_read_without_a_ping_in_flight_counts_from_when_it_is_read() -> None:
    _server, keepalive = connected(channel_keepalive(IDLE))
    keepalive.received(0.5, late=True)
    assert keepalive.timer_due() == 1.5


def test_the_look_comes_at_the_timeout_when_that_is_sooner() -> None:
    """With the timeout shorter than the keepalive time the look is the timeout: an answer
    found there (late) keeps the PINGs a keepalive time apart; none gives the connection up."""
    server, keepalive = connected(channel_keepalive(
        [*OPTIONS, ("grpc.keepalive_permit_without_calls", 1)]))  # time 1 s, timeout 0.5 s
    timers = Timers()
    keepalive.arm(0.0, timers.start)
    look = fire(keepalive, timers, 1.0)
    assert look == 1.5 and len(pings_at_server(server)) == 1
    server.to_client()
    keepalive.received(look, late=True)
    assert fire(keepalive, timers, look) == 2.0  # the next PING, a keepalive time after
    assert fire(keepalive, timers, 2.0) == 2.5
    assert len(pings_at_server(server)) == 1
