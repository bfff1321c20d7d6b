"""``python -m bench``: run every benchmark and write docs/benchmarks.md.

Modes: the default (full, about 6 minutes on 2 cores), ``--quick`` (well under 2 minutes, for
a smoke run by hand) and ``--tiny`` (seconds; what tests/docs/test_bench_smoke.py runs).  Only the
repetition counts differ between modes; every section, peer and code path is the same.
``--only nodes`` measures the per-interpreter cold start alone (:mod:`bench.node_cold`, about two
minutes in full mode) and replaces just its section of docs/benchmarks.md and the README's table;
``--only tool`` does the same for the health probe's cold start (:mod:`bench.tool_cold`);
``--only aio`` does the same for the asyncio clients' latency (:mod:`bench.aio_clients`),
``--only aio-server`` for the asyncio servers (:mod:`bench.aio_servers`), ``--only channels``
for the long-lived channel rows (:mod:`bench.channels`: a retry policy's cost, round_robin
beside pick_first), and ``--only cold`` for section 1 (:mod:`bench.splice`).

The harness process itself imports no gRPC library: it starts servers (:mod:`bench.peers`) and
clients (:mod:`bench.workloads`) as children, reads their JSON, and writes the report
(:mod:`bench.report`).  A failing peer or client becomes a "failed" row with its reason; the
harness carries on and always writes the report.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench import (
    aio_clients,
    aio_servers,
    channels,
    coldstart,
    loadgen,
    node_cold,
    pypy,
    tool_cold,
)
from bench.peers import GO_SERVER_IMPL, IO_THREAD_SERVER_IMPL, PeerError, PeerProcess, bench_server
from bench.report import write_report
from bench.splice import SECTIONS as SPLICEABLE
from bench.splice import splice_readme, splice_report
from bench.stats import median

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SECTIONS = ("nodes", "tool", "cold", "latency", "aio", "large", "throughput", "aio-server",
            "stream", "channels")

MIB = 1 << 20


# Seconds one client child may run before it is killed and its row marked failed (full mode;
# the other modes scale these down).
CLIENT_TIMEOUT = {"latency": 120.0, "large": 300.0, "throughput": 120.0, "stream": 120.0,
                  "paired-latency": 240.0, "paired-throughput": 240.0}


class Mode:
    """Repetition counts of one mode."""

    def __init__(self, name: str, *, cold_runs: int, importtime_runs: int, latency_calls: int,
                 latency_warmup: int, latency_rounds: int, large_sizes: Sequence[int],
                 large_reps: Sequence[int], large_rounds: int, throughput_threads: int,
                 throughput_calls: int, throughput_rounds: int,
                 throughput_connections: Sequence[str], client_timeout_scale: float,
                 profiles: bool, stream_count: int = 10000, stream_reps: int = 5,
                 stream_rounds: int = 3, pypy_warmup: int = pypy.PYPY_WARMUP,
                 node_runs: int = 15, tool_runs: int = 15, channel_rounds: int = 5) -> None:
        self.name = name
        #: Rounds of the long-lived channel rows (bench/channels.py): more than the latency
        #: section's in quick mode, since they judge a 5% difference.
        self.channel_rounds = channel_rounds
        #: Rounds of the health probe's cold start (bench/tool_cold.py).
        self.tool_runs = tool_runs
        #: Rounds of the per-interpreter cold start (bench/node_cold.py).
        self.node_runs = node_runs
        self.profiles = profiles
        self.client_timeouts = {workload: seconds * client_timeout_scale
                                for workload, seconds in CLIENT_TIMEOUT.items()}
        self.cold_runs = cold_runs
        self.importtime_runs = importtime_runs
        self.latency_calls = latency_calls
        self.latency_warmup = latency_warmup
        #: Untimed calls of a PyPy latency client, and into a PyPy server (bench/pypy.py).
        self.pypy_warmup = pypy_warmup
        self.latency_rounds = latency_rounds
        self.large_sizes = list(large_sizes)
        self.large_reps = list(large_reps)
        self.large_rounds = large_rounds
        self.throughput_threads = throughput_threads
        self.throughput_calls = throughput_calls
        self.throughput_rounds = throughput_rounds
        self.throughput_connections = list(throughput_connections)
        #: Server streams: messages per stream, timed streams per run, rounds.
        self.stream_count = stream_count
        self.stream_reps = stream_reps
        self.stream_rounds = stream_rounds


MODES: Dict[str, Mode] = {
    # About 6 minutes on 2 cores; the rounds are there to spread other processes' load.
    "full": Mode("full", cold_runs=60, importtime_runs=9, latency_calls=3000, latency_warmup=300,
                 latency_rounds=5, large_sizes=(4 * MIB, 64 * MIB), large_reps=(10, 3),
                 large_rounds=3, throughput_threads=8, throughput_calls=1000,
                 throughput_rounds=5, throughput_connections=("shared", "per-thread"),
                 client_timeout_scale=1.0, profiles=True),
    "quick": Mode("quick", cold_runs=8, importtime_runs=3, latency_calls=500, latency_warmup=100,
                  latency_rounds=1, large_sizes=(4 * MIB, 64 * MIB), large_reps=(3, 1),
                  large_rounds=1, throughput_threads=8, throughput_calls=250,
                  throughput_rounds=1, throughput_connections=("shared",),
                  client_timeout_scale=0.4, profiles=True, stream_reps=2, stream_rounds=1,
                  node_runs=5, tool_runs=5, channel_rounds=3),
    "tiny": Mode("tiny", cold_runs=1, importtime_runs=0, latency_calls=20, latency_warmup=5,
                 latency_rounds=1, large_sizes=(4 * MIB,), large_reps=(1,), large_rounds=1,
                 throughput_threads=2, throughput_calls=20, throughput_rounds=1,
                 throughput_connections=("shared",), client_timeout_scale=0.05,
                 profiles=False, stream_count=200, stream_reps=1, stream_rounds=1,
                 pypy_warmup=20, node_runs=1, tool_runs=1, channel_rounds=1),
}

#: The request size of the latency and throughput workloads (a CNI request is about 200 bytes).
LATENCY_SIZE = 200

#: Clients that are not Python (:mod:`bench.loadgen`): name -> executable, filled by :func:`run`
#: with what this machine has.
LOAD_GENERATORS: Dict[str, str] = {}
#: The PyPy venv's python (one item once :func:`run` found it; see bench/pypy.py).
PYPY_PYTHON: List[str] = []



def log(message: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def minigrpc_parts() -> Tuple[bool, bool]:
    """(client available, server available): rows for minigrpc appear only when it has them."""
    def present(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ImportError:
            return False

    return present("minigrpc.blocking.channel"), present("minigrpc.blocking.server_api")


def run_client(mode: Mode, workload: str, client: str, socket_path: str,
               arguments: Sequence[str]) -> Dict[str, Any]:
    """Run one :mod:`bench.workloads` child and return its JSON (or ``{"error": ...}``)."""
    python, env = sys.executable, None
    if client in pypy.PYPY_CLIENTS:
        # minigrpc's client under PyPy (its longer warm-up is in ``arguments``: warmup_calls).
        python, env, client = PYPY_PYTHON[0], pypy.pypy_env(REPO_ROOT), pypy.PYPY_CLIENTS[client]
    command = [python, "-m", "bench.workloads", workload, "--client", client,
               *(["--socket", socket_path] if socket_path else []), *arguments]
    try:
        completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, env=env,
                                   timeout=mode.client_timeouts[workload])
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {mode.client_timeouts[workload]:.0f} s"}
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
        if not isinstance(result, dict):
            raise ValueError("not an object")
        return result
    except (IndexError, ValueError):
        tail = completed.stderr.decode("utf-8", "replace").strip()[-300:]
        return {"error": f"exit {completed.returncode}, no result: {tail}"}


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (the client runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Servers:
    """The echo servers of one section, started together and always stopped together."""

    def __init__(self, impls: Sequence[str], directory: str, pypy_warmup: int) -> None:
        self.sockets = {impl: os.path.join(directory, f"{impl}.sock") for impl in impls}
        self.errors: Dict[str, str] = {}
        self._peers: List[PeerProcess] = []
        self.peer: Dict[str, PeerProcess] = {}
        for impl in impls:
            try:
                if impl in pypy.PYPY_SERVERS:
                    peer = PeerProcess(
                        f"{pypy.PYPY_SERVERS[impl]} server on PyPy",
                        [PYPY_PYTHON[0], "-m", "bench.peers", "--impl", pypy.PYPY_SERVERS[impl],
                         "--socket", self.sockets[impl]], cwd=REPO_ROOT,
                        env=pypy.pypy_env(REPO_ROOT))
                    peer.start()
                    self._warm_up_pypy_server(self.sockets[impl], pypy_warmup)
                else:
                    peer = bench_server(impl, self.sockets[impl], REPO_ROOT)
                    peer.start()
            except (PeerError, RuntimeError) as exc:  # GoUnavailable is a RuntimeError
                self.errors[impl] = str(exc)[:400]
                log(f"{impl} server did not start: {exc}")
                continue
            self._peers.append(peer)
            self.peer[impl] = peer

    @staticmethod
    def _warm_up_pypy_server(socket_path: str, calls: int) -> None:
        """Untimed calls so that PyPy's JIT has compiled the server before any row is timed."""
        subprocess.run([sys.executable, "-m", "bench.workloads", "latency", "--client",
                        "minigrpc", "--socket", socket_path, "--calls", "1", "--warmup",
                        str(calls)], cwd=REPO_ROOT, capture_output=True, timeout=300)

    def run_client(self, mode: Mode, workload: str, client: str, server: str,
                   arguments: Sequence[str], server_calls: int) -> Dict[str, Any]:
        """Run one client child against ``server``; adds the server's CPU per call (its CPU
        time during the run over ``server_calls``, warm-up calls included)."""
        peer = self.peer[server]
        cpu_before = peer.cpu_seconds()
        children_before = _children_cpu()
        started = time.monotonic()
        if client in LOAD_GENERATORS:
            result = loadgen.run_load(client, LOAD_GENERATORS[client], self.sockets[server],
                                      arguments, mode.client_timeouts[workload])
        else:
            result = run_client(mode, workload, client, self.sockets[server], arguments)
        wall = time.monotonic() - started
        cpu_after = peer.cpu_seconds()
        if "error" not in result and cpu_before is not None and cpu_after is not None:
            result["server_cpu_us_per_call"] = (cpu_after - cpu_before) / server_calls * 1e6
            # Shares of one core over the client child's whole run (start-up included): the
            # side near 100% is the one that sets the rate.
            result["server_cpu_share"] = (cpu_after - cpu_before) / wall
            result["client_cpu_share"] = (_children_cpu() - children_before) / wall
        return result

    def stop(self) -> None:
        for peer in self._peers:
            peer.stop()
        self._peers.clear()


