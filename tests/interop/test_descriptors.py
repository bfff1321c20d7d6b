"""minigrpc.descriptors (stub, add_servicer) and the interop servicer, against real grpcio peers.

``stub`` and ``add_servicer`` only use the API that minigrpc shares with grpcio, so they are
exercised here with grpcio on both ends: a ``grpc.server`` serving ``TestServiceServicer``
through ``add_servicer`` (tests/peers.py), and a ``grpc.insecure_channel`` under ``stub``.
That checks the descriptor plumbing (paths, serializers, UNIMPLEMENTED for what is not
registered) and the servicer's gRPC's doc/interop-test-descriptions.md behaviour independently of
minigrpc's transport.  The last two tests repeat calls on minigrpc's own channel (to a grpcio
server) and on minigrpc's own server (from a grpcio channel).
"""

from __future__ import annotations

from concurrent import futures
from typing import Any, Dict, Iterator

import pytest

import minigrpc
import minigrpc.blocking.channel
from cni_client import cni_pb2
from minigrpc.descriptors import add_servicer, message_class, method_path, streaming_flags, stub
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY, SLEEP_KEY
from tests.peers import GrpcioServer

grpc = pytest.importorskip("grpc", reason="grpcio (a test dependency) is not installed")

SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"


@pytest.fixture
def interop_stub(grpcio_target: str) -> Iterator[Any]:
    with grpc.insecure_channel(grpcio_target) as channel:
        yield stub(test_pb2.TEST_SERVICE, channel)


# -- pure descriptor helpers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "cls",
    [
        cni_pb2.CniCmdArgs,
        cni_pb2.CniCmdRequest,
        cni_pb2.CniCmdResponse,
        cni_pb2.Error,
        empty_pb2.Empty,
        messages_pb2.SimpleRequest,
        messages_pb2.SimpleResponse,
    ],
)
def test_message_class_returns_the_generated_class(cls: Any) -> None:
    assert message_class(cls.DESCRIPTOR) is cls


def test_method_path_is_full_service_name_and_method() -> None:
    paths = [method_path(m) for m in cni_pb2.CNI_SERVICE.methods]
    assert paths == [
        "/antrea_io.antrea.pkg.apis.cni.v1beta1.Cni/CmdAdd",
        "/antrea_io.antrea.pkg.apis.cni.v1beta1.Cni/CmdCheck",
        "/antrea_io.antrea.pkg.apis.cni.v1beta1.Cni/CmdDel",
    ]


def test_stub_has_the_multicallable_of_each_methods_shape() -> None:
    shapes = {
        "EmptyCall": grpc.UnaryUnaryMultiCallable,
        "UnaryCall": grpc.UnaryUnaryMultiCallable,
        "UnimplementedCall": grpc.UnaryUnaryMultiCallable,
        "StreamingOutputCall": grpc.UnaryStreamMultiCallable,
        "StreamingInputCall": grpc.StreamUnaryMultiCallable,
        "FullDuplexCall": grpc.StreamStreamMultiCallable,
        "HalfDuplexCall": grpc.StreamStreamMultiCallable,
    }
    with grpc.insecure_channel("unix-abstract:minigrpc-test-never-connected") as channel:
        service_stub = stub(test_pb2.TEST_SERVICE, channel)
        for name, multicallable in shapes.items():
            assert isinstance(getattr(service_stub, name), multicallable), name


