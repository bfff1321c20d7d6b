"""minigrpc.aio's client against real servers: grpcio's blocking server (over a unix path, an
abstract socket and TCP) and minigrpc's blocking server, with the interop TestService of
tests/interop/servicer.py and gRPC's interop cases (doc/interop-test-descriptions.md).

Each test body is a coroutine run with plain ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, List

import pytest

from minigrpc import Compression, StatusCode, aio
from tests.interop import empty_pb2, messages_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY, SLEEP_KEY
from tests.peers import ADDRESS_KINDS
from tests.support.minigrpc_server import MinigrpcServer

pytestmark = [pytest.mark.timeout(60)]

SERVICE = "/grpc.testing.TestService/"
LARGE_REQUEST = 271_828
LARGE_RESPONSE = 314_159


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


def run(target: str, body: Callable[[aio.Channel], Awaitable[None]]) -> None:
    async def main() -> None:
        async with aio.insecure_channel(target) as channel:
            await body(channel)

    asyncio.run(main())


def empty_call(channel: aio.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "EmptyCall",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )


def unary_call(channel: aio.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "UnaryCall",
        request_serializer=messages_pb2.SimpleRequest.SerializeToString,
        response_deserializer=messages_pb2.SimpleResponse.FromString,
    )


def streaming_output(channel: aio.Channel) -> Any:
    return channel.unary_stream(
        SERVICE + "StreamingOutputCall",
        request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
    )


def streaming_input(channel: aio.Channel) -> Any:
    return channel.stream_unary(
        SERVICE + "StreamingInputCall",
        request_serializer=messages_pb2.StreamingInputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingInputCallResponse.FromString,
    )


def full_duplex(channel: aio.Channel) -> Any:
    return channel.stream_stream(
        SERVICE + "FullDuplexCall",
        request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
    )


def output_request(*sizes: int, interval_us: int = 0) -> Any:
    return messages_pb2.StreamingOutputCallRequest(
        response_parameters=[
            messages_pb2.ResponseParameters(size=size, interval_us=interval_us) for size in sizes
        ]
    )


def input_request(size: int) -> Any:
    return messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=bytes(size)))


# -- gRPC's interop cases ------------------------------------------------------------------------


def test_empty_unary(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = empty_call(channel)(empty_pb2.Empty(), timeout=10)
        assert isinstance(await call, empty_pb2.Empty)
        assert await call.code() is StatusCode.OK
        assert await call.details() == ""
        assert call.done()

    run(target, body)


def test_large_unary(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_size=LARGE_RESPONSE, payload=messages_pb2.Payload(body=bytes(LARGE_REQUEST))
        )
        response = await unary_call(channel)(request, timeout=10)
        assert response.payload.body == bytes(LARGE_RESPONSE)

    run(target, body)


def test_client_streaming(target: str) -> None:
    sizes = [27182, 8, 1828, 45904]

    async def body(channel: aio.Channel) -> None:
        response = await streaming_input(channel)(iter([input_request(s) for s in sizes]))
        assert response.aggregated_payload_size == sum(sizes)

        async def requests() -> AsyncIterator[Any]:
            for size in sizes:
                yield input_request(size)

        response = await streaming_input(channel)(requests())
        assert response.aggregated_payload_size == sum(sizes)

        call = streaming_input(channel)()
        for size in sizes:
            await call.write(input_request(size))
        await call.done_writing()
        assert (await call).aggregated_payload_size == sum(sizes)
        with pytest.raises(aio.UsageError):
            await streaming_input(channel)(iter([])).write(input_request(1))

    run(target, body)


def test_server_streaming(target: str) -> None:
    sizes = [31415, 9, 2653, 58979]

    async def body(channel: aio.Channel) -> None:
        call = streaming_output(channel)(output_request(*sizes), timeout=10)
        assert [len(r.payload.body) async for r in call] == sizes
        assert await call.code() is StatusCode.OK

        call = streaming_output(channel)(output_request(*sizes), timeout=10)
        received: List[int] = []
        while True:
            response = await call.read()
            if response is aio.EOF:
                break
            received.append(len(response.payload.body))
        assert received == sizes

    run(target, body)


def test_ping_pong(target: str) -> None:
    pairs = [(27182, 31415), (8, 9), (1828, 2653), (45904, 58979)]

    async def body(channel: aio.Channel) -> None:
        call = full_duplex(channel)(timeout=10)
        for request_size, response_size in pairs:
            request = output_request(response_size)
            request.payload.body = bytes(request_size)
            await call.write(request)
            response = await call.read()
            assert len(response.payload.body) == response_size
        await call.done_writing()
        assert await call.read() is aio.EOF
        assert await call.code() is StatusCode.OK

    run(target, body)


def test_full_duplex_with_request_iterator(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        async def requests() -> AsyncIterator[Any]:
            for size in (1, 2, 3):
                yield output_request(size)

        call = full_duplex(channel)(requests(), timeout=10)
        assert [len(r.payload.body) async for r in call] == [1, 2, 3]

    run(target, body)


def test_empty_stream(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = full_duplex(channel)(iter([]), timeout=10)
        assert [r async for r in call] == []
        assert await call.code() is StatusCode.OK

    run(target, body)


def test_custom_metadata(target: str) -> None:
    metadata = ((ECHO_INITIAL_KEY, "test_initial_metadata_value"), (ECHO_TRAILING_KEY, b"\x0a\x0b"))

    async def body(channel: aio.Channel) -> None:
        call = unary_call(channel)(messages_pb2.SimpleRequest(response_size=1), metadata=metadata)
        await call
        assert (await call.initial_metadata())[ECHO_INITIAL_KEY] == "test_initial_metadata_value"
        assert (await call.trailing_metadata())[ECHO_TRAILING_KEY] == b"\x0a\x0b"

        call = full_duplex(channel)(iter([output_request(1)]), metadata=aio.Metadata(*metadata))
        assert len([r async for r in call]) == 1
        assert (await call.initial_metadata())[ECHO_INITIAL_KEY] == "test_initial_metadata_value"
        assert (await call.trailing_metadata())[ECHO_TRAILING_KEY] == b"\x0a\x0b"

    run(target, body)


def test_status_code_and_message(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_status=messages_pb2.EchoStatus(code=2, message="test status message")
        )
        call = unary_call(channel)(request)
        with pytest.raises(aio.AioRpcError) as caught:
            await call
        assert caught.value.code() is StatusCode.UNKNOWN
        assert caught.value.details() == "test status message"
        assert await call.code() is StatusCode.UNKNOWN
        assert await call.details() == "test status message"

        stream = full_duplex(channel)(iter([request_with_status()]))
        with pytest.raises(aio.AioRpcError) as caught:
            await stream.read()
        assert caught.value.code() is StatusCode.UNKNOWN

    run(target, body)


def request_with_status() -> Any:
    request = output_request()
    request.response_status.code = 2
    request.response_status.message = "test status message"
    return request


def test_unimplemented_method(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = channel.unary_unary("/grpc.testing.TestService/UnimplementedCall")(b"")
        with pytest.raises(aio.AioRpcError) as caught:
            await call
        assert caught.value.code() is StatusCode.UNIMPLEMENTED

    run(target, body)


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_compressed_requests(target: str, compression: Compression) -> None:
    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_size=10, payload=messages_pb2.Payload(body=bytes(1000))
        )
        response = await unary_call(channel)(request, compression=compression)
        assert len(response.payload.body) == 10

    run(target, body)


# -- deadlines and cancellation --------------------------------------------------------------


def test_timeout_on_sleeping_server(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = full_duplex(channel)(timeout=0.05, metadata=((SLEEP_KEY, "20000"),))
        with pytest.raises(aio.AioRpcError) as caught:
            await call.read()
        assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED
        unary = empty_call(channel)(
            empty_pb2.Empty(), timeout=0.05, metadata=((SLEEP_KEY, "20000"),)
        )
        with pytest.raises(aio.AioRpcError) as caught:
            await unary
        assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED
        assert await unary.code() is StatusCode.DEADLINE_EXCEEDED

    run(target, body)


def test_cancel_after_begin(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = streaming_input(channel)()
        await call.wait_for_connection()
        assert call.cancel()
        assert not call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await call.code() is StatusCode.CANCELLED
        assert call.cancelled()

    run(target, body)


def test_cancelled_task_cancels_its_call(target: str) -> None:
    async def body(channel: aio.Channel) -> None:
        call = empty_call(channel)(empty_pb2.Empty(), metadata=((SLEEP_KEY, "20000"),))

        async def waiter() -> None:
            await call

        task = asyncio.get_running_loop().create_task(waiter())
        await call.wait_for_connection()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await call.code() is StatusCode.CANCELLED
        # The connection still serves calls: only the stream was reset.
        assert isinstance(await empty_call(channel)(empty_pb2.Empty()), empty_pb2.Empty)

    run(target, body)


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
