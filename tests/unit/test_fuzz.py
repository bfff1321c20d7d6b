"""Hypothesis fuzzing of every byte path a peer controls, without sockets.

* The client's response path: generated and mutated HTTP/2 byte streams fed, in arbitrary
  chunks, to :class:`minigrpc.protocol.client_protocol.ClientGrpcConnection` (sans-IO).
* The server's request path: the same for
  :class:`minigrpc.protocol.server_protocol.ServerGrpcConnection`.
* Every codec of :mod:`minigrpc.protocol.wire` (and the status/HTTP/2 helpers): on any input they
  return
  or raise only their documented exceptions.

The same generators drive real sockets in tests/hostile/test_fuzz_sockets.py.  The invariants:
nothing raises an undocumented exception, every call ends with a StatusCode once the input
ends, an OK call has exactly one message, and a server keeps serving.

Budget: ``make test`` runs a fixed, derandomized sample (well under 60 s on two cores);
``HYPOTHESIS_PROFILE=long`` multiplies the examples by 20 and randomizes them (the tox env).
"""

from __future__ import annotations

import gzip
from typing import Any, List, Sequence, Tuple

import pytest
from hyperframe.frame import (
    SettingsFrame,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from minigrpc.http2 import frames  # noqa: E402
from minigrpc.protocol import codes, headers, status, wire  # noqa: E402
from minigrpc.protocol.enums import StatusCode  # noqa: E402
from tests.support.fuzzing import (  # noqa: E402
    CUTS,
    EDITS,
    REQUEST_HEADER,
    RESPONSE_HEADER,
    SMALL_BYTES,
    chunked,
    frame_specs,
    fuzz,
    mutate,
    render,
    valid_request,
    valid_response,
)
from tests.support.scripted_peer import (  # noqa: E402
    CLIENT_PREFACE,
)
from tests.unit.test_status_and_http2 import read_frames  # noqa: E402

# ============================================================================ client, sans-IO

client_protocol = pytest.importorskip("minigrpc.protocol.client_protocol")


def _client_with_call() -> Tuple[Any, Any]:
    proto = client_protocol.ClientGrpcConnection()
    proto.initiate()
    call = client_protocol.ClientCall(
        request=wire.encode_message(b"\x08\x01"),
        headers=headers.request_headers(
            path="/f.S/M", authority="localhost", user_agent="fuzz/1"
        ),
    )
    proto.start_call(call)
    proto.data_to_send()
    return proto, call


_CLIENT_EVENTS = (
    client_protocol.CallFinished,
    client_protocol.ResponseStarted,
    client_protocol.MessageReceived,
    client_protocol.WindowOpened,
    client_protocol.GoAwayReceived,
    client_protocol.ConnectionFailed,
)


def _drive_client(stream: bytes, cuts: Sequence[int]) -> None:
    proto, call = _client_with_call()
    for chunk in chunked(stream, cuts):
        for event in proto.receive_data(chunk):
            assert isinstance(event, _CLIENT_EVENTS), event
        assert isinstance(proto.data_to_send(), bytes)
    proto.connection_lost("fuzz: end of input")
    final = call.status
    assert final is not None, "the call has no status once the connection is gone"
    assert isinstance(final.code, StatusCode)
    assert isinstance(final.details, str)
    str(final)  # the grpc-go style text never fails
    if final.code is StatusCode.OK:
        assert len(call.messages) == 1


@fuzz(300)
@given(
    specs=st.lists(frame_specs(RESPONSE_HEADER), max_size=12),
    with_settings=st.booleans(),
    cuts=CUTS,
)
def test_client_response_path_generated_frames(
    specs: List[Tuple[Any, ...]], with_settings: bool, cuts: List[int]
) -> None:
    prefix = SettingsFrame(0).serialize() if with_settings else b""
    _drive_client(prefix + render(specs), cuts)


@fuzz(300)
@given(edits=EDITS, cuts=CUTS, payload=st.binary(max_size=100))
def test_client_response_path_mutated_response(
    edits: List[Tuple[int, int, int]], cuts: List[int], payload: bytes
) -> None:
    _drive_client(mutate(valid_response(payload), edits), cuts)


# ============================================================================ server, sans-IO

server_protocol = pytest.importorskip("minigrpc.protocol.server_protocol")


def _drive_server(stream: bytes, cuts: Sequence[int]) -> None:
    conn = server_protocol.ServerGrpcConnection()
    conn.initiate()
    conn.data_to_send()
    for chunk in chunked(stream, cuts):
        for event in conn.receive_data(chunk):
            if isinstance(event, server_protocol.CallStarted):
                if event.method != "/f.S/M":
                    conn.reject_call(event.stream_id, StatusCode.UNIMPLEMENTED, "fuzz")
            elif isinstance(event, server_protocol.RequestReady):
                conn.finish_call(event.stream_id, StatusCode.OK, message=event.message)
            else:
                assert isinstance(event, server_protocol.CallTerminated), event
                assert isinstance(event.code, StatusCode)
        assert isinstance(conn.data_to_send(), bytes)
    for event in conn.connection_lost("fuzz: end of input"):
        assert isinstance(event, server_protocol.CallTerminated)
    assert conn.active_calls == 0 or conn.closed


@fuzz(300)
@given(
    specs=st.lists(frame_specs(REQUEST_HEADER), max_size=12),
    with_preface=st.booleans(),
    cuts=CUTS,
)
def test_server_request_path_generated_frames(
    specs: List[Tuple[Any, ...]], with_preface: bool, cuts: List[int]
) -> None:
    prefix = CLIENT_PREFACE + SettingsFrame(0).serialize() if with_preface else b""
    _drive_server(prefix + render(specs), cuts)


@fuzz(300)
@given(edits=EDITS, cuts=CUTS, payload=st.binary(max_size=100))
def test_server_request_path_mutated_request(
    edits: List[Tuple[int, int, int]], cuts: List[int], payload: bytes
) -> None:
    _drive_server(mutate(valid_request(payload), edits), cuts)


# ============================================================================ codecs


@fuzz(400)
@given(data=st.binary(max_size=300), cuts=CUTS, limit=st.one_of(st.none(), st.integers(0, 64)))
def test_message_decoder_any_bytes(data: bytes, cuts: List[int], limit: Any) -> None:
    decoder = wire.MessageDecoder(limit)
    try:
        for chunk in chunked(data, cuts):
            for compressed, payload in decoder.feed(chunk):
                assert isinstance(compressed, bool) and isinstance(payload, bytes)
                assert limit is None or len(payload) <= limit
    except (status.ProtocolViolation, status.MessageTooLarge):
        pass
    assert decoder.buffered >= 0


@fuzz(300)
@given(value=st.one_of(st.binary(max_size=12), st.text(max_size=12)))
def test_decode_timeout_any_value(value: Any) -> None:
    try:
        seconds = wire.decode_timeout(value)
    except ValueError:
        return
    assert seconds >= 0


@fuzz(300)
@given(seconds=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_encode_timeout_is_always_decodable(seconds: float) -> None:
    header = wire.encode_timeout(seconds)
    assert len(header) <= 9
    assert wire.decode_timeout(header) >= (seconds if 0 < seconds < 1e12 else 0) - 1e-9 or (
        header.endswith("H")
    )


@fuzz(300)
@given(headers=st.lists(st.tuples(SMALL_BYTES, SMALL_BYTES), max_size=10))
def test_decode_metadata_never_raises(headers: List[Tuple[bytes, bytes]]) -> None:
    for key, value in wire.decode_metadata(headers):
        assert isinstance(key, str)
        assert isinstance(value, bytes if key.endswith("-bin") else str)


@fuzz(300)
@given(metadata=st.lists(st.tuples(st.one_of(st.text(max_size=10), SMALL_BYTES),
                                   st.one_of(st.text(max_size=10), SMALL_BYTES, st.integers())),
                         max_size=5))
def test_validate_metadata_raises_only_value_error(metadata: List[Any]) -> None:
    try:
        encoded = wire.encode_metadata(metadata)
    except ValueError:
        return
    decoded = wire.decode_metadata(encoded)
    assert len(decoded) == len(encoded)


@fuzz(300)
@given(value=st.one_of(st.binary(max_size=60), st.text(max_size=60)))
def test_percent_decode_never_fails(value: Any) -> None:
    assert isinstance(wire.percent_decode(value), str)


@fuzz(300)
@given(message=st.text(max_size=60))
def test_percent_round_trip(message: str) -> None:
    encoded = wire.percent_encode(message)
    assert encoded.isascii()
    if "\ud800" > message or not any(0xD800 <= ord(c) <= 0xDFFF for c in message):
        assert wire.percent_decode(encoded) == message


@fuzz(300)
@given(
    encoding=st.sampled_from(["gzip", "deflate", "identity", "snappy", ""]),
    data=st.one_of(st.binary(max_size=200), st.binary(max_size=200).map(gzip.compress)),
    edits=EDITS,
    limit=st.one_of(st.none(), st.integers(0, 300)),
)
def test_decompress_any_input(encoding: str, data: bytes, edits: List[Any], limit: Any) -> None:
    try:
        out = wire.decompress(encoding, mutate(data, edits), limit)
    except (status.DecompressionError, status.MessageTooLarge, status.UnsupportedEncoding):
        return
    assert limit is None or len(out) <= limit


def test_decompress_identity_respects_the_limit() -> None:
    """Found by test_decompress_any_input: identity ignored max_length. Fixed in wire.decompress."""
    with pytest.raises(status.MessageTooLarge):
        wire.decompress("identity", b"\x00\x01", 1)


@fuzz(200)
@given(value=st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=40)))
def test_header_parsers_never_raise(value: Any) -> None:
    assert isinstance(wire.parse_accept_encoding(value), frozenset)
    code, number = status.parse_grpc_status(value)
    assert codes.CODE_NAMES[code] and StatusCode.from_number(code) is not None
    assert number is None or (code == codes.Code.UNKNOWN and number >= len(codes.CODE_NAMES))