# -- calls through a real grpcio server --------------------------------------------------------


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_empty_unary(interop_stub: Any) -> None:
    response = interop_stub.EmptyCall(empty_pb2.Empty(), timeout=10)
    assert isinstance(response, empty_pb2.Empty)


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_large_unary(interop_stub: Any) -> None:
    request = messages_pb2.SimpleRequest(
        response_size=314159, payload=messages_pb2.Payload(body=bytes(271828))
    )
    response = interop_stub.UnaryCall(request, timeout=10)
    assert isinstance(response, messages_pb2.SimpleResponse)
    assert response.payload.type == messages_pb2.COMPRESSABLE
    assert response.payload.body == bytes(314159)


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
@pytest.mark.parametrize("message", ["test status message", SPECIAL_MESSAGE])
def test_status_code_and_message_are_echoed(interop_stub: Any, message: str) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message=message)
    )
    with pytest.raises(grpc.RpcError) as caught:
        interop_stub.UnaryCall(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert caught.value.details() == message


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_custom_metadata_is_echoed_on_success_and_on_error(interop_stub: Any) -> None:
    metadata = (
        (ECHO_INITIAL_KEY, "test_initial_metadata_value"),
        (ECHO_TRAILING_KEY, b"\xab\xab\xab"),
    )
    request = messages_pb2.SimpleRequest(response_size=1, payload=messages_pb2.Payload(body=b"\0"))
    _, call = interop_stub.UnaryCall.with_call(request, metadata=metadata, timeout=10)
    assert (ECHO_INITIAL_KEY, "test_initial_metadata_value") in call.initial_metadata()
    assert (ECHO_TRAILING_KEY, b"\xab\xab\xab") in call.trailing_metadata()

    request.response_status.code = 3
    with pytest.raises(grpc.RpcError) as caught:
        interop_stub.UnaryCall(request, metadata=metadata, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (ECHO_TRAILING_KEY, b"\xab\xab\xab") in caught.value.trailing_metadata()


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_unimplemented_method_and_service(grpcio_target: str) -> None:
    with grpc.insecure_channel(grpcio_target) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            stub(test_pb2.TEST_SERVICE, channel).UnimplementedCall(empty_pb2.Empty(), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        other = stub(test_pb2.UNIMPLEMENTED_SERVICE, channel)
        with pytest.raises(grpc.RpcError) as caught:
            other.UnimplementedCall(empty_pb2.Empty(), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
@pytest.mark.parametrize("compressed", [False, True])
def test_server_compressed_unary_is_ok_either_way(interop_stub: Any, compressed: bool) -> None:
    request = messages_pb2.SimpleRequest(
        response_size=314159,
        payload=messages_pb2.Payload(body=bytes(271828)),
        response_compressed=messages_pb2.BoolValue(value=compressed),
    )
    assert len(interop_stub.UnaryCall(request, timeout=10).payload.body) == 314159


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_expect_compressed_is_not_checkable_on_grpcio(interop_stub: Any) -> None:
    # grpcio hides grpc-encoding from servicers (see tests/interop/servicer.py), so an
    # uncompressed request with expect_compressed=true cannot be refused there.
    request = messages_pb2.SimpleRequest(
        response_size=10, expect_compressed=messages_pb2.BoolValue(value=True)
    )
    assert len(interop_stub.UnaryCall(request, timeout=10).payload.body) == 10
    response = interop_stub.UnaryCall(request, timeout=10, compression=grpc.Compression.Gzip)
    assert len(response.payload.body) == 10


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_bad_requests_are_invalid_argument(interop_stub: Any) -> None:
    for request in (
        messages_pb2.SimpleRequest(response_type=7),
        messages_pb2.SimpleRequest(response_size=-1),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            interop_stub.UnaryCall(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_sleeping_call_hits_the_deadline_and_the_server_stops_waiting(
    grpcio_interop_server: GrpcioServer,
) -> None:
    servicer = grpcio_interop_server.servicer
    with grpc.insecure_channel(grpcio_interop_server.target) as channel:
        service_stub = stub(test_pb2.TEST_SERVICE, channel)
        with pytest.raises(grpc.RpcError) as caught:
            service_stub.UnaryCall(
                messages_pb2.SimpleRequest(), metadata=((SLEEP_KEY, "60000"),), timeout=0.2
            )
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The waiting handler notices the end of the call (add_callback) and returns long
        # before its 60 s are up.
        assert servicer.wait_for_no_sleepers(timeout=20)
        assert service_stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
    recorded = [c for c in servicer.calls if (SLEEP_KEY, "60000") in c.metadata]
    assert recorded and recorded[-1].time_remaining is not None
    assert recorded[-1].time_remaining < 10  # the client's deadline reached the server


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_servicer_records_client_metadata(grpcio_interop_server: GrpcioServer) -> None:
    with grpc.insecure_channel(grpcio_interop_server.target) as channel:
        stub(test_pb2.TEST_SERVICE, channel).EmptyCall(
            empty_pb2.Empty(), metadata=(("x-record-me", "yes"),), timeout=10
        )
    assert any(("x-record-me", "yes") in c.metadata for c in grpcio_interop_server.servicer.calls)


# -- add_servicer ----------------------------------------------------------------------------


class _EmptyOnly:
    """A servicer implementing one of the service's methods."""

    def EmptyCall(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    UnaryCall = "not callable"


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_add_servicer_registers_only_callable_methods(grpcio_server_factory: Any) -> None:
    server = grpcio_server_factory(
        "unix-abstract", services=[(test_pb2.TEST_SERVICE, _EmptyOnly())]
    )
    with grpc.insecure_channel(server.target) as channel:
        service_stub = stub(test_pb2.TEST_SERVICE, channel)
        assert service_stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
        with pytest.raises(grpc.RpcError) as caught:
            service_stub.UnaryCall(messages_pb2.SimpleRequest(), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_add_servicer_registers_every_method_the_servicer_has() -> None:
    class EveryMethod:
        def __getattr__(self, name: str) -> Any:
            return lambda request, context: None

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    try:
        names = add_servicer(server, test_pb2.TEST_SERVICE, EveryMethod())
    finally:
        server.stop(None)
    assert names == [m.name for m in test_pb2.TEST_SERVICE.methods]


def test_add_servicer_builds_the_handler_of_each_shape() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.handlers: Dict[str, Any] = {}

        def add_generic_rpc_handlers(self, generic_handlers: Any) -> None:
            for generic in generic_handlers:
                self.handlers.update(generic.method_paths())

    class EveryMethod:
        def __getattr__(self, name: str) -> Any:
            return lambda request, context: None

    server = Recorder()
    add_servicer(server, test_pb2.TEST_SERVICE, EveryMethod())
    flags = {
        path.rsplit("/", 1)[1]: (h.request_streaming, h.response_streaming)
        for path, h in server.handlers.items()
    }
    assert flags == {m.name: streaming_flags(m) for m in test_pb2.TEST_SERVICE.methods}


class _Agent:
    """A tiny antrea-agent stand-in: answers CmdAdd with the request's ifname."""

    def CmdAdd(self, request: Any, context: Any) -> Any:
        return cni_pb2.CniCmdResponse(cni_result=request.cni_args.ifname.encode())


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_cni_service_round_trip_over_unix_socket(grpcio_server_factory: Any) -> None:
    server = grpcio_server_factory("unix", services=[(cni_pb2.CNI_SERVICE, _Agent())])
    with grpc.insecure_channel(server.target) as channel:
        cni = stub(cni_pb2.CNI_SERVICE, channel)
        request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(ifname="eth0"))
        response = cni.CmdAdd(request, timeout=10)
        assert isinstance(response, cni_pb2.CniCmdResponse) and response.cni_result == b"eth0"
        with pytest.raises(grpc.RpcError) as caught:
            cni.CmdDel(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- server restart on a fixed address (the reconnect tests' helper) -----------------------------


@pytest.mark.grpcio_peer
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["unix", "unix-abstract", "tcp"])
def test_grpcio_server_restarts_on_the_same_target(grpcio_server_factory: Any, kind: str) -> None:
    server = grpcio_server_factory(kind)
    target = server.target
    # Each channel gets its own subchannels: grpcio otherwise shares one per address across
    # channels, and the one that saw "connection refused" stays in backoff for a second or more,
    # so the first call after the restart could fail fast with UNAVAILABLE.
    fresh = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(target, options=fresh) as channel:
        assert stub(test_pb2.TEST_SERVICE, channel).EmptyCall(empty_pb2.Empty(), timeout=10)
    server.stop()
    with grpc.insecure_channel(target, options=fresh) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            stub(test_pb2.TEST_SERVICE, channel).EmptyCall(empty_pb2.Empty(), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert server.restart() == target
    with grpc.insecure_channel(target, options=fresh) as channel:
        assert stub(test_pb2.TEST_SERVICE, channel).EmptyCall(empty_pb2.Empty(), timeout=10)


# -- the same helpers on minigrpc's own channel and server ------------------------------------


@pytest.mark.grpcio_peer
@pytest.mark.timeout(30)
def test_stub_on_minigrpc_channel(grpcio_target: str) -> None:
    with minigrpc.blocking.channel.insecure_channel(grpcio_target) as channel:
        service_stub = stub(test_pb2.TEST_SERVICE, channel)
        assert service_stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
        response = service_stub.UnaryCall(messages_pb2.SimpleRequest(response_size=3), timeout=10)
        assert response.payload.body == b"\0\0\0"


@pytest.mark.timeout(30)
def test_servicer_on_minigrpc_server(short_tmp_dir: str) -> None:
    from tests.interop.servicer import TestServiceServicer

    executor = futures.ThreadPoolExecutor(max_workers=4)
    server = minigrpc.server(executor)
    add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer())
    target = f"unix:{short_tmp_dir}/minigrpc.sock"
    server.add_insecure_port(target)
    server.start()
    try:
        with grpc.insecure_channel(target) as channel:
            service_stub = stub(test_pb2.TEST_SERVICE, channel)
            metadata = ((ECHO_INITIAL_KEY, "v"), (ECHO_TRAILING_KEY, b"\x01"))
            response, call = service_stub.UnaryCall.with_call(
                messages_pb2.SimpleRequest(response_size=5), metadata=metadata, timeout=10
            )
            assert response.payload.body == bytes(5)
            assert (ECHO_INITIAL_KEY, "v") in call.initial_metadata()
            assert (ECHO_TRAILING_KEY, b"\x01") in call.trailing_metadata()
            with pytest.raises(grpc.RpcError) as caught:
                service_stub.UnaryCall(
                    messages_pb2.SimpleRequest(
                        response_status=messages_pb2.EchoStatus(code=2, message=SPECIAL_MESSAGE)
                    ),
                    timeout=10,
                )
            assert caught.value.code() == grpc.StatusCode.UNKNOWN
            assert caught.value.details() == SPECIAL_MESSAGE
    finally:
        server.stop(None)
        executor.shutdown(wait=True)
