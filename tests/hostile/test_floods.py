"""Floods of frames that do no work, from several connections at once, while others are served.

Each attacker connection sends one kind of frame (PING, SETTINGS, WINDOW_UPDATE on stream 0,
PRIORITY, empty DATA, or HEADERS + RST_STREAM: the rapid reset of CVE-2023-44487) in bursts of
1,000, as fast as the server takes them. The server must answer each with
GOAWAY(ENHANCE_YOUR_CALM) and close it (RFC 9113 §10.5; :mod:`minigrpc.http2.flood`), while a
well-behaved grpcio client on its own connection keeps getting answers during the attack and
right after it. Bounded: at most a few seconds per attack.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Callable, Dict, Iterator, List

import pytest
from hyperframe.frame import (
    DataFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from tests.hostile.test_hostile_server import (
    _AIO_SERVER_SCRIPT,
    _SERVER_SCRIPT,
    CHAT,
    ECHO,
    SERVER_KINDS,
    ServerProcess,
    Watch,
    good_call,
    grpc,
    request_headers,
)
from tests.support.scripted_peer import HostileClient

#: Attacker connections per attack, and the longest an attack lasts (seconds).
ATTACKERS = 8
ATTACK_SECONDS = 3.0
#: How long an attacker may stay blocked in send() once its attack is over.
JOIN_SECONDS = 20.0
ENHANCE_YOUR_CALM = 11
BURST = 1000


def _repeat(frame_bytes: bytes) -> Callable[[HostileClient, int], bytes]:
    return lambda client, burst: frame_bytes * BURST


def _rapid_reset(client: HostileClient, burst: int) -> bytes:
    block = client.encode_headers(request_headers())
    first = 1 + 2 * BURST * burst
    return b"".join(
        HeadersFrame(sid, block, flags=["END_HEADERS"]).serialize()
        + RstStreamFrame(sid, error_code=8).serialize()
        for sid in range(first, first + 2 * BURST, 2)
    )


def _empty_data(client: HostileClient, burst: int) -> bytes:
    # On an open bidi call, so that each empty frame is legal but does nothing.
    opening = client.header_frames(1, request_headers(CHAT)) if burst == 0 else b""
    return opening + DataFrame(1, b"").serialize() * BURST


FLOODS: Dict[str, Callable[[HostileClient, int], bytes]] = {
    "ping": _repeat(PingFrame(0, opaque_data=b"flooding").serialize()),
    "settings": _repeat(SettingsFrame(0, settings={4: 65535}).serialize()),
    "window_update_0": _repeat(WindowUpdateFrame(0, window_increment=1).serialize()),
    "priority": _repeat(PriorityFrame(1, depends_on=0, stream_weight=16).serialize()),
    "empty_data": _empty_data,
    "rapid_reset": _rapid_reset,
}


@pytest.fixture(params=SERVER_KINDS)
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """Every flood runs against the blocking server and against the asyncio server."""
    process = ServerProcess(kind=request.param)
    try:
        good_call(process.target)  # warm up: executor thread, imports
        yield process
    finally:
        code, output = process.stop()
        assert "Traceback" not in output, output
        assert code == 0, output


def _attack(client: HostileClient, flood: Callable[[HostileClient, int], bytes]) -> None:
    deadline = time.monotonic() + ATTACK_SECONDS
    client.send_preface()
    burst = 0
    while time.monotonic() < deadline and not client.eof and not client.goaways:
        if not client.send(flood(client, burst)):
            return
        burst += 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_flood_gets_enhance_your_calm_and_others_are_served(
    server: ServerProcess, request: pytest.FixtureRequest, kind: str
) -> None:
    watch = Watch(server, f"{kind}_flood_{ATTACKERS}_connections", request)
    attackers = [
        HostileClient(server.target, record_frames=False, auto_ack_ping=False)
        for _ in range(ATTACKERS)
    ]
    # No socket timeout: it would also stop each attacker's reader thread after ATTACK_SECONDS
    # of silence, before a busy server's GOAWAY arrives. An attacker whose send() blocks (a
    # server that stops reading it) is released when the server closes it; the join below
    # bounds that.
    threads = [
        threading.Thread(target=_attack, args=(attacker, FLOODS[kind]), daemon=True)
        for attacker in attackers
    ]
    latencies: List[float] = []
    try:
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            start = time.monotonic()
            good_call(server.target)  # raises (fails the test) if a call is not served
            latencies.append(time.monotonic() - start)
        for thread in threads:
            thread.join(JOIN_SECONDS)
        stuck = sum(thread.is_alive() for thread in threads)
        assert not stuck, f"{stuck} attackers still blocked in send() {JOIN_SECONDS:.0f} s later"
        for attacker in attackers:
            attacker.wait_for(lambda a=attacker: a.eof, timeout=5.0)
        codes = [[g.error_code for g in a.goaways] for a in attackers]
        closed = sum(a.eof for a in attackers)
    finally:
        for attacker in attackers:
            attacker.close()
    start = time.monotonic()
    good_call(server.target)
    after = time.monotonic() - start
    slowest = max(latencies) if latencies else 0.0
    watch.check(
        "GOAWAY(ENHANCE_YOUR_CALM) and close; others served during and after",
        f"{closed}/{ATTACKERS} closed, GOAWAY codes {sorted({c for cs in codes for c in cs})};"
        f" {len(latencies)} calls during the attack, slowest {slowest * 1000:.0f} ms;"
        f" first call after {after * 1000:.0f} ms",
    )
    assert closed == ATTACKERS, codes
    assert all(cs == [ENHANCE_YOUR_CALM] for cs in codes), codes
    assert after < 1.0, f"the first call after the attack took {after:.2f} s"


#: The descriptor limit of the server in the exhaustion test, and the connections that take
#: them all (the rest wait in the listen queue, keeping the listener readable).
FD_LIMIT = 64
HELD_CONNECTIONS = 100
#: The server runs out of descriptors: it must rest its listener, not spin (grpcio's servers
#: sit at about 1% CPU), and log the episode once.
EXHAUSTED_CPU_BOUND = 0.5

_LIMITED_PREFIX = f"""
import logging, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE,
                   ({FD_LIMIT}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="LOG %(message)s")
