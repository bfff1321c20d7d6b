"""h2spec (HTTP/2 conformance, RFC 9113 and RFC 7541) against minigrpc's server.

Runs when an h2spec binary is on PATH (or at ``$H2SPEC``) and skips otherwise: h2spec is not
part of the repository. minigrpc alone takes about ten seconds; the comparison with grpc-go's
and grpcio's servers (three minutes, most of it h2spec waiting on their timeouts) is
``make h2spec``. The cases minigrpc fails must be exactly those listed, each with its reason,
in tools/h2spec_run.py: a new failure is a bug, and an entry that no longer fails must go.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tools"))

import h2spec_run

H2SPEC = h2spec_run.find_h2spec()


@pytest.mark.skipif(H2SPEC is None, reason="no h2spec binary on PATH or at $H2SPEC")
@pytest.mark.timeout(120)
def test_minigrpc_fails_only_the_cases_listed_with_a_reason() -> None:
    assert H2SPEC is not None
    run = h2spec_run.run_h2spec(H2SPEC, "minigrpc", sys.executable)
    assert not run.unavailable, run.unavailable
    assert len(run.cases) >= 140, f"h2spec ran {len(run.cases)} cases"
    failed = {case_id: case.message for case_id, case in run.cases.items()
              if case.result == "failed"}
    assert sorted(failed) == sorted(h2spec_run.KNOWN_FAILURES), failed
    assert h2spec_run.verdict({"minigrpc": run}) == []


def test_report_reading_names_cases_as_h2spec_does(tmp_path: Path) -> None:
    """The case names the verdict and the doc use are the ones h2spec accepts to run one case."""
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="5.1.2. Stream Concurrency" package="http2/5.1.2">'
        '<testcase classname="first"></testcase>'
        '<testcase classname="second"><error>GOAWAY Frame\nTimeout</error></testcase>'
        '<testcase classname="third"><skipped></skipped></testcase>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    cases = h2spec_run.read_junit(str(report))
    assert [(c.case_id, c.result) for c in cases.values()] == [
        ("http2/5.1.2/1", "passed"), ("http2/5.1.2/2", "failed"), ("http2/5.1.2/3", "skipped"),
    ]
    assert cases["http2/5.1.2/2"].message == "GOAWAY Frame\nTimeout"


def _run(server: str, results: dict) -> h2spec_run.Run:
    return h2spec_run.Run(server, {
        case_id: h2spec_run.Case(case_id, case_id, "section", result, "why")
        for case_id, result in results.items()
    })


def test_verdict_fails_on_a_case_grpc_go_passes_and_on_a_stale_entry() -> None:
    known = dict.fromkeys(h2spec_run.KNOWN_FAILURES, "failed")
    ours = _run("minigrpc", {**known, "http2/6.1/1": "failed", "http2/6.1/2": "failed"})
    go = _run("grpc-go", {"http2/6.1/1": "passed", "http2/6.1/2": "failed"})
    problems = h2spec_run.verdict({"minigrpc": ours, "grpc-go": go})
    assert len(problems) == 1 and problems[0].startswith("http2/6.1/1 "), problems
    stale = next(iter(h2spec_run.KNOWN_FAILURES))
    ours = _run("minigrpc", {**known, stale: "passed"})
    problems = h2spec_run.verdict({"minigrpc": ours, "grpc-go": go})
    assert problems == [f"{stale}: listed in KNOWN_FAILURES but does not fail on minigrpc;"
                        " remove the entry"]


def test_without_h2spec_the_runner_says_so_and_succeeds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("H2SPEC", raising=False)
    assert h2spec_run.main(["--servers", "minigrpc"]) == 0
    assert "no h2spec binary" in capsys.readouterr().out
