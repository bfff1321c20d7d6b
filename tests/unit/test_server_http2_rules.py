"""The HTTP/2 rules a server connection keeps (RFC 9113), pinned frame by frame.

Each case writes raw frames into a :class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection`
whose handshake is done and reads back what it answers: nothing, an RST_STREAM with a code (a stream
error, RFC 9113 §5.4.2; the connection goes on) or a GOAWAY with a code (a connection error,
RFC 9113 §5.4.1).  They hold whatever runs the connection underneath: the rules of stream
states (RFC 9113 §5.1), stream identifiers (RFC 9113 §5.1.1), flow control (RFC 9113 §6.9),
SETTINGS (RFC 9113 §6.5), padding (RFC 9113 §6.1), header blocks (RFC 9113 §6.10), PRIORITY
(RFC 9113 §5.3.1) and content-length (RFC 9113 §8.1.1), which h2spec checks end to end when its
binary is at hand (tests/interop/test_h2spec.py).  Where the RFC asks for a stream error,
h2spec accepts a connection error too; these cases do not: ending every call on the connection
for one stream's fault is what a gRPC server must not do.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import hpack
import hyperframe.frame
import pytest

from minigrpc.protocol import wire
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.server_protocol import (
    CallStarted,
    CallTerminated,
    RequestReady,
    ServerSettings,
)
from tests.unit.test_server_protocol import Pair, _parse, _raw_frame

NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
COMPRESSION_ERROR = 0x9

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = (
    0, 1, 2, 3, 4, 5, 6, 7, 8
)
CONTINUATION = 9
END_STREAM, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x4, 0x8, 0x20

REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/svc/Method"),
    (b":authority", b"localhost"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
]
MESSAGE = wire.encode_message(b"hello")


def _settings(setting: int, value: int) -> bytes:
    """A SETTINGS frame with one setting (RFC 9113 §6.5.1)."""
    return _raw_frame(SETTINGS, 0, 0, setting.to_bytes(2, "big") + value.to_bytes(4, "big"))


class Answer:
    """What the server wrote back for one read: its RST_STREAMs, GOAWAY and other frames."""

    def __init__(self, data: bytes) -> None:
        self.frames = _parse(data)
        self.resets: Dict[int, int] = {
            f.stream_id: f.error_code
            for f in self.frames
            if isinstance(f, hyperframe.frame.RstStreamFrame)
        }
        goaways = [f for f in self.frames if isinstance(f, hyperframe.frame.GoAwayFrame)]
        self.goaway: Optional[int] = goaways[0].error_code if goaways else None

    def of(self, kind: type) -> List[hyperframe.frame.Frame]:
        return [f for f in self.frames if isinstance(f, kind)]


class Raw:
    """A ServerGrpcConnection past its handshake, fed raw frames (one HPACK encoder for the blocks,
    so the server's dynamic table follows ours, RFC 7541 §2.2)."""

    def __init__(self, settings: Optional[ServerSettings] = None) -> None:
        self.pair = Pair(settings)
        self.server = self.pair.server
        self.server.data_to_send()
        self.encoder = hpack.Encoder()
        self.events: List[object] = []

    def block(self, fields: List[Tuple[bytes, bytes]]) -> bytes:
        return self.encoder.encode(fields)

    def headers(self, stream_id: int, fields: List[Tuple[bytes, bytes]] = REQUEST,
                flags: int = END_HEADERS) -> bytes:
        return _raw_frame(HEADERS, flags, stream_id, self.block(fields))

    def send(self, data: bytes) -> Answer:
        self.events.extend(self.server.receive_data(data))
        return Answer(self.server.data_to_send())

    def started(self) -> List[int]:
        return [e.stream_id for e in self.events if isinstance(e, CallStarted)]


def _request(raw: Raw, stream_id: int, end: bool = True) -> bytes:
    return raw.headers(stream_id) + _raw_frame(DATA, END_STREAM if end else 0, stream_id, MESSAGE)


def _still_serving(raw: Raw, stream_id: int) -> None:
    """The connection survived: a new request on ``stream_id`` starts a call."""
    answer = raw.send(_request(raw, stream_id))
    assert answer.goaway is None and stream_id in raw.started(), answer.frames


# -- stream identifiers and states (RFC 9113 §5.1, §5.1.1) ---------------------------------------


def test_headers_on_an_even_stream_is_a_connection_error() -> None:
    raw = Raw()
    assert raw.send(_request(raw, 2)).goaway == PROTOCOL_ERROR
    assert raw.server.closed


def test_a_stream_id_lower_than_one_already_opened_is_a_connection_error() -> None:
    raw = Raw()
    raw.send(_request(raw, 5))
    assert raw.send(_request(raw, 3)).goaway == PROTOCOL_ERROR


@pytest.mark.parametrize(
    "frame",
    [
        _raw_frame(DATA, 0, 1, MESSAGE),
        _raw_frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")),
        _raw_frame(WINDOW_UPDATE, 0, 1, (100).to_bytes(4, "big")),
        _raw_frame(CONTINUATION, END_HEADERS, 1, b"\x82"),
    ],
    ids=["DATA", "RST_STREAM", "WINDOW_UPDATE", "CONTINUATION"],
)
def test_frames_on_an_idle_stream_are_a_connection_error(frame: bytes) -> None:
    """RFC 9113 §5.1, "idle": only HEADERS and PRIORITY may arrive on an idle stream."""
    raw = Raw()
    assert raw.send(frame).goaway == PROTOCOL_ERROR


def test_priority_on_an_idle_stream_is_accepted_and_the_stream_opens_later() -> None:
    raw = Raw()
    answer = raw.send(_raw_frame(PRIORITY, 0, 3, (0).to_bytes(4, "big") + b"\x10"))
    assert answer.goaway is None and not answer.resets
    _still_serving(raw, 3)


def test_data_after_the_clients_end_stream_is_stream_closed() -> None:
    """RFC 9113 §5.1, "half-closed (remote)": a frame other than WINDOW_UPDATE, PRIORITY or
    RST_STREAM is a stream error STREAM_CLOSED (the call is held open by its handler here)."""
    raw = Raw()
    raw.send(_request(raw, 1))
    answer = raw.send(_raw_frame(DATA, 0, 1, MESSAGE))
    assert answer.resets.get(1) == STREAM_CLOSED or answer.goaway == STREAM_CLOSED
    if answer.goaway is None:
        _still_serving(raw, 3)


def test_headers_on_a_stream_that_ended_both_ways_is_stream_closed() -> None:
    """RFC 9113 §5.1, "closed": HEADERS after both ends were sent is an error STREAM_CLOSED."""
    raw = Raw()
    raw.send(_request(raw, 1))
    raw.server.finish_call(1, StatusCode.OK)
    raw.server.data_to_send()
    answer = raw.send(raw.headers(1, flags=END_HEADERS | END_STREAM))
    assert answer.goaway == STREAM_CLOSED or answer.resets.get(1) == STREAM_CLOSED


def test_frames_on_a_stream_the_server_reset_are_ignored() -> None:
    """RFC 9113 §5.1, "closed": after we sent RST_STREAM, frames the client sent before it
    read it are ignored."""
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    raw.server.cancel_call(1)
    assert Answer(raw.server.data_to_send()).resets == {1: 0x8}
    answer = raw.send(_raw_frame(DATA, END_STREAM, 1, MESSAGE)
                      + _raw_frame(WINDOW_UPDATE, 0, 1, (10).to_bytes(4, "big")))
    assert answer.goaway is None and not answer.resets
    _still_serving(raw, 3)


def test_rst_stream_from_the_client_ends_the_call_and_not_the_connection() -> None:
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(_raw_frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))
    assert answer.goaway is None
    assert [e.stream_id for e in raw.events if isinstance(e, CallTerminated)] == [1]
    _still_serving(raw, 3)


