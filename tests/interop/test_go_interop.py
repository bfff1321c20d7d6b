"""minigrpc against grpc-go, the library antrea-agent runs: the interop cases both ways.

grpc-go is built from Debian's packages by tests/go_peers.py (once per session, cached across
sessions); every test here is skipped, with the reason, when that cannot be done.

* minigrpc's client against grpc-go's server (tests/go/interop_server): every case of grpc's
  doc/interop-test-descriptions.md that minigrpc's client supports, over a unix path, an
  abstract socket and TCP. grpc-go's server sees the request's compression, so the
  uncompressed ``expect_compressed`` probe that grpcio cannot check runs here.
* grpc-go's client (tests/go/interop_client) against minigrpc's server, the same cases and
  address kinds. The streaming cases are skipped while minigrpc's server answers a streaming
  method with UNIMPLEMENTED (checked at run time, so they run as soon as it serves them).
* grpc-go's client against grpc-go's server and against grpcio's: the Go peers pass every
  case with the two reference libraries, so a failure above is minigrpc's, not the peer's.

The whole file takes a few seconds once the peers are built; the build time (or "cached
build") is printed in pytest's terminal summary.
"""

from __future__ import annotations

import queue
import re
import shutil
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import minigrpc
from minigrpc import Compression, RpcError, StatusCode
from minigrpc.descriptors import stub
from tests.go_peers import GoPeers, GoServer, GoUnavailable, build_go_peers, run_interop_case
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY
from tests.peers import ADDRESS_KINDS, short_temp_dir
from tests.support.minigrpc_server import MinigrpcServer
from tests.support.scripted_peer import RawH2Client, grpc_request_headers

pytestmark = [pytest.mark.timeout(60), pytest.mark.go_peer]

LARGE_REQUEST = 271_828
LARGE_RESPONSE = 314_159
REQUEST_SIZES = [27182, 8, 1828, 45904]
RESPONSE_SIZES = [31415, 9, 2653, 58979]
SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"

UNARY_CASES = [
    "empty_unary",
    "large_unary",
    "client_compressed_unary",
    "server_compressed_unary",
    "status_code_and_message",
    "special_status_message",
    "custom_metadata",
    "unimplemented_method",
]
STREAMING_CASES = [
    "timeout_on_sleeping_server",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "cancel_after_begin",
    "cancel_after_first_response",
]
#: Unary cases whose description also makes a FullDuplexCall (run unary-only without streaming).
MIXED_CASES = {"status_code_and_message", "custom_metadata"}


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def go_peers() -> GoPeers:
    try:
        return build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")


@pytest.fixture(scope="session")
def go_server_targets(go_peers: GoPeers) -> Iterator[Dict[str, str]]:
    """One grpc-go interop server listening on every address kind; kind -> client target."""
    directory = short_temp_dir()
    addresses = {
        "unix": f"unix:{directory}/go.sock",
        "unix-abstract": f"unix-abstract:minigrpc-go-{uuid.uuid4().hex[:16]}",
        "tcp": "tcp:127.0.0.1:0",
    }
    server = GoServer(go_peers, [addresses[kind] for kind in ADDRESS_KINDS])
    with server:
        yield dict(zip(ADDRESS_KINDS, server.targets))
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(params=ADDRESS_KINDS)
def go_target(request: pytest.FixtureRequest, go_server_targets: Dict[str, str]) -> str:
    return go_server_targets[request.param]


@pytest.fixture
def service(go_target: str) -> Iterator[Any]:
    with minigrpc.insecure_channel(go_target) as channel:
        yield stub(test_pb2.TEST_SERVICE, channel)


def large_request(**fields: Any) -> Any:
    return messages_pb2.SimpleRequest(
        response_size=LARGE_RESPONSE, payload=messages_pb2.Payload(body=bytes(LARGE_REQUEST)),
        **fields,
    )


def output_request(*sizes: int, request_size: int = 0) -> Any:
    return messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=size) for size in sizes],
        payload=messages_pb2.Payload(body=bytes(request_size)),
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
        request = self._queue.get(timeout=30)
        if request is None:
            raise StopIteration
        return request


# -- minigrpc client -> grpc-go server: unary cases ---------------------------------------------


