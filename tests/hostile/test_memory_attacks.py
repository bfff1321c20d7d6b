"""Clients that try to make the server buffer without bound, while others are served.

Each attack makes the server hold data: request messages a handler never reads, large
requests that never complete, responses the client never reads.  The server runs in its own
process (its RSS is its own) with the default memory budget (:mod:`minigrpc.protocol.memory_budget`:
64 MiB for all connections, 16 MiB for one), and must hold its charge within that budget
(the peak it reports, plus at most what flow control had already granted, RFC 9113 §5.2), its
peak RSS growth within 150 MiB (300 MiB on PyPy), and keep answering a well-behaved grpcio
client on another connection during the attack and within a second after it.

The attack clients send as fast as the server's windows allow and stop when no window comes
for a moment: that is the server withholding it, which is the point.  Bounded: a few seconds
per attack.
"""

from __future__ import annotations

import json
import platform
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from hyperframe.frame import DataFrame

from tests.hostile.scenarios import record_observation
from tests.hostile.test_hostile_server import ServerProcess, good_call, grpc, request_headers
from tests.support.scripted_peer import (
    INITIAL_WINDOW_SIZE,
    HostileClient,
    grpc_message,
)

MIB = 1024 * 1024
#: The default budget of the server under test, and its per-connection share.
BUDGET = 64 * MIB
CONNECTION_BUDGET = 16 * MIB
#: Beyond the budget, what windows granted before it was reached may still bring: one
#: connection window (16 MiB of wire bytes, charged at up to twice that for 2-byte messages).
GRANTED_SLACK = 32 * MIB
RSS_BOUND_MIB = 300 if platform.python_implementation() == "PyPy" else 150
#: How long a sender waits for window before it takes the server to be withholding it.
STALL = 0.5
SINK = "/hostile.Memory/Sink"
CHAT = "/hostile.Memory/Chat"
FIREHOSE = "/hostile.Memory/Firehose"
BIG = "/hostile.Memory/Big"
TINY = "/hostile.Memory/Tiny"
UNARY = "/hostile.Memory/Unary"

_SERVER_SCRIPT = r"""
import concurrent.futures, json, sys, threading
import minigrpc

path = sys.argv[1]

def echo(request, context):
    return request

def unary(request, context):
    return b"ok"

def big(request, context):
    return b"\0" * int(request or b"0")

def sink(requests, context):
    # Never reads its requests: waits until the call ends.
    done = threading.Event()
    context.add_callback(done.set)
    done.wait(60)
    return b""

def chat(requests, context):
    for message in requests:
        yield message

def firehose(request, context):
    chunk = b"\1" * (1024 * 1024)
    while context.is_active():
        yield chunk

def tiny(request, context):
    # Empty messages as fast as the server takes them, until the call ends.
    while True:
        yield b""

def stats(request, context):
    budget = server._driver.memory
    return json.dumps({"used": budget.total, "peak": budget.peak,
                       "active": server._driver.active_calls - 1}).encode()

handlers = [
    minigrpc.method_handlers_generic_handler("hostile.Echo", {
        "Call": minigrpc.unary_unary_rpc_method_handler(echo),
    }),
    minigrpc.method_handlers_generic_handler("hostile.Memory", {
        "Unary": minigrpc.unary_unary_rpc_method_handler(unary),
        "Big": minigrpc.unary_unary_rpc_method_handler(big),
        "Sink": minigrpc.stream_unary_rpc_method_handler(sink),
        "Chat": minigrpc.stream_stream_rpc_method_handler(chat),
        "Firehose": minigrpc.unary_stream_rpc_method_handler(firehose),
        "Tiny": minigrpc.unary_stream_rpc_method_handler(tiny),
        "Stats": minigrpc.unary_unary_rpc_method_handler(stats),
    }),
]
options = [tuple(option) for option in json.loads(sys.argv[2])]
server = minigrpc.server(
    concurrent.futures.ThreadPoolExecutor(48), handlers=handlers, options=options
)
server.add_insecure_port("unix:" + path)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop(0).wait(10)
print("stopped", flush=True)
"""