# -- PRIORITY (RFC 9113 §5.3.1, §6.3) ------------------------------------------------------------


def test_a_priority_frame_depending_on_its_own_stream_is_a_stream_error() -> None:
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(_raw_frame(PRIORITY, 0, 1, (1).to_bytes(4, "big") + b"\x10"))
    assert answer.resets == {1: PROTOCOL_ERROR} and answer.goaway is None
    _still_serving(raw, 3)


def test_headers_depending_on_their_own_stream_are_a_stream_error() -> None:
    raw = Raw()
    fields = (1).to_bytes(4, "big") + b"\x10" + raw.block(REQUEST)
    answer = raw.send(_raw_frame(HEADERS, END_HEADERS | PRIORITY_FLAG, 1, fields))
    assert answer.resets == {1: PROTOCOL_ERROR} and answer.goaway is None
    _still_serving(raw, 3)


def test_a_priority_frame_of_the_wrong_length_is_a_stream_error() -> None:
    """RFC 9113 §6.3: a PRIORITY frame of other than 5 octets is a stream error
    FRAME_SIZE_ERROR."""
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(_raw_frame(PRIORITY, 0, 1, bytes(4)))
    assert answer.resets.get(1) == FRAME_SIZE_ERROR or answer.goaway == FRAME_SIZE_ERROR


