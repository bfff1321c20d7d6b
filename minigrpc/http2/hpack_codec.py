"""HPACK, the header compression of HTTP/2 (RFC 7541), in one small module.

Every header block minigrpc sends is coded by an :class:`Encoder` and every one it receives
decoded by a :class:`Decoder`: both ends' connections (through
:class:`minigrpc.http2.frames.HeaderBlocks`), the one-shot call, which a process that makes one
call and exits pays to import (so it loads nothing else), and the frame trace.  Each
representation below names the section of RFC 7541 that defines it, so the module can be read
beside the RFC.

Decoding is complete, since a peer may use all of HPACK:

* integers with an N-bit prefix (RFC 7541 §5.1), at most five continuation octets (any 32-bit
  value): the RFC asks that an implementation bound them and reject what exceeds the bound;
* string literals, raw or Huffman-coded (RFC 7541 §5.2 with the code of Appendix B), where an
  EOS symbol, padding longer than 7 bits or padding that is not the EOS code's first bits are
  decoding errors;
* indexed fields (RFC 7541 §6.1); literals with incremental indexing (RFC 7541 §6.2.1),
  without indexing (RFC 7541 §6.2.2) and never indexed (RFC 7541 §6.2.3); names and fields
  from the static table (Appendix A) and the dynamic table (RFC 7541 §2.3), whose oldest
  entries are evicted as RFC 7541 §4.4 says;
* dynamic table size updates (RFC 7541 §6.3): only before the first field of a block
  (RFC 7541 §4.2), never above the HEADER_TABLE_SIZE we advertised;
* the decoded header list's size (name, value and 32 octets per field, RFC 7541 §4.1),
  checked field by field against the SETTINGS_MAX_HEADER_LIST_SIZE we advertised
  (RFC 9113 §6.5.2), so a small block that expands into a huge list (RFC 7541 §7.3) is
  stopped as it grows.

A block that breaks any of these is a connection error of type COMPRESSION_ERROR
(RFC 9113 §4.3): :class:`DecodingError`; an oversized list is :class:`HeaderListTooLarge`.

Encoding keeps the dynamic table empty (RFC 7541 §2.3.2 lets an encoder never add to it): a
field found whole in the static table is sent as its index, any other as a literal without
indexing (RFC 7541 §6.2.2), or never indexed (RFC 7541 §6.2.3) when the caller marks it
sensitive (credentials, RFC 7541 §7.1.3), its name indexed when the static table has it, each
string Huffman-coded when that is shorter. A peer that lowers SETTINGS_HEADER_TABLE_SIZE still
hears of it (RFC 7541 §4.2): the next block starts with a size update.
"""


TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, Iterable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    #: One header field as both ends hold it: name and value, as bytes (RFC 9113 §8.2).
    Header = Tuple[bytes, bytes]
else:  # an alias at run time: only a name for other modules' annotations
    Header = tuple

#: SETTINGS_HEADER_TABLE_SIZE until a SETTINGS frame says otherwise (RFC 9113 §6.5.2).
DEFAULT_TABLE_SIZE = 4096
#: What a table entry costs beyond its name and value (RFC 7541 §4.1); the header-list size of
#: RFC 9113 §6.5.2 counts fields the same way.
ENTRY_OVERHEAD = 32
#: Continuation octets an integer may have after its prefix (RFC 7541 §5.1 asks for a bound):
#: five carry 35 bits, room for any 32-bit value.
MAX_INTEGER_CONTINUATIONS = 5


class DecodingError(ValueError):
    """A header block that breaks RFC 7541: a COMPRESSION_ERROR (RFC 9113 §4.3)."""


class HeaderListTooLarge(DecodingError):
    """The decoded header list outgrew the limit we advertised (RFC 9113 §6.5.2)."""


