"""minigrpc.aio's client against every server it must talk to: gRPC's interop cases.

One body per case of gRPC's doc/interop-test-descriptions.md that a client runs (and a few
more of grpcio's semantics), each against:

* grpcio's blocking server over a unix path, an abstract socket and TCP (tests/peers.py);
* grpcio's asyncio server, ``grpc.aio.server()`` with ``async def`` handlers
  (tests/aio/async_peers.py);
* grpc-go's interop server (tests/go_peers.py; skipped with the reason where it cannot be
  built);
* grpclib's server (the test extra has it from Python 3.7; skipped where it is absent);
* minigrpc's own blocking server.

Cancellation is checked from both ends: the client's frame trace shows RST_STREAM(CANCEL) on
the call's stream, and the server's handler sees its call end (grpc.aio and grpclib cancel the
handler's task; grpcio's blocking server runs the context's callbacks).
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, List, Optional, Tuple

import pytest

from minigrpc import Compression, StatusCode, aio
from tests.aio.async_peers import (
    CALL_ID_KEY,
    GrpcioAioServer,
    GrpclibServer,
    HandlerRecord,
    grpclib_unavailable,
)
from tests.aio.calls import (
    LARGE_REQUEST,
    LARGE_RESPONSE,
    empty_call,
    full_duplex,
    input_request,
    output_request,
    request_with_status,
    run,
    streaming_input,
    streaming_output,
    unary_call,
)
from tests.go_peers import GoPeers, GoServer, GoUnavailable, build_go_peers
from tests.interop import empty_pb2, messages_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY, SLEEP_KEY
from tests.peers import ADDRESS_KINDS, grpcio_in_process, grpcio_peer_unavailable, short_temp_dir
from tests.support.minigrpc_server import MinigrpcServer

pytestmark = [pytest.mark.timeout(60)]

PEERS = [f"grpcio/{kind}" for kind in ADDRESS_KINDS] + [
    "grpcio.aio/tcp",
    "grpc-go/unix",
    "grpc-go/tcp",
    "grpclib/tcp",
    "minigrpc/unix",
]
SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"


@dataclass
class Peer:
    """A running server: its target, and what it lets a test see of its handlers."""

    name: str
    target: str
    #: The asyncio servers' record of handlers cancelled under their calls.
    record: Optional[HandlerRecord] = None
    #: grpcio's blocking servicer (its waiting handlers), when that is the server.
    servicer: Any = None
    #: The client's frame trace, for the tests that look at it.
    trace: List[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def go_targets() -> Iterator[Any]:
    """One grpc-go interop server on a unix path and TCP; kind -> target."""
    try:
        peers: GoPeers = build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")
    directory = short_temp_dir()
    server = GoServer(peers, [f"unix:{directory}/go.sock", "tcp:127.0.0.1:0"])
    with server:
        yield dict(zip(("unix", "tcp"), server.targets))
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def aio_peer_servers() -> Iterator[dict]:
    """The asyncio servers, started on first use and shared by the module's tests."""
    servers: dict = {}
    yield servers
    for server in servers.values():
        server.close()


@pytest.fixture(params=PEERS)
def peer(request: pytest.FixtureRequest, aio_peer_servers: dict) -> Iterator[Peer]:
    library, kind = request.param.split("/")
    if library.startswith("grpcio") and grpcio_peer_unavailable():
        pytest.skip(str(grpcio_peer_unavailable()))
    if library == "grpcio":
        server = request.getfixturevalue("grpcio_interop_servers").get(kind)
        if not server.running:
            server.start()
        yield Peer(request.param, server.target, servicer=server.servicer)
        server.servicer.release_sleepers()
    elif library in ("grpcio.aio", "grpclib"):
        if library == "grpclib" and grpclib_unavailable():
            pytest.skip(str(grpclib_unavailable()))
        if library == "grpcio.aio" and not grpcio_in_process():
            pytest.skip("grpc.aio's server runs in this process, and grpcio only on CPython")
        if library not in aio_peer_servers:
            aio_peer_servers[library] = (
                GrpcioAioServer() if library == "grpcio.aio" else GrpclibServer()
            )
        server = aio_peer_servers[library]
        yield Peer(request.param, server.target, record=server.record)
        server.record.release_sleepers()
    elif library == "grpc-go":
        yield Peer(request.param, request.getfixturevalue("go_targets")[kind])
    else:
        minigrpc_server = MinigrpcServer(kind)
        try:
            yield Peer(request.param, minigrpc_server.target, servicer=minigrpc_server.servicer)
        finally:
            minigrpc_server.servicer.release_sleepers()
            minigrpc_server.stop(0)


def sent_resets(trace: List[str]) -> List[str]:
    """The RST_STREAM frames the client wrote, as trace lines."""
    return [line for line in trace if "-->" in line and "RST_STREAM" in line]


