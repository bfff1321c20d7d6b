"""Retries and hedging (minigrpc.driver.retries, .hedging, .backoff): every rule of gRFC A6 as
the two transports will step it, on a fake clock with seeded randomness."""

import random
from typing import Optional

import pytest

from minigrpc.driver.backoff import ExponentialBackoff
from minigrpc.driver.hedging import CallHedging, HedgeDecision
from minigrpc.driver.retries import (
    DEFAULT_CHANNEL_BUFFER,
    DEFAULT_PER_CALL_BUFFER,
    NOT_PROCESSED,
    NOT_SENT,
    CallRetries,
    RetryBuffer,
    RetryDecision,
    RetryOptions,
    RetryThrottle,
    pushback,
)
from minigrpc.driver.service_config import HedgingPolicy, RetryPolicy, RetryThrottling
from minigrpc.protocol.codes import Code

POLICY = RetryPolicy(max_attempts=4, initial_backoff=1.0, max_backoff=5.0, backoff_multiplier=2.0,
                     retryable_status_codes=frozenset({Code.UNAVAILABLE}))
UNAVAILABLE, INTERNAL, OK = Code.UNAVAILABLE, Code.INTERNAL, Code.OK
DEFAULTS = RetryOptions()


def call(policy: Optional[RetryPolicy] = POLICY, options: RetryOptions = DEFAULTS,
         buffer: Optional[RetryBuffer] = None, throttle: Optional[RetryThrottle] = None,
         seed: int = 7) -> CallRetries:
    return CallRetries(policy, options, buffer or RetryBuffer(), throttle, random.Random(seed))


def throttle(max_tokens: int = 10, ratio: float = 0.1) -> RetryThrottle:
    return RetryThrottle(RetryThrottling(max_tokens * 1000, round(ratio * 1000)))


# -- backoff ---------------------------------------------------------------------------------------


def test_backoff_grows_by_the_multiplier_up_to_the_maximum_each_spread_by_a_fifth() -> None:
    backoff = ExponentialBackoff(1.0, 2.0, 5.0, rng=random.Random(3))
    same = random.Random(3)
    for base in (1.0, 2.0, 4.0, 5.0, 5.0):
        assert backoff.next_delay() == base * same.uniform(0.8, 1.2)


def test_backoff_stays_within_its_jitter_and_starts_over_on_reset() -> None:
    backoff = ExponentialBackoff(0.1, 1.6, 120.0, rng=random.Random(11))
    delays = [backoff.next_delay() for _ in range(30)]
    assert 0.08 <= delays[0] <= 0.12
    assert max(delays) <= 120.0 * 1.2 and min(delays[-5:]) >= 120.0 * 0.8
    backoff.reset()
    assert 0.08 <= backoff.next_delay() <= 0.12


# -- server pushback -------------------------------------------------------------------------------


@pytest.mark.parametrize(("trailers", "seconds"), [
    ((), None),
    ((("other", "1"),), None),
    ((("grpc-retry-pushback-ms", "250"),), 0.25),
    ((("grpc-retry-pushback-ms", "0"),), 0.0),
    ((("grpc-retry-pushback-ms", "0010"),), 0.01),
    ((("grpc-retry-pushback-ms", " +7 "),), 0.007),
    (((b"grpc-retry-pushback-ms", b"30"),), 0.03),
    ((("grpc-retry-pushback-ms", "-1"),), -1.0),
    ((("grpc-retry-pushback-ms", "soon"),), -1.0),
    ((("grpc-retry-pushback-ms", "1.5"),), -1.0),
    ((("grpc-retry-pushback-ms", "2147483648"),), -1.0),
    ((("grpc-retry-pushback-ms", "1"), ("grpc-retry-pushback-ms", "2")), -1.0),
])
def test_pushback_is_a_wait_or_a_refusal(trailers: tuple, seconds: Optional[float]) -> None:
    assert pushback(trailers) == seconds


# -- retry decisions -------------------------------------------------------------------------------


