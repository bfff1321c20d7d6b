"""minigrpc.http2.hpack_codec, the one-shot client's HPACK (RFC 7541), against the RFC and hpack.

* The examples of RFC 7541 Appendix C, decoded block by block with the dynamic table they
  leave behind, and its Huffman strings encoded.
* The Huffman code of Appendix B: canonical (what the decoder relies on), and every decoding
  error of RFC 7541 §5.2 (EOS, padding too long, padding that is not EOS).
* Integer bounds (RFC 7541 §5.1), index and size-update errors (RFC 7541 §2.3.3, §4.2, §6.3),
  eviction (RFC 7541 §4.4), the header-list limit.
* Differential fuzzing against the hpack library (the codec h2 uses): what hpack encodes,
  with Huffman coding and its dynamic table over several blocks, decodes to the same fields
  here; what this encoder writes decodes in hpack; and random or mutated blocks are rejected
  by both or accepted by both with the same fields and the same table afterwards.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import hpack
import pytest
from hpack.exceptions import HPACKError, OversizedHeaderListError

from minigrpc.http2 import hpack_codec
from minigrpc.http2.hpack_codec import Decoder, DecodingError, Encoder, HeaderListTooLarge

Fields = List[Tuple[bytes, bytes]]

# -- RFC 7541 Appendix C -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "prefix", "encoded"),
    [(10, 5, "0a"), (1337, 5, "1f9a0a"), (42, 8, "2a")],  # C.1.1, C.1.2, C.1.3
)
def test_integer_examples(value: int, prefix: int, encoded: str) -> None:
    assert hpack_codec.encode_integer(value, prefix).hex() == encoded
    assert hpack_codec.decode_integer(bytes.fromhex(encoded), 0, prefix) == (
        value, len(encoded) // 2
    )


@pytest.mark.parametrize(
    ("block", "field", "table_size"),
    [
        # C.2.1 literal with indexing, C.2.2 without indexing, C.2.3 never indexed, C.2.4 indexed
        ("400a637573746f6d2d6b65790d637573746f6d2d686561646572",
         (b"custom-key", b"custom-header"), 55),
        ("040c2f73616d706c652f70617468", (b":path", b"/sample/path"), 0),
        ("100870617373776f726406736563726574", (b"password", b"secret"), 0),
        ("82", (b":method", b"GET"), 0),
    ],
)
def test_field_representation_examples(
    block: str, field: Tuple[bytes, bytes], table_size: int
) -> None:
    decoder = Decoder()
    assert decoder.decode(bytes.fromhex(block)) == [field]
    assert decoder.size == table_size
    assert decoder.entries == ([field] if table_size else [])


_REQUEST_1 = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"),
              (b":authority", b"www.example.com")]
_REQUEST_2 = [*_REQUEST_1, (b"cache-control", b"no-cache")]
_REQUEST_3 = [(b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/index.html"),
              (b":authority", b"www.example.com"), (b"custom-key", b"custom-value")]
_REQUESTS = [(_REQUEST_1, 57), (_REQUEST_2, 110), (_REQUEST_3, 164)]
_RESPONSE_1 = [(b":status", b"302"), (b"cache-control", b"private"),
               (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
               (b"location", b"https://www.example.com")]
_RESPONSE_2 = [(b":status", b"307"), *_RESPONSE_1[1:]]
_RESPONSE_3 = [(b":status", b"200"), (b"cache-control", b"private"),
               (b"date", b"Mon, 21 Oct 2013 20:13:22 GMT"),
               (b"location", b"https://www.example.com"), (b"content-encoding", b"gzip"),
               (b"set-cookie", b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")]
_RESPONSES = [(_RESPONSE_1, 222), (_RESPONSE_2, 222), (_RESPONSE_3, 215)]

_EXAMPLES = {
    "C.3 requests": (4096, _REQUESTS, [
        "828684410f7777772e6578616d706c652e636f6d",
        "828684be58086e6f2d6361636865",
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
    ]),
    "C.4 requests, Huffman": (4096, _REQUESTS, [
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
    ]),
    "C.5 responses": (256, _RESPONSES, [
        "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a3231"
        "20474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
        "4803333037c1c0bf",
        "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738"
        "666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d33"
        "3630303b2076657273696f6e3d31",
    ]),
    "C.6 responses, Huffman": (256, _RESPONSES, [
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad1718"
        "63c78f0b97c8e9ae82ae43d3",
        "4883640effc1c0bf",
        "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7"
        "b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
    ]),
}


@pytest.mark.parametrize("name", sorted(_EXAMPLES))
def test_header_list_examples(name: str) -> None:
    """Three blocks on one connection: the fields and the dynamic table's size after each; the
    response examples run with a 256-octet table, so the third block evicts (RFC 7541 §4.4)."""
    table_size, expected, blocks = _EXAMPLES[name]
    decoder = Decoder(max_table_size=table_size)
    for block, (fields, size) in zip(blocks, expected):
        assert decoder.decode(bytes.fromhex(block)) == fields
        assert decoder.size == size
        assert decoder.size == sum(32 + len(n) + len(v) for n, v in decoder.entries)
    if name.startswith("C.6"):
        assert [name for name, _ in decoder.entries] == [
            b"set-cookie", b"content-encoding", b"date"
        ]


@pytest.mark.parametrize(
    ("text", "coded"),
    [
        (b"www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"),  # C.4.1
        (b"no-cache", "a8eb10649cbf"),  # C.4.2
        (b"custom-key", "25a849e95ba97d7f"),  # C.4.3
        (b"custom-value", "25a849e95bb8e8b4bf"),  # C.4.3
        (b"302", "6402"),  # C.6.1
        (b"private", "aec3771a4b"),  # C.6.1
        (b"https://www.example.com", "9d29ad171863c78f0b97c8e9ae82ae43d3"),  # C.6.1
        (b"gzip", "9bd9ab"),  # C.6.3
    ],
)
def test_huffman_examples(text: bytes, coded: str) -> None:
    assert hpack_codec.huffman_encode(text).hex() == coded
    assert hpack_codec.huffman_decode(bytes.fromhex(coded)) == text


# -- Appendix B and the rules of RFC 7541 §5.2 ------------------------------------------------


def test_huffman_code_is_canonical_and_complete() -> None:
    """Sorted by (length, code), each code is the previous plus one, shifted to its length:
    what the decoder's range search assumes. EOS is 30 ones; no octet is left out."""
    codes = hpack_codec.HUFFMAN_CODES
    assert len(codes) == 257 and codes[hpack_codec.EOS] == ((1 << 30) - 1, 30)
    ordered = sorted(codes, key=lambda pair: (pair[1], pair[0]))
    previous_code, previous_length = ordered[0]
    assert previous_code == 0
    for code, length in ordered[1:]:
        assert code == (previous_code + 1) << (length - previous_length)
        previous_code, previous_length = code, length
    # Kraft equality: a complete prefix code, so every bit string decodes or is a prefix.
    assert sum(2 ** (30 - length) for _, length in codes) == 2**30


