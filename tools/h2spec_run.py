"""Run h2spec (HTTP/2 conformance) against minigrpc's server, grpc-go's and grpcio's, and compare.

h2spec (summerwind/h2spec) opens a connection per case, sends frames an HTTP/2 server must
accept or reject (RFC 9113 and RFC 7541), and checks the answer.  Its code is not part of this
repository and nothing here fetches it: the binary is taken from ``$H2SPEC`` or from ``PATH``
(``tools/build_h2spec.sh`` builds one from a clone of its source); without one this script says
so and exits 0::

    make h2spec                                           # the three servers, compared
    python tools/h2spec_run.py --servers minigrpc         # minigrpc alone (about 10 s)
    python tools/h2spec_run.py --write-doc                # also rewrite docs/h2spec.md

Each server listens on 127.0.0.1 (TCP, plaintext, port chosen by the kernel) in a process of
its own; the three h2spec runs go in parallel (a failing case mostly waits for h2spec's 2 s
timeout, so grpcio's run takes about three minutes).  The JUnit report of each run is read case
by case; a case is named ``<section>/<number>`` (``http2/5.1.2/1``), the spelling h2spec takes
on its command line to run that case alone.

The verdict (exit status 1 when it does not hold):

* minigrpc fails no case that grpc-go's server passes, unless the case is in
  :data:`KNOWN_FAILURES` with the reason why the case cannot pass against a gRPC server that
  answers a non-gRPC request at once;
* every case of :data:`KNOWN_FAILURES` still fails on minigrpc (a stale entry must go).

h2spec sends ``GET /`` requests without ``content-type: application/grpc``.  minigrpc answers
them with a Trailers-Only rejection (HTTP 405, PROTOCOL-HTTP2.md "Responses"), grpc-go resets
them with RST_STREAM, grpcio answers or ignores them case by case; so a case that expects a
response body shows how each server treats a request that is not gRPC, not a framing fault.

minigrpc's server runs with ``grpc.http2.max_frame_size`` at 16,384 bytes, the RFC's initial
value (its default is 1 MiB): h2spec's case http2/4.2/3 sends a 20,000-byte HEADERS frame on
the assumption that the peer kept the initial value, and with 1 MiB advertised that frame is
legal and the case could not test the FRAME_SIZE_ERROR check (RFC 9113 §4.2).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import IO, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = REPO_ROOT / "docs" / "h2spec.md"
SERVERS = ("minigrpc", "grpc-go", "grpcio")

#: Seconds h2spec waits for an expected frame (its own default) and for a whole run.
CASE_TIMEOUT = 2
RUN_TIMEOUT = 600.0

#: Cases minigrpc fails, each with the reason.  The test asserts that minigrpc fails exactly
#: these; a case grpc-go passes must be here with a reason, or it is a bug to fix.
KNOWN_FAILURES: Dict[str, str] = {
    "generic/2/2": (
        "h2spec expects a DATA frame after its WINDOW_UPDATE on the half-closed stream; a "
        "`GET /` is not a gRPC request, so minigrpc answers it with a Trailers-Only rejection "
        "(HTTP 405, PROTOCOL-HTTP2.md \"Responses\"): one HEADERS frame, no DATA. The "
        "WINDOW_UPDATE is accepted. grpc-go and grpcio fail it too."
    ),
    "generic/2/3": (
        "as generic/2/2, with a PRIORITY frame: accepted, and the Trailers-Only answer has no "
        "DATA. grpc-go and grpcio fail it too."
    ),
    "http2/5.1.2/1": (
        "h2spec opens MAX_CONCURRENT_STREAMS + 1 streams with `GET /` requests and expects the "
        "last one refused; minigrpc answers each with a Trailers-Only that ends the stream "
        "before it reads the next HEADERS, so no more than one stream is ever open and none is "
        "over the limit (RFC 9113 §5.1.2 counts open and half-closed streams only). grpc-go and "
        "grpcio advertise no limit, so h2spec skips the case for them. A gRPC call past the "
        "limit gets RST_STREAM(REFUSED_STREAM) (tests/unit/test_server_behaviour.py)."
    ),
}

#: The minigrpc server h2spec talks to: one unary method, the port on stdout, stop on stdin EOF.
_MINIGRPC_SERVER = r"""
import concurrent.futures, sys
import minigrpc

