"""Retries (gRFC A6) on both APIs, against grpcio's and minigrpc's servers, with grpcio's client
as the reference where it implements the same.

A method's ``retryPolicy`` comes from ``grpc.service_config``; the server
(:mod:`tests.support.channel_peers`) fails a call's first attempts as its metadata asks and
records every attempt with its metadata, so each test counts attempts and reads
``grpc-previous-rpc-attempts``.  Timings are bounds; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator, List, Optional

import pytest

import minigrpc
from minigrpc import aio
from tests.peers import grpcio_in_process
from tests.support.channel_peers import (
    APIS,
    CHAT,
    COLLECT,
    STREAM,
    UNARY,
    BehaviourServer,
    call_once,
    calls,
)

pytestmark = [pytest.mark.timeout(60)]

#: minigrpc's two APIs, and grpcio's client where it is here (the behaviour to match).
CLIENTS = APIS + (("grpcio",) if grpcio_in_process() else ())


def policy(max_attempts: int = 4, initial: str = "0.01s", maximum: str = "0.05s",
           multiplier: float = 2, codes: Any = ("UNAVAILABLE",), **top: Any) -> str:
    return json.dumps({"methodConfig": [{
        "name": [{"service": "test.Behaviour"}],
        "retryPolicy": {"maxAttempts": max_attempts, "initialBackoff": initial,
                        "maxBackoff": maximum, "backoffMultiplier": multiplier,
                        "retryableStatusCodes": list(codes)},
    }], **top})


def options(config: str, *more: Any) -> List[Any]:
    return [("grpc.service_config", config), *more]


def failing(key: str, times: int, code: str = "UNAVAILABLE", **more: str) -> Any:
    pairs = [("x-key", key), ("x-fail", str(times)), ("x-code", code)]
    pairs += [(f"x-{name}", value) for name, value in more.items()]
    return tuple(pairs)


@pytest.fixture(params=["minigrpc", "grpcio"])
def server(request: pytest.FixtureRequest) -> Iterator[BehaviourServer]:
    with BehaviourServer(request.param) as started:
        yield started


def attempts(server: BehaviourServer, key: str) -> List[Optional[str]]:
    """The ``grpc-previous-rpc-attempts`` of each attempt the server saw of the call ``key``."""
    return [call.metadata.get("grpc-previous-rpc-attempts") for call in server.calls
            if call.metadata.get("x-key") == key]


def assert_attempts(server: BehaviourServer, key: str, expected: List[Optional[str]]) -> None:
    """The attempts of call ``key`` are ``expected``: the headers themselves on grpcio's server,
    their number on minigrpc's (which keeps every ``grpc-*`` header from its handlers)."""
    seen = attempts(server, key)
    if server.implementation == "minigrpc":
        assert len(seen) == len(expected), seen
    else:
        assert seen == expected


@pytest.mark.parametrize("client", CLIENTS)
def test_a_call_failing_twice_succeeds_on_its_third_attempt(
    client: str, server: BehaviourServer
) -> None:
    outcome = call_once(client, server.target, options(policy()),
                        metadata=failing("twice", 2), timeout=10)
    assert outcome.code == "OK", outcome
    assert_attempts(server, "twice", [None, "1", "2"])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_status_the_policy_does_not_name_is_not_retried(
    client: str, server: BehaviourServer
) -> None:
    outcome = call_once(client, server.target, options(policy()),
                        metadata=failing("internal", 2, "INTERNAL"), timeout=10)
    assert outcome.code == "INTERNAL", outcome
    assert_attempts(server, "internal", [None])


@pytest.mark.parametrize("client", CLIENTS)
def test_max_attempts_bounds_the_attempts(client: str, server: BehaviourServer) -> None:
    outcome = call_once(client, server.target, options(policy(max_attempts=3)),
                        metadata=failing("always", 10), timeout=10)
    assert outcome.code == "UNAVAILABLE", outcome
    assert_attempts(server, "always", [None, "1", "2"])


@pytest.mark.parametrize("client", CLIENTS)
def test_the_waits_between_attempts_follow_the_backoff(
    client: str, server: BehaviourServer
) -> None:
    """0.2 s, then 0.4 s, each ±20%: 0.48 s to 0.72 s in all, plus the calls themselves."""
    config = policy(initial="0.2s", maximum="1s", multiplier=2)
    outcome = call_once(client, server.target, options(config),
                        metadata=failing("timed", 2), timeout=10)
    assert outcome.code == "OK"
    assert 0.45 <= outcome.elapsed < 1.5, outcome