def _timed_out(row: Dict[str, Any]) -> bool:
    return any(error.startswith("timed out") for error in row["errors"])


def _pairs(clients: Sequence[str], servers: Sequence[str], with_raw: bool = True
           ) -> List[Tuple[str, str]]:
    pairs = [(client, server) for server in servers for client in clients]
    return [*pairs, ("raw", "raw")] if with_raw else pairs


def latency_section(mode: Mode, clients: Sequence[str], servers: Sequence[str],
                    with_raw: bool = True) -> List[Dict[str, Any]]:
    def record(row: Dict[str, Any], result: Dict[str, Any]) -> None:
        row["samples_us"].extend(result["samples_us"])
        for key in ("cpu_us_per_call", "server_cpu_us_per_call"):
            if key in result:
                row.setdefault(key, []).append(result[key])

    def args(client: str) -> List[str]:
        return ["--size", str(LATENCY_SIZE), "--calls", str(mode.latency_calls),
                "--warmup", str(warmup_calls(mode, client))]

    return _client_server_rounds(
        mode, "latency", mode.latency_rounds, clients, servers, {"samples_us": []},
        args, lambda client: mode.latency_calls + warmup_calls(mode, client), record, with_raw)


def aio_section(mode: Mode, go_available: bool, pypy_available: bool) -> List[Dict[str, Any]]:
    """The asyncio clients' warm latency on grpc-go's and grpcio's servers (bench.aio_clients)."""
    clients = [*aio_clients.CLIENTS, *([pypy.PYPY_AIO_CLIENT] if pypy_available else [])]
    servers = [*([GO_SERVER_IMPL] if go_available else []), "grpcio"]
    return latency_section(mode, clients, servers, with_raw=False)