def echo(request, context):
    return request

handler = minigrpc.method_handlers_generic_handler(
    "h2spec.Echo", {"Call": minigrpc.unary_unary_rpc_method_handler(echo)})
server = minigrpc.server(concurrent.futures.ThreadPoolExecutor(4), handlers=[handler],
                         options=[("grpc.http2.max_frame_size", 16384)])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print("READY 127.0.0.1:%d" % port, flush=True)
sys.stdin.read()
server.stop(0).wait(10)
"""

#: grpcio's server, the same shape.
_GRPCIO_SERVER = _MINIGRPC_SERVER.replace("import minigrpc", "import grpc as minigrpc")


class Case(NamedTuple):
    """One h2spec case of one run."""

    case_id: str
    title: str
    section: str
    result: str  # "passed", "failed" or "skipped"
    message: str


class Run(NamedTuple):
    """One server's h2spec run: its cases in h2spec's order, or why it did not run."""

    server: str
    cases: Dict[str, Case]
    unavailable: str = ""

    def count(self, result: str) -> int:
        return sum(1 for case in self.cases.values() if case.result == result)


def find_h2spec() -> Optional[str]:
    """The h2spec binary: ``$H2SPEC`` if set, else the first on ``PATH``."""
    configured = os.environ.get("H2SPEC")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("h2spec")


def h2spec_version(binary: str) -> str:
    output = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return (output.stdout or "").strip().replace("Version: ", "") or "unknown"


def read_junit(path: str) -> Dict[str, Case]:
    """h2spec's JUnit report, case by case: a suite per section, its cases numbered from 1."""
    cases: Dict[str, Case] = {}
    for suite in ElementTree.parse(path).iter("testsuite"):
        package = suite.get("package", "")
        for number, testcase in enumerate(suite.iter("testcase"), start=1):
            result, message = "passed", ""
            for child in testcase:
                if child.tag in ("failure", "error"):
                    text = child.text or child.get("message") or ""
                    result, message = "failed", text.strip()
                elif child.tag == "skipped":
                    result = "skipped"
            case_id = f"{package}/{number}"
            cases[case_id] = Case(case_id, testcase.get("classname", ""),
                                  suite.get("name", ""), result, message)
    return cases


# ------------------------------------------------------------------------------------------------
# Servers: each yields its "host:port" while it runs.


