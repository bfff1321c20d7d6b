"""``dist/antrea``: the one-file plugin built by tools/build_dist.py, run as a node runs it.

The bundle is built into a temporary directory and executed by interpreters that have no
packages installed.  The bundle ``make dist`` builds (cni_client and minigrpc, nothing vendored)
must run every CNI command byte for byte like
``python -m cni_client`` on CPython 3.6 to 3.13 and on PyPy 3.9: :data:`REQUIRED_INTERPRETERS`,
each taken from pyenv or PATH and skipped, with the reason, only when it is not installed.
Each interpreter runs the bundle the way a node does: the file is exec'd and its ``sh``
prologue finds the interpreter as ``python3`` on a PATH that holds nothing else.
On an interpreter older than the bundle needs, it must answer with one CNI error JSON
(code 999).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import marshal
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
    report, min_python = build_bundle(path, *extra)
    return Bundle(path, min_python, report, extra)


#: ``make dist``'s arguments to tools/build_dist.py, beyond ``--output``.
MAKE_DIST_ARGS: Tuple[str, ...] = ()


@pytest.fixture(scope="module")
def dist_bundle(dirs: TempDirs) -> Bundle:
    """The bundle as ``make dist`` builds it."""
    return make_bundle(dirs, MAKE_DIST_ARGS)


@pytest.fixture(scope="module")
def bundle(dist_bundle: Bundle) -> Bundle:
    """The bundle the tests of every build run on: there is one build, ``make dist``'s."""
    return dist_bundle


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
                     "minigrpc/__init__.py", "minigrpc/http2/frames.py",
                     "minigrpc/http2/hpack_codec.py"):
        assert required in names, required
    # Nothing is vendored: minigrpc's own codecs are its HTTP/2 and HPACK.
    assert not [name for name in names if name.split("/")[0] in ("h2", "hpack", "hyperframe")]
    assert not [name for name in names if name.startswith("LICENSES/")]
    # The plugin needs no protobuf (cni_client.messages), and nothing that imports it is inside.
    assert not [name for name in names if name.startswith("google/")]
    for left_out in ("cni_client/cni_pb2.py", "cni_client/agent.py", "cni_client/demo.py"):
        assert left_out not in names
    assert not [name for name in names if re.search(r"_pb2(_grpc)?\.pyc?$", name)]
    # The plugin is a blocking client: no server, asyncio or add-on module is inside.
    assert not [name for name in names if re.search(
        r"(^|/)minigrpc/(aio/|health/|reflection/|server_)", name)]
    assert "minigrpc/blocking/channel.py" in names
    assert not [name for name in names if name.endswith((".so", ".pyd"))]
    assert not [name for name in names if "__pycache__" in name or "/tests/" in name]


def test_make_dist_needs_python_3_6(dist_bundle: Bundle) -> None:
    assert dist_bundle.min_python == (3, 6)
    assert "cni_client: from the repository" in dist_bundle.report


def test_build_is_reproducible(bundle: Bundle, dirs: TempDirs) -> None:
    """Two builds from the same inputs are the same bytes, bytecode trees included: every
    tree is compiled by a fresh interpreter process with ``PYTHONHASHSEED=0``, so neither the
    builder's own history nor set ordering can change a ``.pyc``."""
    again = os.path.join(dirs.new(), "antrea")
    build_bundle(again, *bundle.build_args)
    with open(bundle.path, "rb") as first, open(again, "rb") as second:
        first_bytes, second_bytes = first.read(), second.read()
    if first_bytes != second_bytes:
        with zipfile.ZipFile(bundle.path) as one, zipfile.ZipFile(again) as other:
            assert one.namelist() == other.namelist()
            differing = [name for name in one.namelist() if one.read(name) != other.read(name)]
        pytest.fail(f"the two builds differ in {differing[:10]}")


def test_the_oldest_python_builds_the_same_bundle(dirs: TempDirs) -> None:
    """``make dist`` needs no particular Python: CPython 3.6 runs the builder too, and the
    bundle it writes is the same bytes as the one the test's Python writes from the same
    inputs (the same sources and the same compilers)."""
    old = required_interpreter("3.6")
    args = (*MAKE_DIST_ARGS, "--compile-with", old, "--compile-with", base_interpreter())
    ours = make_bundle(dirs, args)
    theirs = os.path.join(dirs.new(), "antrea")
    done = subprocess.run([old, "-I", BUILD_SCRIPT, "--output", theirs, *args],
                          capture_output=True, cwd=REPO_ROOT, timeout=240, check=False)
    if done.returncode != 0 and b"could not download" in done.stderr:
        pytest.skip("the package index is not reachable: " + done.stderr.decode()[-200:])
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    with open(ours.path, "rb") as first, open(theirs, "rb") as second:
        assert first.read() == second.read()


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