def warmup_calls(mode: Mode, client: str) -> int:
    """Untimed calls a latency client makes first: many more for PyPy (bench/pypy.py)."""
    return mode.pypy_warmup if client in pypy.PYPY_CLIENTS else mode.latency_warmup


def large_section(mode: Mode, clients: Sequence[str], servers: Sequence[str]
                  ) -> List[Dict[str, Any]]:
    def record(row: Dict[str, Any], result: Dict[str, Any]) -> None:
        for size, rates in result["mb_per_s"].items():
            row["mb_per_s"].setdefault(size, []).extend(rates)

    sizes = ",".join(str(size) for size in mode.large_sizes)
    reps = ",".join(str(count) for count in mode.large_reps)
    return _client_server_rounds(
        mode, "large", mode.large_rounds, clients, servers, {"mb_per_s": {}},
        lambda client: ["--sizes", sizes, "--reps", reps], lambda client: 1, record)


#: Bytes per message of the streaming section: small messages, where per-message cost shows.
STREAM_MESSAGE_SIZE = 16


def stream_section(mode: Mode, clients: Sequence[str], servers: Sequence[str]
                   ) -> List[Dict[str, Any]]:
    """Messages/s of a server stream of ``mode.stream_count`` small messages, every pair."""
    def record(row: Dict[str, Any], result: Dict[str, Any]) -> None:
        row["messages_per_s"].extend(result["messages_per_s"])

    args = ["--count", str(mode.stream_count), "--size", str(STREAM_MESSAGE_SIZE),
            "--reps", str(mode.stream_reps)]
    return _client_server_rounds(
        mode, "stream", mode.stream_rounds, clients, servers, {"messages_per_s": []},
        lambda client: args,
        lambda client: mode.stream_count * (mode.stream_reps + 1), record, with_raw=False)


