"""A real grpcio client against the minigrpc server: the unary interop cases (gRPC's
doc/interop-test-descriptions.md).

Every test runs over a unix path socket, an abstract socket and TCP.  The server hosts the
interop ``TestService`` (tests/interop/servicer.py, written against grpcio's ServicerContext
API only), so these tests also show that a grpcio handler runs unchanged on minigrpc.
When minigrpc's own client is available the same cases run with it as well.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Iterator, Tuple

import pytest

from tests.interop import empty_pb2, messages_pb2
from tests.peers import grpcio_client_module
from tests.support.minigrpc_server import (
    ADDRESS_KINDS,
    MinigrpcServer,
    interop_callables,
    large_unary_request,
)

#: grpcio, or on PyPy grpcio's client calling from a CPython child (tests/peers.py).
grpc = grpcio_client_module()

pytestmark = pytest.mark.timeout(60)

SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"

_HAVE_MINIGRPC_CLIENT = importlib.util.find_spec("minigrpc.blocking.channel") is not None
CLIENTS = ["grpcio", "minigrpc"] if _HAVE_MINIGRPC_CLIENT else ["grpcio"]


@pytest.fixture(scope="module", params=ADDRESS_KINDS)
def minigrpc_server(request: pytest.FixtureRequest) -> Iterator[MinigrpcServer]:
    with MinigrpcServer(request.param) as server:
        yield server


@pytest.fixture(params=CLIENTS)
def client(
    request: pytest.FixtureRequest, minigrpc_server: MinigrpcServer
) -> Iterator[Tuple[Any, Any]]:
    """``(module, channel)`` for the client library under test (grpcio or minigrpc)."""
    if request.param == "grpcio":
        module: Any = grpc
    else:
        import minigrpc

        module = minigrpc
    channel = module.insecure_channel(minigrpc_server.target)
    yield module, channel
    channel.close()


def test_empty_unary(client: Tuple[Any, Any]) -> None:
    _, channel = client
    empty, _ = interop_callables(channel)
    assert empty(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()


def test_large_unary(client: Tuple[Any, Any]) -> None:
    _, channel = client
    _, unary = interop_callables(channel)
    response = unary(large_unary_request(), timeout=10)
    assert len(response.payload.body) == 314159
    assert response.payload.body == bytes(314159)


def test_client_compressed_unary(client: Tuple[Any, Any]) -> None:
    module, channel = client
    _, unary = interop_callables(channel)
    expect = messages_pb2.BoolValue(value=True)
    with pytest.raises(module.RpcError) as excinfo:
        unary(large_unary_request(expect_compressed=expect), timeout=10)
    assert excinfo.value.code() == module.StatusCode.INVALID_ARGUMENT
    response = unary(
        large_unary_request(expect_compressed=expect),
        timeout=10,
        compression=module.Compression.Gzip,
    )
    assert len(response.payload.body) == 314159
    response = unary(
        large_unary_request(expect_compressed=messages_pb2.BoolValue(value=False)), timeout=10
    )
    assert len(response.payload.body) == 314159


@pytest.mark.parametrize("compressed", [True, False])
def test_server_compressed_unary(client: Tuple[Any, Any], compressed: bool) -> None:
    _, channel = client
    _, unary = interop_callables(channel)
    response = unary(
        large_unary_request(response_compressed=messages_pb2.BoolValue(value=compressed)),
        timeout=10,
    )
    assert response.payload.body == bytes(314159)


def test_status_code_and_message(client: Tuple[Any, Any]) -> None:
    module, channel = client
    _, unary = interop_callables(channel)
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message="test status message")
    )
    with pytest.raises(module.RpcError) as excinfo:
        unary(request, timeout=10)
    assert excinfo.value.code() == module.StatusCode.UNKNOWN
    assert excinfo.value.details() == "test status message"


def test_special_status_message(client: Tuple[Any, Any]) -> None:
    module, channel = client
    _, unary = interop_callables(channel)
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message=SPECIAL_MESSAGE)
    )
    with pytest.raises(module.RpcError) as excinfo:
        unary(request, timeout=10)
    assert excinfo.value.code() == module.StatusCode.UNKNOWN
    assert excinfo.value.details() == SPECIAL_MESSAGE


def test_custom_metadata(client: Tuple[Any, Any]) -> None:
    _, channel = client
    _, unary = interop_callables(channel)
    metadata = (
        ("x-grpc-test-echo-initial", "test_initial_metadata_value"),
        ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"),
    )
    response, call = unary.with_call(large_unary_request(), metadata=metadata, timeout=10)
    assert len(response.payload.body) == 314159
    assert ("x-grpc-test-echo-initial", "test_initial_metadata_value") in [
        tuple(item) for item in call.initial_metadata()
    ]
    assert ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab") in [
        tuple(item) for item in call.trailing_metadata()
    ]


def test_custom_metadata_echoed_on_error(client: Tuple[Any, Any]) -> None:
    module, channel = client
    _, unary = interop_callables(channel)
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=9, message="x")
    )
    with pytest.raises(module.RpcError) as excinfo:
        unary(request, metadata=(("x-grpc-test-echo-trailing-bin", b"\x00\x01"),), timeout=10)
    assert excinfo.value.code() == module.StatusCode.FAILED_PRECONDITION
    assert ("x-grpc-test-echo-trailing-bin", b"\x00\x01") in [
        tuple(item) for item in excinfo.value.trailing_metadata()
    ]


@pytest.mark.parametrize(
    "path",
    [
        "/grpc.testing.TestService/UnimplementedCall",
        "/grpc.testing.UnimplementedService/UnimplementedCall",
    ],
)
def test_unimplemented(client: Tuple[Any, Any], path: str) -> None:
    module, channel = client
    call = channel.unary_unary(
        path,
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )
    with pytest.raises(module.RpcError) as excinfo:
        call(empty_pb2.Empty(), timeout=10)
    assert excinfo.value.code() == module.StatusCode.UNIMPLEMENTED
    assert excinfo.value.details() == "Method not found!"


def test_deadline_exceeded_on_slow_handler(
    client: Tuple[Any, Any], minigrpc_server: MinigrpcServer
) -> None:
    module, channel = client
    _, unary = interop_callables(channel)
    with pytest.raises(module.RpcError) as excinfo:
        unary(
            messages_pb2.SimpleRequest(response_size=1),
            metadata=(("x-test-sleep-ms", "20000"),),
            timeout=0.2,
        )
    assert excinfo.value.code() == module.StatusCode.DEADLINE_EXCEEDED


def test_handler_sees_the_deadline(
    client: Tuple[Any, Any], minigrpc_server: MinigrpcServer
) -> None:
    _, channel = client
    empty, _ = interop_callables(channel)
    before = len(minigrpc_server.servicer.calls)
    empty(empty_pb2.Empty(), timeout=30)
    empty(empty_pb2.Empty())
    with_deadline, without = minigrpc_server.servicer.calls[before:]
    # grpc-core rounds grpc-timeout up to a coarser unit, so allow a little over 30 s.
    assert with_deadline.time_remaining is not None and 0 < with_deadline.time_remaining <= 31
    assert without.time_remaining is None


def test_padded_values_and_repeated_cookies_reach_the_handler(
    client: Tuple[Any, Any], minigrpc_server: MinigrpcServer
) -> None:
    """grpcio's client sends a value with spaces around it as it is, which RFC 9113 §8.2.1
    forbids but grpcio's and grpc-go's servers accept: minigrpc's server serves the call too
    (a malformed block would cost only its stream, but this one is let through). Repeated
    ``cookie`` fields stay separate, as grpcio's server hands them over. minigrpc's client trims
    the spaces before sending (h2's outbound normalisation)."""
    module, channel = client
    empty, _ = interop_callables(channel)
    before = len(minigrpc_server.servicer.calls)
    metadata = (("cookie", "a=1"), ("x-padded", " 2 "), ("cookie", "b=2"))
    empty(empty_pb2.Empty(), metadata=metadata, timeout=10)
    seen = [item for item in minigrpc_server.servicer.calls[before].metadata
            if item[0] in ("cookie", "x-padded")]
    padded = " 2 " if module is grpc else "2"
    assert seen == [("cookie", "a=1"), ("x-padded", padded), ("cookie", "b=2")]


def test_metadata_and_peer_seen_by_handler(
    client: Tuple[Any, Any], minigrpc_server: MinigrpcServer
) -> None:
    _, channel = client
    empty, _ = interop_callables(channel)
    before = len(minigrpc_server.servicer.calls)
    empty(empty_pb2.Empty(), metadata=(("x-a", "1"), ("x-b-bin", b"\x00\xff")), timeout=10)
    call = minigrpc_server.servicer.calls[before]
    assert ("x-a", "1") in call.metadata and ("x-b-bin", b"\x00\xff") in call.metadata
    assert any(key == "user-agent" for key, _ in call.metadata)
    assert not any(key.startswith("grpc-") for key, _ in call.metadata)
    expected_prefix = "ipv4:127.0.0.1:" if minigrpc_server.kind == "tcp" else "unix"
    assert call.peer.startswith(expected_prefix)
