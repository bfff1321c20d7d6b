"""Targets of several addresses, name resolution and load balancing, on both APIs, against real
servers, with grpcio's client as the reference.

Three servers on 127.0.0.1 answer with their name (:mod:`tests.support.channel_peers`); a
target ``ipv4:127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`` reaches them.  ``round_robin`` (chosen by
``grpc.lb_policy_name`` or the service config's ``loadBalancingConfig``) spreads the calls over
them; ``pick_first``, the default, sends every call to the first that connects.  A list that
does not parse is an error naming the target, never a DNS lookup of the whole string.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from typing import Any, Dict, Iterator, List

import pytest

import minigrpc
from minigrpc import ChannelConnectivity, aio
from tests.peers import grpcio_in_process
from tests.support.channel_peers import APIS, BehaviourServer, call_once, calls, free_port

pytestmark = [pytest.mark.timeout(60)]

CLIENTS = APIS + (("grpcio",) if grpcio_in_process() else ())

ROUND_ROBIN_OPTION = [("grpc.lb_policy_name", "round_robin")]
ROUND_ROBIN_CONFIG = [("grpc.service_config",
                       json.dumps({"loadBalancingConfig": [{"round_robin": {}}]}))]


@pytest.fixture(params=["minigrpc", "grpcio"])
def servers(request: pytest.FixtureRequest) -> Iterator[List[BehaviourServer]]:
    started = [BehaviourServer(request.param, name=f"s{index}") for index in range(3)]
    yield started
    for server in started:
        server.stop()


def target_of(*ports: int) -> str:
    return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)


def spread(outcomes: List[Any]) -> Dict[str, int]:
    assert all(outcome.code == "OK" for outcome in outcomes), outcomes
    return dict(collections.Counter(outcome.server for outcome in outcomes))


@pytest.mark.parametrize("options", [ROUND_ROBIN_OPTION, ROUND_ROBIN_CONFIG],
                         ids=["lb_policy_name", "loadBalancingConfig"])
@pytest.mark.parametrize("client", CLIENTS)
def test_round_robin_spreads_calls_over_every_address(
    client: str, options: Any, servers: List[BehaviourServer]
) -> None:
    target = target_of(*(server.port for server in servers))
    # Wait for every address before counting: the first calls may find one still connecting.
    outcomes = calls(client, target, 33, options, timeout=10, wait_for_ready=True)[3:]
    counts = spread(outcomes)
    assert sorted(counts) == ["s0", "s1", "s2"], counts
    assert all(8 <= count <= 12 for count in counts.values()), counts


@pytest.mark.parametrize("client", CLIENTS)
def test_pick_first_sends_every_call_to_the_first_address(
    client: str, servers: List[BehaviourServer]
) -> None:
    target = target_of(*(server.port for server in servers))
    assert spread(calls(client, target, 30, None, timeout=10)) == {"s0": 30}


@pytest.mark.parametrize("client", CLIENTS)
def test_pick_first_skips_a_dead_first_address(
    client: str, servers: List[BehaviourServer]
) -> None:
    target = target_of(free_port(), servers[1].port, servers[2].port)
    assert spread(calls(client, target, 10, None, timeout=10)) == {"s1": 10}


@pytest.mark.parametrize("client", CLIENTS)
def test_round_robin_leaves_a_dead_address_out(client: str, servers: List[BehaviourServer]) -> None:
    target = target_of(servers[0].port, free_port(), servers[2].port)
    outcomes = calls(client, target, 22, ROUND_ROBIN_OPTION, timeout=10,
                     wait_for_ready=True)[2:]
    assert spread(outcomes) == {"s0": 10, "s2": 10}


@pytest.mark.parametrize("api", APIS)
def test_every_address_dead_fails_the_calls_naming_the_last_error(api: str) -> None:
    target = target_of(free_port(), free_port())
    outcome = call_once(api, target, ROUND_ROBIN_OPTION, timeout=10)
    assert outcome.code == "UNAVAILABLE", outcome
    assert outcome.details.startswith("connections to all backends failing; last error: ")
    assert "connect: connection refused" in outcome.details
    first = call_once(api, target, None, timeout=10)
    assert first.details.startswith("failed to connect to all addresses; last error: ")


@pytest.mark.parametrize("bad", [
    "ipv4:127.0.0.1:1,not-an-address:2",
    "ipv4:127.0.0.1:1,127.0.0.1:99999",
    "127.0.0.1:1,127.0.0.1:2",
    "ipv6:[::1]:1,127.0.0.1:2",
])
@pytest.mark.parametrize("api", APIS)
def test_a_list_that_does_not_parse_is_an_error_naming_the_target(api: str, bad: str) -> None:
    outcome = call_once(api, bad, None, timeout=10)
    assert outcome.code == "UNAVAILABLE"
    assert outcome.details.startswith(f"failed to parse target {bad!r}: "), outcome
    assert "lookup" not in outcome.details


@pytest.mark.parametrize("api", APIS)
def test_a_name_is_resolved_and_every_address_tried(
    api: str, servers: List[BehaviourServer]
) -> None:
    """``localhost`` may resolve to ::1 before 127.0.0.1, where the servers listen: pick_first
    tries each in turn, round_robin keeps to those that connect."""
    port = servers[0].port
    assert spread(calls(api, f"dns:///localhost:{port}", 4, None, timeout=10)) == {"s0": 4}
    assert spread(calls(api, f"localhost:{port}", 4, ROUND_ROBIN_OPTION, timeout=10,
                        wait_for_ready=True)) == {"s0": 4}


# -- the channel's state, over its subchannels ---------------------------------------------


def test_round_robin_is_ready_while_any_address_is(servers: List[BehaviourServer]) -> None:
    target = target_of(servers[0].port, free_port())
    seen: List[Any] = []
    ready = threading.Event()

    def record(state: Any) -> None:
        seen.append(state)
        if state is ChannelConnectivity.READY:
            ready.set()

    with minigrpc.insecure_channel(target, options=ROUND_ROBIN_OPTION) as channel:
        channel.subscribe(record, try_to_connect=True)
        assert ready.wait(10)
        assert seen[:3] == [ChannelConnectivity.IDLE, ChannelConnectivity.CONNECTING,
                            ChannelConnectivity.READY]
        servers[0].stop()
        # The only live address went away: the channel reconnects to it, and fails.
        outcome_codes = set()
        for _ in range(5):
            try:
                channel.unary_unary("/test.Behaviour/Unary")(b"x", timeout=2)
            except minigrpc.RpcError as error:
                outcome_codes.add(error.code())
        assert outcome_codes == {minigrpc.StatusCode.UNAVAILABLE}


def test_an_asyncio_channel_reports_transient_failure_once_every_address_failed() -> None:
    target = target_of(free_port(), free_port())

    async def main() -> None:
        async with aio.insecure_channel(target, options=ROUND_ROBIN_OPTION) as channel:
            states = [channel.get_state(try_to_connect=True)]
            while states[-1] is not ChannelConnectivity.TRANSIENT_FAILURE:
                await asyncio.wait_for(channel.wait_for_state_change(states[-1]), 10)
                states.append(channel.get_state())
            assert states == [ChannelConnectivity.IDLE, ChannelConnectivity.CONNECTING,
                              ChannelConnectivity.TRANSIENT_FAILURE]

    asyncio.run(main())


# -- grpc-go's servers as the backends ------------------------------------------------------


@pytest.fixture(scope="module")
def go_servers() -> Iterator[List[str]]:
    """Three grpc-go interop servers on 127.0.0.1, named g0, g1, g2 (``fill_server_id``)."""
    from tests.go_peers import GoServer, GoUnavailable, build_go_peers

    try:
        peers = build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")
    servers = [GoServer(peers, ["tcp:127.0.0.1:0"], extra_args=("-server_id", f"g{index}"))
               for index in range(3)]
    for server in servers:
        server.start()
    yield [server.targets[0] for server in servers]
    for server in servers:
        server.stop()


@pytest.mark.go_peer
@pytest.mark.parametrize("api", APIS)
def test_round_robin_over_grpc_go_servers(api: str, go_servers: List[str]) -> None:
    from tests.interop import messages_pb2

    target = "ipv4:" + ",".join(go_servers)
    request = messages_pb2.SimpleRequest(fill_server_id=True)
    path = "/grpc.testing.TestService/UnaryCall"

    def ids(responses: List[bytes]) -> Dict[str, int]:
        return dict(collections.Counter(
            messages_pb2.SimpleResponse.FromString(response).server_id for response in responses))

    outcomes = calls(api, target, 33, ROUND_ROBIN_OPTION, method=path,
                     request=request.SerializeToString(), timeout=10, wait_for_ready=True)[3:]
    assert all(outcome.code == "OK" for outcome in outcomes), outcomes
    counts = ids([outcome.response for outcome in outcomes])
    assert sorted(counts) == ["g0", "g1", "g2"], counts
    assert all(8 <= count <= 12 for count in counts.values()), counts
    first = calls(api, target, 6, None, method=path, request=request.SerializeToString(),
                  timeout=10)
    assert ids([outcome.response for outcome in first]) == {"g0": 6}
