"""Streams (RFC 9113 §5): their states, their flow-control windows, and the SETTINGS that set
both.

The rule of this module: everything that touches a stream's state lives here.  Its state in the
life cycle of RFC 9113 §5.1 and what each frame does to it (a table, :data:`TRANSITIONS`, that
the code consults rather than a rule written out wherever a frame is read), which identifiers
are idle (RFC 9113 §5.1.1), how a closed stream closed, its windows both ways (RFC 9113 §5.2,
RFC 9113 §6.9), and the SETTINGS values, ours and the peer's, that size those windows (RFC 9113
§6.5, RFC 9113 §6.9.2).  Both ends' connection (:mod:`minigrpc.http2.connection`) and the
one-shot call (:mod:`minigrpc.protocol.oneshot_protocol`) keep their streams with these parts,
so each rule is written once; what they send or report because of it is theirs.

* What we advertise: the SETTINGS values minigrpc's connections send (RFC 9113 §6.5.2) and the
  connection window a WINDOW_UPDATE opens after them (RFC 9113 §6.9.2), the limits on header
  lists and header blocks.
* Stream states (RFC 9113 §5.1): idle, open, half-closed (local), half-closed (remote) and
  closed, the last told apart by how the stream closed, since that decides what a late frame
  means: by END_STREAM both ways, by our RST_STREAM, by the peer's, or never opened at all (an
  identifier the peer skipped, RFC 9113 §5.1.1).  :data:`TRANSITIONS` gives, for each state and
  each frame sent or received, the next state, or what the frame is: ignored, a stream error of
  type STREAM_CLOSED, a connection error of type PROTOCOL_ERROR or STREAM_CLOSED, or not ours
  to send.  :class:`Streams` holds one connection's streams by identifier.
* Flow control (RFC 9113 §5.2, RFC 9113 §6.9): what we may send
  (:attr:`Stream.outbound_window`, the connection's kept by the caller), widened by
  WINDOW_UPDATE up to 2^31-1 (RFC 9113 §6.9.1); what the peer may send
  (:class:`InboundWindow`), spent by DATA and returned with WINDOW_UPDATE once half of it is
  used.
* The peer's SETTINGS (:class:`PeerSettings`): each value checked (RFC 9113 §6.5.2) and applied
  in order (RFC 9113 §6.5.3), a new INITIAL_WINDOW_SIZE moving every open stream's window
  (RFC 9113 §6.9.2).

Like :mod:`minigrpc.http2.frames`, it loads nothing beyond the package, for the one-shot call's
cold start: states, events and outcomes are plain integers.
"""

from .frames import (
    CLIENT_PREFACE,
    ENABLE_CONNECT_PROTOCOL,
    ENABLE_PUSH,
    FLOW_CONTROL_ERROR,
    HEADER_TABLE_SIZE,
    INITIAL_MAX_FRAME_SIZE,
    INITIAL_WINDOW,
    INITIAL_WINDOW_SIZE,
    LARGEST_MAX_FRAME_SIZE,
    MAX_CONCURRENT_STREAMS,
    MAX_FRAME_SIZE,
    MAX_HEADER_LIST_SIZE,
    MAX_WINDOW,
    PROTOCOL_ERROR,
    STREAM_CLOSED,
    FrameError,
    StreamError,
    settings_frame,
    window_update_frame,
)
from .hpack_codec import DEFAULT_TABLE_SIZE, Encoder

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# -- what we advertise (RFC 9113 §6.5.2, §6.9.2) ---------------------------------------------------

