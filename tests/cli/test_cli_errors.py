"""Every way ``list``, ``describe`` and ``call`` can fail reads like a tool's, never a
traceback, and exits with a code a script can test (README, "Exit codes"): the gRPC status of
the call or of the reflection lookup (5, 12, 14, 4, ...), 64 for the command line, 65 for the
request data, 69 without protobuf, 130 on Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Iterator, List

import pytest

from tests.cli.conftest import Peer
from tests.cli.support import REPO_ROOT, ServerProcess, assert_no_traceback, run_tool, tool_env
from tests.peers import short_temp_dir
from tests.support.cni import AgentProcess

pytestmark = pytest.mark.timeout(120)

UNARY = "grpc.testing.TestService/UnaryCall"


@pytest.fixture(scope="module")
def minigrpc_peer(_started: object, go_peers_or_none: object) -> Peer:
    return _started.get("minigrpc", go_peers_or_none)  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def nowhere() -> Iterator[str]:
    """A unix target nothing listens on."""
    directory = short_temp_dir()
    yield f"unix:{directory}/none.sock"
    shutil.rmtree(directory, ignore_errors=True)


# -- what the server says ----------------------------------------------------------------------


def test_an_unknown_method_is_not_found(minigrpc_peer: Peer) -> None:
    run = run_tool("call", minigrpc_peer.unix, "grpc.testing.TestService/Nope")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (5, "")
    assert run.stderr == ("minigrpc: service grpc.testing.TestService has no method 'Nope' (its "
                          "methods: EmptyCall, UnaryCall, StreamingOutputCall, "
                          "StreamingInputCall, FullDuplexCall, HalfDuplexCall, "
                          "UnimplementedCall)\n")


def test_an_unknown_service_is_not_found(minigrpc_peer: Peer) -> None:
    for command in (["call", minigrpc_peer.unix, "no.such.Service/Method"],
                    ["list", minigrpc_peer.unix, "no.such.Service"]):
        run = run_tool(*command)
        assert_no_traceback(run)
        assert (run.code, run.stdout) == (5, "")
        assert run.stderr == (f"minigrpc: the server reflection of {minigrpc_peer.unix} knows "
                              "no service 'no.such.Service'\n")


def test_a_server_without_reflection(no_reflection_server: ServerProcess) -> None:
    target = no_reflection_server.targets[0]
    for command in (["list", target], ["describe", target, "grpc.testing.Empty"],
                    ["call", target, UNARY]):
        run = run_tool(*command)
        assert_no_traceback(run)
        assert (run.code, run.stdout) == (12, "")
        assert run.stderr.startswith(f"minigrpc: {target} does not offer server reflection "
                                     "(grpc.reflection.v1 nor v1alpha): give the protos with "
                                     "--protoset FILE or --proto-module NAME\n"
                                     "status: UNIMPLEMENTED (12)")


def test_connection_refused_is_fourteen_also_during_the_reflection_lookup(nowhere: str) -> None:
    run = run_tool("call", nowhere, UNARY)
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (14, "")
    path = nowhere[len("unix:"):]
    assert run.stderr == (f"minigrpc: server reflection on {nowhere} failed\n"
                          'status: UNAVAILABLE (14): connection error: desc = "transport: Error '
                          f'while dialing: dial unix {path}: connect: no such file or '
                          'directory"\n')
    with socket.socket() as sock:  # bound, not listening: refused
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
        run = run_tool("list", "--plaintext", target)
        assert run.code == 14
        assert "connect: connection refused" in run.stderr
        # No reflection needed (the tool carries health's proto): the call itself is refused.
        run = run_tool("call", "--plaintext", target, "grpc.health.v1.Health/Check")
        assert (run.code, run.stdout) == (14, "")
        assert run.stderr.startswith("status: UNAVAILABLE (14): connection error: ")


@pytest.fixture
def silent_socket() -> Iterator[str]:
    directory = short_temp_dir()
    path = os.path.join(directory, "silent.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    yield f"unix:{path}"
    listener.close()
    shutil.rmtree(directory, ignore_errors=True)


def test_the_deadline_also_bounds_the_reflection_lookup(silent_socket: str) -> None:
    run = run_tool("list", silent_socket, "--max-time", "2")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (4, "")
    assert run.stderr.startswith(f"minigrpc: server reflection on {silent_socket} failed\n"
                                 "status: DEADLINE_EXCEEDED (4)")
    assert run.seconds < 10.0


def test_a_non_ok_status_from_the_cni_agent() -> None:
    directory = short_temp_dir()
    try:
        path = os.path.join(directory, "cni.sock")
        with AgentProcess(path, ["--fail-code", "RESOURCE_EXHAUSTED", "--fail-message", "full"]):
            run = run_tool("call", f"unix:{path}",
                           "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni/CmdDel", "-d", "{}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert_no_traceback(run)
    assert (run.code, run.stdout, run.stderr) == (8, "", "status: RESOURCE_EXHAUSTED (8): full\n")


# -- what the user gave -------------------------------------------------------------------------


@pytest.mark.parametrize("data, message", [
    ('{"responseSize": }', "minigrpc: -d: invalid JSON at line 1 column 18: Expecting value"),
    ('{"responseSize": 1,\n "payload": {"body": "AA=="}\n', "minigrpc: -d: invalid JSON at "
     "line 3 column 1: Expecting ',' delimiter"),
    ('{"responseSize": 1, "responseSize": 2}', "minigrpc: -d: the key 'responseSize' is "
     "given twice"),
    ('{"foo": 1}', 'minigrpc: -d: request 1 is not a valid grpc.testing.SimpleRequest: Message '
     'type "grpc.testing.SimpleRequest" has no field named "foo" at "SimpleRequest".'),
    ('{"responseSize": "many"}', "minigrpc: -d: request 1 is not a valid "
     "grpc.testing.SimpleRequest: Failed to parse responseSize field: invalid literal for int()"),
    ('{} {}', "minigrpc: /grpc.testing.TestService/UnaryCall takes one request message; -d gave "
     "2"),
])
def test_bad_request_data_is_65(minigrpc_peer: Peer, data: str, message: str) -> None:
    run = run_tool("call", minigrpc_peer.unix, UNARY, "-d", data)
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (65, "")
    assert run.stderr.startswith(message), run.stderr


def test_bad_json_is_found_before_anything_is_dialled(nowhere: str) -> None:
    run = run_tool("call", nowhere, UNARY, "-d", "{]")
    assert (run.code, run.stderr) == (65, "minigrpc: -d: invalid JSON at line 1 column 2: "
                                          "Expecting property name enclosed in double quotes\n")


def test_bad_json_in_the_middle_of_a_client_stream(minigrpc_peer: Peer) -> None:
    """Read from stdin while the stream runs: the messages before it went out; the error is the
    tool's, not the call's status."""
    run = run_tool("call", minigrpc_peer.unix, "grpc.testing.TestService/StreamingInputCall",
                   "-d", "@", stdin=b'{"payload": {"body": "AA=="}}\n{"payload": [}\n')
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (65, "")
    assert run.stderr == ("minigrpc: stdin: invalid JSON at line 2 column 14: Expecting value\n")


@pytest.mark.parametrize("arguments", [
    [],
    ["frobnicate", "unix:/x"],
    ["call"],
    ["call", "unix:/x"],
    ["call", "unix:/x", "NoService"],
    ["call", "unix:/x", "a.B/c", "--max-time", "-1"],
    ["list", "unix:/x", "a", "b"],
    ["describe", "unix:/x", "--cacert", "x.pem"],
    ["list", "--plaintext", "--cacert", "x.pem", "localhost:1"],
    ["list", "--key", "k.pem", "localhost:1"],
    ["list", "-H", ":bad", "unix:/x"],
    ["list", "--protoset", "/no/such/file.pb", "unix:/x"],
    ["list", "--proto-module", "no_such_module_pb2", "unix:/x"],
    ["list", "--proto-module", "json", "unix:/x"],
    ["call", "--cacert", "/no/such.pem", "localhost:1", "a.B/C"],
])
def test_usage_errors_are_64(arguments: List[str]) -> None:
    run = run_tool(*arguments)
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (64, "")
    assert run.stderr.strip()


def test_help_and_version() -> None:
    run = run_tool("--help")
    assert run.code == 0 and run.stdout.startswith("usage: minigrpc COMMAND")
    for command in ("list", "describe", "call", "health"):
        run = run_tool(command, "--help")
        assert run.code == 0 and f"usage: minigrpc {command}" in run.stdout
    run = run_tool("--version")
    assert run.code == 0 and run.stdout.startswith("minigrpc ")


#: Runs the tool in an interpreter where ``import google.protobuf`` fails.
WITHOUT_PROTOBUF = """
import runpy, sys
class NoProtobuf:
    def find_spec(self, name, path=None, target=None):
        if name == "google.protobuf" or name.startswith("google.protobuf."):
            raise ImportError("protobuf is hidden by this test")
        return None
