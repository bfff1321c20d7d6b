"""``python -m bench --only nodes`` (or another section) replaces its part of docs/benchmarks.md.

The per-interpreter cold start (bench/node_cold.py) takes a couple of minutes, the whole
benchmark run over twenty: measuring it alone must leave every other figure of the report as its
last full run wrote it.  Pure text handling; no benchmark runs here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from bench import node_cold
from bench.splice import splice


def test_only_nodes_replaces_its_own_section() -> None:
    """``--only nodes`` splices: the section between its markers is replaced, everything else is
    kept; a report without the markers gets the section in front of section 1."""
    block = [node_cold.DOC_BEGIN, "new table", node_cold.DOC_END]
    old = "\n".join(["# Benchmarks", "", node_cold.DOC_BEGIN, "old table", node_cold.DOC_END,
                     "", "## 1. Cold plugin invocation", "kept"])
    spliced = splice(old, node_cold.DOC_BEGIN, node_cold.DOC_END, block, "## 1. ")
    assert spliced == old.replace("old table", "new table")
    without = "# Benchmarks\n\n## 1. Cold plugin invocation\nkept"
    assert splice(without, node_cold.DOC_BEGIN, node_cold.DOC_END, block,
                            "## 1. ") == "\n".join(["# Benchmarks", "", *block, "",
                                                    "## 1. Cold plugin invocation", "kept"])


def _samples(wall: float, rss: float) -> dict:
    return {"wall_ms": [wall], "cpu_ms": [wall], "rss_mib": [rss], "failures": []}


def test_only_nodes_replaces_the_node_rows_of_the_targets_table(tmp_path: Path) -> None:
    """The node rows of the targets table are the spliced run's; every other row stays."""
    from bench.report import TARGETS_HEADER
    from bench.splice import splice_report

    measured = {"bare": _samples(10.0, 8.0), "ADD": _samples(25.0, 11.0),
                "CHECK": _samples(31.0, 11.0), "DEL": _samples(24.0, 13.0)}
    results = {"nodes": {"runs": 1, "limits": {"wall": 3.0, "rss": 1.5},
                         "network_config": {"cniVersion": "1.0.0"}, "date": "now",
                         "interpreters": [{"key": "3.9", "label": "CPython 3.9.18"}],
                         "measured": {"3.9": measured}}}
    header = "| " + " | ".join(TARGETS_HEADER) + " |"
    old = "\n".join(["# Benchmarks", "", "## Performance targets", "", header,
                     "|" + "|".join("---" for _ in TARGETS_HEADER) + "|",
                     "| node | stale row | <= 3× | 9.00× | **not met** |  |",
                     "| cold | kept row | <= 1.15× | 1.03× | **met** |  |", "",
                     "## 1. Cold plugin invocation", "kept", ""])
    (tmp_path / "benchmarks.md").write_text(old, encoding="utf-8")
    splice_report(results, str(tmp_path), "nodes")
    text = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert "stale row" not in text
    rows = [line for line in text.split("\n") if line.startswith("| node |")]
    assert rows == [
        "| node | wall: dist/antrea's slowest of ADD/CHECK/DEL / bare start, CPython 3.9.18 |"
        " <= 3× | 3.10× | **not met** | 3.10× |",
        "| node | peak RSS: dist/antrea / bare start, CPython 3.9.18 | <= 1.5× | 1.62× |"
        " **not met** |  |"]
    lines = text.split("\n")
    assert lines[lines.index(rows[-1]) + 1] == "| cold | kept row | <= 1.15× | 1.03× | **met** |  |"
    assert ("| CPython 3.9.18 (RHEL 9, AL2023, Debian 11) | 10.0 | 25.0 (2.5×) | 31.0 (3.1×) |"
            " 24.0 (2.4×) | 8.0 → 13.0 (1.6×) |") in text
    assert text.index(node_cold.DOC_BEGIN) < text.index("## 1. Cold plugin invocation")
    assert text.endswith("kept\n")