#: Per-stream receive window we advertise (grpcio and grpclib use 4 MiB; docs/wire-rules.md).
DEFAULT_STREAM_WINDOW = 4 * 1024 * 1024
#: Connection receive window. Data is acknowledged as soon as it is buffered, so this only needs
#: to cover what is in flight between two reads, not every stream's full window.
DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024
#: Largest frame we accept. Python pays per frame, so fewer, larger frames are cheaper.
DEFAULT_MAX_FRAME_SIZE = 1024 * 1024
#: The header-list size the connection's HPACK decoder accepts (RFC 9113 §6.5.2). A larger list
#: fails the whole connection, so it is kept well above the per-call limit that the call layers
#: enforce themselves, per stream.
CONNECTION_MAX_HEADER_LIST_SIZE = 64 * 1024
#: An encoded header block may not grow past this before END_HEADERS: the decoded limit we
#: advertise, plus room for padding and for literals that encode longer than they decode.
MAX_HEADER_BLOCK = 2 * CONNECTION_MAX_HEADER_LIST_SIZE
#: Per-call header-list limit: PROTOCOL-HTTP2.md suggests 8 KiB; grpcio advertises 16 KiB.
CALL_MAX_HEADER_LIST_SIZE = 16 * 1024
#: Until the server's SETTINGS arrive, the client opens at most this many streams: its
#: MAX_CONCURRENT_STREAMS is unknown (RFC 9113 §6.5.2 sets no initial limit) and grpc-go
#: assumes 100.
DEFAULT_PEER_MAX_CONCURRENT_STREAMS = 100


def client_settings(
    stream_window: int, max_frame_size: int, max_header_list_size: int
) -> "List[Tuple[int, int]]":
    """The SETTINGS of a minigrpc client's preface (RFC 9113 §3.4, §6.5.2), in the order both
    minigrpc clients send them: the RFC's defaults it restates, push refused (RFC 9113 §8.4),
    and minigrpc's window, frame size and header-list limit."""
    return [
        (HEADER_TABLE_SIZE, DEFAULT_TABLE_SIZE),
        (ENABLE_PUSH, 0),
        (INITIAL_WINDOW_SIZE, stream_window),
        (MAX_FRAME_SIZE, max_frame_size),
        (ENABLE_CONNECT_PROTOCOL, 0),
        (MAX_HEADER_LIST_SIZE, max_header_list_size),
    ]


def server_settings(
    stream_window: int,
    max_frame_size: int,
    max_header_list_size: int,
    max_concurrent_streams: "Optional[int]",
) -> "List[Tuple[int, int]]":
    """The SETTINGS of a minigrpc server's preface (RFC 9113 §3.4, §6.5.2)."""
    settings = [
        (INITIAL_WINDOW_SIZE, stream_window),
        (MAX_FRAME_SIZE, max_frame_size),
        (MAX_HEADER_LIST_SIZE, max_header_list_size),
    ]
    if max_concurrent_streams is not None:
        settings.insert(0, (MAX_CONCURRENT_STREAMS, max_concurrent_streams))
    return settings


def preface(settings: "Sequence[Tuple[int, int]]", connection_window: int, client: bool) -> bytes:
    """What an end sends first (RFC 9113 §3.4): a client the 24 octets of magic, then our
    SETTINGS, then the WINDOW_UPDATE that opens the connection window beyond its initial
    65,535 octets, which SETTINGS cannot change (RFC 9113 §6.9.2).

    The stream windows we advertise count from now: the peer cannot send on a stream before it
    has read these SETTINGS.
    """
    out = [CLIENT_PREFACE] if client else []
    out.append(settings_frame(settings))
    if connection_window > INITIAL_WINDOW:
        out.append(window_update_frame(0, connection_window - INITIAL_WINDOW))
    return b"".join(out)


# -- stream states (RFC 9113 §5.1) -----------------------------------------------------------------

IDLE = 0
OPEN = 1
HALF_CLOSED_LOCAL = 2
HALF_CLOSED_REMOTE = 3
#: Closed by END_STREAM both ways.
CLOSED = 4
#: Closed by our RST_STREAM: what the peer sent before it read ours is ignored.
CLOSED_BY_US = 5
#: Closed by the peer's RST_STREAM: what it sends after is a stream error STREAM_CLOSED.
CLOSED_BY_PEER = 6
#: Closed without being opened: an identifier below one the peer opened (RFC 9113 §5.1.1), or
#: one of the peer's streams closed so long ago that how is forgotten.
CLOSED_UNOPENED = 7

