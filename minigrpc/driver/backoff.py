"""Exponential backoff with jitter: the wait before a retry or a reconnection.

gRPC uses one shape of backoff for both (``doc/connection-backoff.md``; gRFC A6, "Exponential
Backoff", as updated in 2024 and as grpc core implements it): the n-th wait is
``min(initial * multiplier**(n-1), maximum)``, spread by a random factor in
``[1 - jitter, 1 + jitter)`` so that many clients failing together do not come back together.
A jitter of 0.2 is what grpc core applies to retries and to reconnections alike, so a wait may
be a little below ``initial`` or above ``maximum``.  (grpc-go and grpc-java draw a retry's wait
from ``[0, current)`` instead, the rule gRFC A6 gave before 2024.)

:mod:`minigrpc.driver.retries` waits with it between attempts, and
:mod:`minigrpc.driver.balancing` between connection attempts to an address.  The randomness is
the caller's (a :class:`random.Random`), so tests draw from a seeded one.
"""

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import random

__all__ = ["DEFAULT_JITTER", "ExponentialBackoff", "new_random"]

#: The spread grpc core gives every retry and reconnection wait.
DEFAULT_JITTER = 0.2


def new_random() -> "random.Random":
    """A fresh random source, imported only when something backs off: a one-shot process that
    never waits never pays for :mod:`random`'s import."""
    import random

    return random.Random()


class ExponentialBackoff:
    """The waits of one sequence of tries: each :meth:`next_delay` is the next wait; :meth:`reset`
    starts over from ``initial``."""

    __slots__ = ("_current", "_first", "initial", "jitter", "maximum", "multiplier", "random")

    def __init__(
        self,
        initial: float,
        multiplier: float,
        maximum: float,
        jitter: float = DEFAULT_JITTER,
        rng: "Optional[random.Random]" = None,
    ) -> None:
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum
        self.jitter = jitter
        self.random = rng if rng is not None else new_random()
        self._current = initial
        self._first = True

    def next_delay(self) -> float:
        """The next wait, in seconds: ``initial`` the first time, then multiplied each time up to
        ``maximum``, each spread by the jitter."""
        if self._first:
            self._first = False
        else:
            self._current = min(self._current * self.multiplier, self.maximum)
        return self._current * self.random.uniform(1.0 - self.jitter, 1.0 + self.jitter)

    def reset(self) -> None:
        """Start over: the next wait is ``initial`` (spread) again."""
        self._current = self.initial
        self._first = True