def cache_tag(python: str) -> str:
    """The interpreter's ``sys.implementation.cache_tag``: the name of its tree in the bundle."""
    return subprocess.run([python, "-I", "-S", "-c",
                           "import sys; print(sys.implementation.cache_tag)"],
                          capture_output=True, timeout=60, check=True).stdout.decode().strip()


def installed_interpreters() -> List[str]:
    """Every interpreter of :data:`REQUIRED_INTERPRETERS` this machine has."""
    return [path for path in (find_interpreter(name)[0] for name in REQUIRED_INTERPRETERS)
            if path is not None]


def entry_point_trees(bundle: Bundle) -> Tuple[str, ...]:
    """The cache tags the generated ``__main__.py`` has a module blob for (its ``BLOBS``)."""
    with zipfile.ZipFile(bundle.path) as archive:
        entry = archive.read("__main__.py").decode()
    match = re.search(r"^BLOBS = (\{.*\})$", entry, re.MULTILINE)
    assert match, entry
    return tuple(re.findall(r'"([^"]+)": "', match.group(1)))


def blob_modules(bundle: Bundle, tag: str) -> Dict[str, bool]:
    """Module name -> is a package, of one interpreter's blob (the index is plain data, which
    any Python's ``marshal`` reads; only the code after it is the interpreter's own)."""
    with zipfile.ZipFile(bundle.path) as archive:
        return blob_index(archive.read(f"bytecode/{tag}.marshal"))


def blob_index(blob: bytes) -> Dict[str, bool]:
    """A blob's index (8 bytes of length, then the marshalled dict), checked against the code
    that follows it: module name -> is a package."""
    size = int.from_bytes(blob[:8], "little")
    index = marshal.loads(blob[8:8 + size])
    extents = sorted((start, length) for _, start, length in index.values())
    assert sum(length for _, length in extents) == len(blob) - 8 - size
    assert all(start == sum(length for _, length in extents[:position])
               for position, (start, _) in enumerate(extents))
    return {name: package for name, (package, _, _) in index.items()}


def module_names(sources: List[str]) -> Dict[str, bool]:
    """Archive source names -> (module name -> is a package)."""
    names: Dict[str, bool] = {}
    for source in sources:
        module = source[:-len(".py")].replace("/", ".")
        package = module.endswith(".__init__")
        names[module[:-len(".__init__")] if package else module] = package
    return names


#: ``python -v`` lines of a module import: 3.6, 3.7-3.9 and PyPy name the file ("loaded from
#: Zip <archive>/<member>"), 3.10 and later the zipimporter's prefix ("<archive>/<dir>/").
VERBOSE_IMPORT = re.compile(r"^import '?([\w.]+)'? # (?:loaded from Zip |<zipimporter object \")"
                            r"([^\"]+)")


def archive_imports(verbose_stderr: bytes, archive: str) -> Dict[str, str]:
    """module -> where in the archive ``python -v`` says it came from (path after the archive)."""
    found: Dict[str, str] = {}
    for line in verbose_stderr.decode(errors="replace").splitlines():
        match = VERBOSE_IMPORT.match(line)
        if match and match.group(2).startswith(archive + "/"):
            found[match.group(1)] = match.group(2)[len(archive) + 1:]
    return found


def verbose_python(dirs: TempDirs, python: str) -> str:
    """A PATH directory whose ``python3`` runs ``python`` with ``-v`` added to what the prologue
    passes, so that the bundle runs exactly as on a node and says where each import came from."""
    directory = dirs.new()
    script = os.path.join(directory, "python3")
    with open(script, "w") as handle:
        handle.write(f'#!/bin/sh\nexec "{python}" -v "$@"\n')
    os.chmod(script, 0o755)
    return directory


def imported_runpy(verbose_stderr: bytes) -> bool:
    return re.search(rb"^import '?runpy'?", verbose_stderr, re.MULTILINE) is not None


