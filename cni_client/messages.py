"""The two CNI messages the plugin exchanges, on the protobuf wire, without importing protobuf.

Why this exists: the plugin runs once per pod, so its cold start is its speed, and importing
protobuf plus the generated ``cni_pb2`` is about a quarter of a run. The plugin only ever
*encodes* a ``CniCmdRequest`` and *decodes* a ``CniCmdResponse`` (proto/cni.proto), two tiny
messages, so this module does exactly that with the standard library. The agent, the bench
peers and the tests keep ``cni_pb2``, which is the oracle this codec is tested against
(tests/cni/test_cni_messages.py).

The wire format, for a reader new to it (protobuf.dev/programming-guides/encoding):

* A message is a sequence of *fields*, each a key then a value, in any order. The key is a
  *varint* (7 bits per byte, least significant group first, the high bit set on every byte but
  the last) holding ``field_number << 3 | wire_type``. ``b"\\x0a"`` is field 1, wire type 2.
* The wire type says how to find the end of the value, so a reader can skip fields it does not
  know: 0 varint, 1 eight bytes, 5 four bytes, 2 *length-delimited* (a varint length, then that
  many bytes: strings, bytes and embedded messages), 3 and 4 start and end a *group* (a
  deprecated nested message written between two keys with the same field number). 6 and 7 are
  not wire types at all.
* proto3 writes nothing for a field equal to its default (``""``, ``b""``, ``0``); an embedded
  message that is set is written even when empty (``b"\\x0a\\x00"``). A scalar seen twice keeps
  the last value; an embedded message seen twice is the *merge* of both parts.
* ``b"\\x0a\\x03abc"`` is therefore ``cni_result = b"abc"`` in a ``CniCmdResponse``, and
  ``b"\\x12\\x02\\x08\\x05"`` is ``error { code: 5 }``.

Which protobuf this matches. The protobuf backends do not agree on malformed input; the codec
follows upb, protobuf's default backend since 4.21, as of protobuf 7 (7.36), exactly:

* a key is at most 5 bytes and at most 2**32 - 1, and may be written with redundant bytes
  (``b"\\x8a\\x00"`` is still field 1, wire type 2); field number 0 is an error, except inside a
  skipped group; an end-group key outside a group is an error;
* a known field number with an unexpected wire type is an unknown field and is skipped;
* a varint has at most 10 bytes; the bits beyond 64 are ignored; a length prefix has at most 5;
* skipped groups nest at most 100 levels deep, counting each enclosing message as one level;
* a ``string`` that is not valid UTF-8 is an error (:class:`DecodeError`).

Where other protobufs differ (the tests know each case, see tests/cni/test_cni_messages.py):

* upb before protobuf 7 (6.33, which Python 3.9 gets) rejects field number 0 in a group and
  accepts a length prefix of up to 10 bytes;
* the pure-Python backend raises ``UnicodeDecodeError``, not ``DecodeError``, for bad UTF-8,
  reads a key with redundant bytes as an unknown field, accepts keys and length prefixes of up
  to 10 bytes, allows
  99 levels of groups at the top level, and accepts a group left open at the end of its message
  when the bytes just before that end happen to spell its end-group key;
* protobuf 3.20's C++ backend stops reading, with no error, at a key of 0 or at an end-group
  key at the top level, and rejects field number 0 in a group.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, Optional, Tuple

__all__ = ["CniCmdResponse", "DecodeError", "Error", "decode_response", "encode_request"]

# Wire types (protobuf.dev/programming-guides/encoding, "Message Structure").
WIRETYPE_VARINT = 0
WIRETYPE_FIXED64 = 1
WIRETYPE_LENGTH_DELIMITED = 2
WIRETYPE_START_GROUP = 3
WIRETYPE_END_GROUP = 4
WIRETYPE_FIXED32 = 5

#: How deep upb lets messages and skipped groups nest (its default recursion limit).
MAX_DEPTH = 100

_UINT64_MASK = (1 << 64) - 1
_UINT32_MAX = (1 << 32) - 1
_MAX_VARINT_BYTES = 10
_MAX_KEY_BYTES = 5
_MAX_SIZE_BYTES = 5


class DecodeError(ValueError):
    """The bytes are not a ``CniCmdResponse`` protobuf (upb) would accept."""


class Error:
    """``Error`` of proto/cni.proto: why the agent failed a command.

    ``code`` is an ``ErrorCode`` number; the enum is open (proto3), so any int32 can arrive and
    is kept as is. ``details`` (repeated ``google.protobuf.Any``) is checked like protobuf does
    but not kept: the plugin reports only the code and message, as Antrea's Go plugin does.
    """

    __slots__ = ("code", "message")

    def __init__(self, code: int = 0, message: str = "") -> None:
        self.code = code
        self.message = message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Error):
            return NotImplemented
        return self.code == other.code and self.message == other.message

    __hash__ = None  # type: ignore[assignment]  # mutable, like a protobuf message

    def __repr__(self) -> str:
        return f"Error(code={self.code!r}, message={self.message!r})"


class CniCmdResponse:
    """``CniCmdResponse`` of proto/cni.proto: the CNI result JSON, or an error.

    ``error`` is ``None`` when the field is absent, the equivalent of protobuf's
    ``HasField("error")`` being false; an empty but present error is ``Error(0, "")``.
    """

    __slots__ = ("cni_result", "error")

    def __init__(self, cni_result: bytes = b"", error: "Optional[Error]" = None) -> None:
        self.cni_result = cni_result
        self.error = error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CniCmdResponse):
            return NotImplemented
        return self.cni_result == other.cni_result and self.error == other.error

    __hash__ = None  # type: ignore[assignment]  # mutable, like a protobuf message

    def __repr__(self) -> str:
        return f"CniCmdResponse(cni_result={self.cni_result!r}, error={self.error!r})"

    @staticmethod
    def FromString(data: bytes) -> "CniCmdResponse":
        """Alias of :func:`decode_response`, so the class can serve as a response deserializer
        the way a generated protobuf class does."""
        return decode_response(data)


# ================================================================================== encoding


def _encode_varint(value: int) -> bytes:
    """Base-128 varint of a non-negative int (encoding, "Base 128 Varints")."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(key: bytes, value: bytes) -> bytes:
    """One wire-type-2 field; nothing for an empty value, as proto3 omits defaults."""
    if not value:
        return b""
    return key + _encode_varint(len(value)) + value


