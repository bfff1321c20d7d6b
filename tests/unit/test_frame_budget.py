"""The allowance of frames that do no work (minigrpc.http2.flood), on a clock set by hand."""

from __future__ import annotations

from minigrpc.http2.flood import MAX_EARNED, MIN_START, START, FrameBudget, PeerHistory


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_exhausted_then_refilled_at_the_rate() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=10, per_second=5.0)
    assert all(budget.spend() for _ in range(10))
    assert not budget.spend()
    clock.now += 1.0  # five frames' worth
    assert [budget.spend() for _ in range(6)] == [True] * 5 + [False]


def test_refill_never_exceeds_the_burst() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=3, per_second=1000.0)
    for _ in range(3):
        budget.spend()
    clock.now += 3600.0
    assert [budget.spend() for _ in range(4)] == [True, True, True, False]


def test_each_response_write_makes_a_ping_and_a_window_update_free() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=1, per_second=0.0)
    budget.earn()
    budget.earn()  # two writes of response data (say, two calls answered in one pass)
    assert all(budget.spend_unless_earned() for _ in range(4))  # their PINGs and WINDOW_UPDATEs
    assert budget.spend_unless_earned()  # the last token
    assert not budget.spend_unless_earned()
    budget.earn()
    assert budget.spend_unless_earned()


def test_earned_credit_has_a_ceiling() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=4, per_second=0.0)
    for _ in range(10 * MAX_EARNED):
        budget.earn()
    # MAX_EARNED free frames at most, then the 4 tokens of the bucket itself.
    spent = [budget.spend_unless_earned() for _ in range(MAX_EARNED + 5)]
    assert spent == [True] * (MAX_EARNED + 4) + [False]


def test_earned_credit_is_only_for_pings_and_window_updates() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=1, per_second=0.0)
    budget.earn()
    assert budget.spend()  # a SETTINGS or RST_STREAM frame takes the bucket's token
    assert not budget.spend()
    assert budget.spend_unless_earned()


def test_a_new_connection_opens_with_a_fraction_that_grows_with_time_and_work() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=1000, per_second=100.0, start=10)
    assert budget.available() == 10
    assert budget.spend(10)
    assert not budget.spend()
    for _ in range(5):
        budget.earn()  # five responses written: five tokens, and their PINGs/WINDOW_UPDATEs
    assert budget.spend(5)
    assert not budget.spend()
    clock.now += 2.0
    assert budget.available() == 200 + 10  # refilled, plus the earned free frames
    clock.now += 3600.0
    assert budget.available() == 1000 + 10  # never past the bucket's size


def test_the_default_opening_is_start() -> None:
    budget = FrameBudget(Clock(), per_second=0.0)
    assert budget.available() == START
    assert budget.spend(START)
    assert not budget.spend()


def test_peer_history_shrinks_the_opening_of_a_peer_that_flooded_and_forgets() -> None:
    clock = Clock()
    history = PeerHistory(clock, half_life=10.0)
    assert history.start_for("10.0.0.1") == START
    history.sent_away("10.0.0.1")
    assert history.start_for("10.0.0.1") == START // 2
    assert history.start_for("10.0.0.2") == START  # another peer is not touched
    for _ in range(100):
        history.sent_away("10.0.0.1")
    assert history.start_for("10.0.0.1") == MIN_START  # never less than the floor
    clock.now += 200.0  # 20 half-lives: the record is as good as gone
    assert history.start_for("10.0.0.1") == START


def test_peer_history_is_bounded() -> None:
    clock = Clock()
    history = PeerHistory(clock, size=3)
    for peer in range(5):
        history.sent_away(peer)
    assert [history.start_for(peer) for peer in range(5)] == [START] * 2 + [START // 2] * 3
    history.sent_away(2)  # seen again: now the most recent, so 3 is the next to go
    history.sent_away(5)
    assert history.start_for(3) == START
    assert history.start_for(2) < START // 2
