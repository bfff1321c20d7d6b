"""docs/benchmarks.md (and docs/benchmarks.png when matplotlib is installed) from the results.

The report is generated, never edited by hand: every number in it comes from the results
dictionary that :mod:`bench.__main__` fills.  Ratios are always "minigrpc / reference", so a
ratio's meaning does not depend on whether bigger is better; the targets table says which way
each target points.  Targets are the project's performance goals (medians, ratios on the
machine that runs the benchmarks), built in :func:`targets`.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench import aio_clients, aio_servers, channels, node_cold, tool_cold
from bench.node_cold import markdown_table as _table
from bench.peers import IO_THREAD_SERVER_IMPL
from bench.stats import median, percentile, ratio

MIB = 1 << 20

Row = Sequence[str]


def _fmt(value: Optional[float], digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _fmt_ratio(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def _size_label(size: int) -> str:
    return f"{size // MIB} MiB" if size % MIB == 0 else f"{size} B"


# ---------------------------------------------------------------------------------------------
# Lookups into the results.


def cold_variant(results: Dict[str, Any], key: str) -> Optional[Dict[str, Any]]:
    for variant in results.get("cold", {}).get("variants", []):
        if variant["key"] == key and variant["wall_ms"]:
            return variant  # type: ignore[no-any-return]
    return None


def cold_median(results: Dict[str, Any], key: str, field: str) -> Optional[float]:
    variant = cold_variant(results, key)
    return median(variant[field]) if variant is not None and variant.get(field) else None


def latency_samples(results: Dict[str, Any], client: str, server: str) -> Optional[List[float]]:
    for row in results.get("latency", []):
        if row["client"] == client and row["server"] == server and row["samples_us"]:
            return row["samples_us"]  # type: ignore[no-any-return]
    return None


def latency_p50(results: Dict[str, Any], client: str, server: str) -> Optional[float]:
    samples = latency_samples(results, client, server)
    return median(samples) if samples else None


def latency_cpu(results: Dict[str, Any], client: str, server: str, key: str
                ) -> Optional[float]:
    """Median over rounds of ``cpu_us_per_call`` (client) or ``server_cpu_us_per_call``."""
    for row in results.get("latency", []):
        if row["client"] == client and row["server"] == server and row.get(key):
            return median(row[key])
    return None


def throughput_cpu(results: Dict[str, Any], server: str, connections: str,
                   client: str = "grpcio") -> Optional[float]:
    for row in results.get("throughput", []):
        if (row["server"] == server and row["connections"] == connections
                and row.get("client", "grpcio") == client and row.get("server_cpu_us_per_call")):
            return median(row["server_cpu_us_per_call"])
    return None


def large_rates(results: Dict[str, Any], client: str, server: str, size: int) -> List[float]:
    for row in results.get("large", []):
        if row["client"] == client and row["server"] == server:
            return row["mb_per_s"].get(str(size), [])  # type: ignore[no-any-return]
    return []


def large_median(results: Dict[str, Any], client: str, server: str, size: int) -> Optional[float]:
    rates = large_rates(results, client, server, size)
    return median(rates) if rates else None


def throughput_median(results: Dict[str, Any], server: str, connections: str,
                      client: str = "grpcio") -> Optional[float]:
    for row in results.get("throughput", []):
        if (row["server"] == server and row["connections"] == connections
                and row.get("client", "grpcio") == client and row["calls_per_s"]):
            return median(row["calls_per_s"])
    return None


# ---------------------------------------------------------------------------------------------
# Targets: the project's performance goals.


class Target:
    """One target: ``value / reference`` compared with ``limit`` in the direction ``op``."""

    def __init__(self, area: str, text: str, value: Optional[float],
                 reference: Optional[float], op: str, limit: float,
                 cpu_ratio: Optional[float] = None, informational: bool = False) -> None:
        self.area = area
        #: The lowest and highest ratio of one round's figures, where rounds pair up.
        self.spread: Optional[Tuple[float, float]] = None
        #: Shown beside a target for context, never judged (a baseline no target names).
        self.informational = informational
        self.text = text
        self.ratio = ratio(value, reference)
        self.op = op
        self.limit = limit
        #: The same comparison in CPU time per call (lower is better), where measured.
        self.cpu_ratio = cpu_ratio

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "not measured"
        if self.informational:
            return "for information"
        met = self.ratio <= self.limit if self.op == "<=" else self.ratio >= self.limit
        return "**met**" if met else "**not met**"


def aio_targets(results: Dict[str, Any]) -> List[Target]:
    """minigrpc.aio's client beside the other asyncio clients (bench/aio_clients.py); its PyPy
    rows for information."""
    found: List[Target] = []
    for mine, reference, server, limit, _ratio, cpu_ratio in aio_clients.comparisons(results):
        on_pypy = mine != aio_clients.MINE[0]
        found.append(Target(
            "aio", f"p50: {mine} client / {reference} client ({server} server)",
            aio_clients.p50(results, mine, server), aio_clients.p50(results, reference, server),
            "<=", limit, cpu_ratio, informational=on_pypy))
    return found


def node_targets(results: Dict[str, Any]) -> List[Target]:
    """Per node interpreter (bench/node_cold.py): the slowest command's median over the bare
    start's, and the largest peak RSS over the bare start's."""
    section = results.get("nodes") or {}
    limits = section.get("limits", {"wall": node_cold.WALL_LIMIT, "rss": node_cold.RSS_LIMIT})
    found: List[Target] = []
    for interpreter in section.get("interpreters", []):
        key, label = interpreter["key"], interpreter["label"]

        def worst(field: str, key: str = key) -> Optional[float]:
            values = [node_cold.stage_median(section, key, command, field)
                      for command in node_cold.COMMANDS]
            return None if None in values else max(v for v in values if v is not None)

        def bare(field: str, key: str = key) -> Optional[float]:
            return node_cold.stage_median(section, key, "bare", field)

        found.append(Target("node", f"wall: dist/antrea's slowest of ADD/CHECK/DEL / bare "
                                    f"start, {label}", worst("wall_ms"), bare("wall_ms"), "<=",
                            limits["wall"], ratio(worst("cpu_ms"), bare("cpu_ms"))))
        if section.get("rss_measured", True):
            found.append(Target("node", f"peak RSS: dist/antrea / bare start, {label}",
                                worst("rss_mib"), bare("rss_mib"), "<=", limits["rss"]))
    return found


def targets(results: Dict[str, Any]) -> List[Target]:
    found: List[Target] = node_targets(results) + tool_cold.targets(results)
    installed_wall = cold_median(results, "installed", "wall_ms")
    installed_cpu = cold_median(results, "installed", "cpu_ms")
    found += [
        Target("cold", "wall: installed plugin / grpcio plugin", installed_wall,
               cold_median(results, "grpcio", "wall_ms"), "<=", 0.55,
               ratio(installed_cpu, cold_median(results, "grpcio", "cpu_ms"))),
        Target("cold", "wall: installed plugin / grpcio plugin on the generated cni_pb2",
               installed_wall, cold_median(results, "grpcio-pb2", "wall_ms"), "<=", 0.55,
               ratio(installed_cpu, cold_median(results, "grpcio-pb2", "cpu_ms")),
               informational=True),
        Target("cold", "wall: installed plugin / import floor", installed_wall,
               cold_median(results, "floor", "wall_ms"), "<=", 1.15,
               ratio(installed_cpu, cold_median(results, "floor", "cpu_ms"))),
        Target("cold", "peak RSS: installed plugin / grpcio plugin",
               cold_median(results, "installed", "rss_mib"),
               cold_median(results, "grpcio", "rss_mib"), "<=", 0.6),
        Target("cold", "wall: dist/antrea / installed plugin",
               cold_median(results, "dist", "wall_ms"), installed_wall, "<=", 1.2,
               ratio(cold_median(results, "dist", "cpu_ms"), installed_cpu)),
    ]
    client_cpu, server_cpu = "cpu_us_per_call", "server_cpu_us_per_call"
    for server in ("grpcio", "minigrpc"):
        found.append(Target(
            "warm", f"p50: minigrpc client / grpcio client ({server} server)",
            latency_p50(results, "minigrpc", server), latency_p50(results, "grpcio", server),
            "<=", 1.0, ratio(latency_cpu(results, "minigrpc", server, client_cpu),
                             latency_cpu(results, "grpcio", server, client_cpu))))
    found.append(Target(
        "warm", "p50: minigrpc server / grpcio server (grpcio client)",
        latency_p50(results, "grpcio", "minigrpc"), latency_p50(results, "grpcio", "grpcio"),
        "<=", 1.0, ratio(latency_cpu(results, "grpcio", "minigrpc", server_cpu),
                         latency_cpu(results, "grpcio", "grpcio", server_cpu))))
    if latency_p50(results, "grpcio", "grpc-go") is not None:
        found.append(Target(
            "warm", "p50: minigrpc client / grpcio client (grpc-go server)",
            latency_p50(results, "minigrpc", "grpc-go"), latency_p50(results, "grpcio", "grpc-go"),
            "<=", 1.0, ratio(latency_cpu(results, "minigrpc", "grpc-go", client_cpu),
                             latency_cpu(results, "grpcio", "grpc-go", client_cpu))))
    for server, pattern in _h2_floor_patterns(results).items():
        # What minigrpc adds to h2's own work: its client CPU per call over h2 alone
        # (bench/h2floor.py) for the same frames; unlike a ratio to grpcio's C code, this one
        # does not move from machine to machine.
        found.append(Target(
            "warm", f"client CPU per call: minigrpc ({server} server) / h2 alone (same frames)",
            latency_cpu(results, "minigrpc", server, client_cpu), pattern["client_us"],
            "<=", 1.25))
        raw_cpu = latency_cpu(results, "raw", "raw", client_cpu)
        if raw_cpu is not None:
            # The floor has no socket; any client pays at least a raw echo's system calls too.
            found.append(Target(
                "warm", f"client CPU per call: minigrpc ({server} server) / (h2 alone + the "
                "raw socket client)", latency_cpu(results, "minigrpc", server, client_cpu),
                pattern["client_us"] + raw_cpu, "<=", 1.25, informational=True))
    found.append(Target(
        "warm", "p50: minigrpc↔minigrpc / grpcio↔grpcio",
        latency_p50(results, "minigrpc", "minigrpc"), latency_p50(results, "grpcio", "grpcio"),
        "<=", 1.0))
    for size in results.get("config", {}).get("large_sizes", []):
        label = _size_label(size)
        # Both directions: minigrpc as the client (against the two servers the warm targets
        # name; on minigrpc's own server for information) and as the server (grpcio client).
        for server in ("grpcio", "grpc-go", "minigrpc"):
            mine = large_median(results, "minigrpc", server, size)
            if large_median(results, "grpcio", server, size) is None:
                continue
            for reference, limit in (("grpcio", 0.9), ("grpclib", 1.3)):
                found.append(Target(
                    "large", f"{label}: minigrpc client / {reference} client ({server} server)",
                    mine, large_median(results, reference, server, size), ">=", limit,
                    informational=server == "minigrpc"))
        for reference, limit in (("grpcio", 0.9), ("grpclib", 1.3)):
            found.append(Target(
                "large", f"{label}: minigrpc server / {reference} server (grpcio client)",
                large_median(results, "grpcio", "minigrpc", size),
                large_median(results, "grpcio", reference, size), ">=", limit))
    for connections in results.get("config", {}).get("throughput_connections", []):
        note = "1 connection" if connections == "shared" else "a connection per thread"
        # Every load generator is judged: grpcio's client, grpc-go's, and h2load (C).
        for client in ("grpcio", "grpc-go", "h2load"):
            mine = throughput_median(results, "minigrpc", connections, client)
            mine_cpu = throughput_cpu(results, "minigrpc", connections, client)
            by = "" if client == "grpcio" else f"{client} client, "
            for reference, limit in (("grpclib", 1.2), ("grpcio", 0.8)):
                value = throughput_median(results, reference, connections, client)
                if value is None and client != "grpcio":
                    continue
                found.append(Target(
                    "server", f"calls/s: minigrpc / {reference} server ({by}{note})", mine,
                    value, ">=", limit,
                    ratio(mine_cpu, throughput_cpu(results, reference, connections, client))))
                # The same server with its unary handlers on the I/O thread, as grpclib runs
                # them: for information, since grpcio's servers run them on a thread pool.
                on_io = throughput_median(results, IO_THREAD_SERVER_IMPL, connections, client)
                if on_io is not None:
                    found.append(Target(
                        "server", f"calls/s: {IO_THREAD_SERVER_IMPL} / {reference} server "
                        f"({by}{note})", on_io, value, ">=", limit,
                        ratio(throughput_cpu(results, IO_THREAD_SERVER_IMPL, connections, client),
                              throughput_cpu(results, reference, connections, client)),
                        informational=True))
    found += aio_targets(results)
    found += aio_servers.targets(results)
    found += channels.targets(results)
    for server, judged in (("grpc-go", True), ("grpcio", False)):
        if latency_p50(results, "minigrpc-pypy", server) is not None:
            found.append(Target(
                "pypy", f"p50: minigrpc client on PyPy / grpcio client on CPython ({server} "
                "server)", latency_p50(results, "minigrpc-pypy", server),
                latency_p50(results, "grpcio", server), "<=", 0.6,
                informational=not judged))
    if latency_p50(results, "grpcio", "minigrpc-pypy") is not None:
        found.append(Target(
            "pypy", "p50: minigrpc server on PyPy / grpcio server (grpcio client)",
            latency_p50(results, "grpcio", "minigrpc-pypy"),
            latency_p50(results, "grpcio", "grpcio"), "<=", 1.0, informational=True))
    for connections in results.get("config", {}).get("throughput_connections", []):
        mine = throughput_median(results, "minigrpc-pypy", connections)
        if mine is not None:
            note = "1 connection" if connections == "shared" else "a connection per thread"
            found.append(Target(
                "pypy", f"calls/s: minigrpc server on PyPy / grpcio server ({note})", mine,
                throughput_median(results, "grpcio", connections), ">=", 0.8,
                informational=True))
    if results.get("stream") is not None:
        found.append(Target(
            "stream", "messages/s: minigrpc↔minigrpc / grpclib↔grpclib",
            stream_median(results, "minigrpc", "minigrpc"),
            stream_median(results, "grpclib", "grpclib"), ">=", 1.5))
        found.append(Target(
            "stream", "messages/s: minigrpc server / grpclib server (grpcio client)",
            stream_median(results, "grpcio", "minigrpc"),
            stream_median(results, "grpcio", "grpclib"), ">=", 1.5, informational=True))
    return found


# ---------------------------------------------------------------------------------------------
# Sections.


def _meta_section(results: Dict[str, Any]) -> List[str]:
    meta = results.get("meta", {})
    rows = [[key, str(value)] for key, value in meta.get("machine", {}).items()]
    rows += [[f"`{name}`", version] for name, version in meta.get("versions", {}).items()]
    lines = ["## Machine and versions", ""]
    lines += _table(("what", "value"), rows)
    return lines


TARGETS_HEADER = ("area", "measure", "target", "measured", "verdict", "CPU ratio")


def target_rows(found: Sequence[Target]) -> List[List[str]]:
    return [[t.area, t.text, f"{t.op} {t.limit:g}×", _fmt_ratio(t.ratio) + (
                f" ({t.spread[0]:.2f}–{t.spread[1]:.2f} per round)" if t.spread else ""),
             t.verdict,
             _fmt_ratio(t.cpu_ratio) if t.cpu_ratio is not None else ""]
            for t in found]


def _targets_section(found: Sequence[Target]) -> List[str]:
    rows = target_rows(found)
    return ["## Performance targets", "",
            "Ratios of medians, minigrpc (or the plugin on it) over the reference. The last "
            "column is the same comparison in CPU time of the process under test, per call "
            "or per invocation (lower is better; the client's for client rows, the server's "
            "for server rows): it is not a target, but unlike wall time it hardly moves when "
            "other processes load the machine. The grpcio plugin of the cold rows shares the "
            "real plugin's skel, mapping and protobuf-free messages, so that only the RPC "
            "library differs; the row marked *for information* compares with the same plugin "
            "on the generated `cni_pb2`, as a grpcio plugin is usually written. The other "
            "rows *for information* are comparisons no target names: large messages on "
            "minigrpc's own server, and the PyPy server. Peers and loads are the ones "
            "antrea-agent meets: grpcio and grpc-go servers (antrea-agent's library) for the "
            "client rows; grpcio's client, grpc-go's client and h2load (C) as the load for the "
            "server rows. The client CPU targets divide by `bench/h2floor.py`'s measure of h2 "
            "alone for the same frames as each server sends them. The node rows judge "
            "`dist/antrea` on each interpreter against that interpreter's own bare start "
            "(section \"Cold start on each node interpreter\"), and the tool rows `python -m "
            "minigrpc health` the same way (section \"Cold start of the health probe on each "
            "interpreter\").", "",
            *_table(TARGETS_HEADER, rows)]


def _cold_section(results: Dict[str, Any]) -> List[str]:
    cold = results.get("cold")
    if not cold:
        return []
    lines = ["## 1. Cold plugin invocation", ""]
    if cold.get("error"):
        return [*lines, f"Not measured: {cold['error']}"]
    lines.append(
        f"One ADD against the {cold.get('agent', 'agent')} over a unix socket, from fork to "
        f"reaped exit, {cold['runs']} runs per variant after one warm-up, variants interleaved; "
        "an untimed DEL follows every ADD. CPU (user + system) and peak RSS are the child's "
        "own, from `wait4` in tests/go/coldrun, a small launcher that forks it (forked by the "
        "harness, a child would count the harness's pages in its peak RSS)."
        + (f" Measured {cold['date']}, 1-minute load average "
           + " then ".join(f"{value:.2f}" for value in cold["load"]) + "."
           if cold.get("date") and cold.get("load") else ""))
    lines.append("")
    grpcio_wall = cold_median(results, "grpcio", "wall_ms")
    grpcio_rss = cold_median(results, "grpcio", "rss_mib")
    rows = []
    for variant in cold["variants"]:
        walls, rss = variant["wall_ms"], variant["rss_mib"]
        failures = len(variant["failures"])
        if not walls:
            first = variant["failures"][0] if variant["failures"] else "no runs"
            rows.append([variant["label"], "failed", "", "", "", "", "", "",
                         f"{failures}: {first}"])
            continue
        cpu = variant.get("cpu_ms") or []
        rows.append([
            variant["label"], _fmt(median(walls)),
            f"{_fmt(percentile(walls, 0.1))} – {_fmt(percentile(walls, 0.9))}",
            _fmt_ratio(ratio(median(walls), grpcio_wall)),
            _fmt(median(cpu)) if cpu else "",
            _fmt(median(rss)), f"{_fmt(min(rss))} – {_fmt(max(rss))}",
            _fmt_ratio(ratio(median(rss), grpcio_rss)),
            str(failures) + (f" (DEL: {variant['del_failures']})" if variant["del_failures"]
                             else ""),
        ])
    lines += _table(("variant", "median ms", "p10 – p90 ms", "vs grpcio", "CPU ms",
                     "peak RSS MiB", "RSS min – max", "RSS vs grpcio", "failed runs"), rows)
    notes = list(cold.get("notes", []))
    notes += [f"{variant['label']}: {variant['note']}" for variant in cold["variants"]
              if variant.get("note")]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    return lines


def _importtime_section(results: Dict[str, Any]) -> List[str]:
    profiles = results.get("cold", {}).get("importtime") or {}
    if not profiles:
        return []
    labels = {v["key"]: v["label"] for v in results["cold"]["variants"]}
    runs = next(iter(profiles.values())).get("runs", 1)
    lines = ["### Where the cold start goes (`-X importtime`)", "",
             f"Medians of {runs} ADDs per variant run with `PYTHONPROFILEIMPORTTIME=1` (which "
             "itself slows imports down). Top-level imports by cumulative time; the "
             "interpreter's own start-up before `site` is not in these numbers.", ""]
    for key, profile in profiles.items():
        lines.append(f"**{labels.get(key, key)}**: {profile['modules']} modules, top-level imports "
                     f"{profile['total_us'] / 1000:.1f} ms of a {profile['wall_ms']:.1f} ms run.")
        lines.append("")
        lines += _table(("module", "cumulative ms", "self ms"),
                        [[f"`{name}`", f"{cum / 1000:.1f}", f"{own / 1000:.1f}"]
                         for name, cum, own in profile["top"]])
        lines.append("")
    floor = profiles.get("floor")
    if floor is None:
        return lines
    for key, profile in profiles.items():
        if key in ("floor", "grpcio", "grpcio-pb2"):
            continue
        extra = {name: own for name, own in profile["self_us"].items()
                 if name not in floor["self_us"]}
        if not extra:
            continue
        heaviest = sorted(extra.items(), key=lambda item: item[1], reverse=True)[:15]
        lines.append(f"**{labels.get(key, key)} beyond the import floor**: {len(extra)} more "
                     f"modules, {sum(extra.values()) / 1000:.1f} ms of their own (self) import "
                     "time; the heaviest:")
        lines.append("")
        lines += _table(("module", "self ms"),
                        [[f"`{name}`", f"{own / 1000:.1f}"] for name, own in heaviest])
        lines.append("")
    return lines


def _pypy_warmup_note(config: Dict[str, Any]) -> str:
    """How many warm-up calls the PyPy client made, when the run says (bench/pypy.py)."""
    if "pypy_warmup" not in config:
        return ""
    return (f" ({config['pypy_warmup']} for the PyPy client, whose JIT is still compiling "
            "after fewer)")


def _latency_section(results: Dict[str, Any]) -> List[str]:
    rows_in = results.get("latency")
    if rows_in is None:
        return []
    config = results.get("config", {})
    lines = ["## 2. Warm unary latency", "",
             f"`/bench.Echo/Echo` with a {config.get('latency_size', '?')}-byte request and the "
             f"same bytes back, one call at a time on one warm connection over a unix socket; "
             f"{config.get('latency_calls', '?')} timed calls × {config.get('latency_rounds', '?')}"
             f" rounds (interleaved) after {config.get('latency_warmup', '?')} warm-up calls per "
             f"client process{_pypy_warmup_note(config)}. Ratio: p50 over the grpcio client's "
             "p50 on the same server. CPU "
             "per call: the client's over its timed calls, the server's over the whole run "
             "(warm-up calls included), all threads, medians over rounds.", ""]
    rows = []
    for row in rows_in:
        samples = row["samples_us"]
        if not samples:
            rows.append([row["client"], row["server"], "failed", "", "", "", "", "", "", "",
                         "; ".join(row["errors"])[:200]])
            continue
        reference = latency_p50(results, "grpcio", row["server"])
        client_cpu = row.get("cpu_us_per_call")
        server_cpu = row.get("server_cpu_us_per_call")
        rows.append([
            row["client"], row["server"], _fmt(median(samples)), _fmt(percentile(samples, 0.9)),
            _fmt(percentile(samples, 0.99)),
            f"{_fmt(percentile(samples, 0.25))} – {_fmt(percentile(samples, 0.75))}",
            _fmt_ratio(ratio(median(samples), reference)) if row["server"] != "raw" else "",
            _fmt(median(client_cpu), 0) if client_cpu else "",
            _fmt(median(server_cpu), 0) if server_cpu else "",
            str(len(samples)), "; ".join(row["errors"])[:200],
        ])
    lines += _table(("client", "server", "p50 µs", "p90 µs", "p99 µs", "IQR µs",
                     "p50 vs grpcio", "client CPU µs/call", "server CPU µs/call",
                     "calls", "errors"), rows)
    floor = _h2_floor_text(results)
    if floor:
        needed = [f"{_fmt(median(row['cpu_us_per_call']), 0)} µs against {row['server']}"
                  for row in rows_in if row.get("cpu_us_per_call") and row["client"] == "grpcio"
                  and row["server"] in ("grpcio", "grpc-go")]
        if needed:
            floor += (" On this run the grpcio client needed, for the whole call, "
                      + " and ".join(needed) + " of CPU.")
        lines += ["", floor]
    return lines


def _h2_floor_patterns(results: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """h2 alone per server pattern (bench/h2floor.py), for the servers the bench measured."""
    patterns = (results.get("h2floor") or {}).get("patterns", {})
    return {server: pattern for server, pattern in patterns.items()
            if latency_cpu(results, "minigrpc", server, "cpu_us_per_call") is not None}


def _h2_floor_text(results: Dict[str, Any]) -> str:
    """One sentence on h2's own cost per call (bench/h2floor.py), or "" if not measured."""
    floor = results.get("h2floor")
    if not floor:
        return ""
    if "error" in floor:
        return f"**h2 alone** could not be measured: {floor['error']}"
    parts = [f"{_fmt(pattern['client_us'], 0)} µs of client-side and "
             f"{_fmt(pattern['server_us'], 0)} µs of server-side work per call when the server "
             f"answers as {server} does"
             for server, pattern in floor.get("patterns", {}).items()]
    text = ("**h2 alone** (`bench/h2floor.py`: h2 connections configured as minigrpc's, the "
            "same call's frames passed in memory, one thread, no socket, no gRPC layer) does "
            + "; ".join(parts) + ": the floor under minigrpc's CPU per call.")
    raw_cpu = latency_cpu(results, "raw", "raw", "cpu_us_per_call")
    patterns = floor.get("patterns", {})
    if raw_cpu is not None and patterns:
        lowest = min(pattern["client_us"] for pattern in patterns.values())
        text += (f" The floor has no socket: the raw client above spends {_fmt(raw_cpu, 0)} µs "
                 "of CPU per call on its system calls alone (one send, two receives), so an "
                 f"h2 client that talks through a socket needs at least {_fmt(lowest + raw_cpu, 0)}"
                 f" µs, which is {_fmt_ratio(ratio(lowest + raw_cpu, lowest))} the floor.")
    return text


