"""Sans-IO tests of the client's HTTP/2 connection (minigrpc.http2.client): bytes in, events
and bytes out.

The server's frames are built with :mod:`minigrpc.http2.frames` and its header blocks with the hpack
library (which indexes into the dynamic table, as grpc-go and grpcio do); what the client
queues is parsed back with :func:`minigrpc.http2.frames.parse_frame`.  Each test names the rule of
RFC 9113 (or RFC 7541) it checks.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import hpack
import pytest

from minigrpc.http2 import frames
from minigrpc.http2 import streams as http2
from minigrpc.http2.client import (
    ClientHTTP2Connection,
    ConnectionTerminated,
    DataReceived,
    PeerConnectionError,
    PingAcknowledged,
    ResponseReceived,
    SettingsChanged,
    StreamEnded,
    StreamIDsExhausted,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from minigrpc.http2.frames import (
    CANCEL,
    COMPRESSION_ERROR,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    NO_ERROR,
    PROTOCOL_ERROR,
    STREAM_CLOSED,
    frame_bytes,
)

REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/pkg.Svc/M"),
    (b":authority", b"localhost"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
]
RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS = [(b"grpc-status", b"0")]
SERVER_SETTINGS = frames.settings_frame(())


def sent_frames(data: bytes) -> List[frames.Frame]:
    """Parse the client's output (after the connection preface, if present)."""
    if data.startswith(http2.CLIENT_PREFACE):
        data = data[len(http2.CLIENT_PREFACE) :]
    out = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        out.append(frames.parse_frame(data[pos : pos + 9], data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    assert pos == len(data)
    return out


def kinds(events: Sequence[Any]) -> List[type]:
    return [type(event) for event in events]


class Peer:
    """The server side of a test: an hpack encoder and the client under test."""

    def __init__(self, **kwargs: Any) -> None:
        self.client = ClientHTTP2Connection(**kwargs)
        self.client.initiate()
        self.preface = self.client.data_to_send()
        self.encoder = hpack.Encoder()
        assert kinds(self.client.receive_data(SERVER_SETTINGS)) == [SettingsChanged]
        self.client.data_to_send()  # the SETTINGS ACK

    def open(self) -> int:
        stream_id = self.client.get_next_available_stream_id()
        self.client.send_headers(stream_id, REQUEST)
        self.client.data_to_send()
        return stream_id

    def block(self, fields: Sequence[Tuple[bytes, bytes]]) -> bytes:
        return bytes(self.encoder.encode(list(fields)))

    def headers(self, stream_id: int, fields: Sequence[Tuple[bytes, bytes]],
                end_stream: bool = False) -> bytes:
        flags = frames.END_HEADERS | (frames.END_STREAM if end_stream else 0)
        return frame_bytes(frames.HEADERS, flags, stream_id, self.block(fields))

    def send(self, data: bytes) -> List[Any]:
        return self.client.receive_data(data)

    def output(self) -> List[frames.Frame]:
        return sent_frames(self.client.data_to_send())


def connection_error(events: Sequence[Any], peer: Peer, code: int) -> None:
    """The read ended in a connection error with ``code``, and GOAWAY(code) is queued."""
    assert isinstance(events[-1], PeerConnectionError), events
    assert events[-1].error_code == code
    goaways = [frame for frame in peer.output() if frame.type == frames.GOAWAY]
    assert [(frame.error_code, frame.last_stream_id) for frame in goaways] == [(code, 0)]
    assert peer.client.receive_data(frames.ping_ack(bytes(8))) == []  # nothing more is read


# -- the preface and SETTINGS (RFC 9113 §3.4, §6.5) ------------------------------------------------


def test_preface_states_our_settings_and_the_connection_window() -> None:
    client = ClientHTTP2Connection(stream_window=1 << 20, connection_window=1 << 24,
                                   max_frame_size=1 << 18)
    client.initiate()
    data = client.data_to_send()
    assert data.startswith(http2.CLIENT_PREFACE)
    settings, window = sent_frames(data)
    assert dict(settings.settings) == {
        frames.HEADER_TABLE_SIZE: 4096,
        frames.ENABLE_PUSH: 0,
        frames.INITIAL_WINDOW_SIZE: 1 << 20,
        frames.MAX_FRAME_SIZE: 1 << 18,
        frames.ENABLE_CONNECT_PROTOCOL: 0,
        frames.MAX_HEADER_LIST_SIZE: http2.CONNECTION_MAX_HEADER_LIST_SIZE,
    }
    assert (window.type, window.stream_id, window.window_increment) == (
        frames.WINDOW_UPDATE, 0, (1 << 24) - 65535
    )


def test_peer_settings_are_applied_and_acknowledged() -> None:
    peer = Peer()
    events = peer.send(frames.settings_frame((
        (frames.MAX_CONCURRENT_STREAMS, 7),
        (frames.MAX_HEADER_LIST_SIZE, 999),
        (frames.MAX_FRAME_SIZE, 20000),
    )))
    assert kinds(events) == [SettingsChanged]
    [ack] = peer.output()
    assert (ack.type, ack.flags) == (frames.SETTINGS, frames.ACK)
    assert peer.client.peer_max_concurrent_streams == 7
    assert peer.client.peer_max_header_list_size == 999
    assert peer.client.max_outbound_frame_size == 20000
    # A SETTINGS ACK from the peer needs nothing.
    assert peer.send(frames.settings_ack()) == [] and peer.output() == []


@pytest.mark.parametrize("setting,value,code", [
    (frames.ENABLE_PUSH, 2, PROTOCOL_ERROR),
    (frames.MAX_FRAME_SIZE, 16383, PROTOCOL_ERROR),
    (frames.MAX_FRAME_SIZE, 2**24, PROTOCOL_ERROR),
    (frames.INITIAL_WINDOW_SIZE, 2**31, FLOW_CONTROL_ERROR),
])
def test_invalid_settings_are_connection_errors(setting: int, value: int, code: int) -> None:
    peer = Peer()
    connection_error(peer.send(frames.settings_frame(((setting, value),))), peer, code)


def test_peer_frame_size_splits_headers_into_continuation_and_limits_data() -> None:
    peer = Peer()
    big = [*REQUEST, (b"x-big", b"v" * 40000)]
    stream_id = peer.client.get_next_available_stream_id()
    peer.client.send_headers(stream_id, big)
    sent = peer.output()
    assert [frame.type for frame in sent] == [
        frames.HEADERS, frames.CONTINUATION, frames.CONTINUATION
    ]
    assert [frame.flags & frames.END_HEADERS for frame in sent] == [0, 0, frames.END_HEADERS]
    assert all(len(frame.data) <= 16384 for frame in sent)
    assert hpack.Decoder().decode(b"".join(frame.data for frame in sent), raw=True)[-1] == (
        b"x-big", b"v" * 40000
    )
    assert peer.client.max_outbound_frame_size == 16384


def test_a_lower_header_table_size_is_announced_in_the_next_block() -> None:
    """RFC 7541 §4.2: the encoder signals the change at the start of the next block."""
    peer = Peer()
    peer.open()  # remembered block, before the change
    peer.send(frames.settings_frame(((frames.HEADER_TABLE_SIZE, 0),)))
    peer.output()
    peer.client.send_headers(peer.client.get_next_available_stream_id(), REQUEST)
    [headers] = peer.output()
    assert headers.data[0] == 0x20  # 001xxxxx with a size of 0 (RFC 7541 §6.3)
    peer.client.send_headers(peer.client.get_next_available_stream_id(), REQUEST)
    [again] = peer.output()
    assert again.data[0] & 0xE0 != 0x20 and again.data == headers.data[1:]


# -- streams (RFC 9113 §5.1) -----------------------------------------------------------------------


def test_streams_are_odd_and_increasing_and_run_out() -> None:
    peer = Peer()
    assert [peer.open() for _ in range(3)] == [1, 3, 5]
    with pytest.raises(ValueError):
        peer.client.send_headers(5, REQUEST)
    peer.client.next_stream_id = 2**31 + 1
    with pytest.raises(StreamIDsExhausted):
        peer.client.get_next_available_stream_id()


def test_response_data_trailers_and_the_stream_closes() -> None:
    peer = Peer()
    sid = peer.open()
    peer.client.send_data(sid, b"abc", end_stream=True)
    [data] = peer.output()
    assert (data.type, data.data, data.flags) == (frames.DATA, b"abc", frames.END_STREAM)
    events = peer.send(
        peer.headers(sid, RESPONSE) + frames.data_frame(sid, b"xyz", False)
        + peer.headers(sid, TRAILERS, end_stream=True)
    )
    assert kinds(events) == [ResponseReceived, DataReceived, TrailersReceived, StreamEnded]
    assert events[0].headers == RESPONSE and not events[0].stream_ended
    assert (events[1].data, events[1].flow_controlled_length) == (b"xyz", 3)
    assert events[2].headers == TRAILERS
    assert sid not in peer.client.streams and peer.client.open_outbound_streams == 0


def test_trailers_only_response() -> None:
    peer = Peer()
    sid = peer.open()
    events = peer.send(peer.headers(sid, RESPONSE + TRAILERS, end_stream=True))
    assert kinds(events) == [ResponseReceived, StreamEnded]
    assert events[0].stream_ended


def test_informational_responses_are_skipped() -> None:
    """RFC 9110 §15.2: a 1xx response precedes the final one."""
    peer = Peer()
    sid = peer.open()
    events = peer.send(peer.headers(sid, [(b":status", b"100")]) + peer.headers(sid, RESPONSE))
    assert kinds(events) == [ResponseReceived] and events[0].headers == RESPONSE


def test_trailers_without_end_stream_are_a_connection_error() -> None:
    peer = Peer()
    sid = peer.open()
    events = peer.send(peer.headers(sid, RESPONSE) + peer.headers(sid, TRAILERS))
    assert kinds(events)[0] is ResponseReceived  # what came before the error is reported
    connection_error(events, peer, PROTOCOL_ERROR)


@pytest.mark.parametrize("stream_id", [2, 7])
@pytest.mark.parametrize("kind", ["DATA", "HEADERS", "RST_STREAM", "WINDOW_UPDATE"])
def test_frames_on_idle_streams_are_connection_errors(kind: str, stream_id: int) -> None:
    """RFC 9113 §5.1, idle: streams the server would have to open (even: push, refused) or
    that we never opened."""
    peer = Peer()
    peer.open()  # stream 1
    frame = {
        "DATA": frames.data_frame(stream_id, b"x", False),
        "HEADERS": peer.headers(stream_id, RESPONSE),
        "RST_STREAM": frames.rst_stream_frame(stream_id, CANCEL),
        "WINDOW_UPDATE": frames.window_update_frame(stream_id, 10),
    }[kind]
    connection_error(peer.send(frame), peer, PROTOCOL_ERROR)


def test_frames_after_our_reset_are_ignored_but_their_blocks_decoded() -> None:
    """RFC 9113 §5.1, closed: frames after our RST_STREAM are ignored; a header block is still
    decoded, or the dynamic table would go out of step (RFC 7541 §2.2)."""
    peer = Peer()
    first = peer.open()
    second = peer.open()
    peer.client.reset_stream(first, CANCEL)
    [rst] = peer.output()
    assert (rst.type, rst.stream_id, rst.error_code) == (frames.RST_STREAM, first, CANCEL)
    late = [(b":status", b"200"), (b"x-new", b"indexed-now")]
    events = peer.send(
        peer.headers(first, late) + frames.data_frame(first, b"late", True)
        + frames.window_update_frame(first, 5) + frames.rst_stream_frame(first, CANCEL)
        + peer.headers(second, late)  # refers to the entry the ignored block added
    )
    assert kinds(events) == [ResponseReceived]
    assert events[0].stream_id == second and events[0].headers == late
    assert peer.output() == []


def test_frames_after_the_peers_reset_are_stream_errors() -> None:
    """RFC 9113 §5.1, closed: after a RST_STREAM, frames are a stream error STREAM_CLOSED."""
    peer = Peer()
    sid = peer.open()
    events = peer.send(frames.rst_stream_frame(sid, CANCEL))
    assert kinds(events) == [StreamReset]
    assert (events[0].error_code, events[0].remote_reset) == (CANCEL, True)
    assert peer.send(frames.data_frame(sid, b"x", False)) == []
    [rst] = peer.output()
    assert (rst.type, rst.stream_id, rst.error_code) == (frames.RST_STREAM, sid, STREAM_CLOSED)


def test_data_after_the_stream_ended_is_a_connection_error() -> None:
    """RFC 9113 §5.1, closed: frames after END_STREAM are a connection error STREAM_CLOSED."""
    peer = Peer()
    sid = peer.open()
    peer.client.end_stream(sid)
    peer.send(peer.headers(sid, RESPONSE + TRAILERS, end_stream=True))
    peer.output()
    connection_error(peer.send(frames.data_frame(sid, b"x", False)), peer, STREAM_CLOSED)


def test_data_on_a_half_closed_remote_stream_is_a_stream_error() -> None:
    """RFC 9113 §5.1, half-closed (remote): the stream is reset with STREAM_CLOSED."""
    peer = Peer()
    sid = peer.open()  # our request is still open
    events = peer.send(
        peer.headers(sid, RESPONSE + TRAILERS, end_stream=True)
        + frames.data_frame(sid, b"x", False)
    )
    assert kinds(events) == [ResponseReceived, StreamEnded, StreamReset]
    assert (events[2].error_code, events[2].remote_reset) == (STREAM_CLOSED, False)
    [rst] = peer.output()
    assert (rst.stream_id, rst.error_code) == (sid, STREAM_CLOSED)


def test_rst_stream_and_window_update_on_a_stream_that_ended_are_ignored() -> None:
    peer = Peer()
    sid = peer.open()
    peer.client.end_stream(sid)
    peer.send(peer.headers(sid, RESPONSE + TRAILERS, end_stream=True))
    peer.output()
    assert peer.send(
        frames.rst_stream_frame(sid, NO_ERROR) + frames.window_update_frame(sid, 1)
    ) == []
    assert peer.output() == []


# -- header blocks (RFC 9113 §4.3, §6.2, §6.10; RFC 7541) ------------------------------------------


def test_headers_and_continuation_are_assembled() -> None:
    peer = Peer()
    sid = peer.open()
    block = peer.block([*RESPONSE, (b"x-long", b"y" * 300)])
    events = peer.send(
        frame_bytes(frames.HEADERS, 0, sid, block[:10])
        + frame_bytes(frames.CONTINUATION, 0, sid, block[10:100])
        + frame_bytes(frames.CONTINUATION, frames.END_HEADERS, sid, block[100:])
    )
    assert kinds(events) == [ResponseReceived]
    assert events[0].headers[-1] == (b"x-long", b"y" * 300)


@pytest.mark.parametrize("between", [
    frames.ping_ack(bytes(8)),
    frames.data_frame(1, b"x", False),
    frame_bytes(frames.CONTINUATION, frames.END_HEADERS, 3, b""),  # another stream
    frame_bytes(0x20, 0, 0, b"unknown"),
])
def test_nothing_may_interleave_with_a_header_block(between: bytes) -> None:
    peer = Peer()
    sid = peer.open()
    peer.open()
    block = peer.block(RESPONSE)
    events = peer.send(frame_bytes(frames.HEADERS, 0, sid, block[:2]) + between)
    connection_error(events, peer, PROTOCOL_ERROR)


def test_continuation_without_a_block_is_a_connection_error() -> None:
    peer = Peer()
    sid = peer.open()
    events = peer.send(frame_bytes(frames.CONTINUATION, frames.END_HEADERS, sid, b""))
    connection_error(events, peer, PROTOCOL_ERROR)


def test_padding_and_priority_fields_are_removed() -> None:
    peer = Peer()
    sid = peer.open()
    block = peer.block(RESPONSE)
    padded_headers = frame_bytes(
        frames.HEADERS, frames.END_HEADERS | frames.PADDED | frames.PRIORITY_FLAG, sid,
        bytes((3,)) + bytes(5) + block + bytes(3),
    )
    padded_data = frame_bytes(frames.DATA, frames.PADDED, sid, bytes((4,)) + b"msg" + bytes(4))
    events = peer.send(padded_headers + padded_data)
    assert kinds(events) == [ResponseReceived, DataReceived]
    assert events[0].headers == RESPONSE
    # Padding counts against the windows (RFC 9113 §6.9.1).
    assert (events[1].data, events[1].flow_controlled_length) == (b"msg", 8)


def test_a_broken_block_is_a_compression_error() -> None:
    peer = Peer()
    sid = peer.open()
    events = peer.send(frame_bytes(frames.HEADERS, frames.END_HEADERS, sid, b"\xff\xff\xff\xff"))
    connection_error(events, peer, COMPRESSION_ERROR)


def test_a_header_list_over_our_limit_is_a_connection_error() -> None:
    """RFC 9113 §6.5.2: over the MAX_HEADER_LIST_SIZE we advertised."""
    peer = Peer(max_header_list_size=1000)
    sid = peer.open()
    events = peer.send(peer.headers(sid, [*RESPONSE, (b"x-big", b"v" * 1000)]))
    connection_error(events, peer, PROTOCOL_ERROR)


def test_push_promise_is_refused() -> None:
    """RFC 9113 §8.4: we sent ENABLE_PUSH 0."""
    peer = Peer()
    sid = peer.open()
    payload = (2).to_bytes(4, "big") + peer.block(REQUEST)
    events = peer.send(frame_bytes(frames.PUSH_PROMISE, frames.END_HEADERS, sid, payload))
    connection_error(events, peer, PROTOCOL_ERROR)


def test_priority_and_unknown_frames_are_ignored() -> None:
    """RFC 9113 §5.3.2, §5.5."""
    peer = Peer()
    sid = peer.open()
    events = peer.send(
        frame_bytes(frames.PRIORITY, 0, sid, bytes(5))
        + frame_bytes(frames.PRIORITY, 0, 99, bytes(5))
        + frame_bytes(0x42, 0xFF, sid, b"whatever")
        + frame_bytes(0x42, 0, 0, b"")
    )
    assert events == [] and peer.output() == []


def test_frames_split_over_reads_are_put_together() -> None:
    peer = Peer()
    sid = peer.open()
    data = peer.headers(sid, RESPONSE) + frames.data_frame(sid, b"hello", True)
    events: List[Any] = []
    for at in range(len(data)):
        events.extend(peer.send(data[at : at + 1]))
    assert kinds(events) == [ResponseReceived, DataReceived, StreamEnded]


# -- PING and GOAWAY (RFC 9113 §6.7, §6.8) ---------------------------------------------------------


def test_ping_is_answered_and_a_ping_ack_is_not() -> None:
    peer = Peer()
    assert peer.send(frames.frame_bytes(frames.PING, 0, 0, b"12345678")) == []
    [ack] = peer.output()
    assert (ack.type, ack.flags, ack.data) == (frames.PING, frames.ACK, b"12345678")
    [acknowledged] = peer.send(frames.ping_ack(b"12345678"))
    assert isinstance(acknowledged, PingAcknowledged) and acknowledged.data == b"12345678"
    assert peer.output() == []


def test_goaway_is_reported_and_streams_below_it_go_on() -> None:
    peer = Peer()
    sid = peer.open()
    events = peer.send(frames.goaway_frame(sid, NO_ERROR, b"bye") + peer.headers(sid, RESPONSE))
    assert kinds(events) == [ConnectionTerminated, ResponseReceived]
    assert (events[0].last_stream_id, events[0].error_code, events[0].additional_data) == (
        sid, NO_ERROR, b"bye"
    )


# -- flow control (RFC 9113 §5.2, §6.9) ------------------------------------------------------------


def test_sending_is_limited_by_the_peers_windows() -> None:
    peer = Peer()
    sid = peer.open()
    assert peer.client.local_flow_control_window(sid) == 65535
    peer.client.send_data(sid, b"x" * 16384)
    peer.output()
    assert peer.client.local_flow_control_window(sid) == 65535 - 16384
    events = peer.send(frames.window_update_frame(sid, 100) + frames.window_update_frame(0, 50))
    assert kinds(events) == [WindowUpdated, WindowUpdated]
    assert [event.stream_id for event in events] == [sid, 0]
    # The smaller of the stream's and the connection's windows.
    assert peer.client.local_flow_control_window(sid) == 65535 - 16384 + 50


def test_initial_window_size_changes_move_open_streams_windows() -> None:
    """RFC 9113 §6.9.2: by the difference, even below zero."""
    peer = Peer()
    sid = peer.open()
    peer.client.send_data(sid, b"x" * 1000)
    peer.send(frames.window_update_frame(0, 10**6))
    peer.send(frames.settings_frame(((frames.INITIAL_WINDOW_SIZE, 500),)))
    assert peer.client.streams[sid].outbound_window == 500 - 1000
    assert peer.client.local_flow_control_window(sid) < 0
    peer.send(frames.settings_frame(((frames.INITIAL_WINDOW_SIZE, 70000),)))
    assert peer.client.local_flow_control_window(sid) == 70000 - 1000
    fresh = peer.open()
    assert peer.client.local_flow_control_window(fresh) == 70000


def test_an_initial_window_size_that_overflows_a_stream_window_is_a_connection_error() -> None:
    peer = Peer()
    sid = peer.open()
    peer.send(frames.window_update_frame(sid, 2**31 - 1 - 65535))
    events = peer.send(frames.settings_frame(((frames.INITIAL_WINDOW_SIZE, 65536),)))
    connection_error(events, peer, FLOW_CONTROL_ERROR)


def test_a_connection_window_overflow_is_a_connection_error() -> None:
    """RFC 9113 §6.9.1."""
    peer = Peer()
    events = peer.send(frames.window_update_frame(0, 2**31 - 1 - 65535 + 1))
    connection_error(events, peer, FLOW_CONTROL_ERROR)


def test_a_stream_window_overflow_is_a_stream_error() -> None:
    """RFC 9113 §6.9.1: the stream is reset with FLOW_CONTROL_ERROR; the connection lives."""
    peer = Peer()
    sid = peer.open()
    other = peer.open()
    events = peer.send(frames.window_update_frame(sid, 2**31 - 1 - 65535 + 1))
    assert kinds(events) == [StreamReset]
    assert (events[0].error_code, events[0].remote_reset) == (FLOW_CONTROL_ERROR, False)
    [rst] = peer.output()
    assert (rst.type, rst.stream_id, rst.error_code) == (
        frames.RST_STREAM, sid, FLOW_CONTROL_ERROR
    )
    assert kinds(peer.send(peer.headers(other, RESPONSE))) == [ResponseReceived]


@pytest.mark.parametrize("on_stream", [True, False])
def test_data_beyond_our_windows_is_a_flow_control_error(on_stream: bool) -> None:
    stream_window, connection_window = (1000, 65535) if on_stream else (1 << 20, 65535)
    peer = Peer(stream_window=stream_window, connection_window=connection_window,
                max_frame_size=16384)
    sid = peer.open()
    frame = frames.data_frame(sid, b"x" * 1001, False) if on_stream else b"".join(
        frames.data_frame(sid, b"x" * 16384, False) for _ in range(4)
    ) + frames.data_frame(sid, b"x" * 4, False)
    events = peer.send(frame)
    connection_error(events, peer, FLOW_CONTROL_ERROR)


def test_consumed_data_is_returned_once_half_a_window_is_used() -> None:
    peer = Peer(stream_window=1000, connection_window=100_000)
    sid = peer.open()
    peer.send(peer.headers(sid, RESPONSE))
    peer.send(frames.data_frame(sid, b"x" * 400, False))
    peer.client.acknowledge_received_data(400, sid)
    assert peer.output() == []  # 600 of 1000 left: not yet
    peer.send(frames.data_frame(sid, b"x" * 200, False))
    peer.client.acknowledge_received_data(200, sid)
    [update] = peer.output()
    assert (update.stream_id, update.window_increment) == (sid, 600)
    assert peer.client.streams[sid].inbound_flow_control_window == 1000
    # The connection's half is 50 000 bytes: 49 800 consumed are not yet, 50 400 are.
    for _ in range(82):
        peer.send(frames.data_frame(sid, b"x" * 600, False))
        peer.client.acknowledge_received_data(600, sid)
    assert 0 not in [frame.stream_id for frame in peer.output()]
    peer.send(frames.data_frame(sid, b"x" * 600, False))
    peer.client.acknowledge_received_data(600, sid)
    updates = [(frame.stream_id, frame.window_increment) for frame in peer.output()]
    assert updates == [(0, 50_400), (sid, 600)]


def test_window_of_ignored_data_still_returns_to_the_connection() -> None:
    """RFC 9113 §6.9: DATA on a stream we reset still counts against the connection window,
    which must come back."""
    peer = Peer(connection_window=65535)
    sid = peer.open()
    peer.client.reset_stream(sid, CANCEL)
    peer.output()
    for _ in range(3):
        peer.send(frames.data_frame(sid, b"x" * 16000, False))
    updates = [(frame.stream_id, frame.window_increment) for frame in peer.output()]
    assert updates == [(0, 48000)]
    assert peer.client.inbound_flow_control_window == 65535


def test_granted_window_is_sent_at_once() -> None:
    peer = Peer()
    sid = peer.open()
    peer.client.increment_flow_control_window(1000)
    peer.client.increment_flow_control_window(2000, sid)
    peer.client.increment_flow_control_window(2**31, sid)  # would overflow: not made
    assert [(f.stream_id, f.window_increment) for f in peer.output()] == [(0, 1000), (sid, 2000)]


# -- frame headers, checked before the body arrives (RFC 9113 §3.4, §4.2) --------------------------


def test_the_servers_first_frame_must_be_settings() -> None:
    """An HTTP/1.1 answer reads as a 4.7 MB frame header: refused on its 9 octets."""
    client = ClientHTTP2Connection()
    client.initiate()
    client.data_to_send()
    events = client.receive_data(b"HTTP/1.1 400 Bad Request\r\n")
    assert kinds(events) == [PeerConnectionError]
    assert events[0].error_code == PROTOCOL_ERROR
    assert "first frame received is not a SETTINGS frame (b'HTTP/1.1 ')" in events[0].reason
    [goaway] = sent_frames(client.data_to_send())
    assert (goaway.type, goaway.error_code) == (frames.GOAWAY, PROTOCOL_ERROR)


def test_a_frame_over_our_max_frame_size_is_refused_on_its_header() -> None:
    peer = Peer(max_frame_size=16384)
    sid = peer.open()
    header = frames.data_frame(sid, b"x" * 16385, False)[:9]
    connection_error(peer.send(header), peer, FRAME_SIZE_ERROR)


def test_a_growing_header_block_is_refused_before_it_is_whole() -> None:
    """A CONTINUATION flood (CVE-2024-27316): the block's encoded size is bounded as it grows,
    and the frame that would pass the bound is refused on its header."""
    peer = Peer()
    sid = peer.open()
    piece = b"\x00" * 16384
    whole = http2.MAX_HEADER_BLOCK // len(piece)
    assert peer.send(frame_bytes(frames.HEADERS, 0, sid, piece)) == []
    for _ in range(whole - 1):
        assert peer.send(frame_bytes(frames.CONTINUATION, 0, sid, piece)) == []
    events = peer.send(frame_bytes(frames.CONTINUATION, 0, sid, piece)[:9])
    connection_error(events, peer, ENHANCE_YOUR_CALM)


def test_a_large_frame_over_many_reads_is_read_whole() -> None:
    peer = Peer()
    sid = peer.open()
    payload = bytes(range(256)) * 1000
    data = peer.headers(sid, RESPONSE) + frames.data_frame(sid, payload, True)
    events: List[Any] = []
    for at in range(0, len(data), 1000):
        events.extend(peer.send(data[at : at + 1000]))
    assert kinds(events) == [ResponseReceived, DataReceived, StreamEnded]
    assert events[1].data == payload


@pytest.mark.parametrize("increment", [b"\x00\x00\x00\x00", b"\x80\x00\x00\x00"])
@pytest.mark.parametrize("stream_id", [0, 1])
def test_a_window_update_of_zero_is_a_protocol_error(increment: bytes, stream_id: int) -> None:
    """RFC 9113 §6.9: a connection error on stream 0, a stream error on a stream (the
    reserved bit is not part of the increment, RFC 9113 §4.1)."""
    peer = Peer()
    peer.open()
    events = peer.send(frame_bytes(frames.WINDOW_UPDATE, 0, stream_id, increment))
    if not stream_id:
        connection_error(events, peer, PROTOCOL_ERROR)
        return
    [reset] = events
    assert isinstance(reset, StreamReset) and (reset.stream_id, reset.error_code) == (
        1, PROTOCOL_ERROR
    ) and not reset.remote_reset
    [frame] = peer.output()
    assert (frame.type, frame.stream_id) == (frames.RST_STREAM, 1)
    assert 1 not in peer.client.streams


def test_malformed_pings_are_frame_size_or_protocol_errors() -> None:
    """RFC 9113 §6.7: 8 octets, on stream 0."""
    peer = Peer()
    connection_error(peer.send(frame_bytes(frames.PING, 0, 0, bytes(7))), peer, FRAME_SIZE_ERROR)
    peer = Peer()
    connection_error(peer.send(frame_bytes(frames.PING, 0, 1, bytes(8))), peer, PROTOCOL_ERROR)


def test_a_block_that_changes_the_dynamic_table_is_decoded_afresh() -> None:
    """RFC 7541 §2.2: a block made of references decodes differently once the table changed;
    the same bytes must not be answered from memory then."""
    peer = Peer()
    first = peer.open()
    second = peer.open()
    # Two entries, then a reference to the newest (index 62): its meaning depends on the table.
    encoder = hpack.Encoder()
    warmup = bytes(encoder.encode([(b":status", b"200"), (b"x-a", b"1")]))
    reference = b"\x88\xbe"  # :status 200 (static 8), dynamic index 62
    assert kinds(peer.send(frame_bytes(frames.HEADERS, frames.END_HEADERS, first, warmup))) == [
        ResponseReceived
    ]
    events = peer.send(frame_bytes(frames.HEADERS, frames.END_HEADERS, second, reference))
    assert events[0].headers == [(b":status", b"200"), (b"x-a", b"1")]
    third = peer.open()
    # The server's table moves on: x-b is added, and is index 62 now.
    changed = bytes(encoder.encode([(b":status", b"200"), (b"x-b", b"2")]))
    events = peer.send(frame_bytes(frames.HEADERS, frames.END_HEADERS, third, changed))
    assert events[0].headers == [(b":status", b"200"), (b"x-b", b"2")]
    fourth = peer.open()
    events = peer.send(frame_bytes(frames.HEADERS, frames.END_HEADERS, fourth, reference))
    assert events[0].headers == [(b":status", b"200"), (b"x-b", b"2")]
