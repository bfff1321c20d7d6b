"""Keepalive (minigrpc.driver.keepalive): when an end pings, when it gives a connection up, and
when a server sends a client away for pinging too often, on a fake clock.

The grpcio behaviour these match was measured against grpcio 1.85 with a scripted HTTP/2 peer;
the module docstring gives the figures."""

from typing import List, Tuple

import pytest

from minigrpc.driver.keepalive import (
    DEAD,
    NOTHING,
    PING,
    KeepaliveOptions,
    KeepalivePinger,
    PingStrikes,
    is_too_many_pings,
    keepalive_time_after_too_many_pings,
)
from minigrpc.http2.frames import ENHANCE_YOUR_CALM, NO_ERROR

CLIENT = KeepaliveOptions.client([("grpc.keepalive_time_ms", 1000),
                                  ("grpc.keepalive_timeout_ms", 1000)])


def test_client_and_server_defaults_are_grpc_cores() -> None:
    client, server = KeepaliveOptions.client(None), KeepaliveOptions.server(None)
    assert (client.time, client.timeout, client.ping_timeout) == (None, 20.0, 60.0)
    assert (client.permit_without_calls, client.max_pings_without_data) == (False, 2)
    assert (server.time, server.timeout, server.max_pings_without_data) == (7200.0, 20.0, 0)
    assert (server.min_ping_interval, server.max_ping_strikes) == (300.0, 2)


def test_options_are_read_in_milliseconds() -> None:
    options = KeepaliveOptions.server([
        ("grpc.keepalive_time_ms", 30000), ("grpc.keepalive_timeout_ms", "5000"),
        ("grpc.http2.ping_timeout_ms", 2147483647), ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0), ("grpc.http2.min_ping_interval_without_data_ms",
                                                    0), ("grpc.http2.max_ping_strikes", 5)])
    assert options == KeepaliveOptions(time=30.0, timeout=5.0, ping_timeout=None,
                                       permit_without_calls=True, max_pings_without_data=0,
                                       min_ping_interval=0.0, max_ping_strikes=5)
    assert KeepaliveOptions.client([("grpc.keepalive_time_ms", 0)]).time is None
    with pytest.raises(ValueError, match=r"grpc\.keepalive_time_ms"):
        KeepaliveOptions.client([("grpc.keepalive_time_ms", "soon")])


def test_a_dead_connection_is_given_up_after_the_shorter_of_the_two_timeouts() -> None:
    """grpcio needs grpc.http2.ping_timeout_ms for this; either option works here."""
    assert CLIENT.dead_after == 1.0
    assert KeepaliveOptions.client([("grpc.http2.ping_timeout_ms", 1000)]).dead_after == 1.0
    assert KeepaliveOptions.client(None).dead_after == 20.0
    assert KeepaliveOptions.client([("grpc.keepalive_timeout_ms", 90000)]).dead_after == 60.0


def run(pinger: KeepalivePinger, until: float, active_calls: int = 1,
        frames_every: float = 0.0, ack: bool = True) -> List[Tuple[float, str]]:
    """Step the pinger on a fake clock in 10 ms steps: the peer sends a frame every
    ``frames_every`` seconds (0: never) and ACKs each PING at once if ``ack``."""
    events = []
    now = 0.0
    next_frame = frames_every or float("inf")
    while now <= until:
        if now >= next_frame:
            pinger.on_bytes_received(now)
            next_frame += frames_every
        action = pinger.poll(now, active_calls)
        if action != NOTHING:
            events.append((round(now, 2), action))
            if action == DEAD:
                break
            if ack:
                pinger.on_bytes_received(now)
        now = round(now + 0.01, 2)
    return events


def test_a_silent_peer_is_pinged_then_given_up() -> None:
    pinger = KeepalivePinger(CLIENT, now=0.0, pings_without_calls=False)
    assert run(pinger, until=10, ack=False) == [(1.0, PING), (2.0, DEAD)]


def test_without_calls_a_client_pings_only_when_permitted() -> None:
    assert run(KeepalivePinger(CLIENT, 0.0, pings_without_calls=False), 5, active_calls=0) == []
    permitted = KeepalivePinger(CLIENT, 0.0, pings_without_calls=True)
    assert run(permitted, 2.5, active_calls=0) == [(1.0, PING), (2.0, PING)]


