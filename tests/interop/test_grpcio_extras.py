"""grpcio-status and grpcio-health-checking, unchanged, on minigrpc in both roles.

* Rich errors: a handler calls grpcio-status's documented
  ``context.abort_with_status(rpc_status.to_status(status))``; the client's
  ``rpc_status.from_call(error)`` gets the same ``google.rpc.Status`` back, details included
  (they travel in the ``grpc-status-details-bin`` trailer).
* Health: grpc_health's own ``HealthServicer`` served by minigrpc, and its generated
  ``HealthStub`` on a minigrpc channel, for ``Check`` (unary) and ``Watch`` (server streaming).

Each case runs for the three pairs of tests/interop/test_streaming_interop.py over an abstract
socket.
"""

from __future__ import annotations

import importlib
from concurrent import futures
from typing import Any, Iterator, Tuple

import pytest

import minigrpc
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")


def _import_or_skip(name: str) -> Any:
    """Import a grpcio add-on; skip when it is absent or does not load with this protobuf
    (the ``oldest`` tox env runs protobuf 3.20, older than what current add-ons are built for).
    """
    try:
        return importlib.import_module(name)
    except Exception as exc:  # ImportError, or protobuf's runtime version check
        pytest.skip(f"{name} is unavailable here: {exc}")


pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

PAIRS = [("minigrpc", "grpcio"), ("grpcio", "minigrpc"), ("minigrpc", "minigrpc")]


def module_of(library: str) -> Any:
    return minigrpc if library == "minigrpc" else grpc


@pytest.fixture(params=PAIRS, ids=["-".join(pair) for pair in PAIRS])
def pair(request: pytest.FixtureRequest) -> Tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


def serve(library: str, register: Any) -> Tuple[Any, str]:
    """A started server of ``library`` on a fresh abstract socket, set up by ``register``."""
    module = module_of(library)
    server = module.server(futures.ThreadPoolExecutor(max_workers=4))
    register(server)
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    return server, address


# -- grpcio-status ----------------------------------------------------------------------------


@pytest.fixture
def rich_error_call(pair: Tuple[str, str]) -> Iterator[Tuple[Any, Any]]:
    """``(api, call)``: a unary callable whose handler aborts with a rich status."""
    rpc_status = _import_or_skip("grpc_status.rpc_status")
    status_pb2 = _import_or_skip("google.rpc.status_pb2")
    error_details_pb2 = _import_or_skip("google.rpc.error_details_pb2")
    any_pb2 = _import_or_skip("google.protobuf.any_pb2")
    client_library, server_library = pair
    server_module = module_of(server_library)

    def fail(request: bytes, context: Any) -> bytes:
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.BadRequest.FieldViolation(field="name", description="empty"))
        status = status_pb2.Status(code=3, message="bad request", details=[detail])
        context.abort_with_status(rpc_status.to_status(status))
        raise AssertionError("abort_with_status returned")

    server, address = serve(
        server_library,
        lambda s: s.add_generic_rpc_handlers(
            [
                server_module.method_handlers_generic_handler(
                    "test.Rich", {"Fail": server_module.unary_unary_rpc_method_handler(fail)}
                )
            ]
        ),
    )
    api = module_of(client_library)
    try:
        with api.insecure_channel(address) as channel:
            yield api, channel.unary_unary("/test.Rich/Fail")
    finally:
        server.stop(None).wait(30)


def test_abort_with_status_reaches_from_call(rich_error_call: Tuple[Any, Any]) -> None:
    rpc_status = importlib.import_module("grpc_status.rpc_status")
    error_details_pb2 = importlib.import_module("google.rpc.error_details_pb2")
    api, call = rich_error_call
    with pytest.raises(api.RpcError) as caught:
        call(b"", timeout=10)
    assert caught.value.code() is api.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "bad request"
    status = rpc_status.from_call(caught.value)
    assert status is not None and status.code == 3 and status.message == "bad request"
    violation = error_details_pb2.BadRequest.FieldViolation()
    assert status.details[0].Unpack(violation)
    assert (violation.field, violation.description) == ("name", "empty")


def test_status_details_key_is_still_reserved_in_initial_metadata() -> None:
    """Only trailers may carry it: in request or response headers it stays reserved."""
    with pytest.raises(ValueError, match="reserved"):
        minigrpc.protocol.wire.encode_metadata([("grpc-status-details-bin", b"x")])


# -- grpcio-health-checking -------------------------------------------------------------------


@pytest.fixture
def health(pair: Tuple[str, str]) -> Iterator[Tuple[Any, Any, Any]]:
    """``(health_pb2, servicer, stub)`` with grpc_health's servicer and generated stub."""
    health_module = _import_or_skip("grpc_health.v1.health")
    health_pb2 = _import_or_skip("grpc_health.v1.health_pb2")
    health_pb2_grpc = _import_or_skip("grpc_health.v1.health_pb2_grpc")
    client_library, server_library = pair
    servicer = health_module.HealthServicer()
    servicer.set("svc", health_pb2.HealthCheckResponse.SERVING)
    server, address = serve(
        server_library, lambda s: health_pb2_grpc.add_HealthServicer_to_server(servicer, s)
    )
    try:
        with module_of(client_library).insecure_channel(address) as channel:
            yield health_pb2, servicer, health_pb2_grpc.HealthStub(channel)
    finally:
        servicer.enter_graceful_shutdown()
        server.stop(None).wait(30)


def test_health_check(health: Tuple[Any, Any, Any], pair: Tuple[str, str]) -> None:
    health_pb2, _, stub = health
    api = module_of(pair[0])
    response = stub.Check(health_pb2.HealthCheckRequest(service="svc"), timeout=10)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(api.RpcError) as caught:
        stub.Check(health_pb2.HealthCheckRequest(service="unknown"), timeout=10)
    assert caught.value.code() is api.StatusCode.NOT_FOUND


def test_health_watch_streams_each_change(health: Tuple[Any, Any, Any]) -> None:
    health_pb2, servicer, stub = health
    watch = stub.Watch(health_pb2.HealthCheckRequest(service="svc"), timeout=30)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    servicer.set("svc", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
