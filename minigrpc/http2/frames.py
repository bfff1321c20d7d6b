"""The wire of HTTP/2 (RFC 9113): its vocabulary, frames to and from bytes, the frame reader,
and header blocks.

Everything of minigrpc that reads or writes HTTP/2 does it here: both ends' connections
(:mod:`minigrpc.http2.connection`), the one-shot call
(:mod:`minigrpc.protocol.oneshot_protocol`), the frame trace (:mod:`minigrpc.net.trace`) and the
CNI plugin's STATUS probe.  Each part names the section of RFC 9113 it implements, so the module
reads beside the RFC:

* the vocabulary: error codes (RFC 9113 §7) and the connection errors that carry them
  (RFC 9113 §5.4.1), the client's connection preface (RFC 9113 §3.4), frame types and flags
  (RFC 9113 §6), SETTINGS parameters (RFC 9113 §6.5.2) and the limits the RFC sets (RFC 9113
  §4.2, RFC 9113 §6.9.1);
* the payload of each frame type, read and checked once (RFC 9113 §6.1 to RFC 9113 §6.10): the
  stream a type must or must not be on, its fixed lengths, padding that fits inside the
  payload.  A frame that breaks them is a connection error, :class:`FrameError` with the code
  the RFC names (FRAME_SIZE_ERROR for a wrong length, RFC 9113 §4.2; PROTOCOL_ERROR otherwise);
  the connections call them per type, and :func:`read_frame` puts them together into a
  :class:`Frame` for the trace and the tests.  Frames of types above CONTINUATION are left
  unchecked, for the caller to ignore (RFC 9113 §5.5);
* the frames minigrpc sends, as bytes (the ``*_frame`` functions);
* :class:`FrameReader`, the one frame reader: it cuts a byte stream into frames and makes the
  checks a frame's 9-octet header (RFC 9113 §4.1) allows before its body is buffered: the
  connection preface (RFC 9113 §3.4), MAX_FRAME_SIZE (RFC 9113 §4.2) and header blocks, which
  nothing may interleave (RFC 9113 §6.10) and which may not grow past a bound before
  END_HEADERS (a CONTINUATION flood, RFC 9113 §10.5);
* :class:`HeaderBlocks`, header-block assembly (RFC 9113 §4.3, RFC 9113 §6.2, RFC 9113 §6.10):
  HEADERS and CONTINUATION fragments joined, padding and priority fields dropped (the
  dependency kept, for RFC 9113 §5.3.1), and every block decoded in order by one HPACK decoder
  (RFC 7541 §2.2).

Every frame starts with the same 9-octet header (RFC 9113 §4.1)::

    +-----------------------------------------------+
    |                 Length (24)                   |
    +---------------+---------------+---------------+
    |   Type (8)    |   Flags (8)   |
    +-+-------------+---------------+-------------------------------+
    |R|                 Stream Identifier (31)                      |
    +=+=============================================================+
    |                   Frame Payload (0...)                      ...
    +---------------------------------------------------------------+

The module loads nothing beyond :mod:`minigrpc.http2.hpack_codec`, so that a process that makes
one call and exits pays little for it.
"""

from . import hpack_codec
from .hpack_codec import Header

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

# -- error codes (RFC 9113 §7) ---------------------------------------------------------------------

#: The error codes minigrpc sends or acts on, in RST_STREAM (RFC 9113 §6.4) and GOAWAY (§6.8).
#: gRPC's reading of them (which status a call gets for a RST_STREAM) is gRPC's and lives in
#: :mod:`minigrpc.protocol.codes`.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

#: Every error code RFC 9113 §7 defines, by its name there (the names grpc-go and h2 print);
#: :func:`http2_error_name` reads them.
HTTP2_ERROR_NAMES: "Mapping[int, str]" = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}


def http2_error_name(error_code: int) -> str:
    """``CANCEL`` for 8 (:data:`HTTP2_ERROR_NAMES`), ``0x2a`` for a code RFC 9113 §7 does not
    define."""
    name = HTTP2_ERROR_NAMES.get(error_code)
    return name if name is not None else f"{error_code:#x}"


