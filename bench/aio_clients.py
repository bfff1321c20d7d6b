"""The asyncio clients' warm unary latency: minigrpc.aio beside grpclib and grpcio's grpc.aio.

The rows are the latency workload (:mod:`bench.workloads`, one call at a time on one warm
connection) run by the asyncio clients against the servers antrea-agent and most users meet,
grpc-go's and grpcio's, interleaved in one run so that the ratios compare like with like.
minigrpc.aio's client also runs under PyPy (:mod:`bench.pypy`) where ``pypy3`` is installed.

The section sits between :data:`DOC_BEGIN` and :data:`DOC_END` in docs/benchmarks.md, so that
``python -m bench --only aio`` replaces it alone; it carries its own ratios (the targets of a
full run's table name the same ones).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from bench.stats import median, percentile, ratio

DOC_BEGIN = "<!-- aio-clients: begin (python -m bench --only aio) -->"
DOC_END = "<!-- aio-clients: end -->"

#: The asyncio clients on CPython; the harness adds :data:`bench.pypy.PYPY_AIO_CLIENT`.
CLIENTS = ("minigrpc-aio", "grpcio-aio", "grpclib")
#: minigrpc.aio's p50 over each reference client's p50 must stay at or below the limit.
REFERENCES: Tuple[Tuple[str, float], ...] = (("grpclib", 0.8), ("grpcio-aio", 1.0))
#: minigrpc.aio's rows: CPython's, then PyPy's.
MINE = ("minigrpc-aio", "minigrpc-aio-pypy")


def _row(results: Dict[str, Any], client: str, server: str) -> Optional[Dict[str, Any]]:
    for row in results.get("aio") or []:
        if row["client"] == client and row["server"] == server and row["samples_us"]:
            return row  # type: ignore[no-any-return]
    return None


def p50(results: Dict[str, Any], client: str, server: str) -> Optional[float]:
    row = _row(results, client, server)
    return median(row["samples_us"]) if row is not None else None


def client_cpu(results: Dict[str, Any], client: str, server: str) -> Optional[float]:
    row = _row(results, client, server)
    cpu = row.get("cpu_us_per_call") if row is not None else None
    return median(cpu) if cpu else None


def comparisons(results: Dict[str, Any]) -> List[Tuple[str, str, str, float, Any, Any]]:
    """``(mine, reference, server, limit, p50 ratio, CPU ratio)`` for every pair measured."""
    found = []
    servers = sorted({row["server"] for row in results.get("aio") or []})
    for server in servers:
        for mine in MINE:
            if p50(results, mine, server) is None:
                continue
            for reference, limit in REFERENCES:
                found.append((
                    mine, reference, server, limit,
                    ratio(p50(results, mine, server), p50(results, reference, server)),
                    ratio(client_cpu(results, mine, server),
                          client_cpu(results, reference, server))))
    return found


def render_section(results: Dict[str, Any]) -> List[str]:
    """The docs/benchmarks.md section, markers included (nothing when it was not measured)."""
    from bench.report import _fmt, _fmt_ratio, _table  # the report's formatting (it imports us)

    rows_in = results.get("aio")
    if rows_in is None:
        return []
    config = results.get("aio_config") or results.get("config", {})
    load = (f", load average {results['aio_load']} (1, 5, 15 min) at the start and "
            f"{results.get('aio_load_end', '?')} at the end" if "aio_load" in results else "")
    lines = [DOC_BEGIN, "## Asyncio clients: minigrpc.aio, grpclib, grpc.aio", "",
             f"Measured {results.get('aio_date') or results.get('meta', {}).get('date', '?')}"
             f"{load}. "
             f"The warm unary latency workload of section 2 ({config.get('latency_calls', '?')}"
             f" timed calls × {config.get('latency_rounds', '?')} rounds, interleaved, after "
             "the warm-up) run by the asyncio clients: `minigrpc-aio` is minigrpc.aio, "
             "`grpcio-aio` grpcio's grpc.aio, `minigrpc-aio-pypy` minigrpc.aio on PyPy (its "
             "long warm-up as in section 2).", ""]
    rows = []
    for row in rows_in:
        samples = row["samples_us"]
        cpu = row.get("cpu_us_per_call")
        if not samples:
            rows.append([row["client"], row["server"], "failed", "", "", "",
                         "; ".join(row["errors"])[:200]])
            continue
        rows.append([row["client"], row["server"], _fmt(median(samples)),
                     _fmt(percentile(samples, 0.9)), _fmt(percentile(samples, 0.99)),
                     _fmt(median(cpu), 0) if cpu else "", "; ".join(row["errors"])[:200]])
    lines += _table(("client", "server", "p50 µs", "p90 µs", "p99 µs", "client CPU µs/call",
                     "errors"), rows)
    ratios = []
    for mine, reference, server, limit, p50_ratio, cpu_ratio in comparisons(results):
        if p50_ratio is None:
            verdict = "not measured"
        elif mine != MINE[0]:
            verdict = "for information"
        else:
            verdict = "**met**" if p50_ratio <= limit else "**not met**"
        ratios.append([f"{mine} / {reference}", server, f"<= {limit:g}×", _fmt_ratio(p50_ratio),
                       verdict, _fmt_ratio(cpu_ratio)])
    if ratios:
        lines += ["", "Ratios of p50s (and of client CPU per call), in this run:", "",
                  *_table(("clients", "server", "target", "p50 ratio", "verdict", "CPU ratio"),
                          ratios)]
    return [*lines, "", DOC_END]
