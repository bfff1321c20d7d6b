"""The part of an HTTP/2 connection (RFC 9113) both ends keep alike, as a sans-IO state machine.

:class:`HTTP2Connection` is what :class:`minigrpc.http2.client.ClientHTTP2Connection` and
:class:`minigrpc.http2.server.ServerHTTP2Connection` build on: bytes in, small event objects and
bytes out, on minigrpc's own frame codec (:mod:`minigrpc.http2.frames`) and HPACK codec
(:mod:`minigrpc.http2.hpack_codec`).  What differs by role, who opens streams and with which
identifiers (RFC 9113 §5.1.1), what the connection preface is (RFC 9113 §3.4) and what a header
block means, is its subclasses'; the rules below are written once, here:

* stream states (RFC 9113 §5.1): open, half-closed either way, closed by END_STREAM both ways or
  by RST_STREAM either way.  A frame on an idle stream (the role says which are idle) is a
  connection error of type PROTOCOL_ERROR; on a stream closed by our RST_STREAM it is ignored;
  on one the peer reset, a stream error of type STREAM_CLOSED; after the peer's END_STREAM,
  DATA and HEADERS are a connection error of type STREAM_CLOSED.  WINDOW_UPDATE, RST_STREAM and
  PRIORITY on a closed stream are ignored (RFC 9113 §5.1, "closed").  Closed streams are
  remembered for :data:`CLOSED_STREAMS_KEPT` streams; an older one reads as reset by us.
* flow control both ways (RFC 9113 §5.2, §6.9): the peer's windows limit what is sent; a
  WINDOW_UPDATE that takes a window past 2^31-1 is a connection error on stream 0 and a stream
  error on a stream (RFC 9113 §6.9.1), both FLOW_CONTROL_ERROR; a new INITIAL_WINDOW_SIZE
  moves every open stream's window by the difference (RFC 9113 §6.9.2).  Received DATA counts
  against the windows we advertised, DATA beyond them is a connection error of type
  FLOW_CONTROL_ERROR, and consumed bytes go back with WINDOW_UPDATE once half a window is used
  (:func:`minigrpc.http2.frames.window_update_due`).
* SETTINGS (RFC 9113 §6.5): the peer's first frame (after the client's magic, RFC 9113 §3.4);
  applied in order, checked (:func:`minigrpc.http2.frames.setting_error`) and acknowledged:
  MAX_FRAME_SIZE for what we send, MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE for the
  caller, HEADER_TABLE_SIZE for the HPACK encoder (a lower size is announced, RFC 7541 §4.2).
* header blocks: HEADERS and CONTINUATION assembled with nothing in between (RFC 9113 §6.10),
  padding and priority fields dropped, decoded in order with one dynamic table (RFC 7541 §2.2)
  and the header-list limit we advertised, then handed to the role.
* PING answered and its ACK reported (RFC 9113 §6.7), GOAWAY reported (RFC 9113 §6.8) without
  closing anything (the caller decides which calls go on), RST_STREAM both ways (RFC 9113
  §6.4), PRIORITY and frames of unknown types ignored (RFC 9113 §5.3.2, §5.5) but a stream that
  depends on itself a stream error (RFC 9113 §5.3.1), PUSH_PROMISE a connection error (push is
  refused by a client and never sent to a server, RFC 9113 §8.4).
* stream errors where the RFC names them, so that one stream's fault never fails the other
  calls on the connection (RFC 9113 §5.4.2): a WINDOW_UPDATE of 0 on a stream (RFC 9113 §6.9),
  DATA that do not add up to a ``content-length`` (RFC 9113 §8.1.1, the role reads the field).
* what a flood costs (RFC 9113 §10.5): frames that ask for no work are counted by type as they
  are read (:attr:`HTTP2Connection.control_frames`), a read stops at the first one past an
  :attr:`~HTTP2Connection.allowance`, and one read decodes at most
  :attr:`~HTTP2Connection.pass_limit` frames, for a server that serves many connections.

A connection error (RFC 9113 §5.4.1) is reported as the last event of the read,
:class:`PeerConnectionError`, after the events of the frames before it; the GOAWAY with its code
is queued already.
"""

from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import error_codes, frames, hpack_codec
from . import settings as http2
from .error_codes import FrameError
from .events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    PeerConnectionError,
    PingAcknowledged,
    SettingsChanged,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from .frames import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    MAX_WINDOW,
    PADDED,
    PING,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
)
from .hpack_codec import Header, outbound_fields