#: Each state by its name in RFC 9113 §5.1 (and how a closed stream closed).
STATE_NAMES = (
    "idle",
    "open",
    "half-closed (local)",
    "half-closed (remote)",
    "closed",
    "closed by our RST_STREAM",
    "closed by the peer's RST_STREAM",
    "closed, never opened",
)

#: What moves a stream: a frame (or its END_STREAM flag) sent or received.
SEND_HEADERS = 0
SEND_DATA = 1
SEND_END_STREAM = 2
SEND_RST_STREAM = 3
RECV_HEADERS = 4
RECV_DATA = 5
RECV_END_STREAM = 6
RECV_RST_STREAM = 7
RECV_WINDOW_UPDATE = 8
RECV_PRIORITY = 9

EVENT_NAMES = (
    "send HEADERS",
    "send DATA",
    "send END_STREAM",
    "send RST_STREAM",
    "receive HEADERS",
    "receive DATA",
    "receive END_STREAM",
    "receive RST_STREAM",
    "receive WINDOW_UPDATE",
    "receive PRIORITY",
)

#: Outcomes that are not a next state (states are 0 and up).  IGNORE: the frame is dropped.
IGNORE = -1
#: A stream error of type STREAM_CLOSED (RFC 9113 §5.4.2): RST_STREAM answers the frame, and a
#: stream not closed yet is closed by it.
STREAM_CLOSED_ERROR = -2
#: A connection error of type PROTOCOL_ERROR (RFC 9113 §5.4.1).
CONNECTION_PROTOCOL_ERROR = -3
#: A connection error of type STREAM_CLOSED.
CONNECTION_STREAM_CLOSED = -4
#: We may not send this in this state: the caller's mistake, nothing is sent.
NOT_ALLOWED = -5

OUTCOME_NAMES = {
    IGNORE: "ignore",
    STREAM_CLOSED_ERROR: "stream error STREAM_CLOSED",
    CONNECTION_PROTOCOL_ERROR: "connection error PROTOCOL_ERROR",
    CONNECTION_STREAM_CLOSED: "connection error STREAM_CLOSED",
    NOT_ALLOWED: "not allowed",
}

_SENDS_NOTHING = {event: NOT_ALLOWED for event in (SEND_HEADERS, SEND_DATA, SEND_END_STREAM,
                                                   SEND_RST_STREAM)}