def h2_floor(mode: Mode) -> Dict[str, Any]:
    """h2's own work per call, client side and server side (:mod:`bench.h2floor`)."""
    command = [sys.executable, "-m", "bench.h2floor", "--calls", str(mode.latency_calls),
               "--rounds", str(mode.latency_rounds), "--size", str(LATENCY_SIZE)]
    try:
        completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 600 s"}
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = completed.stderr.decode("utf-8", "replace").strip()[-300:]
        return {"error": f"exit {completed.returncode}: {tail}"}
    return result if isinstance(result, dict) else {"error": "not a JSON object"}


def _client_server_rounds(mode: Mode, workload: str, rounds: int, clients: Sequence[str],
                          servers: Sequence[str], fields: Dict[str, Any],
                          args: Callable[[str], List[str]], calls: Callable[[str], int],
                          record: Callable[[Dict[str, Any], Dict[str, Any]], None],
                          with_raw: bool = True) -> List[Dict[str, Any]]:
    """Run ``workload`` for every client/server pair, interleaved over ``rounds`` rounds.

    Every round visits every pair once, so slow drifts of the machine hit all pairs alike. A
    pair whose server failed to start, or that timed out once, is skipped from then on.
    ``args(client)`` are the workload's arguments for that client, and ``calls(client)`` is how
    many calls one run of it makes to the server, warm-up included: the server's CPU per call is
    divided by it.
    """
    pairs = _pairs(clients, servers, with_raw)
    rows: Dict[Tuple[str, str], Dict[str, Any]] = {
        pair: {"client": pair[0], "server": pair[1], **copy.deepcopy(fields), "errors": []}
        for pair in pairs}
    label = "large messages" if workload == "large" else workload
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as directory:
        running = Servers([*list(servers), *(["raw"] if with_raw else [])], directory,
                          mode.pypy_warmup)
        try:
            for round_index in range(rounds):
                log(f"{label} round {round_index + 1}/{rounds}")
                for client, server in pairs:
                    row = rows[(client, server)]
                    if server in running.errors:
                        row["errors"] = [running.errors[server]]
                        continue
                    if _timed_out(row):
                        continue  # a pair that hung once would only hang again
                    result = running.run_client(
                        mode, workload, client, server, args(client), calls(client))
                    if "error" in result:
                        row["errors"].append(result["error"])
                        continue
                    record(row, result)
        finally:
            running.stop()
    return list(rows.values())


def throughput_section(mode: Mode, servers: Sequence[str],
                       clients: Sequence[str] = ("grpcio",)) -> List[Dict[str, Any]]:
    """Calls/s of every server under every load generator in ``clients`` (grpcio first)."""
    rows: Dict[Tuple[str, str, str], Dict[str, Any]] = {
        (server, connections, client): {"server": server, "client": client,
                                        "connections": connections, "calls_per_s": [],
                                        "errors": []}
        for client in clients for connections in mode.throughput_connections
        for server in servers}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as directory:
        running = Servers(servers, directory, mode.pypy_warmup)
        try:
            for round_index in range(mode.throughput_rounds):
                log(f"throughput round {round_index + 1}/{mode.throughput_rounds}")
                for (server, connections, client), row in rows.items():
                    if server in running.errors:
                        row["errors"] = [running.errors[server]]
                        continue
                    if _timed_out(row):
                        continue  # a pair that hung once would only hang again
                    # Untimed calls per connection first (h2load makes none).
                    warmup = 0 if client == loadgen.H2LOAD_CLIENT else 20 * (
                        mode.throughput_threads if connections == "per-thread" else 1)
                    result = running.run_client(
                        mode, "throughput", client, server,
                        ["--size", str(LATENCY_SIZE), "--threads", str(mode.throughput_threads),
                         "--calls", str(mode.throughput_calls), "--connections", connections],
                        mode.throughput_threads * mode.throughput_calls + warmup)
                    if "error" in result:
                        row["errors"].append(result["error"])
                        continue
                    row["calls_per_s"].append(result["calls_per_s"])
                    if "server_cpu_us_per_call" in result:
                        row.setdefault("server_cpu_us_per_call", []).append(
                            result["server_cpu_us_per_call"])
        finally:
            running.stop()
    return list(rows.values())


