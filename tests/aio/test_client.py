"""minigrpc.aio's client: its channel's own behaviour (state, done callbacks, closing, a target
that does not answer, a call tried again).  gRPC's interop cases against every peer are in
test_client_interop.py.

Each test body is a coroutine run with plain ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterator, List

import pytest

from minigrpc import StatusCode, aio
from tests.aio.calls import empty_call, run
from tests.interop import empty_pb2
from tests.interop.servicer import SLEEP_KEY
from tests.peers import ADDRESS_KINDS
from tests.support.minigrpc_server import MinigrpcServer
from tests.support.scripted_peer import ErrorCodes, ScriptedServer, ServerRequest

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


# -- a call the server never processed -------------------------------------------------------


def _refuse_first(count: int) -> Callable[[ServerRequest], None]:
    """A handler that resets the first ``count`` requests with REFUSED_STREAM ("not processed",
    RFC 9113 §8.7), after the client sent them in full, and echoes the others."""
    refused: List[int] = []

    def handler(request: ServerRequest) -> None:
        if len(refused) < count:
            refused.append(request.stream_id)
            request.reset(ErrorCodes.REFUSED_STREAM)
        else:
            request.respond(b"echo:" + request.message)

    return handler


@pytest.mark.parametrize("reading", ["async for", "read"])
def test_a_response_stream_never_processed_is_tried_again_once(reading: str) -> None:
    """As on the blocking API: the stream's reader sees only the second attempt."""

    async def body(channel: aio.Channel) -> None:
        call = channel.unary_stream("/a.B/C")(b"r", timeout=10)
        if reading == "async for":
            responses = [response async for response in call]
        else:
            responses = []
            response = await call.read()
            while response is not aio.EOF:
                responses.append(response)
                response = await call.read()
        assert responses == [b"echo:r"]
        assert await call.code() is StatusCode.OK

    with ScriptedServer.h2(_refuse_first(1)) as server:
        run(server.target, body)
        assert len(server.requests) == 2


def test_a_response_stream_refused_twice_is_unavailable() -> None:
    async def body(channel: aio.Channel) -> None:
        call = channel.unary_stream("/a.B/C")(b"r", timeout=10)
        with pytest.raises(aio.AioRpcError) as caught:
            async for _ in call:
                pass
        assert caught.value.code() is StatusCode.UNAVAILABLE
        assert "REFUSED_STREAM" in caught.value.details()

    with ScriptedServer.h2(_refuse_first(3)) as server:
        run(server.target, body)
        assert len(server.requests) == 2


@pytest.mark.parametrize("writing", ["iterator", "write"])
def test_a_refused_request_stream_is_sent_again(writing: str) -> None:
    """The messages of a request stream are kept until the call is committed (gRFC A6): a
    stream-unary call the server refused goes out again, whole, on a second attempt."""

    async def body(channel: aio.Channel) -> None:
        if writing == "iterator":
            call = channel.stream_unary("/a.B/C")(iter([b"one"]), timeout=10)
        else:
            call = channel.stream_unary("/a.B/C")(timeout=10)
            await call.write(b"one")
            await call.done_writing()
        assert await call == b"echo:one"

    with ScriptedServer.h2(_refuse_first(1)) as server:
        run(server.target, body)
        assert [request.message for request in server.requests] == [b"one", b"one"]
