"""The allowance of frames that do no work (minigrpc.frame_budget), on a clock set by hand."""

from __future__ import annotations

from minigrpc.frame_budget import FrameBudget


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


def test_a_ping_and_a_window_update_after_response_data_are_free() -> None:
    clock = Clock()
    budget = FrameBudget(clock, burst=1, per_second=0.0)
    budget.earn()
    budget.earn()  # the credit does not accumulate
    assert budget.spend_unless_earned()  # free: the server just sent data (a PING)
    assert budget.spend_unless_earned()  # free (a WINDOW_UPDATE)
    assert budget.spend_unless_earned()  # the last token
    assert not budget.spend_unless_earned()
    budget.earn()
    assert budget.spend_unless_earned()
