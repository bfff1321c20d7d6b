"""Generate docs/robustness.md from a run of the fault-injection and fuzz suites.

One command reruns the suites and rewrites the document::

    .venv/bin/python tools/robustness_report.py

It runs pytest on the hostile and fuzz test files with ``--junitxml`` (the outcome of every
test) and ``$ROBUSTNESS_RECORD`` (one JSON line per scenario from
:func:`tests.hostile.scenarios.record_observation`: what was expected, what was observed, and
the fix of a known bug), then renders one table per side: every scenario, the observed outcome, the
test that checks it and, for a scenario that exposed a bug, the fix. ``--junit`` and
``--record`` render an earlier run instead of starting a new one.

Volatile details (temporary paths, timings) are normalised so that two runs of unchanged code
produce the same document. The section measured under attack (``make robustness-attacks``,
tools/attack_report.py: minutes of measurements) is kept as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from typing import Dict, Iterable, List, Optional, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_FILES = (
    "tests/hostile/test_hostile_client.py",
    "tests/hostile/test_hostile_plugin.py",
    "tests/hostile/test_hostile_server.py",
    "tests/unit/test_fuzz.py",
    "tests/hostile/test_fuzz_sockets.py",
)
FUZZ_FILES = ("tests/unit/test_fuzz.py", "tests/hostile/test_fuzz_sockets.py")
DEFAULT_OUTPUT = os.path.join("docs", "robustness.md")
SIDES = (
    ("client", "Client: minigrpc's channel against a hostile server",
     "tests/hostile/test_hostile_client.py"),
    ("plugin", "Plugin: `python -m cni_client` against a hostile agent",
     "tests/hostile/test_hostile_plugin.py"),
    ("server", "Server: `minigrpc.server()` against hostile clients",
     "tests/hostile/test_hostile_server.py"),
)
RESULT_ORDER = ("failed", "error", "xpassed", "xfailed", "skipped", "passed")
RESULT_TEXT = {
    "passed": "pass",
    "xfailed": "**known bug** (xfail)",
    "xpassed": "XPASS (bug fixed? remove the xfail)",
    "failed": "**FAIL**",
    "error": "**ERROR**",
    "skipped": "skipped",
}


def run_suites(junit: str, record: str, extra: Iterable[str]) -> int:
    env = dict(os.environ, ROBUSTNESS_RECORD=record)
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        f"--junitxml={junit}", "-o", "junit_family=xunit2", *TEST_FILES, *extra,
    ]
    print("running:", " ".join(command[1:]), file=sys.stderr)
    return subprocess.call(command, cwd=REPO_ROOT, env=env)


def read_junit(path: str) -> Dict[str, Tuple[str, str]]:
    """nodeid -> (result, message) from a pytest junit xml."""
    results: Dict[str, Tuple[str, str]] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        classname = case.get("classname", "")
        # "tests.hostile.test_<name>" -> "tests/hostile/test_<name>.py"; a class part would
        # follow the module.
        parts = classname.split(".")
        file_parts: List[str] = []
        rest: List[str] = []
        for part in parts:
            if rest or (file_parts and file_parts[-1].startswith("test_")):
                rest.append(part)
            else:
                file_parts.append(part)
        nodeid = "/".join(file_parts) + ".py::" + "::".join([*rest, case.get("name", "")])
        result, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                result = "failed" if child.tag == "failure" else "error"
                message = child.get("message", "")
            elif child.tag == "skipped":
                kind = child.get("type", "")
                message = child.get("message", "")
                result = "xfailed" if "xfail" in kind else "skipped"
        results[nodeid] = (result, message)
    return results


def read_records(path: str) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


_TMP = re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s'\",:)\]]*")
#: A loopback target's port, which each run picks anew (connection errors name the target).
_LOOPBACK_PORT = re.compile(r"(?<![\w.])(127\.0\.0\.1|localhost|\[::1\]):\d+")


def normalise(text: Optional[str], limit: int = 140) -> str:
    """No machine paths, no newlines, no table breakers; bounded length."""
    if text is None:
        return ""
    text = str(text).replace(REPO_ROOT, "<repo>")
    text = _TMP.sub("<tmp>", text)
    text = _LOOPBACK_PORT.sub(r"\1:<port>", text)
    text = re.sub(r"\s+", " ", text).strip().replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_test(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1]


def worst(results: Iterable[str]) -> str:
    ranked = sorted(results, key=RESULT_ORDER.index)
    return ranked[0] if ranked else "passed"


def memory_bucket(mib: Optional[float]) -> str:
    if mib is None:
        return ""
    for limit in (10, 25, 50, 100, 150):
        if mib < limit:
            return f"< {limit} MiB"
    return f"{mib:.0f} MiB"


def render(junit: Dict[str, Tuple[str, str]], records: List[dict]) -> str:
    lines = [
        "# Robustness: hostile peers and fuzzing",
        "",
        "Generated by `tools/robustness_report.py` from a run of the fault-injection suites",
        "(tests/hostile/) and the fuzz suite; do not edit by hand. Regenerate with:",
        "",
        "    .venv/bin/python tools/robustness_report.py",
        "",
        "Expected codes come from gRPC's PROTOCOL-HTTP2.md, doc/statuscodes.md,",
        "doc/http-grpc-status-mapping.md and RFC 9113 (named per scenario). \"known",
        "bug\" rows are strict xfails: the test still runs and turns into a failure once the fix",
        "lands, at which point the xfail and its entry in the test's `KNOWN_BUGS` go.",
        "",
    ]
    counts: Dict[str, int] = {}
    for result, _ in junit.values():
        counts[result] = counts.get(result, 0) + 1
    summary = ", ".join(f"{counts[k]} {k}" for k in RESULT_ORDER if counts.get(k))
    lines += [f"Run summary: {summary or 'no tests ran'}.", ""]

    bugs: List[str] = []
    body: List[str] = []
    lines_before_sides = lines
    lines = body
    for side, title, _path in SIDES:
        rows: Dict[str, dict] = {}
        for record in records:
            if record.get("side") != side:
                continue
            row = rows.setdefault(record["scenario"], {
                "description": record.get("description", ""),
                "expected": record.get("expected", ""),
                "reference": record.get("reference", ""),
                "observed": [], "tests": [], "results": [], "fix": "", "memory": [],
            })
            # Room for a connection error that names its target before the cause.
            observed = normalise(record.get("observed"), 200)
            if record.get("details") and side == "client":
                observed += f" ({normalise(record['details'])})"
            if observed not in row["observed"]:
                row["observed"].append(observed)
            row["tests"].append(short_test(record["nodeid"]))
            result, message = junit.get(record["nodeid"], ("not run", ""))
            row["results"].append(result if result in RESULT_ORDER else "error")
            if record.get("fix"):
                row["fix"] = record["fix"]
            elif result == "xfailed" and not row["fix"]:
                row["fix"] = message
            if record.get("memory_mib") is not None:
                row["memory"].append(record["memory_mib"])
        if not rows:
            continue
        lines += [f"## {title}", ""]
        if side == "server":
            header = (
                "| Scenario | What the client does | Expected | Observed | Peak RSS growth "
                "| Result | Test | Fix |"
            )
            lines += [header, "|---|---|---|---|---|---|---|---|"]
        else:
            header = "| Scenario | What the peer does | Expected | Observed | Result | Test | Fix |"
            lines += [header, "|---|---|---|---|---|---|---|"]
        for name, row in rows.items():
            result = RESULT_TEXT[worst(row["results"])]
            tests = "<br>".join(f"`{t}`" for t in dict.fromkeys(row["tests"]))
            observed = " / ".join(row["observed"])
            expected = normalise(row["expected"])
            if row["reference"]:
                expected += f" ({normalise(row['reference'])})"
            fix = normalise(row["fix"], 400)
            if fix:
                state = "open" if worst(row["results"]) == "xfailed" else "fixed"
                bugs.append(f"- **{side} / {name}** ({state}): {fix}")
            if side == "server":
                memory = memory_bucket(max(row["memory"])) if row["memory"] else ""
                lines.append(
                    f"| {name} | {normalise(row['description'])} | {expected} | {observed} "
                    f"| {memory} | {result} | {tests} | {fix} |"
                )
            else:
                lines.append(
                    f"| {name} | {normalise(row['description'])} | {expected} | {observed} "
                    f"| {result} | {tests} | {fix} |"
                )
        lines.append("")

    fuzz = sorted((n, r) for n, r in junit.items() if n.startswith(FUZZ_FILES))
    for nodeid, (result, message) in fuzz:
        if result == "xfailed":
            bugs.append(f"- **fuzz / {short_test(nodeid)}** (open): {normalise(message, 400)}")
    if fuzz:
        lines += [
            "## Fuzzing (hypothesis)",
            "",
            "Derandomized sample in `make test`; `HYPOTHESIS_PROFILE=long` runs 20x the examples,",
            "randomized.",
            "",
            "| Test | Result | Failure |",
            "|---|---|---|",
        ]
        for nodeid, (result, message) in fuzz:
            text = RESULT_TEXT.get(result, result)
            lines.append(f"| `{short_test(nodeid)}` | {text} | {normalise(message)} |")
        lines.append("")
    head = lines_before_sides
    if bugs:
        head += ["## Bugs the suites exposed", "", *bugs, ""]
    return "\n".join(head + body)


#: The measured attack section (tools/attack_report.py) lives between these two lines; a rerun
#: of this script keeps it as it is.
ATTACK_BEGIN = "<!-- attack-report: generated by tools/attack_report.py; do not edit -->"
ATTACK_END = "<!-- /attack-report -->"


def attack_section(text: str) -> str:
    """The attack section of a document, markers included; empty when it has none."""
    start = text.find(ATTACK_BEGIN)
    end = text.find(ATTACK_END, start)
    if start < 0 or end < 0:
        return ""
    return text[start : end + len(ATTACK_END)] + "\n"


def with_attack_section(document: str, section: str) -> str:
    """``document`` with ``section`` in place of its attack section, or else before the
    document's first "## " heading."""
    old = attack_section(document)
    if old:
        return document.replace(old, section, 1)
    if not section:
        return document
    index = document.find("\n## ")
    if index < 0:
        return document.rstrip("\n") + "\n\n" + section
    return document[: index + 1] + section + "\n" + document[index + 1 :]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=os.path.join(REPO_ROOT, DEFAULT_OUTPUT))
    parser.add_argument("--junit", help="render this junit xml instead of running the suites")
    parser.add_argument("--record", help="the observations JSON-lines file of that run")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args(argv)
    status = 0
    with tempfile.TemporaryDirectory(prefix="robustness-") as scratch:
        junit = args.junit
        record = args.record
        if junit is None:
            junit = os.path.join(scratch, "junit.xml")
            record = os.path.join(scratch, "observations.jsonl")
            status = run_suites(junit, record, args.pytest_args)
        document = render(read_junit(junit), read_records(record or ""))
    kept = ""
    if os.path.exists(args.output):
        with open(args.output, encoding="utf-8") as stream:
            kept = attack_section(stream.read())
    with open(args.output, "w", encoding="utf-8") as stream:
        stream.write(with_attack_section(document + "\n", kept))
    print(f"wrote {os.path.relpath(args.output, REPO_ROOT)}", file=sys.stderr)
    # pytest's status: 0 all passed (xfails included), 1 some failed.
    return status


if __name__ == "__main__":
    sys.exit(main())
