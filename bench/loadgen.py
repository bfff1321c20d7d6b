"""Load generators that are not Python: grpc-go's client and h2load, for the server section.

The grpcio client of :mod:`bench.workloads` is the section's main load; these two add a
client antrea's own side would use (grpc-go, tests/go/bench_client, built by tests/go_peers.py)
and a C HTTP/2 load generator (h2load from nghttp2, Debian's ``nghttp2-client``) whose own cost
per call is far below any of the servers'. Each run returns the same JSON shape as
:func:`bench.workloads.throughput`: ``{"calls", "seconds", "calls_per_s"}`` or ``{"error"}``;
grpc-go's client also reads server streams (:func:`run_go_streams`), as
:func:`bench.workloads.stream` does, only far cheaper per message than any Python client.

h2load knows nothing of gRPC: it POSTs a ready-made length-prefixed message (the same 200-byte
payload) with gRPC's request headers and counts HTTP 200 answers. A gRPC error also comes with
HTTP 200, so the run also checks that the DATA bytes received are those of an echo for every
call (5 bytes of prefix + the payload, per PROTOCOL-HTTP2.md "Length-Prefixed-Message").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Dict, Optional, Sequence, Tuple

from bench.peers import ECHO_PATH
from bench.workloads import make_payload

#: Client names as they appear in the report's rows.
GO_CLIENT = "grpc-go"
H2LOAD_CLIENT = "h2load"

#: Untimed calls per connection before the grpc-go client's timed calls (as bench.workloads).
WARMUP_CALLS = 20


def go_peers_or_reason() -> Tuple[Optional[Any], str]:
    """``(built Go peers, "")``, or ``(None, why not)`` when Go or grpc-go is not available."""
    try:
        from tests.go_peers import GoUnavailable, build_go_peers
    except ImportError as exc:  # a checkout without tests/
        return None, f"tests/go_peers.py cannot be imported: {exc}"
    try:
        return build_go_peers(), ""
    except GoUnavailable as exc:
        return None, str(exc)


def h2load_or_reason() -> Tuple[Optional[str], str]:
    """``(path of h2load, "")`` or ``(None, why not)``."""
    path = shutil.which("h2load")
    if path is None:
        try:
            from tests.go_peers import install_packages
        except ImportError:
            return None, "h2load is not installed (Debian package nghttp2-client)"
        why_not = install_packages("nghttp2-client")
        path = shutil.which("h2load")
        if path is None:
            return None, ("h2load is not installed (Debian package nghttp2-client)"
                          + (f": {why_not}" if why_not else ""))
    return path, ""


def h2load_version(binary: str) -> str:
    """``nghttp2/1.52.0``, as ``h2load --version`` says it."""
    try:
        completed = subprocess.run([binary, "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    words = completed.stdout.decode("utf-8", "replace").split()
    return words[-1] if words else "?"


def _error(completed: subprocess.CompletedProcess[bytes]) -> Dict[str, Any]:
    tail = (completed.stderr or completed.stdout).decode("utf-8", "replace").strip()[-300:]
    return {"error": f"exit {completed.returncode}: {tail}"}


def run_go_client(binary: str, socket_path: str, size: int, threads: int, calls: int,
                  connections: str, timeout: float) -> Dict[str, Any]:
    """tests/go/bench_client: ``threads`` goroutines × ``calls`` echo calls."""
    command = [binary, "-target", "unix:" + socket_path, "-size", str(size),
               "-threads", str(threads), "-calls", str(calls), "-connections", connections,
               "-warmup", str(WARMUP_CALLS)]
    try:
        completed = subprocess.run(command, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return _error(completed)
    return result if isinstance(result, dict) else {"error": "not a JSON object"}


def run_go_streams(binary: str, socket_path: str, size: int, streams: int, count: int,
                   reps: int, timeout: float) -> Dict[str, Any]:
    """tests/go/bench_client -mode stream: ``streams`` server streams of ``count`` messages at
    once on one connection, one untimed round then ``reps`` timed ones:
    ``{"messages_per_s": [...]}`` as :func:`bench.workloads.stream` returns it."""
    command = [binary, "-mode", "stream", "-target", "unix:" + socket_path, "-size", str(size),
               "-threads", str(streams), "-count", str(count), "-reps", str(reps),
               "-connections", "shared"]
    try:
        completed = subprocess.run(command, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return _error(completed)
    return result if isinstance(result, dict) else {"error": "not a JSON object"}


_FINISHED = re.compile(r"finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s")
_REQUESTS = re.compile(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded")
_TRAFFIC = re.compile(r"traffic: .*?\((\d+)\) headers .*?\((\d+)\) data")


def run_h2load(binary: str, socket_path: str, size: int, threads: int, calls: int,
               connections: str, timeout: float) -> Dict[str, Any]:
    """h2load with as many calls in flight as the other clients have threads.

    ``shared``: one connection with ``threads`` concurrent streams; ``per-thread``: ``threads``
    connections with one stream each. h2load's own warm-up is its connection set-up."""
    total = threads * calls
    message = b"\x00" + size.to_bytes(4, "big") + make_payload(size)
    clients, streams = (1, threads) if connections == "shared" else (threads, 1)
    with tempfile.TemporaryDirectory(prefix="mg-h2load-") as directory:
        body = os.path.join(directory, "request")
        with open(body, "wb") as handle:
            handle.write(message)
        command = [binary, "-B", "unix:" + socket_path, "-n", str(total), "-c", str(clients),
                   "-m", str(streams), "-t", "1", "-d", body,
                   "-H", "content-type: application/grpc", "-H", "te: trailers",
                   f"http://localhost{ECHO_PATH}"]
        try:
            completed = subprocess.run(command, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
    output = completed.stdout.decode("utf-8", "replace")
    finished, requests = _FINISHED.search(output), _REQUESTS.search(output)
    traffic = _TRAFFIC.search(output)
    if completed.returncode != 0 or not (finished and requests and traffic):
        return _error(completed)
    succeeded = int(requests.group(3))
    if succeeded != total:
        return {"error": f"h2load: {succeeded} of {total} calls answered HTTP 200"}
    data = int(traffic.group(2))
    if data < total * len(message):
        return {"error": f"h2load: {data} DATA bytes for {total} echoes of {len(message)} bytes"
                         " (some calls ended without their echo)"}
    seconds = float(finished.group(1)) / {"us": 1e6, "ms": 1e3, "s": 1.0}[finished.group(2)]
    return {"calls": total, "seconds": seconds, "calls_per_s": float(finished.group(3))}


def run_load(client: str, binary: str, socket_path: str, arguments: Sequence[str],
             timeout: float) -> Dict[str, Any]:
    """Run ``client`` (grpc-go or h2load) with :mod:`bench.workloads`' throughput arguments,
    or grpc-go with its stream arguments (``--count``, ``--reps``, ``--threads`` streams)."""
    options = dict(zip(arguments[::2], arguments[1::2]))
    if "--count" in options:
        if client != GO_CLIENT:
            return {"error": f"{client} reads no gRPC server streams"}
        return run_go_streams(binary, socket_path, int(options["--size"]),
                              int(options["--threads"]), int(options["--count"]),
                              int(options["--reps"]), timeout)
    size, threads = int(options["--size"]), int(options["--threads"])
    calls, connections = int(options["--calls"]), options["--connections"]
    runner = run_go_client if client == GO_CLIENT else run_h2load
    return runner(binary, socket_path, size, threads, calls, connections, timeout)