def call_id() -> Tuple[str, str]:
    """Metadata naming a call, so that the asyncio servers can say its handler finished."""
    return (CALL_ID_KEY, uuid.uuid4().hex)


async def handler_runs(peer: Peer, named: Tuple[str, str]) -> None:
    """Wait until the asyncio server's handler of the call runs, so that the reset finds it
    running (seen with grpc.aio: a handler started after its call's reset waits on, untold)."""
    if peer.record is not None:
        assert await peer.record.wait_started(named[1]), "the handler never ran"


async def handler_saw_the_end(peer: Peer, named: Tuple[str, str]) -> None:
    """Assert that the server's handler, waiting 20 s, finished as the call ended instead."""
    if peer.record is not None:
        assert await peer.record.wait_finished(named[1]), "the handler never saw its call end"
    elif peer.servicer is not None:
        loop = asyncio.get_running_loop()
        # grpcio's blocking handler waits until the context's callbacks say the call ended.
        assert await loop.run_in_executor(None, peer.servicer.wait_for_no_sleepers, 10.0)


# -- gRPC's interop cases ------------------------------------------------------------------------


def test_empty_unary(peer: Peer) -> None:
    async def body(channel: aio.Channel) -> None:
        call = empty_call(channel)(empty_pb2.Empty(), timeout=10)
        assert isinstance(await call, empty_pb2.Empty)
        assert await call.code() is StatusCode.OK
        assert await call.details() == ""
        assert call.done()

    run(peer.target, body)


def test_large_unary(peer: Peer) -> None:
    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_size=LARGE_RESPONSE, payload=messages_pb2.Payload(body=bytes(LARGE_REQUEST))
        )
        response = await unary_call(channel)(request, timeout=10)
        assert response.payload.body == bytes(LARGE_RESPONSE)

    run(peer.target, body)


def test_client_streaming(peer: Peer) -> None:
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

    run(peer.target, body)


def test_server_streaming(peer: Peer) -> None:
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

    run(peer.target, body)


def test_ping_pong(peer: Peer) -> None:
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

    run(peer.target, body)


def test_full_duplex_with_request_iterator(peer: Peer) -> None:
    async def body(channel: aio.Channel) -> None:
        async def requests() -> AsyncIterator[Any]:
            for size in (1, 2, 3):
                yield output_request(size)

        call = full_duplex(channel)(requests(), timeout=10)
        assert [len(r.payload.body) async for r in call] == [1, 2, 3]

    run(peer.target, body)


def test_empty_stream(peer: Peer) -> None:
    async def body(channel: aio.Channel) -> None:
        call = full_duplex(channel)(iter([]), timeout=10)
        assert [r async for r in call] == []
        assert await call.code() is StatusCode.OK

    run(peer.target, body)


def test_custom_metadata(peer: Peer) -> None:
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

    run(peer.target, body)


@pytest.mark.parametrize("message", ["test status message", SPECIAL_MESSAGE])
def test_status_code_and_message(peer: Peer, message: str) -> None:
    """status_code_and_message and special_status_message: the status and its details
    (percent-encoded on the wire, PROTOCOL-HTTP2.md, Responses) arrive unchanged."""

    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_status=messages_pb2.EchoStatus(code=2, message=message)
        )
        call = unary_call(channel)(request)
        with pytest.raises(aio.AioRpcError) as caught:
            await call
        assert caught.value.code() is StatusCode.UNKNOWN
        assert caught.value.details() == message
        assert await call.code() is StatusCode.UNKNOWN
        assert await call.details() == message

        stream = full_duplex(channel)(iter([request_with_status(2, message)]))
        with pytest.raises(aio.AioRpcError) as caught:
            await stream.read()
        assert caught.value.code() is StatusCode.UNKNOWN
        assert caught.value.details() == message

    run(peer.target, body)


@pytest.mark.parametrize(
    "path",
    ["/grpc.testing.TestService/UnimplementedCall", "/grpc.testing.UnimplementedService/Nothing"],
    ids=["method", "service"],
)
def test_unimplemented(peer: Peer, path: str) -> None:
    """UNIMPLEMENTED, except from grpclib: its Trailers-Only answer has no content-type, which
    PROTOCOL-HTTP2.md (Responses) requires; minigrpc's client then reports what the HTTP
    layer says, as grpc-go's client does (grpcio's trusts the grpc-status)."""

    async def body(channel: aio.Channel) -> None:
        call = channel.unary_unary(path)(b"")
        with pytest.raises(aio.AioRpcError) as caught:
            await call
        if peer.name.startswith("grpclib"):
            assert caught.value.code() is StatusCode.UNKNOWN
            assert "missing HTTP content-type" in caught.value.details()
            return
        assert caught.value.code() is StatusCode.UNIMPLEMENTED
        assert await call.code() is StatusCode.UNIMPLEMENTED

    run(peer.target, body)


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_compressed_requests(peer: Peer, compression: Compression) -> None:
    if peer.name.startswith("grpclib"):
        pytest.skip("grpclib has no message compression")

    async def body(channel: aio.Channel) -> None:
        request = messages_pb2.SimpleRequest(
            response_size=10, payload=messages_pb2.Payload(body=bytes(1000))
        )
        response = await unary_call(channel)(request, compression=compression)
        assert len(response.payload.body) == 10

    run(peer.target, body)