def test_empty_unary(service: Any) -> None:
    response, call = service.EmptyCall.with_call(empty_pb2.Empty(), timeout=10)
    assert isinstance(response, empty_pb2.Empty)
    assert call.code() is StatusCode.OK


def test_large_unary(service: Any) -> None:
    response = service.UnaryCall(large_request(), timeout=10)
    assert response.payload.body == bytes(LARGE_RESPONSE)


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_client_compressed_unary(service: Any, compression: Compression) -> None:
    expect = messages_pb2.BoolValue(value=True)
    # grpc-go's server sees the request's encoding, so the probe of the description runs too:
    # expect_compressed on an uncompressed request is refused.
    with pytest.raises(RpcError) as caught:
        service.UnaryCall(large_request(expect_compressed=expect), timeout=10)
    assert caught.value.code() is StatusCode.INVALID_ARGUMENT
    response = service.UnaryCall(
        large_request(expect_compressed=expect), timeout=10, compression=compression)
    assert response.payload.body == bytes(LARGE_RESPONSE)
    response = service.UnaryCall(
        large_request(expect_compressed=messages_pb2.BoolValue(value=False)), timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE


def received_flags(trace: List[str]) -> List[str]:
    """The Compressed-Flag of every message the client received, from the frame trace."""
    text = "\n".join(trace)
    return re.findall(r"<--.*DATA.*grpc-message flag=(\d)", text)


def test_server_compressed_unary(service: Any, wire_trace: List[str]) -> None:
    on = service.UnaryCall(
        large_request(response_compressed=messages_pb2.BoolValue(value=True)), timeout=10)
    on_flags = received_flags(wire_trace)
    wire_trace.clear()
    off = service.UnaryCall(
        large_request(response_compressed=messages_pb2.BoolValue(value=False)), timeout=10)
    off_flags = received_flags(wire_trace)
    assert on.payload.body == bytes(LARGE_RESPONSE)
    assert off.payload.body == bytes(LARGE_RESPONSE)
    # The Compressed-Flag (PROTOCOL-HTTP2.md, "Length-Prefixed-Message"), seen only in the trace.
    assert on_flags == ["1"]
    assert off_flags == ["0"]


def test_status_code_and_message(service: Any) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message="test status message"))
    with pytest.raises(RpcError) as caught:
        service.UnaryCall(request, timeout=10)
    assert caught.value.code() is StatusCode.UNKNOWN
    assert caught.value.details() == "test status message"
    assert str(caught.value) == "rpc error: code = Unknown desc = test status message"

    stream_request = output_request()
    stream_request.response_status.code = 2
    stream_request.response_status.message = "test status message"
    responses = service.FullDuplexCall(iter([stream_request]), timeout=10)
    with pytest.raises(RpcError) as caught:
        list(responses)
    assert caught.value.code() is StatusCode.UNKNOWN
    assert caught.value.details() == "test status message"


def test_special_status_message(service: Any) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message=SPECIAL_MESSAGE))
    with pytest.raises(RpcError) as caught:
        service.UnaryCall(request, timeout=10)
    assert caught.value.code() is StatusCode.UNKNOWN
    assert caught.value.details() == SPECIAL_MESSAGE


def test_custom_metadata(service: Any) -> None:
    metadata = [(ECHO_INITIAL_KEY, "test_initial_metadata_value"),
                (ECHO_TRAILING_KEY, b"\xab\xab\xab")]
    response, call = service.UnaryCall.with_call(large_request(), metadata=metadata, timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE
    assert (ECHO_INITIAL_KEY, "test_initial_metadata_value") in call.initial_metadata()
    assert (ECHO_TRAILING_KEY, b"\xab\xab\xab") in call.trailing_metadata()

    responses = service.FullDuplexCall(
        iter([output_request(LARGE_RESPONSE, request_size=LARGE_REQUEST)]),
        metadata=metadata, timeout=10)
    assert [len(r.payload.body) for r in responses] == [LARGE_RESPONSE]
    assert (ECHO_INITIAL_KEY, "test_initial_metadata_value") in responses.initial_metadata()
    assert (ECHO_TRAILING_KEY, b"\xab\xab\xab") in responses.trailing_metadata()


def test_custom_metadata_is_echoed_on_error_too(service: Any) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=9, message="m"))
    with pytest.raises(RpcError) as caught:
        service.UnaryCall(request, metadata=[(ECHO_TRAILING_KEY, b"\x0a\x0b")], timeout=10)
    assert caught.value.code() is StatusCode.FAILED_PRECONDITION
    assert (ECHO_TRAILING_KEY, b"\x0a\x0b") in caught.value.trailing_metadata()


