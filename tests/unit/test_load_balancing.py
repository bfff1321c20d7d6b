"""Load-balancing policies (minigrpc.driver.balancing): subchannel outcomes in, picks and
connect actions out, on a fake clock with seeded randomness."""

import random
from collections import Counter
from typing import List

import pytest

from minigrpc.driver.balancing import (
    CONNECT,
    DISCONNECT,
    FAIL,
    QUEUE,
    USE,
    Action,
    Pick,
    PickFirst,
    RoundRobin,
    aggregate_state,
    choose_policy,
    new_policy,
)
from minigrpc.driver.connectivity import ChannelConnectivity
from minigrpc.driver.service_config import LoadBalancingConfig
from minigrpc.protocol.targets import Target, parse_target_addresses

IDLE = ChannelConnectivity.IDLE
CONNECTING = ChannelConnectivity.CONNECTING
READY = ChannelConnectivity.READY
TF = ChannelConnectivity.TRANSIENT_FAILURE

A, B, C = parse_target_addresses("ipv4:10.0.0.1:1,10.0.0.2:2,10.0.0.3:3").addresses


def connects(actions: List[Action]) -> List[Target]:
    assert all(action.kind == CONNECT for action in actions), actions
    return [action.address for action in actions]


@pytest.mark.parametrize(("states", "whole"), [
    ([READY, TF, IDLE, CONNECTING], READY),
    ([TF, CONNECTING, IDLE], CONNECTING),
    ([TF, IDLE, TF], IDLE),
    ([TF, TF], TF),
    ([], TF),
])
def test_the_whole_takes_the_best_state_of_its_parts(states: list, whole: object) -> None:
    assert aggregate_state(states) is whole


def test_the_service_config_chooses_the_policy_before_the_channel_option() -> None:
    def option(name: str) -> list:
        return [("grpc.lb_policy_name", name)]

    assert choose_policy(LoadBalancingConfig("round_robin"), option("pick_first")) == (
        LoadBalancingConfig("round_robin"))
    assert choose_policy(None, option("ROUND_ROBIN")) == LoadBalancingConfig("round_robin")
    assert choose_policy(None, None) == LoadBalancingConfig("pick_first")
    assert choose_policy(None, option("grpclb")) == LoadBalancingConfig("pick_first")  # as grpcio
    assert isinstance(new_policy(LoadBalancingConfig("round_robin"), [A]), RoundRobin)
    assert new_policy(LoadBalancingConfig("pick_first", True), [A]).shuffle is True


# -- pick_first ------------------------------------------------------------------------------------


def test_pick_first_is_idle_until_a_call_and_then_dials_the_first_address() -> None:
    policy = PickFirst([A, B, C], rng=random.Random(1))
    assert policy.state is IDLE and policy.pick() == Pick(QUEUE)
    assert connects(policy.exit_idle(0.0)) == [A]
    assert policy.state is CONNECTING and policy.exit_idle(0.0) == []


def test_pick_first_skips_a_dead_address_and_sticks_to_the_first_that_connects() -> None:
    policy = PickFirst([A, B, C], rng=random.Random(1))
    policy.exit_idle(0.0)
    assert connects(policy.on_connect_failed(A, 0.1, "refused")) == [B]
    assert policy.on_connected(B, 0.2) == []
    assert policy.state is READY and policy.selected == B
    assert [policy.pick() for _ in range(3)] == [Pick(USE, B)] * 3
    assert policy.on_connected(C, 0.3) == [Action(DISCONNECT, C)]


def test_pick_first_fails_over_all_addresses_to_a_sticky_transient_failure() -> None:
    policy = PickFirst([A, B], rng=random.Random(5))
    policy.exit_idle(0.0)
    policy.on_connect_failed(A, 0.1, "refused")
    assert policy.on_connect_failed(B, 0.2, "timed out") == []
    assert policy.state is TF
    assert policy.pick() == Pick(FAIL, details="failed to connect to all addresses; last error: "
                                               "timed out")
    assert policy.pick(wait_for_ready=True) == Pick(QUEUE)
    retry_at = policy.next_wakeup()
    assert retry_at == 0.2 + random.Random(5).uniform(0.8, 1.2)  # 1 s, spread
    assert policy.on_timer(retry_at - 0.01) == []
    assert connects(policy.on_timer(retry_at)) == [A]
    assert policy.state is TF  # sticky while it tries again
    policy.on_connect_failed(A, retry_at, "refused")
    policy.on_connected(B, retry_at + 0.1)
    assert policy.state is READY and policy.next_wakeup() is None


def test_pick_first_waits_longer_after_each_failed_pass() -> None:
    policy = PickFirst([A], rng=random.Random(2))
    same = random.Random(2)
    now = 0.0
    policy.exit_idle(now)
    for base in (1.0, 1.6, 2.56):
        policy.on_connect_failed(A, now, "refused")
        wait = policy.next_wakeup()
        assert wait is not None and wait - now == pytest.approx(base * same.uniform(0.8, 1.2))
        now = wait
        policy.on_timer(now)


def test_pick_first_starts_its_backoff_over_once_an_address_connects() -> None:
    policy = PickFirst([A], rng=random.Random(2))
    policy.exit_idle(0.0)
    policy.on_connect_failed(A, 0.0, "refused")
    policy.on_timer(10.0)
    policy.on_connect_failed(A, 10.0, "refused")  # the second wait: 1.6 s
    policy.on_timer(20.0)
    policy.on_connected(A, 20.0)
    policy.on_disconnected(A, 30.0)
    policy.exit_idle(30.0)
    policy.on_connect_failed(A, 30.0, "refused")
    wait = policy.next_wakeup()
    assert wait is not None and 30.8 <= wait <= 31.2  # 1 s again