def _large_section(results: Dict[str, Any]) -> List[str]:
    rows_in = results.get("large")
    if rows_in is None:
        return []
    config = results.get("config", {})
    sizes = config.get("large_sizes", [])
    lines = ["## 3. Large messages", "",
             "Echo of one message (request and response the same size); MB/s = 10⁶ message "
             "bytes per second of round trip, so both directions are in the time. Message "
             "limits lifted on both sides. Reps per size: "
             + ", ".join(f"{_size_label(s)} × {r}" for s, r in
                         zip(sizes, config.get("large_reps", [])))
             + f", {config.get('large_rounds', '?')} round(s). Ratio: over the grpcio client on "
             "the same server.", ""]
    rows = []
    for row in rows_in:
        for size in sizes:
            rates = row["mb_per_s"].get(str(size), [])
            if not rates:
                rows.append([row["client"], row["server"], _size_label(size), "failed", "", "",
                             "; ".join(row["errors"])[:200]])
                continue
            reference = large_median(results, "grpcio", row["server"], size)
            rows.append([
                row["client"], row["server"], _size_label(size), _fmt(median(rates)),
                f"{_fmt(min(rates))} – {_fmt(max(rates))}",
                _fmt_ratio(ratio(median(rates), reference)) if row["server"] != "raw" else "",
                "; ".join(row["errors"])[:200],
            ])
    return lines + _table(("client", "server", "size", "median MB/s", "min – max",
                           "vs grpcio", "errors"), rows)