def test_every_octet_round_trips() -> None:
    every = bytes(range(256))
    assert hpack_codec.huffman_decode(hpack_codec.huffman_encode(every)) == every
    assert hpack_codec.huffman_decode(hpack_codec.huffman_encode(every * 40)) == every * 40


@pytest.mark.parametrize(
    ("coded", "problem"),
    [
        ("ffffffff", "EOS"),  # EOS (30 ones) then 2 bits of padding
        ("1fffffffff", "EOS"),  # 'a' (00011), EOS, then 5 bits of padding
        ("ff", "longer than 7"),  # 8 bits of padding
        ("1fff", "longer than 7"),  # 'a' then 11 ones
        ("18", "not EOS"),  # 'a' (00011) then 000
        ("1e", "not EOS"),  # 'a' (00011) then 110
    ],
)
def test_huffman_errors(coded: str, problem: str) -> None:
    with pytest.raises(DecodingError, match=problem):
        hpack_codec.huffman_decode(bytes.fromhex(coded))
    # hpack rejects it too, as the name of a field that is otherwise well-formed.
    block = bytes.fromhex(f"00{0x80 | len(coded) // 2:02x}{coded}00")
    with pytest.raises(HPACKError):
        hpack.Decoder().decode(block)
    with pytest.raises(DecodingError, match=problem):
        Decoder().decode(block)


def test_huffman_short_padding_is_accepted() -> None:
    assert hpack_codec.huffman_decode(bytes.fromhex("1f")) == b"a"  # 00011 + 111
    assert hpack_codec.huffman_decode(b"") == b""


