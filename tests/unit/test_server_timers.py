"""The timed decisions both servers share (minigrpc.driver.server_timers), on a real
ServerGrpcConnection.

The servers' own tests (tests/unit/test_server_behaviour.py, tests/aio/test_server.py) check
the same rules end to end with real clients; these pin the decisions themselves, including the
edges a timer rarely hits (a deadline exactly now, a later stop with a longer grace).
"""

import h2.errors

from minigrpc.driver.server_timers import cancel_stalled, idle_recheck, stall_due, stop_deadline
from minigrpc.protocol import wire
from minigrpc.protocol.enums import StatusCode
from tests.unit.test_server_protocol import Pair


def test_a_busy_connection_is_looked_at_again_a_whole_idle_period_later() -> None:
    assert idle_recheck(now=100.0, idle=30.0, idle_since=0.0, busy=True) == 130.0


def test_an_idle_connection_is_looked_at_again_when_its_idle_period_ends() -> None:
    assert idle_recheck(now=100.0, idle=30.0, idle_since=90.0, busy=False) == 120.0


def test_a_connection_idle_for_the_whole_period_drains_now() -> None:
    assert idle_recheck(now=120.0, idle=30.0, idle_since=90.0, busy=False) is None
    assert idle_recheck(now=500.0, idle=30.0, idle_since=90.0, busy=False) is None


def test_stop_without_grace_is_now() -> None:
    assert stop_deadline(None, 50.0, None) == 50.0
    assert stop_deadline(None, 50.0, 0) == 50.0
    assert stop_deadline(None, 50.0, -1.0) == 50.0


def test_stop_with_grace_ends_it_grace_seconds_later() -> None:
    assert stop_deadline(None, 50.0, 5.0) == 55.0


def test_a_later_stop_shortens_the_grace_but_never_extends_it() -> None:
    assert stop_deadline(55.0, 51.0, 1.0) == 52.0
    assert stop_deadline(55.0, 51.0, 0) == 51.0
    assert stop_deadline(55.0, 51.0, 10.0) is None
    assert stop_deadline(55.0, 51.0, 4.0) is None  # as soon as the first: nothing changes


def test_an_incomplete_request_stalls_its_last_progress_plus_the_timeout() -> None:
    pair = Pair()
    stream_id = pair.request(body=wire.encode_message(b"x" * 100)[:20], end=False)
    pair.settle()
    assert stall_due(pair.server, stream_id, 30.0) == 1030.0
    pair.clock.now = 1007.0
    pair.client.send_data(stream_id, b"y" * 10)
    pair.settle()
    assert stall_due(pair.server, stream_id, 30.0) == 1037.0


def test_a_stalled_request_is_cancelled_and_then_cannot_stall() -> None:
    pair = Pair()
    stream_id = pair.request(body=wire.encode_message(b"x" * 100)[:20], end=False)
    pair.settle()
    events = cancel_stalled(pair.server, stream_id, 0.5)
    assert [(e.code, e.details) for e in events] == [
        (StatusCode.CANCELLED, "the request made no progress for 0.5 s")
    ]
    pair.settle()
    assert pair.response(stream_id)["reset"] == h2.errors.ErrorCodes.CANCEL
    assert stall_due(pair.server, stream_id, 0.5) is None


def test_a_whole_request_cannot_stall() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    assert stall_due(pair.server, stream_id, 30.0) is None
