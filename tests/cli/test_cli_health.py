"""``minigrpc health``: grpc_health_probe's exit codes and lines, against every peer.

0 SERVING, 1 bad arguments, 2 no connection, 3 the call failed, 4 answered but not SERVING.  The
peers' health services know ``grpc.testing.TestService`` (SERVING), ``grpc.testing.NotServing``
(NOT_SERVING) and the server as a whole (SERVING); anything else is NOT_FOUND, as gRPC's
doc/health-checking.md says.  The two messages the probe codes by hand are checked against
protobuf's own encoding of every status and service name hypothesis can think of.
"""

from __future__ import annotations

import os
import shutil
import socket
from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigrpc.cli import probe
from minigrpc.health.v1 import health_pb2
from tests.cli.conftest import Peer
from tests.cli.support import assert_no_traceback, run_tool
from tests.peers import short_temp_dir
from tests.support.cni import AgentProcess

pytestmark = pytest.mark.timeout(120)


def test_serving(peer: Peer) -> None:
    run = run_tool("health", peer.unix)
    assert (run.code, run.stdout, run.stderr) == (0, "status: SERVING\n", "")
    run = run_tool("health", peer.unix, "grpc.testing.TestService")
    assert (run.code, run.stdout) == (0, "status: SERVING\n")


def test_serving_over_tcp_with_plaintext(peer: Peer) -> None:
    run = run_tool("health", "--plaintext", peer.tcp, "grpc.testing.TestService")
    assert (run.code, run.stdout) == (0, "status: SERVING\n"), run.stderr


def test_not_serving_is_four(peer: Peer) -> None:
    run = run_tool("health", peer.unix, "grpc.testing.NotServing")
    assert (run.code, run.stdout) == (4, 'service unhealthy (responded with "NOT_SERVING")\n')


def test_an_unknown_service_is_an_rpc_failure(peer: Peer) -> None:
    run = run_tool("health", peer.unix, "no.such.Service")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (3, "")
    assert run.stderr.startswith("error: health rpc failed: rpc error: code = NotFound desc = ")


def test_the_frame_trace(peer: Peer) -> None:
    run = run_tool("health", peer.unix, "--trace")
    assert (run.code, run.stdout) == (0, "status: SERVING\n")
    assert ":path: /grpc.health.v1.Health/Check" in run.stderr
    assert "grpc-status: 0  (OK)" in run.stderr
    # The response, HealthCheckResponse{status: SERVING}: field 1, varint 1.
    assert "grpc-message flag=0 length=2 [08 01]" in run.stderr


def test_metadata_goes_with_the_check(peer: Peer) -> None:
    run = run_tool("health", peer.unix, "--trace", "-H", "x-probe: kubelet")
    assert run.code == 0
    assert "x-probe: kubelet" in run.stderr


@pytest.fixture
def agent_socket() -> Iterator[str]:
    """The reference CNI agent: a gRPC server without the health service."""
    directory = short_temp_dir()
    path = os.path.join(directory, "cni.sock")
    with AgentProcess(path):
        yield path
    shutil.rmtree(directory, ignore_errors=True)


def test_a_server_without_health_is_an_rpc_failure(agent_socket: str) -> None:
    run = run_tool("health", f"unix:{agent_socket}")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (3, "")
    assert run.stderr.startswith("error: this server does not implement the grpc health "
                                 "protocol (grpc.health.v1.Health): ")


def test_nothing_listening_is_a_connection_failure() -> None:
    directory = short_temp_dir()
    try:
        path = os.path.join(directory, "none.sock")
        run = run_tool("health", f"unix:{path}")
        assert_no_traceback(run)
        assert (run.code, run.stdout) == (2, "")
        assert run.stderr == (f'error: failed to connect service at "unix:{path}": connection '
                              f'error: desc = "transport: Error while dialing: dial unix {path}: '
                              'connect: no such file or directory"\n')
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        run = run_tool("health", "--plaintext", f"127.0.0.1:{port}")
        assert run.code == 2
        assert "connect: connection refused" in run.stderr


