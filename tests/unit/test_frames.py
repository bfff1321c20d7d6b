"""minigrpc.http2.frames, the HTTP/2 frame codec of both ends and the one-shot client (RFC 9113
§4.1, §6), against the RFC and against hyperframe (the frame codec h2 uses).

* The frames we build are byte for byte what hyperframe serializes for the same frame.
* Parsing, differentially: any frame header and payload are accepted by both, with the same
  fields, or rejected by both, except where hyperframe departs from RFC 9113 and this codec
  follows the RFC (:func:`_departure` lists each case with its section).
* The errors of each type, with the code RFC 9113 names for them.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import pytest
from hyperframe.exceptions import HyperframeError
from hyperframe.frame import (
    AltSvcFrame,
    ContinuationFrame,
    DataFrame,
    ExtensionFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from minigrpc.http2 import frames
from minigrpc.http2.frames import FRAME_SIZE_ERROR, PROTOCOL_ERROR, FrameError


def _header(frame_type: int, flags: int, stream_id: int, length: int) -> bytes:
    return length.to_bytes(3, "big") + bytes((frame_type, flags)) + stream_id.to_bytes(4, "big")


def _parse(frame_type: int, flags: int, stream_id: int, payload: bytes) -> frames.Frame:
    return frames.parse_frame(_header(frame_type, flags, stream_id, len(payload)), payload)


# -- building ------------------------------------------------------------------------------------


def test_built_frames_are_hyperframes() -> None:
    settings = SettingsFrame(0)
    settings.settings = {SettingsFrame.HEADER_TABLE_SIZE: 4096, SettingsFrame.ENABLE_PUSH: 0,
                         SettingsFrame.MAX_HEADER_LIST_SIZE: 65536}
    pairs = [
        (frames.settings_frame([(1, 4096), (2, 0), (6, 65536)]), settings),
        (frames.settings_ack(), SettingsFrame(0, flags=["ACK"])),
        (frames.ping_ack(b"12345678"), PingFrame(0, b"12345678", flags=["ACK"])),
        (frames.window_update_frame(0, 2**31 - 1), WindowUpdateFrame(0, 2**31 - 1)),
        (frames.window_update_frame(1, 5), WindowUpdateFrame(1, 5)),
        (frames.rst_stream_frame(1, 8), RstStreamFrame(1, 8)),
        (frames.goaway_frame(0, 2), GoAwayFrame(0, 0, 2)),
        (frames.goaway_frame(2**31 - 1, 0, b"bye"), GoAwayFrame(0, 2**31 - 1, 0, b"bye")),
        (frames.data_frame(1, b"abc", True), DataFrame(1, b"abc", flags=["END_STREAM"])),
        (frames.data_frame(3, memoryview(b""), False), DataFrame(3, b"")),
    ]
    for ours, theirs in pairs:
        assert ours == theirs.serialize(), theirs


@pytest.mark.parametrize(("size", "pieces"), [(0, 1), (10, 1), (16384, 1), (16385, 2),
                                              (40000, 3)])
def test_header_frames_split_into_continuations(size: int, pieces: int) -> None:
    block = bytes(range(256)) * (size // 256) + bytes(size % 256)
    built = frames.header_frames(1, block, 16384)
    assert len(built) == pieces
    expected = [HeadersFrame(1, block[:16384], flags=[] if pieces > 1 else ["END_HEADERS"])]
    for index in range(1, pieces):
        last = index == pieces - 1
        piece = block[16384 * index : 16384 * (index + 1)]
        expected.append(ContinuationFrame(1, piece, flags=["END_HEADERS"] if last else []))
    assert built == [frame.serialize() for frame in expected]


# -- parsing: the RFC's rules ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame_type", "flags", "stream_id", "payload", "code", "problem"),
    [
        (frames.DATA, 0, 0, b"x", PROTOCOL_ERROR, "stream 0"),  # RFC 9113 §6.1
        (frames.DATA, frames.PADDED, 1, b"", FRAME_SIZE_ERROR, "Pad Length"),
        (frames.DATA, frames.PADDED, 1, b"\x03ab", PROTOCOL_ERROR, "padding"),  # RFC 9113 §6.1
        (frames.HEADERS, frames.PRIORITY_FLAG, 1, b"1234", PROTOCOL_ERROR, "priority"),
        (frames.HEADERS, frames.PADDED | frames.PRIORITY_FLAG, 1, b"\x0212345x",
         PROTOCOL_ERROR, "padding"),  # RFC 9113 §6.2: the padding would cover the weight
        (frames.PRIORITY, 0, 1, b"1234", FRAME_SIZE_ERROR, "not 5"),  # RFC 9113 §6.3
        (frames.RST_STREAM, 0, 1, b"12345", FRAME_SIZE_ERROR, "not 4"),  # RFC 9113 §6.4
        (frames.RST_STREAM, 0, 0, b"1234", PROTOCOL_ERROR, "stream 0"),
        (frames.SETTINGS, 0, 1, b"", PROTOCOL_ERROR, "not on the connection"),  # RFC 9113 §6.5
        (frames.SETTINGS, frames.ACK, 0, b"\x00\x01\x00\x00\x00\x00", FRAME_SIZE_ERROR, "ACK"),
        (frames.SETTINGS, 0, 0, b"12345", FRAME_SIZE_ERROR, "multiple of 6"),
        # RFC 9113 §6.6: a server promises even streams
        (frames.PUSH_PROMISE, 0, 1, b"\x00\x00\x00\x03", PROTOCOL_ERROR, "stream 3"),
        (frames.PING, 0, 0, b"1234567", FRAME_SIZE_ERROR, "not 8"),  # RFC 9113 §6.7
        (frames.PING, 0, 3, b"12345678", PROTOCOL_ERROR, "not on the connection"),
        (frames.GOAWAY, 0, 0, b"1234567", FRAME_SIZE_ERROR, "under 8"),  # RFC 9113 §6.8
        (frames.WINDOW_UPDATE, 0, 0, b"\x80\x00\x00\x00", PROTOCOL_ERROR, "0"),  # RFC 9113 §6.9
        (frames.WINDOW_UPDATE, 0, 1, b"\x00\x01", FRAME_SIZE_ERROR, "not 4"),
        (frames.CONTINUATION, 0, 0, b"", PROTOCOL_ERROR, "stream 0"),  # RFC 9113 §6.10
    ],
)
def test_errors_carry_the_rfc_code(
    frame_type: int, flags: int, stream_id: int, payload: bytes, code: int, problem: str
) -> None:
    with pytest.raises(FrameError, match=problem) as raised:
        _parse(frame_type, flags, stream_id, payload)
    assert raised.value.error_code == code


def test_fields() -> None:
    data = _parse(frames.DATA, frames.PADDED | frames.END_STREAM, 1, b"\x02abc\x00\x00")
    assert (data.data, data.flow_controlled_length, data.flags & frames.END_STREAM) == (
        b"abc", 6, frames.END_STREAM
    )
    headers = _parse(frames.HEADERS, frames.PADDED | frames.PRIORITY_FLAG, 1,
                     b"\x01" + b"\x80\x00\x00\x03\x10" + b"\x82" + b"\x00")
    assert headers.data == b"\x82"
    settings = _parse(frames.SETTINGS, 0, 0, b"\x00\x04\x00\x00\x00\x0a\x00\x04\x00\x00\x00\x0b")
    assert settings.settings == [(4, 10), (4, 11)]  # in order, duplicates kept (RFC 9113 §6.5.3)
    goaway = _parse(frames.GOAWAY, 0, 0, b"\x80\x00\x00\x01\x00\x00\x00\x0bdebug")
    assert (goaway.last_stream_id, goaway.error_code, goaway.data) == (1, 11, b"debug")
    update = _parse(frames.WINDOW_UPDATE, 0, 0, b"\x80\x00\x00\x07")  # R ignored (RFC 9113 §6.9)
    assert update.window_increment == 7
    unknown = _parse(0xEE, 0xFF, 0, b"anything")  # RFC 9113 §5.5
    assert (unknown.type, unknown.data) == (0xEE, b"anything")
    assert "type=0xee" in repr(unknown)


# -- parsing, differentially against hyperframe ---------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.fuzzing import fuzz  # noqa: E402

_ALTSVC = 0xA


def _departure(frame_type: int, flags: int, payload: bytes) -> Optional[str]:
    """Where hyperframe departs from RFC 9113 for this frame (and this codec does not), or None.

    * HEADERS whose padding leaves an empty fragment: hyperframe counts the priority fields but
      not the Pad Length octet as padding room and rejects; RFC 9113 §6.2 allows it. HEADERS
      whose padding covers the priority fields: hyperframe accepts; RFC 9113 §6.2 makes it a
      PROTOCOL_ERROR.
    * WINDOW_UPDATE with the reserved bit set: hyperframe rejects; RFC 9113 §6.9 says R is
      ignored.
    * ALTSVC (RFC 7838): hyperframe parses it and rejects bad bodies; a client that does not use
      the extension ignores it like any unknown type (RFC 9113 §5.5).
    * PUSH_PROMISE whose padding covers the promised stream id: hyperframe accepts; RFC 9113
      §6.6 makes it a PROTOCOL_ERROR. A promised stream id with the reserved bit set:
      hyperframe keeps the bit; RFC 9113 §6.6 says it is ignored (the one-shot client rejects
      every PUSH_PROMISE anyway, RFC 9113 §8.4).
    """
    padded = bool(flags & frames.PADDED) and bool(payload)
    if frame_type == frames.HEADERS and padded:
        room = len(payload) - 1 - (5 if flags & frames.PRIORITY_FLAG else 0)
        if payload[0] == len(payload) - 1 or payload[0] > room:
            return "HEADERS padding (RFC 9113 §6.2)"
    if frame_type == frames.WINDOW_UPDATE and len(payload) == 4 and payload[0] & 0x80:
        return "WINDOW_UPDATE reserved bit (RFC 9113 §6.9)"
    if frame_type == _ALTSVC:
        return "ALTSVC (RFC 9113 §5.5)"
    if frame_type == frames.PUSH_PROMISE:
        if padded and payload[0] > len(payload) - 5:
            return "PUSH_PROMISE padding (RFC 9113 §6.6)"
        promised = 1 if padded else 0
        if len(payload) >= promised + 4 and payload[promised] & 0x80:
            return "PUSH_PROMISE reserved bit (RFC 9113 §6.6)"
    return None


def _hyperframe(header: bytes, payload: bytes) -> Tuple[bool, Any]:
    try:
        frame, _ = Frame.parse_frame_header(memoryview(header))
        frame.parse_body(memoryview(payload))
    except HyperframeError as exc:
        return False, exc
    return True, frame


def _same_fields(theirs: Any, ours: frames.Frame) -> None:
    assert ours.stream_id == theirs.stream_id
    for name, bit in theirs.defined_flags:
        assert bool(ours.flags & bit) == (name in theirs.flags)
    if isinstance(theirs, (DataFrame, HeadersFrame, ContinuationFrame, PushPromiseFrame)):
        assert ours.data == bytes(theirs.data)
    if isinstance(theirs, DataFrame):
        assert ours.flow_controlled_length == theirs.flow_controlled_length
    if isinstance(theirs, PushPromiseFrame):
        assert ours.last_stream_id == theirs.promised_stream_id & 0x7FFFFFFF
    if isinstance(theirs, SettingsFrame):
        assert dict(ours.settings) == theirs.settings
    if isinstance(theirs, PingFrame):
        assert ours.data == bytes(theirs.opaque_data)
    if isinstance(theirs, GoAwayFrame):
        assert (ours.last_stream_id, ours.error_code, ours.data) == (
            theirs.last_stream_id & 0x7FFFFFFF, theirs.error_code, bytes(theirs.additional_data)
        )
    if isinstance(theirs, RstStreamFrame):
        assert ours.error_code == theirs.error_code
    if isinstance(theirs, WindowUpdateFrame):
        assert ours.window_increment == theirs.window_increment
    if isinstance(theirs, (ExtensionFrame, AltSvcFrame)):
        assert ours.type == theirs.type


_TYPES = st.one_of(st.integers(0, 10), st.integers(0, 255))
_STREAMS = st.one_of(st.sampled_from([0, 1, 2, 3, 2**31 - 1, 2**31, 2**31 + 1]),
                     st.integers(0, 2**32 - 1))
_LENGTHS = st.one_of(st.integers(0, 12), st.integers(0, 80))


@fuzz(1500)
@given(_TYPES, st.integers(0, 255), _STREAMS, _LENGTHS, st.data())
def test_parse_like_hyperframe(
    frame_type: int, flags: int, stream_id: int, length: int, data: Any
) -> None:
    """Both accept with the same fields, or both reject, but for :func:`_departure`'s cases."""
    payload = data.draw(st.binary(min_size=length, max_size=length))
    if payload and data.draw(st.booleans()):
        # A pad length near the payload's length, where the padding rules are decided.
        pad = data.draw(st.integers(max(0, length - 8), length + 1))
        payload = bytes((min(pad, 255),)) + payload[1:]
    header = _header(frame_type, flags, stream_id, len(payload))
    accepted, theirs = _hyperframe(header, payload)
    try:
        ours: Optional[frames.Frame] = frames.parse_frame(header, payload)
    except FrameError:
        ours = None
    departure = _departure(frame_type, flags, payload)
    if departure is not None:
        return
    assert (ours is not None) == accepted, (header.hex(), payload.hex(), theirs)
    if ours is not None:
        _same_fields(theirs, ours)


def test_departures_happen() -> None:
    """Each case :func:`_departure` excuses really differs (so the list cannot grow stale)."""
    cases: List[Tuple[int, int, bytes]] = [
        (frames.HEADERS, frames.PADDED, b"\x02ab"),
        (frames.HEADERS, frames.PADDED | frames.PRIORITY_FLAG, b"\x0312345x"),
        (frames.WINDOW_UPDATE, 0, b"\x80\x00\x00\x01"),
        (_ALTSVC, 0, b"\x00"),
        (frames.PUSH_PROMISE, frames.PADDED, b"\x04\x00\x00\x00\x02ab"),
        (frames.PUSH_PROMISE, 0, b"\x80\x00\x00\x00"),
    ]
    for frame_type, flags, payload in cases:
        assert _departure(frame_type, flags, payload) is not None
        header = _header(frame_type, flags, 1 if frame_type != frames.WINDOW_UPDATE else 0,
                         len(payload))
        accepted, _ = _hyperframe(header, payload)
        try:
            frames.parse_frame(header, payload)
            ours = True
        except FrameError:
            ours = False
        assert ours != accepted, (frame_type, payload)
