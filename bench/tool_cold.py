"""Cold start of ``python -m minigrpc health`` on each interpreter, against its bare start.

A health probe runs every few seconds on every pod that has one (a Kubernetes exec probe), so
its cost is its cold start, as the CNI plugin's is.  Here every interpreter the machine has
(the system ``python3``, pyenv's CPython 3.6 to 3.13, ``pypy3``:
:func:`bench.node_cold.find_interpreters`) runs ``python -m minigrpc health unix:SOCKET`` from a
copy of the sources (the untimed first round writes each interpreter's bytecode there) against
a local health server; beside each run stands the same interpreter's bare start, ``python -c
pass``, with the same environment and directory.  The ratio of the two medians is the figure
that travels between machines.

The server is grpc-go's interop server with its health service (tests/go/interop_server
``-addons``), else minigrpc's (tests/cli/serve.py) where Go is missing: a server that answers at
once, so that the probe's own start dominates.  Each round runs every interpreter's bare start
and probe back to back (in an order swapped from round to round), so that the two figures of a
ratio meet the same load from other processes, and rotates the interpreters; wall time, CPU time
and peak RSS are measured as in :mod:`bench.node_cold` (:func:`bench.coldstart.run_once`,
through tests/go/coldrun where it can be built).

Target (docs/benchmarks.md): on every interpreter, the probe's median at most
:data:`WALL_LIMIT` times the bare start's.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from bench.coldstart import launcher_or_reason, one_minute_load, run_once
from bench.node_cold import find_interpreters, markdown_table, stage_median
from bench.peers import PeerError, PeerProcess
from bench.stats import ratio

#: The target: the probe's median wall time over the bare start's.
WALL_LIMIT = 3.0

STAGES = ("bare", "health")

#: What a SERVING probe prints (grpc_health_probe's line).
SERVING = b"status: SERVING\n"

#: The markers around the section in docs/benchmarks.md and the README's table, so that
#: ``python -m bench --only tool`` can replace them alone.
DOC_BEGIN = "<!-- tool-cold: begin (python -m bench --only tool) -->"
DOC_END = "<!-- tool-cold: end -->"
README_BEGIN = "<!-- tool-cold-table: begin (python -m bench --only tool) -->"
README_END = "<!-- tool-cold-table: end -->"


def copy_sources(repo_root: str, work_dir: str) -> str:
    """The minigrpc package, copied without bytecode into a directory of its own."""
    source = os.path.join(work_dir, "src")
    shutil.copytree(os.path.join(repo_root, "minigrpc"), os.path.join(source, "minigrpc"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return source


def health_server(repo_root: str, socket_path: str) -> PeerProcess:
    """grpc-go's interop server with its health service, else minigrpc's (not started)."""
    try:
        from tests.go_peers import GoUnavailable, build_go_peers
    except ImportError:  # a checkout without tests/: nothing to serve health with
        raise PeerError("tests/ is missing: no health server") from None
    try:
        binary = build_go_peers().binary("interop_server")
    except GoUnavailable:
        return PeerProcess("minigrpc health server",
                           [sys.executable, "-m", "tests.cli.serve", "--impl", "minigrpc",
                            "--listen", "unix:" + socket_path], cwd=repo_root)
    return PeerProcess("grpc-go health server",
                       [binary, "-addons", "-stop-on-stdin-eof", "-listen", "unix:" + socket_path],
                       cwd=repo_root)


def _samples() -> Dict[str, Any]:
    return {"wall_ms": [], "cpu_ms": [], "rss_mib": [], "failures": []}


def measure(interpreters: Sequence[Dict[str, Any]], source: str, socket_path: str,
            work_dir: str, runs: int, progress: Callable[[int, int], None],
            launcher: Optional[str]) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """``runs`` timed rounds after one untimed round: both stages of every interpreter, the
    interpreters in an order rotated from round to round."""
    results = {entry["key"]: {stage: _samples() for stage in STAGES} for entry in interpreters}
    stdin_path = os.path.join(work_dir, "empty")
    with open(stdin_path, "wb"):
        pass
    # The same environment for both stages, without the caller's PYTHON* variables (so the
    # untimed round writes the bytecode: PYTHONDONTWRITEBYTECODE is not passed on).
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
    for run in range(-1, runs):
        shift = max(run, 0) % max(len(interpreters), 1)
        order = list(interpreters[shift:]) + list(interpreters[:shift])
        # Each interpreter's two stages back to back, their order swapped from round to round:
        # the pair meets the same load from other processes, and the ratio is what is judged.
        stages = STAGES if run % 2 else STAGES[::-1]
        for entry in order:
            for stage in stages:
                python = entry["path"]
                command = ([python, "-c", "pass"] if stage == "bare" else
                           [python, "-m", "minigrpc", "health", "unix:" + socket_path])
                outcome = run_once(command, env, stdin_path, source, launcher)
                ok = outcome.status == 0 and (stage == "bare" or outcome.stdout == SERVING)
                record = results[entry["key"]][stage]
                if not ok:
                    text = (outcome.stderr or outcome.stdout).decode("utf-8", "replace")
                    record["failures"].append(f"exit {outcome.status}: {text.strip()[:300]}")
                elif run >= 0:
                    record["wall_ms"].append(outcome.wall_s * 1000.0)
                    record["cpu_ms"].append(outcome.cpu_s * 1000.0)
                    record["rss_mib"].append(outcome.maxrss_kib / 1024.0)
        if run >= 0:
            progress(run + 1, runs)
    return results


def run_section(repo_root: str, runs: int, log: Callable[[str], None]) -> Dict[str, Any]:
    """Copy the sources, start the server, measure; never raises PeerError."""
    found, notes = find_interpreters()
    section: Dict[str, Any] = {"runs": runs, "limits": {"wall": WALL_LIMIT},
                               "interpreters": [], "notes": notes, "load": [one_minute_load()]}
    with tempfile.TemporaryDirectory(prefix="mg-bench-tool-") as work_dir:
        source = copy_sources(repo_root, work_dir)
        section["interpreters"] = [{"key": interpreter.key, "label": interpreter.label,
                                    "version": interpreter.version, "path": interpreter.path}
                                   for interpreter in found]
        launcher, why_not = launcher_or_reason()
        section["rss_measured"] = launcher is not None
        if launcher is None:
            notes.append("Peak RSS not shown: without tests/go/coldrun every child counts the "
                         f"harness's own pages ({why_not}).")
        socket_path = os.path.join(work_dir, "health.sock")
        try:
            server = health_server(repo_root, socket_path).start()
        except PeerError as exc:
            section["error"] = str(exc)
            return section
        section["server"] = server.name
        section["cpus"] = os.cpu_count()
        try:
            log(f"health probe cold start: {len(section['interpreters'])} interpreters x {runs} "
                f"rounds against the {server.name}")
            section["measured"] = measure(
                section["interpreters"], source, socket_path, work_dir, runs,
                lambda done, total: log(f"  health probe cold start {done}/{total}"), launcher)
        finally:
            server.stop()
            section["load"].append(one_minute_load())
    return section


# ---------------------------------------------------------------------------------------------
# The report.


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _times(value: Optional[float], reference: Optional[float]) -> str:
    if value is None:
        return "failed"
    share = ratio(value, reference)
    return f"{value:,.1f} ({share:.1f}×)" if share is not None else f"{value:,.1f}"


def verdict(section: Dict[str, Any], key: str) -> str:
    share = ratio(stage_median(section, key, "health", "wall_ms"),
                  stage_median(section, key, "bare", "wall_ms"))
    if share is None:
        return "not measured"
    return "**met**" if share <= section.get("limits", {}).get("wall", WALL_LIMIT) else (
        "**not met**")


HEADER = ("interpreter", "bare start ms", "health ms (× bare)", "CPU ms: bare → health (×)",
          "peak RSS MiB: bare → health", "verdict")


def render_rows(section: Dict[str, Any]) -> List[List[str]]:
    rows = []
    for interpreter in section.get("interpreters", []):
        key = interpreter["key"]

        def median(stage: str, field: str, key: str = key) -> Optional[float]:
            return stage_median(section, key, stage, field)

        rss = (f"{_ms(median('bare', 'rss_mib'))} → {_ms(median('health', 'rss_mib'))}"
               if section.get("rss_measured", True) else "not measured")
        rows.append([interpreter["label"], _ms(median("bare", "wall_ms")),
                     _times(median("health", "wall_ms"), median("bare", "wall_ms")),
                     f"{_ms(median('bare', 'cpu_ms'))} → "
                     + _times(median("health", "cpu_ms"), median("bare", "cpu_ms")),
                     rss, verdict(section, key)])
    return rows


def targets(results: Dict[str, Any]) -> List[Any]:
    """The targets table's rows: per interpreter, the probe's median over the bare start's."""
    from bench.report import Target

    section = results.get("tool") or {}
    limit = section.get("limits", {}).get("wall", WALL_LIMIT)
    found = []
    for interpreter in section.get("interpreters", []):
        key = interpreter["key"]
        found.append(Target(
            "tool", f"wall: python -m minigrpc health / bare start, {interpreter['label']}",
            stage_median(section, key, "health", "wall_ms"),
            stage_median(section, key, "bare", "wall_ms"), "<=", limit,
            ratio(stage_median(section, key, "health", "cpu_ms"),
                  stage_median(section, key, "bare", "cpu_ms"))))
    return found


