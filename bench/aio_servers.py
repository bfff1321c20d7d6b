"""The asyncio servers: minigrpc.aio's server beside grpcio's grpc.aio server and grpclib's.

Two workloads, each run against every asyncio server in every round, interleaved, so that a
load that comes and goes on the machine falls on all servers alike:

- calls/s of the unary echo (the throughput workload of :mod:`bench.workloads`: 8 callers ×
  N calls released together) under three loads: grpcio's client, grpc-go's client
  (``tests/go/bench_client``) and h2load (nghttp2's C load generator, :mod:`bench.loadgen`),
  on one shared connection and on a connection per caller;
- messages/s of server streams of small messages (the stream workload), read by grpc-go's
  client (:data:`GO_STREAMS` streams at once on one connection) and by grpcio's (one stream).

The stream targets are judged on grpc-go's row, where the server is what sets the rate: grpcio's
client spends more CPU reading a message than minigrpc.aio's server spends sending it, so on its
row every fast enough server measures the client (about 23,000 messages/s for minigrpc.aio and
grpclib alike, the client near a whole core, each server well below one).  grpc-go's client
reads a message in a fraction of a microsecond and, with several streams in flight, keeps every
server busy: its row shows the server near 100% of a core and the client far below.  The
section's table has both shares for every row, so which side was the bottleneck is on record.
grpcio's row stays as the view of a Python client; without grpc-go, it is the one judged.

Each server is an ``async def`` echo on one event loop (:func:`bench.peers._serve_aio`,
grpclib's own service).  minigrpc.aio's server also runs under PyPy (:mod:`bench.pypy`), warmed
up before it is timed; grpcio has no PyPy build, so its rows compare with the CPython peers.

Every round yields one figure per (workload, server, load); the ratios of the targets are of
medians over rounds, and each also shows the spread of the per-round ratios (minigrpc's figure
of round *i* over the reference's of round *i*), which says how far a single run can be trusted
on a busy machine.  The section sits between :data:`DOC_BEGIN` and :data:`DOC_END` in
docs/benchmarks.md, so that ``python -m bench --only aio-server`` replaces it alone.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench.stats import median, ratio

DOC_BEGIN = "<!-- aio-servers: begin (python -m bench --only aio-server) -->"
DOC_END = "<!-- aio-servers: end -->"

#: The asyncio servers on CPython (:data:`bench.peers.AIO_SERVER_IMPLS` and grpclib); the
#: harness adds :data:`bench.pypy.PYPY_AIO_SERVER` where PyPy is installed.
SERVERS = ("minigrpc-aio", "grpcio-aio", "grpclib")
#: minigrpc.aio's server on CPython, then on PyPy: both are judged against the same references.
MINE = ("minigrpc-aio", "minigrpc-aio-pypy")
#: minigrpc.aio's calls/s over each reference server's must reach the limit.
CALLS_REFERENCES: Tuple[Tuple[str, float], ...] = (("grpclib", 1.3), ("grpcio-aio", 0.9))
#: minigrpc.aio's server-stream messages/s over grpclib's must reach the limit.
STREAM_REFERENCES: Tuple[Tuple[str, float], ...] = (("grpclib", 2.0),)
#: The clients of the stream workload; the first one measured is the one judged (see above).
STREAM_CLIENTS = ("grpc-go", "grpcio")
#: Server streams grpc-go's client reads at once (one connection): several, so that the
#: server always has a stream to write while the client reads another.
GO_STREAMS = 4


def stream_count_of(client: str) -> int:
    """How many streams ``client`` reads at once in the stream workload."""
    return GO_STREAMS if client == "grpc-go" else 1

Key = Tuple[str, str, str, str]  # (workload, server, client, connections)


def new_rows(workloads: Sequence[Tuple[str, str, str]], servers: Sequence[str]
             ) -> Dict[Key, Dict[str, Any]]:
    """Empty rows for every ``(workload, client, connections)`` × server, in report order."""
    return {(workload, server, client, connections): {
        "workload": workload, "server": server, "client": client, "connections": connections,
        "per_round": [], "server_cpu_us": [], "cpu_shares": [], "errors": []}
        for workload, client, connections in workloads for server in servers}


def _row(results: Dict[str, Any], workload: str, server: str, client: str,
         connections: str) -> Optional[Dict[str, Any]]:
    for row in results.get("aio_server") or []:
        if (row["workload"], row["server"], row["client"], row["connections"]) == (
                workload, server, client, connections):
            return row  # type: ignore[no-any-return]
    return None


def _measured(row: Optional[Dict[str, Any]]) -> List[float]:
    return [value for value in (row or {}).get("per_round", []) if value is not None]


def comparisons(results: Dict[str, Any]
                ) -> List[Tuple[str, str, str, str, str, float, Optional[float],
                                Optional[Tuple[float, float]], Optional[float]]]:
    """``(workload, mine, reference, client, connections, limit, ratio of medians, (lowest,
    highest) per-round ratio, server CPU ratio)`` for every pair where minigrpc was measured."""
    found = []
    keys = []
    for row in results.get("aio_server") or []:
        key = (row["workload"], row["client"], row["connections"])
        if key not in keys:
            keys.append(key)
    stream_clients = [client for client in STREAM_CLIENTS
                      if _measured(_row(results, "stream", MINE[0], client, "shared"))]
    for workload, client, connections in keys:
        if workload == "stream" and stream_clients and client != stream_clients[0]:
            continue  # shown, not judged: the client set that rate (module docstring)
        references = CALLS_REFERENCES if workload == "calls" else STREAM_REFERENCES
        for mine in MINE:
            mine_row = _row(results, workload, mine, client, connections)
            if not _measured(mine_row):
                continue
            assert mine_row is not None
            for reference, limit in references:
                ref_row = _row(results, workload, reference, client, connections)
                ref_values = _measured(ref_row)
                value = ratio(median(_measured(mine_row)), median(ref_values) if ref_values
                              else None)
                paired = [mine_value / ref_value for mine_value, ref_value in
                          zip(mine_row["per_round"], (ref_row or {}).get("per_round", []))
                          if mine_value is not None and ref_value]
                mine_cpu = mine_row.get("server_cpu_us")
                ref_cpu = (ref_row or {}).get("server_cpu_us")
                found.append((workload, mine, reference, client, connections, limit, value,
                              (min(paired), max(paired)) if paired else None,
                              ratio(median(mine_cpu), median(ref_cpu))
                              if mine_cpu and ref_cpu else None))
    return found


def describe(workload: str, client: str, connections: str) -> str:
    """``calls/s, h2load, 1 connection`` or ``stream messages/s, grpcio client``."""
    if workload == "stream":
        streams = stream_count_of(client)
        return f"stream messages/s, {client} client" + (
            f", {streams} streams" if streams > 1 else "")
    note = "1 connection" if connections == "shared" else "a connection per caller"
    return f"calls/s, {client} client, {note}"


def targets(results: Dict[str, Any]) -> List[Any]:
    """The targets table's ``aio server`` rows (:class:`bench.report.Target`)."""
    from bench.report import Target  # the report imports this module

    found = []
    for (workload, mine, reference, client, connections, limit, value, spread,
         cpu_ratio) in comparisons(results):
        target = Target("aio server", f"{describe(workload, client, connections)}: {mine} / "
                        f"{reference} server", None, None, ">=", limit, cpu_ratio)
        target.ratio, target.spread = value, spread
        found.append(target)
    return found