"""


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/<pid>/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_descriptor_exhaustion_rests_the_listener(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """A peer holds more connections than the server has descriptors (``ulimit -n``): accept()
    fails with EMFILE while the listen queue keeps the listener readable.  The server must
    rest the listener instead of spinning on it, log the episode once, keep serving the
    connections it has, and accept again within a second of descriptors coming free."""
    script = _LIMITED_PREFIX + (_AIO_SERVER_SCRIPT if kind == "aio" else _SERVER_SCRIPT)
    server = ServerProcess(kind=kind, script=script)
    held: List[socket.socket] = []
    try:
        good_call(server.target)
        watch = Watch(server, f"descriptor_exhaustion_{kind}", request)
        with grpc.insecure_channel(server.target) as channel:
            call = channel.unary_unary(ECHO)
            assert call(b"before", timeout=10) == b"before"  # the connection kept throughout
            for _ in range(HELD_CONNECTIONS):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(server.path)
                held.append(sock)
            assert server.wait_until(lambda status: status["fds"] >= FD_LIMIT - 1), (
                server.status())
            start_cpu, start = _cpu_seconds(server.proc.pid), time.monotonic()
            threading.Event().wait(1.0)  # the span the CPU is measured over, not a sync
            share = (_cpu_seconds(server.proc.pid) - start_cpu) / (time.monotonic() - start)
            served = [call(b"during", timeout=10) == b"during" for _ in range(20)]
        for sock in held:
            sock.close()
        held = []
        start = time.monotonic()
        good_call(server.target)  # a new connection: a descriptor must have come free
        recovery = time.monotonic() - start
        watch.check(
            "the listener rests while descriptors are gone; logged once; others served",
            f"server CPU {share:.0%} while out of descriptors; {sum(served)}/20 calls served"
            f" on an existing connection; first new call after {recovery * 1000:.0f} ms",
        )
    finally:
        for sock in held:
            sock.close()
        code, output = server.stop()
    accept_lines = [line for line in output.splitlines() if "accept()" in line]
    print(f"{kind}: CPU {share:.0%}, recovery {recovery * 1000:.0f} ms,"
          f" {len(accept_lines)} accept() log lines: {accept_lines}")
    assert "Traceback" not in output, output[-3000:]
    assert code == 0, output[-3000:]
    assert all(served), served
    assert share < EXHAUSTED_CPU_BOUND, f"the server spun at {share:.0%} CPU"
    assert 1 <= len(accept_lines) <= 4, accept_lines[:10]
    assert recovery < 1.0, f"the first call after descriptors came free took {recovery:.2f} s"
