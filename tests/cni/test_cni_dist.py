"""``dist/antrea``: the one-file plugin built by tools/build_dist.py, run as a node runs it.

The bundle is built into a temporary directory and executed by interpreters that have none of
its dependencies installed.  The bundle ``make dist`` builds (``--for-python 3.6``: the pinned
h2 4.1.0, hpack 4.0.0 and hyperframe 6.0.1) must run every CNI command byte for byte like
``python -m cni_client`` on CPython 3.6 to 3.13 and on PyPy 3.9: :data:`REQUIRED_INTERPRETERS`,
each taken from pyenv or PATH and skipped, with the reason, only when it is not installed.
Each interpreter runs the bundle the way a node does: the file is exec'd and its ``sh``
prologue finds the interpreter as ``python3`` on a PATH that holds nothing else.

A bundle of the test venv's own packages (``--site-packages``' default) may need a newer Python
than some of those interpreters; on them it must answer with one CNI error JSON (code 999).
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
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from tests.support.cni import (
    REPO_ROOT,
    VERSION_BYTES,
    AgentProcess,
    EnvValue,
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

#: What the bundle claims to run on: (test id, CPython "X.Y" or "pypy3").
REQUIRED_INTERPRETERS = [*(f"3.{minor}" for minor in range(6, 14)), "pypy3"]

#: The interpreter names the prologue tries, in its order (tools/build_dist.py).
PROLOGUE_ORDER = ("python3", "/usr/libexec/platform-python",
                  *(f"python3.{minor}" for minor in range(14, 5, -1)), "pypy3")


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


def make_bundle(dirs: TempDirs, extra: Tuple[str, ...]) -> Bundle:
    path = os.path.join(dirs.new(), "antrea")
    try:
        report, min_python = build_bundle(path, *extra)
    except subprocess.CalledProcessError as exc:
        if "--for-python" in extra and b"could not download" in exc.stderr:
            pytest.skip("the package index is not reachable: " + exc.stderr.decode()[-200:])
        raise
    return Bundle(path, min_python, report, extra)


#: How to vendor: the pinned releases for the oldest Python (``make dist``; pip downloads them
#: and the tests skip when the index cannot be reached); the test interpreter's own packages;
#: and ``CNI_DIST_SITE_PACKAGES`` when set.
MAKE_DIST_ARGS = ("--for-python", "3.6")
BUILD_VARIANTS = [("make-dist", MAKE_DIST_ARGS), ("own-packages", ())]
if os.environ.get("CNI_DIST_SITE_PACKAGES"):
    BUILD_VARIANTS.append(("site-packages",
                           ("--site-packages", os.environ["CNI_DIST_SITE_PACKAGES"])))


@pytest.fixture(scope="module", params=[args for _, args in BUILD_VARIANTS],
                ids=[name for name, _ in BUILD_VARIANTS])
def bundle(dirs: TempDirs, request: pytest.FixtureRequest) -> Bundle:
    return make_bundle(dirs, request.param)


@pytest.fixture(scope="module")
def dist_bundle(dirs: TempDirs) -> Bundle:
    """The bundle as ``make dist`` builds it."""
    return make_bundle(dirs, MAKE_DIST_ARGS)


def base_interpreter() -> str:
    """The interpreter behind the test venv: same Python, none of the venv's packages."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return base if os.path.exists(base) else sys.executable


def _version_key(path: str) -> Tuple[int, ...]:
    match = re.search(r"/(\d+)\.(\d+)\.(\d+)[^/]*/bin/", path)
    return tuple(int(part) for part in match.groups()) if match else (0,)


def find_interpreter(wanted: str) -> Tuple[Optional[str], str]:
    """(path of the interpreter, "") or (None, where it was looked for)."""
    if wanted == "pypy3":
        found = shutil.which("pypy3")
        return (found, "") if found else (None, "PyPy 3 is not installed (no pypy3 on PATH;"
                                                " Debian's package is pypy3)")
    candidates: List[str] = []
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        try:
            root = subprocess.run([pyenv, "root"], capture_output=True, timeout=30,
                                  check=True).stdout.decode().strip()
        except (OSError, subprocess.SubprocessError):
            root = ""
        if root:
            pattern = os.path.join(root, "versions", f"{wanted}.*", "bin", f"python{wanted}")
            candidates = sorted((path for path in glob.glob(pattern)
                                 if re.search(rf"/{re.escape(wanted)}\.\d+/bin/", path)),
                                key=_version_key, reverse=True)
    on_path = shutil.which(f"python{wanted}")
    if on_path is not None and "/shims/" not in on_path:  # pyenv's shims need a selection
        candidates.append(on_path)
    usable = [path for path in candidates if os.access(path, os.X_OK)]
    if usable:
        return usable[0], ""
    return None, (f"Python {wanted} is not installed (no pyenv version {wanted}.x, no"
                  f" python{wanted} on PATH)")