def test_unimplemented_method(service: Any) -> None:
    with pytest.raises(RpcError) as caught:
        service.UnimplementedCall(empty_pb2.Empty(), timeout=10)
    assert caught.value.code() is StatusCode.UNIMPLEMENTED


def test_unimplemented_service(go_target: str) -> None:
    with minigrpc.insecure_channel(go_target) as channel:
        call = channel.unary_unary("/grpc.testing.UnimplementedService/UnimplementedCall")
        with pytest.raises(RpcError) as caught:
            call(b"", timeout=10)
    assert caught.value.code() is StatusCode.UNIMPLEMENTED


def test_deadline_on_a_sleeping_handler(service: Any) -> None:
    with pytest.raises(RpcError) as caught:
        service.EmptyCall(empty_pb2.Empty(), timeout=0.2, metadata=[("x-test-sleep-ms", "30000")])
    assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED


# -- minigrpc client -> grpc-go server: streaming cases -----------------------------------------


def test_timeout_on_sleeping_server(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=0.001)
    requests.send(output_request(31415, request_size=27182))
    with pytest.raises(RpcError) as caught:
        list(responses)
    assert caught.value.code() is StatusCode.DEADLINE_EXCEEDED


def test_client_streaming(service: Any) -> None:
    requests = [messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(
        body=bytes(size))) for size in REQUEST_SIZES]
    response = service.StreamingInputCall(iter(requests), timeout=30)
    assert response.aggregated_payload_size == sum(REQUEST_SIZES)


def test_server_streaming(service: Any) -> None:
    responses = service.StreamingOutputCall(output_request(*RESPONSE_SIZES), timeout=30)
    assert [r.payload.body for r in responses] == [bytes(size) for size in RESPONSE_SIZES]
    assert responses.code() is StatusCode.OK


def test_ping_pong(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    for request_size, response_size in zip(REQUEST_SIZES, RESPONSE_SIZES):
        requests.send(output_request(response_size, request_size=request_size))
        assert len(next(responses).payload.body) == response_size
    requests.send(None)
    assert list(responses) == []
    assert responses.code() is StatusCode.OK


def test_empty_stream(service: Any) -> None:
    responses = service.FullDuplexCall(iter(()), timeout=30)
    assert list(responses) == []
    assert responses.code() is StatusCode.OK


def test_cancel_after_begin(service: Any) -> None:
    future = service.StreamingInputCall.future(RequestQueue(), timeout=30)
    assert future.cancel()
    with pytest.raises(minigrpc.FutureCancelledError):
        future.result()
    assert future.code() is StatusCode.CANCELLED


def test_cancel_after_first_response(service: Any) -> None:
    requests = RequestQueue()
    responses = service.FullDuplexCall(requests, timeout=30)
    requests.send(output_request(31415, request_size=27182))
    assert len(next(responses).payload.body) == 31415
    assert responses.cancel()
    with pytest.raises(RpcError) as caught:
        next(responses)
    assert caught.value.code() is StatusCode.CANCELLED


def test_half_duplex_answers_after_the_requests_end(service: Any) -> None:
    responses = service.HalfDuplexCall(iter([output_request(n) for n in (1, 2, 3)]), timeout=30)
    assert [len(r.payload.body) for r in responses] == [1, 2, 3]


def test_server_stream_with_compressed_messages(service: Any, wire_trace: List[str]) -> None:
    request = messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=5000, compressed=messages_pb2.BoolValue(value=True)),
        messages_pb2.ResponseParameters(size=5000),
    ])
    responses = service.StreamingOutputCall(request, timeout=30)
    assert [r.payload.body for r in responses] == [bytes(5000), bytes(5000)]
    assert received_flags(wire_trace) == ["1", "0"]


# -- grpc-go client -> minigrpc server ---------------------------------------------------------


@pytest.fixture(scope="module", params=ADDRESS_KINDS)
def minigrpc_server(request: pytest.FixtureRequest) -> Iterator[MinigrpcServer]:
    with MinigrpcServer(request.param) as server:
        yield server