def test_only_aio_replaces_its_own_section(tmp_path: Any) -> None:
    """``--only aio`` splices the asyncio clients' section the same way, and its own ratio
    table says which targets the measured rows meet."""
    from bench import aio_clients
    from bench.splice import splice_report

    def row(client: str, p50: float) -> Dict[str, Any]:
        return {"client": client, "server": "grpcio", "samples_us": [p50] * 3,
                "cpu_us_per_call": [p50 / 2], "errors": []}

    results = {"aio": [row("minigrpc-aio", 300.0), row("grpcio-aio", 400.0),
                       row("grpclib", 350.0)]}
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## 2. Warm\nkept\n\n## 3. Large messages\nkept too\n")
    splice_report(results, str(tmp_path), "aio")
    first = report.read_text()
    assert first.index("## 2. Warm") < first.index(aio_clients.DOC_BEGIN)
    assert first.index(aio_clients.DOC_END) < first.index("## 3. Large messages")
    assert "| minigrpc-aio / grpclib | grpcio | <= 0.8× | 0.86× | **not met** |" in first
    assert "| minigrpc-aio / grpcio-aio | grpcio | <= 1× | 0.75× | **met** |" in first
    results["aio"][0] = row("minigrpc-aio", 200.0)
    splice_report(results, str(tmp_path), "aio")
    second = report.read_text()
    assert second.count(aio_clients.DOC_BEGIN) == 1 and "kept too" in second
    assert "| minigrpc-aio / grpclib | grpcio | <= 0.8× | 0.57× | **met** |" in second


def test_only_cold_replaces_section_1_even_without_markers() -> None:
    """A report from before the markers: section 1 and its import profile, up to section 2,
    are replaced; with the markers, only what is between them."""
    from bench.report import COLD_BEGIN, COLD_END

    block = [COLD_BEGIN, "## 1. Cold plugin invocation", "new", COLD_END]
    old = "\n".join(["## Performance targets", "", "## 1. Cold plugin invocation", "old", "",
                     "### Where the cold start goes", "old profile", "", "## 2. Warm", "kept"])
    once = splice(old, COLD_BEGIN, COLD_END, block, "## 2. ", "## 1. Cold plugin invocation")
    assert once == "\n".join(["## Performance targets", "", *block, "", "## 2. Warm", "kept"])
    again = [COLD_BEGIN, "## 1. Cold plugin invocation", "newer", COLD_END]
    assert splice(once, COLD_BEGIN, COLD_END, again, "## 2. ",
                  "## 1. Cold plugin invocation") == once.replace("\nnew\n", "\nnewer\n")


def _spliced_between(tmp_path: Any, results: Dict[str, Any], section: str, before: str,
                     after: str, begin: str, end: str) -> str:
    """``--only section`` on a report with a targets table (one row of another area) and the
    headings ``before`` and ``after``: the spliced text, its section checked to sit between
    them."""
    from bench.report import TARGETS_HEADER
    from bench.splice import splice_report

    header = "| " + " | ".join(TARGETS_HEADER) + " |"
    report = tmp_path / "benchmarks.md"
    report.write_text("\n".join(["# Benchmarks", "", header,
                                 "|" + "|".join("---" for _ in TARGETS_HEADER) + "|",
                                 "| cold | kept row | <= 1× | 1.00× | **met** |  |", "",
                                 before, "kept", "", after, "kept too", ""]))
    splice_report(results, str(tmp_path), section)
    text: str = report.read_text()
    assert text.index(before) < text.index(begin) < text.index(end) < text.index(after)
    return text


def test_only_aio_server_judges_medians_and_shows_the_per_round_spread(tmp_path: Any) -> None:
    """``--only aio-server`` splices its section in front of section 5; a ratio is of medians
    over rounds, its spread pairs round *i* with round *i*, and a failed round (None) drops out
    of both."""
    from bench import aio_servers

    def row(workload: str, server: str, per_round: list) -> Dict[str, Any]:
        return {"workload": workload, "server": server, "client": "grpcio",
                "connections": "shared", "per_round": per_round, "server_cpu_us": [100.0],
                "errors": []}

    results = {"aio_server": [
        row("calls", "minigrpc-aio", [3000.0, 2600.0, None]),
        row("calls", "grpcio-aio", [2000.0, 2600.0, 2500.0]),
        row("calls", "grpclib", [2000.0, 2000.0, 2000.0]),
        row("stream", "minigrpc-aio", [50000.0]), row("stream", "grpclib", [20000.0])]}
    text = _spliced_between(tmp_path, results, "aio-server", "## 4. Server throughput",
                            "## 5. Server streams", aio_servers.DOC_BEGIN, aio_servers.DOC_END)
    # Median 2800 over 2500 (grpcio-aio) and over 2000; rounds 1 and 2 pair up, round 3 fails.
    assert ("| calls/s, grpcio client, 1 connection | minigrpc-aio / grpcio-aio | >= 0.9× | "
            "1.12× | 1.00 – 1.50 | **met** | 1.00× |") in text
    assert ("| calls/s, grpcio client, 1 connection | minigrpc-aio / grpclib | >= 1.3× | "
            "1.40× | 1.30 – 1.50 | **met** | 1.00× |") in text
    assert ("| aio server | stream messages/s, grpcio client: minigrpc-aio / grpclib server | "
            ">= 2× | 2.50× (2.50–2.50 per round) | **met** | 1.00× |") in text
    assert "| cold | kept row |" in text


