"""minigrpc.aio's client: its channel's own behaviour (state, done callbacks, closing, a target
that does not answer).  gRPC's interop cases against every peer are in test_client_interop.py.

Each test body is a coroutine run with plain ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator, List

import pytest

from minigrpc import StatusCode, aio
from tests.aio.calls import empty_call, run
from tests.interop import empty_pb2
from tests.interop.servicer import SLEEP_KEY
from tests.peers import ADDRESS_KINDS
from tests.support.minigrpc_server import MinigrpcServer

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture(params=[f"grpcio-{kind}" for kind in ADDRESS_KINDS] + ["minigrpc-unix"])
def target(request: pytest.FixtureRequest) -> Iterator[str]:
    """A server with the interop TestService: grpcio's (three address kinds) or minigrpc's."""
    peer, kind = request.param.split("-", 1)
    if peer == "grpcio":
        grpcio_server = request.getfixturevalue("grpcio_interop_servers").get(kind)
        if not grpcio_server.running:
            grpcio_server.start()
        yield grpcio_server.target
        grpcio_server.servicer.release_sleepers()
        return
    server = MinigrpcServer(kind)
    try:
        yield server.target
    finally:
        server.servicer.release_sleepers()
        server.stop(0)


def test_done_callback_and_state(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        assert channel.get_state() is aio_state("IDLE")
        await channel.channel_ready()
        assert channel.get_state() is aio_state("READY")
        seen: List[Any] = []
        call = empty_call(channel)(empty_pb2.Empty())
        call.add_done_callback(seen.append)
        await call
        assert seen == [call]

    run(target, body)


def aio_state(name: str) -> Any:
    from minigrpc import ChannelConnectivity

    return getattr(ChannelConnectivity, name)


def test_closed_channel_ends_calls() -> None:
    server = MinigrpcServer("unix")

    async def main() -> None:
        channel = aio.insecure_channel(server.target)
        call = empty_call(channel)(empty_pb2.Empty(), metadata=((SLEEP_KEY, "20000"),))
        await call.wait_for_connection()
        await channel.close()
        assert await call.code() is StatusCode.CANCELLED
        with pytest.raises(aio.UsageError):
            empty_call(channel)(empty_pb2.Empty())

    try:
        asyncio.run(main())
    finally:
        server.servicer.release_sleepers()
        server.stop(0)


def test_unavailable_target(short_tmp_dir: str) -> None:
    async def main() -> None:
        async with aio.insecure_channel(f"unix:{short_tmp_dir}/none.sock") as channel:
            with pytest.raises(aio.AioRpcError) as caught:
                await empty_call(channel)(empty_pb2.Empty(), timeout=5)
            assert caught.value.code() is StatusCode.UNAVAILABLE

    asyncio.run(main())