#: The static table (RFC 7541 Appendix A): index 1 is the first entry.
STATIC_TABLE = (
    (b":authority", b""),  # 1
    (b":method", b"GET"),  # 2
    (b":method", b"POST"),  # 3
    (b":path", b"/"),  # 4
    (b":path", b"/index.html"),  # 5
    (b":scheme", b"http"),  # 6
    (b":scheme", b"https"),  # 7
    (b":status", b"200"),  # 8
    (b":status", b"204"),  # 9
    (b":status", b"206"),  # 10
    (b":status", b"304"),  # 11
    (b":status", b"400"),  # 12
    (b":status", b"404"),  # 13
    (b":status", b"500"),  # 14
    (b"accept-charset", b""),  # 15
    (b"accept-encoding", b"gzip, deflate"),  # 16
    (b"accept-language", b""),  # 17
    (b"accept-ranges", b""),  # 18
    (b"accept", b""),  # 19
    (b"access-control-allow-origin", b""),  # 20
    (b"age", b""),  # 21
    (b"allow", b""),  # 22
    (b"authorization", b""),  # 23
    (b"cache-control", b""),  # 24
    (b"content-disposition", b""),  # 25
    (b"content-encoding", b""),  # 26
    (b"content-language", b""),  # 27
    (b"content-length", b""),  # 28
    (b"content-location", b""),  # 29
    (b"content-range", b""),  # 30
    (b"content-type", b""),  # 31
    (b"cookie", b""),  # 32
    (b"date", b""),  # 33
    (b"etag", b""),  # 34
    (b"expect", b""),  # 35
    (b"expires", b""),  # 36
    (b"from", b""),  # 37
    (b"host", b""),  # 38
    (b"if-match", b""),  # 39
    (b"if-modified-since", b""),  # 40
    (b"if-none-match", b""),  # 41
    (b"if-range", b""),  # 42
    (b"if-unmodified-since", b""),  # 43
    (b"last-modified", b""),  # 44
    (b"link", b""),  # 45
    (b"location", b""),  # 46
    (b"max-forwards", b""),  # 47
    (b"proxy-authenticate", b""),  # 48
    (b"proxy-authorization", b""),  # 49
    (b"range", b""),  # 50
    (b"referer", b""),  # 51
    (b"refresh", b""),  # 52
    (b"retry-after", b""),  # 53
    (b"server", b""),  # 54
    (b"set-cookie", b""),  # 55
    (b"strict-transport-security", b""),  # 56
    (b"transfer-encoding", b""),  # 57
    (b"user-agent", b""),  # 58
    (b"vary", b""),  # 59
    (b"via", b""),  # 60
    (b"www-authenticate", b""),  # 61
)


#: The Huffman code (RFC 7541 Appendix B): ``(code, length in bits)`` of each symbol, the octets
#: 0-255 and EOS (256), in the order of the RFC's table.
HUFFMAN_CODES = (
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),  # 0-3
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),  # 4-7
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),  # 8-11
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),  # 12-15
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),  # 16-19
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),  # 20-23
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),  # 24-27
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),  # 28-31
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),  # 32-35
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),  # 36-39
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11),  # 40-43
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),  # 44-47
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6),  # 48-51
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),  # 52-55
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),  # 56-59
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),  # 60-63
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7),  # 64-67
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),  # 68-71
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7),  # 72-75
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),  # 76-79
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),  # 80-83
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),  # 84-87
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13),  # 88-91
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),  # 92-95
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),  # 96-99
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),  # 100-103
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),  # 104-107
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),  # 108-111
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5),  # 112-115
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),  # 116-119
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15),  # 120-123
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),  # 124-127
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),  # 128-131
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),  # 132-135
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),  # 136-139
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),  # 140-143
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23),  # 144-147
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),  # 148-151
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),  # 152-155
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),  # 156-159
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22),  # 160-163
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),  # 164-167
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),  # 168-171
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),  # 172-175
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),  # 176-179
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),  # 180-183
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22),  # 184-187
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),  # 188-191
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19),  # 192-195
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),  # 196-199
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),  # 200-203
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),  # 204-207
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),  # 208-211
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),  # 212-215
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),  # 216-219
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),  # 220-223
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),  # 224-227
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),  # 228-231
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25),  # 232-235
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),  # 236-239
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26),  # 240-243
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),  # 244-247
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),  # 248-251
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),  # 252-255
    (0x3fffffff, 30),  # 256 (EOS)
)
EOS = 256