def stream_median(results: Dict[str, Any], client: str, server: str) -> Optional[float]:
    for row in results.get("stream") or []:
        if row["client"] == client and row["server"] == server and row["messages_per_s"]:
            return median(row["messages_per_s"])
    return None


def _stream_section(results: Dict[str, Any]) -> List[str]:
    rows_in = results.get("stream")
    if rows_in is None:
        return []
    config = results.get("config", {})
    lines = ["## 5. Server streams", "",
             f"One unary request; the server answers with {config.get('stream_count', '?')} "
             f"messages of {config.get('stream_message_size', '?')} bytes. Messages/s over the "
             f"whole stream, {config.get('stream_reps', '?')} timed streams after an untimed "
             f"one, {config.get('stream_rounds', '?')} round(s). Ratio: over the grpclib server "
             "with the same client.", ""]
    rows = []
    for row in rows_in:
        rates = row["messages_per_s"]
        if not rates:
            rows.append([row["client"], row["server"], "failed", "", "",
                         "; ".join(row["errors"])[:200]])
            continue
        reference = stream_median(results, row["client"], "grpclib")
        rows.append([row["client"], row["server"], _fmt(median(rates), 0),
                     f"{_fmt(min(rates), 0)} – {_fmt(max(rates), 0)}",
                     _fmt_ratio(ratio(median(rates), reference)),
                     "; ".join(row["errors"])[:200]])
    return lines + _table(("client", "server", "median messages/s", "min – max",
                           "vs grpclib server", "errors"), rows)