def test_a_retryable_status_is_retried_after_the_backoff() -> None:
    retries = call(seed=5)
    decision = retries.attempt_finished(UNAVAILABLE, now=100.0)
    assert decision == RetryDecision(100.0 + 1.0 * random.Random(5).uniform(0.8, 1.2),
                                     reason="backoff")


def test_each_retry_waits_longer_up_to_the_maximum_backoff() -> None:
    retries = call(POLICY._replace(max_attempts=5), seed=9)
    same = random.Random(9)
    for base in (1.0, 2.0, 4.0, 5.0):
        decision = retries.attempt_finished(UNAVAILABLE, now=0.0)
        assert decision.retry_at == base * same.uniform(0.8, 1.2)


@pytest.mark.parametrize("code", [Code.INTERNAL, Code.CANCELLED, Code.DEADLINE_EXCEEDED])
def test_a_status_that_is_not_retryable_ends_the_call(code: int) -> None:
    retries = call()
    assert retries.attempt_finished(code, now=0.0) == RetryDecision(None,
                                                                    reason="status not retryable")
    assert retries.committed


def test_ok_ends_the_call() -> None:
    assert call().attempt_finished(OK, now=0.0).retry_at is None


def test_max_attempts_counts_every_attempt_including_the_first() -> None:
    retries = call()
    assert [retries.attempt_finished(UNAVAILABLE, 0.0).retry_at is not None
            for _ in range(4)] == [True, True, True, False]
    assert retries.attempt_finished(UNAVAILABLE, 0.0).reason == "committed"


def test_each_retry_tells_the_server_how_many_attempts_came_before() -> None:
    retries = call()
    assert retries.attempt_metadata() == ()
    retries.attempt_finished(UNAVAILABLE, 0.0)
    assert retries.attempt_metadata() == (("grpc-previous-rpc-attempts", "1"),)
    retries.attempt_finished(UNAVAILABLE, 0.0)
    assert retries.attempt_metadata() == (("grpc-previous-rpc-attempts", "2"),)


def test_pushback_sets_the_wait_exactly_and_restarts_the_backoff() -> None:
    retries = call(seed=1)
    same = random.Random(1)
    retries.attempt_finished(UNAVAILABLE, 0.0)  # backoff 1 s
    same.uniform(0.8, 1.2)
    assert retries.attempt_finished(UNAVAILABLE, 10.0, pushback_after=0.25) == RetryDecision(
        10.25, reason="server pushback")
    # The next backoff is the initial one again, not 2 s.
    assert retries.attempt_finished(UNAVAILABLE, 20.0).retry_at == 20.0 + same.uniform(0.8, 1.2)


@pytest.mark.parametrize("value", ["-1", "never"])
def test_a_negative_or_malformed_pushback_stops_retries(value: str) -> None:
    retries = call()
    after = pushback([("grpc-retry-pushback-ms", value)])
    assert retries.attempt_finished(UNAVAILABLE, 0.0, pushback_after=after) == RetryDecision(
        None, reason="server pushback: no retry")


def test_pushback_does_not_grant_attempts_past_max_attempts() -> None:
    retries = call(POLICY._replace(max_attempts=2))
    retries.attempt_finished(UNAVAILABLE, 0.0)
    assert retries.attempt_finished(UNAVAILABLE, 0.0, pushback_after=0.0).reason == (
        "out of attempts")


def test_response_headers_commit_the_call() -> None:
    """A streaming call is thereby retried only before its first response."""
    retries = call()
    retries.on_response_headers()
    assert retries.committed
    assert retries.attempt_finished(UNAVAILABLE, 0.0) == RetryDecision(None, reason="committed")


def test_without_a_policy_only_transparent_retries_happen() -> None:
    retries = call(policy=None)
    assert retries.attempt_finished(UNAVAILABLE, 0.0) == RetryDecision(None,
                                                                       reason="no retry policy")
    assert call(policy=None).attempt_finished(UNAVAILABLE, 5.0, unprocessed=NOT_SENT) == (
        RetryDecision(5.0, transparent=True, reason=NOT_SENT))


# -- transparent retries ---------------------------------------------------------------------------