#: RFC 9113 §5.1, as a table: for each state, what each event makes of the stream.
TRANSITIONS: "Dict[int, Dict[int, int]]" = {
    IDLE: {
        SEND_HEADERS: OPEN,  # a client opens its stream
        SEND_DATA: NOT_ALLOWED,
        SEND_END_STREAM: NOT_ALLOWED,
        # A stream error on a stream not opened yet (a PRIORITY that depends on itself,
        # RFC 9113 §5.3.1) is answered with RST_STREAM, which opens nothing (RFC 9113 §6.4).
        SEND_RST_STREAM: IDLE,
        # The peer opens it, if the identifier is one it may use (RFC 9113 §5.1.1).
        RECV_HEADERS: OPEN,
        RECV_DATA: CONNECTION_PROTOCOL_ERROR,
        RECV_END_STREAM: CONNECTION_PROTOCOL_ERROR,
        RECV_RST_STREAM: CONNECTION_PROTOCOL_ERROR,
        RECV_WINDOW_UPDATE: CONNECTION_PROTOCOL_ERROR,
        RECV_PRIORITY: IDLE,  # a PRIORITY frame may come before the stream opens
    },
    OPEN: {
        SEND_HEADERS: OPEN,
        SEND_DATA: OPEN,
        SEND_END_STREAM: HALF_CLOSED_LOCAL,
        SEND_RST_STREAM: CLOSED_BY_US,
        RECV_HEADERS: OPEN,
        RECV_DATA: OPEN,
        RECV_END_STREAM: HALF_CLOSED_REMOTE,
        RECV_RST_STREAM: CLOSED_BY_PEER,
        RECV_WINDOW_UPDATE: OPEN,
        RECV_PRIORITY: OPEN,
    },
    HALF_CLOSED_LOCAL: {
        SEND_HEADERS: NOT_ALLOWED,
        SEND_DATA: NOT_ALLOWED,
        SEND_END_STREAM: NOT_ALLOWED,
        SEND_RST_STREAM: CLOSED_BY_US,
        RECV_HEADERS: HALF_CLOSED_LOCAL,
        RECV_DATA: HALF_CLOSED_LOCAL,
        RECV_END_STREAM: CLOSED,
        RECV_RST_STREAM: CLOSED_BY_PEER,
        RECV_WINDOW_UPDATE: HALF_CLOSED_LOCAL,
        RECV_PRIORITY: HALF_CLOSED_LOCAL,
    },
    HALF_CLOSED_REMOTE: {
        SEND_HEADERS: HALF_CLOSED_REMOTE,
        SEND_DATA: HALF_CLOSED_REMOTE,
        SEND_END_STREAM: CLOSED,
        SEND_RST_STREAM: CLOSED_BY_US,
        # Anything but WINDOW_UPDATE, PRIORITY and RST_STREAM: a stream error STREAM_CLOSED.
        RECV_HEADERS: STREAM_CLOSED_ERROR,
        RECV_DATA: STREAM_CLOSED_ERROR,
        RECV_END_STREAM: STREAM_CLOSED_ERROR,
        RECV_RST_STREAM: CLOSED_BY_PEER,
        RECV_WINDOW_UPDATE: HALF_CLOSED_REMOTE,
        RECV_PRIORITY: HALF_CLOSED_REMOTE,
    },
    CLOSED: {
        **_SENDS_NOTHING,
        # After END_STREAM both ways: a connection error STREAM_CLOSED (RFC 9113 §5.1, "closed").
        RECV_HEADERS: CONNECTION_STREAM_CLOSED,
        RECV_DATA: CONNECTION_STREAM_CLOSED,
        RECV_END_STREAM: CONNECTION_STREAM_CLOSED,
        RECV_RST_STREAM: IGNORE,
        RECV_WINDOW_UPDATE: IGNORE,
        RECV_PRIORITY: IGNORE,
    },
    CLOSED_BY_US: {
        **_SENDS_NOTHING,
        # What the peer sent before it read our RST_STREAM: ignored (RFC 9113 §5.1, "closed").
        RECV_HEADERS: IGNORE,
        RECV_DATA: IGNORE,
        RECV_END_STREAM: IGNORE,
        RECV_RST_STREAM: IGNORE,
        RECV_WINDOW_UPDATE: IGNORE,
        RECV_PRIORITY: IGNORE,
    },
    CLOSED_BY_PEER: {
        **_SENDS_NOTHING,
        # After its own RST_STREAM, the peer may send only PRIORITY (RFC 9113 §5.1): a stream error.
        RECV_HEADERS: STREAM_CLOSED_ERROR,
        RECV_DATA: STREAM_CLOSED_ERROR,
        RECV_END_STREAM: STREAM_CLOSED_ERROR,
        RECV_RST_STREAM: IGNORE,
        RECV_WINDOW_UPDATE: IGNORE,
        RECV_PRIORITY: IGNORE,
    },
    CLOSED_UNOPENED: {
        **_SENDS_NOTHING,
        # The peer may not open a stream below one it opened (RFC 9113 §5.1.1); anything else
        # is late.
        RECV_HEADERS: CONNECTION_PROTOCOL_ERROR,
        RECV_DATA: IGNORE,
        RECV_END_STREAM: IGNORE,
        RECV_RST_STREAM: IGNORE,
        RECV_WINDOW_UPDATE: IGNORE,
        RECV_PRIORITY: IGNORE,
    },
}

#: :data:`TRANSITIONS` by event, then state, as tuples: what the code reads.
_BY_EVENT = tuple(
    tuple(TRANSITIONS[state][event] for state in range(len(STATE_NAMES)))
    for event in range(len(EVENT_NAMES))
)
#: The connection errors among the outcomes, with their codes.
_CONNECTION_ERRORS = {CONNECTION_PROTOCOL_ERROR: PROTOCOL_ERROR,
                      CONNECTION_STREAM_CLOSED: STREAM_CLOSED}
