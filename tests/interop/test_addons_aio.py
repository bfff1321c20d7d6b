"""minigrpc's add-ons on asyncio servers (``grpc.aio``), against grpcio's, both ways.

* minigrpc.aio's server with ``health.aio.HealthServicer`` and ``enable_server_reflection``
  (which sees an asyncio server and serves async generators), called by grpcio's asyncio
  channel through grpcio-health-checking's and grpcio-reflection's generated stubs;
* grpcio's asyncio server with grpcio-health-checking's asyncio servicer, and with minigrpc's
  ``enable_server_reflection``, called by minigrpc.aio's channel through minigrpc's stubs.

Server and client share one event loop per test (``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import importlib
from concurrent import futures
from typing import Any, Awaitable, Callable

import pytest

from minigrpc import aio
from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
from minigrpc.reflection import servicer as reflection_servicer
from minigrpc.reflection.v1 import reflection as v1
from minigrpc.reflection.v1alpha import reflection as v1alpha
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")
grpc_aio = pytest.importorskip("grpc.aio")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HEALTH = "grpc.health.v1.Health"


def _addon(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # absent, or refuses this protobuf (the ``oldest`` env)
        pytest.skip(f"{name} is unavailable here: {exc}")


def _run(
    make_server: Callable[[], Any],
    register: Callable[[Any], None],
    body: Callable[[str], Awaitable[None]],
) -> None:
    async def main() -> None:
        server = make_server()
        register(server)
        address = listen_address("unix-abstract", None)
        server.add_insecure_port(address)
        await server.start()
        try:
            await body(address)
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_grpcio_aio_client_against_minigrpc_aio_health_and_reflection() -> None:
    grpcio_pb2 = _addon("grpc_health.v1.health_pb2")
    grpcio_pb2_grpc = _addon("grpc_health.v1.health_pb2_grpc")
    reflection_pb2 = _addon("grpc_reflection.v1alpha.reflection_pb2")
    reflection_pb2_grpc = _addon("grpc_reflection.v1alpha.reflection_pb2_grpc")
    servicer = health.aio.HealthServicer()

    def register(server: Any) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        # Both kinds of asyncio server take a blocking generator too (in a thread): what tells
        # them apart is which servicer enable_server_reflection chose.
        assert reflection_servicer._is_asyncio_server(server)
        v1alpha.enable_server_reflection((HEALTH, v1alpha.SERVICE_NAME), server)

    async def body(address: str) -> None:
        await servicer.set("svc", SERVING)
        async with grpc_aio.insecure_channel(address) as channel:
            stub = grpcio_pb2_grpc.HealthStub(channel)
            request = grpcio_pb2.HealthCheckRequest
            assert (await stub.Check(request(service="svc"), timeout=10)).status == SERVING
            with pytest.raises(grpc_aio.AioRpcError) as caught:
                await stub.Check(request(service="unknown"), timeout=10)
            assert caught.value.code() is grpc.StatusCode.NOT_FOUND
            watch = stub.Watch(request(service="svc"), timeout=30)
            assert (await watch.read()).status == SERVING
            await servicer.set("svc", SERVING)  # no change: nothing is sent
            await servicer.set("svc", NOT_SERVING)
            assert (await watch.read()).status == NOT_SERVING
            await servicer.enter_graceful_shutdown()
            assert await watch.read() is grpc_aio.EOF
            assert await watch.code() is grpc.StatusCode.OK

            reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = reflect.ServerReflectionInfo(
                iter(
                    [
                        reflection_pb2.ServerReflectionRequest(list_services=""),
                        reflection_pb2.ServerReflectionRequest(file_containing_symbol=HEALTH),
                    ]
                ),
                timeout=10,
            )
            listed, files = [answer async for answer in answers]
            assert [s.name for s in listed.list_services_response.service] == [
                HEALTH,
                v1.SERVICE_NAME,
                v1alpha.SERVICE_NAME,
            ]
            sent = files.file_descriptor_response.file_descriptor_proto
            assert sent[0] == health_pb2.DESCRIPTOR.serialized_pb

    _run(aio.server, register, body)


def test_minigrpc_aio_client_against_grpcio_aio_health_and_minigrpc_reflection() -> None:
    grpcio_health = _addon("grpc_health.v1.health")
    grpcio_pb2_grpc = _addon("grpc_health.v1.health_pb2_grpc")
    holder: dict = {}

    def register(server: Any) -> None:
        holder["servicer"] = grpcio_health.aio.HealthServicer()
        grpcio_pb2_grpc.add_HealthServicer_to_server(holder["servicer"], server)
        # minigrpc's reflection on grpcio's asyncio server: it must choose the async servicer.
        assert reflection_servicer._is_asyncio_server(server)
        v1.enable_server_reflection((HEALTH, v1.SERVICE_NAME), server)

    async def body(address: str) -> None:
        servicer = holder["servicer"]
        await servicer.set("svc", SERVING)
        async with aio.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest
            assert (await stub.Check(request(service="svc"), timeout=10)).status == SERVING
            watch = stub.Watch(request(service="svc"), timeout=30)
            assert (await watch.read()).status == SERVING
            await servicer.set("svc", NOT_SERVING)
            assert (await watch.read()).status == NOT_SERVING
            watch.cancel()

            messages = v1.reflection_pb2
            reflect = v1.reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = reflect.ServerReflectionInfo(
                iter(
                    [
                        messages.ServerReflectionRequest(list_services=""),
                        messages.ServerReflectionRequest(file_containing_symbol=f"{HEALTH}.Watch"),
                    ]
                ),
                timeout=10,
            )
            listed, files = [answer async for answer in answers]
            assert HEALTH in [s.name for s in listed.list_services_response.service]
            assert files.file_descriptor_response.file_descriptor_proto

    _run(grpc_aio.server, register, body)


def test_blocking_servers_get_the_blocking_reflection_servicer() -> None:
    import minigrpc

    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        for module in (minigrpc, grpc):
            assert not reflection_servicer._is_asyncio_server(module.server(pool))