def _throughput_section(results: Dict[str, Any]) -> List[str]:
    rows_in = results.get("throughput")
    if rows_in is None:
        return []
    config = results.get("config", {})
    lines = ["## 4. Server throughput", "",
             f"{config.get('throughput_threads', '?')} client threads × "
             f"{config.get('throughput_calls', '?')} calls of the {config.get('latency_size', '?')}"
             "-byte echo, released together by a barrier; calls/s = all calls / wall time. The "
             "grpcio client loads every server (its I/O runs in C outside the GIL, so the "
             "client costs each server the same); grpclib is served by its "
             "single asyncio thread, grpcio and minigrpc by 8-thread pools, grpc-go by a "
             f"goroutine per call. `{IO_THREAD_SERVER_IMPL}` is minigrpc's server with the "
             "`minigrpc.unary_handlers_on_io_thread` option: its echo handler runs on its I/O "
             "thread, as grpclib's runs on its event loop, and saves the hand-over to a pool "
             "thread and back (the asyncio servers have their own section). Where built, "
             "grpc-go's client (`tests/go/bench_client`: as "
             "many goroutines as threads, on one connection or one each) and h2load "
             "(nghttp2's C load generator: as many streams in flight as threads, on one "
             "connection or one each; it checks HTTP 200 and the echoed bytes) load every "
             f"server too. {config.get('throughput_rounds', '?')} round(s), interleaved. "
             "Ratio: over the grpcio server under the same client.", ""]
    rows = []
    for row in rows_in:
        values = row["calls_per_s"]
        note = "one shared channel" if row["connections"] == "shared" else "a channel per thread"
        if not values:
            rows.append([row["server"], row["client"], note, "failed", "", "", "",
                         "; ".join(row["errors"])[:200]])
            continue
        reference = throughput_median(results, "grpcio", row["connections"],
                                      row.get("client", "grpcio"))
        server_cpu = row.get("server_cpu_us_per_call")
        rows.append([row["server"], row["client"], note, _fmt(median(values), 0),
                     f"{_fmt(min(values), 0)} – {_fmt(max(values), 0)}",
                     _fmt_ratio(ratio(median(values), reference)),
                     _fmt(median(server_cpu), 0) if server_cpu else "",
                     "; ".join(row["errors"])[:200]])
    lines += _table(("server", "client", "connections", "median calls/s", "min – max",
                     "vs grpcio", "server CPU µs/call", "errors"), rows)
    floor = _h2_floor_text(results)
    if floor:
        grpclib = [row for row in rows_in if row["server"] == "grpclib"
                   and row.get("client", "grpcio") == "grpcio"
                   and row["connections"] == "shared" and row.get("server_cpu_us_per_call")]
        if grpclib:
            budget = median(grpclib[0]["server_cpu_us_per_call"]) / 1.5
            floor += (" Serving 1.5× grpclib's calls/s would allow about "
                      f"{_fmt(budget, 0)} µs of server CPU per call on this run (grpclib's, "
                      "on the same h2 with its validation off, divided by 1.5), h2 included.")
        lines += ["", floor]
    return lines