def test_any_frame_counts_as_life_so_a_busy_connection_is_never_pinged_or_killed() -> None:
    pinger = KeepalivePinger(CLIENT, 0.0, pings_without_calls=False)
    assert run(pinger, until=30, frames_every=0.5, ack=False) == []


def test_a_late_ack_does_not_kill_a_connection_that_receives_data() -> None:
    pinger = KeepalivePinger(CLIENT._replace(time=0.5), 0.0, pings_without_calls=False)
    events = run(pinger, until=30, frames_every=0.7, ack=False)
    assert events and all(action == PING for _, action in events)


def test_the_next_ping_is_a_keepalive_time_after_the_last_byte() -> None:
    pinger = KeepalivePinger(CLIENT, 0.0, pings_without_calls=False)
    assert pinger.next_wakeup(active_calls=1) == 1.0
    pinger.on_bytes_received(0.7)
    assert pinger.next_wakeup(1) == 1.7 and pinger.poll(1.69, 1) == NOTHING
    assert pinger.poll(1.7, 1) == PING and pinger.next_wakeup(1) == 2.7
    pinger.on_bytes_received(2.0)
    assert pinger.next_wakeup(1) == 3.0
    assert pinger.next_wakeup(0) is None


def test_pings_without_data_slow_to_one_a_minute_as_in_grpcio() -> None:
    """grpcio 1.85, keepalive 1 s, the peer ACKing: PINGs at 1 s, 2 s, then 62 s."""
    pinger = KeepalivePinger(CLIENT, 0.0, pings_without_calls=False)
    assert [at for at, _ in run(pinger, until=70)] == [1.0, 2.0, 62.0]
    unlimited = KeepalivePinger(CLIENT._replace(max_pings_without_data=0), 0.0, False)
    assert len(run(unlimited, until=10)) == 10


def test_sending_data_lifts_the_limit() -> None:
    pinger = KeepalivePinger(CLIENT, 0.0, pings_without_calls=False)
    run(pinger, until=2.5)
    assert pinger.next_wakeup(1) == 62.0
    pinger.on_data_sent()
    assert pinger.next_wakeup(1) == 3.0


def test_a_call_on_a_silent_connection_pings_before_its_headers() -> None:
    pinger = KeepalivePinger(CLIENT, 0.0, pings_without_calls=False)
    assert pinger.on_call_started(0.5) is False
    assert pinger.on_call_started(5.0) is True
    assert pinger.ping_sent_at == 5.0 and pinger.on_call_started(5.1) is False
    assert pinger.poll(6.0, 1) == DEAD


def test_a_server_pings_idle_connections_too() -> None:
    options = KeepaliveOptions.server([("grpc.keepalive_time_ms", 500),
                                       ("grpc.keepalive_timeout_ms", 500)])
    pinger = KeepalivePinger(options, 0.0, pings_without_calls=True)
    assert run(pinger, until=5, active_calls=0, ack=False) == [(0.5, PING), (1.0, DEAD)]


def test_without_keepalive_time_nothing_is_ever_due() -> None:
    pinger = KeepalivePinger(KeepaliveOptions.client(None), 0.0, pings_without_calls=True)
    assert pinger.next_wakeup(5) is None and pinger.on_call_started(1e9) is False
    assert run(pinger, until=1) == []


def test_too_many_pings_doubles_the_keepalive_time_of_the_next_connections() -> None:
    assert is_too_many_pings(ENHANCE_YOUR_CALM, b"too_many_pings")
    assert not is_too_many_pings(NO_ERROR, b"too_many_pings")
    assert not is_too_many_pings(ENHANCE_YOUR_CALM, b"ping_timeout")
    assert keepalive_time_after_too_many_pings(10.0) == 20.0
    assert keepalive_time_after_too_many_pings(2e6) == (2**31 - 1) / 1000.0
    doubled = KeepalivePinger(CLIENT, 0.0, False, time=keepalive_time_after_too_many_pings(1.0))
    assert doubled.next_wakeup(1) == 2.0


# -- the server's strikes --------------------------------------------------------------------------


def pings_until_goaway(strikes: PingStrikes, every: float, active_calls: int = 0,
                       count: int = 50, data_between: bool = False) -> int:
    """The number of the PING the server sends away, or 0 when none of ``count`` is."""
    for number in range(1, count + 1):
        if strikes.on_ping_received(number * every, active_calls):
            return number
        if data_between:
            strikes.on_data_sent()
    return 0