@pytest.mark.parametrize("client", CLIENTS)
def test_server_pushback_sets_the_wait_or_stops_the_retries(
    client: str, server: BehaviourServer
) -> None:
    if server.implementation == "minigrpc":
        pytest.skip("minigrpc's server lets no handler set a grpc-* trailer")
    config = policy(initial="0.01s", maximum="0.01s")
    waited = call_once(client, server.target, options(config),
                       metadata=failing("pushed", 1, pushback="400"), timeout=10)
    assert waited.code == "OK" and 0.39 <= waited.elapsed < 2.0, waited
    stopped = call_once(client, server.target, options(config),
                        metadata=failing("stop", 1, pushback="-1"), timeout=10)
    assert stopped.code == "UNAVAILABLE"
    assert_attempts(server, "stop", [None])


@pytest.mark.parametrize("client", CLIENTS)
def test_enable_retries_zero_turns_the_policy_off(client: str, server: BehaviourServer) -> None:
    outcome = call_once(client, server.target, options(policy(), ("grpc.enable_retries", 0)),
                        metadata=failing("off", 1), timeout=10)
    assert outcome.code == "UNAVAILABLE"
    assert_attempts(server, "off", [None])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_call_whose_response_headers_arrived_is_not_retried(
    client: str, server: BehaviourServer
) -> None:
    outcome = call_once(client, server.target, options(policy()),
                        metadata=failing("headers", 1, **{"headers-first": "1"}), timeout=10)
    assert outcome.code == "UNAVAILABLE"
    assert_attempts(server, "headers", [None])


@pytest.mark.parametrize("client", CLIENTS)
def test_a_request_larger_than_the_retry_buffer_is_not_retried(
    client: str, server: BehaviourServer
) -> None:
    # grpcio counts the request's headers too, a few hundred bytes: room enough for them.
    limited = options(policy(), ("grpc.per_rpc_retry_buffer_size", 2000))
    large = call_once(client, server.target, limited, request=b"x" * 4000,
                      metadata=failing("large", 1), timeout=10)
    assert large.code == "UNAVAILABLE"
    assert_attempts(server, "large", [None])
    small = call_once(client, server.target, limited, request=b"x" * 10,
                      metadata=failing("small", 1), timeout=10)
    assert small.code == "OK"


@pytest.mark.parametrize("client", CLIENTS)
def test_the_deadline_spans_every_attempt(client: str, server: BehaviourServer) -> None:
    """The next attempt would start 2 s later, past the deadline: the call ends at its
    deadline, DEADLINE_EXCEEDED, as in grpcio."""
    config = policy(initial="2s", maximum="2s")
    outcome = call_once(client, server.target, options(config),
                        metadata=failing("late", 1), timeout=0.5)
    assert outcome.code == "DEADLINE_EXCEEDED", outcome
    assert 0.45 <= outcome.elapsed < 1.5
    assert_attempts(server, "late", [None])


@pytest.mark.parametrize("client", CLIENTS)
def test_throttling_stops_retries_once_half_the_tokens_are_gone(
    client: str, server: BehaviourServer
) -> None:
    """maxTokens 3: a failure takes a token, retries need more than 1.5 left.  The first call
    fails twice (3 -> 2 -> 1 tokens) and stops; the next is not retried at all."""
    config = policy(max_attempts=5, retryThrottling={"maxTokens": 3, "tokenRatio": 0.1})
    first, second = calls(client, server.target, 2, options(config),
                          metadata=failing("throttled", 10), timeout=10)
    assert first.code == second.code == "UNAVAILABLE"
    assert_attempts(server, "throttled", [None, "1", None])


# -- streams --------------------------------------------------------------------------------------