#: Why a frame on a stream in a state is a connection error, for its message.
_WHY = {IDLE: "never opened", CLOSED: "after it ended",
        CLOSED_UNOPENED: "below the last stream the peer opened"}


def outcome(state: int, event: int) -> int:
    """What ``event`` makes of a stream in ``state`` (:data:`TRANSITIONS`)."""
    return _BY_EVENT[event][state]


def outcomes(event: int) -> "Tuple[int, ...]":
    """What ``event`` makes of a stream, by state (:data:`TRANSITIONS`, a tuple to index)."""
    return _BY_EVENT[event]


def received(state: int, event: int, stream_id: int, kind: str) -> int:
    """What a ``kind`` frame received on ``stream_id`` does there: the next state, IGNORE or
    STREAM_CLOSED_ERROR; a connection error is raised (:class:`FrameError` with its code)."""
    result = _BY_EVENT[event][state]
    code = _CONNECTION_ERRORS.get(result)
    if code is not None:
        why = _WHY.get(state, STATE_NAMES[state])
        raise FrameError(f"{kind} on stream {stream_id}, {why}", code)
    return result


def depends_on_itself(state: int, stream_id: int, dependency: int) -> bool:
    """Priority fields (PRIORITY, or HEADERS with the PRIORITY flag) that make a stream that is
    not closed depend on itself: a stream error PROTOCOL_ERROR (RFC 9113 §5.3.1)."""
    return dependency == stream_id and _BY_EVENT[RECV_PRIORITY][state] != IGNORE


#: What a header block from the server is (:meth:`Stream.response_block`, RFC 9113 §8.1).
INFORMATIONAL = 0
RESPONSE = 1
TRAILERS = 2

#: What DATA received and sent do, by state: read per frame.
_RECEIVES_DATA = _BY_EVENT[RECV_DATA]
_SENDS_DATA = _BY_EVENT[SEND_DATA]


class Stream:
    """One stream: its state (RFC 9113 §5.1), its windows both ways (RFC 9113 §6.9), and where
    its message is (RFC 9113 §8.1)."""

    __slots__ = ("content_left", "headers_received", "inbound", "outbound_window", "state")

    def __init__(self, outbound_window: int, inbound_window: int) -> None:
        self.state = IDLE
        #: What we may still send (the peer's window for the stream).
        self.outbound_window = outbound_window
        #: What the peer may still send.
        self.inbound = InboundWindow(inbound_window)
        #: The stream's first header block has been read (a second is trailers, RFC 9113 §8.1).
        self.headers_received = False
        #: What the peer's ``content-length`` says is still to come in DATA, or None
        #: (RFC 9113 §8.1.1: a message whose DATA add up to anything else is malformed).
        self.content_left: Optional[int] = None

    @property
    def open(self) -> bool:
        """The peer may still send DATA on it (so returning window to it makes sense)."""
        return _RECEIVES_DATA[self.state] >= 0

    @property
    def sending(self) -> bool:
        """We may still send DATA on it: our side has not ended."""
        return _SENDS_DATA[self.state] >= 0

    @property
    def closed(self) -> bool:
        """Closed one way or another (never true while the stream is in
        :attr:`Streams.active`)."""
        return self.state >= CLOSED

    @property
    def inbound_flow_control_window(self) -> int:
        """What the peer may still send on it (:class:`InboundWindow`)."""
        return self.inbound.window

    def response_block(self, status: "Optional[bytes]", end_stream: bool) -> int:
        """What a header block from the server is on the stream (RFC 9113 §8.1), given its
        ``:status``: INFORMATIONAL (1xx without END_STREAM, skipped: the response headers
        follow, RFC 9110 §15.2), RESPONSE (the first other block) or TRAILERS (a second, which
        must end the stream: without END_STREAM, a connection error PROTOCOL_ERROR)."""
        if not self.headers_received:
            if status is not None and status[:1] == b"1" and not end_stream:
                return INFORMATIONAL
            self.headers_received = True
            return RESPONSE
        if not end_stream:
            raise FrameError("trailers without END_STREAM")
        return TRAILERS

    def widen(self, increment: int) -> None:
        """A WINDOW_UPDATE on the stream: an increment of 0 is a stream error PROTOCOL_ERROR
        (RFC 9113 §6.9), and so is a window past 2^31-1, FLOW_CONTROL_ERROR (RFC 9113
        §6.9.1)."""
        if not increment:
            raise StreamError(PROTOCOL_ERROR, "WINDOW_UPDATE with an increment of 0")
        window = self.outbound_window + increment
        if window > MAX_WINDOW:
            raise StreamError(FLOW_CONTROL_ERROR, "a stream window over 2^31-1")
        self.outbound_window = window


