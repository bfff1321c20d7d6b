"""``dist/antrea``: the zipapp built by tools/build_dist.py, run as a node would run it.

The bundle is built into a temporary directory and executed with ``python3 -I`` (and with
``-I -S``, which drops site-packages altogether) by interpreters that have none of its
dependencies installed: the base interpreter of the test venv and any pyenv versions found.
It must answer VERSION, ADD and DEL against the reference agent exactly like
``python -m cni_client`` does (issue 4, "Demo and deployment"), or, on an interpreter older
than its vendored packages allow, say so as one CNI error JSON.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from typing import Iterator, List, Optional, Tuple

import pytest

from tests.cni_helpers import (
    REPO_ROOT,
    VERSION_BYTES,
    AgentProcess,
    PluginRun,
    TempDirs,
    conf,
    error_json,
    one_outcome,
    pod_env,
    run_plugin,
)

pytestmark = pytest.mark.timeout(300)

BUILD_SCRIPT = os.path.join(REPO_ROOT, "tools", "build_dist.py")


class Bundle:
    def __init__(self, path: str, min_python: Tuple[int, int], report: str,
                 build_args: Tuple[str, ...] = ()) -> None:
        self.path = path
        self.build_args = build_args
        self.min_python = min_python
        self.report = report


def build_bundle(output: str, *extra: str) -> Tuple[str, Tuple[int, int]]:
    done = subprocess.run([sys.executable, BUILD_SCRIPT, "--output", output, *extra],
                          capture_output=True, cwd=REPO_ROOT, timeout=240, check=True)
    report = done.stdout.decode()
    match = re.search(r"needs Python >= (\d+)\.(\d+)", report)
    assert match, report
    return report, (int(match.group(1)), int(match.group(2)))


@pytest.fixture(scope="module")
def dirs() -> Iterator[TempDirs]:
    created = TempDirs()
    yield created
    created.cleanup()


#: How to vendor: the test interpreter's own packages (``make dist``); the newest releases
#: that support Python 3.9 (``--for-python 3.9``, which downloads wheels with pip and is
#: skipped when the index cannot be reached); and ``CNI_DIST_SITE_PACKAGES`` when set.
BUILD_VARIANTS = [("own-packages", ()), ("for-python-3.9", ("--for-python", "3.9"))]
if os.environ.get("CNI_DIST_SITE_PACKAGES"):
    BUILD_VARIANTS.append(("site-packages",
                           ("--site-packages", os.environ["CNI_DIST_SITE_PACKAGES"])))


@pytest.fixture(scope="module", params=[args for _, args in BUILD_VARIANTS],
                ids=[name for name, _ in BUILD_VARIANTS])
def bundle(dirs: TempDirs, request: pytest.FixtureRequest) -> Bundle:
    path = os.path.join(dirs.new(), "antrea")
    extra: Tuple[str, ...] = request.param
    try:
        report, min_python = build_bundle(path, *extra)
    except subprocess.CalledProcessError as exc:
        if "--for-python" in extra and b"could not download" in exc.stderr:
            pytest.skip("the package index is not reachable: " + exc.stderr.decode()[-200:])
        raise
    return Bundle(path, min_python, report, extra)


def base_interpreter() -> str:
    """The interpreter behind the test venv: same Python, none of the venv's packages."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return base if os.path.exists(base) else sys.executable


def pyenv_interpreters() -> List[str]:
    """python3 of every pyenv version, when pyenv is on PATH (other Pythons to try)."""
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return []
    try:
        root = subprocess.run([pyenv, "root"], capture_output=True, timeout=30,
                              check=True).stdout.decode().strip()
    except (OSError, subprocess.SubprocessError):
        return []
    def version_key(path: str) -> Tuple[int, ...]:
        match = re.search(r"/(\d+)\.(\d+)\.(\d+)", path)
        return tuple(int(part) for part in match.groups()) if match else (0,)

    found = sorted(glob.glob(os.path.join(root, "versions", "3.*", "bin", "python3")),
                   key=version_key)
    return [path for path in found if os.access(path, os.X_OK)
            and re.search(r"/3\.(9|1\d)\.", path)]