def aio_server_section(mode: Mode, loads: Sequence[str], pypy_available: bool
                       ) -> List[Dict[str, Any]]:
    """The asyncio servers' calls/s under every load in ``loads`` and their server-stream
    messages/s (:mod:`bench.aio_servers`), every row once per round, interleaved."""
    servers = [*aio_servers.SERVERS, *([pypy.PYPY_AIO_SERVER] if pypy_available else [])]
    workloads = [("calls", client, connections) for client in loads
                 for connections in mode.throughput_connections]
    workloads += [("stream", client, "shared") for client in aio_servers.STREAM_CLIENTS
                  if client == "grpcio" or client in loads]
    rows = aio_servers.new_rows(workloads, servers)
    stream_args = ["--count", str(mode.stream_count), "--size", str(STREAM_MESSAGE_SIZE),
                   "--reps", str(mode.stream_reps)]
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as directory:
        running = Servers(servers, directory, mode.pypy_warmup)
        try:
            for round_index in range(mode.throughput_rounds):
                log(f"asyncio servers round {round_index + 1}/{mode.throughput_rounds}")
                for (workload, server, client, connections), row in rows.items():
                    if server in running.errors:
                        row["errors"] = [running.errors[server]]
                        row["per_round"].append(None)
                        continue
                    if _timed_out(row):
                        row["per_round"].append(None)
                        continue  # a pair that hung once would only hang again
                    if workload == "stream":
                        streams = aio_servers.stream_count_of(client)
                        result = running.run_client(
                            mode, "stream", client, server,
                            [*stream_args, "--threads", str(streams)],
                            streams * mode.stream_count * (mode.stream_reps + 1))
                        value = median(result["messages_per_s"]) if "error" not in result else 0
                    else:
                        warmup = 0 if client == loadgen.H2LOAD_CLIENT else 20 * (
                            mode.throughput_threads if connections == "per-thread" else 1)
                        result = running.run_client(
                            mode, "throughput", client, server,
                            ["--size", str(LATENCY_SIZE), "--threads",
                             str(mode.throughput_threads), "--calls", str(mode.throughput_calls),
                             "--connections", connections],
                            mode.throughput_threads * mode.throughput_calls + warmup)
                        value = result.get("calls_per_s", 0)
                    if "error" in result:
                        row["errors"].append(result["error"])
                        row["per_round"].append(None)
                        continue
                    row["per_round"].append(value)
                    if "server_cpu_us_per_call" in result:
                        row["server_cpu_us"].append(result["server_cpu_us_per_call"])
                        row["cpu_shares"].append((result["server_cpu_share"],
                                                  result["client_cpu_share"]))
        finally:
            running.stop()
    return list(rows.values())


def channels_section(mode: Mode) -> Dict[str, Any]:
    """The long-lived channel rows (:mod:`bench.channels`): minigrpc's clients against
    :data:`bench.channels.SERVERS` echo servers on loopback TCP, every row once per round."""
    load_start = _load()
    config = {"size": LATENCY_SIZE, "latency_calls": mode.latency_calls,
              "warmup": mode.latency_warmup, "threads": mode.throughput_threads,
              "calls": mode.throughput_calls, "rounds": mode.channel_rounds,
              "blocks": channels.BLOCKS}
    rows = channels.new_rows()
    peers: List[PeerProcess] = []
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as directory:
        try:
            try:
                for index in range(channels.SERVERS):
                    peer = bench_server(channels.SERVER_IMPL,
                                        os.path.join(directory, f"{index}.sock"), REPO_ROOT,
                                        tcp=True)
                    peers.append(peer.start())
            except PeerError as exc:
                log(f"channels: a {channels.SERVER_IMPL} server did not start: {exc}")
                for row in rows:
                    row["errors"].append(str(exc)[:400])
                rounds = 0
            else:
                rounds = mode.channel_rounds
            targets = [peer.target for peer in peers]
            for round_index in range(rounds):
                log(f"channels round {round_index + 1}/{rounds}")
                for workload, client, arguments, parts in channels.runs(
                        rows, round_index, targets, config):
                    if any(_timed_out(row) for row, _ in parts):
                        continue  # a run that hung once would only hang again
                    cpu_before = [peer.cpu_seconds() for peer in peers]
                    result = run_client(mode, workload, client, "", arguments)
                    split = _cpu_split(cpu_before, [peer.cpu_seconds() for peer in peers])
                    for row, key in parts:
                        if "error" in result:
                            row["errors"].append(result["error"])
                        else:
                            channels.record(row, round_index, result[key], split)
        finally:
            for peer in peers:
                peer.stop()
    return {"rows": rows, "config": config,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            + f" ({mode.name} mode)", "load": load_start, "load_end": _load()}


def _cpu_split(before: Sequence[Optional[float]], after: Sequence[Optional[float]]
               ) -> Optional[List[float]]:
    """Each server's share of the CPU time all of them used between ``before`` and ``after``,
    or None where one could not be read."""
    used = [b - a for a, b in zip(before, after) if a is not None and b is not None]
    total = sum(used)
    return [value / total for value in used] if used and len(used) == len(before) and (
        total > 0) else None