@fuzz(200)
@given(number=st.integers(-(2**40), 2**40))
def test_status_tables_total(number: int) -> None:
    assert StatusCode.from_number(codes.status_from_http(number)) is not None
    if number >= 0:
        code = codes.status_from_rst_stream(number, past_deadline=True)
        assert StatusCode.from_number(code) is not None
        assert isinstance(frames.http2_error_name(number), str)


@fuzz(300)
@given(data=st.binary(max_size=300), cuts=CUTS, settings_first=st.booleans())
def test_frame_reader_raises_only_frame_errors(
    data: bytes, cuts: List[int], settings_first: bool
) -> None:
    """Whatever it is fed, the reader yields frames no longer than the limit, or raises a
    FrameError."""
    reader = frames.FrameReader(64, 100, magic=settings_first, settings_first=settings_first)
    try:
        for chunk in chunked(data, cuts):
            for _, _, stream_id, payload in read_frames(reader, chunk):
                assert len(payload) <= 64 and stream_id < 2**31
    except frames.FrameError:
        pass


@fuzz(200)
@given(target=st.text(max_size=40))
def test_parse_target_raises_only_value_error(target: str) -> None:
    targets = pytest.importorskip("minigrpc.protocol.targets")
    try:
        targets.parse_target(target)
    except ValueError:
        pass
