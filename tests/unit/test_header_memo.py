"""The remembering HPACK encoder and decoder give exactly what hpack's own give, block by block.

Each test drives a plain ``hpack`` coder and a remembering one (:mod:`minigrpc.header_memo`)
through the same sequence, where blocks repeat (remembered), the dynamic table changes between
them (forgotten), the table is resized (RFC 7541 §6.3), fields are sensitive (§6.2.3), and blocks
are corrupted (failures are never remembered).
"""

import random
from typing import Any, List, Tuple

import pytest
from hpack import Decoder, Encoder, HPACKError, NeverIndexedHeaderTuple

from minigrpc import header_memo
from minigrpc.header_memo import MemoDecoder, MemoEncoder
from minigrpc.headers import request_headers

#: A warm client's request block, as minigrpc builds it.
REQUEST = request_headers(path="/bench.Echo/Echo", authority="localhost", user_agent="minigrpc")


def _blocks(rng: random.Random, count: int) -> List[Any]:
    """Header lists as a client sends them: mostly the same, sometimes with a deadline, new
    metadata or a credential (plain or never indexed)."""
    lists: List[Any] = []
    for _ in range(count):
        roll = rng.random()
        headers: List[Any] = list(REQUEST)
        if roll < 0.2:
            headers.append((b"grpc-timeout", f"{rng.randrange(1, 99999)}u".encode()))
        elif roll < 0.3:
            headers.append((b"x-trace", f"{rng.randrange(5)}".encode()))
        elif roll < 0.4:
            headers.append(NeverIndexedHeaderTuple(b"authorization", b"Bearer abc"))
        elif roll < 0.45:
            headers.append((b"authorization", b"Bearer abc"))
        elif roll < 0.5:
            headers.append((b"x-big", b"v" * rng.randrange(100, 3000)))
        lists.append(headers)
    return lists


@pytest.mark.parametrize("seed", range(5))
def test_encoder_gives_hpack_bytes(seed: int) -> None:
    rng = random.Random(seed)
    plain, memo = Encoder(), MemoEncoder()
    reader = Decoder()
    hits = 0
    previous: Tuple[Any, bytes] = ((), b"")
    for headers in _blocks(rng, 400):
        if rng.random() < 0.03:
            size = rng.choice([0, 256, 4096, 1024])
            plain.header_table_size = memo.header_table_size = size
        huffman = rng.random() < 0.9
        expected = plain.encode(headers, huffman)
        block = memo.encode(list(headers), huffman)
        assert block == expected
        assert reader.decode(block, raw=True) == [tuple(field) for field in headers]
        key = (tuple(map(type, headers)), tuple(headers), huffman)
        if key == previous[0] and block is previous[1]:
            hits += 1  # the very same bytes object: taken from memory, not encoded again
        previous = (key, block)
    assert hits > 10


def test_sensitive_and_plain_fields_are_remembered_apart() -> None:
    plain, memo = Encoder(), MemoEncoder()
    secret = [(b":path", b"/a"), NeverIndexedHeaderTuple(b"authorization", b"x")]
    open_ = [(b":path", b"/a"), (b"authorization", b"x")]
    for headers in (secret, secret, open_, open_, secret, open_):
        assert memo.encode(headers) == plain.encode(headers)


def _decode_or_error(decoder: Decoder, block: bytes) -> Any:
    try:
        return decoder.decode(block, raw=True)
    except (HPACKError, IndexError, TypeError, UnicodeDecodeError) as exc:
        return type(exc)


@pytest.mark.parametrize("seed", range(5))
def test_decoder_gives_hpack_headers(seed: int) -> None:
    rng = random.Random(seed)
    sender = Encoder()
    plain = Decoder()
    memo = MemoDecoder(plain.max_header_list_size, plain.max_allowed_table_size)
    hits = 0
    for headers in _blocks(rng, 400):
        if rng.random() < 0.03:
            size = rng.choice([0, 256, 1024, 4096])
            sender.header_table_size = size
        block = sender.encode(headers)
        if rng.random() < 0.05:
            # A corrupted copy first: both fail alike (or decode alike), and it is not kept.
            broken = bytearray(block)
            broken[rng.randrange(len(broken))] = rng.randrange(256)
            assert _decode_or_error(memo, bytes(broken)) == _decode_or_error(plain, bytes(broken))
            # The tables may now differ from the sender's: a new connection, as after an error.
            sender, plain = Encoder(), Decoder()
            memo = MemoDecoder(plain.max_header_list_size, plain.max_allowed_table_size)
            continue
        if rng.random() < 0.02:
            limit = rng.choice([100, 65536])
            plain.max_header_list_size = memo.max_header_list_size = limit
        for _ in range(2):  # the second decode of the same bytes may come from memory
            expected = _decode_or_error(plain, block)
            before = len(memo._memo)
            assert _decode_or_error(memo, block) == expected
            hits += len(memo._memo) == before and isinstance(expected, list)
    assert hits > 0


