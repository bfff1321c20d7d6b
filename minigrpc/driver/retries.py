"""When a client call is tried again, decided once for both transports (gRFC A6, client retries).

A call's attempts go through one :class:`CallRetries`; the transport starts each attempt, sends
and buffers the request messages, and reports what happens:

* :meth:`CallRetries.on_message_sent`: a request message went out; the answer says whether to
  keep a copy for a later attempt.  Past the call's share of the buffer
  (``grpc.per_rpc_retry_buffer_size``, 256 KiB as in grpc core) or the channel's
  (``minigrpc.retry_buffer_size``, 16 MiB as in grpc-java; grpc core has no channel-wide limit),
  the call is *committed*: the current attempt is its last (gRFC A6, "Memory Management").
* :meth:`CallRetries.on_response_headers`: Response-Headers arrived (not a Trailers-Only
  response): committed, since the application may have seen them (gRFC A6, "When Retries are
  Valid").  A streaming call is thereby retried only before its first response.
* :meth:`CallRetries.attempt_finished`: the attempt ended (every attempt's end is reported,
  committed or not, since throttling counts them all).  The :class:`RetryDecision` says when to
  start the next attempt, or that the call ends with this attempt's status.  In grpc core's
  order: OK ends it (and counts a success for throttling); a
  status outside ``retryableStatusCodes`` ends it; a retryable one counts a failure for
  throttling and ends it if retries are throttled; a committed call ends; so does one out of
  attempts (``maxAttempts``, at most 5); so does a ``grpc-retry-pushback-ms`` that is negative or
  not a number; a pushback of n ms retries after exactly n ms and restarts the backoff;
  otherwise the wait is the exponential backoff (:mod:`minigrpc.driver.backoff`, ±20%).
* :meth:`CallRetries.finish`: the call is over (status returned, cancelled, deadline): its
  buffered bytes go back to the channel.

Transparent retries (gRFC A6, "Transparent Retries"), whatever the retry policy, as long as the
call is not committed: an attempt that never left the client (:data:`NOT_SENT`: the connection
was draining or gone before the stream opened) is retried at once, without limit; one that
reached the server but provably never its application (:data:`NOT_PROCESSED`: RST_STREAM
REFUSED_STREAM, or a stream above a GOAWAY's last-stream-id, RFC 9113 §8.7) once per call.
Neither counts against ``maxAttempts`` or for throttling, nor changes
``grpc-previous-rpc-attempts``, which every later attempt carries (gRFC A6, "Exposed Retry
Metadata").  ``grpc.enable_retries=0`` turns off both kinds, as in grpc core.

:class:`RetryThrottle` is the channel's token bucket (``retryThrottling``), shared by its calls;
hedged calls use :mod:`minigrpc.driver.hedging`, which shares this module's buffer accounting
and transparent-retry rule.  The call's deadline spans all attempts and is the transport's to
enforce: a retry planned past it simply never starts (grpcio then fails the call
DEADLINE_EXCEEDED, and so should the transport).
"""

import re
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Optional, Tuple

from ..protocol.codes import Code
from .backoff import ExponentialBackoff
from .channel_args import integer, option_value
from .service_config import RetryPolicy, RetryThrottling

if TYPE_CHECKING:
    import random

__all__ = [
    "DEFAULT_CHANNEL_BUFFER",
    "DEFAULT_PER_CALL_BUFFER",
    "NOT_PROCESSED",
    "NOT_SENT",
    "PREVIOUS_ATTEMPTS_HEADER",
    "PUSHBACK_HEADER",
    "CallBuffer",
    "CallRetries",
    "RetryBuffer",
    "RetryDecision",
    "RetryOptions",
    "RetryThrottle",
    "fits_call_buffer",
    "pushback",
    "transparent_retry",
]

#: The trailer a server sets to ask for a retry after so many milliseconds, or for none.
PUSHBACK_HEADER = "grpc-retry-pushback-ms"
#: The header each attempt after the first carries: how many attempts came before it.
PREVIOUS_ATTEMPTS_HEADER = "grpc-previous-rpc-attempts"
#: ``grpc.per_rpc_retry_buffer_size`` default: what grpc core buffers per call.
DEFAULT_PER_CALL_BUFFER = 256 * 1024
#: ``minigrpc.retry_buffer_size`` default: grpc-java's channel-wide retry buffer.
DEFAULT_CHANNEL_BUFFER = 16 * 1024 * 1024

#: An attempt that never left the client.
NOT_SENT = "not sent"
#: An attempt the server refused before its application saw it.
NOT_PROCESSED = "not processed"

_PUSHBACK = re.compile(r"[+-]?[0-9]+\Z")