# -- RFC 7541 §2.3.3, §4.2, §4.4, §5.1, §6.3 and the header-list limit ------------------------


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("80", "index 0"),  # RFC 7541 §6.1: index 0 is not an entry
        ("be", "index 62"),  # the dynamic table is empty
        ("ff80808080800f", "continuation"),  # six continuation octets (RFC 7541 §5.1 bound)
        ("ff80", "ends inside an integer"),
        ("4005", "runs past"),  # a 5-octet name with no octets
        ("82" "20", "after a field"),  # a size update after a field (RFC 7541 §4.2)
        ("3fe21f", "above the 4096"),  # size update to 4097 (RFC 7541 §6.3)
        ("40", "ends inside"),  # a literal without its name's length
    ],
)
def test_decoding_errors(block: str, problem: str) -> None:
    with pytest.raises(DecodingError, match=problem):
        Decoder().decode(bytes.fromhex(block))
    with pytest.raises(HPACKError):
        hpack.Decoder().decode(bytes.fromhex(block))


def test_five_continuation_octets_are_accepted() -> None:
    """The RFC 7541 §5.1 bound is on more than five: 0x7f then five octets is still an integer."""
    value, end = hpack_codec.decode_integer(bytes.fromhex("7f8080808000"), 0, 7)
    assert (value, end) == (127, 6)


def test_size_updates_and_eviction() -> None:
    """Two size updates may open a block (RFC 7541 §4.2); shrinking evicts the oldest entries
    (RFC 7541 §4.4); an entry larger than the table empties it; size 0 keeps it empty."""
    decoder = Decoder()
    decoder.decode(bytes.fromhex("400161016140016201624001630163"))  # a: a, b: b, c: c
    assert decoder.entries == [(b"c", b"c"), (b"b", b"b"), (b"a", b"a")] and decoder.size == 102
    assert decoder.decode(bytes.fromhex("3f1f" "3f03" "be")) == [(b"c", b"c")]  # 62 then 34
    assert decoder.table_size == 34 and decoder.entries == [(b"c", b"c")]
    decoder.decode(bytes.fromhex("4001640164"))
    assert decoder.entries == [(b"d", b"d")]  # c evicted to make room
    decoder.decode(bytes.fromhex("4001650a") + b"0123456789")
    assert decoder.entries == [] and decoder.size == 0  # 43 octets > 34: table emptied
    decoder.decode(bytes.fromhex("20" "4001660166"))
    assert decoder.table_size == 0 and decoder.entries == []


def test_header_list_limit_is_checked_field_by_field() -> None:
    """A block that expands past the limit stops as it grows (RFC 7541 §7.3): one literal of
    100 octets, then 1000 indexed copies of it."""
    block = bytes.fromhex("400178") + bytes((100,)) + b"v" * 100 + b"\xbe" * 1000
    decoder = Decoder(max_header_list_size=1000)
    with pytest.raises(HeaderListTooLarge, match="1000"):
        decoder.decode(block)
    assert len(Decoder().decode(block)) == 1001


def test_encoder_shapes() -> None:
    """Whole static matches are indexed, the rest are literals without indexing (or never
    indexed), names indexed when the static table has them; a lowered table size is announced
    once, at the start of the next block."""
    encoder = Encoder(huffman=False)
    block = encoder.encode([(b":method", b"POST", False), (b"authorization", b"x", True),
                            (b"te", b"trailers", False)])
    assert block == bytes.fromhex("83" "1f08" "0178" "00" "0274650874726169" "6c657273")
    encoder.limit_table_size(8192)
    encoder.limit_table_size(100)
    encoder.limit_table_size(200)
    assert encoder.encode([(b":method", b"GET", False)]) == bytes.fromhex("3f45" "82")
    assert encoder.encode([(b":method", b"GET", False)]) == bytes.fromhex("82")


# -- differential fuzzing against hpack ----------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.fuzzing import fuzz, mutate  # noqa: E402

_NAMES = st.one_of(
    st.sampled_from([b":status", b"content-type", b"grpc-status", b"grpc-message", b"date",
                     b"set-cookie", b"x-custom", b"authorization", b"cookie"]),
    st.binary(min_size=1, max_size=12),
)
_VALUES = st.one_of(
    st.sampled_from([b"200", b"application/grpc", b"0", b"", b"private", b"gzip"]),
    st.binary(max_size=40),
    st.binary(max_size=300),
)
_FIELDS = st.lists(st.tuples(_NAMES, _VALUES), max_size=12)
_EDITS = st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 2), st.integers(0, 255)),
                  min_size=1, max_size=4)


def _theirs(decoder: hpack.Decoder, block: bytes) -> Optional[Fields]:
    try:
        return [(bytes(n), bytes(v)) for n, v in decoder.decode(block, raw=True)]
    except HPACKError:
        return None


def _ours(decoder: Decoder, block: bytes) -> Optional[Fields]:
    try:
        return decoder.decode(block)
    except DecodingError:
        return None


