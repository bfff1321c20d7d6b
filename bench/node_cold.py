"""Cold start of ``dist/antrea`` on each node interpreter, against that interpreter's bare start.

A node runs the plugin once per pod and command, on whatever Python 3 it has (README, "The CNI
plugin"), so its speed is its cold start on each of them.  Here every interpreter the machine has
(the system ``python3``, pyenv's CPython 3.6 to 3.13, ``pypy3``) runs the bundle as a node would:
``make dist``'s build (the pinned h2 releases, a bytecode tree per interpreter), exec'd as a file
through its ``sh`` prologue with a PATH that holds only that interpreter as ``python3``.  Beside
each plugin run stands the same interpreter's bare start, ``python -I -S -c pass`` (the flags the
prologue passes), and the ratio of the two medians is the figure that travels between machines.
A Go plugin on grpc-go and containernetworking's skel (tests/go/antrea_cni, what Antrea ships)
runs the same commands for comparison.

One round runs each stage (bare start, ADD, CHECK, DEL) for every interpreter before the next
stage, in an order rotated from round to round, so that a burst of load from another process
lands on all of them alike; ADD, CHECK and DEL of one round act on the same container, CHECK
carrying the ADD's result as ``prevResult`` (CNI SPEC.md, "CHECK: Check container's networking
is as expected").  The network config is at cniVersion 1.0.0, the oldest that has CHECK in both
plugins.  Wall time and peak RSS are measured as in :mod:`bench.coldstart` (fork to reaped exit,
the child's own ``ru_maxrss``).

Target (docs/benchmarks.md): on every interpreter, each command's median at most
:data:`WALL_LIMIT` times the bare start's and its peak RSS at most :data:`RSS_LIMIT` times.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench.coldstart import (
    built_bundle,
    launcher_or_reason,
    one_minute_load,
    plugin_env,
    run_once,
    start_agent,
)
from bench.stats import median, ratio

#: The target: a command's median wall time over the bare start's, and its peak RSS over it.
WALL_LIMIT = 3.0
RSS_LIMIT = 1.5

#: The stages of a round, in order; the last three are CNI commands.
STAGES = ("bare", "ADD", "CHECK", "DEL")
COMMANDS = STAGES[1:]

#: The network config every command gets (plus ``prevResult`` for CHECK).
NETWORK_CONFIG: Dict[str, Any] = {"cniVersion": "1.0.0", "ipam": {"type": "host-local"},
                                  "name": "antrea", "type": "antrea"}

#: The node systems each Python stands for (README, "The CNI plugin").
NODE_SYSTEMS = {
    "3.6": "RHEL 8", "3.7": "Amazon Linux 2, Photon 3", "3.8": "Ubuntu 20.04",
    "3.9": "RHEL 9, AL2023, Debian 11", "3.10": "Ubuntu 22.04", "3.11": "Debian 12",
    "3.12": "Ubuntu 24.04", "3.13": "",
}

#: The Go plugin's key in the results.
GO_KEY = "go"

#: The markers around the section in docs/benchmarks.md and around the README's table, so that
#: ``python -m bench --only nodes`` can replace them alone.
DOC_BEGIN = "<!-- node-cold: begin (python -m bench --only nodes) -->"
DOC_END = "<!-- node-cold: end -->"
README_BEGIN = "<!-- node-cold-table: begin (python -m bench --only nodes) -->"
README_END = "<!-- node-cold-table: end -->"


class Interpreter:
    """One Python a node may have: where it is and what the report calls it."""

    def __init__(self, key: str, label: str, path: str, version: str) -> None:
        self.key = key
        self.label = label
        self.path = path
        self.version = version


def _version(path: str) -> Optional[Tuple[str, str]]:
    """(implementation, "X.Y.Z") of an interpreter, or None when it does not run."""
    try:
        done = subprocess.run([path, "-I", "-S", "-c", "import sys, platform; print("
                               "sys.implementation.name, platform.python_version())"],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.decode("ascii", "replace").split()
    return (words[0], words[1]) if done.returncode == 0 and len(words) == 2 else None


def find_interpreters() -> Tuple[List[Interpreter], List[str]]:
    """The system ``python3``, each pyenv CPython 3.6-3.13 (newest patch) and ``pypy3``; and
    notes on the versions this machine lacks."""
    found: List[Interpreter] = []
    notes: List[str] = []
    system = shutil.which("python3", path=os.defpath)
    if system is not None:
        version = _version(system)
        if version is not None and version[0] == "cpython":
            found.append(Interpreter("system", f"system python3 ({version[1]})", system,
                                     version[1]))
    root = os.environ.get("PYENV_ROOT", "")
    if not root and shutil.which("pyenv") is not None:
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, timeout=30,
                                  check=True).stdout.decode().strip()
        except (OSError, subprocess.SubprocessError):
            root = ""
    for minor in range(6, 14):
        wanted = f"3.{minor}"
        candidates = glob.glob(os.path.join(root, "versions", f"{wanted}.*", "bin",
                                            f"python{wanted}")) if root else []
        candidates = [path for path in candidates
                      if re.search(rf"/{re.escape(wanted)}\.\d+/bin/", path)]
        candidates.sort(key=lambda path: int(re.findall(r"/3\.\d+\.(\d+)", path)[0]),
                        reverse=True)
        on_path = shutil.which(f"python{wanted}")
        if on_path is not None and "/shims/" not in on_path:
            candidates.append(on_path)
        for path in candidates:
            version = _version(path)
            if version is not None:
                found.append(Interpreter(wanted, f"CPython {version[1]}", path, version[1]))
                break
        else:
            notes.append(f"No CPython {wanted} on this machine (pyenv or python{wanted}).")
    pypy = shutil.which("pypy3")
    version = _version(pypy) if pypy is not None else None
    if pypy is not None and version is not None:
        found.append(Interpreter("pypy3", f"PyPy {version[1]}", pypy, version[1]))
    else:
        notes.append("No PyPy (pypy3) on this machine.")
    return found, notes


def build_make_dist(repo_root: str, work_dir: str) -> Tuple[Optional[str], List[str]]:
    """``make dist``'s bundle in ``work_dir``: (its path, the build's output lines) or (None,
    why not); built once per harness run (:func:`bench.coldstart.built_bundle`)."""
    return built_bundle(repo_root, os.path.join(work_dir, "antrea"))


def go_plugin_or_reason() -> Tuple[Optional[str], str, str]:
    """(the Go plugin's binary, its versions, "") or (None, "", why not)."""
    try:
        from tests.go_peers import GoUnavailable, build_go_peers
    except ImportError as exc:  # a checkout without tests/
        return None, "", f"tests/go_peers.py cannot be imported: {exc}"
    try:
        peers = build_go_peers()
    except GoUnavailable as exc:
        return None, "", str(exc)
    return (peers.binary("antrea_cni"),
            f"grpc-go {peers.grpc_go_version}, {peers.go_version}", "")


class Runner:
    """Executes the stages of one entry (an interpreter or the Go plugin)."""

    def __init__(self, key: str, bare: Optional[List[str]], plugin: List[str],
                 path_dir: Optional[str]) -> None:
        self.key = key
        self.bare = bare
        self.plugin = plugin
        self.path_dir = path_dir
        #: The last ADD's result per container, for CHECK's prevResult.
        self.results: Dict[str, Any] = {}


def _samples() -> Dict[str, Any]:
    return {"wall_ms": [], "cpu_ms": [], "rss_mib": [], "failures": []}


def measure(runners: Sequence[Runner], socket_path: str, work_dir: str, runs: int,
            progress: Callable[[int, int], None], launcher: Optional[str]
            ) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """``runs`` timed rounds after one untimed round (see the module docstring)."""
    results = {runner.key: {stage: _samples() for stage in STAGES} for runner in runners}
    bare_stdin = os.path.join(work_dir, "empty")
    with open(bare_stdin, "wb"):
        pass
    for run in range(-1, runs):
        shift = max(run, 0) % len(runners)
        order = list(runners[shift:]) + list(runners[:shift])
        for stage in STAGES:
            for runner in order:
                record = results[runner.key][stage]
                container = f"node{run + 1:03d}{runner.key.replace('.', '')}"
                if stage == "bare":
                    if runner.bare is None:
                        continue
                    outcome = run_once(runner.bare, {}, bare_stdin, work_dir, launcher)
                    ok, why = outcome.status == 0, f"exit {outcome.status}"
                else:
                    config = dict(NETWORK_CONFIG)
                    if stage == "CHECK" and container in runner.results:
                        config["prevResult"] = runner.results[container]
                    stdin_path = os.path.join(work_dir, f"{stage}-{runner.key}.json")
                    with open(stdin_path, "w", encoding="utf-8") as handle:
                        json.dump(config, handle)
                    extra = {"PATH": runner.path_dir} if runner.path_dir else None
                    outcome = run_once(runner.plugin,
                                       plugin_env(socket_path, stage, container, work_dir, extra),
                                       stdin_path, work_dir, launcher)
                    ok = outcome.status == 0 and (stage != "ADD" or outcome.stdout[:1] == b"{")
                    why = (f"exit {outcome.status}: "
                           + (outcome.stdout or outcome.stderr).decode("utf-8", "replace")[:300])
                    if ok and stage == "ADD":
                        runner.results[container] = json.loads(outcome.stdout)
                    elif stage == "DEL":
                        runner.results.pop(container, None)
                if run < 0:
                    if not ok:
                        record["failures"].append(f"warm-up: {why}")
                elif ok:
                    record["wall_ms"].append(outcome.wall_s * 1000.0)
                    record["cpu_ms"].append(outcome.cpu_s * 1000.0)
                    record["rss_mib"].append(outcome.maxrss_kib / 1024.0)
                else:
                    record["failures"].append(why)
        if run >= 0:
            progress(run + 1, runs)
    return results


def run_section(repo_root: str, runs: int, log: Callable[[str], None]) -> Dict[str, Any]:
    """Build the bundle and the Go plugin, start the agent, measure; never raises PeerError."""
    interpreters, notes = find_interpreters()
    section: Dict[str, Any] = {"runs": runs, "network_config": NETWORK_CONFIG,

                               "limits": {"wall": WALL_LIMIT, "rss": RSS_LIMIT},
                               "interpreters": [], "notes": notes}
    with tempfile.TemporaryDirectory(prefix="mg-bench-nodes-") as work_dir:
        bundle, build_report = build_make_dist(repo_root, work_dir)
        section["build"] = [line for line in build_report
                            if line.startswith(("bytecode for", "falls back", "needs Python",
                                                "tools/build_dist.py"))]
        if bundle is not None:
            section["build"].append(f"the bundle is {os.path.getsize(bundle):,} bytes")
        if bundle is None:
            section["error"] = "; ".join(build_report)
            return section
        runners: List[Runner] = []
        for interpreter in interpreters:
            path_dir = os.path.join(work_dir, f"path-{interpreter.key}")
            os.makedirs(path_dir)
            os.symlink(interpreter.path, os.path.join(path_dir, "python3"))
            runners.append(Runner(interpreter.key, [interpreter.path, "-I", "-S", "-c", "pass"],
                                  [bundle], path_dir))
            section["interpreters"].append({"key": interpreter.key, "label": interpreter.label,
                                            "version": interpreter.version,
                                            "path": interpreter.path})
        go_binary, go_versions, why_not = go_plugin_or_reason()
        if go_binary is not None:
            runners.append(Runner(GO_KEY, None, [go_binary], None))
            section["go"] = {"versions": go_versions}
        else:
            notes.append(f"No Go plugin row: {why_not}.")
        launcher, why_not = launcher_or_reason()
        section["rss_measured"] = launcher is not None
        if launcher is None:
            notes.append("Peak RSS not judged: without tests/go/coldrun every child counts the "
                         f"harness's own pages ({why_not}).")
        socket_path = os.path.join(work_dir, "cni.sock")
        agent = start_agent(repo_root, socket_path, section)
        if agent is None:
            return section
        section["cpus"] = os.cpu_count()
        try:
            log(f"node cold start: {len(runners)} entries x {runs} rounds against the {agent.name}")
            section["measured"] = measure(
                runners, socket_path, work_dir, runs,
                lambda done, total: log(f"  node cold start {done}/{total}"), launcher)
        finally:
            agent.stop()
            section["load"].append(one_minute_load())
    return section


# ---------------------------------------------------------------------------------------------
# The report.


def stage_median(section: Dict[str, Any], key: str, stage: str, field: str) -> Optional[float]:
    samples = section.get("measured", {}).get(key, {}).get(stage, {}).get(field)
    return median(samples) if samples else None


def verdicts(section: Dict[str, Any]) -> Dict[str, Tuple[str, List[str]]]:
    """Interpreter key -> (verdict, the measures that miss the target: "time", "RSS")."""
    limits = section.get("limits", {"wall": WALL_LIMIT, "rss": RSS_LIMIT})
    found: Dict[str, Tuple[str, List[str]]] = {}
    for interpreter in section.get("interpreters", []):
        key = interpreter["key"]
        bare_wall = stage_median(section, key, "bare", "wall_ms")
        bare_rss = stage_median(section, key, "bare", "rss_mib")
        missed: List[str] = []
        measured = True
        for command in COMMANDS:
            wall = ratio(stage_median(section, key, command, "wall_ms"), bare_wall)
            rss = ratio(stage_median(section, key, command, "rss_mib"), bare_rss)
            if wall is None or rss is None:
                measured = False
                continue
            if wall > limits["wall"] and "time" not in missed:
                missed.append("time")
            if (rss > limits["rss"] and section.get("rss_measured", True)
                    and "RSS" not in missed):
                missed.append("RSS")
        if not measured:
            found[key] = ("not measured", missed)
        else:
            found[key] = ("**not met**" if missed else "**met**", missed)
    return found


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _with_ratio(value: Optional[float], reference: Optional[float], digits: int = 1) -> str:
    if value is None:
        return "failed"
    share = ratio(value, reference)
    return f"{value:,.{digits}f} ({share:.1f}×)" if share is not None else f"{value:,.{digits}f}"


def render_rows(section: Dict[str, Any], systems: bool) -> List[List[str]]:
    """One row per interpreter (then the Go plugin): bare start, each command with its ratio,
    the ADD's peak RSS with its ratio, and the verdict."""
    judged = verdicts(section)
    rows: List[List[str]] = []
    for interpreter in section.get("interpreters", []):
        key = interpreter["key"]
        bare_wall = stage_median(section, key, "bare", "wall_ms")
        bare_rss = stage_median(section, key, "bare", "rss_mib")
        label = interpreter["label"]
        if systems and NODE_SYSTEMS.get(key):
            label += f" ({NODE_SYSTEMS[key]})"
        row = [label, _ms(bare_wall)]
        row += [_with_ratio(stage_median(section, key, command, "wall_ms"), bare_wall)
                for command in COMMANDS]
        peak = max((value for value in (stage_median(section, key, command, "rss_mib")
                                        for command in COMMANDS) if value is not None),
                   default=None)
        row += [f"{_ms(bare_rss)} → " + _with_ratio(peak, bare_rss)]
        bare_cpu = stage_median(section, key, "bare", "cpu_ms")
        row += [f"{_ms(bare_cpu)} → "
                + _with_ratio(stage_median(section, key, "ADD", "cpu_ms"), bare_cpu)]
        verdict, missed = judged[key]
        row.append(verdict + (f": {', '.join(missed)}" if missed else ""))
        rows.append(row)
    if GO_KEY in section.get("measured", {}):
        row = ["Go plugin (grpc-go, CNI skel)", ""]
        row += [_ms(stage_median(section, GO_KEY, command, "wall_ms")) for command in COMMANDS]
        peak = max((value for value in (stage_median(section, GO_KEY, command, "rss_mib")
                                        for command in COMMANDS) if value is not None),
                   default=None)
        row += [_ms(peak), _ms(stage_median(section, GO_KEY, "ADD", "cpu_ms")),
                "for comparison"]
        rows.append(row)
    return rows


HEADER = ("interpreter", "bare start ms", "ADD ms (× bare)", "CHECK ms (× bare)",
          "DEL ms (× bare)", "peak RSS MiB: bare → plugin (×)", "CPU ms: bare → ADD (×)",
          "verdict")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """A Markdown table: header, separator, one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def render_section(results: Dict[str, Any]) -> List[str]:
    """The docs/benchmarks.md section, between :data:`DOC_BEGIN` and :data:`DOC_END`."""
    section = results.get("nodes")
    if not section:
        return []
    lines = [DOC_BEGIN, "## Cold start on each node interpreter", ""]
    if section.get("error"):
        return [*lines, f"Not measured: {section['error']}", "", DOC_END]
    limits = section["limits"]
    measured_at = section.get("date") or results.get("meta", {}).get("date", "?")
    lines += [
        f"`dist/antrea` as `make dist` builds it, exec'd through its `sh` prologue with only "
        "the interpreter of the row on PATH (as `python3`), against the "
        f"{section.get('agent', 'agent')}: ADD, CHECK (with the ADD's result as prevResult) "
        f"and DEL of one container per round, cniVersion "
        f"{section['network_config']['cniVersion']}. Beside each, the same interpreter's bare "
        f"start, `python -I -S -c pass`. Medians of {section['runs']} rounds after one "
        "untimed round, interpreters interleaved within each stage; wall time from fork to "
        "reaped exit, peak RSS the child's own (`ru_maxrss`, the larger of the three "
        f"commands'). Measured {measured_at}.", "",
        f"**Target, per interpreter:** every command's median at most {limits['wall']:g}× the "
        f"bare start's, its peak RSS at most {limits['rss']:g}×. The CPU column (user + system "
        "time of the child, medians) is not judged; it moves far less than wall time when "
        "other processes load the machine.", ""]
    lines += markdown_table(HEADER, render_rows(section, systems=True))
    notes = list(section.get("notes", []))
    failures = [f"{interpreter['label']} {stage}: {len(record['failures'])} failed, e.g. "
                f"{record['failures'][0][:200]}"
                for interpreter in [*section.get("interpreters", []),
                                    {"key": GO_KEY, "label": "Go plugin"}]
                for stage, record in section.get("measured", {}).get(interpreter["key"],
                                                                      {}).items()
                if record["failures"]]
    go = section.get("go")
    if go:
        notes.append(f"Go plugin: tests/go/antrea_cni on {go['versions']} and "
                     "containernetworking's skel (Debian's golang-github-appc-cni-dev), one "
                     "connection and one call per command, as Antrea's plugin.")
    notes += [f"Build: {line}" for line in section.get("build", [])]
    load = section.get("load")
    if load:
        notes.append("1-minute load average at the start and the end: "
                     + " and ".join(f"{value:.2f}" for value in load)
                     + f" on {section.get('cpus', '?')} CPUs; bare starts slow down with the "
                     "load as much as plugin runs do, which is why the ratios, not the "
                     "milliseconds, are judged.")
    lines += [""] + [f"- {note}" for note in [*notes, *failures]]
    return [*lines, "", DOC_END]


def render_readme_table(results: Dict[str, Any]) -> List[str]:
    """The README's table (between :data:`README_BEGIN` and :data:`README_END`)."""
    section = results.get("nodes") or {}
    lines = [README_BEGIN]
    if "measured" in section:
        limits = section["limits"]
        lines += [f"Cold start of `dist/antrea` on each interpreter, against that interpreter's "
                  f"bare start (target: at most {limits['wall']:g}× its time and "
                  f"{limits['rss']:g}× its peak RSS for every command), and the Go plugin:", ""]
        lines += markdown_table(HEADER, render_rows(section, systems=True))
        lines += ["", f"Medians of {section['runs']} interleaved rounds on the machine of "
                  "[docs/benchmarks.md](docs/benchmarks.md) (section \"Cold start on each node "
                  "interpreter\"), `python -m bench --only nodes`."]
    return [*lines, README_END]
