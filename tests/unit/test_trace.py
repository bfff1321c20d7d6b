"""Tests for minigrpc.net.trace, the frame trace.

The bytes come from two real h2 connections (a client and a server) talking to each other in
memory; the tracer sees them exactly as a transport would hand them over, in any chunking.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import h2.config
import h2.connection
import h2.errors
import h2.settings
import pytest
from hyperframe.frame import DataFrame, HeadersFrame, PingFrame, SettingsFrame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minigrpc.http2.frames import CLIENT_PREFACE
from minigrpc.net.trace import WIRE_LOGGER, FrameTracer, tracer_for

REPO_ROOT = Path(__file__).resolve().parents[2]
PEER = "localhost:50051"
PATH = b"/grpc.testing.TestService/UnaryCall"
BIG_VALUE = b"v" * 20000  # forces a CONTINUATION frame (16384 is the default max frame size)
SPLIT_MESSAGE = b"\x0a" * 40


def lpm(payload: bytes, flag: int = 0) -> bytes:
    """A gRPC Length-Prefixed-Message (PROTOCOL-HTTP2.md, "Length-Prefixed-Message")."""
    return struct.pack(">BI", flag, len(payload)) + payload


def request_headers(extra: Tuple[Tuple[bytes, bytes], ...] = ()) -> List[Tuple[bytes, bytes]]:
    return [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", PATH),
        (b":authority", PEER.encode()),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        *extra,
    ]


@functools.lru_cache(maxsize=None)
def exchange() -> Tuple[bytes, bytes]:
    """(bytes the client wrote, bytes the server wrote) for a conversation that uses every frame.

    Stream 1: a unary call with a CONTINUATION, two messages in one DATA frame, a prefix split
    across frames, a padded frame, trailers with a percent-encoded grpc-message.
    Stream 3: cancelled with RST_STREAM.  Stream 5: a compressed request, Trailers-Only answer.
    Then a PING and its ACK, and a GOAWAY from the server.
    """
    client = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None))
    server = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding=None))
    client_bytes: List[bytes] = []
    server_bytes: List[bytes] = []

    def pump() -> None:
        while True:
            from_client = client.data_to_send()
            if from_client:
                client_bytes.append(from_client)
                server.receive_data(from_client)
            from_server = server.data_to_send()
            if from_server:
                server_bytes.append(from_server)
                client.receive_data(from_server)
            if not from_client and not from_server:
                return

    client.initiate_connection()
    client.update_settings({
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 4194304,
        h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 16384,
    })
    client.increment_flow_control_window(4128769)
    server.initiate_connection()
    pump()

    client.send_headers(1, request_headers((
        (b"grpc-timeout", b"1000000u"),
        (b"x-big", BIG_VALUE),
        (b"x-custom-bin", b"q6ur"),
    )))
    client.send_data(1, lpm(b"\x08\x01") + lpm(b"hello"))
    split = lpm(SPLIT_MESSAGE)
    client.send_data(1, split[:3])
    client.send_data(1, split[3:20], pad_length=10)
    client.send_data(1, split[20:], end_stream=True)
    pump()
    server.send_headers(1, [(b":status", b"200"), (b"content-type", b"application/grpc")])
    server.send_data(1, lpm(b"\x0a\x02\x12\x00"))
    server.send_headers(1, [
        (b"grpc-status", b"2"),
        (b"grpc-message", b"%09bad %E2%98%BA 100%25"),
    ], end_stream=True)
    pump()

    client.send_headers(3, request_headers())
    client.reset_stream(3, h2.errors.ErrorCodes.CANCEL)
    pump()

    client.send_headers(5, request_headers(((b"grpc-encoding", b"gzip"),)))
    client.send_data(5, lpm(b"\x1f\x8b", flag=1), end_stream=True)
    pump()
    server.send_headers(5, [
        (b":status", b"200"),
        (b"content-type", b"application/grpc"),
        (b"grpc-status", b"12"),
    ], end_stream=True)
    pump()

    client.ping(b"pingpong")
    pump()
    server.close_connection(error_code=0, additional_data=b"bye", last_stream_id=5)
    pump()
    return b"".join(client_bytes), b"".join(server_bytes)


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def private_logger(name: str) -> Tuple[logging.Logger, ListHandler]:
    """A logger of the test's own, so hypothesis examples never share state with caplog."""
    logger = logging.getLogger(f"minigrpc.protocol.wire.test.{name}")
    logger.handlers = []
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = ListHandler()
    logger.addHandler(handler)
    return logger, handler