def test_an_attempt_that_never_left_the_client_is_retried_at_once_without_limit() -> None:
    retries = call()
    for _ in range(50):
        assert retries.attempt_finished(UNAVAILABLE, 3.0, unprocessed=NOT_SENT) == RetryDecision(
            3.0, transparent=True, reason=NOT_SENT)
    assert retries.attempts_completed == 0 and retries.attempt_metadata() == ()


def test_an_attempt_the_server_refused_is_retried_once_per_call_then_by_the_policy() -> None:
    retries = call(seed=2)
    assert retries.attempt_finished(UNAVAILABLE, 3.0, unprocessed=NOT_PROCESSED) == (
        RetryDecision(3.0, transparent=True, reason=NOT_PROCESSED))
    second = retries.attempt_finished(UNAVAILABLE, 3.0, unprocessed=NOT_PROCESSED)
    assert not second.transparent and second.reason == "backoff"
    assert retries.attempts_completed == 1


def test_a_committed_call_is_not_retried_even_transparently() -> None:
    retries = call()
    retries.on_response_headers()
    assert retries.attempt_finished(UNAVAILABLE, 0.0, unprocessed=NOT_SENT).retry_at is None


def test_disabled_retries_retry_nothing() -> None:
    retries = call(options=RetryOptions(enabled=False))
    assert retries.committed and retries.policy is None
    assert retries.on_message_sent(10) is False
    assert retries.attempt_finished(UNAVAILABLE, 0.0, unprocessed=NOT_SENT).retry_at is None


# -- buffering -------------------------------------------------------------------------------------


def test_messages_are_kept_until_the_call_reaches_its_buffer_limit() -> None:
    pool = RetryBuffer()
    retries = call(options=RetryOptions(per_call_buffer=100), buffer=pool)
    assert retries.on_message_sent(60) is True and pool.used == 60
    assert retries.on_message_sent(39) is True and pool.used == 99
    assert retries.on_message_sent(1) is False  # 100 >= 100: committed, as grpc core does
    assert retries.committed and pool.used == 0
    assert retries.attempt_finished(UNAVAILABLE, 0.0).reason == "committed"
    assert retries.on_message_sent(1) is False


def test_a_full_channel_buffer_commits_the_call_that_does_not_fit() -> None:
    pool = RetryBuffer(limit=100)
    first, second = call(buffer=pool), call(buffer=pool)
    assert first.on_message_sent(80) is True
    assert second.on_message_sent(30) is False and second.committed
    assert first.on_message_sent(20) is True and pool.used == 100
    first.finish()
    assert pool.used == 0
    assert call(buffer=pool).on_message_sent(100) is True


def test_retry_options_come_from_the_channel_options() -> None:
    assert RetryOptions.from_options(None) == RetryOptions(
        True, DEFAULT_PER_CALL_BUFFER, DEFAULT_CHANNEL_BUFFER)
    assert RetryOptions.from_options([
        ("grpc.enable_retries", 0), ("grpc.per_rpc_retry_buffer_size", "1024"),
        ("minigrpc.retry_buffer_size", 4096), ("grpc.per_rpc_retry_buffer_size", -5),
    ]) == RetryOptions(False, 0, 4096)
    with pytest.raises(ValueError, match=r"grpc\.enable_retries"):
        RetryOptions.from_options([("grpc.enable_retries", "yes")])


# -- throttling ------------------------------------------------------------------------------------


def test_throttling_allows_retries_while_more_than_half_the_tokens_are_left() -> None:
    bucket = throttle(max_tokens=10, ratio=0.1)
    assert [bucket.record_failure() for _ in range(5)] == [True, True, True, True, False]
    assert bucket.milli_tokens == 5000
    bucket.record_success()
    assert bucket.milli_tokens == 5100 and bucket.allows_retries


def test_throttle_tokens_stay_between_zero_and_max() -> None:
    bucket = throttle(max_tokens=2, ratio=1.5)
    for _ in range(5):
        bucket.record_failure()
    assert bucket.milli_tokens == 0
    for _ in range(5):
        bucket.record_success()
    assert bucket.milli_tokens == 2000


