"""Run grpcio's own unit tests on minigrpc and on grpcio, and compare the two.

minigrpc promises that code written for grpcio runs unchanged on it; grpcio's Python unit
tests are the fullest statement of what "unchanged" means: two suites of grpc's source release,
``src/python/grpcio_tests/tests/unit`` (the blocking API, 37 modules) and
``src/python/grpcio_tests/tests_aio/unit`` (``grpc.aio``, 29 modules).  This script runs them
twice, in two venvs:

* **minigrpc**: minigrpc installed as a package, no grpcio anywhere, and ``import grpc``
  resolving to :func:`minigrpc.install_as_grpc` (a ``sitecustomize`` on ``PYTHONPATH``, so the
  subprocesses some tests start get it too);
* **grpcio**: the newest grpcio that installs, for the reference figures.

Nothing of grpc's is kept in this repository: ``prepare`` downloads the release from Debian's
archive (the ``grpc`` source package's orig tarball, checked against the SHA-256 of Debian's
signed ``.dsc``), unpacks only ``src/python/grpcio_tests`` and the interop test protos the
asyncio tests import (``src/proto/grpc/testing``) into the cache (``$MINIGRPC_CACHE``, else
``$XDG_CACHE_HOME/minigrpc``, else ``~/.cache/minigrpc``) and generates their stubs with
grpcio-tools::

    make grpcio-unit                                     # all of it: what .ci/run does
    python tools/grpcio_unit_tests.py prepare             # download, unpack, generate
    tox -e grpcio-unit-minigrpc                           # run (the script's ``run``)
    python tools/grpcio_unit_tests.py report [--write-docs]

Each module runs in a pytest process of its own (unittest semantics: only ``TestCase``
classes are collected), with a per-test timeout (``--timeout``, 30 s; grpcio's slowest test
takes 10 s) so that a hang is a failure and is reported as a hang; a module whose process does
not exit after its tests is killed and reported.  Tests left out are listed in
:data:`EXCLUDED`, each with its reason: only tests of grpcio's private modules and of xDS.

``report`` compares the two runs: the target is that minigrpc passes at least
:data:`TARGET_RATIO` of the tests grpcio passes, with no hang; it exits 1 otherwise.
``--write-docs`` rewrites ``docs/grpcio-unit-tests.md``, whose summary line the README's
compatibility section shows (tools/render_docs.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "build" / "grpcio-unit"
DOC_PATH = REPO_ROOT / "docs" / "grpcio-unit-tests.md"

#: The grpc release whose tests run, and where Debian keeps its source.  The digest is the
#: ``Checksums-Sha256`` line of ``grpc_1.51.1-3.dsc`` (bookworm), which Debian signs.
GRPC_RELEASE = "1.51.1"
TARBALL = f"grpc_{GRPC_RELEASE}.orig.tar.gz"
TARBALL_URLS = (
    f"https://deb.debian.org/debian/pool/main/g/grpc/{TARBALL}",
    f"http://deb.debian.org/debian/pool/main/g/grpc/{TARBALL}",
)
TARBALL_SHA256 = "b55696fb249669744de3e71acc54a9382bea0dce7cd5ba379b356b12b82d4229"
TESTS_PREFIX = f"grpc-{GRPC_RELEASE}/src/python/grpcio_tests/"
#: The protos some of the tests import the generated modules of (in the unpacked tree).
PROTO_DIR = "tests/testing/proto"
#: The interop service's protos, which the asyncio tests' server implements; unpacked from the
#: release's ``src/proto`` to the same relative path, where their imports expect them.
INTEROP_PROTO_DIR = "src/proto/grpc/testing"
INTEROP_PROTOS = tuple(
    f"{INTEROP_PROTO_DIR}/{name}" for name in ("empty.proto", "messages.proto", "test.proto")
)
PROTOS = (
    *(f"{PROTO_DIR}/{name}" for name in ("requests.proto", "services.proto")),
    *INTEROP_PROTOS,
)
#: The last stub ``prepare`` generates: when it is there, all are.
LAST_STUB = f"{INTEROP_PROTO_DIR}/test_pb2_grpc.py"


class Suite(NamedTuple):
    """One directory of grpc's test modules."""

    #: Prefix of its modules' names in results and docs ("" for the blocking suite, whose names
    #: came first and stay as they were; ``aio/`` keeps ``aio/_metadata_test`` apart from
    #: ``_metadata_test``).
    prefix: str
    directory: str
    title: str