#: Static-table lookups for the encoder: a whole field's index, and each name's first index.
_STATIC_FIELD_INDEX = {field: index for index, field in enumerate(STATIC_TABLE, 1)}
_STATIC_NAME_INDEX: "Dict[bytes, int]" = {}
for _index, (_name, _value) in enumerate(STATIC_TABLE, 1):
    _STATIC_NAME_INDEX.setdefault(_name, _index)
del _index, _name, _value


# -- primitives: integers (RFC 7541 §5.1) and string literals (RFC 7541 §5.2) --------------


def decode_integer(data: bytes, pos: int, prefix_bits: int) -> "Tuple[int, int]":
    """The integer whose first octet is ``data[pos]``, with an N-bit prefix (RFC 7541 §5.1).

    Returns the value and the position after it. A value that fills the prefix continues in
    octets of 7 bits each, least significant first, the high bit set on all but the last.
    """
    if pos >= len(data):
        raise DecodingError("the block ends inside a field representation")
    prefix_max = (1 << prefix_bits) - 1
    value = data[pos] & prefix_max
    pos += 1
    if value < prefix_max:
        return value, pos
    for shift in range(0, 7 * MAX_INTEGER_CONTINUATIONS, 7):
        if pos >= len(data):
            raise DecodingError("the block ends inside an integer")
        octet = data[pos]
        pos += 1
        value += (octet & 0x7F) << shift
        if octet < 0x80:
            return value, pos
    raise DecodingError(
        f"an integer with more than {MAX_INTEGER_CONTINUATIONS} continuation octets"
    )


def encode_integer(value: int, prefix_bits: int, first_bits: int = 0) -> bytes:
    """``value`` with an N-bit prefix (RFC 7541 §5.1); ``first_bits`` are the bits of the first
    octet above the prefix (the representation's pattern, RFC 7541 §6)."""
    prefix_max = (1 << prefix_bits) - 1
    if value < prefix_max:
        return bytes((first_bits | value,))
    out = bytearray((first_bits | prefix_max,))
    value -= prefix_max
    while value >= 0x80:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_string(data: bytes, pos: int) -> "Tuple[bytes, int]":
    """The string literal at ``data[pos]`` (RFC 7541 §5.2): the H bit, a 7-bit-prefix length,
    then that many octets, raw or Huffman-coded. Returns the string and the position after it."""
    huffman = pos < len(data) and data[pos] & 0x80
    length, pos = decode_integer(data, pos, 7)
    end = pos + length
    if end > len(data):
        raise DecodingError(f"a string literal of {length} octets runs past the block's end")
    raw = data[pos:end]
    return (huffman_decode(raw) if huffman else raw), end