def test_the_stream_target_is_judged_on_grpc_go_row_when_it_was_measured() -> None:
    """grpcio's client sets the rate of its stream row (bench/aio_servers.py): with grpc-go's
    row measured, only that one is judged; both stay in the section's table, with the CPU
    shares that say which side was busy."""
    from bench import aio_servers

    def row(server: str, client: str, rate: float, shares: tuple) -> Dict[str, Any]:
        return {"workload": "stream", "server": server, "client": client,
                "connections": "shared", "per_round": [rate], "server_cpu_us": [2.0],
                "cpu_shares": [shares], "errors": []}

    results = {"aio_server": [
        row("minigrpc-aio", "grpc-go", 400000.0, (0.97, 0.12)),
        row("grpclib", "grpc-go", 100000.0, (0.95, 0.4)),
        row("minigrpc-aio", "grpcio", 23000.0, (0.3, 0.99)),
        row("grpclib", "grpcio", 22000.0, (0.5, 0.98))]}
    judged = [(mine, reference, client, value) for _, mine, reference, client, _, _, value, _, _
              in aio_servers.comparisons(results)]
    assert judged == [("minigrpc-aio", "grpclib", "grpc-go", 4.0)]
    section = "\n".join(aio_servers.render_section(results))
    assert ("| stream messages/s, grpc-go client, 4 streams | minigrpc-aio | 400,000 | "
            "400,000 – 400,000 | 2.0 | 97% / 12% |  |") in section
    assert "| stream messages/s, grpcio client | grpclib | 22,000 |" in section


def test_only_tool_replaces_its_section_rows_and_readme_table(tmp_path: Path) -> None:
    """``--only tool``: the health probe's section, its rows of the targets table and its README
    table are the spliced run's; the node rows and the plugin's README table stay."""
    from bench import tool_cold
    from bench.report import TARGETS_HEADER
    from bench.splice import splice_readme, splice_report

    measured = {"bare": _samples(10.0, 8.0), "health": _samples(24.0, 11.0)}
    results = {"tool": {"runs": 1, "limits": {"wall": 3.0}, "date": "now", "server": "server",
                        "interpreters": [{"key": "3.12", "label": "CPython 3.12.1"},
                                         {"key": "3.6", "label": "CPython 3.6.15"}],
                        "measured": {"3.12": measured,
                                     "3.6": {"bare": _samples(10.0, 8.0),
                                             "health": _samples(31.0, 9.0)}}}}
    header = "| " + " | ".join(TARGETS_HEADER) + " |"
    old = "\n".join(["# Benchmarks", "", "## Performance targets", "", header,
                     "|" + "|".join("---" for _ in TARGETS_HEADER) + "|",
                     "| node | kept node row | <= 3× | 2.00× | **met** |  |",
                     "| tool | stale row | <= 3× | 9.00× | **not met** |  |", "",
                     "## 1. Cold plugin invocation", "kept", ""])
    (tmp_path / "benchmarks.md").write_text(old, encoding="utf-8")
    splice_report(results, str(tmp_path), "tool")
    text = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert "stale row" not in text and "kept node row" in text
    assert [line for line in text.split("\n") if line.startswith("| tool |")] == [
        "| tool | wall: python -m minigrpc health / bare start, CPython 3.12.1 | <= 3× | 2.40× |"
        " **met** | 2.40× |",
        "| tool | wall: python -m minigrpc health / bare start, CPython 3.6.15 | <= 3× | 3.10× |"
        " **not met** | 3.10× |"]
    assert text.index(tool_cold.DOC_BEGIN) < text.index("## 1. Cold plugin invocation")
    assert "| CPython 3.12.1 | 10.0 | 24.0 (2.4×) | 10.0 → 24.0 (2.4×) | 8.0 → 11.0 | **met** |" \
        in text

    readme = tmp_path / "README.md"
    readme.write_text("\n".join([node_cold.README_BEGIN, "plugin table", node_cold.README_END,
                                 "", tool_cold.README_BEGIN, "old", tool_cold.README_END, ""]),
                      encoding="utf-8")
    splice_readme(results, str(readme))
    spliced = readme.read_text(encoding="utf-8")
    assert "plugin table" in spliced and "\nold\n" not in spliced
    assert "| CPython 3.6.15 | 10.0 | 31.0 (3.1×) |" in spliced