# -- flow control (RFC 9113 §6.9) ----------------------------------------------------------------


def test_a_zero_window_update_on_a_stream_is_a_stream_error() -> None:
    """RFC 9113 §6.9: an increment of 0 on a stream is a stream error PROTOCOL_ERROR (on
    stream 0 a connection error, test_server_protocol)."""
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(_raw_frame(WINDOW_UPDATE, 0, 1, bytes(4)))
    assert answer.resets == {1: PROTOCOL_ERROR} and answer.goaway is None
    _still_serving(raw, 3)


def test_a_stream_window_past_2_31_is_a_stream_error() -> None:
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(_raw_frame(WINDOW_UPDATE, 0, 1, (2**31 - 1).to_bytes(4, "big")))
    assert answer.resets == {1: FLOW_CONTROL_ERROR} and answer.goaway is None
    _still_serving(raw, 3)


def test_data_beyond_the_stream_window_is_a_flow_control_error() -> None:
    """RFC 9113 §6.9.1: a sender must not exceed the window it was given; DATA beyond it is a
    FLOW_CONTROL_ERROR (of the stream or the connection). One read, so that no WINDOW_UPDATE
    of ours could have widened it."""
    window = 65535
    raw = Raw(ServerSettings(initial_window_size=window))
    prefix = b"\x00" + (window * 2).to_bytes(4, "big")
    body = prefix + bytes(window + 1 - len(prefix))
    read = raw.headers(1)
    for at in range(0, len(body), 16384):
        read += _raw_frame(DATA, 0, 1, body[at : at + 16384])
    answer = raw.send(read)
    assert answer.goaway == FLOW_CONTROL_ERROR or answer.resets.get(1) == FLOW_CONTROL_ERROR


def test_data_within_the_stream_window_is_accepted() -> None:
    window = 65535
    raw = Raw(ServerSettings(initial_window_size=window))
    prefix = b"\x00" + (window * 2).to_bytes(4, "big")
    body = prefix + bytes(window - len(prefix))
    read = raw.headers(1)
    for at in range(0, len(body), 16384):
        read += _raw_frame(DATA, 0, 1, body[at : at + 16384])
    answer = raw.send(read)
    assert answer.goaway is None and not answer.resets


def test_a_larger_initial_window_size_releases_a_blocked_response() -> None:
    """RFC 9113 §6.9.2: a new SETTINGS_INITIAL_WINDOW_SIZE moves every open stream's window by
    the difference; a response waiting for window goes on."""
    raw = Raw()
    raw.send(_settings(4, 10))
    raw.send(_request(raw, 1))
    raw.server.finish_call(1, StatusCode.OK, message=bytes(100))
    first = Answer(raw.server.data_to_send())
    assert sum(len(f.data) for f in first.of(hyperframe.frame.DataFrame)) == 10
    answer = raw.send(_settings(4, 1000))
    data = answer.of(hyperframe.frame.DataFrame)
    assert sum(len(f.data) for f in data) == len(wire.encode_message(bytes(100))) - 10
    assert answer.of(hyperframe.frame.HeadersFrame)  # the trailers follow
    assert any("ACK" in f.flags for f in answer.of(hyperframe.frame.SettingsFrame))


def test_an_initial_window_size_past_2_31_is_a_connection_error() -> None:
    raw = Raw()
    answer = raw.send(_settings(4, 2**31))
    assert answer.goaway == FLOW_CONTROL_ERROR


