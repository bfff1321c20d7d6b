"""Cold plugin invocation: exec the plugin for one ADD against a running agent, until it exits.

The runtime starts the plugin once per pod (docs/cni-plugin-behaviour.md, "Invocation"), so a fresh
interpreter, its imports, one connection and one RPC are the whole cost.  Each variant is executed
the way a runtime does it: the file itself (shebang), no arguments, the CNI environment, the network
config on stdin.  Wall time runs from just before the fork to the moment the child has been
reaped; peak RSS is that child's own ``ru_maxrss``, read by a small launcher that forks it
(:func:`run_once`: forked by this harness, it would count the harness's pages too).  After
every timed ADD an untimed DEL for the same container keeps the agent's IP pool bounded.
Variants are interleaved (A B C D, B C D A, ...) so that a burst of load from
another process lands on all of them alike.
"""

from __future__ import annotations

import atexit
import datetime
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench.peers import PeerError, PeerProcess, bench_server
from bench.stats import median

#: The network config of the shipped conflist, as the runtime injects it
#: (docs/cni-plugin-behaviour.md, "Invocation").
NETWORK_CONFIG = (b'{"cniVersion":"0.3.0","ipam":{"type":"host-local"},'
                  b'"name":"antrea","type":"antrea"}')

#: The import floor of the cold-start target (docs/benchmarks.md): h2 plus the generated protobuf
#: module, what a plugin on h2 and protobuf has to load. The plugin itself no longer imports
#: protobuf (cni_client.messages), so it can come in under this floor.
FLOOR_CODE = "import h2.connection; import cni_client.cni_pb2"

#: Seconds one plugin run may take before it counts as hung (and is killed).
RUN_TIMEOUT = 30.0


class Variant:
    """One way of running the plugin: a command line plus what the report calls it."""

    def __init__(self, key: str, label: str, command: Sequence[str], note: str = "") -> None:
        self.key = key
        self.label = label
        self.command = list(command)
        self.note = note


def _run_quietly(command: Sequence[str], cwd: Optional[str] = None) -> Optional[str]:
    """Run a set-up step; None when it worked, else the tail of its output."""
    try:
        completed = subprocess.run(command, cwd=cwd, capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if completed.returncode == 0:
        return None
    output = (completed.stderr or completed.stdout).decode("utf-8", "replace").strip()
    return f"exit {completed.returncode}: {output[-300:]}"


def clean_install(repo_root: str, work_dir: str) -> Tuple[Optional[str], str]:
    """A throwaway venv with the project installed from its wheel, as a node would have it.

    Why: the development venv holds an *editable* install, whose ``.pth`` start-up hook imports
    pathlib, re, urllib and more before any plugin code runs (about 10 ms per interpreter start
    here), which no deployed plugin pays.  The throwaway venv gets a regular install (pip
    builds the wheel from the checkout, offline, and installs it with its console script) and
    reaches h2, protobuf and grpcio through a path-only ``.pth`` naming the development venv's
    site-packages, whose own ``.pth`` hooks are therefore not run.  Returns (the throwaway
    venv's python, "") or (None, why not)."""
    import sysconfig

    wheels = os.path.join(work_dir, "wheels")
    venv = os.path.join(work_dir, "venv")
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = os.path.join(work_dir, "source")
    os.makedirs(source)
    for name in os.listdir(repo_root):
        path = os.path.join(repo_root, name)
        if name in ("minigrpc", "cni_client"):
            shutil.copytree(path, os.path.join(source, name),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif name in ("setup.cfg", "pyproject.toml", "setup.py", "README.md", "LICENSE"):
            shutil.copy2(path, source)
    failure = _run_quietly([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--no-build-isolation", "--no-index",
                            "--disable-pip-version-check", "-w", wheels, source],
                           cwd=work_dir)
    if failure is None:
        failure = _run_quietly([sys.executable, "-m", "venv", "--without-pip", venv])
    if failure is not None:
        return None, failure
    python = os.path.join(venv, "bin", "python")
    probe = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                            "['purelib'])"], capture_output=True, timeout=60)
    site_packages = probe.stdout.decode().strip()
    if probe.returncode != 0 or not site_packages:
        return None, "cannot locate the throwaway venv's site-packages"
    with open(os.path.join(site_packages, "bench-dependencies.pth"), "w",
              encoding="utf-8") as handle:
        handle.write(sysconfig.get_paths()["purelib"] + "\n")
    wheel_files = [name for name in os.listdir(wheels) if name.endswith(".whl")]
    if len(wheel_files) != 1:
        return None, f"expected one wheel, found {wheel_files}"
    failure = _run_quietly([python, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--no-index", "--disable-pip-version-check",
                            os.path.join(wheels, wheel_files[0])], cwd=work_dir)
    if failure is not None:
        return None, failure
    return python, ""


