"""minigrpc.aio's client against grpcio's servers: what happens around the calls.

* GOAWAY: a server that stops with a grace period sends GOAWAY; the call in flight runs to its
  end, new calls do not go to the draining connection (they fail UNAVAILABLE while nothing
  listens, as with grpcio's aio client), and once the server is back they go to a new one.
* TLS: ``secure_channel`` with grpcio's TLS server (blocking and aio), every cardinality; an
  untrusted server fails UNAVAILABLE.
* Interceptors of all four kinds, against grpc.aio's server: they see and change the call's
  details (metadata the server echoes), and may replace a unary response or wrap a stream.
* Backpressure: a reader that stops reading a server stream holds the server's handler back,
  so what is in flight stays bounded by the flow-control windows and the client's buffer
  (RFC 9113 §5.2; minigrpc.protocol.grpc_connection.Inbound), and everything arrives once it reads
  again.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable, Iterator, List

import pytest

from minigrpc import ChannelConnectivity, StatusCode, aio
from minigrpc.http2 import streams
from minigrpc.protocol import grpc_connection as protocol
from tests.aio.async_peers import GrpcioAioServer
from tests.aio.calls import (
    empty_call,
    full_duplex,
    input_request,
    output_request,
    streaming_input,
    streaming_output,
    unary_call,
)
from tests.interop import empty_pb2, messages_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY
from tests.peers import grpcio_peer_unavailable
from tests.support.tls_certs import Certificates, make_certificates

pytestmark = [pytest.mark.timeout(60)]

if grpcio_peer_unavailable() is not None:  # pragma: no cover - grpcio-less interpreters
    pytest.skip(str(grpcio_peer_unavailable()), allow_module_level=True)
grpc = pytest.importorskip("grpc")


@pytest.fixture(scope="module")
def aio_server() -> Iterator[GrpcioAioServer]:
    server = GrpcioAioServer()
    yield server
    server.close()


# -- GOAWAY ------------------------------------------------------------------------------------


def test_goaway_lets_the_call_in_flight_finish(grpcio_server_factory: Callable[..., Any]) -> None:
    server = grpcio_server_factory("tcp")
    stopped = threading.Event()

    def stop_with_grace() -> None:
        server.stop(30)  # returns once the call in flight has ended
        stopped.set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with aio.insecure_channel(server.target) as channel:
            call = full_duplex(channel)(timeout=30)
            await call.write(output_request(7))
            assert len((await call.read()).payload.body) == 7
            assert channel.get_state() is ChannelConnectivity.READY

            stopper = threading.Thread(target=stop_with_grace)
            stopper.start()
            # GOAWAY makes the connection unusable for new calls: the channel leaves READY.
            await asyncio.wait_for(channel.wait_for_state_change(ChannelConnectivity.READY), 10)
            with pytest.raises(aio.AioRpcError) as caught:
                await empty_call(channel)(empty_pb2.Empty(), timeout=5)
            assert caught.value.code() is StatusCode.UNAVAILABLE

            # The call in flight goes on, on the draining connection, to its end.
            await call.write(output_request(9))
            assert len((await call.read()).payload.body) == 9
            await call.done_writing()
            assert await call.read() is aio.EOF
            assert await call.code() is StatusCode.OK
            assert await loop.run_in_executor(None, stopped.wait, 10.0)
            stopper.join()

            # The same address: new calls go to a new connection, once the channel tries
            # again after its backoff (a failed dial is sticky, as in grpcio: gRFC A62).
            server.start()
            assert isinstance(
                await empty_call(channel)(empty_pb2.Empty(), timeout=10, wait_for_ready=True),
                empty_pb2.Empty,
            )

    asyncio.run(main())


def test_goaway_from_grpc_aio_server() -> None:
    server = GrpcioAioServer()
    stop = threading.Thread(target=server.stop, args=(30,))

    async def main() -> None:
        async with aio.insecure_channel(server.target) as channel:
            call = full_duplex(channel)(timeout=30)
            # A response proves the handler runs: grpcio cancels calls that its server has
            # received but not yet handed to a handler when it stops, grace or not.
            await call.write(output_request(3))
            assert len((await call.read()).payload.body) == 3
            stop.start()
            await asyncio.wait_for(channel.wait_for_state_change(ChannelConnectivity.READY), 10)
            await call.write(output_request(4))
            assert len((await call.read()).payload.body) == 4
            await call.done_writing()
            assert await call.read() is aio.EOF
            assert await call.code() is StatusCode.OK

    try:
        asyncio.run(main())
    finally:
        stop.join(30)
        server.close()


# -- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


@pytest.fixture(params=["grpcio", "grpcio.aio"])
def tls_target(request: pytest.FixtureRequest, certs: Certificates) -> Iterator[str]:
    credentials = grpc.ssl_server_credentials([(certs.server_key, certs.server_chain)])
    if request.param == "grpcio.aio":
        aio_server = GrpcioAioServer(credentials=credentials)
        yield aio_server.target
        aio_server.close()
        return
    from concurrent import futures

    from minigrpc.descriptors import add_servicer
    from tests.interop import test_pb2
    from tests.interop.servicer import TestServiceServicer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer(grpc_module=grpc))
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None).wait(10)


def test_every_cardinality_over_tls(tls_target: str, certs: Certificates) -> None:
    async def main() -> None:
        credentials = aio_credentials(certs.ca)
        async with aio.secure_channel(tls_target, credentials) as channel:
            response = await unary_call(channel)(messages_pb2.SimpleRequest(response_size=5))
            assert len(response.payload.body) == 5
            call = streaming_output(channel)(output_request(1, 2))
            assert [len(r.payload.body) async for r in call] == [1, 2]
            sizes = [3, 4]
            response = await streaming_input(channel)(iter([input_request(s) for s in sizes]))
            assert response.aggregated_payload_size == 7
            call = full_duplex(channel)(iter([output_request(8), output_request(9)]))
            assert [len(r.payload.body) async for r in call] == [8, 9]

    asyncio.run(main())


def test_untrusted_tls_server_is_unavailable(tls_target: str, certs: Certificates) -> None:
    async def main() -> None:
        other = make_certificates()
        assert other is not None
        async with aio.secure_channel(tls_target, aio_credentials(other.ca)) as channel:
            with pytest.raises(aio.AioRpcError) as caught:
                await empty_call(channel)(empty_pb2.Empty(), timeout=10)
            assert caught.value.code() is StatusCode.UNAVAILABLE
            assert "handshake" in caught.value.details()

    asyncio.run(main())


def aio_credentials(root: bytes) -> Any:
    import minigrpc

    return minigrpc.ssl_channel_credentials(root_certificates=root)


# -- interceptors ------------------------------------------------------------------------------


class Tagging(
    aio.UnaryUnaryClientInterceptor,
    aio.UnaryStreamClientInterceptor,
    aio.StreamUnaryClientInterceptor,
    aio.StreamStreamClientInterceptor,
):
    """Adds the echo key to every call's metadata and notes each call it sees."""

    def __init__(self, name: str, seen: List[str]) -> None:
        self.name = name
        self.seen = seen

    def _details(self, details: Any) -> Any:
        metadata = aio.Metadata(*(details.metadata or ()))
        metadata.add(ECHO_INITIAL_KEY, self.name)
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.seen.append(f"{self.name} unary_unary {details.method}")
        return await continuation(self._details(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        self.seen.append(f"{self.name} unary_stream {details.method}")
        return await continuation(self._details(details), request)

    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        self.seen.append(f"{self.name} stream_unary {details.method}")
        return await continuation(self._details(details), requests)

    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        self.seen.append(f"{self.name} stream_stream {details.method}")
        return await continuation(self._details(details), requests)


def test_interceptors_of_all_four_kinds(aio_server: GrpcioAioServer) -> None:
    seen: List[str] = []

    async def main() -> None:
        interceptors = [Tagging("outer", seen), Tagging("inner", seen)]
        async with aio.insecure_channel(aio_server.target, interceptors=interceptors) as channel:
            call = unary_call(channel)(messages_pb2.SimpleRequest(response_size=2))
            assert len((await call).payload.body) == 2
            assert (await call.initial_metadata()).get_all(ECHO_INITIAL_KEY) == ["outer", "inner"]
            assert await call.code() is StatusCode.OK

            call = streaming_output(channel)(output_request(1, 2))
            assert [len(r.payload.body) async for r in call] == [1, 2]
            assert (await call.initial_metadata()).get_all(ECHO_INITIAL_KEY) == ["outer", "inner"]

            call = streaming_input(channel)()
            await call.write(input_request(5))
            await call.done_writing()
            assert (await call).aggregated_payload_size == 5

            call = full_duplex(channel)()
            await call.write(output_request(3))
            assert len((await call.read()).payload.body) == 3
            await call.done_writing()
            assert await call.read() is aio.EOF
            assert await call.code() is StatusCode.OK

    asyncio.run(main())
    kinds = ["unary_unary", "unary_stream", "stream_unary", "stream_stream"]
    methods = ["UnaryCall", "StreamingOutputCall", "StreamingInputCall", "FullDuplexCall"]
    assert seen == [
        f"{name} {kind} /grpc.testing.TestService/{method}"
        for kind, method in zip(kinds, methods)
        for name in ("outer", "inner")
    ]


class Replacing(aio.UnaryUnaryClientInterceptor, aio.UnaryStreamClientInterceptor):
    """Answers a unary call itself after a failed one, and wraps a response stream."""

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        try:
            return await call
        except aio.AioRpcError:
            return messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=b"fallback"))

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)

        async def doubled() -> AsyncIterator[Any]:
            async for response in call:
                yield response
                yield response

        return doubled()