#: The same server on ``minigrpc.aio``: ``async def`` handlers on the event loop, except
#: ``Big``, a plain function on the executor (its response is reserved before the hand-over).
_AIO_SERVER_SCRIPT = r"""
import asyncio, json, sys
import minigrpc
from minigrpc import aio

path = sys.argv[1]

async def echo(request, context):
    return request

async def unary(request, context):
    return b"ok"

def big(request, context):
    return b"\0" * int(request or b"0")

async def sink(requests, context):
    # Never reads its requests: waits until the call ends (which cancels this task).
    await asyncio.Event().wait()
    return b""

async def chat(requests, context):
    async for message in requests:
        yield message

async def firehose(request, context):
    chunk = b"\1" * (1024 * 1024)
    while not context.done():
        await context.write(chunk)

async def tiny(request, context):
    # Empty messages, never awaiting anything but the server's own hand-over.
    while True:
        yield b""

async def stats(request, context):
    budget = server._driver.memory
    return json.dumps({"used": budget.total, "peak": budget.peak,
                       "active": server._driver.active_calls - 1}).encode()

handlers = [
    minigrpc.method_handlers_generic_handler("hostile.Echo", {
        "Call": minigrpc.unary_unary_rpc_method_handler(echo),
    }),
    minigrpc.method_handlers_generic_handler("hostile.Memory", {
        "Unary": minigrpc.unary_unary_rpc_method_handler(unary),
        "Big": minigrpc.unary_unary_rpc_method_handler(big),
        "Sink": minigrpc.stream_unary_rpc_method_handler(sink),
        "Chat": minigrpc.stream_stream_rpc_method_handler(chat),
        "Firehose": minigrpc.unary_stream_rpc_method_handler(firehose),
        "Tiny": minigrpc.unary_stream_rpc_method_handler(tiny),
        "Stats": minigrpc.unary_unary_rpc_method_handler(stats),
    }),
]

async def main():
    global server
    import concurrent.futures
    options = [tuple(option) for option in json.loads(sys.argv[2])]
    server = aio.server(
        concurrent.futures.ThreadPoolExecutor(48), handlers=handlers, options=options
    )
    server.add_insecure_port("unix:" + path)
    await server.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(0)
    print("stopped", flush=True)

asyncio.run(main())
"""


#: Some attacks probe the server with a PING every 0.25 s while their calls wait for window,
#: so that the server sends nothing in between: the keepalive policy must allow that (grpc
#: core's default, 5 minutes between PINGs, sends such a client away as pinging too often).
PING_PROBES_ALLOWED = [("grpc.http2.min_ping_interval_without_data_ms", 100)]


class MemoryServer(ServerProcess):
    """The server under test in its own process: RSS from /proc, its budget from a method."""

    def __init__(self, kind: str = "blocking") -> None:
        super().__init__(
            PING_PROBES_ALLOWED,
            kind=kind,
            script=_AIO_SERVER_SCRIPT if kind == "aio" else _SERVER_SCRIPT,
        )

    def rss_kib(self) -> Tuple[int, int]:
        """(VmRSS, VmHWM) in KiB."""
        status = self.status()
        return status["VmRSS"], status["VmHWM"]

    def budget(self) -> Dict[str, int]:
        """What the server's memory budget holds now, and its peak (a call on a new channel)."""
        with grpc.insecure_channel(self.target) as channel:
            answer = channel.unary_unary("/hostile.Memory/Stats")(b"", timeout=10)
        return json.loads(answer)  # type: ignore[no-any-return]


@pytest.fixture(params=("blocking", "aio"))
def server(request: pytest.FixtureRequest) -> Iterator[MemoryServer]:
    """The blocking server and the asyncio one, each with the default budget."""
    process = MemoryServer(request.param)
    try:
        good_call(process.target)  # warm up: executor threads, imports
        yield process
    finally:
        code, output = process.stop()
        assert "Traceback" not in output, output
        assert code == 0, output


def _attacker(server: MemoryServer, timeout: float = 10.0, **options: Any) -> HostileClient:
    """A raw client whose send() gives up after ``timeout`` without progress: the server no
    longer reads it (over budget, RFC 9113 §10.5) or is busy with what it sent."""
    client = HostileClient(server.target, record_frames=False, **options)
    client.sock.settimeout(timeout)
    return client


def _stream_until_stalled(client: HostileClient, stream_ids: List[int], chunk: bytes) -> int:
    """Send ``chunk`` on each stream in turn while the server gives window; bytes sent."""
    sent = 0
    live = list(stream_ids)
    while live:
        for stream_id in list(live):
            if not client.send_data(stream_id, chunk, timeout=STALL):
                live.remove(stream_id)
            else:
                sent += len(chunk)
    return sent