def interpreter_version(python: str) -> Tuple[int, int]:
    out = subprocess.run([python, "-I", "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, timeout=60, check=True).stdout.split()
    return int(out[0]), int(out[1])


def required_interpreter(wanted: str) -> str:
    path, why_not = find_interpreter(wanted)
    if path is None:
        pytest.skip(why_not)
    return path


def path_with(dirs: TempDirs, links: Dict[str, str]) -> str:
    """A directory holding only ``name -> target`` symlinks: the whole PATH of a run."""
    directory = dirs.new()
    for name, target in links.items():
        os.symlink(target, os.path.join(directory, name))
    return directory


def exec_bundle(bundle: Bundle, path_dir: str, cni: Dict[str, EnvValue], stdin: bytes = b"",
                socket_path: Optional[str] = None) -> PluginRun:
    """Exec the file itself, as the runtime does, with ``path_dir`` as the whole PATH, from
    the bundle's own directory, far from the repository's packages."""
    return run_plugin(cni, stdin, socket_path=socket_path, command=[bundle.path],
                      extra_env={"PATH": path_dir}, cwd=os.path.dirname(bundle.path))


def test_archive_layout(bundle: Bundle) -> None:
    with open(bundle.path, "rb") as handle:
        assert handle.readline() == b"#!/bin/sh\n"
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


def test_make_dist_vendors_the_releases_for_python_3_6(dist_bundle: Bundle) -> None:
    assert dist_bundle.min_python == (3, 6)
    for line in ("h2 4.1.0:", "hpack 4.0.0:", "hyperframe 6.0.1:"):
        assert line in dist_bundle.report
    with zipfile.ZipFile(dist_bundle.path) as archive:
        h2_init = archive.read("h2/__init__.py").decode()
    assert re.search(r"__version__ = ['\"]4\.1\.0['\"]", h2_init)


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


@pytest.mark.parametrize("wanted", REQUIRED_INTERPRETERS,
                         ids=[f"python{name}" if name[0].isdigit() else name
                              for name in REQUIRED_INTERPRETERS])
def test_every_command_on_each_interpreter(dist_bundle: Bundle, dirs: TempDirs,
                                           wanted: str) -> None:
    """VERSION, ADD, CHECK, STATUS, GC and DEL against the reference agent, then ADD with the
    agent gone, each compared byte for byte with ``python -m cni_client`` given the same
    invocation at the same moment."""
    python = required_interpreter(wanted)
    if wanted[0].isdigit():
        assert interpreter_version(python) == tuple(int(part) for part in wanted.split("."))
    path_dir = path_with(dirs, {"python3": python})
    socket_path = os.path.join(dirs.new(), "cni.sock")

    def both(cni: Dict[str, EnvValue], stdin: bytes) -> PluginRun:
        from_bundle = exec_bundle(dist_bundle, path_dir, cni, stdin, socket_path)
        from_module = run_plugin(cni, stdin, socket_path=socket_path)
        assert from_bundle.stderr == b""
        assert (from_bundle.returncode, from_bundle.stdout) == (from_module.returncode,
                                                                from_module.stdout), cni
        return from_bundle

    version = both({"CNI_COMMAND": "VERSION"}, b"")
    assert (version.returncode, version.stdout) == (0, VERSION_BYTES)
    with AgentProcess(socket_path):
        add = both(pod_env("ADD", container_id="dist1"), conf("1.0.0"))
        assert add.returncode == 0, add.stdout
        result = json.loads(add.stdout)
        assert result["ips"][0]["address"] == "10.10.1.2/24"
        with_prev = conf("1.0.0", prevResult=result)
        assert both(pod_env("CHECK", container_id="dist1"), with_prev)[:2] == (0, b"")
        status = both({"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, conf("1.1.0"))
        assert status[:2] == (0, b"")
        gc = both({"CNI_COMMAND": "GC", "CNI_PATH": "/opt/cni/bin"}, conf("1.1.0"))
        assert gc[:2] == (0, b"")
        assert both(pod_env("DEL", container_id="dist1"), conf("1.0.0"))[:2] == (0, b"")
        gone = both(pod_env("CHECK", container_id="dist1"), with_prev)
        assert json.loads(gone.stdout)["code"] == 103
        assert one_outcome(both(pod_env("ADD"), b"[]"))
    no_agent = both(pod_env("ADD", container_id="dist2"), conf("0.3.0"))
    assert no_agent.stdout == error_json(
        11, "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error"
            f" while dialing: dial unix {socket_path}: connect: no such file or directory\"")
    assert json.loads(both({"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"},
                           conf("1.1.0")).stdout)["code"] == 50


def test_interpreters_too_old_for_the_vendored_packages(bundle: Bundle, dirs: TempDirs) -> None:
    """On every interpreter found: VERSION, or one CNI error JSON (code 999) naming both
    versions where the vendored packages need a newer Python (the own-packages bundle)."""
    found = [path for path in (find_interpreter(name)[0] for name in REQUIRED_INTERPRETERS)
             if path is not None]
    if not found:
        pytest.skip("none of the required interpreters is installed")
    for python in found:
        run = exec_bundle(bundle, path_with(dirs, {"python3": python}), {"CNI_COMMAND": "VERSION"})
        version = interpreter_version(python)
        if version < bundle.min_python:
            error = one_outcome(run)
            assert isinstance(error, dict), run
            assert error["code"] == 999
            needed = ".".join(map(str, bundle.min_python))
            assert f"needs Python {needed} or newer, but it runs on Python" in error["msg"]
        else:
            assert (run.returncode, run.stdout, run.stderr) == (0, VERSION_BYTES, b""), python


def test_own_packages_bundle_runs_a_pod_lifecycle(dirs: TempDirs) -> None:
    """The offline build (the test venv's h2) on the test venv's own Python."""
    own = make_bundle(dirs, ())
    path_dir = path_with(dirs, {"python3": base_interpreter()})
    socket_path = os.path.join(dirs.new(), "cni.sock")
    with AgentProcess(socket_path):
        for command in ("ADD", "DEL"):
            env = pod_env(command, container_id="own1")
            run = exec_bundle(own, path_dir, env, conf("0.3.0"), socket_path)
            assert (run.returncode, run.stdout) == run_plugin(env, conf("0.3.0"),
                                                              socket_path=socket_path)[:2]
            assert run.returncode == 0


def test_prologue_tries_the_node_names_in_order(dist_bundle: Bundle) -> None:
    with open(dist_bundle.path, "rb") as handle:
        head = handle.read(4096)
    match = re.search(rb"\nfor python in ([^;\n]*); do\n", head)
    assert match, head
    assert tuple(match.group(1).decode().split()) == PROLOGUE_ORDER


def test_prologue_prefers_python3_then_the_newest_python3_x(dist_bundle: Bundle,
                                                             dirs: TempDirs) -> None:
    """Which name the prologue took, seen through a stand-in that records its own name and then
    execs the real interpreter."""
    log = os.path.join(dirs.new(), "used")
    real = base_interpreter()

    def recording(name: str) -> str:
        directory = dirs.new()
        script = os.path.join(directory, name)
        with open(script, "w") as handle:
            handle.write(f'#!/bin/sh\necho {name} >> "{log}"\nexec "{real}" "$@"\n')
        os.chmod(script, 0o755)
        return script

    names = ["python3.7", "python3.12", "python3"]
    links = {name: recording(name) for name in names}
    expected = [("python3", names), ("python3.12", names[:2]), ("python3.7", names[:1])]
    for used, present in expected:
        if os.path.exists("/usr/libexec/platform-python") and used != "python3":
            pytest.skip("/usr/libexec/platform-python exists here and comes before python3.X")
        path_dir = path_with(dirs, {name: links[name] for name in present})
        run = exec_bundle(dist_bundle, path_dir, {"CNI_COMMAND": "VERSION"})
        assert (run.returncode, run.stdout, run.stderr) == (0, VERSION_BYTES, b"")
        with open(log) as handle:
            assert handle.read().split()[-1] == used


def test_no_interpreter_at_all_is_one_cni_error(dist_bundle: Bundle, dirs: TempDirs) -> None:
    """A node without Python (Flatcar, Bottlerocket, Talos): error JSON, never a shell error."""
    if os.path.exists("/usr/libexec/platform-python"):
        pytest.skip("/usr/libexec/platform-python exists on this machine, so one is always found")
    for command in ("ADD", "VERSION"):
        run = exec_bundle(dist_bundle, dirs.new(), pod_env(command), conf("0.3.0"))
        assert (run.returncode, run.stderr) == (1, b"")
        error = one_outcome(run)
        assert isinstance(error, dict)
        assert error["code"] == 999
        assert error["msg"].startswith("internal error: antrea-cni needs Python 3.6 or newer and"
                                       " found no interpreter; it looked for python3, "
                                       "/usr/libexec/platform-python, python3.14, ")
        assert error["msg"].endswith(", python3.6, pypy3")


def test_errors_match_the_module_entry_point(bundle: Bundle, dirs: TempDirs) -> None:
    """The shell behaves identically from the bundle (no agent needed for these)."""
    path_dir = path_with(dirs, {"python3": base_interpreter()})
    for cni, stdin in [({"CNI_COMMAND": "ADD"}, b""), (pod_env("add"), b"[]"),
                       (pod_env("ADD"), conf("2.0.0")), (pod_env("CHECK"), conf("0.3.0"))]:
        from_bundle = exec_bundle(bundle, path_dir, cni, stdin)
        from_module = run_plugin(cni, stdin)
        assert (from_bundle.returncode, from_bundle.stdout) == (from_module.returncode,
                                                                from_module.stdout)