def _profiles_section(results: Dict[str, Any]) -> List[str]:
    profiles = results.get("profiles")
    if not profiles:
        return []
    lines = ["## Where minigrpc's time goes (cProfile)", "",
             "Each workload run once more under cProfile, in its own process. Shares are of busy "
             "time (idle waits such as an executor thread waiting for work, `poll` with nothing "
             "to read, lock and condition waits are left out, and so is the harness's own "
             "code). cProfile slows Python code "
             "several times more than C code, so shares are indicative only.", ""]
    for name, profile in profiles.items():
        lines += [f"**{name}**", ""]
        if "error" in profile:
            lines += [f"Not profiled: {profile['error']}", ""]
            continue
        layers = ", ".join(f"{layer} {share * 100:.0f}%" for layer, share in profile["layers"]
                           if share >= 0.01)
        lines += [f"Busy time by layer: {layers}. Socket system calls (recv/send; in a "
                  "blocking client mostly waiting for the peer): "
                  f"{profile['socket_share'] * 100:.0f}% of all profiled time, not counted as "
                  "busy.", ""]
        lines += _table(("function (heaviest own time)", "share", "calls"),
                        [[f"`{label}`", f"{share * 100:.1f}%", f"{calls:,}"]
                         for label, share, calls in profile["top"]])
        lines.append("")
    return lines


