"""minigrpc's client against a real grpcio server: the streaming interop cases.

The cases are those of grpc's doc/interop-test-descriptions.md (client_streaming,
server_streaming, ping_pong, empty_stream, cancel_after_begin, cancel_after_first_response,
timeout_on_sleeping_server), plus grpcio's API around them: ``with_call`` and ``future`` on a
client stream, the call object's ``code()``, ``details()`` and metadata, and errors raised by a
request iterator.  ``grpcio_target`` runs each test over a unix path, an abstract socket and TCP.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator, List, Optional

import pytest

import minigrpc
from minigrpc import RpcError, StatusCode
from minigrpc.descriptors import stub
from tests.interop import messages_pb2, test_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

#: The sizes the interop descriptions use for client_streaming and server_streaming.
REQUEST_SIZES = [27182, 8, 1828, 45904]
RESPONSE_SIZES = [31415, 9, 2653, 58979]


@pytest.fixture
def service(grpcio_target: str) -> Iterator[Any]:
    with minigrpc.insecure_channel(grpcio_target) as channel:
        yield stub(test_pb2.TEST_SERVICE, channel)


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


def test_client_streaming(service: Any) -> None:
    response = service.StreamingInputCall(iter([input_request(n) for n in REQUEST_SIZES]))
    assert response.aggregated_payload_size == sum(REQUEST_SIZES)


def test_server_streaming(service: Any) -> None:
    responses = service.StreamingOutputCall(output_request(*RESPONSE_SIZES), timeout=30)
    assert [len(r.payload.body) for r in responses] == RESPONSE_SIZES
    assert responses.code() is StatusCode.OK


def test_ping_pong(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    for request_size, response_size in zip(REQUEST_SIZES, RESPONSE_SIZES):
        request = output_request(response_size)
        request.payload.body = bytes(request_size)
        requests.send(request)
        assert len(next(responses).payload.body) == response_size
    requests.send(None)
    assert list(responses) == []
    assert responses.code() is StatusCode.OK


def test_empty_stream(service: Any) -> None:
    responses = service.FullDuplexCall(iter(()), timeout=30)
    assert list(responses) == []
    assert responses.code() is StatusCode.OK


def test_cancel_after_begin(service: Any) -> None:
    requests = RequestQueue()
    future = service.StreamingInputCall.future(requests, timeout=30)
    assert future.cancel()
    assert future.cancelled()
    with pytest.raises(minigrpc.FutureCancelledError):
        future.result()
    assert future.code() is StatusCode.CANCELLED


def test_cancel_after_first_response(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    requests.send(output_request(31415))
    assert len(next(responses).payload.body) == 31415
    assert responses.cancel()
    with pytest.raises(RpcError) as caught:
        next(responses)
    assert caught.value.code() is StatusCode.CANCELLED


def test_timeout_on_sleeping_server(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=0.001)
    request = output_request(31415)
    request.payload.body = bytes(27182)
    requests.send(request)
    with pytest.raises(RpcError) as caught:
        list(responses)
    assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED


# -- grpcio's API around streams ---------------------------------------------------------------


def test_half_duplex_answers_after_the_requests_end(service: Any) -> None:
    requests = [output_request(size) for size in (1, 2, 3)]
    responses = service.HalfDuplexCall(iter(requests), timeout=30)
    assert [len(r.payload.body) for r in responses] == [1, 2, 3]


def test_client_stream_with_call_gives_metadata(service: Any) -> None:
    metadata = ((ECHO_INITIAL_KEY, "initial"), (ECHO_TRAILING_KEY, b"\x00\xff"))
    response, call = service.StreamingInputCall.with_call(
        iter([input_request(3)]), metadata=metadata, timeout=30
    )
    assert response.aggregated_payload_size == 3
    assert call.code() is StatusCode.OK
    assert (ECHO_INITIAL_KEY, "initial") in call.initial_metadata()
    assert (ECHO_TRAILING_KEY, b"\x00\xff") in call.trailing_metadata()


def test_server_stream_metadata_before_the_first_message(service: Any) -> None:
    responses = service.StreamingOutputCall(
        output_request(1), metadata=((ECHO_INITIAL_KEY, "early"),), timeout=30
    )
    assert (ECHO_INITIAL_KEY, "early") in responses.initial_metadata()
    assert len(list(responses)) == 1


def test_status_from_the_server_ends_the_iteration(service: Any) -> None:
    request = output_request(5)
    request.response_status.code = StatusCode.RESOURCE_EXHAUSTED.value[0]
    request.response_status.message = "no more"
    responses = service.StreamingOutputCall(request, timeout=30)
    with pytest.raises(RpcError) as caught:
        list(responses)
    assert caught.value.code() is StatusCode.RESOURCE_EXHAUSTED
    assert caught.value.details() == "no more"
    assert responses.code() is StatusCode.RESOURCE_EXHAUSTED


def test_request_iterator_that_raises_ends_the_call_as_unknown(service: Any) -> None:
    def broken() -> Iterator[Any]:
        yield input_request(1)
        raise ValueError("the source of requests broke")

    with pytest.raises(RpcError) as caught:
        service.StreamingInputCall(broken(), timeout=30)
    assert caught.value.code() is StatusCode.UNKNOWN
    assert caught.value.details() == "Exception iterating requests!"


def test_many_small_messages_each_way(service: Any) -> None:
    count = 2000
    requests = (output_request(1) for _ in range(count))
    responses = service.FullDuplexCall(requests, timeout=60)
    assert sum(1 for _ in responses) == count


def test_large_messages_stream_past_the_flow_control_windows(service: Any) -> None:
    sizes = [3 * 1024 * 1024] * 4
    responses = service.StreamingOutputCall(output_request(*sizes), timeout=60)
    assert [len(r.payload.body) for r in responses] == sizes
    total = service.StreamingInputCall(iter([input_request(n) for n in sizes]), timeout=60)
    assert total.aggregated_payload_size == sum(sizes)


def test_stream_future_done_callback_runs_once(service: Any) -> None:
    seen: List[Any] = []
    done = threading.Event()
    future = service.StreamingInputCall.future(iter([input_request(2)]), timeout=30)

    def record(f: Any) -> None:
        seen.append(f)
        done.set()

    future.add_done_callback(record)
    assert future.result().aggregated_payload_size == 2
    assert done.wait(10) and seen == [future]