sys.meta_path.insert(0, NoProtobuf())
sys.argv[0] = "minigrpc"
runpy.run_module("minigrpc", run_name="__main__", alter_sys=True)
"""


def test_without_protobuf_call_is_69_and_health_still_works(minigrpc_peer: Peer) -> None:
    def run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", WITHOUT_PROTOBUF, *arguments],
                              capture_output=True, text=True, cwd=REPO_ROOT, env=tool_env(),
                              timeout=60)

    done = run("call", minigrpc_peer.unix, UNARY)
    assert (done.returncode, done.stdout) == (69, "")
    assert done.stderr == ("minigrpc: 'call' needs protobuf, which this Python lacks (pip "
                           "install protobuf); 'health' does not\n")
    done = run("health", minigrpc_peer.unix)
    assert (done.returncode, done.stdout) == (0, "status: SERVING\n"), done.stderr


def test_ctrl_c_ends_a_waiting_call_quietly(minigrpc_peer: Peer) -> None:
    """The call waits on the server (x-test-sleep-ms); SIGINT once the trace shows its request
    headers went out."""
    process = subprocess.Popen(
        [sys.executable, "-m", "minigrpc", "call", minigrpc_peer.unix, UNARY, "--trace",
         "-H", "x-test-sleep-ms: 60000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT, env=tool_env())
    assert process.stderr is not None and process.stdout is not None
    seen = b""
    deadline = time.monotonic() + 60
    while b":path: /grpc.testing.TestService/UnaryCall" not in seen:
        line = process.stderr.readline()
        assert line and time.monotonic() < deadline, seen.decode()
        seen += line
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    assert process.wait(30) == 130
    assert b"Traceback" not in rest
    assert rest.endswith(b"minigrpc: interrupted\n")
    assert process.stdout.read() == b""
    process.stdout.close()
    process.stderr.close()


def test_a_closed_stdout_ends_the_output_quietly(minigrpc_peer: Peer) -> None:
    """``| head -1``: the reader goes away after the first line."""
    request = '{"responseParameters": [' + ", ".join(['{"size": 10000}'] * 200) + "]}"
    read_end, write_end = os.pipe()
    os.close(read_end)
    process = subprocess.run(
        [sys.executable, "-m", "minigrpc", "call", minigrpc_peer.unix,
         "grpc.testing.TestService/StreamingOutputCall", "-d", request],
        stdout=write_end, stderr=subprocess.PIPE, cwd=REPO_ROOT, env=tool_env(), timeout=60)
    os.close(write_end)
    assert process.returncode == 141
    assert process.stderr == b""


@pytest.fixture
def silent_tcp() -> Iterator[str]:
    """A TCP port that takes connections (the kernel's backlog) and never answers: a TLS
    handshake there never completes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_connect_timeout_bounds_the_wait_for_the_connection(silent_tcp: str) -> None:
    run = run_tool("call", silent_tcp, UNARY, "--connect-timeout", "0.5")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (14, "")
    assert run.stderr == (f"minigrpc: no connection to {silent_tcp} within --connect-timeout "
                          "0.5 s\n")
    assert run.seconds < 10.0
    run = run_tool("health", silent_tcp, "--connect-timeout", "0.5")
    assert (run.code, run.stdout) == (2, "")
    assert run.stderr == f'timeout: failed to connect service "{silent_tcp}" within 500ms\n'


def test_max_time_shorter_than_connect_timeout_is_the_deadline(silent_tcp: str) -> None:
    run = run_tool("list", silent_tcp, "--max-time", "0.4")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (4, "")
    assert run.stderr == (f"minigrpc: no connection to {silent_tcp} before the deadline "
                          "(--max-time 0.4)\n")


def test_authority_is_sent(minigrpc_peer: Peer) -> None:
    run = run_tool("call", minigrpc_peer.unix, "grpc.testing.TestService/EmptyCall",
                   "--authority", "agent.example", "--trace")
    assert run.code == 0, run.stderr
    assert ":authority: agent.example" in run.stderr
    run = run_tool("health", minigrpc_peer.unix, "--authority", "agent.example", "--trace")
    assert (run.code, run.stdout) == (0, "status: SERVING\n")
    assert ":authority: agent.example" in run.stderr