#: How many closed streams are remembered, and how (RFC 9113 §5.1 treats frames on a closed
#: stream by how it closed).
CLOSED_STREAMS_KEPT = 1024
_ENDED = 0  # END_STREAM both ways
_RESET_BY_US = 1
_RESET_BY_PEER = 2
#: Received blocks remembered with their fields (a peer sends the same few again and again).
_DECODED_KEPT = 16
#: Encoded header blocks remembered, likewise.
_ENCODED_KEPT = 64
#: Unbounded until the peer's SETTINGS say otherwise (RFC 9113 §6.5.2).
_UNLIMITED = 2**32


class Stream:
    """One stream: its windows and which sides have ended."""

    __slots__ = (
        "advertised",
        "content_left",
        "headers_received",
        "inbound_flow_control_window",
        "local_ended",
        "outbound_window",
        "owed",
        "remote_ended",
    )

    def __init__(self, outbound_window: int, inbound_window: int) -> None:
        #: What we may still send (the peer's window for the stream).
        self.outbound_window = outbound_window
        #: What the peer may still send, and what we last advertised in all.
        self.inbound_flow_control_window = inbound_window
        self.advertised = inbound_window
        #: Consumed bytes not yet returned with WINDOW_UPDATE.
        self.owed = 0
        self.local_ended = False
        self.remote_ended = False
        #: The stream's first header block has been read.
        self.headers_received = False
        #: What the peer's ``content-length`` says is still to come in DATA, or None
        #: (RFC 9113 §8.1.1: a message whose DATA add up to anything else is malformed).
        self.content_left: Optional[int] = None

    @property
    def open(self) -> bool:
        """The peer may still send on it (so returning window to it makes sense)."""
        return not self.remote_ended

    @property
    def closed(self) -> bool:
        """Never true while the stream is in :attr:`HTTP2Connection.streams`."""
        return self.local_ended and self.remote_ended


class _Failure(Exception):
    """A connection error found while reading (turned into :class:`PeerConnectionError`)."""

    def __init__(self, error_code: int, reason: str) -> None:
        super().__init__(reason)
        self.error_code = error_code


class _Flood(Exception):
    """The read went past :attr:`HTTP2Connection.allowance` (RFC 9113 §10.5)."""

    def __init__(self, frame_type: Optional[int]) -> None:
        super().__init__(frame_type)
        self.frame_type = frame_type