def test_memory_is_bounded() -> None:
    memo = MemoDecoder(65536, 4096)
    sender = Encoder()
    for number in range(1000):
        # Literal fields without indexing never change the table: every block is kept, then
        # the memory starts over.
        block = sender.encode([(b"x-n", str(number).encode(), True)])
        assert memo.decode(block, raw=True) == [(b"x-n", str(number).encode())]
        assert len(memo._memo) <= header_memo.MEMO_SIZE


def test_install_keeps_h2s_limits() -> None:
    import h2.connection

    from minigrpc import http2

    conn = h2.connection.H2Connection(config=http2.client_config())
    limit = conn.decoder.max_header_list_size
    header_memo.install(conn)
    assert isinstance(conn.decoder, MemoDecoder) and isinstance(conn.encoder, MemoEncoder)
    assert conn.decoder.max_header_list_size == limit


# -- the opening memory: a connection's first blocks, remembered across connections ---------------


def _opening_blocks(rng: random.Random) -> List[Any]:
    """A connection's first header lists, from a small pool so that connections share them."""
    first = [list(REQUEST), [*REQUEST, (b"grpc-timeout", b"20S")]][rng.randrange(2)]
    lists: List[Any] = [first]
    for _ in range(rng.randrange(1, 6)):
        lists.append(rng.choice([list(REQUEST), [*REQUEST, (b"x-trace", b"1")],
                                 [*REQUEST, (b"x-big", b"v" * 1500)]]))
    return lists


@pytest.mark.parametrize("seed", range(4))
def test_new_connections_code_their_first_blocks_as_hpack_does(seed: int) -> None:
    """Fresh coders (new connections) go through the same openings, with now and then a table
    resized by SETTINGS (RFC 7541 §4.2), a resize inside a block (§6.3) or a corrupted block:
    every block is coded exactly as plain hpack codes it, and the openings are remembered."""
    rng = random.Random(seed)
    header_memo._OPENING_DECODED.clear()
    header_memo._OPENING_ENCODED.clear()
    replayed = 0
    for _ in range(150):
        plain_encoder, memo_encoder = Encoder(), MemoEncoder()
        sender, plain, memo = Encoder(), Decoder(), MemoDecoder(65536, 4096)
        if rng.random() < 0.1:
            plain_encoder.header_table_size = memo_encoder.header_table_size = 1024
        if rng.random() < 0.1:
            sender.header_table_size = 2048  # the next block starts with a size update
        for headers in _opening_blocks(rng):
            block = memo_encoder.encode(list(headers))
            assert block == plain_encoder.encode(headers)
            sent = sender.encode(headers)
            if rng.random() < 0.03:
                broken = bytearray(sent)
                broken[rng.randrange(len(broken))] = rng.randrange(256)
                assert _decode_or_error(memo, bytes(broken)) == _decode_or_error(
                    plain, bytes(broken))
                break  # the connection ends with the error
            changes = memo.header_table.changes
            decoded = _decode_or_error(memo, sent)
            assert decoded == _decode_or_error(plain, sent)
            table = memo.header_table
            assert list(table.dynamic_entries) == list(plain.header_table.dynamic_entries)
            assert list(memo_encoder.header_table.dynamic_entries) == list(
                plain_encoder.header_table.dynamic_entries)
            replayed += table.changes > changes and table.lineage is not None
    assert replayed > 50
    assert len(header_memo._OPENING_DECODED) <= header_memo.OPENING_SIZE


def test_a_short_block_standing_for_a_long_list_is_not_kept() -> None:
    """A block that indexes one large entry again and again decodes to far more than it
    weighs: the opening memory keeps no such list (it would hold what the client chose)."""
    header_memo._OPENING_DECODED.clear()
    sender = Encoder()
    fields = [(b"x-large", b"v" * 400)] * 100
    block = sender.encode(fields)
    assert len(block) <= header_memo.OPENING_BLOCK_SIZE
    for _ in range(2):
        assert MemoDecoder(1 << 20, 4096).decode(block, raw=True) == fields
    assert not header_memo._OPENING_DECODED


def test_the_same_bytes_after_different_openings_decode_apart() -> None:
    """An index into the dynamic table (RFC 7541 §2.3.3) means what the blocks before it added:
    the opening memory remembers a block with those blocks, not alone."""
    for name in (b"x-a", b"x-b", b"x-a"):
        sender, memo = Encoder(), MemoDecoder(65536, 4096)
        assert memo.decode(sender.encode([(name, b"1")]), raw=True) == [(name, b"1")]
        again = sender.encode([(name, b"1")])
        assert again == b"\xbe"  # the first dynamic entry, the same bytes on both connections
        assert memo.decode(again, raw=True) == [(name, b"1")]