#: ``make dist``'s bundle, built once per harness run (a build takes about 12 s) into a
#: directory removed when the harness exits, with the build's output lines; or None and why not.
#: The sources do not change during a run, so the node rows and the cold rows, which both need
#: it, take a copy each.
_BUILT: Dict[str, Tuple[Optional[str], List[str]]] = {}


def built_bundle(repo_root: str, output: str) -> Tuple[Optional[str], List[str]]:
    """A copy of ``make dist``'s bundle at ``output``: (``output``, the build's output lines),
    or (None, why not)."""
    if repo_root not in _BUILT:
        _BUILT[repo_root] = _build_bundle(repo_root)
    built, lines = _BUILT[repo_root]
    if built is None:
        return None, lines
    os.makedirs(os.path.dirname(output), exist_ok=True)
    shutil.copy2(built, output)
    return output, lines


def _build_bundle(repo_root: str) -> Tuple[Optional[str], List[str]]:
    tool = os.path.join(repo_root, "tools", "build_dist.py")
    if not os.path.exists(tool):
        return None, ["tools/build_dist.py does not exist yet"]
    directory = tempfile.mkdtemp(prefix="mg-bench-dist-")
    atexit.register(shutil.rmtree, directory, True)
    output = os.path.join(directory, "antrea")
    try:
        completed = subprocess.run([sys.executable, tool, "--output", output],
                                   cwd=repo_root, capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, ["tools/build_dist.py did not finish within 600 s"]
    if completed.returncode != 0 or not os.access(output, os.X_OK):
        tail = (completed.stderr or completed.stdout).decode("utf-8", "replace").strip()
        return None, [f"tools/build_dist.py failed (exit {completed.returncode}): {tail[-400:]}"]
    return output, completed.stdout.decode("utf-8", "replace").splitlines()


def build_dist(repo_root: str, work_dir: str) -> Tuple[Optional[str], str]:
    """``dist/antrea`` in ``work_dir`` (:func:`built_bundle`): its path, or None and why not."""
    built, lines = built_bundle(repo_root, os.path.join(work_dir, "dist", "antrea"))
    return built, "" if built is not None else "; ".join(lines)


def _python_version(interpreter: str) -> str:
    try:
        completed = subprocess.run([interpreter, "-c", "import platform;"
                                    "print(platform.python_version())"],
                                   capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return completed.stdout.decode("ascii", "replace").strip() or "?"


def plugin_variants(repo_root: str, work_dir: str) -> Tuple[List[Variant], List[str]]:
    """The variants to compare, and notes on any that could not be included.

    Every variant but the system-python one runs on the same interpreter: the throwaway
    venv's (:func:`clean_install`) or, if that cannot be built, this venv's."""
    notes: List[str] = []
    variants: List[Variant] = []
    python, why_not = clean_install(repo_root, work_dir)
    if python is not None:
        notes.append("All variants but the system-python one run on a throwaway venv holding a "
                     "regular (wheel) install of the project, not the development venv, whose "
                     "editable install adds about 10 ms of `.pth` start-up hook to every "
                     "interpreter start.")
        script = os.path.join(os.path.dirname(python), "antrea-cni")
        variants.append(Variant("installed", "antrea-cni (installed)", [script],
                                "console script of a `pip install` from the wheel"))
    else:
        python = sys.executable
        notes.append(f"No throwaway venv ({why_not}); variants run on the development venv.")
        script = os.path.join(os.path.dirname(python), "antrea-cni")
        if os.access(script, os.X_OK):
            variants.append(Variant("installed", "antrea-cni (installed)", [script],
                                    "console script of the development venv"))
        else:
            notes.append("`antrea-cni` is not installed: measured `python -m cni_client`.")
            variants.append(Variant("installed", "python -m cni_client",
                                    [python, "-m", "cni_client"],
                                    "stands in for the console script"))
    dist, note = build_dist(repo_root, work_dir)
    if dist is not None:
        # The zipapp's sh prologue execs the first `python3` on PATH (with -I -S); which one
        # that is, is an accident of PATH (here possibly a pyenv shim, a bash script costing
        # ~100 ms).  Run the archive with the interpreter the installed plugin uses, so that the
        # comparison measures packaging (zipimport) and not the interpreter; and, for
        # information, with the system's python3 (os.defpath), as on a bare node.
        variants.append(Variant("dist", "dist/antrea", [python, dist],
                                "zipapp from tools/build_dist.py, run by the same python"))
        system_python = shutil.which("python3", path=os.defpath)
        if system_python is not None:
            variants.append(Variant(
                "dist-system", "dist/antrea (system python3)", [system_python, dist],
                f"the same zipapp run by {system_python} "
                f"(Python {_python_version(system_python)}), as on a node without pip"))
    else:
        notes.append("dist/antrea skipped: " + note)
    variants.append(Variant(
        "grpcio", "grpcio plugin (bench/grpcio_plugin.py)",
        [python, os.path.join(repo_root, "bench", "grpcio_plugin.py")],
        "same skel, messages and mapping, RPC on grpcio"))
    variants.append(Variant(
        "grpcio-pb2", "grpcio plugin, generated cni_pb2",
        [python, os.path.join(repo_root, "bench", "grpcio_plugin.py"), "--cni-pb2"],
        "the same with the generated protobuf classes, as a grpcio plugin is usually written;"
        " for information"))
    variants.append(Variant("floor", "import floor", [python, "-c", FLOOR_CODE],
                            f"`python -c '{FLOOR_CODE}'`, no RPC"))
    return variants, notes


def agent_process(repo_root: str, socket_path: str) -> PeerProcess:
    """The reference agent (``python -m cni_client.agent``), or the grpcio stand-in."""
    if importlib.util.find_spec("cni_client.agent") is not None:
        return PeerProcess(
            "reference agent",
            [sys.executable, "-m", "cni_client.agent", "--socket", socket_path],
            cwd=repo_root, ready_prefix=None, stops_on_stdin_eof=False,
        )
    server = bench_server("cni-agent-grpcio", socket_path, repo_root)
    server.name = "stand-in agent (grpcio)"
    return server


def start_agent(repo_root: str, socket_path: str, section: Dict[str, Any]
                ) -> Optional[PeerProcess]:
    """The started agent (its name recorded in ``section``), or None with ``section["error"]``
    saying why it did not start."""
    agent = agent_process(repo_root, socket_path)
    try:
        agent.start()
    except PeerError as exc:
        section["error"] = str(exc)
        return None
    section["agent"] = agent.name
    # When and how busy: a section measured alone (python -m bench --only) says so itself.
    section["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section["load"] = [one_minute_load()]
    return agent


def one_minute_load() -> float:
    """The 1-minute load average (other processes slow every run), or -1 where unknown."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0


class RunResult:
    __slots__ = ("cpu_s", "hung", "maxrss_kib", "status", "stderr", "stdout", "wall_s")

    def __init__(self, wall_s: float, maxrss_kib: int, status: int, stdout: bytes,
                 stderr: bytes, hung: bool = False, cpu_s: float = 0.0) -> None:
        self.hung = hung
        self.cpu_s = cpu_s
        self.wall_s = wall_s
        self.maxrss_kib = maxrss_kib
        self.status = status
        self.stdout = stdout
        self.stderr = stderr


def launcher_or_reason() -> Tuple[Optional[str], str]:
    """(tests/go/coldrun's binary, "") or (None, why not): the small launcher that measures a
    child's peak RSS without the harness's own pages in it (see :func:`run_once`)."""
    try:
        from tests.go_peers import GoUnavailable, build_go_peers
    except ImportError as exc:  # a checkout without tests/
        return None, f"tests/go_peers.py cannot be imported: {exc}"
    try:
        return build_go_peers().binary("coldrun"), ""
    except GoUnavailable as exc:
        return None, str(exc)


def run_once(command: Sequence[str], env: Dict[str, str], stdin_path: str, cwd: str,
             launcher: Optional[str] = None) -> RunResult:
    """Exec ``command`` with stdin from ``stdin_path``; time it from fork until reaped.

    Linux carries a process's peak RSS across fork and exec: a child forked by this harness
    reports at least the harness's own resident size (about 25 MiB), more than a bare
    interpreter's.  With ``launcher`` (tests/go/coldrun, a small Go program) the child is forked
    by the launcher, which reports the child's own wall time, CPU time and peak RSS."""
    with open(stdin_path, "rb") as stdin, tempfile.TemporaryFile() as stderr, \
            tempfile.TemporaryDirectory(prefix="coldrun-") as scratch:
        report = os.path.join(scratch, "result.json")
        argv = [launcher, "-o", report, "--", *command] if launcher else list(command)
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                                   env=env, cwd=cwd, start_new_session=launcher is not None)
        assert process.stdout is not None
        # A hung plugin is killed after RUN_TIMEOUT (it then shows up as a failed run); with the
        # launcher, its whole session goes, the child included.
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            if launcher:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()

        watchdog = threading.Timer(RUN_TIMEOUT, kill)
        watchdog.start()
        chunks = []
        while True:  # read to EOF, then reap: the child's exit is part of its cost
            chunk = process.stdout.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
        _, wait_status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        watchdog.cancel()
        process.returncode = os.waitstatus_to_exitcode(wait_status)
        process.stdout.close()
        stderr.seek(0)
        error_output = stderr.read()
        if killed.is_set():
            error_output = f"killed after {RUN_TIMEOUT:.0f} s".encode() + b"\n" + error_output
        status, maxrss_kib = process.returncode, usage.ru_maxrss
        cpu_s = usage.ru_utime + usage.ru_stime
        if launcher and not killed.is_set():
            try:
                with open(report, encoding="utf-8") as handle:
                    measured = json.load(handle)
                elapsed, cpu_s = measured["wall_ns"] / 1e9, measured["cpu_ns"] / 1e9
                status, maxrss_kib = measured["status"], measured["maxrss_kib"]
            except (OSError, ValueError, KeyError):
                status = 255
                error_output += b"\ncoldrun wrote no result"
        return RunResult(elapsed, maxrss_kib, status, b"".join(chunks), error_output,
                         killed.is_set(), cpu_s)


def plugin_env(socket_path: str, command: str, container_id: str, work_dir: str,
               extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The runtime's environment plus the six CNI variables (CNI SPEC.md, "Parameters")."""
    env = dict(os.environ)
    env.update({
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        # A path that does not exist: the plugin skips its own-netns check
        # (docs/cni-plugin-behaviour.md, "Where cni_client deliberately differs from the Go
        # plugin").
        "CNI_NETNS": os.path.join(work_dir, "netns", container_id),
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME={container_id};"
                    f"K8S_POD_INFRA_CONTAINER_ID={container_id}",
        "CNI_PATH": "/opt/cni/bin",
        "ANTREA_CNI_SOCKET": socket_path,
    })
    if extra:
        env.update(extra)
    return env


def _failure_text(result: RunResult) -> str:
    detail = (result.stdout or result.stderr).decode("utf-8", "replace").strip()
    return f"exit {result.status}: {detail[:300]}"


def measure(variants: Sequence[Variant], socket_path: str, runs: int, work_dir: str,
            cwd: str, progress: Any = None, launcher: Optional[str] = None
            ) -> Dict[str, Dict[str, Any]]:
    """``runs`` timed ADDs per variant (plus one untimed warm-up each), interleaved."""
    stdin_path = os.path.join(work_dir, "network-config.json")
    with open(stdin_path, "wb") as handle:
        handle.write(NETWORK_CONFIG)
    results: Dict[str, Dict[str, Any]] = {
        v.key: {"wall_ms": [], "cpu_ms": [], "rss_mib": [], "failures": [], "del_failures": 0}
        for v in variants
    }
    for run in range(-1, runs):  # run -1 warms the page cache and writes .pyc files
        shift = max(run, 0) % len(variants)
        order = list(variants[shift:]) + list(variants[:shift])
        for variant in order:
            if results[variant.key].get("hung"):
                continue  # it hung once; every further run would cost RUN_TIMEOUT again
            container_id = f"bench{run + 1:03d}{variant.key}"
            add = run_once(variant.command, plugin_env(socket_path, "ADD", container_id, work_dir),
                           stdin_path, cwd, launcher)
            record = results[variant.key]
            if add.hung:
                record["hung"] = True
            ok = add.status == 0 and (variant.key == "floor" or add.stdout.startswith(b"{"))
            if run >= 0:
                if ok:
                    record["wall_ms"].append(add.wall_s * 1000.0)
                    record["cpu_ms"].append(add.cpu_s * 1000.0)
                    record["rss_mib"].append(add.maxrss_kib / 1024.0)
                else:
                    record["failures"].append(_failure_text(add))
            elif not ok:
                record["failures"].append("warm-up: " + _failure_text(add))
            if variant.key != "floor":
                delete = run_once(variant.command,
                                  plugin_env(socket_path, "DEL", container_id, work_dir),
                                  stdin_path, cwd)
                if delete.status != 0:
                    record["del_failures"] += 1
                if delete.hung:
                    record["hung"] = True
                    record["failures"].append("DEL: " + _failure_text(delete))
        if progress is not None and run >= 0:
            progress(run + 1, runs)
    return results


def import_profile(variant: Variant, socket_path: str, work_dir: str, cwd: str, runs: int,
                   top: int = 12) -> Dict[str, Any]:
    """``runs`` ADDs with ``PYTHONPROFILEIMPORTTIME=1`` (``-X importtime``): where start-up goes.

    One run's numbers move by milliseconds on a busy machine, so every figure is the median
    over the runs.  Returns the median total of the top-level imports, the ``top`` heaviest
    top-level imports as ``(module, cumulative_us, self_us)`` and every module's own (self)
    time."""
    stdin_path = os.path.join(work_dir, "network-config.json")
    walls: List[float] = []
    cumulative: Dict[str, List[int]] = {}
    own: Dict[str, List[int]] = {}
    totals: List[int] = []
    counts: List[int] = []
    for run in range(runs):
        container_id = f"importtime{run}{variant.key}"
        result = run_once(variant.command,
                          plugin_env(socket_path, "ADD", container_id, work_dir,
                                     {"PYTHONPROFILEIMPORTTIME": "1"}),
                          stdin_path, cwd)
        if variant.key != "floor":
            run_once(variant.command, plugin_env(socket_path, "DEL", container_id, work_dir),
                     stdin_path, cwd)
        entries = parse_importtime(result.stderr.decode("utf-8", "replace"))
        walls.append(result.wall_s * 1000.0)
        counts.append(len(entries))
        totals.append(sum(entry[1] for entry in entries if entry[3] == 0))
        for name, cumulative_us, self_us, depth in entries:
            own.setdefault(name, []).append(self_us)
            if depth == 0:
                cumulative.setdefault(name, []).append(cumulative_us)
    top_level = sorted(((name, int(median(values)), int(median(own[name])))
                        for name, values in cumulative.items()),
                       key=lambda entry: entry[1], reverse=True)
    return {
        "runs": runs,
        "total_us": median(totals),
        "modules": int(median(counts)),
        "top": top_level[:top],
        "self_us": {name: median(values) for name, values in own.items()},
        "wall_ms": median(walls),
    }


def parse_importtime(text: str) -> List[Tuple[str, int, int, int]]:
    """``(module, cumulative_us, self_us, depth)`` for each line of ``-X importtime`` output."""
    entries: List[Tuple[str, int, int, int]] = []
    for line in text.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:"):].split("|")
        if len(fields) != 3:
            continue
        try:
            self_us = int(fields[0])
            cumulative_us = int(fields[1])
        except ValueError:
            continue  # the header line
        name = fields[2].rstrip()
        stripped = name.lstrip(" ")
        depth = (len(name) - len(stripped) - 1) // 2
        entries.append((stripped, cumulative_us, self_us, depth))
    return entries


def run_section(repo_root: str, runs: int, profile_runs: int, log: Any) -> Dict[str, Any]:
    """Build what is needed, start the agent, measure every variant; never raises PeerError."""
    section: Dict[str, Any] = {"runs": runs, "variants": [], "notes": [], "importtime": {}}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as work_dir:
        variants, notes = plugin_variants(repo_root, work_dir)
        section["notes"].extend(notes)
        launcher, why_not = launcher_or_reason()
        if launcher is None:
            section["notes"].append("Peak RSS is at least the harness's own (the children are "
                                    f"forked by it): no launcher ({why_not}).")
        socket_path = os.path.join(work_dir, "cni.sock")
        agent = start_agent(repo_root, socket_path, section)
        if agent is None:
            return section
        try:
            log(f"cold start: {len(variants)} variants x {runs} runs against the {agent.name}")
            # cwd = the checkout: `python -c`/`-m` find cni_client there even when the
            # project is not installed; the console script, zipapp and script ignore cwd.
            measured = measure(variants, socket_path, runs, work_dir, repo_root, launcher=launcher,
                               progress=lambda done, total: log(f"  cold start {done}/{total}")
                               if done % 10 == 0 or done == total else None)
            if profile_runs:
                log(f"cold start: -X importtime, {profile_runs} runs per variant")
                for variant in variants:
                    section["importtime"][variant.key] = import_profile(
                        variant, socket_path, work_dir, repo_root, profile_runs)
        finally:
            agent.stop()
            section["load"].append(one_minute_load())
    for variant in variants:
        section["variants"].append({
            "key": variant.key, "label": variant.label, "note": variant.note,
            **measured[variant.key],
        })
    return section