class RetryOptions(NamedTuple):
    """The channel's retry options."""

    #: ``grpc.enable_retries`` (default on).
    enabled: bool = True
    #: ``grpc.per_rpc_retry_buffer_size``: request bytes one call may buffer.
    per_call_buffer: int = DEFAULT_PER_CALL_BUFFER
    #: ``minigrpc.retry_buffer_size``: request bytes all calls of the channel may buffer.
    channel_buffer: int = DEFAULT_CHANNEL_BUFFER

    @classmethod
    def from_options(cls, options: Optional[Iterable[Tuple[Any, Any]]]) -> "RetryOptions":
        """Read the options above; ValueError naming one whose value is not an integer."""
        items = list(options or ())

        def number(name: str, default: int) -> int:
            value = option_value(items, name)
            return default if value is None else max(0, integer(value, name))

        return cls(
            enabled=bool(number("grpc.enable_retries", 1)),
            per_call_buffer=number("grpc.per_rpc_retry_buffer_size", DEFAULT_PER_CALL_BUFFER),
            channel_buffer=number("minigrpc.retry_buffer_size", DEFAULT_CHANNEL_BUFFER),
        )


class RetryThrottle:
    """The channel's retry token bucket (gRFC A6, "Throttling Retry Attempts and Hedged RPCs"),
    in thousandths of a token as grpc core counts: each failure that could be retried takes one
    token, each success gives back ``tokenRatio``, and retries are allowed while more than half
    of ``maxTokens`` is left."""

    __slots__ = ("config", "milli_tokens")

    def __init__(self, config: RetryThrottling, milli_tokens: Optional[int] = None) -> None:
        self.config = config
        self.milli_tokens = config.max_milli_tokens if milli_tokens is None else milli_tokens

    @property
    def allows_retries(self) -> bool:
        return self.milli_tokens > self.config.max_milli_tokens // 2

    def record_success(self) -> None:
        self.milli_tokens = min(self.config.max_milli_tokens,
                                self.milli_tokens + self.config.milli_token_ratio)

    def record_failure(self) -> bool:
        """Take a token; whether retries are still allowed."""
        self.milli_tokens = max(0, self.milli_tokens - 1000)
        return self.allows_retries

    def reconfigured(self, config: RetryThrottling) -> "RetryThrottle":
        """The bucket for a new service config: this one if nothing changed, else a new one as
        full, in proportion, as this one is (grpc core's rule, so that throttling goes on)."""
        if config == self.config:
            return self
        share = self.milli_tokens / self.config.max_milli_tokens
        return RetryThrottle(config, int(share * config.max_milli_tokens))


def fits_call_buffer(size: int, limit: int) -> bool:
    """A call that buffered ``size`` request bytes may still be sent again: it is below the
    call's share of the buffer, ``limit`` (grpc core commits a call once it buffered that
    much)."""
    return size < limit


