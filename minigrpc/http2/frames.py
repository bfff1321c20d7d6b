"""HTTP/2 frames to and from bytes (RFC 9113 §4.1, §6), in one small module.

Every part of minigrpc that speaks HTTP/2 reads and writes its frames here: both ends'
connections, the one-shot client (:mod:`minigrpc.protocol.oneshot_protocol`), the frame tracer
(:mod:`minigrpc.net.trace`, which also names types and settings with :data:`FRAME_TYPE_NAMES` and
:data:`SETTING_NAMES`) and the CNI plugin's STATUS probe.  The module is small and loads nothing
beyond :mod:`minigrpc.protocol.status`, so a process that makes one call and exits pays little for
it. Each frame type below names the section of RFC 9113 that defines it, so the module can be read
beside the RFC.

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

:func:`parse_frame` reads a frame whose header and payload have arrived and checks what the RFC
requires of each type before the payload is used: the stream a type must or must not be on, its
fixed lengths, padding that fits inside the payload.  A frame that breaks them is a connection
error (RFC 9113 §5.4.1): :class:`FrameError` with the code the RFC names (FRAME_SIZE_ERROR for
a wrong length, RFC 9113 §4.2; PROTOCOL_ERROR otherwise).  Frames of types this module does not
know are returned unchecked, for the caller to ignore (RFC 9113 §5.5).  Checking the length
against the MAX_FRAME_SIZE we advertised happens earlier, from the header alone
(:class:`minigrpc.http2.reader.FrameSplitter`).

The ``*_frame`` functions build the frames a client sends, as bytes.
"""

from typing import List, Optional, Sequence, Tuple, Union

from .error_codes import FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR, FrameError

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
#: The payload length of the types whose length is fixed (RFC 9113 §6.3, §6.4, §6.7, §6.9).
_FIXED_LENGTH = {PRIORITY: 5, RST_STREAM: 4, PING: 8, WINDOW_UPDATE: 4}