def _run_attack(
    server: MemoryServer,
    request: pytest.FixtureRequest,
    scenario: str,
    description: str,
    attack: Callable[[List[HostileClient]], str],
    connections: int = 1,
) -> None:
    """Run ``attack`` in a thread with legitimate calls beside it; check budget, RSS, service.

    The budget may hold at most each attacking connection's share (or the total, if less),
    plus what flow control had granted before the shares were spent.
    """
    rss_before, _ = server.rss_kib()
    clients: List[HostileClient] = []
    observed: List[str] = []
    failure: List[BaseException] = []

    def run() -> None:
        try:
            observed.append(attack(clients))
        except BaseException as exc:  # reported by the test thread
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    latencies: List[float] = []
    try:
        thread.start()
        while thread.is_alive():
            start = time.monotonic()
            good_call(server.target)  # raises (fails the test) if a call is not served
            latencies.append(time.monotonic() - start)
        thread.join()
        assert not failure, failure
        # The attack holds what it made the server buffer: the budget must cover it, and
        # others must still be served.
        start = time.monotonic()
        good_call(server.target)
        latencies.append(time.monotonic() - start)
        held = server.budget()
    finally:
        for client in clients:
            client.close()
    start = time.monotonic()
    good_call(server.target)
    after = time.monotonic() - start
    _, hwm = server.rss_kib()
    growth_mib = (hwm - rss_before) / 1024
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)] * 1000
    summary = (
        f"{observed[0] if observed else ''}; budget peak {held['peak'] / MIB:.1f} MiB"
        f" (held {held['used'] / MIB:.1f} MiB at the end); peak RSS growth {growth_mib:.0f} MiB;"
        f" {len(latencies)} calls during the attack, p99 {p99:.0f} ms,"
        f" slowest {ordered[-1] * 1000:.0f} ms; first call after {after * 1000:.0f} ms"
    )
    record_observation(
        request.node.nodeid, side="server", scenario=scenario, description=description,
        expected="buffered data within the memory budget; others served during and after",
        observed=summary, memory_mib=round(growth_mib, 1), threads="", fix="",
    )
    print(summary)
    assert held["peak"] <= min(BUDGET, connections * CONNECTION_BUDGET) + GRANTED_SLACK, summary
    assert growth_mib < RSS_BOUND_MIB, summary
    assert after < 1.0, summary


