"""The allowance of frames that do no work (minigrpc.frame_budget), on a clock set by hand."""

from __future__ import annotations

from minigrpc.frame_budget import MAX_EARNED, FrameBudget


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