def test_interceptors_replace_responses(aio_server: GrpcioAioServer) -> None:
    async def main() -> None:
        async with aio.insecure_channel(aio_server.target, interceptors=[Replacing()]) as channel:
            failing = messages_pb2.SimpleRequest(
                response_status=messages_pb2.EchoStatus(code=5, message="gone")
            )
            response = await unary_call(channel)(failing)
            assert response.payload.body == b"fallback"
            call = streaming_output(channel)(output_request(1, 2))
            assert [len(r.payload.body) async for r in call] == [1, 1, 2, 2]
            assert await call.code() is StatusCode.OK

    asyncio.run(main())


# -- backpressure ------------------------------------------------------------------------------

MESSAGE_SIZE = 64 * 1024
MESSAGES = 1000  # 64 MiB: far more than the windows and buffers let through


def test_a_reader_that_stops_holds_the_server_back(aio_server: GrpcioAioServer) -> None:
    """The server's handler can get only windows' and buffers' worth ahead of the reader.

    The client credits a stream's window only as its reader takes messages, beyond a buffer
    of whole messages (``protocol.DEFAULT_BUFFER_LIMIT``); grpc-core holds some more.  So after
    one message is read the server has sent at most the stream window plus that buffer, and
    its handler (counted by grpc.aio's write completions) is blocked well short of the end.
    """
    produced: List[int] = []
    progress = threading.Condition()

    async def stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
        for index in range(MESSAGES):
            await context.write(bytes(MESSAGE_SIZE))
            with progress:
                produced.append(index)
                progress.notify_all()

    handler = grpc.method_handlers_generic_handler(
        "test.Backpressure", {"Flood": grpc.unary_stream_rpc_method_handler(stream)}
    )
    server = GrpcioAioServer(extra_handlers=[handler])
    # What may be in flight: the client's stream window, its buffer of untaken messages, and
    # as much again for grpc-core's own buffers and the socket's.
    in_flight = 2 * (streams.DEFAULT_STREAM_WINDOW + protocol.DEFAULT_BUFFER_LIMIT)
    bound = in_flight // MESSAGE_SIZE

    def produced_past(count: int, timeout: float) -> bool:
        with progress:
            return progress.wait_for(lambda: len(produced) > count, timeout)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with aio.insecure_channel(server.target) as channel:
            call = channel.unary_stream("/test.Backpressure/Flood")(b"", timeout=30)
            assert len(await call.read()) == MESSAGE_SIZE
            # The handler gets some way ahead of the reader, then no further.
            assert await loop.run_in_executor(None, produced_past, 8, 10.0)
            assert not await loop.run_in_executor(None, produced_past, bound, 1.0)
            held = call._call  # the protocol's view of the stream: what the client holds
            assert held is not None
            assert sum(len(payload) for _flag, payload in held.messages) <= in_flight
            received = 1
            while await call.read() is not aio.EOF:
                received += 1
            assert received == MESSAGES
            assert await call.code() is StatusCode.OK

    try:
        asyncio.run(main())
    finally:
        server.close()