@pytest.mark.timeout(120)
@pytest.mark.parametrize("streams", [1, 10])
def test_tiny_messages_to_a_handler_that_never_reads(
    server: MemoryServer, request: pytest.FixtureRequest, streams: int
) -> None:
    """Client-streaming calls of 2-byte messages to a handler that never reads them."""

    def attack(clients: List[HostileClient]) -> str:
        client = _attacker(server, timeout=4 * STALL)  # it stops reading us: no need to wait
        clients.append(client)
        client.send_preface()
        ids = [client.next_stream_id() for _ in range(streams)]
        for stream_id in ids:
            client.send_headers(stream_id, request_headers(SINK))
        sent = _stream_until_stalled(client, ids, grpc_message(b"hi") * 8192)
        return f"{sent / MIB:.1f} MiB of 2-byte messages sent before the server withheld window"

    _run_attack(
        server, request, f"tiny_messages_never_read_{streams}",
        f"{streams} client-streaming call(s) of 2-byte messages, handler never reads", attack,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("connections", [1, 2])
def test_unary_requests_missing_their_last_byte(
    server: MemoryServer, request: pytest.FixtureRequest, connections: int
) -> None:
    """Up to 100 unary calls per connection, each a 4 MiB message sent but for its last byte."""

    def one_connection(clients: List[HostileClient]) -> int:
        client = _attacker(server, timeout=4 * STALL)  # it stops reading us: no need to wait
        clients.append(client)
        client.send_preface()
        body = grpc_message(b"", length=4 * MIB) + b"\0" * (4 * MIB - 1)
        sent = 0
        stalls = 0
        for _ in range(100):
            stream_id = client.next_stream_id()
            client.send_headers(stream_id, request_headers(UNARY))
            if client.send_data(stream_id, body, timeout=STALL):
                sent += len(body)
            else:
                stalls += 1
                if stalls == 2:  # the server withholds window, or no longer reads us
                    break
        return sent

    def attack(clients: List[HostileClient]) -> str:
        results: List[int] = []
        threads = [
            threading.Thread(target=lambda: results.append(one_connection(clients)))
            for _ in range(connections)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return f"{sum(results) / MIB:.0f} MiB of incomplete requests sent"

    _run_attack(
        server, request, f"incomplete_unary_requests_{connections}",
        f"{connections} connection(s), 100 unary calls each of 4 MiB but the last byte", attack,
        connections,
    )


@pytest.mark.timeout(120)
def test_responses_never_read(server: MemoryServer, request: pytest.FixtureRequest) -> None:
    """400 calls (4 connections of 100) for 1 MiB responses, on sockets never read."""

    def attack(clients: List[HostileClient]) -> str:
        for _ in range(4):
            client = _attacker(server, read=False)
            clients.append(client)
            client.send_preface()
            frames = []
            for _ in range(100):
                stream_id = client.next_stream_id()
                frames.append(client.header_frames(stream_id, request_headers(BIG)))
                frames.append(grpc_data_frame(stream_id, grpc_message(b"1048576")))
            client.send(b"".join(frames))
        # Wait until the server has answered (or refused) what it will: its budget stops moving.
        previous = -1
        while True:
            used = server.budget()["used"]
            if used == previous:
                return f"400 calls for 1 MiB, never read; {used / MIB:.1f} MiB held"
            previous = used
            threading.Event().wait(0.3)

    _run_attack(
        server, request, "responses_never_read_400",
        "400 streams (4 connections) ask for 1 MiB responses and never read", attack, 4,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", [CHAT, FIREHOSE])
def test_streams_never_read(
    server: MemoryServer, request: pytest.FixtureRequest, path: str
) -> None:
    """Bidi calls that send and never read, and server-streams of 1 MiB messages never read:
    the client never returns window, so responses wait and the handlers block."""

    def attack(clients: List[HostileClient]) -> str:
        # Once over budget the server stops reading us: no need to wait long on a send.
        client = _attacker(server, timeout=4 * STALL, auto_window_update=False)
        clients.append(client)
        client.send_preface({INITIAL_WINDOW_SIZE: 65535})
        ids = [client.next_stream_id() for _ in range(20)]
        for stream_id in ids:
            client.send_headers(stream_id, request_headers(path))
        if path == FIREHOSE:
            for stream_id in ids:
                client.send_data(stream_id, grpc_message(b""), end_stream=True)
            threading.Event().wait(1.0)  # let the handlers fill what they may
            return "20 server-streams of 1 MiB messages, never read"
        sent = _stream_until_stalled(client, ids, grpc_message(b"x" * 16384) * 4)
        return f"20 bidi calls, {sent / MIB:.0f} MiB sent, responses never read"

    kind = "bidi" if path == CHAT else "server_stream"
    _run_attack(
        server, request, f"{kind}_never_read",
        f"20 {kind.replace('_', '-')} calls whose client never returns window", attack,
    )


def grpc_data_frame(stream_id: int, payload: bytes) -> bytes:
    return DataFrame(stream_id, payload, flags=["END_STREAM"]).serialize()


@pytest.mark.timeout(120)
def test_held_back_stream_resumes_when_its_handler_reads() -> None:
    """A client-streaming call whose handler does not read for a while: the connection goes
    over its budget (1 MiB here), the server withholds window and stops reading the socket;
    once the handler reads, the server reads again, window comes back and the call completes
    with every message."""
    import concurrent.futures

    import minigrpc
    from tests.peers import grpcio_in_process

    # grpcio as the client where it runs in this process; minigrpc's own client on PyPy.
    client: Any = minigrpc
    if grpcio_in_process():
        import grpc

        client = grpc
    release = threading.Event()

    def count(requests: Any, context: Any) -> bytes:
        release.wait(60)
        return str(sum(len(message) for message in requests)).encode()

    handler = minigrpc.method_handlers_generic_handler(
        "hostile.Memory", {"Count": minigrpc.stream_unary_rpc_method_handler(count)}
    )
    server = minigrpc.server(
        concurrent.futures.ThreadPoolExecutor(4),
        handlers=[handler],
        options=[
            ("minigrpc.max_buffered_bytes", 4 * MIB),
            ("minigrpc.max_connection_buffered_bytes", MIB),
        ],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with client.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_unary("/hostile.Memory/Count")
            messages = [b"r" * 1000] * 8000  # 8 MB of 1 kB messages
            future = call.future(iter(messages), timeout=60)
            budget = server._driver.memory  # type: ignore[attr-defined]
            # Until the connection is over its share and the client stopped sending (no
            # window left): the budget stays put for half a second (or 20 s in all).
            ticker = threading.Event()
            last, steady = -1, 0
            for _ in range(400):
                total = budget.total
                steady = steady + 1 if total == last else 0
                if total >= MIB and steady >= 10:
                    break
                last = total
                ticker.wait(0.05)
            over = budget.total
            reading = [c.link.reading for c in server._driver.connections]  # type: ignore[attr-defined]
            release.set()
            assert future.result() == str(8000 * 1000).encode()
        assert over >= MIB, f"the connection never went over its budget ({over} bytes)"
        assert reading == [False], "the server kept reading a connection over its budget"
        assert budget.peak <= MIB + 2 * MIB, budget.peak  # its share, plus one window granted
    finally:
        release.set()
        server.stop(0).wait(10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("streams", [6, 100])
def test_tiny_responses_to_a_reader_that_returns_no_window(
    server: MemoryServer, request: pytest.FixtureRequest, streams: int
) -> None:
    """Server-streams of empty messages to a client that reads everything but never returns
    window (it only ACKs SETTINGS and PING): what waits for window must be bounded by what
    each message really costs, not by its payload (0 bytes), within the stream's high water
    (6 streams) and the connection's budget (100 streams), and the server must go on
    answering PINGs and other clients at once."""
    if streams > 40 and server.kind == "blocking":
        pytest.skip("each blocking handler holds an executor thread (48 here): more streams"
                    " than threads is an executor exhaustion, grpcio's as well")
    ping_delays: List[float] = []

    def attack(clients: List[HostileClient]) -> str:
        from hyperframe.frame import PingFrame

        client = _attacker(server, auto_window_update=False)
        clients.append(client)
        client.send_preface()
        calls = []
        for _ in range(streams):
            stream_id = client.next_stream_id()
            calls.append(client.header_frames(stream_id, request_headers(TINY)))
            calls.append(grpc_data_frame(stream_id, grpc_message(b"")))
        for index in range(12):  # the first PING goes with the calls, then one every 0.25 s
            opaque = index.to_bytes(8, "big")
            ping = PingFrame(0, opaque_data=opaque).serialize()
            sent = time.monotonic()
            client.send(b"".join(calls) + ping if index == 0 else ping)
            if not client.wait_for(lambda o=opaque: o in client.ping_acks, timeout=5.0):
                ping_delays.append(float("inf"))
                break
            ping_delays.append(time.monotonic() - sent)
            threading.Event().wait(0.25)
        return (f"{streams} server-streams of empty messages, no window returned; PING ACKed"
                f" after {max(ping_delays) * 1000:.0f} ms at most")

    _run_attack(
        server, request, f"tiny_responses_no_window_{streams}",
        f"{streams} server-streams of empty messages to a client that never returns window",
        attack,
    )
    held = server.budget()
    # One message per stream may be on its way past the check (MIB is plenty for 100).
    assert held["peak"] <= CONNECTION_BUDGET + MIB, held
    assert max(ping_delays) < 0.5, ping_delays


#: Pending unary calls in the slowloris test (connections x streams), and what each may cost
#: the server (RSS growth per call, in bytes): tracemalloc puts the blocking server at
#: about 3 KB a call (its context, stream state and stall timer).
PENDING_CONNECTIONS = 30
PENDING_CALLS_PER_CONNECTION = 100
PENDING_CALL_BOUND = 4096


@pytest.mark.timeout(120)
def test_pending_unary_calls_cost_little(server: MemoryServer) -> None:
    """Unary calls whose request never completes (slowloris on streams: HEADERS, then one
    byte of a 10-byte message): until the request is whole a call has nothing to run, so it
    must cost no more on the asyncio server than on the blocking one: no task, no event."""
    rss_before, _ = server.rss_kib()
    clients: List[HostileClient] = []
    calls = PENDING_CONNECTIONS * PENDING_CALLS_PER_CONNECTION
    try:
        for _ in range(PENDING_CONNECTIONS):
            client = _attacker(server)
            clients.append(client)
            client.send_preface()
            frames = []
            for _ in range(PENDING_CALLS_PER_CONNECTION):
                stream_id = client.next_stream_id()
                frames.append(client.header_frames(stream_id, request_headers(UNARY)))
                frames.append(DataFrame(stream_id, grpc_message(b"x", length=10)).serialize())
            client.send(b"".join(frames))
        ticker = threading.Event()
        for _ in range(200):  # until the server holds them all (bounded: 10 s)
            if server.budget()["active"] >= calls:
                break
            ticker.wait(0.05)
        active = server.budget()["active"]
        good_call(server.target)
        rss_after, _ = server.rss_kib()
    finally:
        for client in clients:
            client.close()
    per_call = (rss_after - rss_before) * 1024 / calls
    print(f"{server.kind}: {active} pending calls, {per_call:,.0f} bytes each")
    assert active == calls
    assert per_call < PENDING_CALL_BOUND, f"{per_call:,.0f} bytes per pending call"
