"""HPACK coding remembered while the dynamic table stands still: the same block, the same bytes.

Once a connection is warm, the server receives the same request header block for every call of
a method and sends the same response headers and trailers back, each field of them an index
into the HPACK tables (RFC 7541 §6.1).  Coding such a block changes nothing (RFC 7541 §3.2:
only the literal representations "with incremental indexing", RFC 7541 §6.2.1, and dynamic
table size updates, RFC 7541 §6.3, touch the dynamic table), so its result depends on the
block and the table alone, and
``hpack`` would redo the same work for every call: for a unary call on a warm connection, a
fifth of what h2 spent on the client side when the client ran on h2 (the client's own
connection, :mod:`minigrpc.client_http2`, remembers its blocks the same way).

:class:`MemoEncoder` and :class:`MemoDecoder` are ``hpack``'s encoder and decoder with a small
memory of the blocks whose coding left the table unchanged, valid while it stays so: every
change of the table (an entry added, its size changed) forgets them all, because the indices of
the dynamic entries shift (RFC 7541 §2.3.3).  The result is the one ``hpack`` computes, byte for
byte and header for header; a block that fails to decode is never remembered, so it fails again
the same way.  The memory holds at most :data:`MEMO_SIZE` blocks, so a peer that sends a new
block each time costs a dictionary lookup per block, and never memory.

A connection's first blocks are another matter: every table starts empty (RFC 7541 §2.3.2),
so the first block a client sends, and the first few after it, are the same bytes on every
connection it opens, and each is decoded (Huffman, literals, table inserts) from scratch; so
are the first response headers and trailers the server encodes.  Their coding is a function
of the blocks coded since the table was new, and nothing else: the *opening* memory
(:data:`OPENING_DEPTH` blocks deep, shared by every connection of the process) keeps, for such
a sequence, the result and the entries the block added to the table, which a new connection
replays instead of coding again.  A block whose coding evicted an entry or resized the table
ends the opening, as does a change of the table made any other way (a SETTINGS change of its
size); from there on a connection only has its own memory.
"""

from typing import Any, Dict, Iterable, List, Optional, Tuple

import h2.connection
from hpack import Decoder, Encoder
from hpack.table import HeaderTable

#: Blocks remembered per direction of a connection (more are not kept: the memory starts over).
MEMO_SIZE = 32
#: How many of a connection's first blocks, per direction, the opening memory covers.
OPENING_DEPTH = 3
#: The largest block the opening memory keeps, encoded and decoded; the blocks of a connection's
#: first call are literals, a few hundred bytes.
OPENING_BLOCK_SIZE = 1024
#: Opening sequences remembered per direction, for the whole process (then it starts over).
OPENING_SIZE = 64

#: The opening memories (module docstring), shared by every connection: a decoded block's
#: headers, an encoded block's bytes, with the entries each added to the table.
_OPENING_DECODED: Dict[Any, Tuple[Tuple[Any, ...], Tuple[Tuple[bytes, bytes], ...]]] = {}
_OPENING_ENCODED: Dict[Any, Tuple[bytes, Tuple[Tuple[bytes, bytes], ...]]] = {}


class CountingTable(HeaderTable):
    """``hpack``'s dynamic table with a counter of its changes (RFC 7541 §4)."""

    def __init__(self) -> None:
        super().__init__()
        #: Incremented whenever an entry is added or the maximum size changes.
        self.changes = 0
        #: The keys of the blocks coded since the table was new, while the opening memory
        #: covers them; None once the table is past its opening (module docstring).
        self.lineage: Optional[Tuple[Any, ...]] = ()

    def add(self, name: bytes, value: bytes) -> None:
        self.changes += 1
        self.lineage = None  # the opening paths below set it again
        super().add(name, value)

    @property
    def maxsize(self) -> int:
        return HeaderTable.maxsize.fget(self)  # type: ignore[attr-defined]

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        self.changes += 1
        self.lineage = None
        HeaderTable.maxsize.fset(self, value)  # type: ignore[attr-defined]

    def opening_key(self, block_key: Any) -> Optional[Tuple[Any, ...]]:
        """The opening memory's key for coding ``block_key`` now, or None when the table is
        past its opening."""
        lineage = self.lineage
        if lineage is None or len(lineage) >= OPENING_DEPTH:
            self.lineage = None
            return None
        return (*lineage, block_key)

    def added_since(self, changes: int, entries: int) -> Optional[Tuple[Tuple[bytes, bytes], ...]]:
        """The entries added since the table had ``changes`` changes and ``entries`` entries,
        oldest first; None when anything else happened meanwhile (an eviction, a resize)."""
        added = self.changes - changes
        if len(self.dynamic_entries) != entries + added:
            return None
        return tuple(reversed([self.dynamic_entries[index] for index in range(added)]))

    def replay(self, key: Tuple[Any, ...], entries: Tuple[Tuple[bytes, bytes], ...]) -> None:
        """Add what a remembered opening block added, as coding it would have."""
        for name, value in entries:
            self.add(name, value)
        self.lineage = key


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
        if table.lineage is not None:
            opening = table.opening_key(key)
            if opening is not None and not table.resized:
                return self._encode_opening(headers, huffman, opening)
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

    def _encode_opening(self, headers: Tuple[Any, ...], huffman: bool,
                        opening: Tuple[Any, ...]) -> bytes:
        table = self.header_table
        known = _OPENING_ENCODED.get(opening)
        if known is not None:
            table.replay(opening, known[1])
            return known[0]
        changes, entries = table.changes, len(table.dynamic_entries)
        table.lineage = None  # until the block is coded and remembered
        block: bytes = super().encode(headers, huffman)
        added = table.added_since(changes, entries)
        if added is not None and len(block) <= OPENING_BLOCK_SIZE:
            table.lineage = opening
            _remember(_OPENING_ENCODED, opening, (block, added), OPENING_SIZE)
        return block


