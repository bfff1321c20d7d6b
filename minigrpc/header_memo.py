"""HPACK coding remembered while the dynamic table stands still: the same block, the same bytes.

Once a connection is warm, a client sends the same request header block for every call of a
method and receives the same response headers and trailers back, each field of them an index
into the HPACK tables (RFC 7541 §6.1).  Coding such a block changes nothing (RFC 7541 §3.2:
only the literal representations "with incremental indexing", RFC 7541 §6.2.1, and dynamic
table size updates, RFC 7541 §6.3, touch the dynamic table), so its result depends on the
block and the table alone, and
``hpack`` would redo the same work for every call: for a unary call on a warm connection, a
fifth of what h2 spends on the client side.

:class:`MemoEncoder` and :class:`MemoDecoder` are ``hpack``'s encoder and decoder with a small
memory of the blocks whose coding left the table unchanged, valid while it stays so: every
change of the table (an entry added, its size changed) forgets them all, because the indices of
the dynamic entries shift (RFC 7541 §2.3.3).  The result is the one ``hpack`` computes, byte for
byte and header for header; a block that fails to decode is never remembered, so it fails again
the same way.  The memory holds at most :data:`MEMO_SIZE` blocks, so a peer that sends a new
block each time costs a dictionary lookup per block, and never memory.
"""

from typing import Any, Dict, Iterable, List, Tuple

import h2.connection
from hpack import Decoder, Encoder
from hpack.table import HeaderTable

#: Blocks remembered per direction of a connection (more are not kept: the memory starts over).
MEMO_SIZE = 32


class CountingTable(HeaderTable):
    """``hpack``'s dynamic table with a counter of its changes (RFC 7541 §4)."""

    def __init__(self) -> None:
        super().__init__()
        #: Incremented whenever an entry is added or the maximum size changes.
        self.changes = 0

    def add(self, name: bytes, value: bytes) -> None:
        self.changes += 1
        super().add(name, value)

    @property
    def maxsize(self) -> int:
        return HeaderTable.maxsize.fget(self)  # type: ignore[attr-defined]

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        self.changes += 1
        HeaderTable.maxsize.fset(self, value)  # type: ignore[attr-defined]


class MemoEncoder(Encoder):
    """``hpack.Encoder``, remembering the blocks whose encoding added nothing to the table."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: CountingTable = CountingTable()
        self._memo: Dict[Any, Tuple[int, bytes]] = {}

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        headers = tuple(headers)
        table = self.header_table
        # The tuple types are part of the key: a NeverIndexedHeaderTuple equals the plain tuple
        # with the same fields, but is encoded as never indexed (RFC 7541 §6.2.3).
        key = (tuple(map(type, headers)), headers, huffman)
        pending_resize = table.resized  # a size update (RFC 7541 §6.3) starts the next block
        if not pending_resize:
            known = self._memo.get(key)
            if known is not None and known[0] == table.changes:
                return known[1]
        changes = table.changes
        block: bytes = super().encode(headers, huffman)
        if table.changes == changes and not pending_resize:
            _remember(self._memo, key, (changes, block))
        return block


class MemoDecoder(Decoder):
    """``hpack.Decoder``, remembering the blocks whose decoding left the table unchanged.

    Only ``raw`` decoding (bytes pairs, what h2 asks for) is remembered.  The limits a result
    was checked against (``max_header_list_size``, ``max_allowed_table_size``) are part of what
    must match.
    """

    def __init__(self, max_header_list_size: int, max_allowed_table_size: int) -> None:
        super().__init__(max_header_list_size)
        self.header_table: CountingTable = CountingTable()
        self.max_allowed_table_size = max_allowed_table_size
        self._memo: Dict[bytes, Tuple[Tuple[int, int, int], Tuple[Any, ...]]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Iterable[Any]:
        if not raw:
            return super().decode(data, raw)
        key = bytes(data)
        state = (self.header_table.changes, self.max_header_list_size, self.max_allowed_table_size)
        known = self._memo.get(key)
        if known is not None and known[0] == state:
            return list(known[1])
        headers: List[Any] = list(super().decode(data, raw))
        if self.header_table.changes == state[0]:
            _remember(self._memo, key, (state, tuple(headers)))
        return headers


def _remember(memo: Dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value


def install(conn: h2.connection.H2Connection) -> None:
    """Give a new connection (nothing sent or received yet) the remembering encoder and
    decoder, with the limits h2 gave its own."""
    decoder = conn.decoder
    conn.encoder = MemoEncoder()
    conn.decoder = MemoDecoder(decoder.max_header_list_size, decoder.max_allowed_table_size)