# -- SETTINGS (RFC 9113 §6.5) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (_raw_frame(SETTINGS, 0, 0, bytes(5)), FRAME_SIZE_ERROR),  # not a multiple of 6
        (_raw_frame(SETTINGS, 0, 1, b""), PROTOCOL_ERROR),  # on a stream
        (_settings(2, 2),
         PROTOCOL_ERROR),  # ENABLE_PUSH other than 0 or 1
        (_settings(5, 16383),
         PROTOCOL_ERROR),  # MAX_FRAME_SIZE below 2^14
    ],
    ids=["length", "on-a-stream", "enable-push", "max-frame-size"],
)
def test_malformed_settings_are_connection_errors(frame: bytes, code: int) -> None:
    raw = Raw()
    assert raw.send(frame).goaway == code


def test_a_settings_ack_with_a_payload_is_a_frame_size_error() -> None:
    """RFC 9113 §6.5: a SETTINGS frame with ACK set and a payload is a connection error
    FRAME_SIZE_ERROR."""
    raw = Raw()
    assert raw.send(_raw_frame(SETTINGS, 0x1, 0, bytes(6))).goaway == FRAME_SIZE_ERROR


def test_settings_are_acknowledged_and_unknown_settings_ignored() -> None:
    raw = Raw()
    answer = raw.send(_raw_frame(SETTINGS, 0, 0, (0x99).to_bytes(2, "big") + bytes(4)))
    acks = answer.of(hyperframe.frame.SettingsFrame)
    assert [("ACK" in f.flags) for f in acks] == [True] and answer.goaway is None


# -- frames a server does not take -----------------------------------------------------------------


def test_push_promise_from_a_client_is_a_connection_error() -> None:
    """RFC 9113 §8.4: a client cannot push."""
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    payload = (2).to_bytes(4, "big") + raw.block(REQUEST)
    assert raw.send(_raw_frame(PUSH_PROMISE, END_HEADERS, 1, payload)).goaway == PROTOCOL_ERROR


def test_frames_of_unknown_type_are_ignored() -> None:
    """RFC 9113 §5.5."""
    raw = Raw()
    answer = raw.send(_raw_frame(0x42, 0, 0, b"whatever") + _raw_frame(0x42, 0, 1, b"x"))
    assert answer.goaway is None and not answer.resets
    _still_serving(raw, 1)


# -- padding (RFC 9113 §6.1, §6.2) ---------------------------------------------------------------


def test_padded_headers_and_data_are_read_without_their_padding() -> None:
    raw = Raw()
    block = raw.block(REQUEST)
    raw.send(_raw_frame(HEADERS, END_HEADERS | PADDED, 1, b"\x03" + block + bytes(3)))
    raw.send(_raw_frame(DATA, END_STREAM | PADDED, 1, b"\x05" + MESSAGE + bytes(5)))
    ready = [e for e in raw.events if isinstance(e, RequestReady)]
    assert [(e.stream_id, e.message) for e in ready] == [(1, b"hello")]


@pytest.mark.parametrize("kind", [HEADERS, DATA])
def test_padding_as_long_as_the_payload_is_a_connection_error(kind: int) -> None:
    raw = Raw()
    if kind == DATA:
        raw.send(raw.headers(1))
        frame = _raw_frame(DATA, PADDED, 1, b"\x05" + bytes(4))
    else:
        frame = _raw_frame(HEADERS, END_HEADERS | PADDED, 1, b"\x05" + bytes(4))
    assert raw.send(frame).goaway == PROTOCOL_ERROR


# -- header blocks (RFC 9113 §6.10, RFC 7541) ----------------------------------------------------


def test_a_block_in_headers_and_continuations_is_one_request() -> None:
    raw = Raw()
    block = raw.block(REQUEST)
    read = _raw_frame(HEADERS, 0, 1, block[:2]) + _raw_frame(CONTINUATION, 0, 1, block[2:4])
    read += _raw_frame(CONTINUATION, END_HEADERS, 1, block[4:])
    raw.send(read + _raw_frame(DATA, END_STREAM, 1, MESSAGE))
    assert raw.started() == [1]