SUITES = (
    Suite("", "tests/unit", "unit tests"),
    Suite("aio/", "tests_aio/unit", "asyncio unit tests"),
)

#: minigrpc passes at least this share of the tests grpcio passes.
TARGET_RATIO = 0.95
DEFAULT_TIMEOUT = 30.0
#: How long a module's process may take to exit once its results are written.
EXIT_GRACE = 20.0


class Excluded(NamedTuple):
    """A test left out of both runs, and why."""

    test: str  # ``module::Class::method``
    reason: str


_AUTH = (
    "tests grpc._auth, grpcio's private module behind google_call_credentials "
    "(Google's oauth2 plugins), not grpc's API"
)
_XDS = "xDS (a control plane serving listener and cluster resources); out of minigrpc's scope"

#: Every test left out, by name, with its reason.  Only tests of grpcio's private modules
#: (``grpc._auth``, ``grpc._grpcio_metadata``, ``grpc._cython``, ``Server.__del__`` called by
#: hand) and of xDS may be here.
EXCLUDED: Tuple[Excluded, ...] = (
    Excluded("_auth_test::GoogleCallCredentialsTest::test_google_call_credentials_success", _AUTH),
    Excluded("_auth_test::GoogleCallCredentialsTest::test_google_call_credentials_error", _AUTH),
    Excluded(
        "_auth_test::AccessTokenAuthMetadataPluginTest::test_google_call_credentials_success",
        _AUTH,
    ),
    Excluded(
        "_version_test::VersionTest::test_get_version",
        "compares grpc.__version__ with grpc._grpcio_metadata, grpcio's private build module",
    ),
    Excluded(
        "_server_wait_for_termination_test::ServerWaitForTerminationTest::test_unblock_by_del",
        "calls Server.__del__() by hand and expects it to stop the server; minigrpc's Server "
        "has no __del__ (a server that is still referenced by its own threads is not garbage)",
    ),
    Excluded(
        "aio/client_stream_unary_interceptor_test::TestStreamUnaryClientInterceptor::"
        "test_intercepts_prohibit_mixing_style",
        "expects grpc._cython.cygrpc.UsageError, the class in grpcio's compiled extension; "
        "minigrpc has no grpc._cython (whose presence says grpcio is loaded) and raises "
        "grpc.aio.UsageError, the public name of that class",
    ),
    Excluded("_xds_credentials_test::XdsCredentialsTest::test_xds_creds_fallback_ssl", _XDS),
    Excluded("_xds_credentials_test::XdsCredentialsTest::test_xds_creds_fallback_insecure", _XDS),
    Excluded("_xds_credentials_test::XdsCredentialsTest::test_start_xds_server", _XDS),
)


