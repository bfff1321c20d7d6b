"""What the fuzz suites share: hypothesis settings, HTTP/2 frame generators, valid streams.

``fuzz(examples)``: ``make test`` runs a fixed, derandomized sample; ``HYPOTHESIS_PROFILE=long``
multiplies the examples by 20 and randomizes them (the tox ``fuzz`` env).  ``frame_specs`` and
``render`` build arbitrary frame sequences, ``mutate`` edits a valid stream byte by byte.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import Any, Iterator, List, Sequence, Tuple

import hpack
import pytest
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    ExtensionFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from minigrpc.protocol import wire  # noqa: E402
from tests.support.scripted_peer import (  # noqa: E402
    CLIENT_PREFACE,
)

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"


def fuzz(examples: int) -> Any:
    """Settings for one fuzz test: ``examples`` in ``make test``, 20x under the long profile."""
    return settings(
        max_examples=examples * 20 if LONG else examples,
        deadline=None,
        derandomize=not LONG,
        database=None if not LONG else settings.default.database,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


# ============================================================================ frame generation

_STREAM_IDS = st.sampled_from([0, 1, 1, 1, 3, 2, 5, 2**31 - 1])
_ERROR_CODES = st.one_of(st.integers(0, 13), st.integers(0, 2**32 - 1))
SMALL_BYTES = st.binary(max_size=64)


def _header_value(choices: Sequence[bytes]) -> Any:
    return st.one_of(st.sampled_from(list(choices)), SMALL_BYTES)


RESPONSE_HEADER = st.one_of(
    st.tuples(st.just(b":status"), _header_value([b"200", b"404", b"503", b"100", b"abc", b""])),
    st.tuples(
        st.just(b"content-type"),
        _header_value([b"application/grpc", b"application/grpc+proto", b"text/html"]),
    ),
    st.tuples(st.just(b"grpc-status"), _header_value([b"0", b"2", b"13", b"17", b"-1", b"x"])),
    st.tuples(st.just(b"grpc-message"), _header_value([b"%zz", b"%FF%FE", b"ok"])),
    st.tuples(st.just(b"grpc-encoding"), _header_value([b"gzip", b"deflate", b"identity", b"x"])),
    st.tuples(st.just(b"grpc-status-details-bin"), _header_value([b"CAISA2JhZA", b"!!"])),
    st.tuples(st.just(b"x-md-bin"), _header_value([b"AAE", b"AAE=", b"a,b"])),
    st.tuples(st.sampled_from([b"x-md", b"te", b"connection", b"Upper", b""]), SMALL_BYTES),
)

REQUEST_HEADER = st.one_of(
    st.tuples(st.just(b":method"), _header_value([b"POST", b"GET"])),
    st.tuples(st.just(b":scheme"), _header_value([b"http", b"https"])),
    st.tuples(st.just(b":path"), _header_value([b"/f.S/M", b"/f.S/Unknown", b"", b"*"])),
    st.tuples(st.just(b":authority"), _header_value([b"localhost"])),
    st.tuples(
        st.just(b"content-type"), _header_value([b"application/grpc", b"text/plain"])
    ),
    st.tuples(st.just(b"te"), _header_value([b"trailers"])),
    st.tuples(st.just(b"grpc-timeout"), _header_value([b"1S", b"100m", b"0n", b"99999999H"])),
    st.tuples(st.just(b"grpc-encoding"), _header_value([b"gzip", b"identity", b"snappy"])),
    st.tuples(st.sampled_from([b"x-md-bin", b"x-md", b"user-agent", b":bogus"]), SMALL_BYTES),
)


def _message_payload() -> Any:
    body = st.binary(max_size=200)
    return st.one_of(
        body.map(lambda b: wire.encode_message(b)),
        st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1), body).map(
            lambda t: struct.pack(">BI", t[0], t[1]) + t[2]
        ),
        body.map(lambda b: wire.encode_message(gzip.compress(b), compressed=True)),
        st.binary(max_size=100),
    )


def frame_specs(header: Any) -> Any:
    """One generated frame description (rendered in order by :func:`render`)."""
    headers = st.lists(header, max_size=8)
    return st.one_of(
        st.tuples(
            st.just("settings"),
            st.dictionaries(st.integers(1, 10), st.integers(0, 2**32 - 1), max_size=3),
            st.booleans(),
        ),
        st.tuples(st.just("headers"), _STREAM_IDS, headers, st.booleans(), st.booleans()),
        st.tuples(st.just("continuation"), _STREAM_IDS, headers, st.booleans()),
        st.tuples(
            st.just("data"), _STREAM_IDS, _message_payload(), st.booleans(),
            st.one_of(st.none(), st.integers(0, 255)),
        ),
        st.tuples(st.just("rst"), _STREAM_IDS, _ERROR_CODES),
        st.tuples(st.just("goaway"), st.integers(0, 2**31 - 1), _ERROR_CODES, SMALL_BYTES),
        st.tuples(st.just("ping"), st.binary(min_size=8, max_size=8), st.booleans()),
        st.tuples(st.just("window"), _STREAM_IDS, st.integers(0, 2**31 - 1)),
        st.tuples(st.just("priority"), _STREAM_IDS, _STREAM_IDS),
        st.tuples(st.just("unknown"), st.integers(10, 255), _STREAM_IDS, SMALL_BYTES),
        st.tuples(st.just("raw"), st.binary(max_size=40)),
    )


def _frame(cls: Any, stream_id: int, *args: Any, **kwargs: Any) -> Any:
    """Build a frame on any stream id, legal or not (hyperframe checks only in __init__)."""
    legal = 0 if cls in (SettingsFrame, PingFrame, GoAwayFrame) else 1
    frame = cls(legal, *args, **kwargs)
    frame.stream_id = stream_id
    return frame


def render(specs: Sequence[Tuple[Any, ...]]) -> bytes:
    """Serialize frame descriptions with one hpack encoder (its table state is sequential)."""
    encoder = hpack.Encoder()
    out: List[bytes] = []
    for spec in specs:
        kind = spec[0]
        if kind == "settings":
            frame: Any = (
                SettingsFrame(0, flags=["ACK"]) if spec[2] else SettingsFrame(0, settings=spec[1])
            )
        elif kind == "headers":
            flags = (["END_STREAM"] if spec[3] else []) + (["END_HEADERS"] if spec[4] else [])
            frame = _frame(HeadersFrame, spec[1], encoder.encode(spec[2]), flags=flags)
        elif kind == "continuation":
            flags = ["END_HEADERS"] if spec[3] else []
            frame = _frame(ContinuationFrame, spec[1], encoder.encode(spec[2]), flags=flags)
        elif kind == "data":
            frame = _frame(DataFrame, spec[1], spec[2], flags=["END_STREAM"] if spec[3] else [])
            if spec[4] is not None:
                frame.flags.add("PADDED")
                frame.pad_length = spec[4]
        elif kind == "rst":
            frame = _frame(RstStreamFrame, spec[1], error_code=spec[2])
        elif kind == "goaway":
            frame = GoAwayFrame(0, last_stream_id=spec[1], error_code=spec[2],
                                additional_data=spec[3])
        elif kind == "ping":
            frame = PingFrame(0, opaque_data=spec[1], flags=["ACK"] if spec[2] else [])
        elif kind == "window":
            frame = WindowUpdateFrame(spec[1], window_increment=spec[2])
        elif kind == "priority":
            frame = _frame(PriorityFrame, spec[1], depends_on=spec[2])
        elif kind == "unknown":
            frame = ExtensionFrame(spec[1], spec[2], flag_byte=0, body=spec[3])
        else:
            out.append(spec[1])
            continue
        out.append(frame.serialize())
    return b"".join(out)


def chunked(data: bytes, cuts: Sequence[int]) -> Iterator[bytes]:
    """``data`` cut at the given offsets (as a socket may deliver it)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for start, end in zip(points, points[1:]):
        yield data[start:end]


