"""Smoke test of the benchmark harness: ``python -m bench --tiny`` writes its report.

Benchmarks are not tests, so nothing here looks at a number: the test only proves that the
harness runs end to end (real servers, real clients, the real plugin against the reference
agent, all as child processes) and produces docs/benchmarks.md's structure in a temporary
directory.  The repository's docs/ are never touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grpclib", reason="grpclib (the bench extra) is not installed")
pytest.importorskip("grpc", reason="grpcio (a test dependency) is not installed")

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_tiny_run_writes_the_report(tmp_path: Path) -> None:
    results_path = tmp_path / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--tiny", "--no-chart", "--output-dir", str(tmp_path),
         "--json", str(results_path)],
        cwd=REPO_ROOT, capture_output=True, timeout=400,
    )
    assert completed.returncode == 0, completed.stderr.decode("utf-8", "replace")[-2000:]
    report = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    for heading in ("## Performance targets", "## Cold start on each node interpreter",
                    "## Cold start of the health probe on each interpreter",
                    "## 1. Cold plugin invocation",
                    "## 2. Warm unary latency", "## 3. Large messages",
                    "## 4. Server throughput", "## Long-lived channel features: what they cost",
                    "## Machine and versions"):
        assert heading in report, heading
    assert not (tmp_path / "benchmarks.png").exists()  # --no-chart

    # The baselines the harness cannot do without were measured, so the harness itself works
    # (minigrpc's own rows may fail while it is being written; the report then says why).
    results = json.loads(results_path.read_text(encoding="utf-8"))
    grpcio_latency = [row for row in results["latency"]
                      if row["client"] == "grpcio" and row["server"] == "grpcio"]
    assert grpcio_latency and grpcio_latency[0]["samples_us"], grpcio_latency
    raw_large = [row for row in results["large"] if row["client"] == "raw"]
    assert raw_large and raw_large[0]["mb_per_s"], raw_large
    cold = {variant["key"]: variant for variant in results["cold"]["variants"]}
    assert cold["floor"]["wall_ms"], cold["floor"]["failures"]
    assert cold["grpcio"]["wall_ms"], cold["grpcio"]["failures"]
    # The health probe ran on each interpreter found, beside its bare start.
    tool = results["tool"]
    assert tool["interpreters"] and "error" not in tool, tool
    for interpreter in tool["interpreters"]:
        for stage in ("bare", "health"):
            record = tool["measured"][interpreter["key"]][stage]
            assert record["wall_ms"], (interpreter, stage, record)
    # Every interpreter found ran its bare start and the three commands of the bundle (built
    # as make dist builds it, from the pinned wheels: pip must reach the package index).
    nodes = results["nodes"]
    if "could not download" in nodes.get("error", ""):
        pytest.skip("the package index is not reachable: " + nodes["error"][-200:])
    assert nodes["interpreters"], nodes
    for interpreter in nodes["interpreters"]:
        for stage in ("bare", "ADD", "CHECK", "DEL"):
            record = nodes["measured"][interpreter["key"]][stage]
            assert record["wall_ms"] and record["rss_mib"], (interpreter, stage, record)
