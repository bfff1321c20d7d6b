"""A channel warns about the options it does not carry out, on both APIs.

grpcio ignores an unknown channel argument, or one it knows but does not act on, without a word
(docs/long-lived-channels.md, "The argument table").  A minigrpc channel logs one warning per
such option (logger ``minigrpc.channel``), naming it and saying why, each time a channel is made
with it, and then works as if it had not been given; the options it carries out, and values that
ask for what it does anyway, bring no warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Iterator, List

import pytest

import minigrpc
from minigrpc import aio
from tests.support.channel_peers import APIS, UNARY, BehaviourServer

pytestmark = [pytest.mark.timeout(60)]

LOGGER = "minigrpc.channel"

CARRIED_OUT = [
    ("grpc.max_receive_message_length", 1024),
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"pick_first": {}}]})),
    ("grpc.enable_http_proxy", 0),  # asks for what minigrpc does anyway
    ("grpc.optimization_target", "latency"),  # grpcio ignores it too
    ("minigrpc.initial_window_size", 65535),
    ("grpc.keepalive_time_ms", 60000),
    ("grpc.keepalive_timeout_ms", 20000),
    ("grpc.http2.ping_timeout_ms", 20000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 2),
]


@pytest.fixture(scope="module")
def server() -> Iterator[BehaviourServer]:
    with BehaviourServer("minigrpc") as started:
        yield started


def warnings_of(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == LOGGER and record.levelno == logging.WARNING]


def make_channels_and_call(api: str, target: str, options: Any, channels: int = 1) -> List[bytes]:
    """Make ``channels`` channels with ``options``, one call on each; the responses."""
    if api == "blocking":
        answers = []
        for _ in range(channels):
            with minigrpc.insecure_channel(target, options=options) as channel:
                answers.append(channel.unary_unary(UNARY)(b"hi", timeout=10))
        return answers

    async def main() -> List[bytes]:
        answers = []
        for _ in range(channels):
            async with aio.insecure_channel(target, options=options) as channel:
                answers.append(await channel.unary_unary(UNARY)(b"hi", timeout=10))
        return answers

    return asyncio.run(main())


@pytest.mark.parametrize("api", APIS)
def test_each_channel_warns_once_about_each_option_it_does_not_carry_out(
    api: str, server: BehaviourServer, caplog: pytest.LogCaptureFixture
) -> None:
    options = [
        ("grpc.no_such_argument", 1),
        ("grpc.experimental.enable_hedging", 1),  # carried out: no warning
        ("grpc.http_proxy", "http://proxy.invalid:3128"),  # known, not supported
        ("grpc.no_such_argument", 2),  # the same name again: still one warning
        ("minigrpc.unix_socket_mode", 0o600),  # a server's option
    ]
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert make_channels_and_call(api, server.target, options, channels=2) == [b"hi", b"hi"]
    assert warnings_of(caplog) == 2 * [
        "client option 'grpc.no_such_argument': not an argument minigrpc knows; ignored",
        "client option 'grpc.http_proxy': not supported: HTTP CONNECT proxies are not "
        "implemented",
        "client option 'minigrpc.unix_socket_mode': a server argument, ignored by a client",
    ]


@pytest.mark.parametrize("api", APIS)
def test_the_options_a_channel_carries_out_bring_no_warning(
    api: str, server: BehaviourServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="minigrpc")
    assert make_channels_and_call(api, server.target, CARRIED_OUT) == [b"hi"]
    assert warnings_of(caplog) == []