#: How many closed streams are remembered, and how each closed (RFC 9113 §5.1 treats frames on
#: a closed stream by how it closed).
CLOSED_STREAMS_KEPT = 1024


class Streams:
    """The streams of one connection, by identifier (RFC 9113 §5.1, §5.1.1).

    :attr:`active` holds those not closed; of closed ones the last :data:`CLOSED_STREAMS_KEPT`
    are remembered by how they closed.  Identifiers say the rest: a client's streams are odd
    and a server's even, each end's in increasing order, so one of ours at or above
    :attr:`next_stream_id` and one of the peer's above :attr:`last_peer_stream_id` is idle; one
    of ours below, closed so long ago it is forgotten, reads as closed by us (its late frames
    are ignored), and one of the peer's below reads as never opened.  Only a client's peer
    opens no streams: push is refused (RFC 9113 §8.4).
    """

    __slots__ = (
        "_closed",
        "_ours",
        "active",
        "last_peer_stream_id",
        "next_stream_id",
        "peer_opens",
    )

    def __init__(self, client: bool) -> None:
        self.active: Dict[int, Stream] = {}
        self._closed: Dict[int, int] = {}
        self._ours = 1 if client else 0
        #: The identifier the next stream we open must use.
        self.next_stream_id = 1 if client else 2
        #: The highest stream the peer opened (our GOAWAY's last stream id).
        self.last_peer_stream_id = 0
        #: Whether the peer opens streams with HEADERS: a server's peer does.
        self.peer_opens = not client

    def state(self, stream_id: int) -> int:
        """The state of ``stream_id`` (stream 0 is the connection, never a stream)."""
        stream = self.active.get(stream_id)
        if stream is not None:
            return stream.state
        if stream_id % 2 == self._ours:
            if stream_id >= self.next_stream_id:
                return IDLE
            return self._closed.get(stream_id, CLOSED_BY_US)
        if stream_id > self.last_peer_stream_id:
            return IDLE
        return self._closed.get(stream_id, CLOSED_UNOPENED)

    def send_headers(self, stream_id: int, outbound_window: int, inbound_window: int) -> Stream:
        """The stream we send a header block on: one of ours it opens, which must be the next
        of our identifiers (RFC 9113 §5.1.1) and starts with these windows, or one the peer
        opened (a response and its trailers, RFC 9113 §8.1).  Anything else raises ValueError:
        nothing may be sent."""
        stream = self.active.get(stream_id)
        if stream is None or stream_id % 2 == self._ours:
            if stream_id != self.next_stream_id:
                raise ValueError(f"stream {stream_id} is not the next stream to open")
            self.next_stream_id = stream_id + 2
            stream = self.active[stream_id] = Stream(outbound_window, inbound_window)
        self.apply(stream_id, stream, SEND_HEADERS)
        return stream

    def receive_headers(
        self, stream_id: int, outbound_window: int, inbound_window: int
    ) -> "Optional[Stream]":
        """The stream a header block received is for, or None when it is dropped
        (:data:`TRANSITIONS`).  On an idle stream the peer opens it, with these windows, if the
        identifier is one the peer may use (RFC 9113 §5.1.1: else a connection error
        PROTOCOL_ERROR); the lower ones it never used are closed by it.  A connection error
        raises :class:`FrameError`, a stream error :class:`StreamError` (STREAM_CLOSED)."""
        stream = self.active.get(stream_id)
        state = stream.state if stream is not None else self.state(stream_id)
        result = _BY_EVENT[RECV_HEADERS][state]
        if result < 0:
            received(state, RECV_HEADERS, stream_id, "HEADERS")  # raises a connection error
            if result == STREAM_CLOSED_ERROR:
                raise StreamError(STREAM_CLOSED, f"HEADERS on stream {stream_id}, half-closed")
            return None
        if stream is None:
            if not self.peer_opens or stream_id % 2 == self._ours:
                raise FrameError(f"HEADERS on stream {stream_id}, which the peer may not open")
            self.last_peer_stream_id = stream_id
            stream = self.active[stream_id] = Stream(outbound_window, inbound_window)
        stream.state = result  # a header block opens a stream, or leaves it as it was
        return stream

    def apply(self, stream_id: int, stream: Stream, event: int) -> int:
        """Move ``stream`` by ``event`` (:data:`TRANSITIONS`) and return the outcome; a stream
        that closes leaves :attr:`active` and is remembered by how it closed.  A send that is
        not allowed raises ValueError (nothing may be sent)."""
        result = _BY_EVENT[event][stream.state]
        if result >= 0:
            stream.state = result
            if result >= CLOSED:
                del self.active[stream_id]
                self.remember(stream_id, result)
        elif result == NOT_ALLOWED:
            raise ValueError(
                f"{EVENT_NAMES[event]} on stream {stream_id}, {STATE_NAMES[stream.state]}"
            )
        return result

    def remember(self, stream_id: int, state: int) -> None:
        """``stream_id`` is closed, in ``state``: remembered among the last ones."""
        closed = self._closed
        if len(closed) >= CLOSED_STREAMS_KEPT:
            del closed[next(iter(closed))]
        closed[stream_id] = state

    @property
    def opened_by_us(self) -> int:
        """How many of the active streams we opened (only one end opens streams)."""
        return 0 if self.peer_opens else len(self.active)