class HTTP2Connection:
    """An HTTP/2 connection's state, without I/O, less what depends on its role (see the module
    docstring).  A subclass queues its preface and says which streams are idle
    (:meth:`_idle`), what the first frame's header must be (:meth:`_first_frame_error`) and
    what a decoded header block means (:meth:`_on_block`).

    :meth:`receive_data` takes the bytes read and returns events; :meth:`data_to_send` returns
    everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        *,
        stream_window: int = http2.DEFAULT_STREAM_WINDOW,
        connection_window: int = http2.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: int = http2.CONNECTION_MAX_HEADER_LIST_SIZE,
        header_list_limit: Optional[int] = None,
        max_header_block: int = http2.MAX_HEADER_BLOCK,
    ) -> None:
        self._out: List[bytes] = []
        #: The streams that are not closed yet, by identifier.
        self.streams: Dict[int, Stream] = {}
        self._closed: Dict[int, int] = {}
        # What the peer's SETTINGS say (RFC 9113 §6.5.2 defaults until they arrive).
        self._peer_initial_window = frames.INITIAL_WINDOW
        self.max_outbound_frame_size = frames.INITIAL_MAX_FRAME_SIZE
        self.peer_max_concurrent_streams = _UNLIMITED
        self.peer_max_header_list_size: Optional[int] = None
        #: The connection window the peer grants us.
        self.outbound_flow_control_window = frames.INITIAL_WINDOW
        # What we advertise.
        self._stream_window = stream_window
        self._connection_window = connection_window
        self._max_frame_size = max_frame_size
        self._max_header_list_size = max_header_list_size
        self.inbound_flow_control_window = connection_window
        self._advertised = connection_window
        self._owed = 0
        self._encoder = hpack_codec.Encoder()
        # The decoder's limit may lie above the one advertised: a role that enforces the
        # advertised one per stream keeps the connection for a block between the two.
        self._decoder = hpack_codec.Decoder(
            hpack_codec.DEFAULT_TABLE_SIZE,
            max_header_list_size if header_list_limit is None else header_list_limit,
        )
        self._max_header_block = max_header_block
        self._decoded: Dict[bytes, List[Header]] = {}
        self._encoded: Dict[Tuple[Header, ...], bytes] = {}
        self._decoded_generation = 0
        # A header block being assembled: its stream, flags and fragments (RFC 9113 §6.10).
        self._block: Optional[List[bytes]] = None
        self._block_stream = 0
        self._block_end_stream = False
        # The frame header still expected first, what the current header block has grown to,
        # and a partial frame: its pieces, their size, and the size that makes it whole.
        self._expect_settings = True
        self._block_bytes = 0
        self._pending: List[bytes] = []
        self._pending_size = 0
        self._needed = 0
        # A header block's priority field named its own stream (RFC 9113 §5.3.1).
        self._block_self_dependent = False
        #: Frames that ask for no work (PRIORITY, RST_STREAM, SETTINGS and PING but not their
        #: ACKs, WINDOW_UPDATE on stream 0), by type, and empty ones (DATA without END_STREAM,
        #: CONTINUATION without END_HEADERS), counted as they are read; whoever polices floods
        #: (RFC 9113 §10.5) takes and clears them.  A flood read holds thousands, so with
        #: :attr:`allowance` set the read stops at the first one past it, a
        #: :class:`PeerConnectionError` with ``flood`` set, before the rest is decoded.
        self.control_frames: Dict[int, int] = {}
        self.empty_frames = 0
        self.allowance: Optional[int] = None
        #: How much one :meth:`receive_data` decodes, in frames, each counting one more per KiB
        #: of body; or None.  The rest waits (:attr:`held`) for the next call: a server's way
        #: to bound what one connection's read costs before it turns to the others.
        self.pass_limit: Optional[int] = None
        self._held = False
        #: Set once we sent GOAWAY: nothing more is read.
        self.closed = False
        #: The last stream the peer opened that we processed (our GOAWAY's last stream id).
        self.last_peer_stream_id = 0

    # -- sending ------------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Every byte queued since the last call, in order."""
        out = self._out
        if not out:
            return b""
        self._out = []
        return out[0] if len(out) == 1 else b"".join(out)

    def local_flow_control_window(self, stream_id: int) -> int:
        """What may be sent on the stream now: the smaller of its window and the connection's."""
        stream = self.streams.get(stream_id)
        if stream is None or stream.local_ended:
            return 0
        window = stream.outbound_window
        connection = self.outbound_flow_control_window
        return window if window < connection else connection

    def send_data(
        self, stream_id: int, data: Union[bytes, memoryview], end_stream: bool = False
    ) -> None:
        """One DATA frame; the caller keeps to :meth:`local_flow_control_window` and
        :attr:`max_outbound_frame_size` (RFC 9113 §6.9.1, §4.2)."""
        stream = self.streams[stream_id]
        size = len(data)
        stream.outbound_window -= size
        self.outbound_flow_control_window -= size
        self._out.append(frames.data_frame(stream_id, data, end_stream))
        if end_stream:
            self._end_local(stream_id, stream)

    def end_stream(self, stream_id: int) -> None:
        """END_STREAM on an empty DATA frame."""
        self.send_data(stream_id, b"", end_stream=True)

    def _header_block(self, headers: Sequence[Header]) -> bytes:
        """``headers`` HPACK-coded without adding to the dynamic table (RFC 7541 §6.2.2), so
        the same header list always codes to the same bytes: those of the last few lists are
        remembered (a connection sends the same few again and again)."""
        key = tuple(headers)
        block = self._encoded.get(key)
        if block is None:
            announcing = self._encoder.announcing
            block = self._encoder.encode(outbound_fields(headers))
            if not announcing:  # a block that announces a table size is sent once
                if len(self._encoded) >= _ENCODED_KEPT:
                    self._encoded.clear()
                self._encoded[key] = block
        return block

    def _queue_header_block(
        self, stream_id: int, stream: Stream, headers: Sequence[Header], end_stream: bool
    ) -> None:
        """HEADERS and CONTINUATION frames for ``headers`` on ``stream_id`` (RFC 9113 §6.2)."""
        block = self._header_block(headers)
        self._out.extend(
            frames.header_frames(stream_id, block, self.max_outbound_frame_size, end_stream)
        )
        if end_stream:
            self._end_local(stream_id, stream)

    def _open_connection_window(self) -> None:
        """The WINDOW_UPDATE on stream 0 that follows our SETTINGS in the preface: SETTINGS
        cannot change the connection window (RFC 9113 §6.9.2), which starts at 65,535."""
        if self._connection_window > frames.INITIAL_WINDOW:
            increment = self._connection_window - frames.INITIAL_WINDOW
            self._out.append(frames.window_update_frame(0, increment))

    def ping(self, opaque_data: bytes) -> None:
        """A PING (RFC 9113 §6.7); its ACK is a :class:`PingAcknowledged` event."""
        self._out.append(frames.frame_bytes(PING, 0, 0, opaque_data))

    def send_goaway(
        self, last_stream_id: int, error_code: int = 0, debug_data: bytes = b""
    ) -> None:
        """A GOAWAY that does not end the connection here (RFC 9113 §6.8): the streams up to
        ``last_stream_id`` go on, and what the peer sends is still read.  A graceful shutdown
        sends two (PROTOCOL-HTTP2.md, GOAWAY Frame); :meth:`close_connection` ends it."""
        self._out.append(frames.goaway_frame(last_stream_id, error_code, debug_data))

    @property
    def held(self) -> bool:
        """Input is waiting past :attr:`pass_limit`: call :meth:`receive_data` again."""
        return self._held

    def _end_local(self, stream_id: int, stream: Stream) -> None:
        stream.local_ended = True
        if stream.remote_ended:
            self._close(stream_id, _ENDED)

    def reset_stream(self, stream_id: int, error_code: int = 0) -> None:
        """RST_STREAM (RFC 9113 §6.4) on a stream that is not closed; frames the peer sent
        before it are ignored when they arrive (RFC 9113 §5.1, "closed")."""
        if stream_id in self.streams:
            self._out.append(frames.rst_stream_frame(stream_id, error_code))
            self._close(stream_id, _RESET_BY_US)

    def close_connection(self, error_code: int = 0, debug_data: bytes = b"") -> None:
        """GOAWAY (RFC 9113 §6.8) with ``error_code``, once; nothing more is read after it.
        Its last stream id is :attr:`last_peer_stream_id`."""
        if not self.closed:
            self.closed = True
            self._out.append(
                frames.goaway_frame(self.last_peer_stream_id, error_code, debug_data)
            )

    def _close(self, stream_id: int, how: int) -> None:
        del self.streams[stream_id]
        self._remember_closed(stream_id, how)

    def _remember_closed(self, stream_id: int, how: int) -> None:
        closed = self._closed
        if len(closed) >= CLOSED_STREAMS_KEPT:
            del closed[next(iter(closed))]
        closed[stream_id] = how

    def _stream_error(self, stream_id: int, error_code: int, events: List[Event]) -> None:
        """A stream error on an open stream (RFC 9113 §5.4.2): RST_STREAM, and the stream is
        closed; the connection goes on."""
        self._out.append(frames.rst_stream_frame(stream_id, error_code))
        self._close(stream_id, _RESET_BY_US)
        events.append(StreamReset(stream_id, error_code, False))

    # -- flow control of what we receive ----------------------------------------------------

    def acknowledge_received_data(self, size: int, stream_id: int) -> None:
        """``size`` bytes of DATA on ``stream_id`` were consumed: return them to the peer, in
        WINDOW_UPDATEs sent once half a window is used
        (:func:`minigrpc.http2.frames.window_update_due`).
        The connection's share is returned even when the stream is gone (RFC 9113 §6.9)."""
        self._owed += size
        if frames.window_update_due(self.inbound_flow_control_window, self._owed, self._advertised):
            self._out.append(frames.window_update_frame(0, self._owed))
            self.inbound_flow_control_window += self._owed
            self._owed = 0
        stream = self.streams.get(stream_id)
        if stream is not None and not stream.remote_ended:
            stream.owed += size
            if frames.window_update_due(
                stream.inbound_flow_control_window, stream.owed, stream.advertised
            ):
                self._out.append(frames.window_update_frame(stream_id, stream.owed))
                stream.inbound_flow_control_window += stream.owed
                stream.owed = 0

    def increment_flow_control_window(
        self, increment: int, stream_id: Optional[int] = None
    ) -> None:
        """Grant the peer ``increment`` more bytes at once: on the connection, or on a stream
        that may still send.  A grant that would pass 2^31-1 (RFC 9113 §6.9.1) is not made."""
        if not stream_id:
            if self.inbound_flow_control_window + increment > MAX_WINDOW:
                return
            self.inbound_flow_control_window += increment
            self._advertised = max(self._advertised, self.inbound_flow_control_window)
            self._out.append(frames.window_update_frame(0, increment))
            return
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_ended:
            return
        if stream.inbound_flow_control_window + increment > MAX_WINDOW:
            return
        stream.inbound_flow_control_window += increment
        stream.advertised = max(stream.advertised, stream.inbound_flow_control_window)
        self._out.append(frames.window_update_frame(stream_id, increment))

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[Event]:
        """The events of every whole frame in ``data`` (and what earlier reads left over).

        Each frame header is checked as soon as its 9 octets are in, before its body is
        waited for: the peer's first frame must be SETTINGS (its preface, RFC 9113 §3.4; a
        server that answers ``HTTP/1.1 400`` would otherwise announce a 4.7 MB frame and be
        waited for), no frame may exceed the MAX_FRAME_SIZE we advertised (RFC 9113 §4.2),
        and a header block may not grow past ``max_header_block`` before END_HEADERS (a
        CONTINUATION flood, CVE-2024-27316).  A partial frame is kept in pieces and joined
        once it is whole, so a large frame that arrives over many reads is copied once.
        """
        events: List[Event] = []
        if self.closed:
            return events
        self._held = False
        if self._pending:
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size < self._needed:
                return events
            data = b"".join(self._pending)
            self._pending = []
        size = len(data)
        pos = 0
        needed = 0
        budget = self.pass_limit
        try:
            while True:
                if size - pos < 9:
                    needed = 9
                    break
                length = data[pos] << 16 | data[pos + 1] << 8 | data[pos + 2]
                if budget is not None:
                    if budget <= 0:  # past the pass limit, at a frame boundary: the rest waits
                        self._held = True
                        break
                    budget -= 1 + (length >> 10)
                kind = data[pos + 3]
                if self._expect_settings:
                    self._expect_settings = False
                    if kind != SETTINGS or length % 6:
                        raise self._first_frame_error(bytes(data[pos : pos + 9]))
                if length > self._max_frame_size:
                    raise error_codes.FrameSizeError(length, self._max_frame_size)
                if kind == HEADERS or kind == CONTINUATION or kind == PUSH_PROMISE:
                    grown = length + self._block_bytes if kind == CONTINUATION else length
                    if grown > self._max_header_block:
                        raise error_codes.HeaderBlockTooLarge(
                            f"a header block exceeds {self._max_header_block} bytes before "
                            "END_HEADERS (CONTINUATION flood)"
                        )
                end = pos + 9 + length
                if end > size:
                    needed = 9 + length
                    break
                flags = data[pos + 4]
                stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
                if self._block is not None and kind != CONTINUATION:
                    raise _Failure(error_codes.PROTOCOL_ERROR, "a frame inside a header block")
                if kind == DATA and not flags & PADDED and stream_id:
                    self._on_data(stream_id, data[pos + 9 : end], length, flags, events)
                elif kind == HEADERS and not flags & (PADDED | PRIORITY_FLAG) and stream_id:
                    self._block_bytes = length
                    self._on_headers(stream_id, data[pos + 9 : end], flags, events)
                elif kind == PING and length == 8 and not stream_id:
                    if flags & ACK:
                        events.append(PingAcknowledged(data[pos + 9 : end]))
                    else:  # RFC 9113 §6.7
                        self._count(PING)
                        self._out.append(frames.ping_ack(data[pos + 9 : end]))
                elif kind == WINDOW_UPDATE and length == 4 and (
                    data[pos + 9] & 0x7F or data[pos + 10] or data[pos + 11] or data[pos + 12]
                ):  # an increment of 0 is a PROTOCOL_ERROR (RFC 9113 §6.9): _frame's
                    if not stream_id:
                        self._count(WINDOW_UPDATE)
                    increment = int.from_bytes(data[pos + 9 : end], "big") & 0x7FFFFFFF
                    self._on_window_update(stream_id, increment, events)
                else:
                    if kind == HEADERS or kind == CONTINUATION:
                        self._block_bytes = grown
                    self._frame(data[pos : pos + 9], data[pos + 9 : end], events)
                pos = end
        except (_Failure, FrameError) as exc:
            self.close_connection(exc.error_code)
            events.append(PeerConnectionError(exc.error_code, str(exc)))
            return events
        except _Flood as exc:
            self.close_connection(error_codes.ENHANCE_YOUR_CALM)
            events.append(PeerConnectionError(
                error_codes.ENHANCE_YOUR_CALM, "a flood of frames that do no work", True,
                exc.frame_type,
            ))
            return events
        if pos < size:
            self._pending = [data[pos:]]
            self._pending_size = size - pos
            self._needed = 0 if self._held else needed
        return events

    def _count(self, kind: int) -> None:
        """One more frame that asks for no work (:attr:`control_frames`)."""
        counts = self.control_frames
        counts[kind] = counts.get(kind, 0) + 1
        if self.allowance is not None:
            self.allowance -= 1
            if self.allowance < 0:
                raise _Flood(kind)

    def _count_empty(self) -> None:
        """One more empty frame (:attr:`empty_frames`)."""
        self.empty_frames += 1
        if self.allowance is not None:
            self.allowance -= 1
            if self.allowance < 0:
                raise _Flood(None)

    def _frame(self, header: bytes, payload: bytes, events: List[Event]) -> None:
        """Any frame but an unpadded DATA or HEADERS frame on a stream."""
        kind = header[3]
        if kind == WINDOW_UPDATE and len(payload) == 4 and not (
            int.from_bytes(payload, "big") & 0x7FFFFFFF
        ):
            stream_id = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            if stream_id:  # on a stream, a stream error (RFC 9113 §6.9)
                self._on_zero_increment(stream_id, events)
                return
        try:
            frame = frames.parse_frame(header, payload)
        except FrameError as exc:
            raise _Failure(exc.error_code, f"invalid frame: {exc}") from None
        if kind == DATA:
            self._on_data(frame.stream_id, frame.data, frame.flow_controlled_length,
                          frame.flags, events)
        elif kind == HEADERS:
            if frame.flags & PRIORITY_FLAG:
                at = 1 if frame.flags & PADDED else 0
                dependency = int.from_bytes(payload[at : at + 4], "big") & 0x7FFFFFFF
                self._block_self_dependent = dependency == frame.stream_id
            self._on_headers(frame.stream_id, frame.data, frame.flags, events)
        elif kind == CONTINUATION:
            if self._block is None or frame.stream_id != self._block_stream:
                raise _Failure(error_codes.PROTOCOL_ERROR, "CONTINUATION without a header block")
            if not frame.data and not frame.flags & END_HEADERS:
                self._count_empty()
            self._block.append(frame.data)
            if frame.flags & END_HEADERS:
                self._end_block(events)
        elif kind == SETTINGS:
            if not frame.flags & ACK:
                self._count(SETTINGS)
                self._on_settings(frame.settings, events)
        elif kind == WINDOW_UPDATE:
            if not frame.stream_id:
                self._count(WINDOW_UPDATE)
            self._on_window_update(frame.stream_id, frame.window_increment, events)
        elif kind == PING:
            if frame.flags & ACK:
                events.append(PingAcknowledged(frame.data))
            else:
                self._count(PING)
                self._out.append(frames.ping_ack(frame.data))
        elif kind == RST_STREAM:
            self._count(RST_STREAM)
            self._on_reset(frame.stream_id, frame.error_code, events)
        elif kind == GOAWAY:
            events.append(ConnectionTerminated(frame.error_code, frame.last_stream_id, frame.data))
        elif kind == PUSH_PROMISE:
            raise _Failure(error_codes.PROTOCOL_ERROR, "PUSH_PROMISE received (push is refused)")
        elif kind == PRIORITY:
            # Deprecated (RFC 9113 §5.3.2) and ignored, but a stream cannot depend on itself
            # (RFC 9113 §5.3.1): a stream error.
            self._count(PRIORITY)
            if int.from_bytes(payload[:4], "big") & 0x7FFFFFFF == frame.stream_id:
                self._on_priority_error(frame.stream_id, events)
        # Frames of unknown types are ignored (RFC 9113 §5.5).

    def _on_zero_increment(self, stream_id: int, events: List[Event]) -> None:
        """A WINDOW_UPDATE of 0 on a stream: a stream error PROTOCOL_ERROR (RFC 9113 §6.9)."""
        if stream_id in self.streams:
            self._stream_error(stream_id, error_codes.PROTOCOL_ERROR, events)
        elif self._idle(stream_id):
            raise _Failure(
                error_codes.PROTOCOL_ERROR, f"WINDOW_UPDATE on stream {stream_id}, never opened"
            )

    def _on_priority_error(self, stream_id: int, events: List[Event]) -> None:
        """A PRIORITY frame that makes its stream depend on itself (RFC 9113 §5.3.1): a stream
        error, answered on an open stream or one not opened yet (a PRIORITY frame may come
        first, RFC 9113 §5.1, "idle")."""
        if stream_id in self.streams:
            self._stream_error(stream_id, error_codes.PROTOCOL_ERROR, events)
        elif self._idle(stream_id):
            self._out.append(frames.rst_stream_frame(stream_id, error_codes.PROTOCOL_ERROR))

    def _stream(self, stream_id: int, kind: str, events: List[Event]) -> Optional[Stream]:
        """The open stream a DATA or HEADERS frame is for, or None when the frame is to be
        dropped (RFC 9113 §5.1); raises for a connection error, resets for a stream error."""
        stream = self.streams.get(stream_id)
        if stream is not None:
            if stream.remote_ended:
                # Half-closed (remote): a stream error (RFC 9113 §5.1).
                self._stream_error(stream_id, error_codes.STREAM_CLOSED, events)
                return None
            return stream
        if self._idle(stream_id):
            raise _Failure(
                error_codes.PROTOCOL_ERROR, f"{kind} on stream {stream_id}, never opened"
            )
        how = self._closed.get(stream_id, _RESET_BY_US)
        if how == _ENDED:
            raise _Failure(
                error_codes.STREAM_CLOSED, f"{kind} on stream {stream_id} after it ended"
            )
        if how == _RESET_BY_PEER:
            self._out.append(frames.rst_stream_frame(stream_id, error_codes.STREAM_CLOSED))
        return None

    def _on_data(
        self, stream_id: int, data: bytes, length: int, flags: int, events: List[Event]
    ) -> None:
        if length > self.inbound_flow_control_window:
            raise _Failure(error_codes.FLOW_CONTROL_ERROR, "DATA beyond the connection window")
        self.inbound_flow_control_window -= length
        stream = self._stream(stream_id, "DATA", events)
        if stream is None:
            if length:  # the connection window is spent all the same (RFC 9113 §6.9)
                self.acknowledge_received_data(length, 0)
            return
        if length > stream.inbound_flow_control_window:
            raise _Failure(error_codes.FLOW_CONTROL_ERROR, "DATA beyond the stream window")
        stream.inbound_flow_control_window -= length
        if stream.content_left is not None:
            left = stream.content_left - len(data)
            stream.content_left = left
            if left < 0 or (left and flags & END_STREAM):
                # Not what content-length said: malformed, a stream error (RFC 9113 §8.1.1).
                self._stream_error(stream_id, error_codes.PROTOCOL_ERROR, events)
                self.acknowledge_received_data(length, 0)
                return
        if not length and not flags & END_STREAM:
            self._count_empty()
        events.append(DataReceived(stream_id, data, length))
        if flags & END_STREAM:
            self._end_remote(stream_id, stream, events)

    def _end_remote(self, stream_id: int, stream: Stream, events: List[Event]) -> None:
        stream.remote_ended = True
        events.append(StreamEnded(stream_id))
        if stream.local_ended:
            self._close(stream_id, _ENDED)

    def _on_headers(self, stream_id: int, fragment: bytes, flags: int, events: List[Event]) -> None:
        self._block = [fragment]
        self._block_stream = stream_id
        self._block_end_stream = bool(flags & END_STREAM)
        if flags & END_HEADERS:
            self._end_block(events)

    def _end_block(self, events: List[Event]) -> None:
        """A whole header block: decode it whatever its stream (the dynamic table must follow
        every block, RFC 7541 §2.2), then let the role act on it."""
        assert self._block is not None
        fragments, self._block = self._block, None
        encoded = fragments[0] if len(fragments) == 1 else b"".join(fragments)
        block = self._decode(encoded)
        if self._block_self_dependent:  # RFC 9113 §5.3.1: a stream error
            self._block_self_dependent = False
            self._on_block_error(self._block_stream, error_codes.PROTOCOL_ERROR, events)
            return
        self._on_block(self._block_stream, block, self._block_end_stream, events)

    def _decode(self, encoded: bytes) -> List[Header]:
        """The fields of one header block (RFC 7541 §3).

        A warm connection receives the same few blocks again and again, each made of
        references to the tables only (RFC 7541 §6.1): such a block decodes to the same fields
        for as long as the dynamic table does not change, so its fields are remembered until
        it does (:attr:`minigrpc.http2.hpack_codec.Decoder.generation`).
        """
        decoder = self._decoder
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
            raise _Failure(error_codes.PROTOCOL_ERROR, str(exc)) from None
        except hpack_codec.DecodingError as exc:
            raise _Failure(error_codes.COMPRESSION_ERROR, f"header block: {exc}") from None
        if decoder.generation == generation:
            if len(self._decoded) >= _DECODED_KEPT:
                self._decoded.clear()
            self._decoded[encoded] = list(fields)
        return fields

    def _on_settings(self, settings: List[Tuple[int, int]], events: List[Event]) -> None:
        """Apply the peer's SETTINGS in order (RFC 9113 §6.5.3) and acknowledge them."""
        for setting, value in settings:
            error = frames.setting_error(setting, value)
            if error is not None:
                raise _Failure(*error)
            if setting == frames.INITIAL_WINDOW_SIZE:
                delta = value - self._peer_initial_window
                self._peer_initial_window = value
                for stream in self.streams.values():
                    stream.outbound_window += delta
                    if stream.outbound_window > MAX_WINDOW:
                        raise _Failure(
                            error_codes.FLOW_CONTROL_ERROR, "a stream window over 2^31-1"
                        )
            elif setting == frames.MAX_FRAME_SIZE:
                self.max_outbound_frame_size = value
            elif setting == frames.MAX_CONCURRENT_STREAMS:
                self.peer_max_concurrent_streams = value
            elif setting == frames.MAX_HEADER_LIST_SIZE:
                self.peer_max_header_list_size = value
            elif setting == frames.HEADER_TABLE_SIZE:
                self._limit_table_size(value)
        self._out.append(frames.settings_ack())
        events.append(SettingsChanged())

    def _limit_table_size(self, value: int) -> None:
        """The peer's SETTINGS_HEADER_TABLE_SIZE bounds our HPACK encoder (RFC 7541 §4.2); the
        blocks remembered were coded for the size before."""
        self._encoder.limit_table_size(value)
        self._encoded.clear()

    def _on_window_update(self, stream_id: int, increment: int, events: List[Event]) -> None:
        if not stream_id:
            self.outbound_flow_control_window += increment
            if self.outbound_flow_control_window > MAX_WINDOW:
                raise _Failure(error_codes.FLOW_CONTROL_ERROR, "connection window over 2^31-1")
            events.append(WindowUpdated(0))
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            if self._idle(stream_id):
                raise _Failure(
                    error_codes.PROTOCOL_ERROR, f"WINDOW_UPDATE on stream {stream_id}, never opened"
                )
            return  # closed: ignored
        stream.outbound_window += increment
        if stream.outbound_window > MAX_WINDOW:
            # A stream error (RFC 9113 §6.9.1).
            self._stream_error(stream_id, error_codes.FLOW_CONTROL_ERROR, events)
            return
        events.append(WindowUpdated(stream_id))

    def _on_reset(self, stream_id: int, error_code: int, events: List[Event]) -> None:
        if stream_id in self.streams:
            self._close(stream_id, _RESET_BY_PEER)
            events.append(StreamReset(stream_id, error_code, True))
        elif self._idle(stream_id):
            raise _Failure(
                error_codes.PROTOCOL_ERROR, f"RST_STREAM on stream {stream_id}, never opened"
            )

    # -- what the role says -------------------------------------------------------------------

    def _idle(self, stream_id: int) -> bool:
        """True for a stream neither side has opened yet (RFC 9113 §5.1, "idle")."""
        raise NotImplementedError

    def _first_frame_error(self, header: bytes) -> Exception:
        """What to raise when the peer's first frame is not SETTINGS (RFC 9113 §3.4)."""
        raise NotImplementedError

    def _on_block(
        self, stream_id: int, block: List[Header], end_stream: bool, events: List[Event]
    ) -> None:
        """A decoded header block on ``stream_id`` (``end_stream``: END_STREAM was set)."""
        raise NotImplementedError

    def _on_block_error(self, stream_id: int, error_code: int, events: List[Event]) -> None:
        """A header block that is a stream error whatever it says (decoded all the same, so
        that the dynamic table follows, RFC 7541 §2.2): on an open stream, reset it."""
        stream = self._stream(stream_id, "HEADERS", events)
        if stream is not None:
            self._stream_error(stream_id, error_code, events)