def _aio_server_results(mode: Mode, loads: Sequence[str], pypy_available: bool
                        ) -> Dict[str, Any]:
    load_start = _load()
    return {"aio_server": aio_server_section(mode, loads, pypy_available),
            "aio_server_config": {
                "threads": mode.throughput_threads, "calls": mode.throughput_calls,
                "size": LATENCY_SIZE, "rounds": mode.throughput_rounds,
                "stream_count": mode.stream_count, "stream_size": STREAM_MESSAGE_SIZE,
                "stream_reps": mode.stream_reps, "go_streams": aio_servers.GO_STREAMS},
            "aio_server_date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC") + f" ({mode.name} mode)",
            "aio_server_load": load_start, "aio_server_load_end": _load()}


def _other_loads(notes: List[str], extra_versions: Dict[str, str]) -> Tuple[List[str], bool]:
    """Find grpc-go's client and h2load (filling :data:`LOAD_GENERATORS`): their names, and
    whether grpc-go's peers are built."""
    loads: List[str] = []
    go_peers, why_not = loadgen.go_peers_or_reason()
    if go_peers is None:
        notes.append(f"No grpc-go rows: {why_not}.")
        log(f"no grpc-go rows: {why_not}")
    else:
        log(f"grpc-go peers: {go_peers.describe()}")
        extra_versions["grpc-go"] = f"{go_peers.grpc_go_version} (Debian; {go_peers.go_version})"
        loads.append(loadgen.GO_CLIENT)
        LOAD_GENERATORS[loadgen.GO_CLIENT] = go_peers.binary("bench_client")
    h2load, why_not = loadgen.h2load_or_reason()
    if h2load is None:
        notes.append(f"No h2load rows: {why_not}.")
    else:
        loads.append(loadgen.H2LOAD_CLIENT)
        LOAD_GENERATORS[loadgen.H2LOAD_CLIENT] = h2load
        extra_versions["h2load"] = loadgen.h2load_version(h2load)
    return loads, go_peers is not None


def profile_section(mode: Mode, has_client: bool, has_server: bool) -> Dict[str, Any]:
    """cProfile summaries of the minigrpc client and server (:mod:`bench.profiles`)."""
    import pstats

    from bench.profiles import summarize

    runs: List[Tuple[str, str, str, str, List[str]]] = []  # (name, role, workload, client, args)
    if has_client:
        runs.append(("minigrpc client: warm unary calls to the grpcio server", "client",
                     "latency", "minigrpc", ["--size", str(LATENCY_SIZE), "--calls", "2000",
                                             "--warmup", "200"]))
        runs.append(("minigrpc client: 4 MiB echo with the grpcio server", "client", "large",
                     "minigrpc", ["--sizes", str(4 * MIB), "--reps", "5"]))
    if has_server:
        runs.append(("minigrpc server: 8 grpcio client threads × 500 calls", "server",
                     "throughput", "grpcio", ["--size", str(LATENCY_SIZE), "--threads", "8",
                                              "--calls", "500"]))
    profiles: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as directory:
        for index, (name, role, workload, client, arguments) in enumerate(runs):
            log(f"profile: {name}")
            path = os.path.join(directory, f"{index}.prof")
            socket_path = os.path.join(directory, f"{index}.sock")
            server_impl = "minigrpc" if role == "server" else "grpcio"
            peer = bench_server(server_impl, socket_path, REPO_ROOT,
                                profile_path=path if role == "server" else None)
            try:
                peer.start()
                if role == "client":
                    arguments = [*arguments, "--profile", path]
                result = run_client(mode, workload, client, socket_path, arguments)
            except PeerError as exc:
                result = {"error": str(exc)[:300]}
            finally:
                peer.stop()
            if "error" in result:
                profiles[name] = {"error": result["error"]}
            elif not os.path.exists(path):
                profiles[name] = {"error": "no profile was written"}
            else:
                profiles[name] = summarize(pstats.Stats(path))
    return profiles


def _versions() -> Dict[str, str]:
    from importlib import metadata

    versions = {"python": f"{platform.python_implementation()} {platform.python_version()}"}
    for name in ("minigrpc", "h2", "hpack", "hyperframe", "protobuf", "grpcio", "grpclib",
                 "matplotlib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
            if name == "minigrpc":
                import minigrpc  # lazy package: this loads only its __init__

                versions[name] = f"{minigrpc.__version__} (the checkout, not installed)"
    try:
        backend = subprocess.run(
            [sys.executable, "-c", "from google.protobuf.internal import api_implementation"
             " as a; print(a.Type())"], capture_output=True, timeout=60)
        versions["protobuf"] += f" ({backend.stdout.decode().strip() or '?'} backend)"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return versions


def _machine() -> Dict[str, str]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = "?"
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages * page_size / (1 << 30):.1f} GiB"
    except (ValueError, OSError):
        pass
    return {"platform": platform.platform(), "CPU": cpu, "CPUs usable": str(usable),
            "memory": memory}