# -- flow control (RFC 9113 §5.2, §6.9) ----------------------------------------------------------


class InboundWindow:
    """What the peer may still send us, on one stream or on the connection (RFC 9113 §6.9).

    DATA spends it (:meth:`receive`; beyond it, a connection error FLOW_CONTROL_ERROR,
    RFC 9113 §6.9.1); the bytes consumed are owed back, and returned with a WINDOW_UPDATE once
    the window left is at most half of what was advertised (:meth:`acknowledge`): the policy
    RFC 9113 §6.9 leaves to the receiver, under which a small message never costs a
    WINDOW_UPDATE and a large one gets one per half window, so the sender never stalls.
    """

    __slots__ = ("advertised", "owed", "window")

    def __init__(self, size: int) -> None:
        #: What the peer may still send.
        self.window = size
        #: The most we advertised at once.
        self.advertised = size
        #: Bytes consumed and not yet returned.
        self.owed = 0

    def receive(self, length: int) -> None:
        """``length`` octets of DATA (padding included, RFC 9113 §6.9.1) arrived."""
        if length > self.window:
            raise FrameError(
                f"DATA of {length} octets beyond a window of {self.window}", FLOW_CONTROL_ERROR
            )
        self.window -= length

    def acknowledge(self, size: int) -> int:
        """``size`` octets were consumed: the increment of the WINDOW_UPDATE to send now, or 0."""
        owed = self.owed + size
        if owed > 0 and self.window <= self.advertised // 2:
            self.window += owed
            self.owed = 0
            return owed
        self.owed = owed
        return 0

    def grant(self, increment: int) -> bool:
        """Raise the window by ``increment`` at once (the caller sends the WINDOW_UPDATE);
        False, and nothing changes, when that would pass 2^31-1 (RFC 9113 §6.9.1)."""
        window = self.window + increment
        if window > MAX_WINDOW:
            return False
        self.window = window
        if window > self.advertised:
            self.advertised = window
        return True