class MemoDecoder(Decoder):
    """``hpack.Decoder``, remembering the blocks whose decoding left the table unchanged.

    Only ``raw`` decoding (bytes pairs, what h2 asks for) is remembered.  The limits a result
    was checked against (``max_header_list_size``, ``max_allowed_table_size``) are part of what
    must match.  Past the opening, blocks longer than :attr:`remember_limit` are decoded
    afresh every time.
    """

    #: The longest block a connection remembers the decoding of (past its opening).
    remember_limit = 1 << 30

    def __init__(self, max_header_list_size: int, max_allowed_table_size: int) -> None:
        super().__init__(max_header_list_size)
        self.header_table: CountingTable = CountingTable()
        self.max_allowed_table_size = max_allowed_table_size
        self._memo: Dict[bytes, Tuple[Tuple[int, int, int], Tuple[Any, ...]]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Iterable[Any]:
        if not raw:
            return super().decode(data, raw)
        key = bytes(data)
        table = self.header_table
        if table.lineage is not None:
            opening = table.opening_key(
                (key, self.max_header_list_size, self.max_allowed_table_size)
            )
            if opening is not None and len(key) <= OPENING_BLOCK_SIZE:
                return self._decode_opening(key, opening)
            table.lineage = None
        state = (self.header_table.changes, self.max_header_list_size, self.max_allowed_table_size)
        if len(key) > self.remember_limit:
            return Decoder.decode(self, key, raw)
        known = self._memo.get(key)
        if known is not None and known[0] == state:
            return list(known[1])
        headers: List[Any] = list(super().decode(data, raw))
        if self.header_table.changes == state[0]:
            _remember(self._memo, key, (state, tuple(headers)))
        return headers

    def _decode_opening(self, key: bytes, opening: Tuple[Any, ...]) -> List[Any]:
        table = self.header_table
        known = _OPENING_DECODED.get(opening)
        if known is not None:
            table.replay(opening, known[1])
            return list(known[0])
        changes, entries = table.changes, len(table.dynamic_entries)
        table.lineage = None  # until the block is decoded and remembered (it may fail)
        headers: List[Any] = list(Decoder.decode(self, key, True))
        added = table.added_since(changes, entries)
        if added is not None:
            table.lineage = opening
            # A short block can stand for a long list (fields indexed again and again): the
            # memory keeps lists no longer than a block, so it stays small whatever is sent.
            if sum(len(name) + len(value) for name, value in headers) <= OPENING_BLOCK_SIZE:
                _remember(_OPENING_DECODED, opening, (tuple(headers), added), OPENING_SIZE)
        return headers


def _remember(memo: Dict[Any, Any], key: Any, value: Any, size: int = MEMO_SIZE) -> None:
    if len(memo) >= size:
        memo.clear()
    memo[key] = value


def install(conn: h2.connection.H2Connection) -> None:
    """Give a new connection (nothing sent or received yet) the remembering encoder and
    decoder, with the limits h2 gave its own."""
    decoder = conn.decoder
    conn.encoder = MemoEncoder()
    conn.decoder = MemoDecoder(decoder.max_header_list_size, decoder.max_allowed_table_size)