def _method_section(results: Dict[str, Any]) -> List[str]:
    """What makes the comparison fair; the choices a reader would otherwise have to guess."""
    return [
        "## How it is measured", "",
        "- **One process per peer.** `python -m bench` starts every server (`bench/peers.py`) "
        "and every client run (`bench/workloads.py`) as a child process, so no two peers "
        "share a GIL and one library's background threads never run inside another's "
        "numbers. The harness itself imports no gRPC library.",
        "- **The same call for everyone.** `/bench.Echo/Echo` returns the request bytes. "
        "Serializers are the identity (grpcio and minigrpc: none; grpclib: a pass-through "
        "codec), the payload is the same fixed bytes, and every reply is compared with the "
        "request, so a fast wrong answer fails its row.",
        "- **Library defaults**, except the message-size limits, lifted on both sides for "
        "the large messages. grpcio and minigrpc servers run handlers on an 8-thread pool; "
        "grpclib serves from its asyncio loop. grpclib uses its default 4 MiB windows.",
        "- **Interleaving.** Rounds run every pair in turn (and the cold-start variants "
        "rotate), so a burst of load from elsewhere lands on all of them alike. Reported "
        "values are medians over all samples of all rounds.",
        "- **Cold start** runs each variant as a runtime would: its own file, CNI "
        "environment, the shipped conflist's network config on stdin, output read to EOF, "
        "child reaped with `wait4` by tests/go/coldrun (wall time from just before the fork; "
        "peak RSS is the child's `ru_maxrss`, which Linux would otherwise start at the "
        "forking harness's own size). The venv's interpreter runs every variant except the "
        "system-python row, so the interpreter is not what differs; any `.pth` start-up "
        "hook of the venv (an editable install's finder) is paid by all of them.",
        "- **CPU per call** is read from `/proc/<pid>/stat` for servers and "
        "`time.process_time()` for clients; it counts all threads of the process.",
        "- **grpc-go** is Debian's (`golang-google-grpc-dev`), built on first use by "
        "`tests/go_peers.py` (the same binaries the interop tests use): the server is "
        "`tests/go/interop_server -plain` (grpc-go's default options, message limits lifted, "
        "a pass-through codec for the echo), the client `tests/go/bench_client`. Both run "
        "with Go's default GOMAXPROCS (every CPU), as antrea-agent does.",
    ]


