"""Floods of frames that do no work, from several connections at once, while others are served.

Each attacker connection sends one kind of frame (PING, SETTINGS, WINDOW_UPDATE on stream 0,
PRIORITY, empty DATA, or HEADERS + RST_STREAM: the rapid reset of CVE-2023-44487) in bursts of
1,000, as fast as the server takes them. The server must answer each with
GOAWAY(ENHANCE_YOUR_CALM) and close it (RFC 9113 §10.5; :mod:`minigrpc.http2.flood`), while a
well-behaved grpcio client on its own connection keeps getting answers during the attack and
right after it. Bounded: at most a few seconds per attack.
"""

from __future__ import annotations

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
    CHAT,
    ServerProcess,
    Watch,
    good_call,
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


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    process = ServerProcess()
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