def directory_snapshot(*roots: str) -> List[Tuple[str, int, float]]:
    """Every file and directory under ``roots`` with its size and modification time."""
    entries: List[Tuple[str, int, float]] = []
    for root in roots:
        for current, subdirs, files in os.walk(root):
            for name in sorted(subdirs) + sorted(files):
                info = os.stat(os.path.join(current, name))
                entries.append((os.path.join(current, name), info.st_size, info.st_mtime))
    return entries


def test_make_dist_has_a_tree_for_every_interpreter_here(dist_bundle: Bundle) -> None:
    """Each installed interpreter compiled its own module blob: every module of the archive's
    sources, packages marked; the entry point knows exactly those blobs, and the build output
    says that none of the interpreters fell back to source."""
    found = installed_interpreters()
    if not found:
        pytest.skip("none of the required interpreters is installed")
    # The build names what an interpreter could not compile (for CPython 3.6, typically a
    # module that uses "from __future__ import annotations", new in 3.7).
    fallback = re.search(r"^falls back to source: (.*)$", dist_bundle.report, re.MULTILINE)
    assert fallback, dist_bundle.report
    assert fallback.group(1).startswith("none of those found"), fallback.group(1)
    tags = sorted({cache_tag(python) for python in found})
    with zipfile.ZipFile(dist_bundle.path) as archive:
        names = archive.namelist()
    sources = sorted(name for name in names if name.endswith(".py") and "/" in name)
    for tag in tags:
        assert blob_modules(dist_bundle, tag) == module_names(sources), tag
    assert [name for name in names if name.startswith("bytecode/")] == sorted(
        f"bytecode/{tag}.marshal" for tag in entry_point_trees(dist_bundle))
    assert set(tags) <= set(entry_point_trees(dist_bundle))
    summary = re.search(r"^bytecode for: (.*)$", dist_bundle.report, re.MULTILINE)
    assert summary, dist_bundle.report
    assert set(tags) <= set(summary.group(1).split())


def test_the_build_names_an_interpreter_that_falls_back_to_source(dirs: TempDirs) -> None:
    """A module one interpreter cannot compile (here a walrus, new in 3.8) leaves that
    interpreter without a tree, and the build output says so; the others keep theirs."""
    old, _ = find_interpreter("3.6")
    if old is None:
        old, _ = find_interpreter("3.7")
    if old is None:
        pytest.skip("no CPython 3.6 or 3.7 is installed")
    spec = importlib.util.spec_from_file_location("build_dist", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    build_dist = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_dist)  # type: ignore[union-attr]
    members = {"pkg/__init__.py": b"", "pkg/new.py": b"if (n := 1):\n    pass\n",
               "pkg/old.py": b"x = 1\n"}
    base: Optional[str] = base_interpreter()
    if sys.version_info < (3, 8):  # the test's own Python cannot compile the walrus either
        base = next((path for path in (find_interpreter(f"3.{minor}")[0] for minor in
                                       range(13, 7, -1)) if path), None)
        if base is None:
            pytest.skip("no CPython 3.8 or newer is installed beside this 3.7")
    tags, fallbacks, report = build_dist.add_bytecode(members, [old, base], (3, 6))
    old_tag = cache_tag(old)
    assert tags == [cache_tag(base)]
    assert fallbacks == [f"{old_tag} (cannot compile pkg/new.py)"]
    assert any(line.endswith("cannot compile pkg/new.py; it falls back to source")
               and old_tag in line for line in report), report
    assert sorted(name for name in members if name.startswith("bytecode/")) == [
        f"bytecode/{tags[0]}.marshal"]
    assert blob_index(members[f"bytecode/{tags[0]}.marshal"]) == {
        "pkg": True, "pkg.new": False, "pkg.old": False}