def test_the_fourth_quick_ping_is_sent_away_with_the_defaults_as_in_grpcio() -> None:
    """The first PING is never a strike; the 2nd and 3rd are strikes 1 and 2; the 4th is the
    third strike, one more than grpc.http2.max_ping_strikes allows."""
    defaults = KeepaliveOptions.server(None)
    assert pings_until_goaway(PingStrikes(defaults), every=0.01) == 4
    assert pings_until_goaway(PingStrikes(defaults), every=0.01, active_calls=1) == 4
    assert pings_until_goaway(PingStrikes(defaults._replace(max_ping_strikes=5)), 0.01) == 7
    assert pings_until_goaway(PingStrikes(defaults._replace(max_ping_strikes=0)), 0.01) == 0


def test_a_client_pinging_within_policy_is_left_alone() -> None:
    options = KeepaliveOptions.server([("grpc.http2.min_ping_interval_without_data_ms", 50)])
    assert pings_until_goaway(PingStrikes(options), every=0.1, active_calls=1) == 0
    exactly = options._replace(min_ping_interval=0.5)  # a binary fraction: no rounding
    assert pings_until_goaway(PingStrikes(exactly), every=0.5, active_calls=1) == 0
    assert pings_until_goaway(PingStrikes(KeepaliveOptions.server(None)), every=300.0,
                              active_calls=1) == 0


def test_without_calls_pings_must_be_two_hours_apart_unless_permitted() -> None:
    options = KeepaliveOptions.server([("grpc.http2.min_ping_interval_without_data_ms", 50)])
    assert pings_until_goaway(PingStrikes(options), every=0.1) == 4
    assert pings_until_goaway(PingStrikes(options._replace(permit_without_calls=True)),
                              every=0.1) == 0
    assert pings_until_goaway(PingStrikes(options), every=7200.0) == 0


def test_data_sent_forgives_every_strike() -> None:
    defaults = KeepaliveOptions.server(None)
    assert pings_until_goaway(PingStrikes(defaults), every=0.01, data_between=True) == 0
    strikes = PingStrikes(defaults)
    for at in (0.0, 0.01, 0.02):
        strikes.on_ping_received(at, 0)
    assert strikes.strikes == 2
    strikes.on_data_sent()
    assert strikes.strikes == 0 and strikes.on_ping_received(0.03, 0) is False


def timer_driven(pinger: KeepalivePinger, until: float, answer_after: float = 0.0
                 ) -> List[Tuple[float, str]]:
    """Step the pinger as a transport's timer does: wake only at :meth:`next_wakeup`, never
    moved by reads, while the peer answers each PING ``answer_after`` seconds after it (read
    at once when it arrives, as the servers and the asyncio client read); 0: never answers."""
    events: List[Tuple[float, str]] = []
    answer_at = None
    while True:
        due = pinger.next_wakeup(0)
        assert due is not None
        if answer_at is not None and answer_at <= due:
            pinger.on_bytes_received(answer_at)
            answer_at = None
        if due > until:
            return events
        action = pinger.poll(due, 0)
        if action != NOTHING:
            events.append((round(due, 2), action))
        if action == DEAD:
            return events
        if action == PING and answer_after:
            answer_at = due + answer_after


def test_a_keepalive_time_shorter_than_the_timeout_pings_a_keepalive_time_after_the_answer(
        ) -> None:
    """The answer makes the next PING due before the timeout the timer waits for: the pinger
    wakes a keepalive time after each PING to look for it (gRFC A8: a keepalive time after
    the last byte received), for the server's keepalive and the client's alike."""
    options = KeepaliveOptions.server([("grpc.keepalive_time_ms", 1000),
                                       ("grpc.keepalive_timeout_ms", 20000)])
    pinger = KeepalivePinger(options, 0.0, pings_without_calls=True)
    assert timer_driven(pinger, until=4.5, answer_after=0.1) == [
        (1.0, PING), (2.1, PING), (3.2, PING), (4.3, PING)]
    # Unanswered: the look finds nothing, and the timeout after the PING gives it up.
    silent = KeepalivePinger(options, 0.0, pings_without_calls=True)
    assert timer_driven(silent, until=60.0) == [(1.0, PING), (21.0, DEAD)]
    # A timeout shorter than the keepalive time: nothing to look for before it.
    short = KeepalivePinger(options._replace(timeout=0.5), 0.0, pings_without_calls=True)
    assert timer_driven(short, until=60.0) == [(1.0, PING), (1.5, DEAD)]
