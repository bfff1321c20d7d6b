"""The plugin against agents: the reference agent, faulty gRPC servers and broken HTTP/2 peers.

The plugin always runs as a subprocess, exactly as libcni runs it (CNI SPEC.md, "Section 2:
Execution Protocol").  The
agents are real servers: the reference servicer (:mod:`cni_client.agent`) served in this
process on minigrpc *and* on grpcio (``server_kind``), so every mapping case is also proven
against grpc-core; the broken HTTP/2 peers of :func:`tests.support.scripted_peer.fault_server`
for what no gRPC server produces; and ``python -m cni_client.agent`` itself as a subprocess.

After every run, stdout holds the result or exactly one CNI error JSON, and the exit status
matches (:func:`tests.support.cni.one_outcome`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from cni_client import agent, client, cni_pb2
from tests.support.cni import (
    PLUGIN_PYTHON,
    REPO_ROOT,
    AgentProcess,
    InProcessAgent,
    PluginRun,
    TempDirs,
    conf,
    error_json,
    one_outcome,
    plugin_env,
    pod_env,
    run_plugin,
)
from tests.support.scripted_peer import ScriptedServer, fault_server

pytestmark = pytest.mark.timeout(120)

SERVER_KINDS = ("minigrpc", "grpcio")
ADD_CONF = conf("0.3.0")


@pytest.fixture
def dirs() -> Iterator[TempDirs]:
    created = TempDirs()
    yield created
    created.cleanup()


@pytest.fixture(params=SERVER_KINDS)
def server_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "grpcio":
        pytest.importorskip("grpc")
    return str(request.param)


ServeFn = Callable[..., str]


@pytest.fixture
def serve(dirs: TempDirs, server_kind: str) -> Iterator[ServeFn]:
    """``serve(servicer, **kw) -> socket path``: serve in-process on the current kind."""
    started: List[InProcessAgent] = []

    def start(servicer: Any, **kwargs: Any) -> str:
        path = os.path.join(dirs.new(), "cni.sock")
        started.append(InProcessAgent(server_kind, servicer, path, **kwargs))
        return path

    yield start
    for server in started:
        server.stop()


def plugin(command: str, stdin: bytes, socket_path: str, **env: Any) -> PluginRun:
    run = run_plugin(pod_env(command, **env), stdin, socket_path=socket_path)
    one_outcome(run)
    return run


def reference_servicer(pools: Optional[List[str]] = None) -> agent.CniServicer:
    return agent.CniServicer(pools or ["10.10.1.0/24"], cni_pb2)


# --------------------------------------------------------------------------------------------
# Happy path, on both servers.

def test_add_check_del_lifecycle(serve: ServeFn) -> None:
    servicer = reference_servicer()
    path = serve(servicer)
    stdin = conf("1.0.0")

    first = plugin("ADD", stdin, path, container_id="pod1")
    assert first.returncode == 0
    result = json.loads(first.stdout)
    assert result["ips"] == [{"address": "10.10.1.2/24", "gateway": "10.10.1.1", "interface": 1}]
    assert result["interfaces"][1]["sandbox"] == "/host/var/run/netns/cni-1"
    assert not first.stdout.endswith(b"\n")

    again = plugin("ADD", stdin, path, container_id="pod1")
    assert again.stdout == first.stdout  # idempotent per (container ID, ifname)
    second = plugin("ADD", stdin, path, container_id="pod2")
    assert json.loads(second.stdout)["ips"][0]["address"] == "10.10.1.3/24"

    with_prev = conf("1.0.0", prevResult=result)
    assert plugin("CHECK", with_prev, path, container_id="pod1")[:2] == (0, b"")
    for _ in range(2):  # DEL is idempotent
        assert plugin("DEL", stdin, path, container_id="pod1")[:2] == (0, b"")
    gone = plugin("CHECK", with_prev, path, container_id="pod1")
    assert (gone.returncode, json.loads(gone.stdout)["code"]) == (1, 103)
    assert [call for call, _ in servicer.calls] == ["CmdAdd"] * 3 + ["CmdCheck", "CmdDel",
                                                                     "CmdDel", "CmdCheck"]


def test_request_carries_the_invocation_verbatim(serve: ServeFn) -> None:
    seen: List[Any] = []

    class Recorder:
        def CmdAdd(self, request: Any, context: Any) -> Any:
            seen.append(request)
            return cni_pb2.CniCmdResponse(cni_result=b"\x00raw\xffresult\n\n")

        CmdCheck = CmdDel = CmdAdd

    path = serve(Recorder())
    stdin = b'{"name":"antrea","cniVersion":"0.3.0",  "x":"\xc3\xa9"}  \n'
    run = plugin("ADD", stdin, path, container_id="c-1", netns="/var/run/netns/n",
                 ifname="eth1", path="/opt/cni/bin:/usr/lib/cni", args="A=1;B=2")
    assert (run.returncode, run.stdout) == (0, b"\x00raw\xffresult\n\n")  # verbatim
    (request,) = seen
    args = request.cni_args
    assert (args.container_id, args.netns, args.ifname, args.args, args.path) == (
        "c-1", "/var/run/netns/n", "eth1", "A=1;B=2", "/opt/cni/bin:/usr/lib/cni")
    assert args.network_configuration == stdin


@pytest.mark.parametrize("version", ["0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
def test_add_result_shape_per_version(serve: ServeFn, version: str) -> None:
    path = serve(reference_servicer())
    run = plugin("ADD", conf(version), path)
    assert run.returncode == 0
    pairs = json.loads(run.stdout, object_pairs_hook=lambda items: items)
    keys = [key for key, _ in pairs]
    # Go's MarshalIndent layout: 4 spaces, ": ", no trailing newline.
    assert run.stdout == json.dumps(json.loads(run.stdout, object_pairs_hook=dict),
                                    indent=4).encode()
    if version == "0.2.0":
        assert keys == ["cniVersion", "ip4", "dns"]
    elif version.startswith("0."):
        assert keys == ["cniVersion", "interfaces", "ips", "routes", "dns"]
        ip = dict(pairs)["ips"][0]
        assert [key for key, _ in ip] == ["version", "interface", "address", "gateway"]
    else:
        assert keys == ["cniVersion", "interfaces", "ips", "routes"]
        ip = dict(pairs)["ips"][0]
        assert [key for key, _ in ip] == ["address", "gateway", "interface"]
    assert dict(pairs)["cniVersion"] == version


def test_pool_exhaustion_is_101_and_del_frees(serve: ServeFn) -> None:
    path = serve(reference_servicer(["10.20.0.0/30"]))
    assert plugin("ADD", ADD_CONF, path, container_id="a").returncode == 0
    full = plugin("ADD", ADD_CONF, path, container_id="b")
    assert full.stdout == error_json(101, "failed to allocate for range 0: no IP addresses"
                                          " available in range set: 10.20.0.2-10.20.0.2")
    assert plugin("DEL", ADD_CONF, path, container_id="a").returncode == 0
    assert plugin("ADD", ADD_CONF, path, container_id="b").returncode == 0


AGENT_VALIDATION = [
    ("no-version", conf(None), "",
     error_json(1, "Unsupported CNI version [], supported versions [0.1.0 0.2.0 0.3.0 0.3.1"
                   " 0.4.0 1.0.0 1.1.0]")),
    ("wrong-type", conf("0.3.0", type="bridge"), "",
     error_json(2, "Network configuration does not support type=bridge")),
    ("wrong-ipam", conf("0.3.0", ipam={"type": "dhcp"}), "",
     error_json(2, "Network configuration does not support ipam/type=dhcp")),
    ("unknown-cni-arg", ADD_CONF, "K8S_POD_NAME=x;FOO=bar",
     error_json(6, "Failed to decode network config")),
    ("malformed-cni-arg", ADD_CONF, "IgnoreUnknown=1;junk",
     error_json(6, "Failed to decode network config")),
    ("check-without-prev-result", conf("0.4.0"), "",
     error_json(2, "Network configuration does not support prevResult=")),
]


@pytest.mark.parametrize(("stdin", "cni_args", "expected"),
                         [row[1:] for row in AGENT_VALIDATION],
                         ids=[row[0] for row in AGENT_VALIDATION])
def test_agent_validation_codes(serve: ServeFn, stdin: bytes, cni_args: str,
                                expected: bytes) -> None:
    path = serve(reference_servicer())
    command = "CHECK" if expected.count(b"prevResult") else "ADD"
    run = plugin(command, stdin, path, args=cni_args)
    assert (run.returncode, run.stdout) == (1, expected)


# --------------------------------------------------------------------------------------------
# gRPC failures: RPC_FAILURE_TO_CNI, read from client.py (the one place it is written).

STATUS_MESSAGE = "agent says: <bad> & 100% \u263a\n\ttabbed"


class FailingServicer:
    def __init__(self, code: Any, message: str = STATUS_MESSAGE) -> None:
        self.code = code
        self.message = message

    def CmdAdd(self, request: Any, context: Any) -> Any:
        context.abort(self.code, self.message)

    CmdCheck = CmdDel = CmdAdd


def expected_rpc_failure(go_name: str, code_name: str, message: str) -> bytes:
    text = f"rpc error: code = {go_name} desc = {message}"
    cni_code, msg, details = client.RPC_FAILURE_TO_CNI.get(code_name,
                                                          client.RPC_FAILURE_TO_CNI[None])
    return error_json(cni_code, msg.replace("{error}", text), details.replace("{error}", text))


def _go_name(code_name: str) -> str:
    import minigrpc

    return str(minigrpc.StatusCode[code_name].go_name)


NON_OK_CODES = ["CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"]


@pytest.mark.parametrize("code_name", NON_OK_CODES)
def test_each_grpc_status_code(serve: ServeFn, server_kind: str, code_name: str) -> None:
    if server_kind == "grpcio":
        import grpc as grpc_module
    else:
        import minigrpc as grpc_module  # type: ignore[no-redef]
    path = serve(FailingServicer(grpc_module.StatusCode[code_name]))
    for command in ("ADD", "CHECK", "DEL"):
        run = plugin(command, conf("0.4.0"), path)
        assert run.stdout == expected_rpc_failure(_go_name(code_name), code_name,
                                                  STATUS_MESSAGE), command


def test_mapping_table_covers_the_contract() -> None:
    """The plugin's gRPC-to-CNI mapping (cni_client.client.RPC_FAILURE_TO_CNI), as data: 202 / 11 /
    11 / 201 for everything else."""
    table = client.RPC_FAILURE_TO_CNI
    assert table["UNIMPLEMENTED"][0] == 202
    assert table["UNIMPLEMENTED"][1] == (
        "incompatible CNI API version between client (antrea-cni) and server (antrea-agent),"
        " client is using version 1.0.0-beta.1")
    assert table["UNIMPLEMENTED"][2] == "service or method unimplemented by gRPC server: {error}"
    assert table["UNAVAILABLE"] == table["DEADLINE_EXCEEDED"] == (11, "{error}", "")
    assert table[None] == (201, "{error}", "")
    assert set(table) == {"UNIMPLEMENTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", None}


@pytest.mark.parametrize("unknown", ["service", "method"])
def test_real_unimplemented_is_202(serve: ServeFn, unknown: str) -> None:
    """An agent of another API version: the server itself answers UNIMPLEMENTED."""
    if unknown == "service":
        path = serve(reference_servicer(),
                     service="antrea_io.antrea.pkg.apis.cni.v1beta2.Cni")
    else:
        path = serve(reference_servicer(), methods=("CmdAdd",))
    run = plugin("DEL", ADD_CONF, path)
    error = one_outcome(run)
    assert isinstance(error, dict)
    assert error["code"] == 202
    assert error["msg"] == client.RPC_FAILURE_TO_CNI["UNIMPLEMENTED"][1]
    assert error["details"].startswith("service or method unimplemented by gRPC server: rpc"
                                       " error: code = Unimplemented desc = ")


# --------------------------------------------------------------------------------------------
# CNI errors in the response: each ErrorCode, on both servers.

class FixedResponseServicer:
    def __init__(self, response: Any) -> None:
        self.response = response

    def CmdAdd(self, request: Any, context: Any) -> Any:
        return self.response

    CmdCheck = CmdDel = CmdAdd


ERROR_CODES = [value.number for value in cni_pb2.ErrorCode.DESCRIPTOR.values]


@pytest.mark.parametrize("code", ERROR_CODES)
def test_each_error_code(serve: ServeFn, code: int) -> None:
    """``response.error`` wins: its code and message; the details (Any) are dropped."""
    from google.protobuf import any_pb2

    detail = any_pb2.Any(type_url="type.googleapis.com/x", value=b"\x01")
    response = cni_pb2.CniCmdResponse(
        cni_result=b"ignored",
        error=cni_pb2.Error(code=code, message=f"failure <{code}>", details=[detail]))
    path = serve(FixedResponseServicer(response))
    run = plugin("ADD", ADD_CONF, path)
    assert (run.returncode, run.stdout) == (1, error_json(code, f"failure <{code}>"))


def test_present_but_empty_error_is_an_error(serve: ServeFn) -> None:
    """``error`` present even if empty (as antrea's Go plugin): code 0, empty msg, exit 1."""
    path = serve(FixedResponseServicer(cni_pb2.CniCmdResponse(error=cni_pb2.Error())))
    run = plugin("ADD", ADD_CONF, path)
    assert (run.returncode, run.stdout) == (1, b'{\n    "code": 0,\n    "msg": ""\n}')


def test_empty_result_is_success(serve: ServeFn) -> None:
    path = serve(FixedResponseServicer(cni_pb2.CniCmdResponse()))
    assert plugin("ADD", ADD_CONF, path)[:2] == (0, b"")


def test_unknown_enum_value_passes_through(serve: ServeFn) -> None:
    path = serve(FixedResponseServicer(cni_pb2.CniCmdResponse(
        error=cni_pb2.Error(code=777, message="new code"))))
    assert plugin("ADD", ADD_CONF, path).stdout == error_json(777, "new code")


# --------------------------------------------------------------------------------------------
# Connection failures (what antrea's Go plugin prints for them).

def test_missing_socket_is_11(dirs: TempDirs) -> None:
    path = os.path.join(dirs.new(), "cni.sock")
    run = plugin("ADD", ADD_CONF, path)
    assert run.stdout == error_json(
        11, "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error"
            f" while dialing: dial unix {path}: connect: no such file or directory\"")


def test_stale_socket_is_11(dirs: TempDirs) -> None:
    """The agent died and left its socket file: connection refused."""
    path = os.path.join(dirs.new(), "cni.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    run = plugin("DEL", ADD_CONF, path)
    assert run.stdout == error_json(
        11, "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error"
            f" while dialing: dial unix {path}: connect: connection refused\"")


@pytest.fixture
def raw_server(dirs: TempDirs) -> Iterator[Callable[..., str]]:
    servers: List[ScriptedServer] = []

    def start(fault: str, **kwargs: Any) -> str:
        path = os.path.join(dirs.new(), "cni.sock")
        servers.append(fault_server(path, fault, **kwargs))
        return path

    yield start
    for server in servers:
        server.close()


RAW_FAULT_ROWS = [
    # (fault, kwargs, CNI code, gRPC code name in the message)
    ("close-mid-response", {}, 11, "Unavailable"),
    ("goaway", {}, 11, "Unavailable"),
    ("garbage", {}, 11, "Unavailable"),
    ("http-503", {}, 11, "Unavailable"),
    ("html", {}, 201, "Unknown"),
    ("no-grpc-status", {}, 201, None),
    ("grpc-status", {"raw_status": "17", "raw_message": "from the future"}, 201, "Code(17)"),
    ("grpc-status", {"raw_status": "12", "raw_message": "old agent"}, 202, "Unimplemented"),
    ("grpc-status", {"raw_status": "4", "raw_message": "slow"}, 11, "DeadlineExceeded"),
    ("grpc-status", {"raw_status": "x", "raw_message": "junk"}, 201, "Unknown"),
]


@pytest.mark.parametrize(("fault", "kwargs", "cni_code", "go_code"), RAW_FAULT_ROWS,
                         ids=[f"{row[0]}-{row[1].get('raw_status', '')}".rstrip("-")
                              for row in RAW_FAULT_ROWS])
def test_broken_http2_peers(raw_server: Callable[..., str], fault: str, kwargs: Dict[str, str],
                            cni_code: int, go_code: Optional[str]) -> None:
    path = raw_server(fault, **kwargs)
    run = plugin("ADD", ADD_CONF, path)
    error = one_outcome(run)
    assert isinstance(error, dict)
    assert error["code"] == cni_code
    text = error["details"] if cni_code == 202 else error["msg"]
    assert text.startswith("rpc error: code = " if cni_code != 202 else
                           "service or method unimplemented by gRPC server: rpc error: code = ")
    if go_code is not None:
        assert f"code = {go_code} desc = " in text
    if "raw_message" in kwargs:
        assert text.endswith(kwargs["raw_message"])


def test_broken_peer_rejects_unknown_faults() -> None:
    """A misspelt fault fails the test that names it instead of serving something else."""
    with pytest.raises(ValueError):
        fault_server("unused", "nonsense")


def _start_plugin(command: str, socket_path: str) -> subprocess.Popen[bytes]:
    """The plugin started like :func:`run_plugin` does, for tests that must kill it."""
    return subprocess.Popen([PLUGIN_PYTHON, "-m", "cni_client"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=plugin_env(pod_env(command), socket_path=socket_path),
                            cwd=REPO_ROOT)


class HangingServicer:
    """Signals when a call arrives, then holds it until released (a wedged agent)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def CmdAdd(self, request: Any, context: Any) -> Any:
        self.arrived.set()
        self.release.wait()
        return cni_pb2.CniCmdResponse(cni_result=b"too late")

    CmdCheck = CmdDel = CmdAdd


def test_hang_is_ended_by_the_runtimes_sigkill(serve: ServeFn) -> None:
    """No deadline (as antrea's Go plugin): the plugin waits until the runtime kills it, and
    leaves stdout empty, so libcni reports ``signal: killed``."""
    servicer = HangingServicer()
    path = serve(servicer)
    process = _start_plugin("ADD", path)
    try:
        assert process.stdin is not None
        process.stdin.write(ADD_CONF)
        process.stdin.close()
        assert servicer.arrived.wait(60)
        assert process.poll() is None
        process.send_signal(signal.SIGKILL)
        assert process.stdout is not None
        stdout = process.stdout.read()
        process.wait(timeout=60)
    finally:
        servicer.release.set()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    assert stdout == b""


# --------------------------------------------------------------------------------------------
# The netns guard (improved on the Go plugin: before the RPC).

@pytest.mark.parametrize(("override", "guarded"), [
    ("", True), ("false", True), ("yes", True), ("0", True),
    ("true", False), ("TRUE", False), ("True", False), ("1", False),
])
def test_same_netns_is_refused_before_the_rpc(serve: ServeFn, override: str,
                                              guarded: bool) -> None:
    servicer = reference_servicer()
    path = serve(servicer)
    env = pod_env("ADD", netns="/proc/self/ns/net")
    run = run_plugin(env, ADD_CONF, socket_path=path,
                     extra_env={"CNI_NETNS_OVERRIDE": override})
    one_outcome(run)
    if guarded:
        assert run.stdout == error_json(
            8, "plugin's netns and netns from CNI_NETNS should not be the same")
        assert servicer.calls == []  # no RPC, so nothing to roll back
    else:
        assert run.returncode == 0
        assert [call for call, _ in servicer.calls] == ["CmdAdd"]


def test_unopenable_netns_skips_the_guard(serve: ServeFn) -> None:
    path = serve(reference_servicer())
    assert plugin("ADD", ADD_CONF, path, netns="/var/run/netns/gone").returncode == 0


def test_check_is_not_guarded(serve: ServeFn) -> None:
    path = serve(FixedResponseServicer(cni_pb2.CniCmdResponse()))
    assert plugin("CHECK", conf("0.4.0"), path, netns="/proc/self/ns/net")[:2] == (0, b"")


# --------------------------------------------------------------------------------------------
# STATUS probes the agent (an improvement on the Go plugin).

STATUS_ENV = {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}


def test_status_with_a_live_agent_is_ok(serve: ServeFn) -> None:
    path = serve(reference_servicer())
    run = run_plugin(STATUS_ENV, conf("1.1.0"), socket_path=path)
    assert (run.returncode, run.stdout) == (0, b"")


@pytest.mark.parametrize("fault", ["garbage", "stale", "silent", "http-503"])
def test_status_without_a_working_agent_is_50(raw_server: Callable[..., str], dirs: TempDirs,
                                              fault: str) -> None:
    if fault == "stale":
        path = os.path.join(dirs.new(), "cni.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)
        stale.close()
    else:
        path = raw_server(fault)
    run = run_plugin(STATUS_ENV, conf("1.1.0"), socket_path=path)
    if fault == "http-503":  # it does speak HTTP/2: the handshake is all STATUS checks
        assert (run.returncode, run.stdout) == (0, b"")
        return
    error = one_outcome(run)
    assert isinstance(error, dict)
    assert (error["code"], error["msg"]) == (50, "antrea-agent is not available")
    assert path in error["details"]
    if fault == "silent":  # accepts, never answers: bounded by client.PROBE_TIMEOUT_SECONDS
        assert "sent no HTTP/2 SETTINGS" in error["details"]


# --------------------------------------------------------------------------------------------
# The reference agent as the real executable (what the demo and tests/cni/test_cni_dist.py use).

@pytest.mark.parametrize("server", SERVER_KINDS)
def test_agent_process_serves_the_plugin(dirs: TempDirs, server: str) -> None:
    if server == "grpcio":
        pytest.importorskip("grpc")
    path = os.path.join(dirs.new(), "run", "cni.sock")
    with AgentProcess(path, ["--pool", "10.30.0.0/24", "--pool", "fd00:30::/64"],
                      server=server):
        assert os.stat(path).st_mode & 0o777 == 0o750
        add = plugin("ADD", conf("0.3.1"), path)
        assert add.returncode == 0
        ips = json.loads(add.stdout)["ips"]
        assert [(ip["version"], ip["address"]) for ip in ips] == [
            ("4", "10.30.0.2/24"), ("6", "fd00:30::2/64")]
        assert plugin("DEL", conf("0.3.1"), path)[:2] == (0, b"")


@pytest.mark.parametrize(("flags", "cni_code"), [
    (["--fail-code", "UNAVAILABLE"], 11),
    (["--fail-code", "12"], 202),
    (["--cni-error", "102", "--cni-error-message", "veth failed"], 102),
    (["--fault", "close-mid-response"], 11),
    (["--fault", "http-503"], 11),
])
def test_agent_process_misbehaves_on_request(dirs: TempDirs, flags: List[str],
                                             cni_code: int) -> None:
    """The reference agent's failure flags, and the broken agent process of the scripted peer
    (``--fault``: answers no gRPC server gives), each seen by the plugin as the CNI code."""
    module = "tests.support.fault_agent" if flags[0] == "--fault" else "cni_client.agent"
    path = os.path.join(dirs.new(), "cni.sock")
    with AgentProcess(path, flags, module=module):
        error = one_outcome(plugin("ADD", ADD_CONF, path))
    assert isinstance(error, dict)
    assert error["code"] == cni_code


def test_agent_process_hang_flag(dirs: TempDirs) -> None:
    """``--hang``: the call arrives (the agent logs it) and is never answered; the plugin
    waits, with no deadline, until the runtime kills it."""
    path = os.path.join(dirs.new(), "cni.sock")
    with AgentProcess(path, ["--hang", "--log-calls"]) as hanging:
        process = _start_plugin("DEL", path)
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(ADD_CONF)
            process.stdin.close()
            assert hanging.process.stdout is not None
            assert hanging.process.stdout.readline() == b"call CmdDel c0ffee\n"
            assert process.poll() is None
            process.kill()
            stdout = process.stdout.read()
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert (process.returncode, stdout) == (-signal.SIGKILL, b"")


# --------------------------------------------------------------------------------------------
# make demo


def test_demo_passes() -> None:
    """``python -m cni_client.demo`` (what ``make demo`` runs) exits 0 and shows every step."""
    import sys

    done = subprocess.run([sys.executable, "-m", "cni_client.demo"], capture_output=True,
                          cwd=REPO_ROOT, timeout=300, check=False)
    output = done.stdout.decode()
    assert done.returncode == 0, output
    assert output.count("-> as expected") == 9
    assert "demo passed" in output


@pytest.mark.parametrize("field", ["CNI_ARGS", "CNI_NETNS", "CNI_PATH"])
def test_invalid_utf8_in_a_proto_string_is_201(dirs: TempDirs, field: str) -> None:
    """proto3 strings must be UTF-8: grpc-go fails the call locally with INTERNAL (201);
    no connection is even attempted (the socket here does not exist)."""
    env = pod_env("ADD")
    env[field] = b"/x\xff"
    name = {"CNI_ARGS": "args", "CNI_NETNS": "netns", "CNI_PATH": "path"}[field]
    run = run_plugin(env, ADD_CONF, socket_path=os.path.join(dirs.new(), "absent.sock"))
    assert run.stdout == error_json(
        201, "rpc error: code = Internal desc = grpc: error while marshaling: proto: field"
             f" antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdArgs.{name} contains invalid UTF-8")