def render_section(results: Dict[str, Any]) -> List[str]:
    """The docs/benchmarks.md section, markers included (nothing when it was not measured)."""
    from bench.report import _fmt, _fmt_ratio, _table  # the report's formatting (it imports us)

    rows_in = results.get("aio_server")
    if rows_in is None:
        return []
    config = results.get("aio_server_config") or {}
    lines = [DOC_BEGIN, "## Asyncio servers: minigrpc.aio, grpc.aio, grpclib", "",
             f"Measured {results.get('aio_server_date', '?')}, load average "
             f"{results.get('aio_server_load', '?')} (1, 5, 15 min) at the start and "
             f"{results.get('aio_server_load_end', '?')} at the end. Calls/s: "
             f"{config.get('threads', '?')} callers × {config.get('calls', '?')} calls of the "
             f"{config.get('size', '?')}-byte echo, released together (grpcio's client: threads; "
             "grpc-go's: goroutines; h2load: streams in flight), on one connection or one per "
             f"caller. Stream: one request answered by {config.get('stream_count', '?')} "
             f"messages of {config.get('stream_size', '?')} bytes; grpc-go's client reads "
             f"{config.get('go_streams', '?')} such streams at once on one connection, grpcio's "
             f"one at a time; median of {config.get('stream_reps', '?')} timed repetitions per "
             "round. The stream target is judged on grpc-go's row: grpcio's client needs more "
             "CPU to read a message than the fast servers need to send it, so its row measures "
             "the client (the CPU shares column shows which side was busy). "
             f"{config.get('rounds', '?')} rounds; every round runs every row once, interleaved. "
             "Servers: `async def` handlers on one event loop; `minigrpc-aio-pypy` is "
             "minigrpc.aio's server on PyPy after a warm-up, its references the CPython ones.",
             ""]
    rows = []
    for row in rows_in:
        values = _measured(row)
        cpu = row.get("server_cpu_us")
        what = describe(row["workload"], row["client"], row["connections"])
        if not values:
            rows.append([what, row["server"], "failed", "", "", "",
                         "; ".join(row["errors"])[:200]])
            continue
        shares = row.get("cpu_shares") or []
        rows.append([what, row["server"], _fmt(median(values), 0),
                     f"{_fmt(min(values), 0)} – {_fmt(max(values), 0)}",
                     _fmt(median(cpu), 1) if cpu else "",
                     f"{median([server for server, _ in shares]):.0%} / "
                     f"{median([client for _, client in shares]):.0%}" if shares else "",
                     "; ".join(row["errors"])[:200]])
    lines += _table(("workload", "server", "median per s", "min – max over rounds",
                     "server CPU µs per call or message",
                     "CPU of a core, server / client", "errors"), rows)
    ratios = []
    for (workload, mine, reference, client, connections, limit, value, spread,
         cpu_ratio) in comparisons(results):
        verdict = ("not measured" if value is None else
                   "**met**" if value >= limit else "**not met**")
        ratios.append([describe(workload, client, connections), f"{mine} / {reference}",
                       f">= {limit:g}×", _fmt_ratio(value),
                       f"{spread[0]:.2f} – {spread[1]:.2f}" if spread else "", verdict,
                       _fmt_ratio(cpu_ratio)])
    if ratios:
        lines += ["", "Ratios of medians; the per-round spread is the lowest and highest ratio "
                  "of one round's figures; the CPU ratio is server CPU per call (lower is "
                  "better):", "",
                  *_table(("workload", "servers", "target", "ratio", "per-round spread",
                           "verdict", "CPU ratio"), ratios),
                  "", "Calls/s and messages/s are wall-clock rates: with other processes on "
                  "the machine they move from round to round by as much as the spread shows. "
                  "A server's CPU per call hardly moves with the load, and where the server is "
                  "what limits the rate, its calls/s is the inverse of its CPU per call: a CPU "
                  "ratio r stands for a calls/s ratio of about 1/r on a quiet machine. Where a "
                  "rate is far below 1 / (server CPU per call or message), as in grpcio's "
                  "stream row, the client or the machine set it, not the server."]
    return [*lines, "", DOC_END]