_streaming_verdicts: Dict[str, Tuple[bool, str]] = {}


def minigrpc_server_streams(server: MinigrpcServer) -> Tuple[bool, str]:
    """Whether the minigrpc server serves streaming methods, and what the probe saw.

    The probe is one FullDuplexCall with one request: UNIMPLEMENTED means the server has no
    streaming yet (it refused or ignored the streaming methods' registration); anything else,
    success or another failure, means it has, and the streaming cases run and report."""
    verdict = _streaming_verdicts.get(server.kind)
    if verdict is None:
        with minigrpc.insecure_channel(server.target) as channel:
            responses = stub(test_pb2.TEST_SERVICE, channel).FullDuplexCall(
                iter([output_request(1)]), timeout=10)
            try:
                list(responses)
                verdict = (True, "")
            except RpcError as exc:
                verdict = (exc.code() is not StatusCode.UNIMPLEMENTED, str(exc))
        _streaming_verdicts[server.kind] = verdict
    return verdict


def _report(completed: Any) -> str:
    return f"exit {completed.returncode}: {completed.stdout}{completed.stderr}"


@pytest.mark.parametrize("case", UNARY_CASES + STREAMING_CASES)
def test_grpc_go_client_against_minigrpc_server(
    go_peers: GoPeers, minigrpc_server: MinigrpcServer, case: str
) -> None:
    streams, probe = minigrpc_server_streams(minigrpc_server)
    if case in STREAMING_CASES and not streams:
        pytest.skip(f"minigrpc server streaming not merged ({probe})")
    completed = run_interop_case(go_peers, minigrpc_server.target, case,
                                 unary_only=case in MIXED_CASES and not streams)
    assert completed.returncode == 0, _report(completed)
    assert f"{case} passed" in completed.stdout


# -- grpc-go against itself: the peers are right ------------------------------------------------


@pytest.mark.parametrize("case", UNARY_CASES + STREAMING_CASES)
def test_grpc_go_client_against_grpc_go_server(
    go_peers: GoPeers, go_server_targets: Dict[str, str], case: str
) -> None:
    completed = run_interop_case(go_peers, go_server_targets["unix"], case)
    assert completed.returncode == 0, _report(completed)


def test_go_client_reports_a_failing_case(go_peers: GoPeers) -> None:
    """A case that fails exits non-zero: the client cannot pass a broken server."""
    with MinigrpcServer("unix", with_interop=False) as server:
        completed = run_interop_case(go_peers, server.target, "large_unary")
    assert completed.returncode == 1
    assert "large_unary FAILED" in completed.stderr
    assert "Unimplemented" in completed.stderr


# -- grpc-go client -> grpcio server: the cases hold between the two reference libraries --------

#: grpcio's servicer API cannot see a request's compression (tests/interop/servicer.py), so the
#: uncompressed expect_compressed probe of client_compressed_unary cannot be refused there.
GRPCIO_SERVER_CASES = [case for case in UNARY_CASES + STREAMING_CASES
                       if case != "client_compressed_unary"]


@pytest.mark.grpcio_peer
@pytest.mark.parametrize("case", GRPCIO_SERVER_CASES)
def test_grpc_go_client_against_grpcio_server(
    go_peers: GoPeers, grpcio_target: str, case: str
) -> None:
    completed = run_interop_case(go_peers, grpcio_target, case)
    assert completed.returncode == 0, _report(completed)


# -- what grpc-go's client showed about minigrpc's server -------------------------------------


def test_unserved_method_with_no_message_is_unimplemented() -> None:
    """grpc-go and grpc-core answer UNIMPLEMENTED from the :path alone, whatever follows.

    grpc-go's client sent exactly these frames in the empty_stream case (HEADERS, then an
    empty DATA frame with END_STREAM, written together) and got INTERNAL from minigrpc's
    server. The raw client sends the same two frames in one write, so the test does not
    depend on grpc-go's scheduling; the path is one no server here ever serves."""
    with MinigrpcServer("unix") as server, RawH2Client(server.target) as client:
        response = client.call(
            grpc_request_headers("/grpc.testing.UnimplementedService/UnimplementedCall"),
            body=b"")
    assert response.grpc_status == StatusCode.UNIMPLEMENTED.value[0], response.grpc_message