def mutate(data: bytes, edits: Sequence[Tuple[int, int, int]]) -> bytes:
    """Apply (position, operation, byte) edits: 0 replace, 1 insert, 2 delete."""
    buffer = bytearray(data)
    for position, operation, value in edits:
        if not buffer:
            buffer.append(value)
            continue
        index = position % len(buffer)
        if operation == 0:
            buffer[index] = value
        elif operation == 1:
            buffer.insert(index, value)
        else:
            del buffer[index]
    return bytes(buffer)


EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2), st.integers(0, 255)),
                 max_size=6)
CUTS = st.lists(st.integers(0, 10**6), max_size=8)


def valid_response(payload: bytes = b"\x08\x01") -> bytes:
    encoder = hpack.Encoder()
    return b"".join(
        [
            SettingsFrame(0, settings={4: 65535}).serialize(),
            SettingsFrame(0, flags=["ACK"]).serialize(),
            HeadersFrame(1, encoder.encode([(b":status", b"200"),
                                            (b"content-type", b"application/grpc")]),
                         flags=["END_HEADERS"]).serialize(),
            DataFrame(1, wire.encode_message(payload)).serialize(),
            HeadersFrame(1, encoder.encode([(b"grpc-status", b"0"), (b"grpc-message", b"")]),
                         flags=["END_HEADERS", "END_STREAM"]).serialize(),
        ]
    )


def valid_request(payload: bytes = b"\x08\x01") -> bytes:
    encoder = hpack.Encoder()
    return b"".join(
        [
            CLIENT_PREFACE,
            SettingsFrame(0, settings={2: 0}).serialize(),
            HeadersFrame(1, encoder.encode([
                (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/f.S/M"),
                (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
                (b"te", b"trailers"), (b"grpc-timeout", b"5S"),
            ]), flags=["END_HEADERS"]).serialize(),
            DataFrame(1, wire.encode_message(payload), flags=["END_STREAM"]).serialize(),
        ]
    )
