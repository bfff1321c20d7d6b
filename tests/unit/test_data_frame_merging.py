"""Whole DATA frames of one stream reach h2 as one (``FrameSplitter(merge_data_frames=True)``).

The merge must not change what a receiver learns from the bytes: per stream, the same payload
bytes, the same flow-controlled length and END_STREAM at the same place (RFC 9113 §6.1, §6.9);
every other frame untouched and in order; a GOAWAY still last in its chunk. These tests check
that on generated frame sequences cut at generated places, and on h2 itself.
"""

from __future__ import annotations

from typing import List, Tuple

import h2.connection
import h2.events
from hypothesis import given, settings
from hypothesis import strategies as st

from minigrpc import http2

DATA, HEADERS, PING, GOAWAY, WINDOW_UPDATE = 0x0, 0x1, 0x6, 0x7, 0x8
END_STREAM, PADDED = 0x1, 0x8

Frame = Tuple[int, int, int, bytes]  # type, flags, stream id, payload


def serialize(frames: List[Frame]) -> bytes:
    return b"".join(
        len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload
        for kind, flags, stream, payload in frames
    )


def parse(data: bytes) -> List[Frame]:
    frames = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        kind, flags = data[pos + 3], data[pos + 4]
        stream = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
        frames.append((kind, flags, stream, data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    assert pos == len(data), "the output ends inside a frame"
    return frames


def what_a_receiver_learns(frames: List[Frame]) -> list:
    """Per DATA frame its stream, data and flow-controlled length, adjacent ones of one stream
    added up; END_STREAM and every other frame as they are."""
    learned: list = []
    for kind, flags, stream, payload in frames:
        if kind != DATA:
            learned.append(("frame", kind, flags, stream, payload))
            continue
        data = payload
        if flags & PADDED:
            data = payload[1 : len(payload) - payload[0]]
        if learned and learned[-1][0] == "data" and learned[-1][1] == stream:
            _, _, before, counted = learned.pop()
            learned.append(("data", stream, before + data, counted + len(payload)))
        else:
            learned.append(("data", stream, data, len(payload)))
        if flags & END_STREAM:
            learned.append(("end", stream))
    return learned


def data_frame(stream: int, data: bytes, end_stream: bool, pad: int) -> Frame:
    flags = END_STREAM if end_stream else 0
    if pad < 0:
        return (DATA, flags, stream, data)
    return (DATA, flags | PADDED, stream, bytes((pad,)) + data + bytes(pad))


frame_strategy = st.one_of(
    st.builds(
        data_frame,
        st.sampled_from([1, 3]),
        # Sizes around LIMIT / 2, so that some pairs fit and some do not.
        st.builds(bytes.__mul__, st.binary(min_size=1, max_size=1), st.sampled_from(
            [0, 1, 7, 31, 32, 33, 40])),
        st.booleans(),
        st.sampled_from([-1, -1, -1, 0, 3]),
    ),
    st.just((PING, 0, 0, b"12345678")),
    st.just((WINDOW_UPDATE, 0, 3, b"\x00\x00\x01\x00")),
    st.just((GOAWAY, 0, 0, b"\x00\x00\x00\x03\x00\x00\x00\x00")),
    st.just((HEADERS, 0x4, 3, b"\x88")),
)


def feed_in_pieces(splitter: http2.FrameSplitter, data: bytes, sizes: List[int]) -> List[bytes]:
    chunks: List[bytes] = []
    pos = 0
    index = 0
    while pos < len(data):
        piece = data[pos : pos + sizes[index % len(sizes)]]
        chunks.extend(splitter.feed(piece))
        pos += len(piece)
        index += 1
    return chunks


LIMIT = 64  # a small MAX_FRAME_SIZE, so that the limit cuts runs too


@settings(max_examples=300)
@given(
    st.lists(frame_strategy, max_size=30),
    # Read sizes: often larger than several frames, since only whole frames in a read merge.
    st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=10),
)
def test_merging_keeps_what_a_receiver_learns(frames: List[Frame], sizes: List[int]) -> None:
    data = serialize(frames)
    merged = feed_in_pieces(http2.FrameSplitter(max_frame_size=LIMIT, merge_data_frames=True),
                            data, sizes)
    plain = feed_in_pieces(http2.FrameSplitter(max_frame_size=LIMIT), data, sizes)
    out = parse(b"".join(merged))
    assert what_a_receiver_learns(out) == what_a_receiver_learns(frames)
    assert all(len(payload) <= LIMIT for _, _, _, payload in out)
    # The same chunk count: only the bytes inside chunks change, and each GOAWAY still ends one.
    assert len(merged) == len(plain)
    ends = []
    total = 0
    for chunk in merged:
        total += len(chunk)
        ends.append(total)
    position = 0
    for kind, _, _, payload in out:
        position += 9 + len(payload)
        if kind == GOAWAY:
            assert position in ends


@given(st.lists(frame_strategy, max_size=30))
def test_merging_leaves_no_mergeable_neighbours_in_one_read(frames: List[Frame]) -> None:
    merged = http2.FrameSplitter(max_frame_size=LIMIT, merge_data_frames=True).feed(
        serialize(frames)
    )
    out = parse(b"".join(merged))
    assert all(len(payload) <= LIMIT for _, _, _, payload in out)
    for first, second in zip(out, out[1:]):
        mergeable = (
            first[0] == second[0] == DATA
            and first[2] == second[2]
            and not (first[1] | second[1]) & PADDED
            and not first[1] & END_STREAM
            and len(first[3]) + len(second[3]) <= LIMIT
        )
        assert not mergeable, (first, second)


def test_a_large_message_in_16_kib_frames_reaches_h2_as_one_frame_per_read() -> None:
    """What grpcio and grpc-go send: 16 KiB frames whatever MAX_FRAME_SIZE we advertise."""
    frames = [data_frame(1, bytes([i]) * 16384, i == 15, -1) for i in range(16)]
    chunks = http2.FrameSplitter(max_frame_size=1 << 20, merge_data_frames=True).feed(
        serialize(frames)
    )
    assert [(kind, flags, stream, len(payload)) for kind, flags, stream, payload in
            parse(b"".join(chunks))] == [(DATA, END_STREAM, 1, 16 * 16384)]


H2_LIMIT = 16384  # the smallest MAX_FRAME_SIZE there is (RFC 9113 §6.5.2)


def _h2_server_with_two_streams() -> Tuple[h2.connection.H2Connection, bytes]:
    client = h2.connection.H2Connection(http2.client_config())
    http2.start_connection(client)
    server = h2.connection.H2Connection(http2.server_config())
    http2.start_connection(server, max_frame_size=H2_LIMIT)
    for stream in (1, 3):
        client.send_headers(stream, [(b":method", b"POST"), (b":scheme", b"http"),
                                     (b":path", b"/a/b"), (b":authority", b"x")])
    return server, client.data_to_send()


@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 3]),
            st.builds(bytes.__mul__, st.binary(min_size=1, max_size=1), st.integers(0, 9000)),
            st.sampled_from([-1, -1, 2]),
        ),
        max_size=25,
    ),
    st.lists(st.integers(min_value=1, max_value=30000), min_size=1, max_size=8),
)
def test_h2_sees_the_same_streams_and_windows(parts: list, sizes: List[int]) -> None:
    frames = [data_frame(stream, data, False, pad) for stream, data, pad in parts]
    frames += [data_frame(1, b"last", True, -1), data_frame(3, b"", True, -1)]
    results = []
    for merge in (False, True):
        server, opening = _h2_server_with_two_streams()
        splitter = http2.FrameSplitter(
            expect_preface=True, max_frame_size=H2_LIMIT, merge_data_frames=merge
        )
        received = {1: b"", 3: b""}
        counted = {1: 0, 3: 0}
        ended = []
        for chunk in feed_in_pieces(splitter, opening + serialize(frames), sizes):
            for event in server.receive_data(chunk):
                if isinstance(event, h2.events.DataReceived):
                    received[event.stream_id] += event.data
                    counted[event.stream_id] += event.flow_controlled_length
                elif isinstance(event, h2.events.StreamEnded):
                    ended.append(event.stream_id)
        windows = (
            server.inbound_flow_control_window,
            server._get_stream_by_id(1).inbound_flow_control_window,
            server._get_stream_by_id(3).inbound_flow_control_window,
        )
        results.append((received, counted, ended, windows))
    assert results[0] == results[1]
