"""The pure codecs of minigrpc.protocol.wire, with hypothesis round-trips (PROTOCOL-HTTP2.md,
"Requests" to
"Responses")."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigrpc.protocol import wire
from minigrpc.protocol.enums import Compression
from tests.support.strategies import pieces

# ---- Length-Prefixed-Message ------------------------------------------------------------------


def test_empty_message_is_five_zero_bytes() -> None:
    assert wire.encode_message(b"") == b"\x00\x00\x00\x00\x00"
    assert wire.encode_message(b"\x08\x01") == b"\x00\x00\x00\x00\x02\x08\x01"
    assert wire.encode_message(b"x", compressed=True) == b"\x01\x00\x00\x00\x01x"


@given(
    st.lists(st.tuples(st.booleans(), st.binary(max_size=300)), max_size=8),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20),
)
def test_decoder_reassembles_any_chunking(messages: list, cuts: list) -> None:
    stream = b"".join(wire.encode_message(m, c) for c, m in messages)
    decoder = wire.MessageDecoder(max_length=None)
    out = [message for piece in pieces(stream, cuts) for message in decoder.feed(piece)]
    assert out == [(c, m) for c, m in messages]
    assert decoder.at_boundary and decoder.buffered == 0


@pytest.mark.parametrize("size", [0, 64 * 1024 - 1, 64 * 1024, 1 << 20])
def test_frame_message_is_encode_message_without_the_copy(size: int) -> None:
    payload = b"\x07" * size
    framed = wire.frame_message(payload, compressed=True)
    if size < 64 * 1024:
        assert framed == wire.encode_message(payload, compressed=True)
    else:
        prefix, body = framed
        assert body is payload
        assert prefix + body == wire.encode_message(payload, compressed=True)


def test_decoder_keeps_whole_bytes_chunks_but_copies_mutable_ones() -> None:
    """A DATA payload taken whole is kept, not copied; a mutable buffer is always copied, so
    a caller that reuses it cannot change a message already decoded."""
    body = bytes(range(256)) * 64
    decoder = wire.MessageDecoder(max_length=None)
    assert decoder.feed(wire.message_prefix(len(body) * 2)) == []
    assert decoder.feed(body) == []
    reused = bytearray(body)
    ((compressed, payload),) = decoder.feed(reused)
    reused[:] = bytes(len(reused))
    assert not compressed and type(payload) is bytes and payload == body * 2


def test_decoder_checks_limit_from_prefix_before_buffering() -> None:
    decoder = wire.MessageDecoder(max_length=10)
    with pytest.raises(wire.MessageTooLarge) as info:
        # Only the prefix arrives: it claims 4 GiB - 1 and must be refused at once.
        decoder.feed(b"\x00\xff\xff\xff\xff")
    assert info.value.length == 0xFFFFFFFF and info.value.limit == 10
    assert str(info.value) == "grpc: received message larger than max (4294967295 vs. 10)"


def test_decoder_limit_is_inclusive() -> None:
    decoder = wire.MessageDecoder(max_length=3)
    assert decoder.feed(wire.encode_message(b"abc")) == [(False, b"abc")]


def test_decoder_rejects_bad_flag() -> None:
    with pytest.raises(wire.ProtocolViolation):
        wire.MessageDecoder().feed(b"\x02\x00\x00\x00\x00")


def test_decoder_partial_state() -> None:
    decoder = wire.MessageDecoder()
    assert decoder.feed(b"\x00\x00\x00\x00\x05ab") == []
    assert not decoder.at_boundary
    assert decoder.buffered == 2
    assert decoder.feed(b"cde") == [(False, b"abcde")]


# ---- grpc-timeout -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "header"),
    [
        (0.1, "100000u"),
        (1.5, "1500000u"),
        (100, "100000m"),
        (0.000000001, "1n"),
        (0.099999999, "99999999n"),
        (0, "0n"),
        (-3, "0n"),
        (3600 * 99_999_999 * 10, "99999999H"),
    ],
)
def test_encode_timeout_matches_grpc_go(seconds: float, header: str) -> None:
    assert wire.encode_timeout(seconds) == header


@given(st.floats(min_value=1e-9, max_value=1e9, allow_nan=False))
def test_timeout_round_trip_never_shortens(seconds: float) -> None:
    header = wire.encode_timeout(seconds)
    digits = header[:-1]
    assert 1 <= len(digits) <= 8 and digits.isdigit()
    decoded = wire.decode_timeout(header)
    assert decoded >= seconds * (1 - 1e-9) - 1e-9
    # Never more than one unit longer than asked.
    assert decoded <= seconds * 1.01 + 1e-6 or header.endswith(("M", "H"))


@pytest.mark.parametrize("bad", ["", "1", "S", "1x", "-1S", "1234567890S", "1.5S", "١S"])
def test_decode_timeout_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError, match="malformed grpc-timeout"):
        wire.decode_timeout(bad)


def test_decode_timeout_units() -> None:
    assert wire.decode_timeout(b"2H") == 7200
    assert wire.decode_timeout("3M") == 180
    assert wire.decode_timeout("4S") == 4
    assert wire.decode_timeout("5m") == pytest.approx(0.005)
    assert wire.decode_timeout("6u") == pytest.approx(6e-6)
    assert wire.decode_timeout("7n") == pytest.approx(7e-9)


# ---- metadata ---------------------------------------------------------------------------------


def test_encode_metadata_binary_is_unpadded_base64() -> None:
    assert wire.encode_metadata([("x-custom", "v"), ("x-custom-bin", b"\xab\xab\xab")]) == [
        (b"x-custom", b"v"),
        (b"x-custom-bin", b"q6ur"),
    ]
    assert wire.encode_metadata([("t-bin", b"\x00\x01")]) == [(b"t-bin", b"AAE")]


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ([("X-Upper", "v")], "invalid"),
        ([("bad key", "v")], "invalid"),
        ([("grpc-status", "0")], "reserved"),
        ([(":path", "/x")], "invalid"),
        ([("te", "trailers")], "reserved"),
        ([("content-type", "x")], "reserved"),
        ([("x", "line\nbreak")], "printable ASCII"),
        ([("x", "caf\u00e9")], "printable ASCII"),
        ([("x", b"\xff")], "not ASCII"),
        ([("x-bin", 5)], "must be bytes"),
        ([("x", 5)], "must be str"),
        ([("x",)], "pairs"),
    ],
)
def test_validate_metadata_rejects(metadata: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.validate_metadata(metadata)


def test_decode_metadata_drops_transport_headers_and_splits_bin() -> None:
    headers = [
        (b":status", b"200"),
        (b"content-type", b"application/grpc"),
        (b"grpc-status", b"0"),
        (b"grpc-message", b""),
        (b"user-agent", b"grpc-go/1.0"),
        (b"x-a", b"one, two"),
        (b"x-b-bin", b"q6ur,AAE="),
        (b"x-c-bin", b"!!not base64!!"),
        (b"grpc-status-details-bin", b"CAI"),
    ]
    assert wire.decode_metadata(headers) == (
        ("user-agent", "grpc-go/1.0"),
        ("x-a", "one, two"),
        ("x-b-bin", b"\xab\xab\xab"),
        ("x-b-bin", b"\x00\x01"),
        ("grpc-status-details-bin", b"\x08\x02"),
    )


@given(st.binary(max_size=200))
def test_binary_metadata_round_trip(value: bytes) -> None:
    (key, encoded), = wire.encode_metadata([("k-bin", value)])
    assert wire.decode_metadata([(key, encoded)]) == (("k-bin", value),) or (
        # An empty value encodes to an empty field, which splits into one empty part.
        value == b"" and wire.decode_metadata([(key, encoded)]) == (("k-bin", b""),)
    )


# ---- grpc-message percent-encoding --------------------------------------------------------------


def test_percent_encoding_examples_from_grpcio() -> None:
    assert wire.percent_encode("\t\nbad ☺ 100%\r\n") == "%09%0Abad %E2%98%BA 100%25%0D%0A"
    special = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
    encoded = (
        "%09%0Atest with whitespace%0D%0Aand Unicode BMP %E2%98%BA and non-BMP %F0%9F%98%88%09%0A"
    )
    assert wire.percent_encode(special) == encoded
    assert wire.percent_decode(encoded) == special


@given(st.text())
def test_percent_round_trip(message: str) -> None:
    encoded = wire.percent_encode(message)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    expected = message.encode("utf-8", "replace").decode("utf-8")
    assert wire.percent_decode(encoded) == expected


@given(st.binary())
def test_percent_decode_never_fails(raw: bytes) -> None:
    assert isinstance(wire.percent_decode(raw), str)


def test_percent_decode_keeps_malformed_sequences_and_whitespace() -> None:
    assert wire.percent_decode("%zz 50% %4") == "%zz 50% %4"
    assert wire.percent_decode("  padded  ") == "  padded  "
    assert wire.percent_decode("%FF") == "\ufffd"


# ---- compression ------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity"])
@given(data=st.binary(max_size=2000))
def test_compression_round_trip(encoding: str, data: bytes) -> None:
    assert wire.decompress(encoding, wire.compress(encoding, data), None) == data


def test_gzip_is_rfc1952_and_deflate_is_zlib() -> None:
    assert gzip.decompress(wire.compress("gzip", b"hello")) == b"hello"
    assert zlib.decompress(wire.compress("deflate", b"hello")) == b"hello"
    assert wire.decompress("gzip", gzip.compress(b"abc"), 10) == b"abc"


def test_decompress_is_bounded() -> None:
    bomb = wire.compress("gzip", b"\0" * 10_000_000)
    assert len(bomb) < 20_000
    with pytest.raises(wire.MessageTooLarge):
        wire.decompress("gzip", bomb, 4 * 1024 * 1024)


@pytest.mark.parametrize("body", [b"", b"garbage", wire.compress("gzip", b"x" * 100)[:-6]])
def test_decompress_corrupt(body: bytes) -> None:
    with pytest.raises(wire.DecompressionError):
        wire.decompress("gzip", body, None)


def test_unknown_encoding() -> None:
    with pytest.raises(wire.UnsupportedEncoding):
        wire.decompress("snappy", b"", None)
    with pytest.raises(wire.UnsupportedEncoding):
        wire.compress("br", b"")


def test_accept_encoding_and_compression_names() -> None:
    assert wire.parse_accept_encoding(b"identity, deflate, gzip") == {"identity", "deflate", "gzip"}
    assert wire.parse_accept_encoding(None) == frozenset()
    assert wire.compression_name(Compression.Gzip) == "gzip"
    assert wire.compression_name(Compression.Deflate) == "deflate"
    assert wire.compression_name(Compression.NoCompression) is None
    assert wire.compression_name(None) is None
    assert [c.value for c in Compression] == [0, 1, 2]