def chunks(data: bytes, cuts: List[int]) -> List[bytes]:
    points = [0, *sorted(set(c for c in cuts if 0 < c < len(data))), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:])]


def by_direction(messages: List[str]) -> Dict[str, List[str]]:
    result: Dict[str, List[str]] = {"-->": [], "<--": []}
    for message in messages:
        result[message.split()[1]].append(message)
    return result


def trace(role: str, caplog: pytest.LogCaptureFixture) -> List[str]:
    """The records of one tracer fed each direction whole (sent first, then received)."""
    client_bytes, server_bytes = exchange()
    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    tracer = FrameTracer(role, PEER)
    if role == "client":
        tracer.sent(client_bytes)
        tracer.received(server_bytes)
    else:
        tracer.received(client_bytes)
        tracer.sent(server_bytes)
    return [r.getMessage() for r in caplog.records if r.name == WIRE_LOGGER.name]


def find(messages: List[str], frame_type: str, *needles: str) -> str:
    """The single record of a frame of that type that contains every needle."""
    found = [m for m in messages
             if f"  {frame_type} " in m.split("\n")[0] and all(n in m for n in needles)]
    assert len(found) == 1, (frame_type, needles, found)
    return found[0]


# -- one whole conversation -----------------------------------------------------------------

def test_client_trace_of_a_full_exchange(caplog: pytest.LogCaptureFixture) -> None:
    messages = trace("client", caplog)
    sent = by_direction(messages)["-->"]
    received = by_direction(messages)["<--"]

    assert sent[0].startswith(f"client --> {PEER}  PREFACE")
    assert '"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n"' in sent[0]
    assert "SETTINGS" in sent[1] and "HEADER_TABLE_SIZE=4096 ENABLE_PUSH=1" in sent[1]
    find(sent, "SETTINGS", "INITIAL_WINDOW_SIZE=4194304 MAX_HEADER_LIST_SIZE=16384")
    find(sent, "WINDOW_UPDATE", "stream=0", "increment=4128769 (connection)")

    headers = find(sent, "HEADERS", "stream=1 ")
    assert "request headers" in headers and "(block continues in CONTINUATION)" in headers
    assert "len=16384" in headers and "END_HEADERS" not in headers
    continuation = find(sent, "CONTINUATION", "stream=1 ")
    first, *header_lines = continuation.split("\n")
    assert "END_HEADERS" in first and "end of request headers: 2 frames" in first
    decoded = [line.strip() for line in header_lines]
    assert decoded[:7] == [
        ":method: POST",
        ":scheme: http",
        ":path: /grpc.testing.TestService/UnaryCall",
        f":authority: {PEER}",
        "content-type: application/grpc",
        "te: trailers",
        "grpc-timeout: 1000000u  (1 s)",
    ]
    assert decoded[7] == "x-big: " + "v" * 100 + "... (20000 bytes)"
    assert decoded[8] == "x-custom-bin: q6ur"

    data = [m for m in sent if "  DATA " in m and "stream=1 " in m]
    assert len(data) == 4
    assert "2 grpc-messages start here" in data[0]
    assert data[0].split("\n")[1:] == [
        " " * 30 + "grpc-message flag=0 length=2 [08 01]",
        " " * 30 + "grpc-message flag=0 length=5 [68 65 6c 6c 6f]",
    ]
    assert "grpc-message prefix split: 3 of 5 bytes here [00 00 00]" in data[1]
    assert "PADDED" in data[2] and "data=17 padding=10" in data[2] and "len=28" in data[2]
    assert ("grpc-message flag=0 length=40 (prefix began in the previous frame; "
            "15 bytes here, 25 in later frames) [0a 0a 0a") in data[2]
    assert "END_STREAM" in data[3]
    assert "grpc-message continued: 25 bytes, message complete" in data[3]

    find(sent, "RST_STREAM", "stream=3 ", "error=CANCEL(0x8)")
    assert "grpc-encoding: gzip" in find(sent, "HEADERS", "stream=5 ")
    assert "grpc-message flag=1 length=2 (compressed) [1f 8b]" in find(sent, "DATA", "stream=5 ")
    ping = find(sent, "PING")
    assert "payload=70696e67706f6e67" in ping and "ACK" not in ping

    acks = [m for m in received if "SETTINGS" in m and "ACK" in m]
    assert len(acks) == 2  # one per SETTINGS frame the client sent
    assert all("len=0" in m and m.endswith("(acknowledges our SETTINGS)") for m in acks)
    response = find(received, "HEADERS", "stream=1 ", "response headers")
    assert response.split("\n")[1:] == [
        " " * 30 + ":status: 200", " " * 30 + "content-type: application/grpc"]
    assert "grpc-message flag=0 length=4 [0a 02 12 00]" in find(received, "DATA", "stream=1 ")
    trailers = find(received, "HEADERS", "stream=1 ", "trailers")
    assert "END_STREAM|END_HEADERS" in trailers
    assert "grpc-status: 2  (UNKNOWN)" in trailers
    assert ("grpc-message: %09bad %E2%98%BA 100%25  (percent-decoded: '\\tbad \u263a 100%')"
            in trailers)
    trailers_only = find(received, "HEADERS", "stream=5 ")
    assert "trailers-only" in trailers_only and "grpc-status: 12  (UNIMPLEMENTED)" in trailers_only
    assert "payload=70696e67706f6e67 (reply)" in find(received, "PING", "ACK")
    find(received, "GOAWAY", 'last_stream_id=5 error=NO_ERROR(0x0) debug="bye"')
    assert not any("!!" in m or "<" in m.split("  ", 1)[1] for m in messages), messages


