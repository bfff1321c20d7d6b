"""Helpers for the antrea-cni tests: run the plugin as libcni does, run agents, expected bytes.

* :func:`run_plugin` executes ``python -m cni_client`` with no arguments, an environment holding
  all six ``CNI_*`` variables (empty unless given, as libcni always sets them; CNI SPEC.md,
  "Section 2: Execution Protocol")
  and the given stdin bytes, and returns exit status, stdout and stderr.
* :class:`AgentProcess` starts ``python -m cni_client.agent`` (the reference agent, on minigrpc
  or grpcio) as a subprocess and waits for its readiness line, never sleeping.
* :func:`error_json` builds an expected error JSON the way the contract describes it (Python's
  json.dumps plus Go's extra escapes, Go's encoding/json), independently of the plugin's own
  encoder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CNI_VARS = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")

#: The shipped conflist's stdin (CNI SPEC.md, "Section 2: Execution Protocol").
SHIPPED_STDIN = (b'{"cniVersion":"0.3.0","ipam":{"type":"host-local"},"name":"antrea",'
                 b'"type":"antrea"}')

#: The VERSION reply (observed from the Go plugin).
VERSION_BYTES = (b'{"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1",'
                 b'"0.4.0","1.0.0","1.1.0"]}\n')

EnvValue = Union[str, bytes]

#: The interpreter that runs the plugin; ``CNI_TEST_PLUGIN_PYTHON`` picks another one, e.g. to
#: check the shell on every supported Python from one pytest run.
PLUGIN_PYTHON = os.environ.get("CNI_TEST_PLUGIN_PYTHON") or sys.executable

#: Seconds a plugin run may take before the test fails (it is a bug, not slowness).
PLUGIN_TIMEOUT = 60.0


class PluginRun(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: bytes


def conf(version: Optional[str] = "0.3.0", **extra: object) -> bytes:
    """A compact network config as libcni injects it (sorted keys)."""
    body: Dict[str, object] = {"ipam": {"type": "host-local"}, "name": "antrea", "type": "antrea"}
    if version is not None:
        body["cniVersion"] = version
    body.update(extra)
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def plugin_env(cni: Mapping[str, EnvValue], extra: Optional[Mapping[str, EnvValue]] = None,
               socket_path: Optional[str] = None) -> Dict[EnvValue, EnvValue]:
    """A runtime-like environment: PATH, the import path, all six CNI_ variables."""
    env: Dict[EnvValue, EnvValue] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                     "PYTHONPATH": REPO_ROOT}
    for name in CNI_VARS:
        env[name] = ""
    env.update(cni)
    if socket_path is not None:
        env["ANTREA_CNI_SOCKET"] = socket_path
    if extra:
        env.update(extra)
    return env


def run_plugin(cni: Mapping[str, EnvValue], stdin: bytes = b"", *,
               socket_path: Optional[str] = None,
               extra_env: Optional[Mapping[str, EnvValue]] = None,
               command: Optional[Sequence[str]] = None, cwd: Optional[str] = None,
               timeout: float = PLUGIN_TIMEOUT) -> PluginRun:
    """Exec the plugin like libcni: no arguments, no shell, env + stdin (CNI SPEC.md, "Section 2:
    Execution Protocol")."""
    argv = list(command) if command else [PLUGIN_PYTHON, "-m", "cni_client"]
    done = subprocess.run(argv, input=stdin, env=plugin_env(cni, extra_env, socket_path),
                          capture_output=True, cwd=cwd or REPO_ROOT, timeout=timeout, check=False)
    return PluginRun(done.returncode, done.stdout, done.stderr)


def pod_env(command: str, container_id: str = "c0ffee", netns: str = "/var/run/netns/cni-1",
            ifname: str = "eth0", path: str = "/opt/cni/bin",
            args: str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web") \
        -> Dict[str, EnvValue]:
    """What containerd sets for a pod (containerd's go-cni)."""
    return {"CNI_COMMAND": command, "CNI_CONTAINERID": container_id, "CNI_NETNS": netns,
            "CNI_IFNAME": ifname, "CNI_ARGS": args, "CNI_PATH": path}


def go_escape(text: str) -> str:
    """Go's encoding/json string body, built the way Go's encoding/json does it."""
    body = json.dumps(text, ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        body = body.replace(char, escaped)
    return body


def error_json(code: int, msg: str, details: str = "") -> bytes:
    """The expected error JSON bytes (4-space indent, code/msg/details, no newline)."""
    lines = ["{", f'    "code": {code},', f'    "msg": {go_escape(msg)}' + ("," if details else "")]
    if details:
        lines.append(f'    "details": {go_escape(details)}')
    lines.append("}")
    return "\n".join(lines).encode()


def short_temp_dir() -> str:
    """A private directory with a short path (unix socket paths are limited to 107 bytes)."""
    return tempfile.mkdtemp(prefix="cni-")


class AgentProcess:
    """``python -m cni_client.agent`` as a subprocess, ready when it printed its socket.

    ``module`` names another agent with the same command line and ready line (the broken one of
    ``tests.support.fault_agent``); ``server`` is only for the reference agent.
    """

    def __init__(self, socket_path: str, flags: Sequence[str] = (),
                 server: str = "minigrpc", module: str = "cni_client.agent") -> None:
        self.socket_path = socket_path
        argv = [sys.executable, "-m", module, "--socket", socket_path, *flags]
        if module == "cni_client.agent":
            argv += ["--server", server]
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        cwd=REPO_ROOT, env=env)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()  # blocks until ready or exited
        if not line.startswith("listening on "):
            self.process.kill()
            _, err = self.process.communicate()
            raise RuntimeError(f"agent did not start: {line!r} {err.decode(errors='replace')}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TempDirs:
    """Temporary directories removed together (fixtures create one per test)."""

    def __init__(self) -> None:
        self.paths: List[str] = []

    def new(self) -> str:
        path = short_temp_dir()
        self.paths.append(path)
        return path

    def cleanup(self) -> None:
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


class InProcessAgent:
    """A Cni servicer served in the test process on minigrpc or grpcio (``kind``).

    The plugin under test still runs as a subprocess; serving in-process lets a test watch
    what the servicer received and build a server per case in milliseconds."""

    def __init__(self, kind: str, servicer: object, socket_path: str,
                 service: Optional[str] = None,
                 methods: Sequence[str] = ("CmdAdd", "CmdCheck", "CmdDel")) -> None:
        from concurrent import futures

        from cni_client import agent, cni_pb2

        if kind == "grpcio":
            import grpc as grpc_module
        else:
            import minigrpc as grpc_module  # type: ignore[no-redef]
        self.kind = kind
        self.socket_path = socket_path
        self.server = grpc_module.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = agent.generic_handler(grpc_module, servicer, cni_pb2,
                                        service or agent.CNI_SERVICE, methods)
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port("unix:" + socket_path)
        self.server.start()

    def stop(self) -> None:
        self.server.stop(None)


def one_outcome(run: PluginRun) -> object:
    """Assert the runtime-visible invariant: exit 0 with the result, or exit 1 with exactly
    one CNI error JSON (code, msg[, details]) on stdout; return the parsed error or None."""
    if run.returncode == 0:
        return None
    assert run.returncode == 1, run
    document = json.loads(run.stdout.decode("utf-8"), object_pairs_hook=list)
    keys = [key for key, _ in document]
    assert keys in (["code", "msg"], ["code", "msg", "details"]), run.stdout
    assert not run.stdout.endswith(b"\n")
    return dict(document)
