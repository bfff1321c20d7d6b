"""The command line on every interpreter the machine has, and what ``health`` imports there.

``health`` needs no protobuf and runs wherever minigrpc's client path does: CPython 3.6 to 3.13
and PyPy, from the sources (``PYTHONPATH``).  Where an interpreter also has protobuf, ``call``
runs there with ``--proto-module`` (a ``*_pb2``-style module written for the test: it registers
the interop files with ``AddSerializedFile``, which every protobuf release has).

``this`` is the interpreter running the suite (which has protobuf), and
``MINIGRPC_TEST_CLI_PYTHONS`` (paths, ``:``-separated) adds more, e.g. a CPython 3.6 venv with
protobuf 3.19, the last release for it.

A health probe's cost is its cold start (docs/benchmarks.md), so ``python -v`` names what it
imports on each interpreter, beyond what the same interpreter's ``-m`` loads by itself
(``python -v -c "import runpy"``); none of
:data:`GUARDED` may be among them.  The capture is proven by :data:`EXPECTED` showing up.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest
from google.protobuf import json_format

from tests.cli.conftest import Peer
from tests.cli.support import REPO_ROOT, tool_env
from tests.cni.test_cni_dist import find_interpreter
from tests.interop import messages_pb2, test_pb2

pytestmark = pytest.mark.timeout(180)

INTERPRETERS = [*(f"3.{minor}" for minor in range(6, 14)), "pypy3"]
#: The interpreters the tests run on: those found, this one, and the ones named.
RUN_ON = [*INTERPRETERS, "this",
          *filter(None, os.environ.get("MINIGRPC_TEST_CLI_PYTHONS", "").split(":"))]

#: Modules a plaintext health probe does without, each with why.
GUARDED: Dict[str, str] = {
    "google.protobuf": "the two health messages are coded by hand (minigrpc.cli.probe)",
    "json": "no JSON: the probe prints one line",
    "argparse": "minigrpc.cli.arguments parses the command line itself (argparse brings "
                "gettext, locale and, from its first add_argument, shutil)",
    "gettext": "argparse's",
    "shutil": "argparse's help formatter's",
    "base64": "only a -bin header needs it",
    "threading": "the one-shot call runs on the main thread alone",
    "socket": "the one-shot call uses _socket (socket adds its enums and selectors)",
    "selectors": "the one-shot call blocks on one socket with timeouts",
    "ssl": "a plaintext target needs no TLS",
    "logging": "the frame tracer looks for logging only if something loaded it",
    "asyncio": "the call is blocking",
    "minigrpc.blocking": "the one-shot client, not a channel",
    "minigrpc.aio": "the one-shot client, not a channel",
    "minigrpc.http2.connection": "the one-shot client frames the call without it",
    "minigrpc.cli.commands": "list, describe and call only",
    "minigrpc.cli.connect": "a channel, for TLS or --authority only",
    "typing": "the probe's modules import typing for type checkers only (TYPE_CHECKING), quote "
              "the annotations Python evaluates, and make their named tuples with "
              "minigrpc._records: on 3.6 typing and its annotations cost as much as the whole "
              "interpreter's start",
    "re": "typing's",
    "enum": "re's; status codes travel as numbers (minigrpc.protocol.codes.Code)",
}

#: What the probe's runs must show: proof that the capture sees its imports.
EXPECTED = frozenset(("minigrpc.cli.main", "minigrpc.cli.probe", "minigrpc.oneshot",
                      "minigrpc.protocol.oneshot_protocol", "_socket"))

_IMPORTED = re.compile(r"^import '([^']+)'", re.MULTILINE)


def interpreter(wanted: str) -> str:
    if wanted == "this":
        return sys.executable
    if os.sep in wanted:
        return wanted
    path, why_not = find_interpreter(wanted)
    if path is None:
        pytest.skip(why_not)
    return path


def imported(python: str, *arguments: str) -> Set[str]:
    done = subprocess.run([python, "-v", *arguments], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=tool_env(), timeout=120)
    return set(_IMPORTED.findall(done.stderr))


@pytest.fixture(scope="module")
def minigrpc_peer(_started: object, go_peers_or_none: object) -> Peer:
    return _started.get("minigrpc", go_peers_or_none)  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("wanted", RUN_ON)
def test_health_runs_and_imports_only_its_path(wanted: str, minigrpc_peer: Peer) -> None:
    python = interpreter(wanted)
    done = subprocess.run([python, "-m", "minigrpc", "health", minigrpc_peer.unix],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=tool_env(),
                          timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "status: SERVING\n", "")
    probe = imported(python, "-m", "minigrpc", "health", minigrpc_peer.unix)
    # What -m loads itself: runpy, and on 3.9, 3.10 and PyPy typing (for importlib.abc).
    extra = probe - imported(python, "-c", "import runpy")
    assert EXPECTED <= extra, sorted(extra)
    unwanted = sorted(name for name in extra if name in GUARDED
                      or any(name.startswith(guarded + ".") for guarded in GUARDED))
    assert unwanted == [], [f"{name}: {GUARDED.get(name, '')}" for name in unwanted]


def _has_protobuf(python: str) -> bool:
    return subprocess.run([python, "-c", "import google.protobuf.json_format"],
                          capture_output=True, timeout=60).returncode == 0


def write_pb2_module(directory: Path) -> str:
    """A ``*_pb2``-style module for the interop service that loads on any protobuf release."""
    files: List[bytes] = []

    def add(descriptor: object) -> None:
        for dependency in descriptor.dependencies:  # type: ignore[attr-defined]
            add(dependency)
        serialized = descriptor.serialized_pb  # type: ignore[attr-defined]
        if serialized not in files:
            files.append(serialized)

    add(test_pb2.DESCRIPTOR)
    lines = ["from google.protobuf import descriptor_pool", "_POOL = descriptor_pool.Default()"]
    lines += [f"_POOL.AddSerializedFile({serialized!r})" for serialized in files]
    lines += ["DESCRIPTOR = _POOL.FindFileByName('grpc/testing/test.proto')"]
    (directory / "cli_interop_pb2.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return "cli_interop_pb2"


@pytest.mark.parametrize("wanted", RUN_ON)
def test_call_with_a_proto_module_where_protobuf_is(wanted: str, minigrpc_peer: Peer,
                                                     tmp_path: Path) -> None:
    python = interpreter(wanted)
    if not _has_protobuf(python):
        pytest.skip(f"{python} has no protobuf")
    module = write_pb2_module(tmp_path)
    env = tool_env({"PYTHONPATH": f"{REPO_ROOT}:{tmp_path}"})
    done = subprocess.run(
        [python, "-m", "minigrpc", "call", minigrpc_peer.unix,
         "grpc.testing.TestService/UnaryCall", "--proto-module", module,
         "-d", '{"responseSize": 2}'],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=120)
    expected = messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=b"\0\0"))
    assert (done.returncode, done.stderr) == (0, "status: OK\n")
    assert done.stdout == json_format.MessageToJson(expected) + "\n"