def test_an_interpreter_without_its_tree_runs_from_the_sources(dirs: TempDirs) -> None:
    """Built with one compiler only (``--compile-with``), the bundle still runs a pod's ADD and
    DEL on an interpreter that has no tree, importing the archive's sources."""
    base = base_interpreter()
    others = [path for path in installed_interpreters() if cache_tag(path) != cache_tag(base)]
    if not others:
        pytest.skip("no interpreter other than the test venv's is installed")
    other = others[0]
    subset = make_bundle(dirs, (*MAKE_DIST_ARGS, "--compile-with", base))
    assert entry_point_trees(subset) == (cache_tag(base),)
    assert f"bytecode for: {cache_tag(base)}\n" in subset.report
    assert "and every interpreter not named above" in subset.report
    path_dir = path_with(dirs, {"python3": other})
    run = exec_bundle(subset, path_dir, {"CNI_COMMAND": "VERSION"})
    assert (run.returncode, run.stdout, run.stderr) == (0, VERSION_BYTES, b"")
    socket_path = os.path.join(dirs.new(), "cni.sock")
    with AgentProcess(socket_path):
        add = exec_bundle(subset, verbose_python(dirs, other),
                          pod_env("ADD", container_id="fallback1"), conf("0.3.0"), socket_path)
        assert add.returncode == 0, add.stdout
        assert json.loads(add.stdout)["ips"][0]["address"] == "10.10.1.2/24"
        imported = archive_imports(add.stderr, subset.path)
        assert "cni_client.__main__" in imported, add.stderr[-2000:]
        assert not [name for name, where in imported.items()
                    if where.startswith("bytecode/")], imported
        delete = exec_bundle(subset, path_dir, pod_env("DEL", container_id="fallback1"),
                             conf("0.3.0"), socket_path)
        assert (delete.returncode, delete.stdout) == (0, b"")


def test_no_interpreter_compiles_or_writes_at_run_time(dist_bundle: Bundle,
                                                       dirs: TempDirs) -> None:
    """From a directory without write permission (the bundle read-only too), every installed
    interpreter runs ADD and DEL through the prologue with every module of the bundle loaded
    from its own blob (``-v`` added to the prologue's flags), without runpy (the prologue runs
    the entry point as ``-c`` code), and nothing appears or changes on disk.
    ``PYTHONDONTWRITEBYTECODE`` is not set, so nothing forbids writing; root ignores the
    permissions, so the snapshot of the directories is what proves it."""
    found = installed_interpreters()
    if not found:
        pytest.skip("none of the required interpreters is installed")
    directory = dirs.new()
    bundle_path = os.path.join(directory, "antrea")
    shutil.copyfile(dist_bundle.path, bundle_path)
    os.chmod(bundle_path, 0o555)
    os.chmod(directory, 0o555)
    socket_path = os.path.join(dirs.new(), "cni.sock")
    try:
        before = directory_snapshot(directory)
        with AgentProcess(socket_path):
            for index, python in enumerate(found):
                tag = cache_tag(python)
                container = f"ro{index}"
                path_dir = path_with(dirs, {"python3": python})
                read_only = Bundle(bundle_path, (3, 6), "")
                add = exec_bundle(read_only, verbose_python(dirs, python),
                                  pod_env("ADD", container_id=container), conf("0.3.0"),
                                  socket_path)
                assert add.returncode == 0, (python, add.stdout)
                assert not imported_runpy(add.stderr), python
                assert json.loads(add.stdout)["cniVersion"] == "0.3.0"
                # Every module of the bundle came from the blob's finder; zipimport never
                # served anything from the archive.
                assert archive_imports(add.stderr, bundle_path) == {}, python
                bundled = set(re.findall(rb"^import '?([\w.]+)'? # <class '__main__\.Bundled'>",
                                         add.stderr, re.MULTILINE))
                assert {b"cni_client.__main__", b"minigrpc"} <= bundled, (python, tag)
                ours = set(re.findall(rb"^import '?((?:cni_client|minigrpc)"
                                      rb"(?:\.[\w.]+)?)'? ", add.stderr, re.MULTILINE))
                assert ours == bundled, (python, ours - bundled)
                delete = exec_bundle(read_only, path_dir,
                                     pod_env("DEL", container_id=container), conf("0.3.0"),
                                     socket_path)
                assert (delete.returncode, delete.stdout, delete.stderr) == (0, b"", b"")
        assert directory_snapshot(directory) == before
    finally:
        os.chmod(directory, 0o755)


def test_the_archive_also_runs_as_a_python_file(dist_bundle: Bundle) -> None:
    """``python dist/antrea`` (no prologue) runs the same entry point, as ``__main__.py``."""
    found = installed_interpreters()
    if not found:
        pytest.skip("none of the required interpreters is installed")
    for python in found:
        run = run_plugin({"CNI_COMMAND": "VERSION"}, command=[python, "-I", "-S",
                                                              dist_bundle.path])
        assert (run.returncode, run.stdout, run.stderr) == (0, VERSION_BYTES, b""), python