def test_only_channels_judges_each_feature_against_the_same_client_without_it(
        tmp_path: Any) -> None:
    """``--only channels`` splices its section in front of the profiles; each ratio is the
    feature's median over the same client's without it (for balancing, minigrpc's ratio over
    grpcio's on the same servers), with the per-round spread and the client CPU ratio; the rows
    of a pair swap places every other round."""
    from bench import channels

    rows = channels.new_rows()
    config = {"size": 200, "latency_calls": 100, "warmup": 10, "blocks": 4, "threads": 8,
              "calls": 100}
    for round_index in (0, 1):
        retry, balancing, aio, grpcio, grpcio_aio = channels.runs(
            rows, round_index, ["ipv4:1.2.3.4:5", "ipv4:[::1]:6"], config)
        # Each pair shares one child, B first every other round; the balancing pairs with the
        # address list of every server.
        for workload, run in (("paired-latency", retry), ("paired-throughput", balancing),
                              ("paired-throughput", aio), ("paired-throughput", grpcio),
                              ("paired-throughput", grpcio_aio)):
            assert run[0] == workload and ("--b-first" in run[2]) == bool(round_index)
            assert [part[1] for part in run[3]] == ["a", "b"]
        assert [row["variant"] for row, _ in balancing[3]] == ["pick_first", "round_robin"]
        assert [run[1] for run in (balancing, aio, grpcio, grpcio_aio)] == [
            "minigrpc", "minigrpc-aio", "grpcio", "grpcio-aio"]
        assert "ipv4:1.2.3.4:5,[::1]:6" in balancing[2]
        # grpcio's two channels keep their own connections, as minigrpc's always do.
        assert channels.GRPCIO_OWN_CONNECTIONS in grpcio[2] + grpcio_aio[2]
        assert channels.GRPCIO_OWN_CONNECTIONS not in balancing[2] + aio[2]
    figures = {("retry", "no service config"): [[100.0, 300.0], [200.0]],
               ("retry", "retryPolicy"): [[104.0, 320.0], [190.0]],
               ("balancing", "pick_first"): [[1000.0], [2000.0]],
               ("balancing", "round_robin"): [[1100.0], [1600.0]],
               ("grpcio", "pick_first"): [[1000.0], [2000.0]],
               ("grpcio", "round_robin"): [[800.0], [1400.0]]}
    for row in rows:
        kind = "grpcio" if row["client"].startswith("grpcio") else row["kind"]
        for index, value in enumerate(figures[(kind, row["variant"])]):
            cpu = 50.0 * (1.1 if row["variant"] in ("retryPolicy", "round_robin") else 1.0)
            result = ({"samples_us": value, "cpu_us_per_call": cpu} if row["kind"] == "retry"
                      else {"calls_per_s": value[0], "cpu_us_per_call": cpu})
            if row["variant"] == "round_robin" and row["client"] == "minigrpc-aio" and index:
                continue  # its second round failed: it drops out of the spread
            channels.record(row, index, result, [1.0, 0.0, 0.0])
    results = {"channels": {"rows": rows, "config": {"rounds": 2}}}
    text = _spliced_between(tmp_path, results, "channels", "## 5. Server streams",
                            "## Where minigrpc's time goes (cProfile)", channels.DOC_BEGIN,
                            channels.DOC_END)
    # p50 of all samples: 200 without, 190 with; per round 212/200 and 190/200.
    assert ("| p50: minigrpc client with a retryPolicy that never fires / without (grpcio "
            "server) | <= 1.05× | 0.95× | 0.95 – 1.06 | **met** | 1.10× |") in text
    # Medians over rounds: 1350 over 1500 (0.90), over grpcio's 1100 over 1500 (0.73); per
    # round 1.10 over 0.80 and 0.80 over 0.70.
    assert ("| channel | calls/s: round_robin over 3 grpcio servers / pick_first, minigrpc "
            "client over grpcio's | >= 0.9× | 1.23× (1.14–1.38 per round) | **met** | 1.10× |"
            ) in text
    # Round 2 of round_robin failed: 1100 over pick_first's median 1500, as grpcio-aio's;
    # round 1 alone paired.
    assert ("| channel | calls/s: round_robin over 3 grpcio servers / pick_first, minigrpc-aio "
            "client over grpcio-aio's | >= 0.9× | 1.00× (1.38–1.38 per round) | **met** | 1.10× |"
            ) in text
    assert "| minigrpc, pick_first | 1,500 calls/s | 1,000 – 2,000 | 50.0 |  |" in text
    assert ("| minigrpc, round_robin | 1,350 calls/s | 1,100 – 1,600 | 55.0 | 100% / 0% / 0% "
            "|") in text
    assert "| cold | kept row |" in text