def encode_string(value: bytes, huffman: bool = True) -> bytes:
    """``value`` as a string literal (RFC 7541 §5.2), Huffman-coded when ``huffman`` is set and
    that is shorter."""
    if huffman and value:
        bits = sum(HUFFMAN_CODES[octet][1] for octet in value)
        if (bits + 7) // 8 < len(value):
            return encode_integer((bits + 7) // 8, 7, 0x80) + huffman_encode(value)
    return encode_integer(len(value), 7) + value


# -- the Huffman code (RFC 7541 §5.2, Appendix B) ------------------------------------------


def huffman_encode(value: bytes) -> bytes:
    """``value`` in the Huffman code, padded to an octet with the first bits of EOS (all ones,
    RFC 7541 §5.2)."""
    out = bytearray()
    acc = 0  # the bits not yet written, fewer than 8 after each symbol
    bits = 0
    for octet in value:
        code, length = HUFFMAN_CODES[octet]
        acc = (acc << length) | code
        bits += length
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
        acc &= (1 << bits) - 1
    if bits:
        out.append(((acc << (8 - bits)) | (0xFF >> bits)) & 0xFF)
    return bytes(out)


#: The longest code (EOS's): a window of this many bits always holds a whole code.
_LONGEST = 30
#: Built on first use by :func:`_decoding_tables`.
_DECODING: "Optional[Tuple[List[Tuple[int, int, int]], List[int]]]" = None


def _decoding_tables() -> "Tuple[List[Tuple[int, int, int]], List[int]]":
    """What decoding needs, from :data:`HUFFMAN_CODES`.

    The code is canonical (tests check it): sorted by length, then by value, each code is the
    previous one plus one, shifted left by the difference in length. So the codes of one
    length are a run of consecutive values, and, left-aligned in a window of :data:`_LONGEST`
    bits, every code of length L is below every code longer than L. Decoding a window is then
    finding the first length whose last code, left-aligned, is above it: for each length
    ``(length, limit, offset)``, where ``limit`` is the left-aligned value after its last code
    and ``offset`` turns a code of that length into its place in the sorted symbols.
    """
    global _DECODING
    if _DECODING is None:
        symbols = sorted(range(len(HUFFMAN_CODES)), key=lambda s: HUFFMAN_CODES[s][::-1])
        steps: List[Tuple[int, int, int]] = []
        for place, symbol in enumerate(symbols):
            code, length = HUFFMAN_CODES[symbol]
            if steps and steps[-1][0] == length:
                steps[-1] = (length, (code + 1) << (_LONGEST - length), steps[-1][2])
            else:
                steps.append((length, (code + 1) << (_LONGEST - length), code - place))
        _DECODING = steps, symbols
    return _DECODING


def _code_at(window: int, steps: "List[Tuple[int, int, int]]") -> "Tuple[int, int]":
    """The length of the code a window of :data:`_LONGEST` bits starts with, and its symbol's
    place in the sorted symbols (see :func:`_decoding_tables`)."""
    for length, limit, offset in steps:
        if window < limit:
            return length, (window >> (_LONGEST - length)) - offset
    raise AssertionError("unreachable: EOS's limit is 2**30")


def huffman_decode(data: bytes) -> bytes:
    """The octets Huffman-coded in ``data`` (RFC 7541 §5.2, Appendix B).

    Decoding errors, as §5.2 says: the EOS symbol inside the string, padding of more than 7
    bits, padding that is not the most significant bits of EOS (all ones).
    """
    steps, symbols = _decoding_tables()
    out = bytearray()
    acc = 0  # the bits not yet decoded, the oldest first
    bits = 0
    for octet in data:
        acc = (acc << 8) | octet
        bits += 8
        while bits >= _LONGEST:
            length, place = _code_at(acc >> (bits - _LONGEST), steps)
            symbol = symbols[place]
            if symbol == EOS:
                raise DecodingError("EOS inside a Huffman-coded string (RFC 7541 §5.2)")
            out.append(symbol)
            bits -= length
            acc &= (1 << bits) - 1
    while bits:
        # Fewer bits than the longest code: fill the window with ones (EOS's bits), so that a
        # code that is all there decodes, and padding reads as a code longer than what is left.
        fill = _LONGEST - bits
        length, place = _code_at((acc << fill) | ((1 << fill) - 1), steps)
        if length > bits:
            if bits > 7:
                raise DecodingError("Huffman padding longer than 7 bits (RFC 7541 §5.2)")
            if acc != (1 << bits) - 1:
                raise DecodingError("Huffman padding that is not EOS's first bits (RFC 7541 §5.2)")
            break
        out.append(symbols[place])
        bits -= length
        acc &= (1 << bits) - 1
    return bytes(out)


# -- header blocks (RFC 7541 §3, §6) -------------------------------------------------------


class Decoder:
    """The decoding context of one connection (RFC 7541 §2.2): every header block the peer
    sends, in order, with one dynamic table.

    ``max_table_size`` is the SETTINGS_HEADER_TABLE_SIZE we advertised, the largest a size
    update may ask for; ``max_header_list_size`` the SETTINGS_MAX_HEADER_LIST_SIZE (None: no
    limit).
    """

    def __init__(
        self,
        max_table_size: int = DEFAULT_TABLE_SIZE,
        max_header_list_size: "Optional[int]" = None,
    ) -> None:
        self.max_table_size = max_table_size
        self.max_header_list_size = max_header_list_size
        #: The dynamic table's current maximum size (RFC 7541 §4.2), set by size updates.
        self.table_size = max_table_size
        #: The dynamic table, newest entry first: index 62 is ``entries[0]`` (RFC 7541 §2.3.3).
        self.entries: List[Tuple[bytes, bytes]] = []
        #: The sum of the entries' sizes (RFC 7541 §4.1).
        self.size = 0
        #: Counts the changes to the dynamic table: a block decoded without changing it decodes
        #: the same way again for as long as this stays the same.
        self.generation = 0

    def decode(self, block: bytes) -> "List[Tuple[bytes, bytes]]":
        """The fields of one whole header block, in order. Raises :class:`DecodingError` (and
        :class:`HeaderListTooLarge`); the connection cannot go on after either."""
        fields: List[Tuple[bytes, bytes]] = []
        list_size = 0
        limit = self.max_header_list_size
        pos = 0
        end = len(block)
        while pos < end:
            first = block[pos]
            if first & 0x80:  # 1xxxxxxx: indexed field (RFC 7541 §6.1)
                index, pos = decode_integer(block, pos, 7)
                field = self._entry(index)
            elif first & 0x40:  # 01xxxxxx: literal with incremental indexing (RFC 7541 §6.2.1)
                field, pos = self._literal(block, pos, 6)
                self._add(field)
            elif first & 0x20:  # 001xxxxx: dynamic table size update (RFC 7541 §6.3)
                if fields:
                    raise DecodingError(
                        "a dynamic table size update after a field (RFC 7541 §4.2)"
                    )
                size, pos = decode_integer(block, pos, 5)
                if size > self.max_table_size:
                    raise DecodingError(
                        f"a dynamic table size update to {size}, above the {self.max_table_size}"
                        " we advertised (RFC 7541 §6.3)"
                    )
                self.table_size = size
                self.generation += 1
                self._evict(size)
                continue
            else:  # 0000xxxx without indexing, 0001xxxx never indexed (RFC 7541 §6.2.2-3)
                field, pos = self._literal(block, pos, 4)
            fields.append(field)
            list_size += ENTRY_OVERHEAD + len(field[0]) + len(field[1])
            if limit is not None and list_size > limit:
                raise HeaderListTooLarge(f"a header list larger than {limit} octets")
        return fields

    def _entry(self, index: int) -> "Tuple[bytes, bytes]":
        """The field at ``index`` of the static table, then the dynamic table (RFC 7541 §2.3.3)."""
        if 0 < index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dynamic = index - len(STATIC_TABLE) - 1
        if index <= 0 or dynamic >= len(self.entries):
            raise DecodingError(f"index {index} is in neither table (RFC 7541 §2.3.3)")
        return self.entries[dynamic]

    def _literal(
        self, block: bytes, pos: int, prefix_bits: int
    ) -> "Tuple[Tuple[bytes, bytes], int]":
        """A literal field (RFC 7541 §6.2): its name indexed (a non-zero N-bit index) or a string
        literal, then its value."""
        index, pos = decode_integer(block, pos, prefix_bits)
        if index:
            name = self._entry(index)[0]
        else:
            name, pos = decode_string(block, pos)
        value, pos = decode_string(block, pos)
        return (name, value), pos

    def _add(self, field: "Tuple[bytes, bytes]") -> None:
        """Add a field to the dynamic table, evicting the oldest entries to make room; a field
        larger than the whole table empties it and is not added (RFC 7541 §4.4)."""
        size = ENTRY_OVERHEAD + len(field[0]) + len(field[1])
        self.generation += 1
        if size > self.table_size:
            self.entries.clear()
            self.size = 0
            return
        self._evict(self.table_size - size)
        self.entries.insert(0, field)
        self.size += size

    def _evict(self, room: int) -> None:
        """Drop the oldest entries until the table holds at most ``room`` octets (RFC 7541
        §4.3, §4.4)."""
        while self.size > room:
            name, value = self.entries.pop()
            self.size -= ENTRY_OVERHEAD + len(name) + len(value)


class Encoder:
    """The encoding context of one connection (RFC 7541 §2.2), with its dynamic table kept
    empty (see the module's docstring). ``huffman``: code strings whenever that is shorter."""

    def __init__(self, huffman: bool = True) -> None:
        self.huffman = huffman
        #: The dynamic table's maximum size the peer's decoder assumes (RFC 7541 §4.2).
        self.table_size = DEFAULT_TABLE_SIZE
        self._announce = False

    @property
    def announcing(self) -> bool:
        """The next block starts with a dynamic table size update (:meth:`limit_table_size`)."""
        return self._announce

    def limit_table_size(self, setting: int) -> None:
        """The peer's SETTINGS_HEADER_TABLE_SIZE: a lower limit is announced with a size update
        at the start of the next block (RFC 7541 §4.2, §6.3)."""
        if setting < self.table_size:
            self.table_size = setting
            self._announce = True

    def encode(self, fields: "Iterable[Tuple[bytes, bytes, bool]]") -> bytes:
        """One header block from ``(name, value, sensitive)`` fields, in order; a sensitive
        field is never indexed (RFC 7541 §6.2.3, §7.1.3)."""
        out: List[bytes] = []
        if self._announce:
            out.append(encode_integer(self.table_size, 5, 0x20))  # 001xxxxx (RFC 7541 §6.3)
            self._announce = False
        for name, value, sensitive in fields:
            index = _STATIC_FIELD_INDEX.get((name, value))
            if index is not None:
                out.append(encode_integer(index, 7, 0x80))  # 1xxxxxxx (RFC 7541 §6.1)
                continue
            name_index = _STATIC_NAME_INDEX.get(name, 0)
            # 0001xxxx never indexed (RFC 7541 §6.2.3), 0000xxxx without indexing (RFC 7541 §6.2.2)
            out.append(encode_integer(name_index, 4, 0x10 if sensitive else 0x00))
            if not name_index:
                out.append(encode_string(name, self.huffman))
            out.append(encode_string(value, self.huffman))
        return b"".join(out)


def find_header(headers: "Sequence[Header]", name: bytes) -> "Optional[bytes]":
    """The first value of ``name`` in ``headers``, or None."""
    for key, value in headers:
        if key == name:
            return value
    return None



#: Fields never added to an HPACK table, to keep credentials out of it (RFC 7541 §7.1.3).
SENSITIVE_FIELDS = frozenset((b"authorization", b"proxy-authorization"))


def is_sensitive(name: bytes, value: bytes) -> bool:
    """Whether a field is never indexed: credentials and short cookies (RFC 7541 §7.1.3)."""
    return name in SENSITIVE_FIELDS or (name == b"cookie" and len(value) < 20)


def outbound_fields(block: "Sequence[Header]") -> "List[Tuple[bytes, bytes, bool]]":
    """A header block as it is sent: each field with whether it is sensitive
    (:func:`is_sensitive`), values without surrounding whitespace (RFC 9113 §8.2.1).

    Both ends and the one-shot client code every block they send from this; the names of
    every block minigrpc sends are lower-case and carry no whitespace already, and no
    connection-specific field gets in (:func:`minigrpc.protocol.wire.is_reserved_key`).
    tests/unit/test_status_and_http2.py compares the result with h2's outbound normalisation.
    """
    fields: List[Tuple[bytes, bytes, bool]] = []
    for name, value in block:
        value = value.strip()
        fields.append((name, value, is_sensitive(name, value)))
    return fields