@pytest.fixture
def silent_socket() -> Iterator[str]:
    """A unix socket that takes connections (the kernel's backlog) and never answers."""
    directory = short_temp_dir()
    path = os.path.join(directory, "silent.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    yield path
    listener.close()
    shutil.rmtree(directory, ignore_errors=True)


def test_a_server_that_never_answers_times_out(silent_socket: str) -> None:
    run = run_tool("health", f"unix:{silent_socket}", "--connect-timeout", "0.2",
                   "--max-time", "0.3")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (3, "")
    assert run.stderr == "timeout: health rpc did not complete within 500ms\n"
    assert run.seconds < 10.0


@pytest.mark.parametrize("arguments", [
    [],
    ["--max-time", "0", "unix:/x"],
    ["--max-time", "soon", "unix:/x"],
    ["unix:/x", "a", "b"],
    ["--cacert", "ca.pem", "unix:/x"],
    ["--plaintext", "--cert", "c.pem", "--key", "k.pem", "localhost:1"],
    ["--cert", "c.pem", "localhost:1"],
    ["-H", "no colon", "unix:/x"],
    ["-H", "x-bin: not base64!", "unix:/x"],
    ["--unknown", "unix:/x"],
])
def test_bad_arguments_are_one(arguments: list) -> None:
    run = run_tool("health", *arguments)
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (1, "")
    assert "minigrpc health: error: " in run.stderr


def test_what_is_found_bad_while_running_is_a_bad_argument_too() -> None:
    run = run_tool("health", "--cacert", "/no/such/ca.pem", "localhost:1")
    assert (run.code, run.stderr) == (1, "error: --cacert /no/such/ca.pem: No such file or "
                                         "directory\n")
    run = run_tool("health", "unix:")
    assert (run.code, run.stderr) == (1, "error: invalid target 'unix:': empty socket path\n")


# -- the two messages, coded by hand, against protobuf -----------------------------------------


@given(st.text())
def test_the_request_is_protobufs_encoding(service: str) -> None:
    assert probe.encode_request(service) == health_pb2.HealthCheckRequest(
        service=service).SerializeToString()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(2, 2**29 - 1), st.binary(max_size=300),
       st.booleans())
def test_the_status_is_read_as_protobuf_reads_it(status: int, field: int, unknown: bytes,
                                                 unknown_first: bool) -> None:
    """Any status number, with a field the message does not define before or after it."""
    extra = _varint(field << 3 | 2) + _varint(len(unknown)) + unknown
    known = health_pb2.HealthCheckResponse(status=status).SerializeToString()  # type: ignore[arg-type]
    payload = extra + known if unknown_first else known + extra
    assert probe.decode_status(payload) == status
    assert health_pb2.HealthCheckResponse.FromString(payload).status == status


@pytest.mark.parametrize("payload", [b"\x08", b"\x0a\x05ab", b"\x0b", b"\x00\x01"])
def test_a_malformed_response_is_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        probe.decode_status(payload)


def test_every_kind_of_target() -> None:
    """unix-abstract:NAME and dns:///HOST:PORT, besides unix:PATH and HOST:PORT above."""
    import uuid

    from tests.cli.support import python_server

    server = python_server("minigrpc", [f"unix-abstract:mg-cli-{uuid.uuid4().hex[:12]}",
                                        "127.0.0.1:0"])
    try:
        abstract, tcp = server.targets
        port = tcp.rpartition(":")[2]
        for target in (abstract, f"dns:///localhost:{port}"):
            run = run_tool("health", "--plaintext", target)
            assert (run.code, run.stdout) == (0, "status: SERVING\n"), (target, run.stderr)
            run = run_tool("call", "--plaintext", target, "grpc.testing.TestService/EmptyCall")
            assert (run.code, run.stdout) == (0, "{}\n"), (target, run.stderr)
    finally:
        server.stop()
