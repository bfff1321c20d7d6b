"""The blocking stack's timers (minigrpc.blocking.timers): the heap, and the one thread that
serves the blocking client's timers, on real threads and the real clock.

Every wait is on an event or a queue with a timeout; times are asserted with bounds.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import warnings
from typing import Iterator, List

import pytest

from minigrpc.blocking.timers import CLIENT_TIMERS, COMPACT_MIN, SharedTimer, TimerHeap

pytestmark = [pytest.mark.timeout(60)]

WAIT = 10.0


@pytest.fixture
def timer() -> Iterator[SharedTimer]:
    """A timer of its own (not the process's), whose thread ends soon after its last timer."""
    shared = SharedTimer("test-timer", idle_exit=0.2)
    yield shared


def _gone(name: str, timeout: float = WAIT) -> bool:
    """No thread called ``name`` is alive within ``timeout`` (joined, not polled)."""
    for thread in threading.enumerate():
        if thread.name == name:
            thread.join(timeout)
            if thread.is_alive():
                return False
    return True


# -- the heap ------------------------------------------------------------------------------


def test_the_heap_gives_due_timers_in_order_and_skips_cancelled_ones() -> None:
    heap = TimerHeap()
    ran: List[str] = []
    heap.push(3.0, ran.append, "c")
    second = heap.push(2.0, ran.append, "b")
    heap.push(1.0, ran.append, "a")
    heap.push(1.0, ran.append, "a2")  # the same time: the order they were added
    second.cancel()
    assert heap.next_due() == 1.0
    assert heap.pop_due(0.5) is None
    while True:
        handle = heap.pop_due(10.0)
        if handle is None:
            break
        handle.callback(*handle.args)
    assert ran == ["a", "a2", "c"]
    assert heap.next_due() is None and len(heap) == 0


def test_cancelled_timers_are_weeded_out_once_they_are_most_of_the_heap() -> None:
    heap = TimerHeap()
    keep = [heap.push(1000.0 + i, print) for i in range(10)]
    handles = [heap.push(2000.0 + i, print) for i in range(2 * COMPACT_MIN)]
    for handle in handles:
        handle.cancel()
    handles[0].cancel()  # twice is once
    assert len(heap) <= COMPACT_MIN + len(keep)  # compacted, not 2058 entries
    assert heap.next_due() == 1000.0
    assert not any(handle.cancelled for handle in keep)


# -- the shared thread ---------------------------------------------------------------------


def test_timers_run_in_order_of_their_time_on_one_thread(timer: SharedTimer) -> None:
    ran: queue.Queue[tuple] = queue.Queue()
    start = time.monotonic()
    for delay, name in [(0.3, "c"), (0.1, "a"), (0.2, "b")]:
        timer.call_later(delay, lambda name=name: ran.put(
            (name, time.monotonic() - start, threading.current_thread().name)))
    results = [ran.get(timeout=WAIT) for _ in range(3)]
    assert [name for name, _, _ in results] == ["a", "b", "c"]
    for (name, elapsed, thread), due in zip(results, (0.1, 0.2, 0.3)):
        assert due <= elapsed <= due + 1.0, (name, elapsed)
        assert thread == "test-timer"


def test_a_cancelled_timer_does_not_run(timer: SharedTimer) -> None:
    ran: queue.Queue[str] = queue.Queue()
    cancelled = timer.call_later(0.05, ran.put, "cancelled")
    timer.call_later(0.2, ran.put, "kept")
    cancelled.cancel()
    assert ran.get(timeout=WAIT) == "kept"
    assert ran.empty()


def test_a_timer_armed_earlier_wakes_the_thread_for_it(timer: SharedTimer) -> None:
    """Re-arming earlier (cancel, then a new one before the first): the thread, asleep until
    the first time, is woken for the new one."""
    ran: queue.Queue[tuple] = queue.Queue()
    start = time.monotonic()
    late = timer.call_later(5.0, ran.put, ("late", 0.0))
    assert timer.running
    late.cancel()
    timer.call_later(0.1, lambda: ran.put(("early", time.monotonic() - start)))
    name, elapsed = ran.get(timeout=WAIT)
    assert name == "early" and 0.1 <= elapsed <= 1.0, elapsed


def test_a_timer_armed_later_runs_at_its_new_time(timer: SharedTimer) -> None:
    ran: queue.Queue[tuple] = queue.Queue()
    start = time.monotonic()
    early = timer.call_later(0.05, ran.put, ("early", 0.0))
    early.cancel()
    timer.call_later(0.4, lambda: ran.put(("later", time.monotonic() - start)))
    name, elapsed = ran.get(timeout=WAIT)
    assert name == "later" and 0.4 <= elapsed <= 1.4, elapsed


def test_a_callback_that_raises_is_logged_and_the_others_run(
    timer: SharedTimer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="minigrpc.blocking.transport")
    ran: queue.Queue[str] = queue.Queue()

    def broken() -> None:
        raise RuntimeError("broken callback")

    when = time.monotonic() + 0.05
    timer.call_at(when, broken)
    timer.call_at(when, ran.put, "same time")
    timer.call_later(0.2, ran.put, "later")
    assert ran.get(timeout=WAIT) == "same time"
    assert ran.get(timeout=WAIT) == "later"
    assert any("timer callback raised" in record.getMessage() and record.exc_info
               for record in caplog.records)


def test_a_slow_callback_delays_the_others_only_by_its_own_run(timer: SharedTimer) -> None:
    release = threading.Event()
    ran: queue.Queue[tuple] = queue.Queue()
    start = time.monotonic()
    timer.call_later(0.05, release.wait, 0.3)  # a callback that takes 0.3 s
    timer.call_later(0.1, lambda: ran.put(("next", time.monotonic() - start)))
    name, elapsed = ran.get(timeout=WAIT)
    assert name == "next" and 0.3 <= elapsed <= 1.5, elapsed


def test_the_thread_ends_when_nothing_is_scheduled_and_comes_back(timer: SharedTimer) -> None:
    ran: queue.Queue[str] = queue.Queue()
    timer.call_later(0.01, ran.put, "first")
    assert ran.get(timeout=WAIT) == "first"
    assert _gone("test-timer")  # 0.2 s after its last timer
    assert not timer.running
    timer.call_later(0.01, ran.put, "second")
    assert ran.get(timeout=WAIT) == "second"


def test_a_thousand_timers_take_one_thread(timer: SharedTimer) -> None:
    before = threading.active_count()
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def tick() -> None:
        with lock:
            count[0] += 1
            if count[0] == 1000:
                done.set()

    now = time.monotonic()
    for index in range(1000):
        timer.call_at(now + 0.2 + index / 10000, tick)
    assert threading.active_count() <= before + 1
    assert done.wait(WAIT)


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="os.fork with at-fork hooks")
def test_a_forked_child_cancels_its_parents_timers_even_if_the_lock_was_held_at_the_fork(
        ) -> None:
    """Another thread of the parent holds the timer's lock at the fork: in the child no thread
    will ever release it, yet cancelling a timer the parent armed must not wait for it, and new
    timers must run (the child's own thread).  The process's own timer, through the at-fork
    hook the module registers for it."""
    shared = CLIENT_TIMERS
    inherited = shared.call_later(3600.0, lambda: None)
    held, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with shared._lock:
            held.set()
            release.wait(WAIT)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert held.wait(WAIT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, on 3.12+
            child = os.fork()
        if child == 0:  # pragma: no cover (the child's outcome is its exit status)
            status = 1
            try:
                inherited.cancel()
                ran = threading.Event()
                shared.call_later(0.01, ran.set)
                status = 0 if ran.wait(WAIT) else 2
            finally:
                os._exit(status)
        outcome: queue.Queue[int] = queue.Queue()
        reaper = threading.Thread(target=lambda: outcome.put(os.waitpid(child, 0)[1]))
        reaper.start()
        reaper.join(WAIT)  # the child exits within WAIT, or it hangs on the lock
        if reaper.is_alive():
            os.kill(child, 9)
            reaper.join(WAIT)
            pytest.fail("the forked child hung cancelling its parent's timer")
        status = outcome.get_nowait()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        release.set()
        holder.join(WAIT)
        inherited.cancel()
