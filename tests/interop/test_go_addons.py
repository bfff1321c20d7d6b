"""minigrpc's add-ons against grpc-go's health and reflection, both ways.

``tests/go/addons_client`` (built by tests/go_peers.py from Debian's grpc-go) checks health,
watches a service while this test changes its status, and describes a service through server
reflection (v1alpha, the version grpc-go's packaged release speaks) the way grpcurl-style tools
do: every import sent, every method's types defined.  It prints one line per step; the test
reads them as they come and changes the status between two of them.  The other way,
``tests/go/interop_server -addons`` serves grpc-go's health service and reflection to minigrpc's
health stub and reflection client (``ProtoReflectionDescriptorDatabase``).
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent import futures
from typing import Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc import descriptors
from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
from minigrpc.reflection.v1alpha import reflection
from tests.go_peers import GoPeers, GoServer, GoUnavailable, build_go_peers
from tests.interop import test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import listen_address, short_temp_dir

pytestmark = [pytest.mark.timeout(120), pytest.mark.go_peer]

TEST_SERVICE = "grpc.testing.TestService"
HEALTH_SERVICE = "grpc.health.v1.Health"


@pytest.fixture(scope="module")
def go_peers() -> GoPeers:
    try:
        return build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")


@pytest.fixture
def served() -> Iterator[Tuple[str, health.HealthServicer]]:
    servicer = health.HealthServicer()
    servicer.set(TEST_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=4))
    descriptors.add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer())
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    reflection.enable_server_reflection(
        (TEST_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME), server
    )
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    try:
        yield address, servicer
    finally:
        server.stop(None).wait(30)


def test_grpc_go_health_and_reflection_clients(
    go_peers: GoPeers, served: Tuple[str, health.HealthServicer]
) -> None:
    target, servicer = served
    client = subprocess.Popen(
        [
            go_peers.binary("addons_client"),
            "-target", target,
            "-check", "", "-check", TEST_SERVICE, "-check", "no.such.Service",
            "-watch", TEST_SERVICE, "-changes", "1",
            "-describe", TEST_SERVICE,
            "-missing", "no.such.Symbol",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    lines: List[str] = []
    try:
        for line in client.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("WATCH SERVING"):
                servicer.set(TEST_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        stderr = client.stderr.read() if client.stderr else ""
        assert client.wait(timeout=60) == 0, stderr
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    methods = next(line for line in lines if line.startswith("METHODS ")).split(" ")[2]
    files = next(line for line in lines if line.startswith("FILES ")).split(" ")[1].split(",")
    assert [line for line in lines if not line.startswith(("METHODS ", "FILES "))] == [
        "CHECK  SERVING",
        f"CHECK {TEST_SERVICE} SERVING",
        "CHECK no.such.Service NotFound",
        "WATCH SERVING",
        "WATCH NOT_SERVING",
        "SERVICES " + ",".join(
            sorted([TEST_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME,
                    "grpc.reflection.v1.ServerReflection"])
        ),
        f"MISSING no.such.Symbol {minigrpc.StatusCode.NOT_FOUND.number}",
        "DONE",
    ]
    assert "UnaryCall:.grpc.testing.SimpleRequest:.grpc.testing.SimpleResponse" in methods
    assert files[0] == "grpc/testing/test.proto"
    assert {"grpc/testing/messages.proto", "grpc/testing/empty.proto"} <= set(files)


# -- minigrpc's clients against grpc-go's health service and server reflection -----------------


@pytest.fixture(scope="module")
def go_addons_target(go_peers: GoPeers) -> Iterator[str]:
    directory = short_temp_dir()
    server = GoServer(go_peers, [f"unix:{directory}/go.sock"], extra_args=["-addons"])
    server.start()
    try:
        yield server.targets[0]
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_minigrpc_health_stub_against_grpc_go(go_addons_target: str) -> None:
    request = health_pb2.HealthCheckRequest
    with minigrpc.insecure_channel(go_addons_target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        assert stub.Check(request(service=TEST_SERVICE), timeout=10).status == (
            health_pb2.HealthCheckResponse.SERVING
        )
        with pytest.raises(minigrpc.RpcError) as caught:
            stub.Check(request(service="no.such.Service"), timeout=10)
        assert caught.value.code() is minigrpc.StatusCode.NOT_FOUND
        watch = stub.Watch(request(service="grpc.testing.NotServing"), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()


def test_minigrpc_reflection_client_against_grpc_go(go_addons_target: str) -> None:
    """grpc-go 1.33 serves v1alpha only: the database's v1 request is UNIMPLEMENTED, and it
    moves to v1alpha, then builds the interop service's types from what grpc-go sends."""
    from google.protobuf import descriptor_pool

    from minigrpc.reflection.descriptor_database import ProtoReflectionDescriptorDatabase

    with minigrpc.insecure_channel(go_addons_target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = database.get_services()
        assert {TEST_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME} <= set(services)
        pool = descriptor_pool.DescriptorPool(database)
        method = pool.FindServiceByName(TEST_SERVICE).methods_by_name["StreamingInputCall"]
        assert method.input_type.full_name == "grpc.testing.StreamingInputCallRequest"
        assert "payload" in method.input_type.fields_by_name
        with pytest.raises(KeyError):
            database.FindFileContainingSymbol("grpc.testing.NoSuchThing")