@pytest.mark.parametrize(
    "second",
    [
        _raw_frame(CONTINUATION, END_HEADERS, 3, b"\x82"),  # another stream's
        _raw_frame(DATA, 0, 1, MESSAGE),  # not a CONTINUATION
        _raw_frame(0x42, 0, 0, b""),  # a frame of unknown type
    ],
    ids=["other-stream", "data", "unknown-type"],
)
def test_anything_but_its_continuation_inside_a_header_block_is_a_connection_error(
    second: bytes,
) -> None:
    raw = Raw()
    block = raw.block(REQUEST)
    answer = raw.send(_raw_frame(HEADERS, 0, 1, block[:3]) + second)
    assert answer.goaway == PROTOCOL_ERROR


def test_a_header_block_that_does_not_decode_is_a_compression_error() -> None:
    """RFC 9113 §4.3: the dynamic table cannot be trusted after a decoding error."""
    raw = Raw()
    answer = raw.send(_raw_frame(HEADERS, END_HEADERS, 1, b"\xff\xff\xff\xff\x7f"))
    assert answer.goaway == COMPRESSION_ERROR


# -- request blocks (RFC 9113 §8.1, §8.2, §8.3) --------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        [*REQUEST, (b"X-Upper", b"1")],
        [*REQUEST, (b"connection", b"close")],
        [*REQUEST[:5], (b"te", b"gzip")],
        [REQUEST[0], (b"x-early", b"1"), *REQUEST[1:]],
        [*REQUEST, (b":status", b"200")],
        [*REQUEST, (b":path", b"/svc/Other")],
        [r for r in REQUEST if r[0] != b":path"],
        [r for r in REQUEST if r[0] != b":method"],
        [*REQUEST, (b":unknown", b"1")],
    ],
    ids=["uppercase", "connection-specific", "te-gzip", "pseudo-after-regular", "status",
         "duplicate-pseudo", "no-path", "no-method", "unknown-pseudo"],
)
def test_a_malformed_request_block_is_a_stream_error(fields: List[Tuple[bytes, bytes]]) -> None:
    """RFC 9113 §8.1.1: a malformed request is a stream error PROTOCOL_ERROR, not one that
    fails every call on the connection."""
    raw = Raw()
    answer = raw.send(raw.headers(1, fields, END_HEADERS | END_STREAM))
    assert answer.resets.get(1) == PROTOCOL_ERROR and answer.goaway is None, answer.frames
    assert raw.started() == []
    _still_serving(raw, 3)


def test_trailers_with_a_pseudo_header_are_a_stream_error() -> None:
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(raw.headers(1, [(b":path", b"/x")], END_HEADERS | END_STREAM))
    assert answer.resets.get(1) == PROTOCOL_ERROR and answer.goaway is None
    _still_serving(raw, 3)


def test_trailers_without_end_stream_are_a_protocol_error() -> None:
    """RFC 9113 §8.1: a second header block must end the stream."""
    raw = Raw()
    raw.send(_request(raw, 1, end=False))
    answer = raw.send(raw.headers(1, [(b"x-trailer", b"1")], END_HEADERS))
    assert answer.resets.get(1) == PROTOCOL_ERROR or answer.goaway == PROTOCOL_ERROR


@pytest.mark.parametrize("declared", [len(MESSAGE) + 1, len(MESSAGE) - 1])
def test_content_length_other_than_the_data_is_a_stream_error(declared: int) -> None:
    """RFC 9113 §8.1.1: a content-length that the DATA frames do not add up to is malformed."""
    raw = Raw()
    fields = [*REQUEST, (b"content-length", str(declared).encode())]
    answer = raw.send(raw.headers(1, fields) + _raw_frame(DATA, END_STREAM, 1, MESSAGE))
    assert answer.resets.get(1) == PROTOCOL_ERROR and answer.goaway is None, answer.frames
    _still_serving(raw, 3)


def test_a_matching_content_length_is_accepted() -> None:
    raw = Raw()
    fields = [*REQUEST, (b"content-length", str(len(MESSAGE)).encode())]
    answer = raw.send(raw.headers(1, fields) + _raw_frame(DATA, END_STREAM, 1, MESSAGE))
    assert not answer.resets and answer.goaway is None and raw.started() == [1]


def test_no_error_goaway_from_a_client_is_not_answered_with_an_error() -> None:
    raw = Raw()
    answer = raw.send(_raw_frame(GOAWAY, 0, 0, bytes(8)))
    assert answer.goaway in (None, NO_ERROR)