def _load() -> str:
    try:
        return ", ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "?"


def run(mode: Mode, sections: Sequence[str], output_dir: str, chart: bool,
        notes: Sequence[str], json_path: Optional[str]) -> str:
    started = time.monotonic()
    has_client, has_server = minigrpc_parts()
    clients = (["minigrpc"] if has_client else []) + ["grpcio", "grpclib"]
    latency_servers = ["grpcio"] + (["minigrpc"] if has_server else [])
    throughput_servers = (["minigrpc", IO_THREAD_SERVER_IMPL] if has_server else []) + [
        "grpcio", "grpclib"]
    throughput_clients = ["grpcio"]
    notes = list(notes)
    extra_versions: Dict[str, str] = {}
    if any(section in sections for section in ("latency", "aio", "large", "throughput",
                                               "aio-server")):
        loads, go_available = _other_loads(notes, extra_versions)
        throughput_clients += loads
        if go_available:
            latency_servers.append(GO_SERVER_IMPL)
            throughput_servers.append(GO_SERVER_IMPL)
        pypy_python, why_not = pypy.pypy_python_or_reason() if has_client else (None, "")
        if pypy_python is None:
            if why_not:
                notes.append(f"No PyPy rows: {why_not}.")
        else:
            PYPY_PYTHON[:] = [pypy_python]
            extra_versions["pypy"] = pypy.pypy_version(pypy_python)
            clients.append(pypy.PYPY_CLIENT)
            if has_server:
                latency_servers.append(pypy.PYPY_SERVER)
                throughput_servers.append(pypy.PYPY_SERVER)
    results: Dict[str, Any] = {
        "meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"), "mode": mode.name, "load_start": _load()},
        "config": {
            "latency_size": LATENCY_SIZE, "latency_calls": mode.latency_calls,
            "latency_warmup": mode.latency_warmup, "latency_rounds": mode.latency_rounds,
            "pypy_warmup": mode.pypy_warmup,
            "large_sizes": mode.large_sizes, "large_reps": mode.large_reps,
            "large_rounds": mode.large_rounds, "throughput_threads": mode.throughput_threads,
            "throughput_calls": mode.throughput_calls,
            "throughput_rounds": mode.throughput_rounds,
            "throughput_connections": mode.throughput_connections,
            "stream_count": mode.stream_count, "stream_reps": mode.stream_reps,
            "stream_rounds": mode.stream_rounds, "stream_message_size": STREAM_MESSAGE_SIZE,
        },
        "notes": list(notes),
    }
    if not has_client:
        results["notes"].append("minigrpc's client (minigrpc.blocking.channel) is not available: "
                                "no minigrpc client rows.")
    if not has_server:
        results["notes"].append("minigrpc's server (minigrpc.server) is not available: "
                                "no minigrpc server rows.")
    actions: Dict[str, Callable[[], Any]] = {
        "nodes": lambda: node_cold.run_section(REPO_ROOT, mode.node_runs, log),
        "tool": lambda: tool_cold.run_section(REPO_ROOT, mode.tool_runs, log),
        "cold": lambda: coldstart.run_section(REPO_ROOT, mode.cold_runs, mode.importtime_runs, log),
        "latency": lambda: latency_section(mode, clients, latency_servers),
        "aio": lambda: aio_section(mode, GO_SERVER_IMPL in latency_servers, bool(PYPY_PYTHON)),
        # grpclib serves here too: the large-message targets compare servers with it as well.
        "large": lambda: large_section(mode, clients, [*latency_servers, "grpclib"]),
        "throughput": lambda: throughput_section(mode, throughput_servers, throughput_clients),
        # Its results have several keys (rows, configuration, date and load).
        "aio-server": lambda: _aio_server_results(
            mode, throughput_clients, bool(PYPY_PYTHON) and has_server),
        # grpc-go's bench server has the echo only; the three Python libraries serve streams.
        "stream": lambda: stream_section(
            mode, clients, (["minigrpc"] if has_server else []) + ["grpcio", "grpclib"]),
        # minigrpc's client only: without it there is nothing to compare.
        "channels": lambda: channels_section(mode) if has_client else None,
    }
    for section in sections:
        log(f"section {section}")
        measured = actions[section]()
        if section == "aio-server":
            results.update(measured)
        else:
            results[section] = measured
    if has_client and ("latency" in sections or "throughput" in sections):
        log("h2 alone, in memory (bench/h2floor.py)")
        results["h2floor"] = h2_floor(mode)
    if mode.profiles and (has_client or has_server):
        results["profiles"] = profile_section(mode, has_client, has_server)
    results["meta"]["load_end"] = _load()
    results["meta"]["duration_s"] = time.monotonic() - started
    results["meta"]["machine"] = _machine()
    results["meta"]["versions"] = {**_versions(), **extra_versions}
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(results, handle)
    path = write_report(results, output_dir, chart, log)
    if ("nodes" in results or "tool" in results) and _is_repository_docs(output_dir):
        splice_readme(results, README_PATH)
    log(f"wrote {path} in {results['meta']['duration_s']:.0f} s")
    return path