def _noise_section(results: Dict[str, Any]) -> List[str]:
    meta = results.get("meta", {})
    lines = ["## Noise", "",
             f"Load average (1, 5, 15 min) at start: {meta.get('load_start', '?')}, at end: "
             f"{meta.get('load_end', '?')}. The harness, its servers and clients share the "
             f"machine's {meta.get('machine', {}).get('CPUs usable', '?')} CPUs with anything "
             "else running; medians and interleaving damp that, but single-digit-percent "
             "differences are within the noise."]
    for note in results.get("notes", []):
        lines += ["", note]
    return lines


#: The markers around sections 1 and 1a, so that ``python -m bench --only cold`` (bench/splice.py)
#: can replace them alone.
COLD_BEGIN = "<!-- cold: begin (python -m bench --only cold) -->"
COLD_END = "<!-- cold: end -->"


def cold_block(results: Dict[str, Any]) -> List[str]:
    """Section 1 (the cold plugin invocation on one interpreter) and its import profile."""
    cold = _cold_section(results)
    if not cold:
        return []
    profile = _importtime_section(results)
    return [COLD_BEGIN, *cold, *(["", *profile] if profile else []), "", COLD_END]


def render_markdown(results: Dict[str, Any], chart_name: Optional[str]) -> str:
    meta = results.get("meta", {})
    lines = [
        "<!-- Generated by `make bench` (python -m bench). Do not edit by hand. -->",
        "# Benchmarks: minigrpc beside grpcio, grpclib and grpc-go", "",
        f"Generated {meta.get('date', '?')} in {meta.get('mode', '?')} mode in "
        f"{meta.get('duration_s', 0):.0f} s. Every peer runs in its own process (the "
        "harness starts them), clients and servers never share a GIL. Every RPC is the same "
        "echo with identity serializers, so no library pays for protobuf.", "",
    ]
    if meta.get("mode") not in (None, "full"):
        lines += [f"**{meta.get('mode')} mode: few repetitions, for smoke-testing the harness. "
                  "Draw no conclusions from these numbers; run `make bench` for the full "
                  "mode.**", ""]
    found = targets(results)
    lines += [*_targets_section(found), ""]
    if chart_name:
        lines += [f"![benchmark chart]({chart_name})", ""]
    for section in (node_cold.render_section, tool_cold.render_section, cold_block,
                    _latency_section, aio_clients.render_section, _large_section,
                    _throughput_section, aio_servers.render_section, _stream_section,
                    channels.render_section, _profiles_section, _method_section,
                    _noise_section, _meta_section):
        part = section(results)
        if part:
            lines += [*part, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# Chart (optional: matplotlib is the `bench` extra).


Bar = Tuple[str, float, float, float, bool]


def _bar_panel(axis: Any, title: str, unit: str, bars: Sequence[Bar]) -> None:
    """Bars with a low–high whisker: ``(label, value, low, high, involves_minigrpc)``."""
    if not bars:
        axis.set_visible(False)
        return
    labels = [bar[0] for bar in bars]
    values = [bar[1] for bar in bars]
    errors = [[max(bar[1] - bar[2], 0.0) for bar in bars],
              [max(bar[3] - bar[1], 0.0) for bar in bars]]
    colors = ["tab:green" if bar[4] else "tab:gray" for bar in bars]
    axis.barh(range(len(bars)), values, xerr=errors, color=colors, capsize=3)
    axis.set_yticks(range(len(bars)))
    axis.set_yticklabels(labels, fontsize=7)
    axis.invert_yaxis()
    axis.set_title(title, fontsize=9)
    axis.set_xlabel(unit, fontsize=8)
    axis.tick_params(axis="x", labelsize=7)


def write_chart(results: Dict[str, Any], path: str) -> Optional[str]:
    """Write the PNG; returns None on success or why there is no chart."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        return "matplotlib is not installed (`pip install matplotlib` or the `bench` extra)"
    panels: List[Tuple[str, str, List[Bar]]] = []
    cold = [(v["label"].replace(" (bench/grpcio_plugin.py)", ""), median(v["wall_ms"]),
             percentile(v["wall_ms"], 0.1), percentile(v["wall_ms"], 0.9),
             v["key"] not in ("grpcio", "floor"))
            for v in results.get("cold", {}).get("variants", []) if v["wall_ms"]]
    panels.append(("Cold ADD, wall time: median (p10 – p90)", "ms", cold))
    latency = [(f"{r['client']} → {r['server']}", median(r["samples_us"]),
                percentile(r["samples_us"], 0.1), percentile(r["samples_us"], 0.9),
                "minigrpc" in (r["client"], r["server"]))
               for r in results.get("latency", []) if r["samples_us"]]
    panels.append(("Warm unary latency: p50 (p10 – p90)", "µs", latency))
    sizes = results.get("config", {}).get("large_sizes", [])
    large: List[Bar] = []
    for row in results.get("large", []):
        for size in sizes:
            rates = row["mb_per_s"].get(str(size), [])
            if rates:
                large.append((f"{row['client']} → {row['server']} {_size_label(size)}",
                              median(rates), min(rates), max(rates),
                              "minigrpc" in (row["client"], row["server"])))
    panels.append(("Large message echo: median (min – max)", "MB/s", large))
    throughput = [(f"{r['server']} server, "
                   f"{'1 connection' if r['connections'] == 'shared' else '1 per thread'}"
                   + ("" if r.get("client", "grpcio") == "grpcio" else f", {r['client']}"),
                   median(r["calls_per_s"]), min(r["calls_per_s"]), max(r["calls_per_s"]),
                   r["server"] == "minigrpc")
                  for r in results.get("throughput", [])
                  if r["calls_per_s"] and r["server"] != "grpc-go"]
    # grpc-go's server is several times faster than any Python server: on the same axis it
    # would flatten every other bar, so it stays in the table only.
    panels.append(("Server throughput: median (min – max), grpc-go server in the table",
                   "calls/s", throughput))
    figure, axes = pyplot.subplots(2, 2, figsize=(12, 9))
    for axis, (title, unit, bars) in zip(axes.flat, panels):
        _bar_panel(axis, title, unit, bars)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
    return None


def write_report(results: Dict[str, Any], output_dir: str, chart: bool,
                 log: Callable[[str], None]) -> str:
    """Write benchmarks.md (and benchmarks.png); returns the markdown path."""
    os.makedirs(output_dir, exist_ok=True)
    chart_name: Optional[str] = None
    if chart:
        chart_path = os.path.join(output_dir, "benchmarks.png")
        why_not = write_chart(results, chart_path)
        if why_not is None:
            chart_name = "benchmarks.png"
        else:
            results.setdefault("notes", []).append(f"No chart: {why_not}.")
            log(f"no chart: {why_not}")
    markdown_path = os.path.join(output_dir, "benchmarks.md")
    with open(markdown_path, "w", encoding="utf-8") as handle:
        handle.write(render_markdown(results, chart_name))
    return markdown_path

