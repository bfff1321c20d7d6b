"""minigrpc's one-shot unary client against the two reference servers, grpcio and grpc-go.

antrea-agent is a grpc-go server, and the CNI plugin makes its one call with
:func:`minigrpc.oneshot.unary_call`, so the unary cases of grpc's
doc/interop-test-descriptions.md run here against grpc-go's interop server (built by
tests/go_peers.py, skipped with the reason when it cannot be) and against grpcio's, both
serving the interop TestService: empty and large unary calls (a large response through small
windows, so the client must return window as the DATA arrives), a compressed response, status
code and message, special characters in the message (percent-encoding), custom metadata both
ways (binary trailing metadata, HPACK on every block), an unimplemented method and service, and
a deadline on a sleeping handler.
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Iterator, Tuple

import pytest

from minigrpc import oneshot
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.status import CallStatus
from tests.interop import messages_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY, SLEEP_KEY
from tests.peers import short_temp_dir

pytestmark = [pytest.mark.timeout(60)]

UNARY = "/grpc.testing.TestService/UnaryCall"
EMPTY = "/grpc.testing.TestService/EmptyCall"
SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
#: How far past its deadline a DEADLINE_EXCEEDED may arrive (scheduling on a loaded CI box).
DEADLINE_SLACK = 3.0


@pytest.fixture(scope="module")
def grpcio_target() -> Iterator[str]:
    pytest.importorskip("grpc")
    from tests.peers import GrpcioServer

    directory = short_temp_dir()
    with GrpcioServer(f"unix:{directory}/grpcio.sock") as server:
        yield server.target
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def go_target() -> Iterator[str]:
    from tests.go_peers import GoServer, GoUnavailable, build_go_peers

    try:
        peers = build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")
    directory = short_temp_dir()
    with GoServer(peers, [f"unix:{directory}/go.sock"]) as server:
        yield server.targets[0]
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(params=["grpcio", pytest.param("grpc-go", marks=pytest.mark.go_peer)])
def target(request: pytest.FixtureRequest) -> str:
    fixture = "grpcio_target" if request.param == "grpcio" else "go_target"
    return str(request.getfixturevalue(fixture))


def unary(target: str, timeout: float = 20.0, **fields: Any) -> Tuple[CallStatus, Any]:
    request = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, **fields)
    status, payload = oneshot.unary_call(
        target, UNARY, request.SerializeToString(), timeout=timeout
    )
    response = None if payload is None else messages_pb2.SimpleResponse.FromString(payload)
    return status, response


def test_empty_unary(target: str) -> None:
    status, payload = oneshot.unary_call(target, EMPTY, b"", timeout=20.0)
    assert status.code is StatusCode.OK, status
    assert payload == b""


def test_large_unary(target: str) -> None:
    request = messages_pb2.SimpleRequest(
        response_type=messages_pb2.COMPRESSABLE,
        response_size=314_159,
        payload=messages_pb2.Payload(body=bytes(271_828)),
    )
    status, payload = oneshot.unary_call(target, UNARY, request.SerializeToString(), timeout=20.0)
    assert status.code is StatusCode.OK, status
    assert payload is not None
    assert len(messages_pb2.SimpleResponse.FromString(payload).payload.body) == 314_159


def test_large_response_through_small_windows(target: str) -> None:
    """3 MB through the RFC's 64 KiB default windows: the server stalls unless the client
    sends WINDOW_UPDATE as the DATA arrives (RFC 9113 §6.9)."""
    request = messages_pb2.SimpleRequest(
        response_type=messages_pb2.COMPRESSABLE, response_size=3_000_000
    )
    status, payload = oneshot.unary_call(
        target, UNARY, request.SerializeToString(), timeout=20.0,
        stream_window=65535, connection_window=65535,
    )
    assert status.code is StatusCode.OK, status
    assert payload is not None
    assert len(messages_pb2.SimpleResponse.FromString(payload).payload.body) == 3_000_000


def test_server_compressed_unary(target: str) -> None:
    status, response = unary(
        target, response_size=100_000, response_compressed=messages_pb2.BoolValue(value=True)
    )
    assert status.code is StatusCode.OK, status
    assert response.payload.body == bytes(100_000)


def test_status_code_and_message(target: str) -> None:
    status, response = unary(
        target, response_status=messages_pb2.EchoStatus(code=2, message="test status message")
    )
    assert response is None
    assert status.code is StatusCode.UNKNOWN
    assert status.details == "test status message"


def test_special_status_message(target: str) -> None:
    status, response = unary(
        target, response_status=messages_pb2.EchoStatus(code=2, message=SPECIAL_MESSAGE)
    )
    assert response is None
    assert status.code is StatusCode.UNKNOWN
    assert status.details == SPECIAL_MESSAGE


def test_custom_metadata(target: str) -> None:
    request = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE, response_size=1)
    status, payload = oneshot.unary_call(
        target, UNARY, request.SerializeToString(), timeout=20.0,
        metadata=[(ECHO_INITIAL_KEY, "test_initial_metadata_value"),
                  (ECHO_TRAILING_KEY, b"\x0a\x0b\x0a\x0b\x0a\x0b")],
    )
    assert status.code is StatusCode.OK, status
    assert payload is not None
    assert (ECHO_INITIAL_KEY, "test_initial_metadata_value") in status.initial_metadata
    assert (ECHO_TRAILING_KEY, b"\x0a\x0b\x0a\x0b\x0a\x0b") in status.trailing_metadata


def test_unimplemented_method(target: str) -> None:
    status, payload = oneshot.unary_call(
        target, "/grpc.testing.TestService/UnimplementedCall", b"", timeout=20.0
    )
    assert payload is None
    assert status.code is StatusCode.UNIMPLEMENTED


def test_unimplemented_service(target: str) -> None:
    status, payload = oneshot.unary_call(
        target, "/grpc.testing.UnimplementedService/UnimplementedCall", b"", timeout=20.0
    )
    assert payload is None
    assert status.code is StatusCode.UNIMPLEMENTED


def test_deadline_on_a_sleeping_handler(target: str) -> None:
    request = messages_pb2.SimpleRequest(response_type=messages_pb2.COMPRESSABLE)
    start = time.monotonic()
    status, payload = oneshot.unary_call(
        target, UNARY, request.SerializeToString(), timeout=0.5, metadata=[(SLEEP_KEY, "5000")]
    )
    assert payload is None
    assert status.code is StatusCode.DEADLINE_EXCEEDED, status
    assert time.monotonic() - start < 0.5 + DEADLINE_SLACK


def test_graceful_stop_with_the_call_in_flight() -> None:
    """grpcio's ``stop(grace)`` while the call runs: the client reads the GOAWAY (seen in its
    frame trace) before the handler is let go, then the response (PROTOCOL-HTTP2.md, GOAWAY
    Frame): the call still ends OK."""
    grpc = pytest.importorskip("grpc")
    import logging
    import threading
    from concurrent import futures

    entered, release, goaway_read = threading.Event(), threading.Event(), threading.Event()

    class GoawayWatch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if " <-- " in message and " GOAWAY " in message:
                goaway_read.set()

    wire_logger = logging.getLogger("minigrpc.protocol.wire")
    watch = GoawayWatch(logging.DEBUG)
    previous_level = wire_logger.level
    wire_logger.addHandler(watch)
    wire_logger.setLevel(logging.DEBUG)

    def handler(request: bytes, context: Any) -> bytes:
        entered.set()
        release.wait(20)
        return b"after goaway:" + request

    directory = short_temp_dir()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "t.S", {"M": grpc.unary_unary_rpc_method_handler(handler)}),))
    server.add_insecure_port(f"unix:{directory}/graceful.sock")
    server.start()
    results: list = []
    caller = threading.Thread(target=lambda: results.append(oneshot.unary_call(
        f"unix:{directory}/graceful.sock", "/t.S/M", b"x", timeout=20.0)))
    caller.start()
    try:
        assert entered.wait(20), "the call never reached the handler"
        stopped = server.stop(grace=20)
        assert goaway_read.wait(20), "the client never read the server's GOAWAY"
        release.set()
        caller.join(20)
        assert stopped.wait(20)
    finally:
        release.set()
        server.stop(None)
        wire_logger.removeHandler(watch)
        wire_logger.setLevel(previous_level)
        shutil.rmtree(directory, ignore_errors=True)
    status, payload = results[0]
    assert status.code is StatusCode.OK, status
    assert payload == b"after goaway:x"
