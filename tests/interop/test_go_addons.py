"""grpc-go's health and reflection clients against minigrpc's add-ons.

``tests/go/addons_client`` (built by tests/go_peers.py from Debian's grpc-go) checks health,
watches a service while this test changes its status, and describes a service through server
reflection (v1alpha, the version grpc-go's packaged release speaks) the way grpcurl-style tools
do: every import sent, every method's types defined.  It prints one line per step; the test
reads them as they come and changes the status between two of them.
"""

from __future__ import annotations

import subprocess
from concurrent import futures
from typing import Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc import descriptors
from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
from minigrpc.reflection.v1alpha import reflection
from tests.go_peers import GoPeers, GoUnavailable, build_go_peers
from tests.interop import test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import listen_address

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
