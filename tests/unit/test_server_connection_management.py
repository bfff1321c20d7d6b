"""Connection age and keepalive on both servers (gRFC A9, A8), seen by real peers.

The driver decides (tests/unit/test_server_driver.py pins each decision on a fake clock); here
the blocking and the asyncio server carry the decisions out over TCP, against grpcio's client,
minigrpc's client and a scripted HTTP/2 client (h2 on a real socket) that pings as grpcio never
would.  Times are asserted with bounds: wide enough for a loaded machine, narrow enough that the
option visibly did the work (a connection left alone would not end at all).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent import futures
from typing import Any, Iterator, List, Sequence, Tuple

import h2.errors
import h2.events
import pytest
from hyperframe.frame import GoAwayFrame, HeadersFrame, RstStreamFrame, SettingsFrame

import minigrpc
from tests.peers import grpcio_in_process, reference_grpcio_unavailable
from tests.support.aio_server import AioServer
from tests.support.minigrpc_server import MinigrpcServer
from tests.support.scripted_peer import (
    HostileClient,
    RawH2Client,
    grpc_message,
    grpc_request_headers,
)

pytestmark = [pytest.mark.timeout(120)]

# grpcio is a peer of some tests here, and runs only on CPython: the others run everywhere.
grpc: Any = None
if grpcio_in_process():
    import grpc
needs_grpcio = pytest.mark.skipif(
    not grpcio_in_process(), reason="needs grpcio in this process, and grpcio runs only on CPython"
)
CLIENTS = ["grpcio", "minigrpc"] if grpcio_in_process() else ["minigrpc"]

WAIT = 10.0
SERVICE = "cm.S"
#: A wait no test should reach: it only bounds a hang.
HANG = 30.0


class Recorder:
    """The handlers of ``cm.S``: ``Hold`` waits until its call ends (its callback runs) and
    records when and whether its context was still active; ``Peer`` answers the client's
    address, which tells the connections apart."""

    def __init__(self) -> None:
        self.started: queue.Queue[float] = queue.Queue()
        self.ended: queue.Queue[Tuple[float, bool]] = queue.Queue()

    def hold(self, request: bytes, context: Any) -> bytes:
        ended = threading.Event()
        context.add_callback(ended.set)
        self.started.put(time.monotonic())
        ended.wait(HANG)
        self.ended.put((time.monotonic(), context.is_active()))
        return request

    def peer(self, request: bytes, context: Any) -> bytes:
        return str(context.peer()).encode()

    def handler(self) -> Any:
        return minigrpc.method_handlers_generic_handler(SERVICE, {
            "Hold": minigrpc.unary_unary_rpc_method_handler(self.hold),
            "Peer": minigrpc.unary_unary_rpc_method_handler(self.peer),
        })


@contextlib.contextmanager
def serving(kind: str, options: Sequence[Tuple[str, Any]], recorder: Recorder) -> Iterator[str]:
    """A blocking (``minigrpc.server()``) or asyncio (``minigrpc.aio.server()``) server on TCP
    with ``recorder``'s handlers; yields its target."""
    server: Any
    if kind == "blocking":
        server = MinigrpcServer(
            "tcp", handlers=[recorder.handler()], with_interop=False, options=list(options)
        )
    else:
        server = AioServer(
            "tcp", with_interop=False, handlers=[recorder.handler()], options=list(options)
        )
    try:
        yield server.target
    finally:
        server.stop(None)


