"""The streaming interop cases, in both directions between minigrpc and grpcio.

The cases are those of grpc's doc/interop-test-descriptions.md (client_streaming,
server_streaming, ping_pong, empty_stream, cancel_after_begin, cancel_after_first_response,
timeout_on_sleeping_server), plus grpcio's API around them: ``with_call`` and ``future`` on a
client stream, the call object's ``code()``, ``details()`` and metadata, and errors raised by a
request iterator.  Each test runs for three pairs (minigrpc client and grpcio server, grpcio
client and minigrpc server, minigrpc on both sides) over a unix path, an abstract socket and
TCP; the server side is the interop servicer of tests/interop/servicer.py either way.
"""

from __future__ import annotations

import queue
import threading
from concurrent import futures
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import minigrpc
from minigrpc.descriptors import stub
from tests.interop import messages_pb2, test_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY
from tests.peers import ADDRESS_KINDS, listen_address
from tests.support.minigrpc_server import MinigrpcServer

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

#: (client library, server library) pairs.
PAIRS = [("minigrpc", "grpcio"), ("grpcio", "minigrpc"), ("minigrpc", "minigrpc")]

#: The sizes the interop descriptions use for client_streaming and server_streaming.
REQUEST_SIZES = [27182, 8, 1828, 45904]
RESPONSE_SIZES = [31415, 9, 2653, 58979]


@pytest.fixture(scope="module")
def minigrpc_servers() -> Iterator[Dict[str, MinigrpcServer]]:
    """One minigrpc interop server per address kind, started on first use."""
    servers: Dict[str, MinigrpcServer] = {}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(params=PAIRS, ids=["-".join(pair) for pair in PAIRS])
def pair(request: pytest.FixtureRequest) -> Tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def api(pair: Tuple[str, str]) -> Any:
    """The client's module (``minigrpc`` or ``grpc``): its StatusCode, RpcError and futures."""
    return minigrpc if pair[0] == "minigrpc" else grpc


@pytest.fixture(params=ADDRESS_KINDS)
def service(
    request: pytest.FixtureRequest,
    pair: Tuple[str, str],
    api: Any,
    grpcio_interop_servers: Any,
    minigrpc_servers: Dict[str, MinigrpcServer],
) -> Iterator[Any]:
    """A TestService stub of the pair's client library on the pair's server."""
    kind = request.param
    if pair[1] == "grpcio":
        grpcio_server = grpcio_interop_servers.get(kind)
        if not grpcio_server.running:
            grpcio_server.start()
        target = grpcio_server.target
        servicer = grpcio_server.servicer
    else:
        if kind not in minigrpc_servers:
            minigrpc_servers[kind] = MinigrpcServer(kind)
        target = minigrpc_servers[kind].target
        servicer = minigrpc_servers[kind].servicer
    with api.insecure_channel(target) as channel:
        yield stub(test_pb2.TEST_SERVICE, channel)
    servicer.release_sleepers()


def input_request(size: int) -> Any:
    return messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=bytes(size)))


def output_request(*sizes: int, interval_us: int = 0) -> Any:
    return messages_pb2.StreamingOutputCallRequest(
        response_parameters=[
            messages_pb2.ResponseParameters(size=size, interval_us=interval_us) for size in sizes
        ]
    )


