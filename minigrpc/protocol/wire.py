"""The pure gRPC codecs: everything gRPC adds on top of HTTP/2, as functions on bytes and strings.

Nothing here touches a socket or h2, so every codec is tested on its own (with hypothesis
round-trips). The sections follow PROTOCOL-HTTP2.md:

* Length-Prefixed-Message framing (``Length-Prefixed-Message``): :func:`encode_message`,
  :class:`MessageDecoder`.
* ``grpc-timeout`` (``Timeout``): :func:`encode_timeout`, :func:`decode_timeout`.
* Custom metadata (``Custom-Metadata``): :func:`validate_metadata`, :func:`encode_metadata`,
  :func:`decode_metadata`.
* ``grpc-message`` percent-encoding (``Responses``): :func:`percent_encode`, :func:`percent_decode`.
* Message compression (``doc/compression.md``): :data:`COMPRESSIONS` (grpcio's
  ``grpc.Compression``, whose enum :mod:`minigrpc.protocol.enums` makes from it), :func:`compress`,
  :func:`decompress`, :func:`parse_accept_encoding`.
"""

from .codes import COMPRESSIONS
from .status import (
    CallError,
    DecompressionError,
    MessageTooLarge,
    Metadata,
    ProtocolViolation,
    UnsupportedEncoding,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

# --------------------------------------------------------------------------------------------
# Length-Prefixed-Message
# --------------------------------------------------------------------------------------------

#: One flag byte (0 = plain, 1 = compressed) and a 4-byte big-endian length.  Packed with
#: ``int.to_bytes``, not :mod:`struct`, which the one-shot plugin would load for this alone.
PREFIX_LENGTH = 5
#: The largest length the 4-byte field holds.
_MAX_PREFIXED_LENGTH = 0xFFFFFFFF

#: grpc-go's and grpcio's default receive limit (docs/wire-rules.md, "Messages and compression").
DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH = 4 * 1024 * 1024


def encode_message(payload: bytes, compressed: bool = False) -> bytes:
    """Frame one message: ``flag(1) length(4, big-endian) payload`` (PROTOCOL-HTTP2.md).

    An empty message is exactly ``00 00 00 00 00``; the empty_unary interop case checks it.
    """
    return message_prefix(len(payload), compressed) + payload


def message_prefix(length: int, compressed: bool = False) -> bytes:
    """The 5 bytes in front of a message of ``length`` bytes (PROTOCOL-HTTP2.md)."""
    if not 0 <= length <= _MAX_PREFIXED_LENGTH:
        raise ValueError(f"a message of {length} bytes does not fit a 4-byte length prefix")
    return ((1 << 32 if compressed else 0) | length).to_bytes(PREFIX_LENGTH, "big")


if TYPE_CHECKING:  # pragma: no cover
    #: A message framed for sending: ``prefix + payload`` as one bytes object, or, for a large
    #: payload, the prefix and the payload kept apart (:func:`frame_message`).
    Framed = Union[bytes, Tuple[bytes, bytes]]
else:  # an alias at run time: only a name for other modules' annotations
    Framed = object
#: Payloads from this size on are framed without being copied.
_SEPARATE_PREFIX_FROM = 64 * 1024


def frame_message(payload: bytes, compressed: bool = False) -> Framed:
    """:func:`encode_message`, except that a large payload is not copied behind its prefix.

    The sending queue (:class:`minigrpc.protocol.grpc_connection.Outbound`) cuts a message into
    DATA frames anyway, so only the frame that carries the prefix needs it joined to the payload;
    copying a 4 MiB payload once more just to frame it was a tenth of a large call's client CPU.
    """
    if len(payload) < _SEPARATE_PREFIX_FROM:
        return encode_message(payload, compressed)
    return message_prefix(len(payload), compressed), payload


def framed_size(framed: Framed) -> int:
    """The bytes a framed message puts on the wire, prefix included."""
    if isinstance(framed, tuple):
        return len(framed[0]) + len(framed[1])
    return len(framed)


class MessageDecoder:
    """Reassemble Length-Prefixed-Messages from DATA payloads of any size.

    DATA frame boundaries mean nothing (PROTOCOL-HTTP2.md, Data Frames): a message may span frames,
    a frame may carry several messages, and even the 5-byte prefix may be split. The declared length
    is checked against ``max_length`` as soon as the prefix is complete, *before* the body is
    buffered, so an oversized message costs no memory.

    Chunks are kept in a list and joined once, so a 64 MiB message arriving in 16 KiB frames costs
    one copy, not a quadratic number of them.
    """

    __slots__ = ("_chunks", "_flag", "_have", "_need", "max_length")

    def __init__(self, max_length: "Optional[int]" = DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH) -> None:
        self.max_length = max_length
        self._chunks: List[bytes] = []
        self._have = 0
        self._flag: Optional[int] = None  # None while the prefix is still being read
        self._need = PREFIX_LENGTH

    @property
    def buffered(self) -> int:
        """Bytes held for a message that is not complete yet."""
        return self._have

    @property
    def missing(self) -> int:
        """Bytes the message being assembled still needs (0 while its prefix is incomplete)."""
        return 0 if self._flag is None else self._need - self._have

    @property
    def at_boundary(self) -> bool:
        """True when no partial message (or partial prefix) is held."""
        return self._have == 0 and self._flag is None

    def feed(self, data: bytes) -> "List[Tuple[bool, bytes]]":
        """Consume ``data``; return ``(compressed, payload)`` for every message it completes."""
        messages: List[Tuple[bool, bytes]] = []
        try:
            self._decode(data, messages)
        except CallError as exc:
            exc.completed = messages
            raise
        return messages

    def _decode(self, data: bytes, messages: "List[Tuple[bool, bytes]]") -> None:
        view = memoryview(data)
        while view:
            take = min(self._need - self._have, len(view))
            # A chunk taken whole is kept as it is: a large message spans many DATA frames, and
            # copying each one before the final join would copy the message twice.
            whole = take == len(data) and type(data) is bytes
            self._chunks.append(data if whole else bytes(view[:take]))
            self._have += take
            view = view[take:]
            if self._have < self._need:
                break
            block = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            if self._flag is None:
                flag, length = block[0], int.from_bytes(block[1:PREFIX_LENGTH], "big")
                if flag > 1:
                    raise ProtocolViolation(
                        f"grpc: received unexpected payload format {flag} (flag must be 0 or 1)"
                    )
                if self.max_length is not None and length > self.max_length:
                    raise MessageTooLarge(length, self.max_length)
                if length == 0:
                    messages.append((flag == 1, b""))
                    continue
                self._flag = flag
                self._need = length
            else:
                messages.append((self._flag == 1, block))
                self._flag = None
                self._need = PREFIX_LENGTH


# --------------------------------------------------------------------------------------------
# grpc-timeout
# --------------------------------------------------------------------------------------------

# "TimeoutValue → {positive integer as ASCII string of at most 8 digits}"
_TIMEOUT_MAX_VALUE = 99_999_999
# Units in the order grpc-go tries them, with their length in nanoseconds.
_TIMEOUT_UNITS: "Sequence[Tuple[str, int]]" = (
    ("n", 1),
    ("u", 1_000),
    ("m", 1_000_000),
    ("S", 1_000_000_000),
    ("M", 60_000_000_000),
    ("H", 3_600_000_000_000),
)
_UNIT_NANOS = dict(_TIMEOUT_UNITS)


def encode_timeout(seconds: float) -> str:
    """Encode a relative deadline as ``grpc-timeout`` (PROTOCOL-HTTP2.md, "Timeout").

    Like grpc-go: the first unit among n, u, m, S, M whose rounded-up value fits in 8 digits,
    else hours (docs/wire-rules.md, "Timeouts"). 100 ms is ``100000u``; zero or less is ``0n``.
    """
    nanos = round(seconds * 1e9)
    if nanos <= 0:
        return "0n"
    for unit, size in _TIMEOUT_UNITS[:-1]:
        value = -(-nanos // size)  # ceiling division: never send a shorter deadline
        if value <= _TIMEOUT_MAX_VALUE:
            return f"{value}{unit}"
    return f"{min(-(-nanos // _UNIT_NANOS['H']), _TIMEOUT_MAX_VALUE)}H"


def decode_timeout(value: "Union[str, bytes]") -> float:
    """Decode a ``grpc-timeout`` value into seconds.

    Raises ValueError for what grpc-go rejects (``malformed grpc-timeout``): fewer than 2 or more
    than 9 characters, a non-digit value, or an unknown unit.
    """
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not 2 <= len(text) <= 9:
        raise ValueError(f"malformed grpc-timeout: {text!r}")
    digits, unit = text[:-1], text[-1]
    if not all("0" <= char <= "9" for char in digits) or unit not in _UNIT_NANOS:
        raise ValueError(f"malformed grpc-timeout: {text!r}")
    return int(digits) * _UNIT_NANOS[unit] / 1e9


# --------------------------------------------------------------------------------------------
# Custom metadata
# --------------------------------------------------------------------------------------------

# Patterns, compiled on first use (``re``'s own cache), and ``re`` itself imported where they are
# used: a process that sends no metadata and reads no escaped ``grpc-message``, such as the CNI
# plugin, never pays for them (re costs a cold start about 2 ms on 3.11).
_KEY = r"[0-9a-z_.\-]+"
_ASCII_VALUE = r"[\x20-\x7e]*"

#: Keys an application may not send: the library owns them (PROTOCOL-HTTP2.md, "Requests";
#: RFC 9113 §8.2.2). ``grpc-*`` is reserved as a whole prefix, see :func:`is_reserved_key`.
RESERVED_HEADERS: "FrozenSet[str]" = frozenset(
    {
        "te",
        "content-type",
        "user-agent",
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    }
)

# Headers the transport consumes; they never show up as call metadata. ``user-agent`` and
# ``grpc-status-details-bin`` do show up, as grpcio surfaces them.
_TRANSPORT_HEADERS: "FrozenSet[str]" = frozenset(
    {
        "content-type",
        "te",
        "grpc-status",
        "grpc-message",
        "grpc-encoding",
        "grpc-accept-encoding",
        "grpc-timeout",
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    }
)

if TYPE_CHECKING:  # pragma: no cover
    MetadataValue = Union[str, bytes]
    MetadataLike = Optional[Iterable[Tuple[Any, Any]]]
else:  # aliases at run time: only names for other modules' annotations
    MetadataValue = MetadataLike = object


def is_binary_key(key: str) -> bool:
    """``-bin`` keys carry arbitrary bytes, base64-encoded on the wire."""
    return key.endswith("-bin")


def is_reserved_key(key: str) -> bool:
    """True for keys only the library may set (pseudo-headers, ``grpc-*``, hop-by-hop headers)."""
    return key.startswith(":") or key.startswith("grpc-") or key in RESERVED_HEADERS


#: The one reserved key an application may send, in trailers only: a serialized
#: ``google.rpc.Status`` with error details (grpcio-status's ``abort_with_status`` sets it; the
#: richer error model of gRPC's doc/statuscodes.md and google.rpc.Status).
STATUS_DETAILS_KEY = "grpc-status-details-bin"


class MetadataTypeError(TypeError, ValueError):
    """Metadata that is not (str, str | bytes) pairs at all: a programming error, raised as
    grpcio raises it (TypeError) rather than turned into a call status.  It is a ValueError too,
    so code that catches every invalid-metadata problem as ValueError still does."""


def validate_metadata(
    metadata: MetadataLike, allowed_reserved: "FrozenSet[str]" = frozenset()
) -> "List[Tuple[str, MetadataValue]]":
    """Check application metadata before anything is sent; return it normalised.

    Raises ValueError naming the offending key; :class:`MetadataTypeError` (also a TypeError)
    when an item is not a pair or a key or value has the wrong type. Keys must match
    ``[0-9a-z_.-]+`` and not be reserved; ``-bin`` values must be bytes (str is encoded as
    UTF-8); other values must be printable ASCII (PROTOCOL-HTTP2.md, "Custom-Metadata").
    ``allowed_reserved`` names reserved keys the caller may set anyway
    (:data:`STATUS_DETAILS_KEY` in trailers). Upper-case keys are rejected rather than folded,
    because h2 treats an upper-case name from a peer as a connection error and the caller would
    never learn why.
    """
    result: List[Tuple[str, MetadataValue]] = []
    if not metadata:
        return result
    import re

    for item in metadata:
        try:
            key, value = item
        except (TypeError, ValueError):
            raise MetadataTypeError(f"metadata must be (key, value) pairs, got {item!r}") from None
        if isinstance(key, bytes):
            key = key.decode("ascii", "replace")
        if not isinstance(key, str):
            raise MetadataTypeError(f"metadata key {key!r} must be str, got {type(key).__name__}")
        if not re.fullmatch(_KEY, key):
            raise ValueError(f"metadata key {key!r} is invalid: keys must match [0-9a-z_.-]+")
        if is_reserved_key(key) and key not in allowed_reserved:
            raise ValueError(f"metadata key {key!r} is reserved for the gRPC library")
        if is_binary_key(key):
            if isinstance(value, str):
                value = value.encode("utf-8")
            elif not isinstance(value, (bytes, bytearray, memoryview)):
                raise MetadataTypeError(
                    f"metadata value for {key!r} must be bytes, got {type(value).__name__}"
                )
            result.append((key, bytes(value)))
            continue
        if isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("ascii")
            except UnicodeDecodeError:
                raise ValueError(
                    f"metadata value for {key!r} is not ASCII; use a key ending in -bin"
                ) from None
        if not isinstance(value, str):
            raise MetadataTypeError(
                f"metadata value for {key!r} must be str, got {type(value).__name__}"
            )
        if not re.fullmatch(_ASCII_VALUE, value):
            raise ValueError(
                f"metadata value for {key!r} has characters outside printable ASCII; "
                "use a key ending in -bin"
            )
        result.append((key, value))
    return result


def b64encode_unpadded(data: bytes) -> bytes:
    """Standard base64 without ``=`` padding, as grpcio and grpc-go send ``-bin`` values."""
    import base64  # here and below: only ``-bin`` metadata needs it (cheap import for the plugin)

    return base64.b64encode(data).rstrip(b"=")


def b64decode_lenient(data: bytes) -> bytes:
    """Decode padded or unpadded standard base64 (RFC 4648 §4). Raises ValueError."""
    import base64
    import binascii

    data = data.strip()
    try:
        return base64.b64decode(data + b"=" * (-len(data) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"malformed base64: {exc}") from None


def encode_metadata(
    metadata: MetadataLike, allowed_reserved: "FrozenSet[str]" = frozenset()
) -> "List[Tuple[bytes, bytes]]":
    """Validate and encode metadata into HTTP/2 header fields, one field per value."""
    headers = []
    for key, value in validate_metadata(metadata, allowed_reserved):
        if isinstance(value, bytes):
            headers.append((key.encode("ascii"), b64encode_unpadded(value)))
        else:
            headers.append((key.encode("ascii"), value.encode("ascii")))
    return headers


def decode_metadata(headers: "Iterable[Tuple[Any, Any]]") -> Metadata:
    """Turn received header fields into call metadata; never raises.

    Pseudo-headers and the headers the transport consumes are dropped. ``-bin`` values are split
    on ``,`` (duplicate keys may be joined that way) and each part is base64-decoded, padded or
    not; an undecodable part is dropped. ASCII values are returned as str, undecodable bytes
    replaced, never split (docs/wire-rules.md, "Metadata").
    """
    result: List[Tuple[str, MetadataValue]] = []
    for raw_key, raw_value in headers:
        key = raw_key.decode("ascii", "replace") if isinstance(raw_key, bytes) else raw_key
        if key.startswith(":") or key in _TRANSPORT_HEADERS:
            continue
        value = raw_value if isinstance(raw_value, bytes) else raw_value.encode("utf-8")
        if is_binary_key(key):
            for part in value.split(b","):
                try:
                    result.append((key, b64decode_lenient(part)))
                except ValueError:
                    continue
        else:
            result.append((key, value.decode("utf-8", "replace")))
    return tuple(result)


# --------------------------------------------------------------------------------------------
# grpc-message percent-encoding
# --------------------------------------------------------------------------------------------

# "Percent-Byte-Unencoded → 1*( %x20-%x24 / %x26-%x7E )": printable ASCII except '%'.
_UNENCODED = r"[\x20-\x24\x26-\x7e]*"
_PERCENT_ESCAPE = rb"%([0-9A-Fa-f]{2})"


def percent_encode(message: str) -> str:
    """Encode ``grpc-message`` (PROTOCOL-HTTP2.md, "Responses").

    The message is UTF-8 encoded; bytes outside ``%x20-%x24 / %x26-%x7E`` become ``%XX`` in upper
    case. Lone surrogates (which UTF-8 cannot encode) become U+FFFD rather than an exception.
    """
    import re

    if re.fullmatch(_UNENCODED, message):
        return message
    out = []
    for byte in message.encode("utf-8", "replace"):
        if 0x20 <= byte <= 0x7E and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def percent_decode(value: "Union[str, bytes]") -> str:
    """Decode ``grpc-message``; never fails and never strips (PROTOCOL-HTTP2.md, Responses).

    Malformed ``%`` sequences are kept as they are; bytes that are not UTF-8 become U+FFFD.
    """
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
    if b"%" in raw:
        import re

        raw = re.sub(_PERCENT_ESCAPE, lambda m: bytes((int(m.group(1), 16),)), raw)
    return raw.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Compression
# --------------------------------------------------------------------------------------------


#: The encodings minigrpc can read, in the order it advertises them.
SUPPORTED_ENCODINGS: "Tuple[str, ...]" = ("identity", "deflate", "gzip")
#: The ``grpc-accept-encoding`` value minigrpc sends.
ACCEPT_ENCODING = ",".join(SUPPORTED_ENCODINGS)


def compression_number(compression: int) -> int:
    """A ``Compression`` member (minigrpc's or grpcio's, both int enums) or its value, checked as
    ``Compression(compression)`` checks it: ValueError for anything else."""
    if not isinstance(compression, int) or not 0 <= compression < len(COMPRESSIONS):
        raise ValueError(f"{compression!r} is not a valid Compression")
    return int(compression)


def compression_name(compression: "Optional[int]") -> "Optional[str]":
    """``'gzip'``, ``'deflate'`` or None (no compression) for a ``Compression`` value."""
    if compression is None:
        return None
    return COMPRESSIONS[compression_number(compression)][1]


#: zlib's largest window, 2**15 bytes (``zlib.MAX_WBITS``; RFC 1950 §2.2).  zlib itself is
#: imported only by the functions that compress: a process that never does skips it.
_MAX_WBITS = 15


def _codec_wbits(encoding: str) -> int:
    # "gzip" is RFC 1952 (zlib's wbits 16+15); "deflate" is the zlib format of RFC 1950, which is
    # what grpc-core and grpc-go produce for it.
    if encoding == "gzip":
        return 16 + _MAX_WBITS
    if encoding == "deflate":
        return _MAX_WBITS
    raise UnsupportedEncoding(f'grpc: Decompressor is not installed for grpc-encoding "{encoding}"')


def compress(encoding: str, data: bytes) -> bytes:
    """Compress one message with a new context (doc/compression.md)."""
    if encoding == "identity":
        return data
    import zlib

    compressor = zlib.compressobj(6, zlib.DEFLATED, _codec_wbits(encoding))
    return compressor.compress(data) + compressor.flush()


def decompress(encoding: str, data: bytes, max_length: "Optional[int]") -> bytes:
    """Decompress one message, never producing more than ``max_length`` bytes.

    The output limit is enforced while inflating, so a small "zip bomb" cannot allocate more than
    the receive limit (MessageTooLarge). A corrupt or truncated body is DecompressionError.
    """
    if encoding == "identity":
        if max_length is not None and len(data) > max_length:
            raise MessageTooLarge(len(data), max_length)
        return data
    import zlib

    decompressor = zlib.decompressobj(_codec_wbits(encoding))
    try:
        if max_length is None:
            out = decompressor.decompress(data)
        else:
            out = decompressor.decompress(data, max_length + 1)
            if len(out) > max_length or decompressor.unconsumed_tail:
                raise MessageTooLarge(max(len(out), max_length + 1), max_length)
        out += decompressor.flush()
    except zlib.error as exc:
        raise DecompressionError(f"grpc: failed to decompress the message: {exc}") from None
    if not decompressor.eof:
        raise DecompressionError("grpc: failed to decompress the message: truncated input")
    if max_length is not None and len(out) > max_length:
        raise MessageTooLarge(len(out), max_length)
    return out


#: The values :func:`parse_accept_encoding` has seen (at most :data:`_ACCEPT_ENCODINGS_KEPT`).
_ACCEPT_ENCODINGS: "Dict[Union[str, bytes, None], FrozenSet[str]]" = {}
_ACCEPT_ENCODINGS_KEPT = 64


def parse_accept_encoding(value: "Union[str, bytes, None]") -> "FrozenSet[str]":
    """The set of encodings a peer lists in ``grpc-accept-encoding`` (comma separated).

    A peer sends the same value on every call, so the few values seen are remembered: in a dict,
    not ``functools.lru_cache``, since :mod:`functools` (and the :mod:`collections` it imports)
    would cost the one-shot CNI plugin about 1.5 ms of a cold start on CPython 3.6 to 3.10.  A
    peer that sends ever new values empties it now and then.
    """
    found = _ACCEPT_ENCODINGS.get(value)
    if found is None:
        if not value:
            found = frozenset()
        else:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            found = frozenset(part.strip() for part in text.split(",") if part.strip())
        if len(_ACCEPT_ENCODINGS) >= _ACCEPT_ENCODINGS_KEPT:
            _ACCEPT_ENCODINGS.clear()
        _ACCEPT_ENCODINGS[value] = found
    return found


def decode_message(
    compressed: bool, payload: bytes, encoding: "Optional[str]", max_length: "Optional[int]"
) -> bytes:
    """One received message as the application gets it: inflated when its flag says so.

    The flag needs a ``grpc-encoding`` other than ``identity`` (doc/compression.md, test 6), and
    the inflated size is bounded by ``max_length``.  Raises a
    :class:`~minigrpc.protocol.status.CallError`: INTERNAL for a flag without an encoding, an
    encoding this side cannot decode or a corrupt body, RESOURCE_EXHAUSTED beyond the limit.
    """
    if not compressed:
        return payload
    if not encoding or encoding == "identity":
        raise ProtocolViolation("grpc: compressed flag set with identity or empty encoding")
    return decompress(encoding, payload, max_length)