@pytest.fixture(params=["blocking", "aio"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _transitions(channel: Any) -> queue.Queue[Tuple[float, Any]]:
    states: queue.Queue[Tuple[float, Any]] = queue.Queue()
    channel.subscribe(lambda state: states.put((time.monotonic(), state)), try_to_connect=True)
    return states


def _next_state(states: queue.Queue[Tuple[float, Any]], wanted: Any) -> float:
    while True:
        when, state = states.get(timeout=WAIT)
        if state == wanted:
            return when


# -- connection age (gRFC A9) -----------------------------------------------------------------


@needs_grpcio
def test_grpcio_sees_goaway_at_about_the_max_age(kind: str) -> None:
    """grpcio's channel leaves READY (to IDLE) when the GOAWAY arrives: at the age, ±10%."""
    with serving(kind, [("grpc.max_connection_age_ms", 1000)], Recorder()) as target:
        with grpc.insecure_channel(target) as channel:
            states = _transitions(channel)
            ready = _next_state(states, grpc.ChannelConnectivity.READY)
            left = _next_state(states, grpc.ChannelConnectivity.IDLE)
    # Below: the age's -10%, less the lateness of grpcio's READY callback on a loaded machine.
    assert 0.7 <= left - ready <= 2.5, left - ready


def test_the_goaways_of_max_age_say_max_age(kind: str) -> None:
    with serving(kind, [("grpc.max_connection_age_ms", 300)], Recorder()) as target:
        with RawH2Client(target) as client:
            started = time.monotonic()
            with pytest.raises(ConnectionError):
                client.read_until(lambda: False)  # GOAWAY, PING, GOAWAY, then the close
            elapsed = time.monotonic() - started
    assert [(g.last_stream_id, g.error_code) for g in client.goaways] == [(2**31 - 1, 0), (0, 0)]
    assert [g.additional_data for g in client.goaways] == [b"max_age", b"max_age"]
    assert 0.2 <= elapsed <= 2.5, elapsed


@needs_grpcio
def test_a_call_running_past_the_grace_is_cut(kind: str) -> None:
    options = [("grpc.max_connection_age_ms", 500), ("grpc.max_connection_age_grace_ms", 500)]
    recorder = Recorder()
    with serving(kind, options, recorder) as target:
        with grpc.insecure_channel(target) as channel:
            hold = channel.unary_unary(f"/{SERVICE}/Hold")
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as failure:
                hold(b"x", timeout=WAIT)
            elapsed = time.monotonic() - started
            _, active = recorder.ended.get(timeout=WAIT)
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
    assert failure.value.details() == "max connection age"
    assert 0.85 <= elapsed <= 3.0, elapsed  # age (0.45-0.55 s) + grace, not the deadline
    assert not active  # the handler saw its context inactive, and its callback ran


@pytest.mark.parametrize("client", CLIENTS)
def test_clients_ride_through_repeated_max_age_goaways(kind: str, client: str) -> None:
    """Connections that live 200 ms each, calls for 2 s from four threads: every call
    succeeds, on several connections one after the other."""
    options = [("grpc.max_connection_age_ms", 200), ("grpc.max_connection_age_grace_ms", 5000)]
    module: Any = grpc if client == "grpcio" else minigrpc
    peers: List[bytes] = []
    errors: List[BaseException] = []
    lock = threading.Lock()
    with serving(kind, options, Recorder()) as target:
        with module.insecure_channel(target) as channel:
            peer = channel.unary_unary(f"/{SERVICE}/Peer")
            until = time.monotonic() + 2.0

            def caller() -> None:
                while time.monotonic() < until:
                    try:
                        answer = peer(b"", timeout=WAIT)
                    except BaseException as exc:  # every failure is reported below
                        with lock:
                            errors.append(exc)
                        return
                    with lock:
                        peers.append(answer)

            threads = [threading.Thread(target=caller) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(HANG)
    assert not errors, errors[:3]
    assert len(peers) > 20
    assert len(set(peers)) >= 4, set(peers)  # about ten connections in 2 s


#: Age and grace of the cut tests: the grace ends before minigrpc's own wait for the drain
#: PING's ACK (DRAIN_PING_TIMEOUT, 1 s; grpc core waits 20 s), so both send the same GOAWAYs.
CUT_OPTIONS = [("grpc.max_connection_age_ms", 300), ("grpc.max_connection_age_grace_ms", 500)]
MAX_STREAM_ID = 2**31 - 1
NO_ERROR, INTERNAL_ERROR = 0, 2


def _cut_frames(target: str, answer_pings: bool) -> List[Tuple[Any, ...]]:
    """One unary call held by the server past the max age and its grace, from a client that
    does or does not answer PINGs: the frames that follow the drain's first GOAWAY, in order,
    until the server closes: ``("GOAWAY", last stream, code, debug data)``, ``("TRAILERS",
    grpc-status, grpc-message)``, ``("RST_STREAM", code)``.  PINGs are left out (grpcio sends a
    BDP PING of its own)."""
    with HostileClient(target, auto_ack_ping=answer_pings) as client:
        client.send_preface()
        stream_id = client.next_stream_id()
        client.send_headers(stream_id, client.request_headers(f"/{SERVICE}/Hold"))
        client.send_data(stream_id, grpc_message(b"x"), end_stream=True)
        assert client.wait_eof(WAIT)
        frames: List[Tuple[Any, ...]] = []
        for frame in client.frames:
            if isinstance(frame, GoAwayFrame):
                frames.append(("GOAWAY", frame.last_stream_id, frame.error_code,
                               bytes(frame.additional_data)))
            elif isinstance(frame, HeadersFrame) and frames:
                block = dict(client.streams[stream_id].header_blocks[-1])
                frames.append(("TRAILERS", block.get(b"grpc-status"), block.get(b"grpc-message")))
            elif isinstance(frame, RstStreamFrame):
                frames.append(("RST_STREAM", frame.error_code))
    return frames


#: What grpcio 1.85's server sends (measured; the reference test below holds it), and so
#: minigrpc's: the drain's GOAWAY, then the final one on the PING's ACK; without an ACK, at the
#: end of the grace, GOAWAY(INTERNAL_ERROR, "max connection age") before the trailers.
CUT_FRAMES = {
    True: [("GOAWAY", MAX_STREAM_ID, NO_ERROR, b"max_age"), ("GOAWAY", 1, NO_ERROR, b"max_age"),
           ("TRAILERS", b"14", b"max connection age")],
    False: [("GOAWAY", MAX_STREAM_ID, NO_ERROR, b"max_age"),
            ("GOAWAY", 1, INTERNAL_ERROR, b"max connection age"),
            ("TRAILERS", b"14", b"max connection age")],
}


def _without_closed_stream_resets(frames: List[Tuple[Any, ...]]) -> List[Tuple[Any, ...]]:
    """grpcio follows the trailers of a call whose request had ended with RST_STREAM(NO_ERROR),
    on a stream its END_STREAM closed; minigrpc sends nothing on a closed stream (RFC 9113
    §5.1).  A reset of any other code stays, and fails the comparison."""
    return [frame for frame in frames if frame != ("RST_STREAM", NO_ERROR)]


@pytest.mark.parametrize("answer_pings", [True, False], ids=["ping-acked", "ping-unanswered"])
def test_the_last_goaway_of_a_grace_cut_is_grpcios(kind: str, answer_pings: bool) -> None:
    recorder = Recorder()
    with serving(kind, CUT_OPTIONS, recorder) as target:
        frames = _cut_frames(target, answer_pings)
    assert frames == CUT_FRAMES[answer_pings]


@pytest.mark.skipif(reference_grpcio_unavailable() is not None,
                    reason=str(reference_grpcio_unavailable()))
@pytest.mark.parametrize("answer_pings", [True, False], ids=["ping-acked", "ping-unanswered"])
def test_grpcio_ends_a_grace_cut_so(answer_pings: bool) -> None:
    """The reference: grpcio's server, the same call and client."""
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=CUT_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "Hold": grpc.unary_unary_rpc_method_handler(recorder.hold),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        frames = _cut_frames(f"127.0.0.1:{port}", answer_pings)
    finally:
        server.stop(None).wait(WAIT)
    assert _without_closed_stream_resets(frames) == CUT_FRAMES[answer_pings], frames
    assert ("RST_STREAM", NO_ERROR) in frames  # what the filter above leaves out, as measured


# -- keepalive (gRFC A8, A9) ------------------------------------------------------------------


def _ping_every(client: RawH2Client, interval: float, count: int) -> List[int]:
    """PING ``count`` times, ``interval`` apart, each once the last was answered (or the
    server sent GOAWAY); the numbers of the PINGs the server answered."""
    pace = threading.Event()  # never set: paces the PINGs, synchronises nothing
    try:
        for number in range(count):
            if client.goaways:
                break
            data = number.to_bytes(8, "big")
            client.conn.ping(data)
            client.flush()
            client.read_until(lambda acked=data: acked in client.ping_acks or bool(client.goaways))
            pace.wait(interval)
        if client.goaways:
            client.read_until(lambda: False)  # what the server still sends, then its close
    except ConnectionError:
        pass
    return [int.from_bytes(ack, "big") for ack in client.ping_acks]


def test_pings_every_10_ms_are_sent_away_after_the_strikes(kind: str) -> None:
    """grpcio's defaults: two strikes allowed, the 4th quick PING gets GOAWAY too_many_pings;
    with five strikes allowed, the 7th."""
    for options, answered in (([], 4), ([("grpc.http2.max_ping_strikes", 5)], 7)):
        with serving(kind, options, Recorder()) as target, RawH2Client(target) as client:
            acks = _ping_every(client, 0.01, 20)
        assert acks == list(range(answered)), (options, acks)
        assert len(client.goaways) == 1
        goaway = client.goaways[0]
        assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
        assert goaway.additional_data == b"too_many_pings"


#: Frames that do no work sent in one write: within a new connection's opening allowance
#: (:data:`minigrpc.http2.flood.START`, 100), beyond half of it.
OPENING_BURST = 75


def _opening_burst_survives(target: str) -> bool:
    """A new connection sends :data:`OPENING_BURST` empty SETTINGS frames at once, then a
    PING: True when the PING is answered, False when the server sends the connection away
    (GOAWAY(ENHANCE_YOUR_CALM), a flood) instead."""
    with HostileClient(target) as client:
        client.send_preface()
        client.send(SettingsFrame(0).serialize() * OPENING_BURST)
        client.send_ping(b"burst-ok")
        assert client.wait_for(lambda: bool(client.ping_acks or client.goaways or client.eof))
        if client.ping_acks:
            return True
        assert [(g.error_code, g.additional_data) for g in client.goaways] == [
            (h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, b"")
        ], client.goaways
        return False


def test_a_client_sent_away_for_pings_reconnects_with_a_smaller_allowance(kind: str) -> None:
    """GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") goes on the peer's record as a flood does
    (:class:`minigrpc.http2.flood.PeerHistory`): a burst a new connection may open with before
    is a flood on the connection that follows it, from the same address."""
    with serving(kind, [], Recorder()) as target:
        assert _opening_burst_survives(target)  # a peer with a clean record
        with RawH2Client(target) as client:
            _ping_every(client, 0.01, 20)
        assert [g.additional_data for g in client.goaways] == [b"too_many_pings"]
        assert not _opening_burst_survives(target)  # half the opening allowance now


def test_pings_within_the_policy_are_left_alone(kind: str) -> None:
    options = [
        ("grpc.http2.min_ping_interval_without_data_ms", 50),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    with serving(kind, options, Recorder()) as target, RawH2Client(target) as client:
        acks = _ping_every(client, 0.1, 15)
        assert not client.goaways
        assert acks == list(range(15))
        client.call(grpc_request_headers(f"/{SERVICE}/Peer"), b"\0\0\0\0\0")  # still serving


def test_a_silent_client_is_found_dead_and_its_calls_end(kind: str) -> None:
    """The client sends a call, then nothing (no ACK for the server's PING): the handler sees
    its context inactive, and its callback run, about keepalive time + timeout later."""
    options = [("grpc.keepalive_time_ms", 500), ("grpc.keepalive_timeout_ms", 500)]
    recorder = Recorder()
    with serving(kind, options, recorder) as target, RawH2Client(target) as client:
        sent = time.monotonic()
        client.send_request(grpc_request_headers(f"/{SERVICE}/Hold"), b"\0\0\0\0\x01x")
        recorder.started.get(timeout=WAIT)
        ended, active = recorder.ended.get(timeout=WAIT)  # the client reads nothing meanwhile
    assert not active
    assert 0.9 <= ended - sent <= 3.0, ended - sent


def test_a_keepalive_time_shorter_than_the_timeout_pings_a_keepalive_time_after_each_answer(
        kind: str) -> None:
    """The client answers each PING at once: the next comes a keepalive time (300 ms) after
    the answer (gRFC A8: after the last byte received), not a timeout (5 s) after the PING,
    which is when the server's timer would otherwise next look."""
    options = [
        ("grpc.keepalive_time_ms", 300),
        ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    pinged: List[float] = []

    def count_pings() -> bool:
        pinged.extend(time.monotonic() for event in client.events
                      if isinstance(event, h2.events.PingReceived))
        client.events.clear()
        return len(pinged) >= 5

    with serving(kind, options, Recorder()) as target, RawH2Client(target) as client:
        client.sock.settimeout(WAIT)
        client.read_until(count_pings)  # h2 answers each PING as it reads it
    gaps = [later - earlier for earlier, later in zip(pinged, pinged[1:])]
    assert all(0.2 <= gap <= 1.5 for gap in gaps), gaps


@needs_grpcio
def test_grpcio_with_keepalive_works_normally(kind: str) -> None:
    """grpcio pings every 200 ms, with and without calls, within the server's policy, and the
    server pings it every 300 ms: calls over 1.5 s all succeed on the one connection."""
    server_options = [
        ("grpc.keepalive_time_ms", 300),
        ("grpc.keepalive_timeout_ms", 1000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 100),
    ]
    client_options = [
        ("grpc.keepalive_time_ms", 200),
        ("grpc.keepalive_timeout_ms", 1000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    recorder = Recorder()
    pace = threading.Event()  # never set: spaces the calls, synchronises nothing
    with serving(kind, server_options, recorder) as target:
        with grpc.insecure_channel(target, options=client_options) as channel:
            peer = channel.unary_unary(f"/{SERVICE}/Peer")
            peers = set()
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                peers.add(peer(b"", timeout=WAIT))
                pace.wait(0.25)
    assert len(peers) == 1  # never sent away, never reconnected


# -- arguments --------------------------------------------------------------------------------


def test_each_option_not_carried_out_is_named_in_one_warning(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An unknown option, or a known one minigrpc does not carry out, logs one warning naming
    it (grpcio ignores both in silence); the options it carries out log nothing."""
    options = [
        ("grpc.max_connection_age_ms", 60_000),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.no_such_option", 1),
        ("grpc.http2.hpack_table_size.decoder", 8192),
        ("grpc.http2.bdp_probe", 0),  # what minigrpc does anyway: no warning
        ("grpc.no_such_option", 2),
    ]
    caplog.set_level(logging.WARNING, logger="minigrpc")
    with serving(kind, options, Recorder()):
        pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "'grpc.no_such_option'" in warnings[0]
    assert "'grpc.http2.hpack_table_size.decoder'" in warnings[1]
    assert "not supported" in warnings[1]