def test_interpreters_too_old_for_the_bundle(bundle: Bundle, dirs: TempDirs) -> None:
    """On every interpreter found: VERSION, or one CNI error JSON (code 999) naming both
    versions where the bundle needs a newer Python."""
    found = installed_interpreters()
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


#: Run inside the bundle (its blob finder installed) and from the sources: imports the plugin's
#: own modules, says whether typing got loaded, and describes every
#: NamedTuple class they define the way code can see one.  The bookkeeping that typing and some
#: versions' namedtuple add (``_field_defaults``, ``_field_types``, ``_fields_defaults``,
#: ``_source``) is left out: the bundle's classes are plain tuple classes without it
#: (tools/strip_typing.py), and nothing reads it.
NAMED_TUPLE_PROBE = """
import sys
from minigrpc.driver import attempts
from minigrpc.net import sockets
from minigrpc.protocol import client_outcome, headers, status, targets, wire
from cni_client import client, go_compat, messages, skel
print("typing loaded:", "typing" in sys.modules)
for module in (attempts, client_outcome, headers, sockets, status, targets, wire):
    for name in sorted(vars(module)):
        cls = getattr(module, name)
        if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
            continue
        if cls.__module__ != module.__name__:
            continue
        values = tuple(range(len(cls._fields) - len(cls.__new__.__defaults__ or ())))
        made = cls(*values)
        names = [n for n in dir(cls) if not n.startswith("__")
                 and n not in ("_field_defaults", "_field_types", "_fields_defaults", "_source")]
        print(module.__name__, name, cls._fields, cls.__new__.__defaults__ or (), repr(made),
              made == tuple(made), repr(made._replace(**{cls._fields[0]: -1})),
              hasattr(made, "__dict__"), cls.__doc__ == cls.__doc__.strip() or cls.__doc__[:40],
              names)
print(str(status.CallStatus(status.Code.UNAVAILABLE, "gone", number=14)))
print(headers.read_response_headers([(b":status", b"200"), (b"content-type",
                                                           b"application/grpc")]).is_grpc)
print(targets.parse_target("unix:/x.sock").dial_text)
"""


def bundle_entry_code(bundle: Bundle) -> str:
    """The ``-c`` code of the bundle's prologue."""
    with open(bundle.path, "rb") as handle:
        head = handle.read(20000).decode("latin-1")
    match = re.search(r"-c '(.*?)' \"\$0\"", head, re.DOTALL)
    assert match, head[:2000]
    return match.group(1)


def test_the_bundle_compiles_its_own_modules_without_typing(dist_bundle: Bundle) -> None:
    """Our modules' bytecode in the bundle imports no typing (tools/strip_typing.py): on each
    interpreter, importing them from the blob leaves typing unloaded, and their NamedTuple
    classes behave as those of the sources (fields, defaults, repr, ``_replace``, no
    ``__dict__``, methods and properties)."""
    assert "bytecode keeps typing in minigrpc/protocol/status.py" not in dist_bundle.report
    found = installed_interpreters()
    if not found:
        pytest.skip("none of the required interpreters is installed")
    entry = bundle_entry_code(dist_bundle).replace(
        "from cni_client.__main__ import main\nsys.exit(main())\n", NAMED_TUPLE_PROBE)
    assert NAMED_TUPLE_PROBE in entry
    for python in found:
        bundled = subprocess.run([python, "-I", "-S", "-c", entry, dist_bundle.path],
                                 capture_output=True, timeout=60, check=False)
        assert bundled.returncode == 0, (python, bundled.stderr.decode()[-2000:])
        from_sources = subprocess.run(
            [python, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {REPO_ROOT!r})"
                                       + NAMED_TUPLE_PROBE],
            capture_output=True, timeout=60, check=False)
        assert from_sources.returncode == 0, (python, from_sources.stderr.decode()[-2000:])
        lines, expected = bundled.stdout.decode().splitlines(), from_sources.stdout.decode()
        # Neither loads typing: the sources keep it for type checkers only (TYPE_CHECKING).
        assert lines[0] == "typing loaded: False", python
        assert lines == expected.splitlines(), python
        assert len(lines) >= 9, lines  # the six NamedTuple classes and the three calls