class Frame:
    """One received frame: the header's fields and what its payload says.

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
        #: SETTINGS (RFC 9113 §6.5.1): (identifier, value) pairs in the order sent, which is the
        #: order they must be processed in (RFC 9113 §6.5.3).
        self.settings: List[Tuple[int, int]] = []

    def __repr__(self) -> str:
        return (
            f"<Frame type=0x{self.type:x} flags=0x{self.flags:x} stream={self.stream_id} "
            f"length={len(self.data)}>"
        )


def parse_frame(
    header: Union[bytes, memoryview], payload: Union[bytes, memoryview]
) -> Frame:
    """The frame with this 9-octet header and its whole payload; raises :class:`FrameError`.

    The payload is copied out of ``payload`` (which may be a view of a read buffer).
    """
    frame_type = header[3]
    flags = header[4]
    stream_id = int.from_bytes(header[5:9], "big") & _STREAM_MASK  # R ignored (RFC 9113 §4.1)
    length = len(payload)
    if frame_type > CONTINUATION:
        # An extension type, known by name or not: ignored (RFC 9113 §5.5).
        return Frame(frame_type, flags, stream_id, bytes(payload))
    name = FRAME_TYPE_NAMES[frame_type]
    if stream_id == 0 and frame_type in _ON_A_STREAM:
        raise FrameError(f"{name} on stream 0")
    if stream_id and frame_type in _ON_THE_CONNECTION:
        raise FrameError(f"{name} on stream {stream_id}, not on the connection")
    fixed = _FIXED_LENGTH.get(frame_type)
    if fixed is not None and length != fixed:
        raise FrameError(f"{name} of {length} octets, not {fixed}", FRAME_SIZE_ERROR)
    if frame_type in (DATA, HEADERS, PUSH_PROMISE, CONTINUATION):
        frame = Frame(frame_type, flags, stream_id, _fragment(frame_type, flags, payload))
        if frame_type == DATA:
            frame.flow_controlled_length = length
        elif frame_type == PUSH_PROMISE:
            if len(frame.data) < 4:
                raise FrameError("PUSH_PROMISE without a promised stream", FRAME_SIZE_ERROR)
            frame.last_stream_id = int.from_bytes(frame.data[:4], "big") & _STREAM_MASK
            frame.data = frame.data[4:]
            if not frame.last_stream_id or frame.last_stream_id % 2:
                raise FrameError(  # a server's streams are even (RFC 9113 §5.1.1)
                    f"PUSH_PROMISE promising stream {frame.last_stream_id}"
                )
        return frame
    frame = Frame(frame_type, flags, stream_id, b"")
    if frame_type == SETTINGS:  # RFC 9113 §6.5
        if flags & ACK and length:
            raise FrameError("SETTINGS with ACK and a payload", FRAME_SIZE_ERROR)
        if length % 6:
            raise FrameError(
                f"SETTINGS of {length} octets, not a multiple of 6", FRAME_SIZE_ERROR
            )
        frame.settings = [
            (payload[at] << 8 | payload[at + 1], int.from_bytes(payload[at + 2 : at + 6], "big"))
            for at in range(0, length, 6)
        ]
    elif frame_type == RST_STREAM:  # RFC 9113 §6.4
        frame.error_code = int.from_bytes(payload, "big")
    elif frame_type == PING:  # RFC 9113 §6.7
        frame.data = bytes(payload)
    elif frame_type == GOAWAY:  # RFC 9113 §6.8
        if length < 8:
            raise FrameError(f"GOAWAY of {length} octets, under 8", FRAME_SIZE_ERROR)
        frame.last_stream_id = int.from_bytes(payload[:4], "big") & _STREAM_MASK
        frame.error_code = int.from_bytes(payload[4:8], "big")
        frame.data = bytes(payload[8:])
    elif frame_type == WINDOW_UPDATE:  # RFC 9113 §6.9
        frame.window_increment = int.from_bytes(payload, "big") & _STREAM_MASK
        if not frame.window_increment:
            raise FrameError("WINDOW_UPDATE with an increment of 0")
    return frame  # PRIORITY (RFC 9113 §6.3): nothing to read, it is deprecated


def _fragment(frame_type: int, flags: int, payload: Union[bytes, memoryview]) -> bytes:
    """The payload of DATA, HEADERS, PUSH_PROMISE or CONTINUATION (RFC 9113 §6.1, §6.2, §6.6,
    §6.10) without its Pad Length octet, padding and (HEADERS) priority fields."""
    start = 0
    end = len(payload)
    if flags & PADDED and frame_type != CONTINUATION:
        if not end:
            raise FrameError(
                f"padded {FRAME_TYPE_NAMES[frame_type]} without a Pad Length", FRAME_SIZE_ERROR
            )
        start = 1
        end -= payload[0]
    if flags & PRIORITY_FLAG and frame_type == HEADERS:
        start += 5  # Exclusive, Stream Dependency (32) and Weight (8), RFC 9113 §6.2
    if end < start:
        name = FRAME_TYPE_NAMES[frame_type]
        raise FrameError(f"{name} padding or priority longer than its payload")
    return bytes(payload[start:end])


# -- building frames ---------------------------------------------------------------------------


def frame_bytes(
    frame_type: int, flags: int, stream_id: int, payload: Union[bytes, memoryview] = b""
) -> bytes:
    """A frame: the 9-octet header (RFC 9113 §4.1) and the payload."""
    length = len(payload)
    header = bytes((length >> 16, (length >> 8) & 0xFF, length & 0xFF, frame_type, flags))
    return b"".join((header, (stream_id & _STREAM_MASK).to_bytes(4, "big"), payload))


def data_frame(stream_id: int, data: Union[bytes, memoryview], end_stream: bool) -> bytes:
    """DATA (RFC 9113 §6.1), unpadded."""
    return frame_bytes(DATA, END_STREAM if end_stream else 0, stream_id, data)


def header_frames(
    stream_id: int, block: bytes, max_frame_size: int, end_stream: bool = False
) -> List[bytes]:
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


def settings_frame(settings: Sequence[Tuple[int, int]]) -> bytes:
    """SETTINGS (RFC 9113 §6.5) with these (identifier, value) pairs, in order."""
    payload = b"".join(
        identifier.to_bytes(2, "big") + value.to_bytes(4, "big") for identifier, value in settings
    )
    return frame_bytes(SETTINGS, 0, 0, payload)


def client_settings(
    stream_window: int, max_frame_size: int, max_header_list_size: int, header_table_size: int
) -> bytes:
    """The SETTINGS frame of a minigrpc client's connection preface (RFC 9113 §3.4, §6.5.2):
    the RFC's defaults it restates, in the order both minigrpc clients send them, with push
    refused (RFC 9113 §8.4) and minigrpc's window, frame size and header-list limit."""
    return settings_frame((
        (HEADER_TABLE_SIZE, header_table_size),
        (ENABLE_PUSH, 0),
        (INITIAL_WINDOW_SIZE, stream_window),
        (MAX_FRAME_SIZE, max_frame_size),
        (ENABLE_CONNECT_PROTOCOL, 0),
        (MAX_HEADER_LIST_SIZE, max_header_list_size),
    ))


def setting_error(setting: int, value: int) -> Optional[Tuple[int, str]]:
    """Why a value a peer's SETTINGS carries is a connection error (RFC 9113 §6.5.2): the error
    code and what is wrong, or None if the value may be applied.

    ENABLE_PUSH may only be 0 or 1; INITIAL_WINDOW_SIZE above 2^31-1 is a FLOW_CONTROL_ERROR;
    MAX_FRAME_SIZE must lie between 2^14 and 2^24-1.  Unknown settings are ignored.
    """
    if setting == INITIAL_WINDOW_SIZE and value > MAX_WINDOW:
        return FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE over 2^31-1"
    if setting == MAX_FRAME_SIZE and not INITIAL_MAX_FRAME_SIZE <= value <= LARGEST_MAX_FRAME_SIZE:
        return PROTOCOL_ERROR, f"invalid MAX_FRAME_SIZE {value}"
    if setting == ENABLE_PUSH and value not in (0, 1):
        return PROTOCOL_ERROR, f"invalid ENABLE_PUSH {value}"
    return None


def window_update_due(window: int, owed: int, advertised: int) -> bool:
    """Whether a receiver should return ``owed`` consumed bytes with a WINDOW_UPDATE now.

    The policy both minigrpc clients follow (RFC 9113 §6.9 leaves it to the receiver): once the
    window left is at most half of what was ``advertised``.  A small response never costs a
    WINDOW_UPDATE; a large one gets one per half window, so the sender never stalls.
    """
    return owed > 0 and window <= advertised // 2


def settings_ack() -> bytes:
    """The acknowledgement of the peer's SETTINGS (RFC 9113 §6.5.3)."""
    return frame_bytes(SETTINGS, ACK, 0)


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