class RetryBuffer:
    """What all calls of a channel buffer for retries, against ``minigrpc.retry_buffer_size``."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int = DEFAULT_CHANNEL_BUFFER) -> None:
        self.limit = limit
        self.used = 0

    def reserve(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used = max(0, self.used - size)


class CallBuffer:
    """One call's buffered request bytes: its share of the channel's :class:`RetryBuffer`,
    within ``grpc.per_rpc_retry_buffer_size``."""

    __slots__ = ("_pool", "buffered", "limit", "overflowed")

    def __init__(self, pool: RetryBuffer, limit: int) -> None:
        self._pool = pool
        self.limit = limit
        self.buffered = 0
        #: The call outgrew its buffer: it can no longer be replayed.
        self.overflowed = False

    def add(self, size: int) -> bool:
        """Buffer a message of ``size`` bytes; False (and everything released) once the call's
        limit is reached, as grpc core commits at ``buffered >= limit``, or the channel's
        buffer is full."""
        if self.overflowed:
            return False
        if not fits_call_buffer(self.buffered + size, self.limit) or not self._pool.reserve(size):
            self.overflowed = True
            self.release()
            return False
        self.buffered += size
        return True

    def release(self) -> None:
        self._pool.release(self.buffered)
        self.buffered = 0


class RetryDecision(NamedTuple):
    """What to do after an attempt ended."""

    #: When to start the next attempt; None: the call ends with this attempt's status.
    retry_at: Optional[float]
    #: The retry is transparent (it does not count as an attempt).
    transparent: bool = False
    #: Why, for logs.
    reason: str = ""


def pushback(metadata: Iterable[Tuple[Any, Any]]) -> Optional[float]:
    """The ``grpc-retry-pushback-ms`` of trailers, in seconds: None when absent; -1.0 when the
    server asks for no retry (a negative value, not an integer, or the header given twice, as
    grpc-go reads it); else the wait, zero or more."""
    found = []
    for key, value in metadata:
        if key in (PUSHBACK_HEADER, PUSHBACK_HEADER.encode("ascii")):
            found.append(value.decode("ascii", "replace") if isinstance(value, bytes) else value)
    if not found:
        return None
    text = str(found[0]).strip(" \t")
    if len(found) > 1 or not _PUSHBACK.match(text) or not -(2**31) <= int(text) < 2**31:
        return -1.0
    milliseconds = int(text)
    return -1.0 if milliseconds < 0 else milliseconds / 1000.0


def transparent_retry(unprocessed: str, refused_retry_used: bool) -> bool:
    """Whether an attempt that ended ``unprocessed`` (:data:`NOT_SENT`, :data:`NOT_PROCESSED`,
    or "") is retried transparently, by the rule of gRFC A6 as grpc core applies it; the caller
    checks that the call is not committed."""
    return unprocessed == NOT_SENT or (unprocessed == NOT_PROCESSED and not refused_retry_used)


class CallRetries:
    """One call's attempts under its method's ``retryPolicy`` (or none: transparent retries
    only).  ``now`` is the caller's clock; the randomness of the backoff is ``rng``'s."""

    __slots__ = (
        "_backoff",
        "_buffer",
        "_refused_retry_used",
        "_rng",
        "attempts_completed",
        "committed",
        "options",
        "policy",
        "throttle",
    )

    def __init__(
        self,
        policy: Optional[RetryPolicy],
        options: RetryOptions,
        buffer: RetryBuffer,
        throttle: Optional[RetryThrottle] = None,
        rng: "Optional[random.Random]" = None,
    ) -> None:
        self.policy = policy if options.enabled else None
        self.options = options
        self.throttle = throttle
        self._buffer = CallBuffer(buffer, options.per_call_buffer)
        #: Attempts that ended and counted (not the transparent retries).
        self.attempts_completed = 0
        #: The current attempt is the last: its outcome is the call's.
        self.committed = not options.enabled
        self._refused_retry_used = False
        #: Made at the first retry (most calls never retry; a random source costs a seed).
        self._backoff: Optional[ExponentialBackoff] = None
        self._rng = rng

    def attempt_metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The header the next attempt sends: ``grpc-previous-rpc-attempts``, from the second
        attempt on."""
        if not self.attempts_completed:
            return ()
        return ((PREVIOUS_ATTEMPTS_HEADER, str(self.attempts_completed)),)

    def commit(self) -> None:
        """No attempt follows the current one; the buffered messages are let go."""
        self.committed = True
        self._buffer.release()

    def on_response_headers(self) -> None:
        self.commit()

    def on_message_sent(self, size: int) -> bool:
        """A request message of ``size`` bytes went out on the current attempt: whether the
        transport keeps a copy to send again on a later one."""
        if self.committed:
            return False
        if not self._buffer.add(size):
            self.commit()
            return False
        return True

    def finish(self) -> None:
        """The call is over, whatever ended it."""
        self.commit()

    def retries_transparently(self, unprocessed: str) -> bool:
        """Whether an attempt that ended ``unprocessed`` would be retried transparently now."""
        return not self.committed and transparent_retry(unprocessed, self._refused_retry_used)

    def attempt_finished(
        self, code: int, now: float, pushback_after: Optional[float] = None,
        unprocessed: str = "",
    ) -> RetryDecision:
        """The current attempt ended with ``code`` (after Response-Headers or not).

        ``pushback_after`` is :func:`pushback` of its trailers; ``unprocessed`` says it never
        reached the server's application (:data:`NOT_SENT`, :data:`NOT_PROCESSED`).
        """
        if not self.committed and transparent_retry(unprocessed, self._refused_retry_used):
            self._refused_retry_used |= unprocessed == NOT_PROCESSED
            return RetryDecision(now, transparent=True, reason=unprocessed)
        decision = self._decide(code, now, pushback_after)
        if decision.retry_at is None:
            self.commit()
        return decision

    def _decide(self, code: int, now: float, pushback_after: Optional[float]) -> RetryDecision:
        policy, throttle = self.policy, self.throttle
        if policy is None:
            return RetryDecision(None, reason="no retry policy")
        if code == Code.OK:
            if throttle is not None:
                throttle.record_success()
            return RetryDecision(None, reason="succeeded")
        if code not in policy.retryable_status_codes:
            return RetryDecision(None, reason="status not retryable")
        if throttle is not None and not throttle.record_failure():
            return RetryDecision(None, reason="retries throttled")
        if self.committed:
            return RetryDecision(None, reason="committed")
        self.attempts_completed += 1
        if self.attempts_completed >= policy.max_attempts:
            return RetryDecision(None, reason="out of attempts")
        if pushback_after is not None and pushback_after < 0:
            return RetryDecision(None, reason="server pushback: no retry")
        backoff = self._backoff
        if backoff is None:
            backoff = self._backoff = ExponentialBackoff(
                policy.initial_backoff, policy.backoff_multiplier, policy.max_backoff,
                rng=self._rng)
        if pushback_after is not None:
            backoff.reset()
            return RetryDecision(now + pushback_after, reason="server pushback")
        return RetryDecision(now + backoff.next_delay(), reason="backoff")