def stream_call(api: str, target: str, config: str, method: str, requests: List[bytes],
                metadata: Any) -> Any:
    """One streaming call on ``api``: (status code name, the responses)."""
    if api == "blocking":
        with minigrpc.insecure_channel(target, options=options(config)) as channel:
            try:
                if method == STREAM:
                    return "OK", list(channel.unary_stream(method)(
                        requests[0], metadata=metadata, timeout=10))
                if method == COLLECT:
                    return "OK", [channel.stream_unary(method)(
                        iter(requests), metadata=metadata, timeout=10)]
                return "OK", list(channel.stream_stream(method)(
                    iter(requests), metadata=metadata, timeout=10))
            except minigrpc.RpcError as error:
                return error.code().name, []

    async def main() -> Any:
        async with aio.insecure_channel(target, options=options(config)) as channel:
            try:
                if method == STREAM:
                    call = channel.unary_stream(method)(requests[0], metadata=metadata,
                                                        timeout=10)
                    return "OK", [response async for response in call]
                if method == COLLECT:
                    writer = channel.stream_unary(method)(metadata=metadata, timeout=10)
                    for request in requests:
                        await writer.write(request)
                    await writer.done_writing()
                    return "OK", [await writer]
                chat = channel.stream_stream(method)(iter(requests), metadata=metadata,
                                                     timeout=10)
                return "OK", [response async for response in chat]
            except aio.AioRpcError as error:
                return error.code().name, []

    return asyncio.run(main())


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("method", [STREAM, COLLECT, CHAT])
def test_a_stream_is_retried_before_its_first_response(
    api: str, method: str, server: BehaviourServer
) -> None:
    """Each kind of streaming call fails twice before the server answers anything, and its
    third attempt gets the whole request again: the messages were kept for replay."""
    requests = [b"a", b"bb", b"ccc"]
    code, responses = stream_call(api, server.target, policy(), method, requests,
                                  failing(f"{api}{method}", 2))
    assert code == "OK"
    expected = {STREAM: [b"a"] * 3, COLLECT: [b"abbccc"], CHAT: requests}[method]
    assert responses == expected
    assert_attempts(server, f"{api}{method}", [None, "1", "2"])


def test_asyncio_writes_while_an_attempt_waits_for_its_retry_go_to_the_next_attempt(
    server: BehaviourServer,
) -> None:
    """The first attempt fails at once and the server pushes its retry back 1 s; the
    application goes on writing, a message every 100 ms, meanwhile.  Those writes wait for
    the next attempt (grpcio's retries are invisible to a writer), none fails with the first
    attempt's status, and the second attempt gets every message."""
    if server.implementation == "minigrpc":
        pytest.skip("minigrpc's server lets no handler set a grpc-* trailer")
    requests = [b"a", b"b", b"c", b"d", b"e", b"f"]

    async def main() -> Any:
        async with aio.insecure_channel(server.target, options=options(policy())) as channel:
            writer = channel.stream_unary(COLLECT)(
                metadata=failing("paced", 1, pushback="1000"), timeout=10)
            try:
                for request in requests:
                    await writer.write(request)
                    await asyncio.sleep(0.1)  # the application's pace; synchronises nothing
                await writer.done_writing()
                return "OK", await writer
            except aio.AioRpcError as error:
                return error.code().name, error.details()

    assert asyncio.run(main()) == ("OK", b"abcdef")
    assert_attempts(server, "paced", [None, "1"])


def test_a_blocking_request_stream_outgrowing_the_buffer_is_committed(
    server: BehaviourServer,
) -> None:
    """Past grpc.per_rpc_retry_buffer_size the request cannot be sent again: no retry."""
    config = policy()

    def requests() -> Iterator[bytes]:
        yield b"x" * 300
        yield b"y"

    with minigrpc.insecure_channel(server.target, options=options(
            config, ("grpc.per_rpc_retry_buffer_size", 200))) as channel:
        with pytest.raises(minigrpc.RpcError) as caught:
            channel.stream_unary(COLLECT)(requests(), metadata=failing("big", 1), timeout=10)
    assert caught.value.code() is minigrpc.StatusCode.UNAVAILABLE
    assert_attempts(server, "big", [None])


def test_a_call_cancelled_by_the_application_is_not_retried(server: BehaviourServer) -> None:
    """CANCELLED is in the policy, yet a call the application cancels is never retried."""
    config = policy(codes=("UNAVAILABLE", "CANCELLED"))
    with minigrpc.insecure_channel(server.target, options=options(config)) as channel:
        call = channel.unary_stream(STREAM)(b"r", metadata=(("x-key", "cancel"),
                                                            ("x-wait", "5000")), timeout=10)
        assert server.behaviour.wait_for_calls(1)
        started = time.monotonic()
        assert call.cancel()
        assert call.code() is minigrpc.StatusCode.CANCELLED
        assert time.monotonic() - started < 2.0
    assert_attempts(server, "cancel", [None])


def test_an_asyncio_call_on_a_ready_connection_is_retried_too(server: BehaviourServer) -> None:
    """A unary call on a ready connection starts without a task (minigrpc/aio/call.py); its
    retries then run in one."""

    async def main() -> None:
        async with aio.insecure_channel(server.target, options=options(policy())) as channel:
            await channel.unary_unary(UNARY)(b"warm", timeout=10)
            call = channel.unary_unary(UNARY)(b"r", metadata=failing("ready", 2), timeout=10)
            assert await call == b"r"
            assert await call.code() is minigrpc.StatusCode.OK

    asyncio.run(main())
    assert_attempts(server, "ready", [None, "1", "2"])