def test_a_throttled_channel_does_not_retry_but_still_counts() -> None:
    bucket = throttle(max_tokens=4, ratio=1)
    retries = call(POLICY._replace(max_attempts=5), throttle=bucket)
    assert retries.attempt_finished(UNAVAILABLE, 0.0).retry_at is not None  # 3000 > 2000
    assert retries.attempt_finished(UNAVAILABLE, 0.0) == RetryDecision(
        None, reason="retries throttled")  # 2000 is not above half
    assert bucket.milli_tokens == 2000


def test_only_retryable_failures_and_successes_move_the_tokens() -> None:
    bucket = throttle()
    call(throttle=bucket).attempt_finished(INTERNAL, 0.0)
    assert bucket.milli_tokens == 10000
    call(throttle=bucket).attempt_finished(UNAVAILABLE, 0.0)
    assert bucket.milli_tokens == 9000
    call(throttle=bucket).attempt_finished(OK, 0.0)
    assert bucket.milli_tokens == 9100
    call(throttle=bucket).attempt_finished(UNAVAILABLE, 0.0, unprocessed=NOT_SENT)
    assert bucket.milli_tokens == 9100  # transparent retries are not failures


def test_a_committed_call_still_counts_its_outcome() -> None:
    bucket = throttle()
    retries = call(throttle=bucket)
    retries.on_response_headers()
    retries.attempt_finished(UNAVAILABLE, 0.0)
    assert bucket.milli_tokens == 9000


def test_a_new_throttling_config_keeps_the_bucket_as_full_in_proportion() -> None:
    bucket = throttle(max_tokens=10)
    for _ in range(4):
        bucket.record_failure()
    assert bucket.reconfigured(bucket.config) is bucket
    bigger = bucket.reconfigured(RetryThrottling(100000, 100))
    assert bigger.milli_tokens == 60000 and bigger.config.max_milli_tokens == 100000


# -- hedging ---------------------------------------------------------------------------------------

HEDGING = HedgingPolicy(max_attempts=3, hedging_delay=0.5,
                        non_fatal_status_codes=frozenset({Code.UNAVAILABLE}))


def hedged(policy: HedgingPolicy = HEDGING, options: RetryOptions = DEFAULTS,
           buffer: Optional[RetryBuffer] = None,
           bucket: Optional[RetryThrottle] = None) -> CallHedging:
    return CallHedging(policy, options, buffer or RetryBuffer(), bucket)


def test_hedges_go_out_every_delay_up_to_max_attempts() -> None:
    hedging = hedged()
    assert hedging.start(10.0) == 0 and hedging.next_hedge_at == 10.5
    assert hedging.hedges_due(10.4) == []
    assert hedging.hedges_due(10.5) == [1] and hedging.next_hedge_at == 11.0
    assert hedging.hedges_due(11.0) == [2] and hedging.next_hedge_at is None
    assert hedging.active == {0, 1, 2}
    assert [hedging.attempt_metadata(n) for n in (0, 1, 2)] == [
        (), (("grpc-previous-rpc-attempts", "1"),), (("grpc-previous-rpc-attempts", "2"),)]


def test_a_zero_delay_sends_every_attempt_at_once() -> None:
    hedging = hedged(HEDGING._replace(hedging_delay=0.0))
    hedging.start(0.0)
    assert hedging.hedges_due(0.0) == [1, 2]


def test_the_first_response_headers_win_and_cancel_the_others() -> None:
    hedging = hedged()
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    hedging.hedges_due(1.0)
    assert hedging.on_response_headers(1) == (0, 2)
    assert hedging.committed and hedging.winner == 1 and hedging.next_hedge_at is None
    assert hedging.on_response_headers(2) == ()
    assert hedging.attempt_finished(0, Code.CANCELLED, 1.1) == HedgeDecision()
    assert hedging.attempt_finished(1, OK, 1.2) == HedgeDecision(finish=True)


def test_a_fatal_status_ends_the_call_and_cancels_the_others() -> None:
    hedging = hedged()
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    assert hedging.attempt_finished(1, INTERNAL, 0.7) == HedgeDecision(finish=True, cancel=(0,))
    assert hedging.hedges_due(5.0) == []