def _ready_target(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("READY "):
        process.kill()
        _, err = process.communicate()
        raise RuntimeError(f"server did not start: {line!r} {err[-1500:]}")
    return line[len("READY "):]


class _PythonServer:
    """A server script in its own interpreter, stopped by closing its stdin."""

    def __init__(self, script: str, python: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        self.process = subprocess.Popen(
            [python, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=str(REPO_ROOT), env=env)
        self.target = _ready_target(self.process)

    def stop(self) -> str:
        """Stop the server; its stderr, in which a traceback would be a finding."""
        try:
            _, err = self.process.communicate(input="", timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return str(err)


def _grpcio_available(python: str) -> bool:
    return subprocess.run([python, "-c", "import grpc"], capture_output=True).returncode == 0


def _start(server: str, python: str) -> Tuple[str, Callable[[], str]]:
    """Start ``server``; return its target and the function that stops it."""
    if server == "minigrpc":
        process = _PythonServer(_MINIGRPC_SERVER, python)
        return process.target, process.stop
    if server == "grpcio":
        if not _grpcio_available(python):
            raise RuntimeError(f"grpcio is not installed for {python}")
        process = _PythonServer(_GRPCIO_SERVER, python)
        return process.target, process.stop
    sys.path.insert(0, str(REPO_ROOT))
    from tests.go_peers import GoServer, GoUnavailable, build_go_peers

    try:
        go = GoServer(build_go_peers(), ["tcp:127.0.0.1:0"]).start()
    except GoUnavailable as error:
        raise RuntimeError(f"grpc-go's server cannot be built here: {error}") from error

    def stop() -> str:
        text = go.stderr()
        go.stop()
        return text

    return go.targets[0], stop


def run_h2spec(binary: str, server: str, python: str, log: Optional[IO[str]] = None) -> Run:
    """Start ``server``, run every h2spec case against it, stop it."""
    try:
        target, stop = _start(server, python)
    except RuntimeError as error:
        return Run(server, {}, str(error))
    host, _, port = target.rpartition(":")
    stderr = ""
    try:
        with tempfile.TemporaryDirectory(prefix="h2spec-") as scratch:
            junit = os.path.join(scratch, "junit.xml")
            command = [binary, "-h", host, "-p", port, "-o", str(CASE_TIMEOUT), "-j", junit]
            completed = subprocess.run(command, capture_output=True, text=True,
                                       timeout=RUN_TIMEOUT)
            if log is not None:
                log.write(f"== {server}: {' '.join(command[1:])}\n{completed.stdout}\n")
            if not os.path.exists(junit):
                return Run(server, {}, f"h2spec wrote no report: {completed.stderr[-500:]}")
            cases = read_junit(junit)
    finally:
        stderr = stop()
    if "Traceback" in stderr:
        return Run(server, cases, f"the server logged a traceback: {stderr[-1500:]}")
    return Run(server, cases)


# ------------------------------------------------------------------------------------------------
# Verdict and document.


def verdict(runs: Dict[str, Run]) -> List[str]:
    """What is wrong, one line each; empty when minigrpc holds up."""
    problems: List[str] = []
    ours = runs.get("minigrpc")
    if ours is None or not ours.cases:
        return [f"minigrpc did not run: {ours.unavailable if ours else 'not selected'}"]
    if ours.unavailable:
        problems.append(f"minigrpc: {ours.unavailable}")
    failed = {case_id for case_id, case in ours.cases.items() if case.result == "failed"}
    go = runs.get("grpc-go")
    if go is not None and not go.unavailable:
        for case_id in sorted(failed - set(KNOWN_FAILURES)):
            if go.cases.get(case_id, ours.cases[case_id]).result == "passed":
                case = ours.cases[case_id]
                problems.append(f"{case_id} ({case.title}): fails on minigrpc, passes on grpc-go:"
                                f" {_one_line(case.message)}")
    else:
        # Without grpc-go to compare with, any failure not explained is a problem.
        for case_id in sorted(failed - set(KNOWN_FAILURES)):
            case = ours.cases[case_id]
            problems.append(f"{case_id} ({case.title}): fails on minigrpc, no known reason:"
                            f" {_one_line(case.message)}")
    for case_id in sorted(set(KNOWN_FAILURES) - failed):
        problems.append(f"{case_id}: listed in KNOWN_FAILURES but does not fail on minigrpc;"
                        " remove the entry")
    return problems


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _failure(message: str) -> str:
    """h2spec's failure text: the frames it would accept, one a line, then what it got."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) < 2:
        return _one_line(message)
    return f"expected {' or '.join(lines[:-1])}; got {lines[-1]}"


def _cell(case: Optional[Case]) -> str:
    if case is None:
        return "not run"
    if case.result == "passed":
        return "pass"
    if case.result == "skipped":
        return "skipped"
    return "**fail**: " + _failure(case.message).replace("|", "\\|")


_OUTCOME = {"passed": "passes", "failed": "fails", "skipped": "skips it"}


def render(runs: Dict[str, Run], version: str) -> str:
    order = [name for name in SERVERS if name in runs]
    total = max((len(run.cases) for run in runs.values()), default=0)
    lines = [
        "# h2spec: HTTP/2 conformance of minigrpc's server",
        "",
        "Generated by `tools/h2spec_run.py --write-doc` from one run of h2spec "
        f"{version} against",
        "minigrpc's server, grpc-go's server (tests/go/interop_server) and grpcio's server, side "
        "by side,",
        "each on 127.0.0.1 over plaintext TCP; do not edit by hand. `make h2spec` runs the same "
        "comparison",
        "without rewriting this page; it fails when minigrpc fails a case that grpc-go's server "
        "passes",
        "and that is not listed below with its reason.",
        "",
        "h2spec's requests are `GET /` without `content-type: application/grpc`: not gRPC "
        "requests. Each",
        "server answers them in its own way (minigrpc: a Trailers-Only rejection with HTTP 405; "
        "grpc-go:",
        "RST_STREAM; grpcio: an answer or nothing, case by case), so a case that waits for a "
        "response",
        "body measures that answer more than the server's framing. minigrpc's server runs with",
        "`grpc.http2.max_frame_size` at 16,384 (the RFC's initial value) so that case "
        "http2/4.2/3, which",
        "assumes that value, tests the FRAME_SIZE_ERROR check (RFC 9113 §4.2).",
        "",
        "## Pass counts, one run",
        "",
        f"| Server | Passed | Failed | Skipped | of {total} |",
        "|---|---|---|---|---|",
    ]
    for name in order:
        run = runs[name]
        if run.unavailable:
            lines.append(f"| {name} | not run: {_one_line(run.unavailable)} | | | |")
        else:
            lines.append(f"| {name} | {run.count('passed')} | {run.count('failed')} "
                         f"| {run.count('skipped')} | {len(run.cases)} |")
    ours = runs.get("minigrpc")
    lines += ["", "## Cases minigrpc fails, and why", ""]
    failing = [c for c in (ours.cases.values() if ours else ()) if c.result == "failed"]
    if not failing:
        lines.append("None.")
    for case in failing:
        others = ", ".join(
            f"{name} {_OUTCOME[runs[name].cases[case.case_id].result]}"
            for name in order
            if name != "minigrpc" and case.case_id in runs[name].cases
        )
        reason = KNOWN_FAILURES.get(case.case_id, "**no known reason: a bug to fix**")
        lines += [
            f"- **{case.case_id}** {case.section}: {case.title}. h2spec "
            f"{_failure(case.message)}. ({others}.)",
            f"  {reason}",
        ]
    lines += [
        "",
        "## Every case some server fails",
        "",
        "| Case | What h2spec sends | " + " | ".join(order) + " |",
        "|---|---|" + "---|" * len(order),
    ]
    ids: List[str] = []
    for run in runs.values():
        for case_id in run.cases:
            if case_id not in ids:
                ids.append(case_id)
    for case_id in ids:
        cases = [runs[name].cases.get(case_id) for name in order]
        if all(case is not None and case.result == "passed" for case in cases):
            continue
        title = next(case.title for case in cases if case is not None)
        cells = " | ".join(_cell(case) for case in cases)
        lines.append(f"| {case_id} | {title.replace('|', '/')} | {cells} |")
    return "\n".join(lines) + "\n"


def run_servers(binary: str, servers: Sequence[str], python: str,
                log: Optional[IO[str]]) -> Dict[str, Run]:
    with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
        futures = {name: pool.submit(run_h2spec, binary, name, python, log) for name in servers}
    return {name: futures[name].result() for name in servers}


def _summaries(runs: Dict[str, Run]) -> Iterator[str]:
    for name, run in runs.items():
        if run.unavailable and not run.cases:
            yield f"{name}: not run ({_one_line(run.unavailable)})"
        else:
            yield (f"{name}: {run.count('passed')} passed, {run.count('failed')} failed, "
                   f"{run.count('skipped')} skipped of {len(run.cases)}")
            if run.unavailable:
                yield f"{name}: {run.unavailable}"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(SERVERS),
                        help=f"comma-separated, of {', '.join(SERVERS)}")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs minigrpc's and grpcio's servers")
    parser.add_argument("--write-doc", action="store_true", help=f"rewrite {DOC_PATH.name}")
    parser.add_argument("--log", help="append h2spec's own output to this file")
    args = parser.parse_args(argv)
    servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = [name for name in servers if name not in SERVERS]
    if unknown:
        parser.error(f"unknown server {', '.join(unknown)}")
    binary = find_h2spec()
    if binary is None:
        print("h2spec: no h2spec binary on PATH (or at $H2SPEC); skipping the conformance run. "
              "Build summerwind/h2spec and put it on PATH to run it.")
        return 0
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    try:
        runs = run_servers(binary, servers, args.python, log)
    finally:
        if log is not None:
            log.close()
    for line in _summaries(runs):
        print("h2spec:", line)
    problems = verdict(runs)
    if args.write_doc:
        DOC_PATH.write_text(render(runs, h2spec_version(binary)), encoding="utf-8")
        print(f"h2spec: wrote {DOC_PATH.relative_to(REPO_ROOT)}")
    for problem in problems:
        print("h2spec: FAIL", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
