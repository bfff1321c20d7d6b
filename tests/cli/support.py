"""Running the command line as a user does, and the servers it talks to.

* :func:`run_tool` executes ``python -m minigrpc ...`` in a child process and returns its exit
  code, stdout, stderr and how long it took;
* :class:`ServerProcess` runs a server (``tests/cli/serve.py`` on minigrpc, minigrpc.aio or
  grpcio, or grpc-go's interop server) and waits for its ``READY <target>`` lines on a pipe,
  never sleeping; closing its stdin stops it.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from typing import IO, Dict, List, NamedTuple, Optional, Sequence

from tests.peers import GRPCIO_PYTHON_ENV, grpcio_in_process

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Seconds a tool run may take before the test fails: every run here is meant to end well
#: within it, and the ones that must end early assert a tighter bound themselves.
TOOL_TIMEOUT = 60.0
READY_TIMEOUT = 60.0


class ToolRun(NamedTuple):
    code: int
    stdout: str
    stderr: str
    seconds: float


def tool_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "MINIGRPC_TRACE"}
    env["PYTHONPATH"] = REPO_ROOT
    env.update(extra or {})
    return env


def run_tool(*args: str, stdin: bytes = b"", python: Optional[str] = None,
             env: Optional[Dict[str, str]] = None, timeout: float = TOOL_TIMEOUT) -> ToolRun:
    """``python -m minigrpc ARGS`` as a child process (``python``: this interpreter)."""
    command = [python or sys.executable, "-m", "minigrpc", *args]
    started = time.monotonic()
    completed = subprocess.run(command, input=stdin, capture_output=True, cwd=REPO_ROOT,
                               env=env if env is not None else tool_env(), timeout=timeout)
    return ToolRun(completed.returncode, completed.stdout.decode("utf-8", "replace"),
                   completed.stderr.decode("utf-8", "replace"), time.monotonic() - started)


def assert_no_traceback(run: ToolRun) -> None:
    assert "Traceback" not in run.stderr, run.stderr
    assert "Traceback" not in run.stdout, run.stdout


def grpcio_python() -> Optional[str]:
    """A Python that can run the grpcio server: this one, or the CPython
    ``MINIGRPC_TEST_GRPCIO_PYTHON`` names (PyPy has no grpcio); None when there is none."""
    if grpcio_in_process():
        return sys.executable
    named = os.environ.get(GRPCIO_PYTHON_ENV)
    return named if named and os.access(named, os.X_OK) else None


_ADDONS_REFUSED: Dict[str, Optional[str]] = {}


def grpcio_addons_refused(python: str) -> Optional[str]:
    """Why grpcio-reflection or grpcio-health-checking does not load in ``python`` (their
    generated code refuses a protobuf older than the one it was made with: the ``oldest`` env),
    or None."""
    if python not in _ADDONS_REFUSED:
        done = subprocess.run([python, "-c", "import grpc_reflection.v1alpha.reflection, "
                               "grpc_health.v1.health"], capture_output=True, timeout=120)
        error = done.stderr.decode("utf-8", "replace").strip().splitlines()
        _ADDONS_REFUSED[python] = (error[-1] if error else "failed") if done.returncode else None
    return _ADDONS_REFUSED[python]


class ServerProcess:
    """A server in a child process, ready once it printed one READY line per address."""

    def __init__(self, command: Sequence[str], count: int,
                 env: Optional[Dict[str, str]] = None) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self.process = subprocess.Popen(list(command), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._stderr,
                                        cwd=REPO_ROOT, env=env or tool_env())
        try:
            self.targets = self._ready_lines(count)
        except BaseException:
            self.stop()
            raise

    def _ready_lines(self, count: int) -> List[str]:
        assert self.process.stdout is not None
        stdout = self.process.stdout
        deadline = time.monotonic() + READY_TIMEOUT
        pending = b""
        targets: List[str] = []
        while len(targets) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"server not ready in {READY_TIMEOUT:.0f} s{self.stderr()}")
            readable, _, _ = select.select([stdout], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"server exited with {self.process.wait()}{self.stderr()}")
            pending += chunk
            while b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                text = line.decode("utf-8", "replace").strip()
                if text.startswith("READY "):
                    targets.append(text[len("READY "):])
        return targets

    def stderr(self) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace").strip()
        return f": {text[-1500:]}" if text else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(20)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


def python_server(impl: str, addresses: Sequence[str], *flags: str) -> ServerProcess:
    """``tests/cli/serve.py`` on ``impl`` (minigrpc, minigrpc-aio or grpcio)."""
    python = grpcio_python() if impl == "grpcio" else sys.executable
    assert python is not None, "no Python with grpcio"
    command = [python, "-m", "tests.cli.serve", "--impl", impl, *flags]
    for address in addresses:
        command += ["--listen", address]
    env = tool_env({"GRPC_VERBOSITY": "ERROR"})
    return ServerProcess(command, len(addresses), env)