class RequestQueue:
    """A request iterator the test feeds one message at a time (``None`` ends the stream)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Optional[Any]] = queue.Queue()

    def send(self, request: Optional[Any]) -> None:
        self._queue.put(request)

    def __iter__(self) -> RequestQueue:
        return self

    def __next__(self) -> Any:
        request = self._queue.get()
        if request is None:
            raise StopIteration
        return request


# -- the interop cases -----------------------------------------------------------------------


def test_client_streaming(service: Any, api: Any) -> None:
    response = service.StreamingInputCall(iter([input_request(n) for n in REQUEST_SIZES]))
    assert response.aggregated_payload_size == sum(REQUEST_SIZES)


def test_server_streaming(service: Any, api: Any) -> None:
    responses = service.StreamingOutputCall(output_request(*RESPONSE_SIZES), timeout=30)
    assert [len(r.payload.body) for r in responses] == RESPONSE_SIZES
    assert responses.code() is api.StatusCode.OK


def test_ping_pong(service: Any, api: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    for request_size, response_size in zip(REQUEST_SIZES, RESPONSE_SIZES):
        request = output_request(response_size)
        request.payload.body = bytes(request_size)
        requests.send(request)
        assert len(next(responses).payload.body) == response_size
    requests.send(None)
    assert list(responses) == []
    assert responses.code() is api.StatusCode.OK


def test_empty_stream(service: Any, api: Any) -> None:
    responses = service.FullDuplexCall(iter(()), timeout=30)
    assert list(responses) == []
    assert responses.code() is api.StatusCode.OK


def test_cancel_after_begin(service: Any, api: Any) -> None:
    requests = RequestQueue()
    future = service.StreamingInputCall.future(requests, timeout=30)
    assert future.cancel()
    assert future.cancelled()
    with pytest.raises(api.FutureCancelledError):
        future.result()
    assert future.code() is api.StatusCode.CANCELLED


def test_cancel_after_first_response(service: Any, api: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    requests.send(output_request(31415))
    assert len(next(responses).payload.body) == 31415
    assert responses.cancel()
    with pytest.raises(api.RpcError) as caught:
        next(responses)
    assert caught.value.code() is api.StatusCode.CANCELLED


def test_timeout_on_sleeping_server(service: Any, api: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=0.001)
    request = output_request(31415)
    request.payload.body = bytes(27182)
    requests.send(request)
    with pytest.raises(api.RpcError) as caught:
        list(responses)
    assert caught.value.code() is api.StatusCode.DEADLINE_EXCEEDED


# -- grpcio's API around streams ---------------------------------------------------------------


def test_half_duplex_answers_after_the_requests_end(service: Any, api: Any) -> None:
    requests = [output_request(size) for size in (1, 2, 3)]
    responses = service.HalfDuplexCall(iter(requests), timeout=30)
    assert [len(r.payload.body) for r in responses] == [1, 2, 3]


def test_client_stream_with_call_gives_metadata(service: Any, api: Any) -> None:
    metadata = ((ECHO_INITIAL_KEY, "initial"), (ECHO_TRAILING_KEY, b"\x00\xff"))
    response, call = service.StreamingInputCall.with_call(
        iter([input_request(3)]), metadata=metadata, timeout=30
    )
    assert response.aggregated_payload_size == 3
    assert call.code() is api.StatusCode.OK
    assert (ECHO_INITIAL_KEY, "initial") in call.initial_metadata()
    assert (ECHO_TRAILING_KEY, b"\x00\xff") in call.trailing_metadata()


def test_server_stream_metadata_before_the_first_message(service: Any, api: Any) -> None:
    responses = service.StreamingOutputCall(
        output_request(1), metadata=((ECHO_INITIAL_KEY, "early"),), timeout=30
    )
    assert (ECHO_INITIAL_KEY, "early") in responses.initial_metadata()
    assert len(list(responses)) == 1


def test_status_from_the_server_ends_the_iteration(service: Any, api: Any) -> None:
    request = output_request(5)
    request.response_status.code = 8  # RESOURCE_EXHAUSTED
    request.response_status.message = "no more"
    responses = service.StreamingOutputCall(request, timeout=30)
    with pytest.raises(api.RpcError) as caught:
        list(responses)
    assert caught.value.code() is api.StatusCode.RESOURCE_EXHAUSTED
    assert caught.value.details() == "no more"
    assert responses.code() is api.StatusCode.RESOURCE_EXHAUSTED


def test_request_iterator_that_raises_ends_the_call_as_unknown(service: Any, api: Any) -> None:
    def broken() -> Iterator[Any]:
        yield input_request(1)
        raise ValueError("the source of requests broke")

    with pytest.raises(api.RpcError) as caught:
        service.StreamingInputCall(broken(), timeout=30)
    assert caught.value.code() is api.StatusCode.UNKNOWN
    assert caught.value.details() == "Exception iterating requests!"


def test_many_small_messages_each_way(service: Any, api: Any) -> None:
    count = 2000
    requests = (output_request(1) for _ in range(count))
    responses = service.FullDuplexCall(requests, timeout=60)
    assert sum(1 for _ in responses) == count


def test_large_messages_stream_past_the_flow_control_windows(service: Any, api: Any) -> None:
    sizes = [3 * 1024 * 1024] * 4
    responses = service.StreamingOutputCall(output_request(*sizes), timeout=60)
    assert [len(r.payload.body) for r in responses] == sizes
    total = service.StreamingInputCall(iter([input_request(n) for n in sizes]), timeout=60)
    assert total.aggregated_payload_size == sum(sizes)


def test_stream_future_done_callback_runs_once(service: Any, api: Any) -> None:
    seen: List[Any] = []
    done = threading.Event()
    future = service.StreamingInputCall.future(iter([input_request(2)]), timeout=30)

    def record(f: Any) -> None:
        seen.append(f)
        done.set()

    future.add_done_callback(record)
    assert future.result().aggregated_payload_size == 2
    assert done.wait(10) and seen == [future]


# -- a reader that stops reading never makes the other side buffer without bound --------------

#: Far above what windows and buffers allow in flight (a few MiB), far below what an unbounded
#: sender would queue in a second.
IN_FLIGHT_BOUND = 256
MESSAGE_SIZE = 64 * 1024


class EndlessStream:
    """A server-streaming handler that yields until told to stop; it records how far it got."""

    def __init__(self) -> None:
        self.produced = 0
        self.past_bound = threading.Event()
        self.stop = threading.Event()

    def __call__(self, request: Any, context: Any) -> Iterator[Any]:
        body = bytes(MESSAGE_SIZE)
        while not self.stop.is_set() and self.produced < 4 * IN_FLIGHT_BOUND:
            self.produced += 1
            if self.produced > IN_FLIGHT_BOUND:
                self.past_bound.set()
            yield messages_pb2.StreamingOutputCallResponse(
                payload=messages_pb2.Payload(body=body)
            )


def endless_handler(endless: EndlessStream, module: Any) -> Any:
    return module.method_handlers_generic_handler(
        "test.Endless",
        {
            "Stream": module.unary_stream_rpc_method_handler(
                endless,
                request_deserializer=messages_pb2.StreamingOutputCallRequest.FromString,
                response_serializer=messages_pb2.StreamingOutputCallResponse.SerializeToString,
            )
        },
    )


@pytest.mark.parametrize("server_library", ["minigrpc", "grpcio"])
def test_stalled_reader_holds_the_sender_back(server_library: str) -> None:
    """Against minigrpc's server this checks its send backpressure; against grpcio's, the
    minigrpc client's bounded receive buffer (grpcio's handler advances as data is written)."""
    endless = EndlessStream()
    address = listen_address("unix-abstract", None)
    if server_library == "minigrpc":
        server: Any = minigrpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers([endless_handler(endless, minigrpc)])
    else:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers([endless_handler(endless, grpc)])
    server.add_insecure_port(address)
    server.start()
    try:
        with minigrpc.insecure_channel(address) as channel:
            call = channel.unary_stream(
                "/test.Endless/Stream",
                request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
                response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
            )(messages_pb2.StreamingOutputCallRequest(), timeout=30)
            assert len(next(call).payload.body) == MESSAGE_SIZE
            # The reader now stops: the sender must stall within windows and buffers.
            assert not endless.past_bound.wait(1.0), f"produced {endless.produced} messages"
            endless.stop.set()
            assert sum(1 for _ in call) + 1 == endless.produced
            assert call.code() is minigrpc.StatusCode.OK
    finally:
        endless.stop.set()
        server.stop(None).wait(30)