def interpreter_version(python: str) -> Tuple[int, int]:
    out = subprocess.run([python, "-I", "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, timeout=60, check=True).stdout.split()
    return int(out[0]), int(out[1])


def distinct(paths: List[str]) -> List[str]:
    seen: List[str] = []
    for path in paths:
        if os.path.realpath(path) not in [os.path.realpath(known) for known in seen]:
            seen.append(path)
    return seen


INTERPRETERS = distinct([base_interpreter(), *pyenv_interpreters()])
#: The full pod lifecycle runs on the base interpreter and the oldest and newest others.
LIFECYCLE_INTERPRETERS = distinct([INTERPRETERS[0], *INTERPRETERS[1:2], *INTERPRETERS[-1:]])


def interpreter_id(python: str) -> str:
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", python)
    return "python" + (match.group(1) if match else "3")


def run_bundle(bundle: Bundle, python: Optional[str], cni: dict, stdin: bytes,
               socket_path: Optional[str] = None, flags: Tuple[str, ...] = ("-I",),
               cwd: Optional[str] = None) -> PluginRun:
    """Run the bundle from its own directory, far from the repository's packages."""
    command = [bundle.path] if python is None else [python, *flags, bundle.path]
    return run_plugin(cni, stdin, socket_path=socket_path, command=command,
                      cwd=cwd or os.path.dirname(bundle.path))


def test_archive_layout(bundle: Bundle) -> None:
    with open(bundle.path, "rb") as handle:
        assert handle.readline() == b"#!/usr/bin/env python3\n"
    assert os.stat(bundle.path).st_mode & 0o777 == 0o755
    with zipfile.ZipFile(bundle.path) as archive:
        names = set(archive.namelist())
    for required in ("__main__.py", "cni_client/__main__.py", "cni_client/messages.py",
                     "minigrpc/__init__.py", "h2/connection.py", "hpack/__init__.py",
                     "hyperframe/frame.py"):
        assert required in names, required
    # The plugin needs no protobuf (cni_client.messages), and nothing that imports it is inside.
    assert not [name for name in names if name.startswith("google/")]
    for left_out in ("cni_client/cni_pb2.py", "cni_client/agent.py", "cni_client/demo.py"):
        assert left_out not in names
    assert not [name for name in names if name.endswith((".so", ".pyd"))]
    assert not [name for name in names if "__pycache__" in name or "/tests/" in name]
    for distribution in ("h2", "hpack", "hyperframe"):
        assert any(name.startswith(f"LICENSES/{distribution}/") for name in names)


def test_build_is_reproducible(bundle: Bundle, dirs: TempDirs) -> None:
    again = os.path.join(dirs.new(), "antrea")
    build_bundle(again, *bundle.build_args)
    if sys.version_info >= (3, 11):
        with open(bundle.path, "rb") as first, open(again, "rb") as second:
            assert first.read() == second.read()
        return
    # Before 3.11, marshal's FLAG_REF choices depend on reference counts, so the same source can
    # compile to different .pyc bytes from one run to the next. Everything else must match.
    with zipfile.ZipFile(bundle.path) as first, zipfile.ZipFile(again) as second:
        assert first.namelist() == second.namelist()
        for name in first.namelist():
            if not name.endswith(".pyc"):
                assert first.read(name) == second.read(name), name


@pytest.mark.parametrize("python", INTERPRETERS, ids=interpreter_id)
def test_version_on_each_interpreter(bundle: Bundle, python: str) -> None:
    run = run_bundle(bundle, python, {"CNI_COMMAND": "VERSION"}, b"")
    if interpreter_version(python) < bundle.min_python:
        assert run.returncode == 1
        error = one_outcome(run)
        assert isinstance(error, dict)
        assert error["code"] == 999
        assert "needs Python" in error["msg"]
    else:
        assert (run.returncode, run.stdout) == (0, VERSION_BYTES)


@pytest.mark.parametrize("python", LIFECYCLE_INTERPRETERS, ids=interpreter_id)
def test_pod_lifecycle_against_the_reference_agent(bundle: Bundle, dirs: TempDirs,
                                                   python: str) -> None:
    if interpreter_version(python) < bundle.min_python:
        pytest.skip(f"{python} is older than the bundle's vendored packages allow")
    path = os.path.join(dirs.new(), "cni.sock")
    with AgentProcess(path):
        add = run_bundle(bundle, python, pod_env("ADD", container_id="dist1"), conf("0.3.0"),
                         socket_path=path)
        assert add.returncode == 0, add.stdout
        assert json.loads(add.stdout)["ips"][0]["address"] == "10.10.1.2/24"
        same = run_plugin(pod_env("ADD", container_id="dist1"), conf("0.3.0"),
                          socket_path=path)
        assert same.stdout == add.stdout  # byte-identical to python -m cni_client
        status = run_bundle(bundle, python, {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt"},
                            conf("1.1.0"), socket_path=path, flags=("-I", "-S"))
        assert (status.returncode, status.stdout) == (0, b"")
        delete = run_bundle(bundle, python, pod_env("DEL", container_id="dist1"),
                            conf("0.3.0"), socket_path=path, flags=("-I", "-S"))
        assert (delete.returncode, delete.stdout) == (0, b"")
    gone = run_bundle(bundle, python, pod_env("ADD", container_id="dist2"), conf("0.3.0"),
                      socket_path=path)
    assert gone.stdout == error_json(
        11, "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error"
            f" while dialing: dial unix {path}: connect: no such file or directory\"")


def test_executed_directly_through_its_shebang(bundle: Bundle) -> None:
    """``/opt/cni/bin/antrea`` is exec'd with no interpreter named (cni-plugin.md §1)."""
    python_dir = os.path.dirname(base_interpreter())
    if not os.access(os.path.join(python_dir, "python3"), os.X_OK):
        pytest.skip("no python3 next to the base interpreter")
    run = run_plugin({"CNI_COMMAND": "VERSION"}, b"", command=[bundle.path],
                     extra_env={"PATH": python_dir + os.pathsep + "/usr/bin:/bin"},
                     cwd=os.path.dirname(bundle.path))
    assert (run.returncode, run.stdout) == (0, VERSION_BYTES)


def test_errors_match_the_module_entry_point(bundle: Bundle) -> None:
    """The shell behaves identically from the bundle (no agent needed for these)."""
    for cni, stdin in [({"CNI_COMMAND": "ADD"}, b""), (pod_env("add"), b"[]"),
                       (pod_env("ADD"), conf("2.0.0")), (pod_env("CHECK"), conf("0.3.0"))]:
        from_bundle = run_bundle(bundle, base_interpreter(), cni, stdin)
        from_module = run_plugin(cni, stdin)
        assert (from_bundle.returncode, from_bundle.stdout) == (from_module.returncode,
                                                                from_module.stdout)
