"""What ``dist/antrea`` imports on a node, beyond what a bare interpreter has loaded already.

A node runs the plugin once per pod and command, so every module it imports is paid for on every
run (docs/benchmarks.md, "Cold start on each node interpreter").  This test execs the bundle as a
node does (its ``sh`` prologue, ``python3`` found on PATH) for ADD, CHECK and DEL against the
reference agent and for an ADD with no agent listening, with a ``python3`` on PATH that runs the
real interpreter with ``-v``: Python then names every module it imports, on stderr, on every
version from 3.6 on.  The same interpreter's bare ``python -v -I -S -c pass`` (the prologue's
flags) gives what is loaded anyway; none of :data:`GUARDED` may be in the difference.

That the capture works is checked on the same runs: the difference must hold the plugin's own
one-shot modules, and the ADD must have answered with a result from the agent.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import zipfile
from typing import Dict, FrozenSet, Iterator, List, Tuple

import pytest

from tests.cni.test_cni_dist import (
    Bundle,
    base_interpreter,
    exec_bundle,
    find_interpreter,
    interpreter_version,
    make_bundle,
)
from tests.support.cni import AgentProcess, TempDirs, conf, pod_env, run_plugin

pytestmark = pytest.mark.timeout(300)

#: Modules the plugin's one-shot path must not import, each with why it can do without.
GUARDED: Dict[str, str] = {
    "enum": "status codes travel as numbers (minigrpc.protocol.codes.Code); grpcio's enums live in "
            "minigrpc.protocol.enums, for the grpcio API only",
    "types": "what enum imports (and minigrpc/__init__'s Python 3.6 shim, on type(sys))",
    "functools": "wire caches grpc-accept-encoding values in a dict, not functools.lru_cache",
    "collections": "strip_typing writes a NamedTuple as a plain tuple class, not namedtuple",
    "operator": "imported by collections and functools only",
    "heapq": "imported by collections only",
    "keyword": "imported by collections only",
    "reprlib": "imported by collections only",
    "weakref": "imported by functools on Python 3.6 only",
    "typing": "tools/strip_typing.py removes the type hints from the bundle's bytecode",
    "re": "typing's; go_compat and wire need it on error paths only",
    "json": "cni_client.go_compat decodes the network config itself",
    "logging": "the frame tracer looks for logging only if something loaded it",
    "socket": "the one-shot call uses _socket (socket adds its enums and selectors)",
    "selectors": "the one-shot call blocks on one socket with timeouts",
    "os": "cni_client and minigrpc use posix (environ, read, stat, strerror) where os is not "
          "loaded yet",
    "stat": "imported by os only",
    "posixpath": "imported by os only",
    "_collections_abc": "imported by os (and collections) only",
    "struct": "int.to_bytes packs the message prefix and the frame headers",
    "dataclasses": "CallStatus is a NamedTuple, not a dataclass",
    "base64": "only -bin metadata needs it, and the plugin sends none",
    "zlib": "only compressed messages need it, and the agent sends none",
    "h2": "not in the bundle: minigrpc.http2.frames and minigrpc.http2.hpack_codec are its HTTP/2",
    "hyperframe": "not in the bundle: the one-shot call frames with minigrpc.http2.frames",
    "hpack": "not in the bundle: the one-shot call encodes headers with minigrpc.http2.hpack_codec",
    "google.protobuf": "cni_client.messages encodes and decodes the two messages",
    "asyncio": "the call is blocking",
    "threading": "the call runs on the main thread alone",
    "minigrpc.driver.client_keepalive": "a channel's keepalive; the one-shot call never pings",
    "minigrpc.driver.keepalive": "the keepalive decisions, which only channels and servers need",
}

#: Modules of the one-shot path the runs must show: proof that the capture sees the plugin's
#: imports (a broken capture would find no module at all, and every check would pass).
EXPECTED = frozenset(("cni_client.client", "cni_client.messages", "minigrpc.oneshot",
                      "minigrpc.protocol.oneshot_protocol", "minigrpc.http2.hpack_codec",
                      "_socket"))

_IMPORTED = re.compile(rb"^import '([^']+)'", re.MULTILINE)


def imported(stderr: bytes) -> FrozenSet[str]:
    """The modules ``python -v`` reports importing."""
    return frozenset(name.decode() for name in _IMPORTED.findall(stderr))


def guarded_in(modules: FrozenSet[str]) -> List[str]:
    """The guarded modules (and their submodules) among ``modules``."""
    return sorted(name for name in modules
                  if any(name == guarded or name.startswith(guarded + ".") for guarded in GUARDED))


@pytest.fixture(scope="module")
def dirs() -> Iterator[TempDirs]:
    created = TempDirs()
    yield created
    created.cleanup()


def interpreters() -> List[Tuple[str, str]]:
    """(test id, interpreter): the test's own and, where installed, CPython 3.6, the oldest the
    bundle runs on and the one where enum and namedtuple cost the most."""
    # The capture reads CPython's `-v` lines; PyPy's bare start reports other modules, so under
    # a PyPy test run only the CPython interpreters are checked.
    found = [("dev", base_interpreter())] if platform.python_implementation() == "CPython" else []
    oldest, _ = find_interpreter("3.6")
    if oldest is not None:
        found.append(("3.6", oldest))
    return found


@pytest.fixture(scope="module")
def bundle(dirs: TempDirs) -> Bundle:
    """``make dist``'s bundle, with bytecode for the interpreters under test only."""
    compilers: List[str] = []
    for _, python in interpreters():
        compilers += ["--compile-with", python]
    return make_bundle(dirs, tuple(compilers))