def encode_request(
    container_id: str,
    netns: str,
    ifname: str,
    args: str,
    path: str,
    network_configuration: bytes,
) -> bytes:
    """``CniCmdRequest{cni_args: CniCmdArgs{...}}`` as protobuf serializes it.

    The bytes equal ``cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(...))
    .SerializeToString()``: fields in number order, empty ones omitted, and ``cni_args`` always
    written because it is set, even when every field in it is empty. The keys are constants:
    fields 1 to 6 with wire type 2 are the single bytes 0x0a, 0x12, ... 0x32. A ``str`` that is
    not encodable as UTF-8 (a lone surrogate) raises ``UnicodeEncodeError``.
    """
    cni_args = b"".join(
        (
            _length_delimited(b"\x0a", container_id.encode("utf-8")),
            _length_delimited(b"\x12", netns.encode("utf-8")),
            _length_delimited(b"\x1a", ifname.encode("utf-8")),
            _length_delimited(b"\x22", args.encode("utf-8")),
            _length_delimited(b"\x2a", path.encode("utf-8")),
            _length_delimited(b"\x32", bytes(network_configuration)),
        )
    )
    return b"\x0a" + _encode_varint(len(cni_args)) + cni_args


# ================================================================================== decoding


def _read_varint(data: bytes, pos: int, end: int) -> "Tuple[int, int]":
    """Decode the varint at ``pos``; return (value as uint64, position after it).

    Like upb, at most 10 bytes are read and bits beyond the 64th are dropped.
    """
    value = 0
    shift = 0
    while shift < 7 * _MAX_VARINT_BYTES:
        if pos >= end:
            raise DecodeError(f"truncated varint at offset {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _UINT64_MASK, pos
        shift += 7
    raise DecodeError(f"varint longer than {_MAX_VARINT_BYTES} bytes before offset {pos}")


def _read_key(data: bytes, pos: int, end: int) -> "Tuple[int, int, int]":
    """Decode a field key; return (field number, wire type, position after it).

    upb reads a key as a 32-bit varint of at most 5 bytes; redundant bytes are allowed.
    """
    byte = data[pos]
    if byte < 0x80:  # a one-byte key: fields 1 to 15, the common case
        return byte >> 3, byte & 7, pos + 1
    start = pos
    key, pos = _read_varint(data, pos, end)
    if pos - start > _MAX_KEY_BYTES or key > _UINT32_MAX:
        raise DecodeError(f"field key at offset {start} is longer than 32 bits")
    return key >> 3, key & 7, pos


def _read_size(data: bytes, pos: int, end: int) -> "Tuple[int, int]":
    """Decode a length prefix; return (length, position after it).

    upb (protobuf 7) reads a length as a varint of at most 5 bytes, redundant bytes allowed.
    """
    start = pos
    size, pos = _read_varint(data, pos, end)
    if pos - start > _MAX_SIZE_BYTES:
        raise DecodeError(f"length prefix at offset {start} is longer than 5 bytes")
    return size, pos


def _skip_field(
    data: bytes, pos: int, end: int, field_number: int, wire_type: int, depth: int
) -> int:
    """Skip the value of an unknown field; return the position after it.

    An unknown field still has to be well formed: its value must fit in the buffer and a group
    must end with the matching end-group key, nested at most ``depth`` levels deep (upb).
    """
    if wire_type == WIRETYPE_VARINT:
        return _read_varint(data, pos, end)[1]
    if wire_type == WIRETYPE_FIXED64:
        pos += 8
    elif wire_type == WIRETYPE_FIXED32:
        pos += 4
    elif wire_type == WIRETYPE_LENGTH_DELIMITED:
        length, pos = _read_size(data, pos, end)
        pos += length
    elif wire_type == WIRETYPE_START_GROUP:
        return _skip_group(data, pos, end, field_number, depth)
    elif wire_type == WIRETYPE_END_GROUP:
        raise DecodeError(f"end-group key of field {field_number} outside a group")
    else:
        raise DecodeError(f"invalid wire type {wire_type} for field {field_number}")
    if pos > end:
        raise DecodeError(f"field {field_number} is truncated")
    return pos


def _skip_group(data: bytes, pos: int, end: int, group_number: int, depth: int) -> int:
    """Skip a group's fields up to its end-group key; return the position after that key.

    As in upb's group skipping, field number 0 is not checked inside a group.
    """
    depth -= 1
    if depth < 0:
        raise DecodeError("groups nested too deeply")
    while pos < end:
        field_number, wire_type, pos = _read_key(data, pos, end)
        if wire_type == WIRETYPE_END_GROUP:
            if field_number != group_number:
                raise DecodeError(f"group {group_number} closed by end-group of {field_number}")
            return pos
        pos = _skip_field(data, pos, end, field_number, wire_type, depth)
    raise DecodeError(f"group {group_number} has no end-group key")


def _fields(data: bytes, pos: int, end: int, depth: int) -> "Iterator[Tuple[int, int, Any]]":
    """Yield (field number, value) for each varint or length-delimited field of one message.

    Fields of the other wire types are validated and skipped here: none of the three messages
    read below has a field of those types, so for them they are always unknown fields. A varint
    value is an int, a length-delimited one the bytes in between.
    """
    while pos < end:
        field_number, wire_type, pos = _read_key(data, pos, end)
        if field_number == 0:
            raise DecodeError(f"field number 0 before offset {pos}")
        if wire_type == WIRETYPE_LENGTH_DELIMITED:
            length, pos = _read_size(data, pos, end)
            value_end = pos + length
            if value_end > end:
                raise DecodeError(f"field {field_number} is truncated")
            yield field_number, WIRETYPE_LENGTH_DELIMITED, data[pos:value_end]
            pos = value_end
        elif wire_type == WIRETYPE_VARINT:
            value, pos = _read_varint(data, pos, end)
            yield field_number, WIRETYPE_VARINT, value
        else:
            pos = _skip_field(data, pos, end, field_number, wire_type, depth)


def _decode_string(value: bytes, where: str) -> str:
    """A proto3 ``string`` must be valid UTF-8; upb fails the whole parse when it is not."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where} is not valid UTF-8: {exc.reason}") from None


def _check_any(data: bytes, depth: int) -> None:
    """Validate one ``google.protobuf.Any`` {string type_url = 1; bytes value = 2;} of
    ``Error.details``; it is parsed to fail where protobuf fails, then dropped."""
    for field_number, wire_type, value in _fields(data, 0, len(data), depth):
        if field_number == 1 and wire_type == WIRETYPE_LENGTH_DELIMITED:
            _decode_string(value, "Any.type_url")


def _merge_error(error: Error, data: bytes, depth: int) -> None:
    """Merge one occurrence of the ``error`` field into ``error`` (scalars: last one wins)."""
    for field_number, wire_type, value in _fields(data, 0, len(data), depth):
        if wire_type == WIRETYPE_VARINT:
            if field_number == 1:
                # An enum is an int32 on the wire as a uint64: keep the low 32 bits, signed.
                code = value & _UINT32_MAX
                error.code = code - (1 << 32) if code > 0x7FFFFFFF else code
        elif field_number == 2:
            error.message = _decode_string(value, "Error.message")
        elif field_number == 3:
            _check_any(value, depth - 1)


def decode_response(data: bytes) -> CniCmdResponse:
    """Parse a serialized ``CniCmdResponse`` the way protobuf's upb backend does.

    Raises :class:`DecodeError` exactly when ``cni_pb2.CniCmdResponse.FromString(data)``
    raises with upb; otherwise the fields equal protobuf's. Unknown fields are skipped, a
    repeated ``cni_result`` keeps the last value, and repeated ``error`` parts merge.
    """
    data = bytes(data)
    response = CniCmdResponse()
    for field_number, wire_type, value in _fields(data, 0, len(data), MAX_DEPTH):
        if wire_type != WIRETYPE_LENGTH_DELIMITED:
            continue
        if field_number == 1:
            response.cni_result = value
        elif field_number == 2:
            if response.error is None:
                response.error = Error()
            _merge_error(response.error, value, MAX_DEPTH - 1)
    return response