#: The README whose per-interpreter table a run writing the repository's own docs updates.
README_PATH = os.path.join(REPO_ROOT, "README.md")


def _is_repository_docs(output_dir: str) -> bool:
    return os.path.abspath(output_dir) == os.path.join(REPO_ROOT, "docs")


def run_only(mode: Mode, section: str, output_dir: str, json_path: Optional[str]) -> str:
    """``--only nodes`` (the per-interpreter cold start), ``--only cold`` (section 1),
    ``--only aio`` (the asyncio clients), ``--only aio-server`` (the asyncio servers) or
    ``--only channels`` (the long-lived channel rows): that section alone, spliced into the
    report."""
    started = time.monotonic()
    results: Dict[str, Any]
    if section == "aio":
        go_peers, why_not = loadgen.go_peers_or_reason()
        if go_peers is None:
            log(f"no grpc-go rows: {why_not}")
        pypy_python, why_not = pypy.pypy_python_or_reason()
        if pypy_python is not None:
            PYPY_PYTHON[:] = [pypy_python]
        load_start = _load()
        results = {"aio": aio_section(mode, go_peers is not None, pypy_python is not None),
                   "aio_config": {"latency_calls": mode.latency_calls,
                                  "latency_rounds": mode.latency_rounds},
                   "aio_date": datetime.datetime.now(datetime.timezone.utc).strftime(
                       "%Y-%m-%d %H:%M UTC") + f" ({mode.name} mode)",
                   "aio_load": load_start, "aio_load_end": _load()}
    elif section == "aio-server":
        pypy_python, why_not = pypy.pypy_python_or_reason()
        if pypy_python is not None:
            PYPY_PYTHON[:] = [pypy_python]
        loads, _ = _other_loads([], {})
        results = _aio_server_results(mode, ["grpcio", *loads], pypy_python is not None)
    elif section == "cold":
        results = {"cold": coldstart.run_section(REPO_ROOT, mode.cold_runs,
                                                 mode.importtime_runs, log)}
    elif section == "channels":
        results = {"channels": channels_section(mode)}
    elif section == "tool":
        results = {"tool": tool_cold.run_section(REPO_ROOT, mode.tool_runs, log)}
        results["tool"]["date"] = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC") + f" ({mode.name} mode)"
    else:
        results = {"nodes": node_cold.run_section(REPO_ROOT, mode.node_runs, log)}
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(results, handle)
    path = splice_report(results, output_dir, section)
    if section in ("nodes", "tool") and _is_repository_docs(output_dir):
        splice_readme(results, README_PATH)
    log(f"wrote the {section} section of {path} in {time.monotonic() - started:.0f} s")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="fewer repetitions (< 2 minutes)")
    group.add_argument("--tiny", action="store_true", help="a few seconds; for the smoke test")
    parser.add_argument("--output-dir", default=os.path.join(REPO_ROOT, "docs"),
                        help="where benchmarks.md/.png go (default: docs/)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG")
    parser.add_argument("--note", action="append", default=[],
                        help="a sentence for the report's noise section (repeatable)")
    parser.add_argument("--json", help="also write the raw results to this file")
    parser.add_argument("--render", metavar="JSON",
                        help="measure nothing: write the report from results saved by --json")
    parser.add_argument("--only", metavar="SECTION",
                        help=f"measure only this ({', '.join(SPLICEABLE)}) and replace just its"
                             " part of the existing report (and of the README, when the report"
                             " is the repository's docs/benchmarks.md)")
    options = parser.parse_args(argv)
    if options.render:
        with open(options.render, encoding="utf-8") as handle:
            saved = json.load(handle)
        saved.setdefault("notes", []).extend(options.note)
        log("wrote " + write_report(saved, options.output_dir, not options.no_chart, log))
        return 0
    sections = [part for part in options.sections.split(",") if part]
    unknown = [part for part in sections if part not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    mode = MODES["tiny" if options.tiny else "quick" if options.quick else "full"]
    if options.only is not None and options.only not in SPLICEABLE:
        parser.error(f"--only takes one of {', '.join(SPLICEABLE)}, not {options.only}")
    try:
        if options.only is not None:
            run_only(mode, options.only, options.output_dir, options.json)
        else:
            run(mode, sections, options.output_dir, not options.no_chart, options.note,
                options.json)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
