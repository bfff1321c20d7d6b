"""minigrpc.health against grpcio-health-checking, both ways, over real sockets.

* grpcio's channel with grpcio-health-checking's generated ``HealthStub`` against a minigrpc
  server running minigrpc's ``HealthServicer``: Check, List, Watch, graceful shutdown.
* minigrpc's channel with minigrpc's ``HealthStub`` against a grpcio server running
  grpcio-health-checking's own ``HealthServicer``.
* What only minigrpc's servicer promises: a watcher holds no server thread; a Watch ends when the
  server stops; the blocking form for servers without non-blocking handlers.
"""

from __future__ import annotations

import importlib
from concurrent import futures
from typing import Any, Iterator, Tuple

import pytest

import minigrpc
from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


def _addon(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # absent, or refuses this protobuf (the ``oldest`` env)
        pytest.skip(f"{name} is unavailable here: {exc}")


def _minigrpc_server(servicer: Any, workers: int = 4) -> Tuple[Any, str]:
    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    return server, address


@pytest.fixture
def served() -> Iterator[Tuple[Any, Any, Any]]:
    """``(servicer, grpcio HealthStub, grpcio's health_pb2)``: minigrpc's servicer on a minigrpc
    server, called through grpcio-health-checking's generated stub on a grpcio channel."""
    grpcio_pb2_grpc = _addon("grpc_health.v1.health_pb2_grpc")
    grpcio_pb2 = _addon("grpc_health.v1.health_pb2")
    servicer = health.HealthServicer()
    servicer.set("svc", SERVING)
    server, address = _minigrpc_server(servicer)
    try:
        with grpc.insecure_channel(address) as channel:
            yield servicer, grpcio_pb2_grpc.HealthStub(channel), grpcio_pb2
    finally:
        server.stop(None).wait(30)


def test_grpcio_client_checks_minigrpc_servicer(served: Tuple[Any, Any, Any]) -> None:
    _, stub, pb2 = served
    assert stub.Check(pb2.HealthCheckRequest(service=""), timeout=10).status == SERVING
    assert stub.Check(pb2.HealthCheckRequest(service="svc"), timeout=10).status == SERVING
    with pytest.raises(grpc.RpcError) as caught:
        stub.Check(pb2.HealthCheckRequest(service="unknown"), timeout=10)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert "unknown" in caught.value.details()


def test_grpcio_client_lists_minigrpc_servicer(served: Tuple[Any, Any, Any]) -> None:
    servicer, stub, pb2 = served
    if not hasattr(stub, "List"):
        pytest.skip("this grpcio-health-checking has no List")
    servicer.set("other", NOT_SERVING)
    response = stub.List(pb2.HealthListRequest(), timeout=10)
    assert {name: entry.status for name, entry in response.statuses.items()} == {
        "": SERVING,
        "svc": SERVING,
        "other": NOT_SERVING,
    }


def test_grpcio_client_watches_each_change(served: Tuple[Any, Any, Any]) -> None:
    servicer, stub, pb2 = served
    watch = stub.Watch(pb2.HealthCheckRequest(service="svc"), timeout=30)
    assert next(watch).status == SERVING
    servicer.set("svc", SERVING)  # no change: nothing is sent
    servicer.set("svc", NOT_SERVING)
    assert next(watch).status == NOT_SERVING
    servicer.set("svc", SERVING)
    assert next(watch).status == SERVING
    watch.cancel()


def test_watch_of_an_unknown_service_waits_for_it(served: Tuple[Any, Any, Any]) -> None:
    servicer, stub, pb2 = served
    watch = stub.Watch(pb2.HealthCheckRequest(service="later"), timeout=30)
    assert next(watch).status == SERVICE_UNKNOWN
    servicer.set("later", SERVING)
    assert next(watch).status == SERVING
    watch.cancel()


def test_graceful_shutdown_tells_watchers_then_ends_their_streams(
    served: Tuple[Any, Any, Any],
) -> None:
    servicer, stub, pb2 = served
    watch = stub.Watch(pb2.HealthCheckRequest(service="svc"), timeout=30)
    assert next(watch).status == SERVING
    servicer.enter_graceful_shutdown()
    assert [response.status for response in watch] == [NOT_SERVING]
    assert watch.code() is grpc.StatusCode.OK
    servicer.set("svc", SERVING)  # ignored from now on
    assert stub.Check(pb2.HealthCheckRequest(service="svc"), timeout=10).status == NOT_SERVING
    assert stub.Check(pb2.HealthCheckRequest(service=""), timeout=10).status == NOT_SERVING
    late = stub.Watch(pb2.HealthCheckRequest(service="svc"), timeout=30)
    assert [response.status for response in late] == [NOT_SERVING]


def test_minigrpc_client_against_grpcios_servicer() -> None:
    grpcio_health = _addon("grpc_health.v1.health")
    grpcio_pb2 = _addon("grpc_health.v1.health_pb2")
    grpcio_pb2_grpc = _addon("grpc_health.v1.health_pb2_grpc")
    servicer = grpcio_health.HealthServicer()
    servicer.set("svc", grpcio_pb2.HealthCheckResponse.SERVING)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    grpcio_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    try:
        with minigrpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest
            assert stub.Check(request(service="svc"), timeout=10).status == SERVING
            with pytest.raises(minigrpc.RpcError) as caught:
                stub.Check(request(service="unknown"), timeout=10)
            assert caught.value.code() is minigrpc.StatusCode.NOT_FOUND
            watch = stub.Watch(request(service="svc"), timeout=30)
            assert next(watch).status == SERVING
            servicer.set("svc", grpcio_pb2.HealthCheckResponse.NOT_SERVING)
            assert next(watch).status == NOT_SERVING
            watch.cancel()
    finally:
        servicer.enter_graceful_shutdown()
        server.stop(None).wait(30)


def test_watchers_hold_no_server_thread() -> None:
    """Six watch streams on a server with two handler threads, and Check still answers: the
    non-blocking Watch returns at once and changes are pushed from ``set``'s thread."""
    servicer = health.HealthServicer()
    server, address = _minigrpc_server(servicer, workers=2)
    try:
        with minigrpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest(service="")
            watches = [stub.Watch(request, timeout=30) for _ in range(6)]
            assert [next(watch).status for watch in watches] == [SERVING] * 6
            assert stub.Check(request, timeout=10).status == SERVING
            servicer.set("", NOT_SERVING)
            assert [next(watch).status for watch in watches] == [NOT_SERVING] * 6
            for watch in watches:
                watch.cancel()
    finally:
        server.stop(None).wait(30)


@pytest.mark.parametrize("non_blocking", [True, False], ids=["non-blocking", "blocking"])
def test_a_watch_ends_when_the_server_stops(non_blocking: bool) -> None:
    servicer = health.HealthServicer(experimental_non_blocking=non_blocking)
    server, address = _minigrpc_server(servicer)
    with minigrpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == SERVING
        servicer.set("", NOT_SERVING)
        assert next(watch).status == NOT_SERVING
        server.stop(None).wait(30)
        with pytest.raises(minigrpc.RpcError) as caught:
            next(watch)
        assert caught.value.code() in (
            minigrpc.StatusCode.CANCELLED,
            minigrpc.StatusCode.UNAVAILABLE,
        )


def test_the_non_blocking_attributes_belong_to_each_instance() -> None:
    pool = futures.ThreadPoolExecutor(max_workers=1)
    try:
        first = health.HealthServicer(experimental_non_blocking=False)
        second = health.HealthServicer(experimental_thread_pool=pool)
        assert first.Watch.experimental_non_blocking is False
        assert second.Watch.experimental_non_blocking is True
        assert second.Watch.experimental_thread_pool is pool
        assert first.Watch.experimental_thread_pool is None
    finally:
        pool.shutdown()


@pytest.mark.parametrize("servicer_kind", ["HealthServicer", "base"])
def test_minigrpc_servicers_answer_in_grpcios_codes_on_a_grpcio_server(servicer_kind: str) -> None:
    """grpcio's servers take only grpcio's StatusCode members: NOT_FOUND for an unknown
    service (and UNIMPLEMENTED from the generated-style base class) must not become UNKNOWN."""
    servicer = (
        health.HealthServicer() if servicer_kind != "base" else health_pb2_grpc.HealthServicer()
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    try:
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Check(health_pb2.HealthCheckRequest(service="unknown"), timeout=10)
    finally:
        server.stop(None).wait(30)
    expected = "NOT_FOUND" if servicer_kind != "base" else "UNIMPLEMENTED"
    assert caught.value.code() is grpc.StatusCode[expected]
