"""Hedged calls: several attempts of one call in flight at once (gRFC A6, "Hedging Policy").

Neither grpc core nor grpc-go implements hedging; grpc-java does, and this follows it where
gRFC A6 is silent.  A method whose service config has a ``hedgingPolicy`` (read only with
``grpc.experimental.enable_hedging``) sends its first attempt at once and another every
``hedgingDelay`` until ``maxAttempts`` are out; the transport keeps every attempt fed with the
same request messages.  Then:

* the first attempt that receives Response-Headers wins: the call is committed to it and the
  others are cancelled (:meth:`CallHedging.on_response_headers`);
* an attempt that ends with a status outside ``nonFatalStatusCodes`` (OK included) ends the
  call with that status and cancels the others;
* an attempt that ends with a non-fatal status is just over: the next hedge goes out at once
  instead of after its delay (gRFC A6; grpc-java keeps the delay), unless the server pushed
  back: ``grpc-retry-pushback-ms`` of n delays the next hedge by n ms, a negative one stops
  hedging.  The call ends with the last attempt's status when none is left in flight and none
  is to come;
* throttling (:class:`~minigrpc.driver.retries.RetryThrottle`): a non-fatal status counts a
  failure, and when retries are throttled no further hedge is sent, while those in flight go on
  (gRFC A6; grpc-java ends the call instead); OK counts a success;
* the request messages are buffered once for all attempts, within the same limits as retries;
  past them the call is committed to its oldest attempt in flight and the others are cancelled;
* transparent retries replace an attempt as for retries
  (:func:`~minigrpc.driver.retries.transparent_retry`).

Attempts are numbered from 0 in the order they start; attempt n sends
``grpc-previous-rpc-attempts: n`` (none for attempt 0).  ``now`` is the caller's clock.
"""

from typing import List, NamedTuple, Optional, Set, Tuple

from ..protocol.codes import Code
from .retries import (
    NOT_PROCESSED,
    PREVIOUS_ATTEMPTS_HEADER,
    CallBuffer,
    RetryBuffer,
    RetryOptions,
    RetryThrottle,
    transparent_retry,
)
from .service_config import HedgingPolicy

__all__ = ["CallHedging", "HedgeDecision"]


class HedgeDecision(NamedTuple):
    """What to do after an attempt of a hedged call ended."""

    #: The call ends with this attempt's status.
    finish: bool = False
    #: Attempts to cancel now.
    cancel: Tuple[int, ...] = ()
    #: Start this attempt again at once, with the same number (a transparent retry).
    restart: bool = False


class CallHedging:
    """One hedged call's attempts."""

    __slots__ = (
        "_buffer",
        "_frozen",
        "_refused_retry_used",
        "active",
        "committed",
        "next_hedge_at",
        "policy",
        "started",
        "throttle",
        "winner",
    )

    def __init__(
        self,
        policy: HedgingPolicy,
        options: RetryOptions,
        buffer: RetryBuffer,
        throttle: Optional[RetryThrottle] = None,
    ) -> None:
        self.policy = policy
        self.throttle = throttle
        self._buffer = CallBuffer(buffer, options.per_call_buffer)
        #: Attempts started so far.
        self.started = 0
        #: Attempts in flight.
        self.active: Set[int] = set()
        #: When the next hedge is due (see :meth:`hedges_due`); None: no more are planned.
        self.next_hedge_at: Optional[float] = None
        self.committed = False
        #: The attempt the call is committed to; None before, or when committed to none.
        self.winner: Optional[int] = None
        self._frozen = False
        self._refused_retry_used = False

    def start(self, now: float) -> int:
        """The call starts: its first attempt (0) goes out now, the next after the delay."""
        return self._start_attempt(now)

    def _can_hedge(self) -> bool:
        return not self.committed and not self._frozen and self.started < self.policy.max_attempts

    def _start_attempt(self, now: float) -> int:
        attempt = self.started
        self.started += 1
        self.active.add(attempt)
        self.next_hedge_at = now + self.policy.hedging_delay if self._can_hedge() else None
        return attempt

    def _freeze(self) -> None:
        self._frozen = True
        self.next_hedge_at = None

    def hedges_due(self, now: float) -> List[int]:
        """The attempts to start now (several when the delay is zero); call it when
        :attr:`next_hedge_at` comes."""
        due = []
        while self.next_hedge_at is not None and now >= self.next_hedge_at and self._can_hedge():
            if self.throttle is not None and not self.throttle.allows_retries:
                self._freeze()
                break
            due.append(self._start_attempt(now))
        return due

    @staticmethod
    def attempt_metadata(attempt: int) -> Tuple[Tuple[str, str], ...]:
        """The header attempt ``attempt`` sends: ``grpc-previous-rpc-attempts``."""
        return ((PREVIOUS_ATTEMPTS_HEADER, str(attempt)),) if attempt else ()

    def _commit(self, winner: Optional[int]) -> Tuple[int, ...]:
        """Commit to ``winner``: the attempts to cancel."""
        self.committed = True
        self.winner = winner
        self.next_hedge_at = None
        self._buffer.release()
        return tuple(sorted(self.active - {winner}))

    def on_response_headers(self, attempt: int) -> Tuple[int, ...]:
        """Response-Headers arrived on ``attempt``: it wins (unless another did); the attempts
        to cancel."""
        if self.committed:
            return ()
        return self._commit(attempt)

    def on_message_sent(self, size: int) -> Tuple[bool, Tuple[int, ...]]:
        """A request message of ``size`` bytes went to every attempt in flight: whether to keep a
        copy for attempts still to come, and the attempts to cancel because the buffer
        overflowed (the call is then committed to its oldest attempt in flight, or to none when
        none is: it ends with its last attempt's status)."""
        if self.committed:
            return False, ()
        if self._buffer.add(size):
            return True, ()
        return False, self._commit(min(self.active) if self.active else None)

    def finish(self) -> None:
        """The call is over, whatever ended it."""
        if not self.committed:
            self._commit(None)

    def attempt_finished(
        self, attempt: int, code: int, now: float, pushback_after: Optional[float] = None,
        unprocessed: str = "",
    ) -> HedgeDecision:
        """``attempt`` ended with ``code``; ``pushback_after`` is
        :func:`~minigrpc.driver.retries.pushback` of its trailers."""
        self.active.discard(attempt)
        throttle = self.throttle
        if self.committed:
            if attempt != self.winner:
                return HedgeDecision()  # cancelled, or overtaken
            if throttle is not None and code == Code.OK:
                throttle.record_success()
            elif throttle is not None and code in self.policy.non_fatal_status_codes:
                throttle.record_failure()
            return HedgeDecision(finish=True)
        if transparent_retry(unprocessed, self._refused_retry_used):
            self._refused_retry_used |= unprocessed == NOT_PROCESSED
            self.active.add(attempt)
            return HedgeDecision(restart=True)
        non_fatal = code != Code.OK and code in self.policy.non_fatal_status_codes
        stop = pushback_after is not None and pushback_after < 0
        if throttle is not None:
            if code == Code.OK:
                throttle.record_success()
            elif (non_fatal or stop) and not throttle.record_failure():
                self._freeze()
        if not non_fatal:
            return HedgeDecision(finish=True, cancel=self._commit(attempt))
        if stop:
            self._freeze()
        elif self._can_hedge():
            self.next_hedge_at = now + (pushback_after or 0.0)
        if self.active or self._can_hedge():
            return HedgeDecision()
        self._commit(attempt)
        return HedgeDecision(finish=True)