def _same_outcome(blocks: List[bytes], limit: int = 64 * 1024) -> Tuple[int, int]:
    """Decode the blocks with both decoders in step; they must agree on every block (fields,
    or failure and which one) and keep the same dynamic table. Returns (accepted, rejected)."""
    theirs = hpack.Decoder(max_header_list_size=limit)
    ours = Decoder(max_header_list_size=limit)
    for count, block in enumerate(blocks):
        expected = _theirs(theirs, block)
        got = _ours(ours, block)
        assert got == expected, f"block {count}: {block.hex()}"
        if got is None:
            return count, 1
        assert ours.size == theirs.header_table._current_size
        assert ours.entries == [tuple(map(bytes, e)) for e in theirs.header_table.dynamic_entries]
    return len(blocks), 0


@fuzz(300)
@given(st.lists(_FIELDS, min_size=1, max_size=5), st.booleans(),
       st.lists(st.sampled_from([0, 64, 256, 4096]), max_size=5))
def test_decodes_what_hpack_encodes(
    blocks: List[Fields], huffman: bool, table_sizes: List[int]
) -> None:
    """hpack's encoder indexes every field (RFC 7541 §6.2.1) and evicts as its table fills; a table
    size it lowers is announced by a size update (RFC 7541 §6.3)."""
    encoder = hpack.Encoder()
    encoded = []
    for index, fields in enumerate(blocks):
        if index < len(table_sizes):
            encoder.header_table_size = table_sizes[index]
        encoded.append(encoder.encode(fields, huffman=huffman))
    accepted, _ = _same_outcome(encoded)
    assert accepted == len(blocks)
    decoder = Decoder()
    assert [decoder.decode(block) for block in encoded] == blocks


@fuzz(300)
@given(st.lists(st.lists(st.tuples(_NAMES, _VALUES, st.booleans()), max_size=12), min_size=1,
                max_size=4), st.booleans(), st.sampled_from([None, 0, 100, 4096]))
def test_hpack_decodes_what_we_encode(
    blocks: List[List[Tuple[bytes, bytes, bool]]], huffman: bool, table_size: Optional[int]
) -> None:
    encoder = Encoder(huffman=huffman)
    decoder = hpack.Decoder(max_header_list_size=2**31)
    if table_size is not None:
        encoder.limit_table_size(table_size)
        decoder.max_allowed_table_size = table_size
    for fields in blocks:
        block = encoder.encode(fields)
        decoded = decoder.decode(block, raw=True)
        assert [(bytes(n), bytes(v)) for n, v in decoded] == [(n, v) for n, v, _ in fields]
        never = [isinstance(field, hpack.NeverIndexedHeaderTuple) for field in decoded]
        # A field found whole in the static table goes as its index, which is never "never".
        assert never == [
            sensitive and (n, v) not in hpack_codec.STATIC_TABLE for n, v, sensitive in fields
        ]
        assert not decoder.header_table.dynamic_entries


@fuzz(400)
@given(st.lists(st.binary(max_size=48), min_size=1, max_size=4))
def test_random_blocks_same_outcome(blocks: List[bytes]) -> None:
    _same_outcome(blocks)


@fuzz(400)
@given(st.lists(_FIELDS, min_size=1, max_size=3), st.booleans(), _EDITS,
       st.integers(0, 2), st.sampled_from([64 * 1024, 300]))
def test_mutated_blocks_same_outcome(
    blocks: List[Fields], huffman: bool, edits: List[Tuple[int, int, int]], which: int,
    limit: int,
) -> None:
    """Valid blocks with a few octets changed, inserted or deleted: both decoders accept with
    the same fields and table, or both reject; also with a small header-list limit, where
    both must fail on the same block and the same way."""
    encoder = hpack.Encoder()
    encoded = [encoder.encode(fields, huffman=huffman) for fields in blocks]
    target = min(which, len(encoded) - 1)
    encoded[target] = mutate(encoded[target], edits)
    theirs = hpack.Decoder(max_header_list_size=limit)
    ours = Decoder(max_header_list_size=limit)
    for block in encoded:
        try:
            expected: object = [(bytes(n), bytes(v)) for n, v in theirs.decode(block, raw=True)]
        except OversizedHeaderListError:
            expected = "too large"
        except HPACKError:
            expected = "invalid"
        try:
            got: object = ours.decode(block)
        except HeaderListTooLarge:
            got = "too large"
        except DecodingError:
            got = "invalid"
        assert got == expected, block.hex()
        if isinstance(got, str):
            break
        assert ours.entries == [tuple(map(bytes, e)) for e in theirs.header_table.dynamic_entries]