def acknowledge(
    out: "List[bytes]", connection: InboundWindow, stream_id: int, stream: "Optional[Stream]",
    size: int,
) -> bool:
    """``size`` octets of DATA on ``stream_id`` were consumed: queue in ``out`` the
    WINDOW_UPDATEs due.  The connection's share comes back even when the stream is gone (DATA
    on any stream spends it, RFC 9113 §6.9); the stream's only while the peer may still send
    on it.  True when a connection WINDOW_UPDATE was queued."""
    connection_increment = connection.acknowledge(size)
    if connection_increment:
        out.append(window_update_frame(0, connection_increment))
    if stream is not None and _RECEIVES_DATA[stream.state] >= 0:
        increment = stream.inbound.acknowledge(size)
        if increment:
            out.append(window_update_frame(stream_id, increment))
    return bool(connection_increment)


def widen_connection(window: int, increment: int) -> int:
    """The connection's send window after a WINDOW_UPDATE on stream 0: past 2^31-1 a connection
    error FLOW_CONTROL_ERROR (RFC 9113 §6.9.1)."""
    window += increment
    if window > MAX_WINDOW:
        raise FrameError("connection window over 2^31-1", FLOW_CONTROL_ERROR)
    return window


# -- the peer's SETTINGS (RFC 9113 §6.5) -----------------------------------------------------------

#: MAX_CONCURRENT_STREAMS until the peer's SETTINGS say otherwise: unbounded (RFC 9113 §6.5.2).
UNLIMITED = 2**32


class PeerSettings:
    """What the peer's SETTINGS say (RFC 9113 §6.5.2): the RFC's initial values until its first
    arrive, then each value as applied."""

    __slots__ = ("initial_window", "max_concurrent_streams", "max_frame_size",
                 "max_header_list_size")

    def __init__(self) -> None:
        #: The window each stream we open starts with (RFC 9113 §6.9.2).
        self.initial_window = INITIAL_WINDOW
        #: The largest frame we may send (RFC 9113 §4.2).
        self.max_frame_size = INITIAL_MAX_FRAME_SIZE
        self.max_concurrent_streams = UNLIMITED
        #: The header list the peer accepts, or None (unlimited, RFC 9113 §6.5.2).
        self.max_header_list_size: Optional[int] = None

    def apply(
        self, settings: "Iterable[Tuple[int, int]]", streams: "Iterable[Stream]", encoder: Encoder
    ) -> bool:
        """Apply ``settings`` in order (RFC 9113 §6.5.3), each value checked first (RFC 9113
        §6.5.2: a :class:`FrameError` for one that may not be applied).  A new
        INITIAL_WINDOW_SIZE moves the send window of each of ``streams`` by the difference, even
        below zero, and one it takes past 2^31-1 is a connection error FLOW_CONTROL_ERROR
        (RFC 9113 §6.9.2); a HEADER_TABLE_SIZE bounds our HPACK ``encoder`` (RFC 7541 §4.2).
        Unknown settings are ignored.

        Returns whether a HEADER_TABLE_SIZE was among them (blocks coded before may be coded
        otherwise now).
        """
        table_sized = False
        for setting, value in settings:
            if setting == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise FrameError("INITIAL_WINDOW_SIZE over 2^31-1", FLOW_CONTROL_ERROR)
                delta = value - self.initial_window
                self.initial_window = value
                for stream in streams:
                    stream.outbound_window += delta
                    if stream.outbound_window > MAX_WINDOW:
                        raise FrameError("a stream window over 2^31-1", FLOW_CONTROL_ERROR)
            elif setting == MAX_FRAME_SIZE:
                if not INITIAL_MAX_FRAME_SIZE <= value <= LARGEST_MAX_FRAME_SIZE:
                    raise FrameError(f"invalid MAX_FRAME_SIZE {value}")
                self.max_frame_size = value
            elif setting == ENABLE_PUSH:
                if value not in (0, 1):
                    raise FrameError(f"invalid ENABLE_PUSH {value}")
            elif setting == MAX_CONCURRENT_STREAMS:
                self.max_concurrent_streams = value
            elif setting == MAX_HEADER_LIST_SIZE:
                self.max_header_list_size = value
            elif setting == HEADER_TABLE_SIZE:
                encoder.limit_table_size(value)
                table_sized = True
        return table_sized