class FrameError(ValueError):
    """A connection error in what the peer sent (RFC 9113 §5.4.1): a frame's header or layout,
    or what it does to the connection's state.

    ``error_code`` is the GOAWAY code that tells the peer why the connection ends.
    """

    error_code = PROTOCOL_ERROR

    def __init__(self, message: str, error_code: "Optional[int]" = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class StreamError(Exception):
    """A stream error (RFC 9113 §5.4.2): the stream is reset with ``error_code``, and the
    connection and its other streams go on."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message)
        self.error_code = error_code


class PrefaceError(FrameError):
    """The first bytes from a client are not the HTTP/2 connection preface (RFC 9113 §3.4)."""


class ServerPrefaceError(FrameError):
    """The server's first frame is not SETTINGS (its connection preface, RFC 9113 §3.4).

    A peer that is not HTTP/2 at all (``HTTP/1.1 400 ...`` reads as a 4.7 MB frame header) is
    caught here on its first 9 bytes, instead of leaving a call waiting for a body that never
    comes.
    """


class FrameSizeError(FrameError):
    """A frame header announced more than the MAX_FRAME_SIZE we advertised (RFC 9113 §4.2).

    Raised as soon as the 9-byte header is in, before a byte of the body is buffered: checked
    only once the whole body had arrived, a peer announcing 16 MiB would make us hold up to
    16 MiB and keep the connection open while waiting for it. It is a connection error,
    answered with GOAWAY(FRAME_SIZE_ERROR) (RFC 9113 §4.2, §5.4.1).
    """

    error_code = FRAME_SIZE_ERROR

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame too large ({length} > {limit} bytes, FRAME_SIZE_ERROR)")
        self.length = length
        self.limit = limit


class HeaderBlockTooLarge(FrameError):
    """HEADERS/PUSH_PROMISE plus CONTINUATION frames grew past the limit before END_HEADERS.

    Failing on the encoded size as the block grows, before it is decoded, stops a CONTINUATION
    flood (CVE-2024-27316) without buffering it.  The answer is GOAWAY(ENHANCE_YOUR_CALM)
    (RFC 9113 §10.5).
    """

    error_code = ENHANCE_YOUR_CALM


# -- the vocabulary ------------------------------------------------------------------------------

#: The client connection preface (RFC 9113 §3.4): these 24 octets, then a SETTINGS frame.
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: The frame header's length (RFC 9113 §4.1).
FRAME_HEADER_LENGTH = 9

#: Frame types (RFC 9113 §6).
DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9
#: Extension frame types (RFC 9113 §5.5) a trace may meet: RFC 7838 §4, RFC 8336 §2,
#: RFC 9218 §7.1.  :func:`parse_frame` leaves them, like any type above CONTINUATION, unchecked.
ALTSVC = 0xA
ORIGIN = 0xC
PRIORITY_UPDATE = 0x10

#: Each frame type by its name in the RFC that registers it.
FRAME_TYPE_NAMES = {
    DATA: "DATA",
    HEADERS: "HEADERS",
    PRIORITY: "PRIORITY",
    RST_STREAM: "RST_STREAM",
    SETTINGS: "SETTINGS",
    PUSH_PROMISE: "PUSH_PROMISE",
    PING: "PING",
    GOAWAY: "GOAWAY",
    WINDOW_UPDATE: "WINDOW_UPDATE",
    CONTINUATION: "CONTINUATION",
    ALTSVC: "ALTSVC",
    ORIGIN: "ORIGIN",
    PRIORITY_UPDATE: "PRIORITY_UPDATE",
}

#: Flags (RFC 9113 §6): one bit means different things on different types.
END_STREAM = 0x1  # DATA, HEADERS
ACK = 0x1  # SETTINGS, PING
END_HEADERS = 0x4  # HEADERS, PUSH_PROMISE, CONTINUATION
PADDED = 0x8  # DATA, HEADERS, PUSH_PROMISE
PRIORITY_FLAG = 0x20  # HEADERS: the stream dependency and weight of RFC 9113 §5.3 (deprecated)

#: SETTINGS parameters (RFC 9113 §6.5.2; ENABLE_CONNECT_PROTOCOL is RFC 8441 §3,
#: NO_RFC7540_PRIORITIES RFC 9218 §2.1, and 0xFE03 grpc core's own "true binary metadata").
HEADER_TABLE_SIZE = 0x1
ENABLE_PUSH = 0x2
MAX_CONCURRENT_STREAMS = 0x3
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5
MAX_HEADER_LIST_SIZE = 0x6
ENABLE_CONNECT_PROTOCOL = 0x8
NO_RFC7540_PRIORITIES = 0x9
GRPC_ALLOW_TRUE_BINARY_METADATA = 0xFE03

#: Each SETTINGS parameter by its registered name (without the ``SETTINGS_`` prefix).
SETTING_NAMES = {
    HEADER_TABLE_SIZE: "HEADER_TABLE_SIZE",
    ENABLE_PUSH: "ENABLE_PUSH",
    MAX_CONCURRENT_STREAMS: "MAX_CONCURRENT_STREAMS",
    INITIAL_WINDOW_SIZE: "INITIAL_WINDOW_SIZE",
    MAX_FRAME_SIZE: "MAX_FRAME_SIZE",
    MAX_HEADER_LIST_SIZE: "MAX_HEADER_LIST_SIZE",
    ENABLE_CONNECT_PROTOCOL: "ENABLE_CONNECT_PROTOCOL",
    NO_RFC7540_PRIORITIES: "NO_RFC7540_PRIORITIES",
    GRPC_ALLOW_TRUE_BINARY_METADATA: "GRPC_ALLOW_TRUE_BINARY_METADATA",
}

#: Stream identifiers and window increments are 31 bits; the high bit is reserved (RFC 9113 §4.1).
_STREAM_MASK = 0x7FFFFFFF
#: The largest flow-control window (RFC 9113 §6.9.1) and the largest stream identifier.
MAX_WINDOW = 2**31 - 1
#: The windows and frame size before SETTINGS say otherwise (RFC 9113 §6.5.2, §6.9.2).
INITIAL_WINDOW = 65535
INITIAL_MAX_FRAME_SIZE = 16384
#: The largest SETTINGS_MAX_FRAME_SIZE a peer may announce (RFC 9113 §6.5.2).
LARGEST_MAX_FRAME_SIZE = 2**24 - 1
#: Types that belong to a stream (a stream identifier of 0 is a PROTOCOL_ERROR) and types that
#: belong to the connection (any other identifier is); WINDOW_UPDATE may be either.
_ON_A_STREAM = frozenset((DATA, HEADERS, PRIORITY, RST_STREAM, PUSH_PROMISE, CONTINUATION))
_ON_THE_CONNECTION = frozenset((SETTINGS, PING, GOAWAY))
#: Types that carry a field block: HEADERS, PUSH_PROMISE, CONTINUATION (RFC 9113 §4.3).
_BLOCK_TYPES = frozenset((HEADERS, PUSH_PROMISE, CONTINUATION))

# -- the payload of each frame type (RFC 9113 §6) ------------------------------------------------

if TYPE_CHECKING:  # pragma: no cover
    Payload = Union[bytes, memoryview]
else:  # an alias at run time: only a name for other modules' annotations
    Payload = object


def _placement(frame_type: int, stream_id: int) -> None:
    """A type on the connection that belongs to a stream, or the other way round: a
    PROTOCOL_ERROR (each type's section of RFC 9113 §6 says which it is)."""
    if stream_id:
        if frame_type in _ON_THE_CONNECTION:
            raise FrameError(
                f"{FRAME_TYPE_NAMES[frame_type]} on stream {stream_id}, not on the connection"
            )
    elif frame_type in _ON_A_STREAM:
        raise FrameError(f"{FRAME_TYPE_NAMES[frame_type]} on stream 0")


def _length(frame_type: int, payload: bytes, fixed: int) -> None:
    """A type whose payload has one length (RFC 9113 §6.3, §6.4, §6.7, §6.9): any other is a
    FRAME_SIZE_ERROR."""
    if len(payload) != fixed:
        name = FRAME_TYPE_NAMES[frame_type]
        raise FrameError(f"{name} of {len(payload)} octets, not {fixed}", FRAME_SIZE_ERROR)


def _unpadded(frame_type: int, flags: int, payload: bytes, start: int = 0) -> bytes:
    """``payload`` without its Pad Length octet and padding when PADDED is set (RFC 9113 §6.1,
    §6.2, §6.6), and without ``start`` more octets of fields before the fragment; the padding
    may not reach into them."""
    end = len(payload)
    if flags & PADDED:
        if not end:
            raise FrameError(
                f"padded {FRAME_TYPE_NAMES[frame_type]} without a Pad Length", FRAME_SIZE_ERROR
            )
        start += 1
        end -= payload[0]
    if end < start:
        name = FRAME_TYPE_NAMES[frame_type]
        raise FrameError(f"{name} padding or priority longer than its payload")
    return payload[start:end] if start or end < len(payload) else payload


def data_payload(flags: int, stream_id: int, payload: bytes) -> bytes:
    """DATA (RFC 9113 §6.1): the data, without padding.  What counts against the windows is
    the whole payload, padding included (RFC 9113 §6.9.1)."""
    if not stream_id:
        _placement(DATA, 0)
    return _unpadded(DATA, flags, payload) if flags & PADDED else payload


def headers_payload(flags: int, stream_id: int, payload: bytes) -> "Tuple[bytes, int]":
    """HEADERS (RFC 9113 §6.2): the header block fragment, without padding and priority
    fields, and the stream it depends on (deprecated, RFC 9113 §5.3.2; 0 without the
    PRIORITY flag)."""
    if not stream_id:
        _placement(HEADERS, 0)
    if not flags & (PADDED | PRIORITY_FLAG):
        return payload, 0
    dependency = 0
    if flags & PRIORITY_FLAG:
        at = 1 if flags & PADDED else 0
        fragment = _unpadded(HEADERS, flags, payload, 5)  # Exclusive, Dependency (32), Weight
        dependency = int.from_bytes(payload[at : at + 4], "big") & _STREAM_MASK
        return fragment, dependency
    return _unpadded(HEADERS, flags, payload), dependency


def continuation_payload(stream_id: int, payload: bytes) -> bytes:
    """CONTINUATION (RFC 9113 §6.10): the next fragment of the open header block."""
    if not stream_id:
        _placement(CONTINUATION, 0)
    return payload


def push_promise_payload(flags: int, stream_id: int, payload: bytes) -> "Tuple[int, bytes]":
    """PUSH_PROMISE (RFC 9113 §6.6): the promised stream and the header block fragment."""
    _placement(PUSH_PROMISE, stream_id)
    rest = _unpadded(PUSH_PROMISE, flags, payload)
    if len(rest) < 4:
        raise FrameError("PUSH_PROMISE without a promised stream", FRAME_SIZE_ERROR)
    promised = int.from_bytes(rest[:4], "big") & _STREAM_MASK
    if not promised or promised % 2:  # a server's streams are even (RFC 9113 §5.1.1)
        raise FrameError(f"PUSH_PROMISE promising stream {promised}")
    return promised, rest[4:]


def refuse_push_promise(flags: int, stream_id: int, payload: bytes) -> None:
    """A PUSH_PROMISE received, checked (RFC 9113 §6.6), then refused with a connection error
    PROTOCOL_ERROR: a client turns push off (ENABLE_PUSH 0) and a server is never pushed to
    (RFC 9113 §8.4)."""
    push_promise_payload(flags, stream_id, payload)
    raise FrameError("PUSH_PROMISE received (push is refused)")


def priority_payload(stream_id: int, payload: bytes) -> int:
    """PRIORITY (RFC 9113 §6.3): the stream it depends on (deprecated, RFC 9113 §5.3.2)."""
    _placement(PRIORITY, stream_id)
    _length(PRIORITY, payload, 5)
    return int.from_bytes(payload[:4], "big") & _STREAM_MASK


def rst_stream_payload(stream_id: int, payload: bytes) -> int:
    """RST_STREAM (RFC 9113 §6.4): the error code."""
    _placement(RST_STREAM, stream_id)
    _length(RST_STREAM, payload, 4)
    return int.from_bytes(payload, "big")


def settings_payload(flags: int, stream_id: int, payload: bytes) -> "List[Tuple[int, int]]":
    """SETTINGS (RFC 9113 §6.5): (identifier, value) pairs in the order sent, which is the order
    they must be processed in (RFC 9113 §6.5.3); none on an ACK.  What the values may be is
    :class:`minigrpc.http2.streams.PeerSettings`'s to check."""
    _placement(SETTINGS, stream_id)
    length = len(payload)
    if flags & ACK and length:
        raise FrameError("SETTINGS with ACK and a payload", FRAME_SIZE_ERROR)
    if length % 6:
        raise FrameError(f"SETTINGS of {length} octets, not a multiple of 6", FRAME_SIZE_ERROR)
    return [
        (payload[at] << 8 | payload[at + 1], int.from_bytes(payload[at + 2 : at + 6], "big"))
        for at in range(0, length, 6)
    ]


def ping_payload(stream_id: int, payload: bytes) -> bytes:
    """PING (RFC 9113 §6.7): its 8 octets of opaque data."""
    _placement(PING, stream_id)
    _length(PING, payload, 8)
    return bytes(payload)


def goaway_payload(stream_id: int, payload: bytes) -> "Tuple[int, int, bytes]":
    """GOAWAY (RFC 9113 §6.8): the last stream the sender processed, the error code and the
    debug data."""
    _placement(GOAWAY, stream_id)
    if len(payload) < 8:
        raise FrameError(f"GOAWAY of {len(payload)} octets, under 8", FRAME_SIZE_ERROR)
    last_stream_id = int.from_bytes(payload[:4], "big") & _STREAM_MASK
    return last_stream_id, int.from_bytes(payload[4:8], "big"), bytes(payload[8:])


def window_update_payload(stream_id: int, payload: bytes) -> int:
    """WINDOW_UPDATE (RFC 9113 §6.9): the increment, the reserved bit ignored (RFC 9113 §4.1).

    An increment of 0 is a connection error on stream 0 and a stream error on a stream
    (RFC 9113 §6.9): on a stream it is returned, for the receiver to reset the stream.
    """
    _length(WINDOW_UPDATE, payload, 4)
    increment = int.from_bytes(payload, "big") & _STREAM_MASK
    if not increment and not stream_id:
        raise FrameError("WINDOW_UPDATE with an increment of 0")
    return increment


class Frame:
    """One received frame: the header's fields and what its payload says (:func:`read_frame`).

    ``data`` is a DATA frame's payload, the header block fragment of HEADERS, PUSH_PROMISE and
    CONTINUATION (padding and priority fields removed), PING's opaque data, GOAWAY's debug
    data, and the raw payload of any other type.  ``flow_controlled_length`` is what a DATA
    frame counts against the windows: its whole payload, padding included (RFC 9113 §6.9.1).
    The other fields are those of one type each and 0 or empty on the rest.
    """

    __slots__ = (
        "data",
        "error_code",
        "flags",
        "flow_controlled_length",
        "last_stream_id",
        "settings",
        "stream_id",
        "type",
        "window_increment",
    )

    def __init__(self, frame_type: int, flags: int, stream_id: int, data: bytes) -> None:
        self.type = frame_type
        self.flags = flags
        self.stream_id = stream_id
        self.data = data
        self.flow_controlled_length = 0
        #: RST_STREAM (RFC 9113 §6.4) and GOAWAY (RFC 9113 §6.8).
        self.error_code = 0
        #: GOAWAY (RFC 9113 §6.8); PUSH_PROMISE's promised stream (RFC 9113 §6.6).
        self.last_stream_id = 0
        #: WINDOW_UPDATE (RFC 9113 §6.9).
        self.window_increment = 0
        #: SETTINGS (RFC 9113 §6.5.1): (identifier, value) pairs in the order sent.
        self.settings: List[Tuple[int, int]] = []

    def __repr__(self) -> str:
        return (
            f"<Frame type=0x{self.type:x} flags=0x{self.flags:x} stream={self.stream_id} "
            f"length={len(self.data)}>"
        )


def read_frame(frame_type: int, flags: int, stream_id: int, payload: Payload) -> Frame:
    """The frame of this type, flags, stream and whole payload, every field read and checked by
    the functions above; raises :class:`FrameError`.  A WINDOW_UPDATE of 0 is refused whatever
    its stream (a codec cannot answer it with a stream error).

    The payload is copied out of ``payload`` (which may be a view of a read buffer).
    """
    payload = bytes(payload)
    if frame_type > CONTINUATION:
        # An extension type, known by name or not: ignored (RFC 9113 §5.5).
        return Frame(frame_type, flags, stream_id, payload)
    _placement(frame_type, stream_id)
    frame = Frame(frame_type, flags, stream_id, b"")
    if frame_type == DATA:
        frame.data = data_payload(flags, stream_id, payload)
        frame.flow_controlled_length = len(payload)
    elif frame_type == HEADERS:
        frame.data = headers_payload(flags, stream_id, payload)[0]
    elif frame_type == CONTINUATION:
        frame.data = continuation_payload(stream_id, payload)
    elif frame_type == PUSH_PROMISE:
        frame.last_stream_id, frame.data = push_promise_payload(flags, stream_id, payload)
    elif frame_type == SETTINGS:
        frame.settings = settings_payload(flags, stream_id, payload)
    elif frame_type == RST_STREAM:
        frame.error_code = rst_stream_payload(stream_id, payload)
    elif frame_type == PING:
        frame.data = ping_payload(stream_id, payload)
    elif frame_type == GOAWAY:
        frame.last_stream_id, frame.error_code, frame.data = goaway_payload(stream_id, payload)
    elif frame_type == WINDOW_UPDATE:
        frame.window_increment = window_update_payload(stream_id, payload)
        if not frame.window_increment:
            raise FrameError("WINDOW_UPDATE with an increment of 0")
    else:  # PRIORITY
        priority_payload(stream_id, payload)
    return frame


def parse_frame(header: Payload, payload: Payload) -> Frame:
    """The frame with this 9-octet header (RFC 9113 §4.1) and its whole payload
    (:func:`read_frame`)."""
    stream_id = int.from_bytes(header[5:9], "big") & _STREAM_MASK  # R ignored (RFC 9113 §4.1)
    return read_frame(header[3], header[4], stream_id, payload)


# -- building frames ---------------------------------------------------------------------------


def frame_bytes(frame_type: int, flags: int, stream_id: int, payload: Payload = b"") -> bytes:
    """A frame: the 9-octet header (RFC 9113 §4.1) and the payload."""
    length = len(payload)
    header = bytes((length >> 16, (length >> 8) & 0xFF, length & 0xFF, frame_type, flags))
    return b"".join((header, (stream_id & _STREAM_MASK).to_bytes(4, "big"), payload))


def data_frame(stream_id: int, data: Payload, end_stream: bool) -> bytes:
    """DATA (RFC 9113 §6.1), unpadded."""
    return frame_bytes(DATA, END_STREAM if end_stream else 0, stream_id, data)


def header_frames(
    stream_id: int, block: bytes, max_frame_size: int, end_stream: bool = False
) -> "List[bytes]":
    """A header block as HEADERS and, past ``max_frame_size``, CONTINUATION frames (RFC 9113 §6.2,
    RFC 9113 §6.10); END_HEADERS on the last, END_STREAM (``end_stream``) on the HEADERS frame."""
    if len(block) <= max_frame_size:
        flags = END_HEADERS | END_STREAM if end_stream else END_HEADERS
        return [frame_bytes(HEADERS, flags, stream_id, block)]
    pieces = [block[at : at + max_frame_size] for at in range(0, len(block), max_frame_size)]
    last = len(pieces) - 1
    return [
        frame_bytes(
            HEADERS if index == 0 else CONTINUATION,
            (END_HEADERS if index == last else 0)
            | (END_STREAM if end_stream and index == 0 else 0),
            stream_id,
            piece,
        )
        for index, piece in enumerate(pieces)
    ]


def settings_frame(settings: "Sequence[Tuple[int, int]]") -> bytes:
    """SETTINGS (RFC 9113 §6.5) with these (identifier, value) pairs, in order."""
    payload = b"".join(
        identifier.to_bytes(2, "big") + value.to_bytes(4, "big") for identifier, value in settings
    )
    return frame_bytes(SETTINGS, 0, 0, payload)


def settings_ack() -> bytes:
    """The acknowledgement of the peer's SETTINGS (RFC 9113 §6.5.3)."""
    return frame_bytes(SETTINGS, ACK, 0)


def ping_frame(opaque_data: bytes) -> bytes:
    """A PING (RFC 9113 §6.7) with 8 octets of opaque data."""
    return frame_bytes(PING, 0, 0, opaque_data)


def ping_ack(opaque_data: bytes) -> bytes:
    """The answer to a PING: the same 8 octets, with ACK (RFC 9113 §6.7)."""
    return frame_bytes(PING, ACK, 0, opaque_data)


def window_update_frame(stream_id: int, increment: int) -> bytes:
    """WINDOW_UPDATE (RFC 9113 §6.9) of a stream, or of the connection on stream 0."""
    payload = (increment & _STREAM_MASK).to_bytes(4, "big")
    return frame_bytes(WINDOW_UPDATE, 0, stream_id, payload)


def rst_stream_frame(stream_id: int, error_code: int) -> bytes:
    """RST_STREAM (RFC 9113 §6.4)."""
    return frame_bytes(RST_STREAM, 0, stream_id, error_code.to_bytes(4, "big"))


def goaway_frame(last_stream_id: int, error_code: int = 0, debug_data: bytes = b"") -> bytes:
    """GOAWAY (RFC 9113 §6.8): the last stream the sender processed or may process, the error
    code, and optional debug data."""
    payload = (last_stream_id & _STREAM_MASK).to_bytes(4, "big") + error_code.to_bytes(4, "big")
    return frame_bytes(GOAWAY, 0, 0, payload + debug_data)


# -- reading frames ------------------------------------------------------------------------------

if TYPE_CHECKING:  # pragma: no cover
    #: What :meth:`FrameReader.read` hands each frame to, chosen by the frame's type: called with
    #: the owner of the frames (the connection they are for), then the frame's flags, stream
    #: identifier (the reserved bit cleared) and payload; True stops the read.
    FrameHandler = Callable[[Any, int, int, bytes], Optional[bool]]
else:  # an alias at run time: only a name for other modules' annotations
    FrameHandler = object


def _ignore(owner: "Any", flags: int, stream_id: int, payload: bytes) -> None:
    """A frame of a type the reader's caller does not know: ignored (RFC 9113 §5.5)."""


def handlers_by_type(
    known: "Sequence[FrameHandler]", unknown: FrameHandler = _ignore
) -> "Tuple[FrameHandler, ...]":
    """A table for :meth:`FrameReader.read`: ``known[t]`` handles frames of type ``t``
    (DATA first, RFC 9113 §6), ``unknown`` every other of the 256 types.  Made once per class
    of owner, from its functions."""
    return tuple(known) + (unknown,) * (256 - len(known))


#: "No header block is open" (:attr:`FrameReader.block_stream`).
_NO_BLOCK = -1


class FrameReader:
    """Frames out of the bytes one peer sends, with the checks a frame's 9-octet header allows
    before its body is buffered.

    :meth:`read` takes each chunk read and hands every frame the chunk completes, in order, to
    the handler of its type (:func:`handlers_by_type`); a partial frame is kept in pieces and
    joined once whole, so a large frame that arrives over many reads is copied once.  As each
    header arrives:

    * ``magic``: the peer is a client, whose preface starts with 24 octets of magic (RFC 9113
      §3.4), checked as they arrive (:class:`PrefaceError`) before any frame is read;
    * ``settings_first``: the peer's first frame must be SETTINGS (its preface, RFC 9113 §3.4):
      :class:`PrefaceError` from a client, :class:`ServerPrefaceError` from a server.  A server
      that answers ``HTTP/1.1 400`` would otherwise announce a 4.7 MB frame and be waited for;
    * ``max_frame_size``: the MAX_FRAME_SIZE we advertised; a header announcing more raises
      :class:`FrameSizeError` at once (RFC 9113 §4.2);
    * ``max_header_block``: header blocks are policed.  A block is HEADERS or PUSH_PROMISE and
      the CONTINUATION frames up to END_HEADERS, on one stream with nothing in between
      (RFC 9113 §6.10: anything else is a PROTOCOL_ERROR, and so is a CONTINUATION outside a
      block), whose payloads may not add up to more than ``max_header_block`` octets before
      END_HEADERS (:class:`HeaderBlockTooLarge`, a CONTINUATION flood, CVE-2024-27316).

    :attr:`pass_limit`, when set, bounds one :meth:`read` to that many frames, each counting one
    more per KiB of body; the rest is kept (:attr:`held`) for the next call, which may pass no
    new bytes: a server's way to bound what one connection's read costs.  A connection's own
    rules (what each frame means) are the caller's; after an error the connection is broken and
    the reader must not be fed again.  The frame trace uses it with no checks at all.
    """

    __slots__ = (
        "_block_size",
        "_client_peer",
        "_magic_left",
        "_needed",
        "_pending",
        "_pending_size",
        "_settings_first",
        "block_stream",
        "held",
        "max_frame_size",
        "max_header_block",
        "pass_limit",
    )

    def __init__(
        self,
        max_frame_size: "Optional[int]" = None,
        max_header_block: "Optional[int]" = None,
        *,
        magic: bool = False,
        settings_first: bool = False,
    ) -> None:
        self.max_frame_size = LARGEST_MAX_FRAME_SIZE if max_frame_size is None else max_frame_size
        self.max_header_block = max_header_block
        self.pass_limit: Optional[int] = None
        #: Whole frames wait past :attr:`pass_limit`: call :meth:`read` again.
        self.held = False
        #: The stream whose header block is open, or -1 (only with ``max_header_block``).
        self.block_stream = _NO_BLOCK
        self._block_size = 0
        self._magic_left = len(CLIENT_PREFACE) if magic else 0
        self._client_peer = magic
        self._settings_first = settings_first
        self._pending: List[bytes] = []
        self._pending_size = 0
        self._needed = 0

    @property
    def awaiting_magic(self) -> bool:
        """Octets of the client's magic are still to come (RFC 9113 §3.4)."""
        return bool(self._magic_left)

    def read(self, data: bytes, handlers: "Sequence[FrameHandler]", owner: "Any") -> None:
        """Hand every whole frame that ``data`` completes, with what earlier reads left over, to
        ``handlers[type](owner, flags, stream_id, payload)``.  Raises :class:`FrameError` at the
        first header that breaks a rule, after the frames before it were handled; a handler
        that returns True stops the read there, and the rest is dropped (the reader is done)."""
        if self._magic_left:
            data = self._magic(data)
        self.held = False
        if self._pending:
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size < self._needed:
                return
            data = b"".join(self._pending)
            self._pending = []
        size = len(data)
        pos = 0
        needed = 0
        budget = self.pass_limit
        max_frame_size = self.max_frame_size
        blocks_policed = self.max_header_block is not None
        while True:
            if size - pos < 9:
                needed = 9
                break
            length = data[pos] << 16 | data[pos + 1] << 8 | data[pos + 2]
            if budget is not None:
                if budget <= 0:  # past the pass limit, at a frame boundary: the rest waits
                    self.held = True
                    break
                budget -= 1 + (length >> 10)
            kind = data[pos + 3]
            if self._settings_first:
                self._check_first(data[pos : pos + 9], kind, length)
            if length > max_frame_size:
                raise FrameSizeError(length, max_frame_size)
            stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
            if blocks_policed and (self.block_stream != _NO_BLOCK or kind in _BLOCK_TYPES):
                grown = self._check_block(kind, stream_id, length)
            else:
                grown = -1
            end = pos + 9 + length
            if end > size:
                needed = 9 + length
                break
            flags = data[pos + 4]
            if grown >= 0:  # the frame is whole: the block it belongs to moves on
                self._block_size = grown
                self.block_stream = _NO_BLOCK if flags & END_HEADERS else stream_id
            if handlers[kind](owner, flags, stream_id, data[pos + 9 : end]):
                return
            pos = end
        if pos < size:
            self._pending = [data[pos:]]
            self._pending_size = size - pos
            self._needed = 0 if self.held else needed

    def _magic(self, data: bytes) -> bytes:
        """The rest of ``data`` after the octets of the client's magic it holds (RFC 9113 §3.4)."""
        seen = len(CLIENT_PREFACE) - self._magic_left
        take = min(self._magic_left, len(data))
        if data[:take] != CLIENT_PREFACE[seen : seen + take]:
            raise PrefaceError("invalid HTTP/2 connection preface")
        self._magic_left -= take
        return data[take:]

    def _check_first(self, header: bytes, kind: int, length: int) -> None:
        """The peer's first frame must be SETTINGS (RFC 9113 §3.4), of a whole number of
        settings (RFC 9113 §6.5)."""
        self._settings_first = False
        if kind != SETTINGS or length % 6:
            if self._client_peer:
                raise PrefaceError(f"the client's first frame is not SETTINGS ({header!r})")
            raise ServerPrefaceError(f"first frame received is not a SETTINGS frame ({header!r})")

    def _check_block(self, kind: int, stream_id: int, length: int) -> int:
        """What the open header block grows to with this frame (RFC 9113 §6.10); raises for a
        frame that may not come here or a block past ``max_header_block``."""
        if self.block_stream != _NO_BLOCK:
            if kind != CONTINUATION or stream_id != self.block_stream:
                raise FrameError("a frame inside a header block")
            grown = self._block_size + length
        elif kind == CONTINUATION:
            raise FrameError("CONTINUATION without a header block")
        else:
            grown = length
        limit = self.max_header_block
        if limit is not None and grown > limit:
            raise HeaderBlockTooLarge(
                f"a header block exceeds {limit} bytes before END_HEADERS (CONTINUATION flood)"
            )
        return grown


# -- header blocks (RFC 9113 §4.3) -----------------------------------------------------------------

#: Received blocks remembered with their fields (a peer sends the same few again and again).
_DECODED_KEPT = 16


class HeaderBlocks:
    """Header blocks as they arrive in HEADERS and CONTINUATION frames, decoded.

    :meth:`headers` takes a HEADERS frame and :meth:`continuation` each CONTINUATION after it
    (that nothing comes between is :class:`FrameReader`'s to enforce, RFC 9113 §6.10); once
    END_HEADERS ends the block they return its fields, and :attr:`stream_id`,
    :attr:`end_stream` and :attr:`dependency` say what the HEADERS frame said.  Padding and
    priority fields are dropped (RFC 9113 §6.2; priority is deprecated, RFC 9113 §5.3.2), but
    the stream dependency is kept: one on the block's own stream is a stream error (RFC 9113
    §5.3.1, :func:`minigrpc.http2.streams.depends_on_itself`) that is the caller's to
    answer.

    Every block is decoded, in the order received, by one HPACK decoder, whatever its stream
    and whatever the caller then does with it: the dynamic table must follow every block
    (RFC 7541 §2.2).  A block that does not decode is a connection error COMPRESSION_ERROR
    (RFC 9113 §4.3); one whose list outgrows the decoder's limit, PROTOCOL_ERROR.
    """

    __slots__ = (
        "_decoded",
        "_decoded_generation",
        "_fragments",
        "decoder",
        "dependency",
        "end_stream",
        "stream_id",
    )

    def __init__(self, decoder: hpack_codec.Decoder) -> None:
        self.decoder = decoder
        self.stream_id = 0
        self.end_stream = False
        self.dependency = 0
        self._fragments: List[bytes] = []
        self._decoded: Dict[bytes, List[Header]] = {}
        self._decoded_generation = decoder.generation

    def headers(self, flags: int, stream_id: int, payload: bytes) -> "Optional[List[Header]]":
        """A HEADERS frame: the block's fields when END_HEADERS ends it here, else None."""
        fragment, dependency = headers_payload(flags, stream_id, payload)
        self.stream_id = stream_id
        self.end_stream = bool(flags & END_STREAM)
        self.dependency = dependency
        if flags & END_HEADERS:
            return self._decode(fragment)
        self._fragments = [fragment]
        return None

    def continuation(self, flags: int, stream_id: int, payload: bytes) -> "Optional[List[Header]]":
        """A CONTINUATION frame of the open block: its fields once END_HEADERS ends it."""
        self._fragments.append(continuation_payload(stream_id, payload))
        if not flags & END_HEADERS:
            return None
        fragments, self._fragments = self._fragments, []
        return self._decode(b"".join(fragments))

    def _decode(self, encoded: bytes) -> "List[Header]":
        """The fields of one header block (RFC 7541 §3).

        A warm connection receives the same few blocks again and again, each made of
        references to the tables only (RFC 7541 §6.1): such a block decodes to the same fields
        for as long as the dynamic table does not change, so its fields are remembered until
        it does (:attr:`minigrpc.http2.hpack_codec.Decoder.generation`).
        """
        decoder = self.decoder
        generation = decoder.generation
        if generation != self._decoded_generation:
            self._decoded.clear()
            self._decoded_generation = generation
        else:
            fields = self._decoded.get(encoded)
            if fields is not None:
                return list(fields)
        try:
            fields = decoder.decode(encoded)
        except hpack_codec.HeaderListTooLarge as exc:
            raise FrameError(str(exc)) from None
        except hpack_codec.DecodingError as exc:
            raise FrameError(f"header block: {exc}", COMPRESSION_ERROR) from None
        if decoder.generation == generation:
            if len(self._decoded) >= _DECODED_KEPT:
                self._decoded.clear()
            self._decoded[encoded] = list(fields)
        return fields
