"""An HTTP/2 connection (RFC 9113) as a sans-IO state machine, for either end.

:class:`HTTP2Connection` takes the bytes read and returns small event objects
(:mod:`minigrpc.http2.events`) and the bytes to send.  It is composed, not specialised: its
frames come from the one frame reader and its header blocks from the one assembly
(:mod:`minigrpc.http2.frames`), its streams, windows and the peer's SETTINGS are kept by
:mod:`minigrpc.http2.streams`, and what is each end's is given to it when it is made:

* which end it is (``client``): who opens which stream identifiers (RFC 9113 §5.1.1), what the
  connection preface is each way (RFC 9113 §3.4);
* the SETTINGS we advertise (RFC 9113 §6.5.2);
* what a decoded header block means (``read_block``): a response or a request, informational or
  trailers (RFC 9113 §8.1).

:mod:`minigrpc.http2.client` and :mod:`minigrpc.http2.server` make the two ends
(:class:`~minigrpc.http2.client.ClientHTTP2Connection`,
:class:`~minigrpc.http2.server.ServerHTTP2Connection`) from these parts.  Every frame type has one
handler, the same on both ends (``_handle_data``, ``_handle_headers``, ``_handle_settings``, ...),
called through a table by frame type:

* stream states (RFC 9113 §5.1): each handler asks :data:`minigrpc.http2.streams.TRANSITIONS`
  what its frame does to the stream, and carries out the answer: a connection error ends the
  read, a stream error is answered with RST_STREAM (RFC 9113 §5.4.2), a late frame on a stream
  we reset is dropped.  PRIORITY and frames of unknown types are ignored (RFC 9113 §5.3.2,
  §5.5), but a stream that depends on itself is a stream error (RFC 9113 §5.3.1); PUSH_PROMISE
  is a connection error (push is refused by a client and never sent to a server, RFC 9113
  §8.4).
* flow control both ways (RFC 9113 §5.2, §6.9): the peer's windows limit what is sent
  (:meth:`local_flow_control_window`); received DATA counts against the windows we advertised,
  and consumed bytes go back with WINDOW_UPDATE (:meth:`acknowledge_received_data`).  A
  WINDOW_UPDATE of 0 on a stream is a stream error (RFC 9113 §6.9), and so is DATA that does
  not add up to a ``content-length`` (RFC 9113 §8.1.1; the server's end reads the field).
* SETTINGS (RFC 9113 §6.5): applied in order, checked and acknowledged; MAX_FRAME_SIZE bounds
  what we send, MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE are the caller's to honour,
  HEADER_TABLE_SIZE bounds the HPACK encoder (a lower size is announced, RFC 7541 §4.2).
* PING answered and its ACK reported (RFC 9113 §6.7), GOAWAY reported (RFC 9113 §6.8) without
  closing anything (the caller decides which calls go on), RST_STREAM both ways (RFC 9113
  §6.4).
* what a flood costs (RFC 9113 §10.5): frames that ask for no work are counted by type as they
  are read (:attr:`HTTP2Connection.control_frames`), a read stops at the first one past an
  :attr:`~HTTP2Connection.allowance`, and one read decodes at most
  :attr:`~HTTP2Connection.pass_limit` frames, for a server that serves many connections.

It does only what gRPC needs, which is less than a general HTTP/2 endpoint, and per frame,
without the event, frame and state-machine objects a general library builds for every frame.
A connection error (RFC 9113 §5.4.1) is reported as the last event of the read,
:class:`~minigrpc.http2.events.PeerConnectionError`, after the events of the frames before it;
the GOAWAY with its code is queued already.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import hpack_codec
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
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    PADDED,
    PING,
    PRIORITY,
    PROTOCOL_ERROR,
    RST_STREAM,
    SETTINGS,
    STREAM_CLOSED,
    WINDOW_UPDATE,
    FrameError,
    FrameReader,
    HeaderBlocks,
    StreamError,
    data_frame,
    data_payload,
    goaway_frame,
    goaway_payload,
    handlers_by_type,
    header_frames,
    ping_ack,
    ping_frame,
    ping_payload,
    priority_payload,
    refuse_push_promise,
    rst_stream_frame,
    rst_stream_payload,
    settings_ack,
    settings_payload,
    window_update_frame,
    window_update_payload,
)
from .hpack_codec import Header, outbound_fields
from .streams import (
    CONNECTION_MAX_HEADER_LIST_SIZE,
    DEFAULT_CONNECTION_WINDOW,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_STREAM_WINDOW,
    MAX_HEADER_BLOCK,
    RECV_DATA,
    RECV_END_STREAM,
    RECV_RST_STREAM,
    RECV_WINDOW_UPDATE,
    SEND_END_STREAM,
    SEND_RST_STREAM,
    STREAM_CLOSED_ERROR,
    InboundWindow,
    PeerSettings,
    Stream,
    Streams,
    acknowledge,
    depends_on_itself,
    outcomes,
    preface,
    received,
    widen_connection,
)

#: What a decoded header block means to one end (RFC 9113 §8.1): given the stream (open
#: already), its identifier, the fields and whether END_STREAM ended it, the event to report,
#: or None for a block that is skipped (an informational response).  A malformed message
#: raises :class:`~minigrpc.http2.frames.StreamError` (RFC 9113 §8.1.1), anything worse
#: :class:`~minigrpc.http2.frames.FrameError`.
BlockReader = Callable[[Stream, int, List[Header], bool], Optional[Event]]

#: Encoded header blocks remembered (a connection sends the same few again and again).
_ENCODED_KEPT = 64
#: What DATA does on a stream in each state (:data:`minigrpc.http2.streams.TRANSITIONS`): read
#: for every DATA frame, so looked up once.
_DATA_OUTCOMES = outcomes(RECV_DATA)


class _Flood(Exception):
    """The read went past :attr:`HTTP2Connection.allowance` (RFC 9113 §10.5)."""

    def __init__(self, frame_type: Optional[int]) -> None:
        super().__init__(frame_type)
        self.frame_type = frame_type


class HTTP2Connection:
    """One end of an HTTP/2 connection, without I/O (see the module docstring).

    :meth:`initiate` queues the preface; :meth:`receive_data` takes the bytes read and returns
    events; :meth:`data_to_send` returns everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        client: bool,
        read_block: BlockReader,
        settings: Sequence[Tuple[int, int]],
        *,
        stream_window: int = DEFAULT_STREAM_WINDOW,
        connection_window: int = DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        header_list_limit: int = CONNECTION_MAX_HEADER_LIST_SIZE,
        max_header_block: int = MAX_HEADER_BLOCK,
    ) -> None:
        #: Which end this is: the client opens odd streams and sends the magic (RFC 9113
        #: §3.4, §5.1.1).
        self.client = client
        self._read_block = read_block
        self._settings = list(settings)
        self._out: List[bytes] = []
        #: PINGs received (not their ACKs), and HEADERS, DATA or a connection WINDOW_UPDATE
        #: queued, since :meth:`take_pings_received` and :meth:`take_data_sent` last took them:
        #: what gRPC's keepalive policy counts (grpc-core's doc/keepalive.md; gRFC A8).
        self._pings_received = 0
        self._data_sent = False
        self._streams = Streams(client)
        #: The streams that are not closed yet, by identifier.
        self.streams: Dict[int, Stream] = self._streams.active
        #: What the peer's SETTINGS say.
        self.peer = PeerSettings()
        #: The connection window the peer grants us.
        self.outbound_flow_control_window = self.peer.initial_window
        # What we advertise, and what the peer may still send on the connection.
        self._stream_window = stream_window
        self._connection_window = connection_window
        self.inbound = InboundWindow(connection_window)
        self._reader = FrameReader(
            max_frame_size, max_header_block, magic=not client, settings_first=True
        )
        # The decoder's limit may lie above the one advertised: an end that enforces the
        # advertised one per stream keeps the connection for a block between the two.
        self._blocks = HeaderBlocks(
            hpack_codec.Decoder(hpack_codec.DEFAULT_TABLE_SIZE, header_list_limit)
        )
        self._encoder = hpack_codec.Encoder()
        self._encoded: Dict[Tuple[Header, ...], bytes] = {}
        #: What the frames of the read in progress make happen.
        self._events: List[Event] = []
        #: Frames that ask for no work (PRIORITY, RST_STREAM, SETTINGS and PING but not their
        #: ACKs, WINDOW_UPDATE on stream 0), by type, and empty ones (DATA without END_STREAM,
        #: CONTINUATION without END_HEADERS), counted as they are read; whoever polices floods
        #: (RFC 9113 §10.5) takes and clears them (:meth:`take_counts`).  A flood read holds
        #: thousands, so with :attr:`allowance` set the read stops at the first one past it, a
        #: :class:`PeerConnectionError` with ``flood`` set, before the rest is decoded.
        self.control_frames: Dict[int, int] = {}
        self.empty_frames = 0
        self.allowance: Optional[int] = None
        #: Set once we sent GOAWAY: nothing more is read.
        self.closed = False

    # -- what the peer's SETTINGS say, and stream identifiers ---------------------------------

    @property
    def max_outbound_frame_size(self) -> int:
        """The largest frame we may send (the peer's MAX_FRAME_SIZE, RFC 9113 §4.2)."""
        return self.peer.max_frame_size

    @property
    def peer_max_concurrent_streams(self) -> int:
        return self.peer.max_concurrent_streams

    @property
    def peer_max_header_list_size(self) -> Optional[int]:
        return self.peer.max_header_list_size

    @property
    def inbound_flow_control_window(self) -> int:
        """What the peer may still send on the connection."""
        return self.inbound.window

    @property
    def next_stream_id(self) -> int:
        """The identifier the next stream we open must use (RFC 9113 §5.1.1)."""
        return self._streams.next_stream_id

    @next_stream_id.setter
    def next_stream_id(self, stream_id: int) -> None:
        self._streams.next_stream_id = stream_id

    @property
    def last_peer_stream_id(self) -> int:
        """The last stream the peer opened (our GOAWAY's last stream id)."""
        return self._streams.last_peer_stream_id

    def stream_state(self, stream_id: int) -> int:
        """The state of ``stream_id``, open or not (RFC 9113 §5.1; one of the states of
        :mod:`minigrpc.http2.streams`, named by its ``STATE_NAMES``)."""
        return self._streams.state(stream_id)

    @property
    def open_outbound_streams(self) -> int:
        """The streams we opened that are not closed."""
        return self._streams.opened_by_us

    @property
    def pass_limit(self) -> Optional[int]:
        """How much one :meth:`receive_data` decodes, in frames, each counting one more per KiB
        of body; or None.  The rest waits (:attr:`held`) for the next call: a server's way to
        bound what one connection's read costs before it turns to the others."""
        return self._reader.pass_limit

    @pass_limit.setter
    def pass_limit(self, limit: Optional[int]) -> None:
        self._reader.pass_limit = limit

    @property
    def held(self) -> bool:
        """Input is waiting past :attr:`pass_limit`: call :meth:`receive_data` again."""
        return self._reader.held

    def take_counts(self) -> Tuple[int, Dict[int, int]]:
        """The empty frames and the frames that ask for no work counted since the last call
        (:attr:`control_frames`), which start again from none."""
        counts = self.empty_frames, self.control_frames
        if self.empty_frames:
            self.empty_frames = 0
        if self.control_frames:
            self.control_frames = {}
        return counts

    # -- sending ------------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue our preface: the client's magic, our SETTINGS and the connection's
        WINDOW_UPDATE (:func:`minigrpc.http2.streams.preface`, RFC 9113 §3.4, §6.9.2)."""
        self._out.append(preface(self._settings, self._connection_window, self.client))

    def data_to_send(self) -> bytes:
        """Every byte queued since the last call, in order."""
        out = self._out
        if not out:
            return b""
        self._out = []
        return out[0] if len(out) == 1 else b"".join(out)

    def take_pings_received(self) -> int:
        """The PINGs received (RFC 9113 §6.7; not ACKs) since the last call."""
        taken, self._pings_received = self._pings_received, 0
        return taken

    def take_data_sent(self) -> bool:
        """Whether HEADERS, DATA or a connection WINDOW_UPDATE was queued since the last
        call."""
        taken, self._data_sent = self._data_sent, False
        return taken

    def get_next_available_stream_id(self) -> int:
        """The identifier the next :meth:`send_headers` that opens a stream must use (RFC 9113
        §5.1.1); :class:`StreamIDsExhausted` past 2^31-1."""
        stream_id = self._streams.next_stream_id
        if stream_id > 2**31 - 1:
            raise StreamIDsExhausted("stream ids exhausted")
        return stream_id

    def send_headers(
        self, stream_id: int, headers: Sequence[Header], end_stream: bool = False
    ) -> None:
        """A header block on ``stream_id`` (HEADERS and CONTINUATION frames, RFC 9113 §6.2):
        the one that opens a stream of ours (:meth:`get_next_available_stream_id`), or one on a
        stream the peer opened (a response, or with ``end_stream`` trailers, RFC 9113 §8.1)."""
        stream = self._streams.send_headers(
            stream_id, self.peer.initial_window, self._stream_window
        )
        self._out.extend(header_frames(
            stream_id, self._encode_block(headers), self.peer.max_frame_size, end_stream
        ))
        self._data_sent = True
        if end_stream:
            self._streams.apply(stream_id, stream, SEND_END_STREAM)

    def _encode_block(self, headers: Sequence[Header]) -> bytes:
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

    def local_flow_control_window(self, stream_id: int) -> int:
        """What may be sent on the stream now: the smaller of its window and the connection's;
        0 on a stream whose sending side is closed."""
        stream = self.streams.get(stream_id)
        if stream is None or not stream.sending:
            return 0
        window = stream.outbound_window
        connection = self.outbound_flow_control_window
        return window if window < connection else connection

    def send_data(
        self, stream_id: int, data: Union[bytes, memoryview], end_stream: bool = False
    ) -> None:
        """One DATA frame; the caller keeps to :meth:`local_flow_control_window` and
        :attr:`max_outbound_frame_size` (RFC 9113 §6.9.1, §4.2)."""
        stream = self.streams.get(stream_id)
        if stream is None:
            raise ValueError(f"DATA on stream {stream_id}, which is not open")
        if end_stream:
            self._streams.apply(stream_id, stream, SEND_END_STREAM)
        size = len(data)
        stream.outbound_window -= size
        self.outbound_flow_control_window -= size
        self._out.append(data_frame(stream_id, data, end_stream))
        self._data_sent = True

    def end_stream(self, stream_id: int) -> None:
        """END_STREAM on an empty DATA frame."""
        self.send_data(stream_id, b"", end_stream=True)

    def reset_stream(self, stream_id: int, error_code: int = 0) -> None:
        """RST_STREAM (RFC 9113 §6.4) on a stream that is not closed; frames the peer sent
        before it are ignored when they arrive (RFC 9113 §5.1, "closed")."""
        stream = self.streams.get(stream_id)
        if stream is not None:
            self._out.append(rst_stream_frame(stream_id, error_code))
            self._streams.apply(stream_id, stream, SEND_RST_STREAM)

    def ping(self, opaque_data: bytes) -> None:
        """A PING (RFC 9113 §6.7); its ACK is a :class:`PingAcknowledged` event."""
        self._out.append(ping_frame(opaque_data))

    def send_goaway(
        self, last_stream_id: int, error_code: int = 0, debug_data: bytes = b""
    ) -> None:
        """A GOAWAY that does not end the connection here (RFC 9113 §6.8): the streams up to
        ``last_stream_id`` go on, and what the peer sends is still read.  A graceful shutdown
        sends two (PROTOCOL-HTTP2.md, GOAWAY Frame); :meth:`close_connection` ends it."""
        self._out.append(goaway_frame(last_stream_id, error_code, debug_data))

    def close_connection(self, error_code: int = 0, debug_data: bytes = b"") -> None:
        """GOAWAY (RFC 9113 §6.8) with ``error_code``, once; nothing more is read after it.
        Its last stream id is :attr:`last_peer_stream_id`."""
        if not self.closed:
            self.closed = True
            self._out.append(
                goaway_frame(self._streams.last_peer_stream_id, error_code, debug_data)
            )

    def _stream_error(self, stream_id: int, error_code: int) -> None:
        """A stream error (RFC 9113 §5.4.2): RST_STREAM, and a stream not closed yet is closed
        by it and reported; the connection goes on."""
        self._out.append(rst_stream_frame(stream_id, error_code))
        stream = self.streams.get(stream_id)
        if stream is not None:
            self._streams.apply(stream_id, stream, SEND_RST_STREAM)
            self._events.append(StreamReset(stream_id, error_code, False))

    # -- flow control of what we receive ----------------------------------------------------

    def acknowledge_received_data(self, size: int, stream_id: int) -> None:
        """``size`` bytes of DATA on ``stream_id`` were consumed: return them to the peer, in
        WINDOW_UPDATEs sent once half a window is used
        (:func:`minigrpc.http2.streams.acknowledge`)."""
        if acknowledge(self._out, self.inbound, stream_id, self.streams.get(stream_id), size):
            self._data_sent = True

    def increment_flow_control_window(
        self, increment: int, stream_id: Optional[int] = None
    ) -> None:
        """Grant the peer ``increment`` more bytes at once: on the connection, or on a stream
        that may still send.  A grant that would pass 2^31-1 (RFC 9113 §6.9.1) is not made."""
        if not stream_id:
            if self.inbound.grant(increment):
                self._out.append(window_update_frame(0, increment))
                self._data_sent = True
            return
        stream = self.streams.get(stream_id)
        if stream is not None and stream.open and stream.inbound.grant(increment):
            self._out.append(window_update_frame(stream_id, increment))

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[Event]:
        """The events of every whole frame in ``data`` (and what earlier reads left over).

        :class:`~minigrpc.http2.frames.FrameReader` checks each frame's header as soon as its
        9 octets are in: the peer's preface (RFC 9113 §3.4), the MAX_FRAME_SIZE we advertised
        (RFC 9113 §4.2), header blocks (RFC 9113 §6.10).  Each whole frame goes to the handler
        of its type.
        """
        events: List[Event] = []
        if self.closed:
            return events
        self._events = events
        try:
            self._reader.read(data, _HANDLERS, self)
        except FrameError as exc:
            self.close_connection(exc.error_code)
            events.append(PeerConnectionError(exc.error_code, str(exc)))
        except _Flood as exc:
            self.close_connection(ENHANCE_YOUR_CALM)
            events.append(PeerConnectionError(
                ENHANCE_YOUR_CALM, "a flood of frames that do no work", True, exc.frame_type
            ))
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

    def _handle_data(self, flags: int, stream_id: int, payload: bytes) -> None:
        """DATA (RFC 9113 §6.1): counted against the connection window whatever its stream,
        then against the stream's, and reported."""
        data = payload
        if flags & PADDED or not stream_id:  # else data_payload has nothing to do (RFC 9113 §6.1)
            data = data_payload(flags, stream_id, payload)
        length = len(payload)
        self.inbound.receive(length)
        stream = self.streams.get(stream_id)
        if stream is None or _DATA_OUTCOMES[stream.state] < 0:
            state = self.stream_state(stream_id)
            if received(state, RECV_DATA, stream_id, "DATA") == STREAM_CLOSED_ERROR:
                self._stream_error(stream_id, STREAM_CLOSED)
            if length:  # the connection window is spent all the same (RFC 9113 §6.9)
                self.acknowledge_received_data(length, 0)
            return
        stream.inbound.receive(length)
        if stream.content_left is not None:
            left = stream.content_left - len(data)
            stream.content_left = left
            if left < 0 or (left and flags & END_STREAM):
                # Not what content-length said: malformed, a stream error (RFC 9113 §8.1.1).
                self._stream_error(stream_id, PROTOCOL_ERROR)
                self.acknowledge_received_data(length, 0)
                return
        if not length and not flags & END_STREAM:
            self._count_empty()
        self._events.append(DataReceived(stream_id, data, length))
        if flags & END_STREAM:
            self._end_remote(stream_id, stream)

    def _end_remote(self, stream_id: int, stream: Stream) -> None:
        self._events.append(StreamEnded(stream_id))
        self._streams.apply(stream_id, stream, RECV_END_STREAM)

    def _handle_headers(self, flags: int, stream_id: int, payload: bytes) -> None:
        """HEADERS (RFC 9113 §6.2): a header block, whole or continued."""
        fields = self._blocks.headers(flags, stream_id, payload)
        if fields is not None:
            self._received_block(fields)

    def _handle_continuation(self, flags: int, stream_id: int, payload: bytes) -> None:
        """CONTINUATION (RFC 9113 §6.10): the next fragment of the open header block."""
        if not payload and not flags & END_HEADERS:
            self._count_empty()
        fields = self._blocks.continuation(flags, stream_id, payload)
        if fields is not None:
            self._received_block(fields)

    def _received_block(self, fields: List[Header]) -> None:
        """A whole header block, decoded (whatever its stream, RFC 7541 §2.2): what it does to
        its stream (a new one opens), then what it means to this end."""
        blocks = self._blocks
        stream_id = blocks.stream_id
        end_stream = blocks.end_stream
        try:
            stream = self._streams.receive_headers(
                stream_id, self.peer.initial_window, self._stream_window
            )
            if stream is None:
                return
            dependency = blocks.dependency  # 0 without priority fields, the common case
            if dependency and depends_on_itself(stream.state, stream_id, dependency):
                raise StreamError(PROTOCOL_ERROR, "a stream that depends on itself")
            event = self._read_block(stream, stream_id, fields, end_stream)
        except StreamError as exc:
            self._stream_error(stream_id, exc.error_code)
            return
        if event is not None:
            self._events.append(event)
            if end_stream:
                self._end_remote(stream_id, stream)

    def _handle_settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        """SETTINGS (RFC 9113 §6.5): applied in order and acknowledged (RFC 9113 §6.5.3); the
        peer's HEADER_TABLE_SIZE bounds our HPACK encoder (RFC 7541 §4.2), and the blocks
        remembered were coded for the size before."""
        settings = settings_payload(flags, stream_id, payload)
        if flags & ACK:
            return
        self._count(SETTINGS)
        if self.peer.apply(settings, self.streams.values(), self._encoder):
            self._encoded.clear()
        self._out.append(settings_ack())
        self._events.append(SettingsChanged())

    def _handle_window_update(self, flags: int, stream_id: int, payload: bytes) -> None:
        """WINDOW_UPDATE (RFC 9113 §6.9): the connection's send window or a stream's."""
        increment = window_update_payload(stream_id, payload)
        if not stream_id:
            self._count(WINDOW_UPDATE)
            self.outbound_flow_control_window = widen_connection(
                self.outbound_flow_control_window, increment
            )
            self._events.append(WindowUpdated(0))
            return
        state = self.stream_state(stream_id)
        if received(state, RECV_WINDOW_UPDATE, stream_id, "WINDOW_UPDATE") < 0:
            return
        stream = self.streams[stream_id]  # neither idle nor closed: open
        try:
            stream.widen(increment)
        except StreamError as exc:
            self._stream_error(stream_id, exc.error_code)
            return
        self._events.append(WindowUpdated(stream_id))

    def _handle_ping(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PING (RFC 9113 §6.7): answered, or its ACK reported."""
        data = ping_payload(stream_id, payload)
        if flags & ACK:
            self._events.append(PingAcknowledged(data))
            return
        self._count(PING)
        self._pings_received += 1
        self._out.append(ping_ack(data))

    def _handle_rst_stream(self, flags: int, stream_id: int, payload: bytes) -> None:
        """RST_STREAM (RFC 9113 §6.4): the peer closes a stream."""
        error_code = rst_stream_payload(stream_id, payload)
        self._count(RST_STREAM)
        stream = self.streams.get(stream_id)
        if stream is None:
            received(self.stream_state(stream_id), RECV_RST_STREAM, stream_id, "RST_STREAM")
            return
        self._streams.apply(stream_id, stream, RECV_RST_STREAM)
        self._events.append(StreamReset(stream_id, error_code, True))

    def _handle_priority(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PRIORITY (RFC 9113 §6.3): deprecated and ignored (RFC 9113 §5.3.2), but a stream
        cannot depend on itself (RFC 9113 §5.3.1): a stream error, answered on a stream that is
        not closed, or not opened yet (a PRIORITY frame may come first, RFC 9113 §5.1)."""
        dependency = priority_payload(stream_id, payload)
        self._count(PRIORITY)
        if depends_on_itself(self.stream_state(stream_id), stream_id, dependency):
            self._stream_error(stream_id, PROTOCOL_ERROR)

    def _handle_goaway(self, flags: int, stream_id: int, payload: bytes) -> None:
        """GOAWAY (RFC 9113 §6.8): reported; the caller decides which calls go on."""
        last_stream_id, error_code, debug_data = goaway_payload(stream_id, payload)
        self._events.append(ConnectionTerminated(error_code, last_stream_id, debug_data))

    def _handle_push_promise(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PUSH_PROMISE (RFC 9113 §6.6): a connection error, push being refused (RFC 9113
        §8.4)."""
        refuse_push_promise(flags, stream_id, payload)



#: One handler per frame type (RFC 9113 §6), the same on both ends; frames of other types are
#: ignored (RFC 9113 §5.5).
_HANDLERS = handlers_by_type((
    HTTP2Connection._handle_data,
    HTTP2Connection._handle_headers,
    HTTP2Connection._handle_priority,
    HTTP2Connection._handle_rst_stream,
    HTTP2Connection._handle_settings,
    HTTP2Connection._handle_push_promise,
    HTTP2Connection._handle_ping,
    HTTP2Connection._handle_goaway,
    HTTP2Connection._handle_window_update,
    HTTP2Connection._handle_continuation,
))


class StreamIDsExhausted(Exception):
    """No stream identifier is left on this connection (RFC 9113 §5.1.1): open a new one."""
