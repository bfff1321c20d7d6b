"""A server connection's max age and grace (minigrpc.driver.server_timers.ConnectionAge,
gRFC A9), on a fake clock with seeded jitter."""

import random

import pytest

from minigrpc.driver.server_timers import (
    CUT,
    DRAIN,
    MAX_AGE_DEBUG_DATA,
    MAX_AGE_DETAILS,
    MAX_IDLE_DEBUG_DATA,
    NOTHING,
    ConnectionAge,
    ConnectionAgeOptions,
    jittered,
)


def test_the_options_default_to_never_and_read_milliseconds() -> None:
    assert ConnectionAgeOptions.from_options(None) == ConnectionAgeOptions(None, None)
    assert ConnectionAgeOptions.from_options([
        ("grpc.max_connection_age_ms", 30000), ("grpc.max_connection_age_grace_ms", "5000"),
    ]) == ConnectionAgeOptions(30.0, 5.0)
    assert ConnectionAgeOptions.from_options([("grpc.max_connection_age_ms", 2**31 - 1)]) == (
        ConnectionAgeOptions(None, None))
    with pytest.raises(ValueError, match=r"grpc\.max_connection_age_grace_ms"):
        ConnectionAgeOptions.from_options([("grpc.max_connection_age_grace_ms", "later")])


def test_each_connection_gets_its_age_spread_by_a_tenth() -> None:
    assert jittered(100.0, random.Random(4)) == 100.0 * random.Random(4).uniform(0.9, 1.1)
    rng = random.Random(8)
    ages = [ConnectionAge(ConnectionAgeOptions(100.0), 50.0, rng).drain_at for _ in range(200)]
    assert all(age is not None and 140.0 <= age <= 160.0 for age in ages)
    assert len(set(ages)) == 200  # not one age for all: no reconnection storm


def test_an_old_connection_drains_then_its_calls_are_cut_a_grace_later() -> None:
    age = ConnectionAge(ConnectionAgeOptions(max_age=10.0, grace=5.0), accepted_at=0.0,
                        rng=random.Random(1))
    drain_at = 10.0 * random.Random(1).uniform(0.9, 1.1)
    assert age.next_wakeup() == drain_at
    assert age.poll(drain_at - 0.001) == NOTHING
    assert age.poll(drain_at + 0.25) == DRAIN
    assert age.next_wakeup() == drain_at + 5.25  # the grace counts from the drain
    assert age.poll(drain_at + 5.0) == NOTHING
    assert age.poll(drain_at + 5.25) == CUT
    assert age.next_wakeup() is None and age.poll(1e9) == NOTHING


def test_without_a_grace_the_calls_may_run_to_their_end() -> None:
    age = ConnectionAge(ConnectionAgeOptions(max_age=10.0), 0.0, random.Random(2))
    assert age.poll(20.0) == DRAIN
    assert age.next_wakeup() is None and age.poll(1e9) == NOTHING


def test_without_a_max_age_nothing_happens() -> None:
    age = ConnectionAge(ConnectionAgeOptions(grace=1.0), 0.0, random.Random(3))
    assert age.next_wakeup() is None and age.poll(1e9) == NOTHING


def test_the_goaways_and_the_cut_calls_say_why_as_grpcio_does() -> None:
    assert MAX_AGE_DEBUG_DATA == b"max_age" and MAX_IDLE_DEBUG_DATA == b"max_idle"
    assert MAX_AGE_DETAILS == "max connection age"