def test_server_trace_labels_the_other_way(caplog: pytest.LogCaptureFixture) -> None:
    messages = trace("server", caplog)
    received = by_direction(messages)["<--"]
    sent = by_direction(messages)["-->"]
    assert received[0].startswith(f"server <-- {PEER}  PREFACE")
    assert "request headers" in find(received, "HEADERS", "stream=1 ")
    assert ":path: /grpc.testing.TestService/UnaryCall" in find(received, "CONTINUATION")
    assert "response headers" in find(sent, "HEADERS", "stream=1 ", ":status")
    assert "trailers" in find(sent, "HEADERS", "stream=1 ", "grpc-status")
    assert any("ACK" in m and "(acknowledges the peer's SETTINGS)" in m for m in sent)
    find(sent, "GOAWAY", "last_stream_id=5")


def test_columns_line_up(caplog: pytest.LogCaptureFixture) -> None:
    frame_lines = [m.split("\n")[0] for m in trace("client", caplog) if "stream=" in m]
    assert len({line.index("stream=") for line in frame_lines}) == 1
    assert len({line.index("len=") for line in frame_lines}) == 1
    # The flags column is 24 wide: the details all start in one column after it.
    details_column = frame_lines[0].index("len=") + len("len=") + 8 + 24
    for line in frame_lines:
        assert line[details_column - 1] == " " and line[details_column] != " ", line


# -- any chunking gives the same trace ----------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_chunking_and_interleaving_do_not_change_the_trace(data: st.DataObject) -> None:
    client_bytes, server_bytes = exchange()
    reference_logger, reference = private_logger("reference")
    tracer = FrameTracer("client", PEER, reference_logger)
    tracer.sent(client_bytes)
    tracer.received(server_bytes)
    expected = by_direction(reference.messages)

    cut_points = st.lists(st.integers(0, len(client_bytes)), max_size=60)
    sent_chunks = chunks(client_bytes, data.draw(cut_points, label="client cuts"))
    received_chunks = chunks(
        server_bytes,
        data.draw(st.lists(st.integers(0, len(server_bytes)), max_size=30), label="server cuts"))
    order = data.draw(st.permutations([True] * len(sent_chunks) + [False] * len(received_chunks)))

    logger, handler = private_logger("chunked")
    tracer = FrameTracer("client", PEER, logger)
    sent_iter, received_iter = iter(sent_chunks), iter(received_chunks)
    for is_sent in order:
        if is_sent:
            tracer.sent(next(sent_iter))
        else:
            tracer.received(next(received_iter))
    assert by_direction(handler.messages) == expected