def render_section(results: Dict[str, Any]) -> List[str]:
    """The docs/benchmarks.md section, between :data:`DOC_BEGIN` and :data:`DOC_END`."""
    section = results.get("tool")
    if not section:
        return []
    lines = [DOC_BEGIN, "## Cold start of the health probe on each interpreter", ""]
    if section.get("error"):
        return [*lines, f"Not measured: {section['error']}", "", DOC_END]
    limit = section["limits"]["wall"]
    measured_at = section.get("date") or results.get("meta", {}).get("date", "?")
    lines += [
        "`python -m minigrpc health unix:SOCKET` from a copy of the sources (bytecode written "
        f"by an untimed first round), against the {section.get('server', 'server')} on a unix "
        "socket, and beside it the same interpreter's bare start, `python -c pass`, with the "
        f"same environment and directory. Medians of {section['runs']} rounds after one "
        "untimed round, each interpreter's two runs back to back; wall time from fork to "
        f"reaped exit. Measured {measured_at}.", "",
        f"**Target, per interpreter:** the probe's median at most {limit:g}× the bare start's "
        "(a Kubernetes exec probe runs it every few seconds). The CPU and RSS columns are not "
        "judged.", ""]
    lines += markdown_table(HEADER, render_rows(section))
    notes = list(section.get("notes", []))
    notes += [f"{interpreter['label']} {stage}: {len(record['failures'])} failed, e.g. "
              f"{record['failures'][0][:200]}"
              for interpreter in section.get("interpreters", [])
              for stage, record in section.get("measured", {}).get(interpreter["key"],
                                                                   {}).items()
              if record["failures"]]
    load = section.get("load")
    if load:
        notes.append("1-minute load average at the start and the end: "
                     + " and ".join(f"{value:.2f}" for value in load)
                     + f" on {section.get('cpus', '?')} CPUs.")
    lines += [""] + [f"- {note}" for note in notes]
    return [*lines, "", DOC_END]


def render_readme_table(results: Dict[str, Any]) -> List[str]:
    """The README's table (between :data:`README_BEGIN` and :data:`README_END`)."""
    section = results.get("tool") or {}
    lines = [README_BEGIN]
    if "measured" in section:
        lines += [f"Cold start of `python -m minigrpc health` against a local server, beside "
                  f"the same interpreter's bare start (target: at most "
                  f"{section['limits']['wall']:g}× its time):", ""]
        lines += markdown_table(HEADER, render_rows(section))
        lines += ["", f"Medians of {section['runs']} interleaved rounds on the machine of "
                  "[docs/benchmarks.md](docs/benchmarks.md) (section \"Cold start of the "
                  "health probe on each interpreter\"), `python -m bench --only tool`."]
    return [*lines, README_END]