def test_pick_first_goes_idle_when_its_connection_is_lost_and_starts_over_on_demand() -> None:
    policy = PickFirst([A, B], rng=random.Random(1))
    policy.exit_idle(0.0)
    policy.on_connected(A, 0.1)
    assert policy.on_disconnected(B, 1.0) == [] and policy.state is READY
    assert policy.on_disconnected(A, 1.0) == []
    assert policy.state is IDLE and policy.pick() == Pick(QUEUE)
    assert connects(policy.exit_idle(2.0)) == [A]


def test_pick_first_shuffles_its_list_when_asked() -> None:
    shuffled = PickFirst([A, B, C], shuffle=True, rng=random.Random(3))
    expected = [A, B, C]
    random.Random(3).shuffle(expected)
    assert shuffled.addresses == expected != [A, B, C]
    assert connects(shuffled.exit_idle(0.0)) == expected[:1]


def test_pick_first_keeps_its_connection_if_the_new_list_still_has_it() -> None:
    policy = PickFirst([A, B], rng=random.Random(1))
    policy.exit_idle(0.0)
    policy.on_connected(B, 0.1)
    assert policy.update_addresses([C, B], 1.0) == []
    assert policy.state is READY and policy.pick() == Pick(USE, B)
    assert policy.update_addresses([C], 2.0) == [Action(DISCONNECT, B)]
    assert policy.state is IDLE and connects(policy.exit_idle(2.0)) == [C]


def test_pick_first_without_addresses_fails() -> None:
    policy = PickFirst([], rng=random.Random(1))
    assert policy.exit_idle(0.0) == [] and policy.state is TF
    assert policy.pick() == Pick(FAIL, details="empty address list")


# -- round_robin -----------------------------------------------------------------------------------


def test_round_robin_dials_every_address_at_once() -> None:
    policy = RoundRobin([A, B, C], rng=random.Random(1))
    assert policy.state is IDLE
    assert connects(policy.exit_idle(0.0)) == [A, B, C]
    assert policy.state is CONNECTING and policy.pick() == Pick(QUEUE)


def test_round_robin_spreads_calls_over_the_ready_addresses_in_turn() -> None:
    policy = RoundRobin([A, B, C], rng=random.Random(4))
    policy.exit_idle(0.0)
    policy.on_connected(A, 0.1)
    assert policy.state is READY
    assert [policy.pick().address for _ in range(3)] == [A, A, A]
    policy.on_connected(C, 0.2)
    picks = [policy.pick().address for _ in range(6)]
    assert Counter(picks) == {A: 3, C: 3} and picks[0] != picks[1]
    policy.on_connected(B, 0.3)
    assert Counter(policy.pick().address for _ in range(300)) == {A: 100, B: 100, C: 100}


def test_round_robin_starts_at_a_random_address() -> None:
    firsts = set()
    for seed in range(20):
        policy = RoundRobin([A, B, C], rng=random.Random(seed))
        policy.exit_idle(0.0)
        for address in (A, B, C):
            policy.on_connected(address, 0.1)
        firsts.add(policy.pick().address)
    assert firsts == {A, B, C}


def test_round_robin_leaves_out_a_failed_address_and_redials_it_after_its_backoff() -> None:
    policy = RoundRobin([A, B], rng=random.Random(6))
    policy.exit_idle(0.0)
    policy.on_connected(A, 0.1)
    assert policy.on_connect_failed(B, 0.2, "refused") == []
    assert {policy.pick().address for _ in range(4)} == {A}
    retry_at = policy.next_wakeup()
    assert retry_at is not None and 0.2 + 0.8 <= retry_at <= 0.2 + 1.2
    assert policy.on_timer(retry_at - 0.001) == []
    assert connects(policy.on_timer(retry_at)) == [B]
    policy.on_connected(B, retry_at + 0.1)
    assert {policy.pick().address for _ in range(4)} == {A, B}


def test_round_robin_is_in_transient_failure_only_when_every_address_failed() -> None:
    policy = RoundRobin([A, B], rng=random.Random(6))
    policy.exit_idle(0.0)
    policy.on_connect_failed(A, 0.1, "refused")
    assert policy.state is CONNECTING
    policy.on_connect_failed(B, 0.2, "timed out")
    assert policy.state is TF
    assert policy.pick() == Pick(FAIL, details="connections to all backends failing; "
                                               "last error: timed out")
    assert policy.pick(wait_for_ready=True) == Pick(QUEUE)
    policy.on_timer(100.0)
    assert policy.state is TF  # each stays in TRANSIENT_FAILURE while it redials
    policy.on_connected(A, 100.1)
    assert policy.state is READY


def test_round_robin_redials_a_lost_connection_at_once() -> None:
    policy = RoundRobin([A, B], rng=random.Random(6))
    policy.exit_idle(0.0)
    policy.on_connected(A, 0.1)
    policy.on_connected(B, 0.1)
    assert connects(policy.on_disconnected(A, 5.0)) == [A]
    assert policy.state is READY and {policy.pick().address for _ in range(4)} == {B}
    policy.on_disconnected(B, 5.0)
    assert policy.state is CONNECTING


def test_round_robin_follows_a_new_address_list() -> None:
    policy = RoundRobin([A, B], rng=random.Random(6))
    policy.exit_idle(0.0)
    policy.on_connected(A, 0.1)
    policy.on_connected(B, 0.1)
    actions = policy.update_addresses([B, C], 1.0)
    assert actions == [Action(DISCONNECT, A), Action(CONNECT, C)]
    assert {policy.pick().address for _ in range(4)} == {B}
    assert policy.on_connected(A, 1.1) == [Action(DISCONNECT, A)]
    policy.update_addresses([], 2.0)
    assert policy.state is TF and policy.pick() == Pick(FAIL, details="empty address list")
