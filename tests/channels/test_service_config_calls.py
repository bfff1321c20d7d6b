"""What a channel's ``grpc.service_config`` does to its calls, on both APIs, against real servers.

gRPC's ``doc/service_config.md``: a method's ``timeout`` caps the call's deadline,
``waitForReady`` applies unless the call says otherwise, ``maxRequestMessageBytes`` and
``maxResponseMessageBytes`` tighten the channel's message limits; a config grpcio would refuse
fails the channel when it is made.  The servers are grpcio's and minigrpc's
(:mod:`tests.support.channel_peers`); timings are bounds, and nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any, Dict, Iterator, List

import pytest

import minigrpc
from minigrpc import aio
from tests.support.channel_peers import APIS, UNARY, BehaviourServer, call_once

pytestmark = [pytest.mark.timeout(60)]

SERVERS = ("minigrpc", "grpcio")


def config(method: Dict[str, Any], **top: Any) -> str:
    """A service config whose one method config names the whole test service."""
    return json.dumps({"methodConfig": [{"name": [{"service": "test.Behaviour"}], **method}],
                      **top})


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[BehaviourServer]:
    with BehaviourServer(request.param) as started:
        yield started


@pytest.mark.parametrize("api", APIS)
def test_the_methods_timeout_caps_a_call_without_one(api: str, server: BehaviourServer) -> None:
    options = [("grpc.service_config", config({"timeout": "0.5s"}))]
    outcome = call_once(api, server.target, options, metadata=(("x-wait", "3000"),))
    assert outcome.code == "DEADLINE_EXCEEDED", outcome
    assert 0.45 <= outcome.elapsed < 2.5, outcome


@pytest.mark.parametrize("api", APIS)
def test_a_shorter_call_timeout_wins_and_a_longer_one_is_capped(
    api: str, server: BehaviourServer
) -> None:
    options = [("grpc.service_config", config({"timeout": "1s"}))]
    short = call_once(api, server.target, options, metadata=(("x-wait", "5000"),), timeout=0.3)
    assert short.code == "DEADLINE_EXCEEDED" and short.elapsed < 0.9, short
    capped = call_once(api, server.target, options, metadata=(("x-wait", "5000"),), timeout=30)
    assert capped.code == "DEADLINE_EXCEEDED" and 0.95 <= capped.elapsed < 3.0, capped


@pytest.mark.parametrize("api", APIS)
def test_a_method_of_another_service_keeps_its_own_deadline(
    api: str, server: BehaviourServer
) -> None:
    other = json.dumps({"methodConfig": [{"name": [{"service": "other.Service"}],
                                          "timeout": "0.1s"}]})
    outcome = call_once(api, server.target, [("grpc.service_config", other)],
                        metadata=(("x-wait", "300"),), timeout=10)
    assert outcome.code == "OK", outcome


@pytest.mark.parametrize("api", APIS)
def test_max_request_message_bytes_fails_a_larger_request_before_it_is_sent(
    api: str, server: BehaviourServer
) -> None:
    options = [("grpc.service_config", config({"maxRequestMessageBytes": 10}))]
    outcome = call_once(api, server.target, options, request=b"x" * 11, timeout=10)
    assert outcome.code == "RESOURCE_EXHAUSTED", outcome
    assert call_once(api, server.target, options, request=b"x" * 10, timeout=10).code == "OK"
    assert not [call for call in server.calls if call.method == UNARY and
                call.metadata.get("x-size")]
    assert len(server.calls) == 1


@pytest.mark.parametrize("api", APIS)
def test_max_response_message_bytes_fails_a_larger_response(
    api: str, server: BehaviourServer
) -> None:
    options = [("grpc.service_config", config({"maxResponseMessageBytes": 100})),
               ("grpc.max_receive_message_length", 1000)]
    large = call_once(api, server.target, options, metadata=(("x-size", "101"),), timeout=10)
    assert large.code == "RESOURCE_EXHAUSTED", large
    fits = call_once(api, server.target, options, metadata=(("x-size", "100"),), timeout=10)
    assert fits.code == "OK" and len(fits.response) == 100


@pytest.mark.parametrize("api", APIS)
def test_the_channels_tighter_limit_still_applies(api: str, server: BehaviourServer) -> None:
    options = [("grpc.service_config", config({"maxResponseMessageBytes": 1000})),
               ("grpc.max_receive_message_length", 50)]
    outcome = call_once(api, server.target, options, metadata=(("x-size", "51"),), timeout=10)
    assert outcome.code == "RESOURCE_EXHAUSTED", outcome


# -- waitForReady -------------------------------------------------------------------------------


def _until_transient_failure_blocking(channel: minigrpc.Channel) -> threading.Event:
    failed = threading.Event()

    def seen(state: Any) -> None:
        if state is minigrpc.ChannelConnectivity.TRANSIENT_FAILURE:
            failed.set()

    channel.subscribe(seen)
    return failed


@pytest.mark.parametrize("wait_for_ready", [None, True])
def test_wait_for_ready_from_the_config_waits_for_the_server_blocking(
    short_tmp_dir: str, wait_for_ready: Any
) -> None:
    address = "unix:" + os.path.join(short_tmp_dir, "late.sock")
    options = [("grpc.service_config", config({"waitForReady": True}))]
    with minigrpc.insecure_channel(address, options=options) as channel:
        failed = _until_transient_failure_blocking(channel)
        outcome: List[Any] = []
        caller = threading.Thread(target=lambda: outcome.append(channel.unary_unary(UNARY)(
            b"late", timeout=20, wait_for_ready=wait_for_ready)))
        caller.start()
        assert failed.wait(10)
        assert caller.is_alive()  # the call waits rather than failing UNAVAILABLE
        with BehaviourServer("minigrpc", address=address):
            caller.join(15)
        assert outcome == [b"late"]


def test_wait_for_ready_from_the_config_waits_for_the_server_aio(short_tmp_dir: str) -> None:
    address = "unix:" + os.path.join(short_tmp_dir, "late.sock")
    options = [("grpc.service_config", config({"waitForReady": True}))]

    async def main() -> None:
        async with aio.insecure_channel(address, options=options) as channel:
            call = channel.unary_unary(UNARY)(b"late", timeout=20)
            state = channel.get_state()
            while state is not minigrpc.ChannelConnectivity.TRANSIENT_FAILURE:
                await channel.wait_for_state_change(state)
                state = channel.get_state()
            assert not call.done()
            server = await asyncio.get_running_loop().run_in_executor(
                None, lambda: BehaviourServer("minigrpc", address=address))
            try:
                assert await call == b"late"
            finally:
                server.stop()

    asyncio.run(main())


@pytest.mark.parametrize("api", APIS)
def test_an_explicit_wait_for_ready_false_fails_at_once(api: str, short_tmp_dir: str) -> None:
    address = "unix:" + os.path.join(short_tmp_dir, "nobody.sock")
    options = [("grpc.service_config", config({"waitForReady": True}))]
    outcome = call_once(api, address, options, timeout=10, wait_for_ready=False)
    assert outcome.code == "UNAVAILABLE" and outcome.elapsed < 2.0, outcome


# -- a config grpcio refuses --------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_malformed_config_fails_the_channel_when_it_is_made(api: str) -> None:
    bad = config({"retryPolicy": {"maxAttempts": 1, "initialBackoff": "1s",
                                  "maxBackoff": "2s", "backoffMultiplier": 2,
                                  "retryableStatusCodes": ["UNAVAILABLE"]}})
    make = minigrpc.insecure_channel if api == "blocking" else aio.insecure_channel
    with pytest.raises(ValueError) as caught:
        make("127.0.0.1:1", options=[("grpc.service_config", bad)])
    assert "methodConfig[0].retryPolicy.maxAttempts: must be at least 2" in str(caught.value)
    with pytest.raises(ValueError, match="not JSON"):
        make("127.0.0.1:1", options=[("grpc.service_config", "{")])
