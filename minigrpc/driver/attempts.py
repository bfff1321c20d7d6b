"""One client call's attempts, without I/O: its retry budget, deadline and backoff, and the
verdict after each attempt.

* **Transparent retry**: a call the server provably never processed — the connection was
  draining before the call got a stream, RST_STREAM(REFUSED_STREAM), or a stream above a
  GOAWAY's last-stream-id (RFC 9113 §8.7, "Request Reliability") — is retried once on a new
  connection, without the application seeing it.
* **Wait for ready**: a server that closed before sending anything fails the call UNAVAILABLE
  at once, unless the call waits for the channel to be ready; then it backs off with gRPC's
  connection backoff (``doc/connection-backoff.md``: exponential, jittered, capped) and tries
  again until the deadline.

:class:`Attempts` keeps that state for one call.  The channel's calls take their steps from it
(:mod:`minigrpc.driver.call_steps`, for both transports); the one-shot call
(:mod:`minigrpc.oneshot`) asks it directly, and so this module stays light: nothing it imports
at run time loads ``enum``, ``collections`` or ``threading``.
"""

import time

from ..protocol.codes import Code
from ..protocol.status import DEADLINE_EXCEEDED_DETAILS, CallStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, Union

    from ..protocol.client_protocol import ClientCall
    from ..protocol.oneshot_protocol import OneShotCall

#: What :meth:`Attempts.after_attempt` answers.
DONE = "done"
RETRY_NOW = "retry now"
BACK_OFF = "back off"

#: How a call on a channel that was closed ends (grpcio's words).
CHANNEL_CLOSED = CallStatus(Code.CANCELLED, "Channel closed!")


def passed(deadline: "Optional[float]") -> bool:
    """True once ``deadline`` (``time.monotonic()``; None: never) has passed."""
    return deadline is not None and time.monotonic() >= deadline


def deadline_status() -> CallStatus:
    return CallStatus(Code.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)


def finished(call: "ClientCall", status: CallStatus) -> "ClientCall":
    """End a call that never got a stream (deadline, connect failure, cancellation)."""
    from ..protocol.client_protocol import CallPhase

    call.status = status
    call.phase = CallPhase.ENDED
    return call


class Attempts:
    """One call's attempts: its retry budget, its backoff and its deadline."""

    __slots__ = (
        "_backoff",
        "_clock",
        "_jitter",
        "_max_backoff",
        "_multiplier",
        "deadline",
        "retries_left",
        "wait_for_ready",
    )

    def __init__(
        self,
        deadline: "Optional[float]",
        wait_for_ready: bool,
        initial_backoff: float,
        max_backoff: float,
        multiplier: float,
        jitter: float,
        clock: "Callable[[], float]" = time.monotonic,
    ) -> None:
        self.deadline = deadline
        self.wait_for_ready = wait_for_ready
        #: Transparent retries left (one, as grpc-go allows for a call never processed).
        self.retries_left = 1
        self._backoff = initial_backoff
        self._max_backoff = max_backoff
        self._multiplier = multiplier
        self._jitter = jitter
        self._clock = clock

    @property
    def expired(self) -> bool:
        return self.deadline is not None and self._clock() >= self.deadline

    def before_attempt(self, channel_closed: bool) -> "Optional[CallStatus]":
        """The status to end the call with before trying (closed channel, deadline), or None."""
        if channel_closed:
            return CHANNEL_CLOSED
        if self.expired:
            return deadline_status()
        return None

    def after_attempt(
        self, call: "Union[ClientCall, OneShotCall]", bytes_received: int, channel_closed: bool
    ) -> str:
        """An attempt ended: :data:`DONE`, :data:`RETRY_NOW` (never processed, budget left) or
        :data:`BACK_OFF` (waiting for ready, and the server closed before saying anything)."""
        assert call.status is not None
        if call.retryable and self.retries_left:
            self.retries_left -= 1
            return RETRY_NOW
        if (
            self.wait_for_ready
            and call.status.code_number == Code.UNAVAILABLE
            and bytes_received == 0
            and not channel_closed
        ):
            return BACK_OFF
        return DONE

    def next_delay(self) -> "Optional[float]":
        """The next backoff sleep, jittered and cut at the deadline; None if it has passed."""
        import random  # only when backing off: the one-shot client never does

        delay = self._backoff * random.uniform(1 - self._jitter, 1 + self._jitter)
        self._backoff = min(self._backoff * self._multiplier, self._max_backoff)
        if self.deadline is not None:
            left = self.deadline - self._clock()
            if left <= 0:
                return None
            delay = min(delay, left)
        return delay
