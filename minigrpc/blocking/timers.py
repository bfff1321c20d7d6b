"""Timers for the blocking stack: a heap of deadlines, and one thread that serves a heap.

Two users, one heap:

* the blocking server's I/O thread keeps its timers (deadlines, the request-stall check, the
  handshake and idle timeouts, the steps of a drain) in a :class:`TimerHeap` and waits for the
  first of them in its own ``select()`` (:mod:`minigrpc.blocking.server_loop`);
* the blocking client has no loop, so :class:`SharedTimer` gives its heap one daemon thread
  for the whole process (:data:`CLIENT_TIMERS`): every connection's keepalive timer (gRFC A8;
  the decisions are :mod:`minigrpc.driver.client_keepalive`'s) and every channel's reconnect
  backoff wake there.  A thread per armed timer, as ``threading.Timer`` gives, would make
  a thousand idle channels with ``grpc.keepalive_permit_without_calls`` hold a thousand sleeping
  threads (their stacks, and a thread start at every re-arm); one thread serves them all.

The thread sleeps on a condition until the first deadline, and is woken early only when a
timer is added before it; a cancelled timer only has its flag set, and leaves the heap when its
time comes or when cancelled ones outnumber the live ones, so cancelling and re-arming cost no
wake-up.  Callbacks run outside the lock, one after another, each caught and logged, so a
callback that raises ends neither the thread nor the others' turn.  A callback must not block:
it holds up those due after it for as long as it runs (the keepalive's writes take only what
the socket takes at once).  Without timers the thread ends after :attr:`SharedTimer.idle_exit`
seconds, and starts again with the next one.
"""

import heapq
import itertools
import os
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from ..driver.logs import get_logger

__all__ = ["CLIENT_TIMERS", "SharedTimer", "TimerHandle", "TimerHeap"]

_LOG = get_logger("minigrpc.blocking.transport")

#: Entries a heap may hold before cancelled ones are weeded out (when they are most of it).
COMPACT_MIN = 1024
#: How long :data:`CLIENT_TIMERS`'s thread outlives its last timer.
IDLE_EXIT = 10.0


class TimerHandle:
    """One timer of a :class:`TimerHeap`; :meth:`cancel` is all a caller does with it."""

    __slots__ = ("_heap", "args", "callback", "cancelled", "when")

    def __init__(self, heap: "TimerHeap", when: float, callback: Callable[..., None],
                 args: Tuple[Any, ...]) -> None:
        self._heap = heap
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        """It will not run (unless it is running already); a cancelled timer costs nothing more
        than its place in the heap until its time."""
        self._heap._cancel(self)


class TimerHeap:
    """Deadlines in order, each a :class:`TimerHandle`; cancelled ones are skipped.

    Not thread-safe by itself: its owner guards it, and passes that guard (a lock, or None for
    a single thread) so that a handle cancelled from another thread takes it.
    """

    __slots__ = ("_cancelled", "_entries", "_guard", "_sequence")

    def __init__(self, guard: "Optional[threading.Lock]" = None) -> None:
        self._guard = guard
        self._entries: List[Tuple[float, int, TimerHandle]] = []
        self._sequence = itertools.count()
        self._cancelled = 0

    def __len__(self) -> int:
        """Entries held, cancelled ones not yet weeded out included."""
        return len(self._entries)

    def push(self, when: float, callback: Callable[..., None], *args: Any) -> TimerHandle:
        """A timer calling ``callback(*args)`` at ``when`` (on the ``time.monotonic`` clock)."""
        handle = TimerHandle(self, when, callback, args)
        heapq.heappush(self._entries, (when, next(self._sequence), handle))
        return handle

    def next_due(self) -> Optional[float]:
        """When the first live timer is due; None when there is none."""
        entries = self._entries
        while entries and entries[0][2].cancelled:
            heapq.heappop(entries)
            self._cancelled -= 1
        return entries[0][0] if entries else None

    def pop_due(self, now: float) -> Optional[TimerHandle]:
        """The first live timer due at ``now`` (taken out), or None."""
        due = self.next_due()
        if due is None or due > now:
            return None
        return heapq.heappop(self._entries)[2]

    def orphan(self) -> None:
        """No thread guards this heap any more (a forked child's copy of its parent's): its
        handles are cancelled without the guard, which a thread that does not exist in the
        child may have held at the fork, and which would then never be released."""
        self._guard = None

    def _cancel(self, handle: TimerHandle) -> None:
        guard = self._guard
        if guard is None:
            self._cancel_guarded(handle)
        else:
            with guard:
                self._cancel_guarded(handle)

    def _cancel_guarded(self, handle: TimerHandle) -> None:
        if handle.cancelled:
            return
        handle.cancelled = True
        self._cancelled += 1
        entries = self._entries
        if len(entries) > COMPACT_MIN and 2 * self._cancelled > len(entries):
            # At thousands of calls a second with long deadlines, or connections with the
            # server's 120 s handshake timeout, cancelled timers would otherwise pile up (and
            # keep what they reference alive) for as long as their time is away.
            live = [entry for entry in entries if not entry[2].cancelled]
            heapq.heapify(live)
            self._entries = live
            self._cancelled = 0


class SharedTimer:
    """One daemon thread serving a :class:`TimerHeap` for any number of threads (module
    docstring): started with the first timer, woken only for a timer due before the first,
    ended ``idle_exit`` seconds after the last one."""

    def __init__(self, name: str = "minigrpc-timer", idle_exit: float = IDLE_EXIT) -> None:
        self.name = name
        self.idle_exit = idle_exit
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap = TimerHeap(self._lock)
        self._thread: Optional[threading.Thread] = None

    def _after_fork(self) -> None:
        """In a forked child the thread is gone and the lock may be held by a thread that does
        not exist there: start afresh (the parent's timers belong to the parent's connections),
        and let the handles the parent made be cancelled without that lock (a connection the
        child inherited cancels its keepalive timer when it is closed)."""
        self._heap.orphan()
        self._reset()

    @property
    def running(self) -> bool:
        """Its thread is alive (it serves timers, or waits for one before it ends)."""
        return self._thread is not None

    def call_later(self, delay: float, callback: Callable[..., None], *args: Any) -> TimerHandle:
        """``callback(*args)`` on the timer thread in ``delay`` seconds."""
        return self.call_at(time.monotonic() + delay, callback, *args)

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> TimerHandle:
        """``callback(*args)`` on the timer thread at ``when`` (``time.monotonic``)."""
        with self._lock:
            first = self._heap.next_due()
            handle = self._heap.push(when, callback, *args)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            elif first is None or when < first:
                self._wake.notify()
        return handle

    def _run(self) -> None:
        while True:
            due: List[TimerHandle] = []
            with self._lock:
                while not due:
                    first = self._heap.next_due()
                    if first is None:
                        if not self._wake.wait(self.idle_exit) and self._heap.next_due() is None:
                            self._thread = None
                            return
                        continue
                    now = time.monotonic()
                    if first > now:
                        self._wake.wait(first - now)
                        continue
                    handle = self._heap.pop_due(now)
                    while handle is not None:
                        due.append(handle)
                        handle = self._heap.pop_due(now)
            for handle in due:
                if handle.cancelled:  # cancelled after it was taken out
                    continue
                try:
                    handle.callback(*handle.args)
                except Exception:
                    _LOG.exception("minigrpc: a timer callback raised (%r)", handle.callback)


#: The blocking client's one timer thread: keepalive timers and reconnect backoffs.
CLIENT_TIMERS = SharedTimer("minigrpc-timer")

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CLIENT_TIMERS._after_fork)