def test_byte_at_a_time() -> None:
    client_bytes, _ = exchange()
    whole_logger, whole = private_logger("whole")
    FrameTracer("client", PEER, whole_logger).sent(client_bytes)
    logger, handler = private_logger("bytewise")
    tracer = FrameTracer("client", PEER, logger)
    for i in range(len(client_bytes)):
        tracer.sent(client_bytes[i:i + 1])
    assert handler.messages == whole.messages


# -- bad input is reported, never raised ------------------------------------------------------

def test_http1_instead_of_preface(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    tracer = FrameTracer("server", "127.0.0.1:40000")
    tracer.received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    tracer.received(b"more garbage")
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith("server <-- 127.0.0.1:40000  !! not HTTP/2")
    assert "GET / HTTP/1.1" in message and "no further frames are traced" in message


def test_malformed_frame_stops_that_direction_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    tracer = FrameTracer("client", PEER)
    bad_ping = b"\x00\x00\x03\x06\x00\x00\x00\x00\x00abc"  # PING must carry 8 bytes
    tracer.received(SettingsFrame(0).serialize() + bad_ping + PingFrame(0, b"12345678").serialize())
    tracer.sent(CLIENT_PREFACE + PingFrame(0, b"abcdefgh").serialize())
    messages = [r.getMessage() for r in caplog.records]
    assert "SETTINGS" in messages[0] and "(no changes: defaults stand)" in messages[0]
    assert "PING" in messages[1] and "len=3" in messages[1]
    assert "!! malformed PING frame" in messages[2] and "no further frames" in messages[2]
    assert "PREFACE" in messages[3] and "payload=6162636465666768" in messages[4]
    assert len(messages) == 5


def test_undecodable_header_block(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    tracer = FrameTracer("client", PEER)
    bad = HeadersFrame(1, b"\xff\xff\xff\xff\x0f", flags=["END_HEADERS"]).serialize()
    good = HeadersFrame(3, b"\x88", flags=["END_HEADERS"]).serialize()  # :status 200
    tracer.received(bad + good)
    messages = [r.getMessage() for r in caplog.records]
    assert "<undecodable header block: " in messages[0]
    assert "<undecodable header block: HPACK state lost" in messages[1]


def test_data_frame_details() -> None:
    logger, handler = private_logger("data")
    tracer = FrameTracer("client", PEER, logger)
    tracer.received(
        HeadersFrame(1, b"\x88", flags=["END_HEADERS"]).serialize()
        + DataFrame(1, b"", flags=["END_STREAM"]).serialize()
        + HeadersFrame(3, b"\x88", flags=["END_HEADERS"]).serialize()
        + DataFrame(3, lpm(b"x" * 30)[:20], flags=["END_STREAM"]).serialize()
        + DataFrame(7, b"\x00", flags=[]).serialize()
        + DataFrame(9, b"z" * 20000).serialize()
    )
    lines = handler.messages
    assert "(empty)" in lines[1] and "END_STREAM" in lines[1]
    assert "grpc-message flag=0 length=30 (15 bytes here, 15 in later frames)" in lines[3]
    assert "!! stream ended inside a grpc-message (15 bytes missing)" in lines[3]
    assert "!! stream not open in this direction" in lines[4]
    assert "!! larger than the receiver's MAX_FRAME_SIZE (16384)" in lines[5]


def test_unknown_frame_type_is_shown() -> None:
    logger, handler = private_logger("unknown")
    tracer = FrameTracer("client", PEER, logger)
    tracer.received(b"\x00\x00\x02\xfe\x05\x00\x00\x00\x00hi")
    assert "0xfe" in handler.messages[0] and "0x05" in handler.messages[0]
    assert "[68 69]" in handler.messages[0]


@settings(max_examples=200, deadline=None)
@given(
    role=st.sampled_from(["client", "server", "proxy"]),
    pieces=st.lists(st.tuples(st.booleans(), st.binary(max_size=64)), max_size=20),
)
def test_garbage_never_raises(role: str, pieces: List[Tuple[bool, bytes]]) -> None:
    logger, handler = private_logger("garbage")
    tracer = FrameTracer(role, "peer", logger)
    for is_sent, piece in pieces:
        (tracer.sent if is_sent else tracer.received)(piece)
    # Garbage is described; the catch-all for the tracer's own bugs never fires.
    assert not any("<tracer failure" in m for m in handler.messages)


@settings(max_examples=100, deadline=None)
@given(body=st.binary(max_size=40), type_code=st.integers(0, 0x10), flags=st.integers(0, 255),
       stream_id=st.integers(0, 9))
def test_any_frame_after_a_preface_never_raises(
        body: bytes, type_code: int, flags: int, stream_id: int) -> None:
    logger, handler = private_logger("frames")
    tracer = FrameTracer("server", "peer", logger)
    header = len(body).to_bytes(3, "big") + bytes([type_code, flags]) + stream_id.to_bytes(4, "big")
    tracer.received(CLIENT_PREFACE + header + body)
    assert len(handler.messages) >= 2  # the preface, then the frame or why it could not be read
    assert not any("<tracer failure" in m for m in handler.messages)


# -- switching the trace on ------------------------------------------------------------------

def test_tracer_for_is_none_unless_debug_is_on(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=WIRE_LOGGER.name)
    assert tracer_for("client", PEER) is None
    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    assert isinstance(tracer_for("client", PEER), FrameTracer)


def run_python(code: str, trace_env: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MINIGRPC_TRACE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    if trace_env is not None:
        env["MINIGRPC_TRACE"] = trace_env
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


TRACE_SCRIPT = """
import minigrpc.net.trace as trace
from hyperframe.frame import SettingsFrame
from minigrpc.http2.frames import CLIENT_PREFACE
trace.enable_from_environment()
trace.enable_from_environment()  # idempotent: still one line per frame
tracer = trace.tracer_for('client', 'unix:/run/x.sock')
print(tracer is not None)
if tracer is not None:
    tracer.sent(CLIENT_PREFACE + SettingsFrame(0, {4: 4194304}).serialize())
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_minigrpc_trace_sends_lines_to_stderr(value: str) -> None:
    result = run_python(TRACE_SCRIPT, value)
    assert result.stdout.strip() == "True"
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("client --> unix:/run/x.sock") and "PREFACE" in lines[0]
    assert re.search(r"SETTINGS\s+stream=0\s+len=6\s+-\s+INITIAL_WINDOW_SIZE=4194304$", lines[1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [None, "0", ""])
def test_no_trace_without_minigrpc_trace(value: str | None) -> None:
    result = run_python(TRACE_SCRIPT, value)
    assert result.stdout.strip() == "False"
    assert result.stderr == ""


CLIENT_TRACER_SCRIPT = """
import sys
from minigrpc.net.sockets import client_tracer
print(client_tracer("unix:/run/x.sock") is not None, "logging" in sys.modules)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("value", "expected"), [(None, "False False"), ("1", "True True")])
def test_client_tracer_loads_logging_only_to_trace(value: str | None, expected: str) -> None:
    """A client in a process that never loaded logging (the CNI plugin) does not load it."""
    result = run_python(CLIENT_TRACER_SCRIPT, value)
    assert result.stdout.strip() == expected, result.stderr


@pytest.mark.timeout(60)
def test_importing_trace_is_cheap() -> None:
    """The frame and HPACK codecs load with the first tracer; h2 and its libraries never."""
    result = run_python(
        "import sys, minigrpc.net.trace; print(sorted(m for m in ('hpack', 'hyperframe', 'h2', "
        "'minigrpc.http2.frames', 'minigrpc.http2.hpack_codec') if m in sys.modules))", None)
    assert result.stdout.strip() == "[]"


@pytest.mark.timeout(60)
def test_tracing_needs_no_h2() -> None:
    """A traced connection, headers decoded, with h2, hpack and hyperframe unimportable."""
    code = (
        "import sys\n"
        "for name in ('h2', 'hpack', 'hyperframe'):\n"
        "    sys.modules[name] = None\n"
        "from minigrpc.http2 import frames, hpack_codec\n"
        "from minigrpc.net import trace\n"
        "from minigrpc.http2.frames import CLIENT_PREFACE\n"
        "trace.enable_from_environment()\n"
        "tracer = trace.tracer_for('client', 'unix:/run/x.sock')\n"
        "block = hpack_codec.Encoder().encode([(b':method', b'POST', False)])\n"
        "tracer.sent(CLIENT_PREFACE + frames.settings_frame([(4, 65535)])\n"
        "            + b''.join(frames.header_frames(1, block, 16384))\n"
        "            + frames.rst_stream_frame(1, 0x2a))\n"
    )
    lines = run_python(code, "1").stderr.splitlines()
    assert len(lines) == 5, lines
    assert lines[2].split() == ["client", "-->", "unix:/run/x.sock", "HEADERS", "stream=1",
                                "len=1", "END_HEADERS", "request", "headers"]
    assert lines[3].strip() == ":method: POST"
    assert lines[4].endswith("error=unknown(0x2a)")


# -- real grpcio traffic ------------------------------------------------------------------------

class TracingProxy:
    """A TCP relay that hands every chunk to a FrameTracer before forwarding it.

    Tracing happens before forwarding, so once a call returns, every frame it caused on the
    way to the client has been traced: no waiting is needed before looking at the lines.
    """

    def __init__(self, upstream_port: int, tracer: FrameTracer) -> None:
        self._upstream_port = upstream_port
        self._tracer = tracer
        self._listener = socket.socket()  # socket.create_server is 3.8+
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        self.port = self._listener.getsockname()[1]
        self._sockets: List[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            downstream, _ = self._listener.accept()
        except OSError:
            return
        upstream = socket.create_connection(("127.0.0.1", self._upstream_port))
        self._sockets += [downstream, upstream]
        for source, sink, observe in ((downstream, upstream, self._tracer.sent),
                                      (upstream, downstream, self._tracer.received)):
            threading.Thread(target=self._relay, args=(source, sink, observe), daemon=True).start()

    @staticmethod
    def _relay(
        source: socket.socket, sink: socket.socket, observe: Callable[[bytes], None]
    ) -> None:
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    sink.shutdown(socket.SHUT_WR)
                    return
                observe(chunk)
                sink.sendall(chunk)
        except OSError:
            return

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


@pytest.mark.timeout(60)
def test_trace_of_real_grpcio_traffic() -> None:
    """grpcio uses the HPACK dynamic table and Huffman coding: the mirror decoder must keep up."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    def behaviour(request: bytes, context: Any) -> bytes:
        if request == b"fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad \u263a 100%\n")
        return request * 3

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "t.S", {"M": grpc.unary_unary_rpc_method_handler(behaviour)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    logger, handler = private_logger("grpcio")
    proxy = TracingProxy(port, FrameTracer("client", f"127.0.0.1:{port}", logger))
    channel = grpc.insecure_channel(f"127.0.0.1:{proxy.port}")
    try:
        call = channel.unary_unary("/t.S/M")
        assert call(b"hi", timeout=30, metadata=(("x-custom", "v"),)) == b"hihihi"
        assert call(b"x" * 70000, timeout=30) == b"x" * 210000
        with pytest.raises(grpc.RpcError) as failure:
            call(b"fail", timeout=30)
        assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
        server.stop(None)
        proxy.close()
    messages = list(handler.messages)
    sent, received = by_direction(messages)["-->"], by_direction(messages)["<--"]
    assert "PREFACE" in sent[0]
    requests = [m for m in sent if "request headers" in m]
    assert len(requests) == 3
    assert all(":path: /t.S/M" in m and "te: trailers" in m for m in requests)
    assert "x-custom: v" in requests[0]
    assert "grpc-message flag=0 length=70000" in find(sent, "DATA", "stream=3 ")
    assert "grpc-message flag=0 length=210000" in "".join(received)
    trailers_only = find(received, "HEADERS", "stream=5 ", "trailers-only")
    assert "grpc-status: 3  (INVALID_ARGUMENT)" in trailers_only
    assert "(percent-decoded: 'bad \u263a 100%\\n')" in trailers_only
    assert not any("undecodable" in m or "!!" in m or "tracer failure" in m for m in messages)