@pytest.mark.parametrize("python", [python for _, python in interpreters()],
                         ids=[name for name, _ in interpreters()])
def test_one_shot_path_imports_none_of_the_guarded_modules(bundle: Bundle, dirs: TempDirs,
                                                           python: str) -> None:
    assert interpreter_version(python) >= bundle.min_python
    bare = subprocess.run([python, "-v", "-I", "-S", "-c", "pass"], capture_output=True,
                          timeout=60, check=True)
    at_start = imported(bare.stderr)
    assert "sys" not in at_start and "encodings" in at_start, bare.stderr[-500:]
    path_dir = dirs.new()
    wrapper = os.path.join(path_dir, "python3")
    with open(wrapper, "w", encoding="utf-8") as handle:
        handle.write(f'#!/bin/sh\nexec "{python}" -v "$@"\n')
    os.chmod(wrapper, 0o755)
    socket_path = os.path.join(dirs.new(), "cni.sock")
    runs = {}
    with AgentProcess(socket_path):
        add = exec_bundle(bundle, path_dir, pod_env("ADD", container_id="cold1"), conf("1.0.0"),
                          socket_path)
        assert add.returncode == 0, add.stdout + add.stderr[-2000:]
        result = json.loads(add.stdout)
        assert result["ips"], result
        runs["ADD"] = add
        runs["CHECK"] = exec_bundle(bundle, path_dir, pod_env("CHECK", container_id="cold1"),
                                    conf("1.0.0", prevResult=result), socket_path)
        runs["DEL"] = exec_bundle(bundle, path_dir, pod_env("DEL", container_id="cold1"),
                                  conf("1.0.0"), socket_path)
    runs["ADD, no agent"] = exec_bundle(bundle, path_dir, pod_env("ADD", container_id="cold2"),
                                        conf("1.0.0"), socket_path)
    assert json.loads(runs["ADD, no agent"].stdout)["code"] == 11
    for command, run in runs.items():
        assert run.returncode == (1 if command == "ADD, no agent" else 0), (command, run.stdout)
        beyond_start = imported(run.stderr) - at_start
        assert EXPECTED <= beyond_start, (command, sorted(EXPECTED - beyond_start))
        found = guarded_in(beyond_start)
        assert not found, (command, {name: GUARDED.get(name, "") for name in found})


@pytest.mark.parametrize("python", [python for _, python in interpreters()],
                         ids=[name for name, _ in interpreters()])
def test_python_file_path_loads_our_modules_from_the_same_bytecode(bundle: Bundle, dirs: TempDirs,
                                                                   python: str) -> None:
    """``python3 dist/antrea`` (a person trying the file; a runtime execs it): Python runs the
    archive's ``__main__.py`` through runpy and zipimport, and the entry point then puts the
    same per-interpreter bytecode blob in front: every module of ours is loaded by its finder
    (``__main__.Bundled``), none from the archive's sources, and nothing guarded is imported
    beyond what runpy itself brings."""
    socket_path = os.path.join(dirs.new(), "cni.sock")  # nobody listens: the call fails fast
    run = run_plugin(pod_env("ADD", container_id="zip1"), conf("1.0.0"), socket_path=socket_path,
                     command=[python, "-v", "-I", "-S", bundle.path],
                     cwd=os.path.dirname(bundle.path))
    assert run.returncode == 1 and json.loads(run.stdout)["code"] == 11, run.stdout
    loaders = dict(re.findall(rb"^import '((?:cni_client|minigrpc)[^']*)' # (.*)$", run.stderr,
                              re.MULTILINE))
    assert {name.decode() for name in loaders} >= EXPECTED - {"_socket"}, sorted(loaders)
    assert set(loaders.values()) == {b"<class '__main__.Bundled'>"}, loaders
    # What the interpreter imports anyway to run an archive (runpy and its needs): an archive
    # whose __main__.py does nothing, run the same way.
    empty = os.path.join(dirs.new(), "empty.zip")
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("__main__.py", "")
    bare = subprocess.run([python, "-v", "-I", "-S", empty], capture_output=True, timeout=60,
                          check=True)
    assert "runpy" in imported(bare.stderr), bare.stderr[-500:]
    found = guarded_in(imported(run.stderr) - imported(bare.stderr))
    assert not found, {name: GUARDED.get(name, "") for name in found}


def test_the_capture_would_see_a_guarded_import(dirs: TempDirs) -> None:
    """The same capture, on a start that imports the grpcio API's enums
    (:mod:`minigrpc.protocol.enums`),
    finds enum among the guarded modules: the check above can fail."""
    python = base_interpreter()
    bare = subprocess.run([python, "-v", "-I", "-S", "-c", "pass"], capture_output=True,
                          timeout=60, check=True)
    from tests.support.cni import REPO_ROOT

    probe = subprocess.run([python, "-v", "-I", "-S", "-c",
                            f"import sys; sys.path.insert(0, {REPO_ROOT!r});"
                            " import minigrpc.protocol.enums, _socket"],
                           capture_output=True, timeout=60, check=True)
    beyond_start = imported(probe.stderr) - imported(bare.stderr)
    assert "enum" in guarded_in(beyond_start)
    assert "_socket" in beyond_start and "minigrpc.protocol.codes" in beyond_start