# -- deadlines and cancellation --------------------------------------------------------------


def test_timeout_on_sleeping_server(peer: Peer) -> None:
    async def body(channel: aio.Channel) -> None:
        # The server answers nothing to a request without response parameters and waits for
        # the next one, which never comes: the deadline ends the call.
        call = full_duplex(channel)(timeout=0.05)
        request = output_request()
        request.payload.body = bytes(27182)
        await call.write(request)
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

    run(peer.target, body)


def test_cancel_after_begin(peer: Peer, wire_trace: List[str]) -> None:
    async def body(channel: aio.Channel) -> None:
        call = streaming_input(channel)()
        await call.wait_for_connection()
        assert call.cancel()
        assert not call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await call.code() is StatusCode.CANCELLED
        assert call.cancelled()
        assert any("stream=1 " in line and "CANCEL" in line for line in sent_resets(wire_trace))

    run(peer.target, body)


def test_cancel_after_first_response(peer: Peer, wire_trace: List[str]) -> None:
    async def body(channel: aio.Channel) -> None:
        named = call_id()
        call = full_duplex(channel)(timeout=10, metadata=(named,))
        request = output_request(31415)
        request.payload.body = bytes(27182)
        await call.write(request)
        assert len((await call.read()).payload.body) == 31415
        assert call.cancel()
        assert await call.code() is StatusCode.CANCELLED
        with pytest.raises(asyncio.CancelledError):
            await call.read()
        assert any("CANCEL" in line for line in sent_resets(wire_trace))
        if peer.record is not None:
            await handler_saw_the_end(peer, named)

    run(peer.target, body)


async def cancel_task_waiting_on(
    peer: Peer, call: Any, named: Tuple[str, str], wait: Callable[[], Awaitable[Any]]
) -> None:
    """Cancel a task while it waits in ``wait()`` on ``call`` (whose handler is running):
    the call ends CANCELLED, RST_STREAM(CANCEL) went out, and the handler saw its call end."""
    waiting = asyncio.Event()

    async def waiter() -> Any:
        waiting.set()  # it runs on into wait() and waits there before this task resumes
        return await wait()

    task = asyncio.get_running_loop().create_task(waiter())
    await call.wait_for_connection()
    await waiting.wait()
    await handler_runs(peer, named)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await call.code() is StatusCode.CANCELLED
    assert any("CANCEL" in line for line in sent_resets(peer.trace))
    await handler_saw_the_end(peer, named)


def test_cancelled_task_resets_its_stream(peer: Peer, wire_trace: List[str]) -> None:
    """A task cancelled while it awaits a call: RST_STREAM(CANCEL) goes out, the server's
    handler sees its call end, and the connection goes on serving (only a stream was reset)."""
    peer.trace = wire_trace

    async def body(channel: aio.Channel) -> None:
        named = call_id()
        call = empty_call(channel)(empty_pb2.Empty(), metadata=((SLEEP_KEY, "20000"), named))

        async def wait() -> Any:
            return await call

        await cancel_task_waiting_on(peer, call, named, wait)
        assert isinstance(await empty_call(channel)(empty_pb2.Empty()), empty_pb2.Empty)

    run(peer.target, body)


def test_cancelled_reader_resets_a_server_stream(peer: Peer, wire_trace: List[str]) -> None:
    peer.trace = wire_trace

    async def body(channel: aio.Channel) -> None:
        named = call_id()
        call = streaming_output(channel)(output_request(1), metadata=((SLEEP_KEY, "20000"), named))

        async def wait() -> List[Any]:
            return [response async for response in call]

        await cancel_task_waiting_on(peer, call, named, wait)

    run(peer.target, body)


def test_deadline_reaches_the_server(peer: Peer) -> None:
    """The time left goes out as grpc-timeout and the server ends the call at it too: a
    server-streaming call whose handler waits longer ends DEADLINE_EXCEEDED, promptly."""

    async def body(channel: aio.Channel) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        call = streaming_output(channel)(
            output_request(1), timeout=0.2, metadata=((SLEEP_KEY, "20000"),)
        )
        with pytest.raises(aio.AioRpcError) as caught:
            await call.read()
        assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED
        assert loop.time() - started < 5
        assert call.time_remaining() == 0

    run(peer.target, body)