# -- where things are ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """The download and unpack directory, outside the repository."""
    explicit = os.environ.get("MINIGRPC_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minigrpc"


def release_dir() -> Path:
    return cache_dir() / f"grpc-{GRPC_RELEASE}"


def tests_root() -> Path:
    """The unpacked ``grpcio_tests`` directory: the tests' import root (``tests.unit...``)."""
    return release_dir() / "grpcio_tests"


def suite_of(module: str) -> Suite:
    """The suite a module name (as in results: ``_abort_test``, ``aio/call_test``) is in."""
    return next(s for s in reversed(SUITES) if module.startswith(s.prefix))


def module_path(module: str) -> str:
    """A module's file, relative to :func:`tests_root`."""
    suite = suite_of(module)
    return f"{suite.directory}/{module[len(suite.prefix):]}.py"


def unit_modules() -> List[str]:
    """Every test module of every suite, by its name in results."""
    return sorted(
        suite.prefix + path.stem
        for suite in SUITES
        for path in (tests_root() / suite.directory).glob("*_test.py")
    )


# -- prepare: download, unpack, generate ----------------------------------------------------------


def _download(target: Path) -> None:
    errors = []
    for url in TARBALL_URLS:
        partial = target.with_suffix(".partial")
        try:
            with urllib.request.urlopen(url, timeout=60) as answer, open(partial, "wb") as out:
                shutil.copyfileobj(answer, out)
        except OSError as exc:
            errors.append(f"{url}: {exc}")
            continue
        digest = hashlib.sha256(partial.read_bytes()).hexdigest()
        if digest != TARBALL_SHA256:
            partial.unlink()
            errors.append(f"{url}: SHA-256 {digest}, expected {TARBALL_SHA256}")
            continue
        partial.rename(target)
        return
    raise SystemExit("cannot download grpc's source release:\n  " + "\n  ".join(errors))


def _unpack(tarball: Path, destination: Path) -> None:
    """Extract only ``src/python/grpcio_tests`` and the interop protos (plain files and
    directories)."""
    staging = destination.with_name(destination.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    release_prefix = f"grpc-{GRPC_RELEASE}/"
    protos = {release_prefix + proto: proto for proto in INTEROP_PROTOS}
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if member.name in protos:
                relative = Path(protos[member.name])
            elif member.name.startswith(TESTS_PREFIX) and (member.isfile() or member.isdir()):
                relative = Path(member.name[len(TESTS_PREFIX):])
            else:
                continue
            if relative.is_absolute() or ".." in relative.parts:
                continue
            path = staging / relative
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            path.write_bytes(source.read())
    staging.rename(destination)


def _generate_stubs(root: Path) -> None:
    """``requests_pb2`` / ``services_pb2(_grpc)`` for the tests that import them."""
    import importlib.util

    if importlib.util.find_spec("grpc_tools") is None:
        raise SystemExit(
            "prepare needs grpcio-tools in the running Python (the dev venv has it: "
            "`make grpcio-unit` uses .venv/bin/python)"
        )
    command = [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.",
               "--grpc_python_out=.", *PROTOS]
    subprocess.run(command, cwd=root, check=True)


def prepare() -> Path:
    """Download, check and unpack grpc's tests once; generate their stubs once."""
    release = release_dir()
    release.mkdir(parents=True, exist_ok=True)
    tarball = release / TARBALL
    if not tarball.exists():
        _download(tarball)
    root = tests_root()
    if not all((root / proto).is_file() for proto in INTEROP_PROTOS):
        shutil.rmtree(root, ignore_errors=True)
        _unpack(tarball, root)
    if not _stubs_current(root):
        _generate_stubs(root)
    return root


def _stubs_current(root: Path) -> bool:
    """The stubs are there, and made by the running grpcio-tools: stubs left in the cache by
    another grpcio-tools are made again, so that both runs import what the installed release
    generates (and the minigrpc run meets its template, whatever the release)."""
    import importlib.metadata
    import re

    stub = root / LAST_STUB
    if not stub.exists():
        return False
    made_by = re.search(r"GRPC_GENERATED_VERSION = '([^']+)'", stub.read_text())
    try:
        tools = importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError:
        return True  # nothing to make them with: _generate_stubs would say so
    return made_by is None or made_by.group(1) == tools


# -- run ----------------------------------------------------------------------------------------


def _implementation(against: str) -> str:
    """Check that ``import grpc`` will be what the run claims, and name it."""
    import importlib.util

    if against == "minigrpc":
        if importlib.util.find_spec("grpc") is not None:
            raise SystemExit("the minigrpc run needs a venv without grpcio (`import grpc` works)")
        import minigrpc

        return f"minigrpc {minigrpc.__version__}"
    import grpc

    if not getattr(grpc, "__file__", None):
        raise SystemExit("the grpcio run needs grpcio installed")
    return f"grpcio {grpc.__version__}"


def _alias_dir() -> Path:
    """A directory with a ``sitecustomize`` that makes ``import grpc`` minigrpc's alias."""
    directory = RESULTS_DIR / "alias"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        "# Written by tools/grpcio_unit_tests.py: `import grpc` is minigrpc in this process\n"
        "# and in every Python process it starts.\n"
        "import minigrpc\n\nminigrpc.install_as_grpc()\n",
        encoding="utf-8",
    )
    return directory


class ModuleRun(NamedTuple):
    """What one module's pytest process produced."""

    module: str
    tests: Dict[str, Dict[str, Any]]
    #: Why none of its tests ran (an import error), or None.
    error: Optional[str]
    #: The process did not exit on its own and was killed.
    killed: bool
    seconds: float


def _test_id(case: ElementTree.Element) -> str:
    """``module::Class::method``, the module by its name in results (``aio/call_test``)."""
    classname = case.get("classname", "")
    module, _, klass = classname.rpartition(".")
    package, _, stem = module.rpartition(".")
    suite = next(
        (s for s in SUITES if s.directory.replace("/", ".") == package), SUITES[0]
    )
    return f"{suite.prefix}{stem}::{klass}::{case.get('name')}"


def _normalise(text: str) -> str:
    """Leave this machine's paths and object addresses out of what the docs quote."""
    for path, name in ((str(tests_root()), "<grpcio_tests>"), (str(REPO_ROOT), "<repo>"),
                       (sys.prefix, "<venv>"), (os.path.expanduser("~"), "~")):
        text = text.replace(path, name)
    return re.sub(r"0x[0-9a-f]{6,}", "0x...", text)


def _parse_junit(path: Path) -> Tuple[Dict[str, Dict[str, Any]], Optional[str]]:
    tests: Dict[str, Dict[str, Any]] = {}
    collection_error: Optional[str] = None
    for case in ElementTree.parse(path).iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error"}.get(child.tag, "skipped")
                message = (child.get("message") or (child.text or "")).strip()
                break
        if not case.get("classname"):  # a module that failed to import
            collection_error = message or "collection failed"
            continue
        first_line = _normalise(message.splitlines()[0]) if message else ""
        tests[_test_id(case)] = {
            "outcome": outcome,
            "message": first_line[:300],
            "hang": "Timeout" in first_line and "pytest-timeout" in message,
            "seconds": round(float(case.get("time") or 0.0), 3),
        }
    return tests, collection_error


def run_module(module: str, timeout: float, env: Dict[str, str], out_dir: Path) -> ModuleRun:
    """One module in a pytest process of its own; a hang becomes a failure, not a stall."""
    file_name = module.replace("/", "-")
    xml = out_dir / f"{file_name}.xml"
    log = out_dir / f"{file_name}.log"
    for stale in (xml, log):
        if stale.exists():
            stale.unlink()
    excluded = [e.test for e in EXCLUDED if e.test.startswith(module + "::")]
    command = [
        sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
        "--timeout", str(timeout), "--timeout-method", "signal",
        # unittest's rules: TestCase classes only (grpc's modules have helper functions
        # named test_*, which pytest would otherwise collect as tests).
        "-o", "python_classes=", "-o", "python_functions=",
        "-o", "junit_family=xunit1", f"--junitxml={xml}",
        module_path(module),
    ]
    for test in excluded:
        command += ["--deselect", module_path(module) + test[len(module):]]
    started = time.monotonic()
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, cwd=tests_root(), env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        killed = False
        # Tests end on their own or at the per-test timeout; the bound below only catches a
        # process that hangs outside any test (teardown after a timeout, or at exit).
        bound = started + timeout * 60 + 120
        while process.poll() is None:
            now = time.monotonic()
            written = xml.exists() and xml.stat().st_mtime + EXIT_GRACE < time.time()
            if written or now > bound:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                killed = True
                break
            time.sleep(0.5)
    seconds = time.monotonic() - started
    if not xml.exists():
        return ModuleRun(module, {}, "the process was killed before it wrote results", True,
                         seconds)
    tests, collection_error = _parse_junit(xml)
    if collection_error is not None:
        collection_error = _last_error_line(log) or collection_error
    return ModuleRun(module, tests, collection_error, killed, seconds)


def _last_error_line(log: Path) -> Optional[str]:
    """The ``E   SomeError: ...`` line pytest printed for a module that did not import."""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("E   ") and "Error" in line:
            return _normalise(line[4:].strip())[:300]
    return None


def run(against: str, timeout: float, jobs: int, modules: Sequence[str]) -> Path:
    """Run the modules against one implementation; write ``build/grpcio-unit/<against>.json``."""
    root = tests_root()
    if not (root / LAST_STUB).exists():
        raise SystemExit(
            f"grpc's tests are not prepared in {root}: run `make grpcio-unit`, or "
            "`python tools/grpcio_unit_tests.py prepare` with a Python that has grpcio-tools"
        )
    implementation = _implementation(against)
    out_dir = RESULTS_DIR / against
    out_dir.mkdir(parents=True, exist_ok=True)
    path_entries = [str(root)]
    if against == "minigrpc":
        path_entries.insert(0, str(_alias_dir()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path_entries), PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("GRPC_VERBOSITY", "ERROR")
    every = unit_modules()
    # A name ending in "/" (``aio/``) stands for its suite's modules.
    selected = [
        found for name in modules
        for found in ([m for m in every if m.startswith(name)] if name.endswith("/") else [name])
    ] or every
    excluded_modules = {
        module for module in selected
        if _module_tests_all_excluded(module)
    }
    started = time.monotonic()
    results: List[ModuleRun] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [
            pool.submit(run_module, module, timeout, env, out_dir)
            for module in selected if module not in excluded_modules
        ]
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            results.append(result)
            print(_module_line(result), flush=True)
    summary = {
        "implementation": implementation,
        "python": platform.python_version(),
        "grpc_release": GRPC_RELEASE,
        "timeout": timeout,
        "jobs": jobs,
        "seconds": round(time.monotonic() - started, 1),
        "modules": {
            r.module: {"error": r.error, "killed": r.killed, "seconds": round(r.seconds, 1)}
            for r in sorted(results)
        },
        "tests": {test: outcome for r in sorted(results) for test, outcome in r.tests.items()},
    }
    output = RESULTS_DIR / f"{against}.json"
    output.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{implementation}: {summary['seconds']} s; results in {output}")
    return output


def _module_tests_all_excluded(module: str) -> bool:
    """A module every one of whose tests is excluded is not started at all."""
    source = tests_root() / module_path(module)
    names = [e.test for e in EXCLUDED if e.test.startswith(module + "::")]
    if not names:
        return False
    text = source.read_text(encoding="utf-8")
    defined = text.count("\n    def test") + text.count("\n    async def test")
    return len(names) >= defined


def _module_line(result: ModuleRun) -> str:
    counts: Dict[str, int] = {}
    for outcome in result.tests.values():
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    hangs = sum(1 for outcome in result.tests.values() if outcome["hang"])
    parts = [f"{count} {name}" for name, count in sorted(counts.items())]
    if hangs:
        parts.append(f"{hangs} HUNG")
    if result.error:
        parts.append(f"import error: {result.error}")
    if result.killed:
        parts.append("killed after its tests")
    return f"  {result.module:<42} {result.seconds:6.1f} s  " + ", ".join(parts)


# -- report -------------------------------------------------------------------------------------


class Comparison(NamedTuple):
    """The two runs of one suite, test by test, over the tests either run knows."""

    suite: Suite
    minigrpc: Dict[str, Any]
    grpcio: Dict[str, Any]
    #: test id -> (minigrpc outcome, grpcio outcome); ``error`` for a module that did not import.
    outcomes: Dict[str, Tuple[str, str]]

    def passed(self, side: int) -> List[str]:
        return [test for test, pair in self.outcomes.items() if pair[side] == "passed"]

    @property
    def grpcio_passed(self) -> List[str]:
        return self.passed(1)

    @property
    def both_passed(self) -> List[str]:
        return [t for t, (mini, ref) in self.outcomes.items() if mini == ref == "passed"]

    @property
    def ratio(self) -> float:
        reference = len(self.grpcio_passed)
        return len(self.both_passed) / reference if reference else 0.0

    @property
    def modules(self) -> List[str]:
        """The suite's modules either run started."""
        started = set(self.minigrpc["modules"]) | set(self.grpcio["modules"])
        return sorted(m for m in started if suite_of(m) == self.suite)

    @property
    def excluded(self) -> List[Excluded]:
        return [e for e in EXCLUDED if suite_of(e.test.split("::")[0]) == self.suite]

    def hangs(self, run: Dict[str, Any]) -> List[str]:
        hung = [
            test for test, outcome in run["tests"].items()
            if outcome["hang"] and test in self.outcomes
        ]
        hung += [
            f"{module} (killed)" for module, info in run["modules"].items()
            if info["killed"] and module in self.modules
        ]
        return sorted(hung)


def _outcome(run: Dict[str, Any], test: str) -> str:
    found = run["tests"].get(test)
    if found is not None:
        return str(found["outcome"])
    module = test.split("::")[0]
    info = run["modules"].get(module)
    if info is None:
        return "not run"
    return "error"  # its module did not import, or the process died before this test


def _why(run: Dict[str, Any], test: str) -> str:
    """The first line of a test's failure, or why its module never ran it."""
    found = run["tests"].get(test)
    if found is not None:
        return str(found["message"])
    info = run["modules"].get(test.split("::")[0])
    if info is None:
        return "not run"
    if info["error"]:
        return f"the module did not import: {info['error']}"
    return "not reached: the module's process was killed" if info["killed"] else "not reported"


def compare(minigrpc_run: Dict[str, Any], grpcio_run: Dict[str, Any], suite: Suite) -> Comparison:
    tests = sorted(
        test for test in set(minigrpc_run["tests"]) | set(grpcio_run["tests"])
        if suite_of(test.split("::")[0]) == suite
    )
    outcomes = {t: (_outcome(minigrpc_run, t), _outcome(grpcio_run, t)) for t in tests}
    return Comparison(suite, minigrpc_run, grpcio_run, outcomes)


def summary_line(comparison: Comparison) -> str:
    """One sentence with one suite's figures; the README shows it."""
    reference = len(comparison.grpcio_passed)
    both = len(comparison.both_passed)
    mini_passed = len(comparison.passed(0))
    hangs = len(comparison.hangs(comparison.minigrpc))
    excluded = comparison.excluded
    modules = set(comparison.modules) | {e.test.split("::")[0] for e in excluded}
    return (
        f"grpc {GRPC_RELEASE}'s own {comparison.suite.title} (`{comparison.suite.directory}`, "
        f"{len(comparison.outcomes) + len(excluded)} tests in {len(modules)} modules, "
        f"{len(excluded)} of them excluded): "
        f"{comparison.grpcio['implementation']} passes {reference}; "
        f"{comparison.minigrpc['implementation']} passes {mini_passed}, {both} of them among "
        f"grpcio's ({100.0 * comparison.ratio:.1f}%), with {hangs} hung."
    )


def _load(against: str) -> Dict[str, Any]:
    path = RESULTS_DIR / f"{against}.json"
    if not path.exists():
        raise SystemExit(f"no results in {path}: run `tox -e grpcio-unit-{against}` first")
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _suite_section(comparison: Comparison) -> List[str]:
    """One suite's part of the docs: every module, every difference."""
    mini, ref = comparison.minigrpc, comparison.grpcio
    lines = [
        f"## {comparison.suite.title.capitalize()} (`{comparison.suite.directory}`)",
        "",
        "| module | tests | grpcio passes | minigrpc passes | of grpcio's |",
        "|---|---|---|---|---|",
    ]
    by_module: Dict[str, List[Tuple[str, str]]] = {}
    for test, pair in comparison.outcomes.items():
        by_module.setdefault(test.split("::")[0], []).append(pair)
    for module in comparison.modules:
        pairs = by_module.get(module, [])
        ref_passed = sum(1 for _, r in pairs if r == "passed")
        mini_passed = sum(1 for m, _ in pairs if m == "passed")
        both = sum(1 for m, r in pairs if m == r == "passed")
        note = " (did not import)" if mini["modules"].get(module, {}).get("error") else ""
        lines.append(
            f"| `{module}` | {len(pairs)} | {ref_passed} | {mini_passed}{note} | {both} |"
        )
    lines += ["", "### Tests grpcio passes and minigrpc does not", ""]
    missing: List[str] = []
    unimported: Dict[str, int] = {}
    for test, (m, r) in comparison.outcomes.items():
        if r != "passed" or m == "passed":
            continue
        module = test.split("::")[0]
        if test not in mini["tests"] and mini["modules"].get(module, {}).get("error"):
            unimported[module] = unimported.get(module, 0) + 1
            continue
        missing.append(f"- `{test}` ({m}): {_why(mini, test)}")
    missing += [
        f"- `{module}`, {count} tests: the module did not import: "
        f"{mini['modules'][module]['error']}"
        for module, count in sorted(unimported.items())
    ]
    lines += missing or ["None."]
    lines += ["", "### Tests grpcio does not pass", ""]
    lines += [
        f"- `{test}` ({r} on grpcio, {m} on minigrpc): {_why(ref, test)}"
        for test, (m, r) in comparison.outcomes.items() if r != "passed"
    ] or ["None."]
    return [*lines, ""]


def render_doc(comparisons: Sequence[Comparison]) -> str:
    """docs/grpcio-unit-tests.md: the figures, every module, every difference."""
    mini, ref = comparisons[0].minigrpc, comparisons[0].grpcio
    lines = [
        "# grpcio's own unit tests on minigrpc",
        "",
        "Generated by `tools/grpcio_unit_tests.py report --write-docs` from the last",
        "`make grpcio-unit` run; do not edit by hand. The tests are those of grpc's",
        f"{GRPC_RELEASE} source release (from Debian's `grpc` source package):",
        *(f"`src/python/grpcio_tests/{s.directory}` ({s.title})," for s in SUITES),
        "run unchanged: once in a venv with minigrpc and no grpcio,",
        "where `import grpc` is `minigrpc.install_as_grpc()`, once with grpcio.",
        "",
        "<!-- summary -->",
        *(summary_line(comparison) for comparison in comparisons),
        "<!-- /summary -->",
        "",
        f"Python {mini['python']}; per-test timeout {mini['timeout']:g} s (a hang is a failure); "
        f"wall time {mini['seconds']:g} s (minigrpc) and {ref['seconds']:g} s (grpcio), "
        f"{mini['jobs']} modules at a time.",
        "",
    ]
    for comparison in comparisons:
        lines += _suite_section(comparison)
    lines += ["## Excluded", ""]
    lines += [f"- `{e.test}`: {e.reason}" for e in EXCLUDED]
    return "\n".join(lines) + "\n"


def report(write_docs: bool) -> int:
    minigrpc_run, grpcio_run = _load("minigrpc"), _load("grpcio")
    comparisons = [compare(minigrpc_run, grpcio_run, suite) for suite in SUITES]
    ok = True
    for comparison in comparisons:
        print(summary_line(comparison))
        for side, run in (("minigrpc", comparison.minigrpc), ("grpcio", comparison.grpcio)):
            for hung in comparison.hangs(run):
                print(f"  HUNG on {side}: {hung}")
        for test, (mini, ref) in comparison.outcomes.items():
            if ref == "passed" and mini != "passed":
                print(f"  minigrpc {mini}: {test}  {_why(comparison.minigrpc, test)[:120]}")
        ok = ok and comparison.ratio >= TARGET_RATIO and not comparison.hangs(minigrpc_run)
    if write_docs:
        DOC_PATH.write_text(render_doc(comparisons), encoding="utf-8")
        print(f"wrote {DOC_PATH.relative_to(REPO_ROOT)}")
    if not ok:
        print(f"target missed: in each suite, at least {TARGET_RATIO:.0%} of grpcio's passes, "
              "and no hang")
    return 0 if ok else 1


def main(argv: Optional[Iterable[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="download grpc's release, unpack its tests, make stubs")
    run_parser = commands.add_parser("run", help="run the tests in this Python's venv")
    run_parser.add_argument("against", choices=("minigrpc", "grpcio"))
    run_parser.add_argument(
        "modules", nargs="*",
        help="module names (_abort_test, aio/call_test; aio/ for a suite; default: all)",
    )
    run_parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    run_parser.add_argument("--jobs", type=int, default=2, help="modules run at a time")
    report_parser = commands.add_parser("report", help="compare the two runs")
    report_parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "prepare":
        print(f"grpc {GRPC_RELEASE}'s unit tests ready in {prepare()}")
        return 0
    if args.command == "run":
        run(args.against, args.timeout, args.jobs, args.modules)
        return 0
    return report(args.write_docs)


if __name__ == "__main__":
    sys.exit(main())