def test_a_trailers_only_ok_ends_the_call_too() -> None:
    hedging = hedged()
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    assert hedging.attempt_finished(0, OK, 0.6) == HedgeDecision(finish=True, cancel=(1,))


def test_a_non_fatal_status_sends_the_next_hedge_at_once() -> None:
    hedging = hedged()
    hedging.start(0.0)
    assert hedging.attempt_finished(0, UNAVAILABLE, 0.2) == HedgeDecision()
    assert hedging.next_hedge_at == 0.2 and hedging.hedges_due(0.2) == [1]
    assert hedging.next_hedge_at == 0.7  # then the delay again


def test_pushback_delays_the_next_hedge_or_stops_hedging() -> None:
    hedging = hedged()
    hedging.start(0.0)
    hedging.attempt_finished(0, UNAVAILABLE, 0.2, pushback_after=2.0)
    assert hedging.next_hedge_at == 2.2 and hedging.hedges_due(2.2) == [1]
    assert hedging.next_hedge_at == 2.7
    stopped = hedged()
    stopped.start(0.0)
    stopped.hedges_due(0.5)
    assert stopped.attempt_finished(0, UNAVAILABLE, 0.6, pushback_after=-1.0) == HedgeDecision()
    assert stopped.next_hedge_at is None and stopped.hedges_due(9.0) == []
    assert stopped.attempt_finished(1, UNAVAILABLE, 0.9) == HedgeDecision(finish=True)


def test_the_call_ends_with_the_last_attempt_when_none_is_left() -> None:
    hedging = hedged()
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    hedging.hedges_due(1.0)
    assert hedging.attempt_finished(0, UNAVAILABLE, 1.1) == HedgeDecision()
    assert hedging.attempt_finished(2, UNAVAILABLE, 1.2) == HedgeDecision()
    assert hedging.attempt_finished(1, UNAVAILABLE, 1.3) == HedgeDecision(finish=True)
    assert hedging.winner == 1


def test_throttling_stops_new_hedges_but_not_those_in_flight() -> None:
    bucket = throttle(max_tokens=2, ratio=1)
    hedging = hedged(bucket=bucket)
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    assert hedging.attempt_finished(0, UNAVAILABLE, 0.6) == HedgeDecision()  # 1000: throttled
    assert hedging.next_hedge_at is None and hedging.hedges_due(5.0) == []
    assert hedging.attempt_finished(1, UNAVAILABLE, 0.7) == HedgeDecision(finish=True)
    fresh = hedged(bucket=bucket)
    fresh.start(10.0)
    assert fresh.hedges_due(10.5) == []  # the first attempt always goes; hedges do not


def test_an_overflowing_buffer_commits_to_the_oldest_attempt_in_flight() -> None:
    pool = RetryBuffer()
    hedging = hedged(options=RetryOptions(per_call_buffer=100), buffer=pool)
    hedging.start(0.0)
    hedging.hedges_due(0.5)
    hedging.hedges_due(1.0)
    assert hedging.on_message_sent(60) == (True, ())
    assert hedging.on_message_sent(60) == (False, (1, 2))
    assert hedging.winner == 0 and pool.used == 0


def test_an_unprocessed_attempt_is_restarted_with_its_number() -> None:
    hedging = hedged()
    hedging.start(0.0)
    assert hedging.attempt_finished(0, UNAVAILABLE, 0.1, unprocessed=NOT_PROCESSED) == (
        HedgeDecision(restart=True))
    assert hedging.active == {0}
    assert hedging.attempt_finished(0, UNAVAILABLE, 0.2, unprocessed=NOT_PROCESSED) == (
        HedgeDecision())  # once per call: now a plain non-fatal failure


def test_finishing_a_hedged_call_releases_its_buffer() -> None:
    pool = RetryBuffer()
    hedging = hedged(buffer=pool)
    hedging.start(0.0)
    hedging.on_message_sent(10)
    hedging.finish()
    assert pool.used == 0 and hedging.committed and hedging.hedges_due(10.0) == []
