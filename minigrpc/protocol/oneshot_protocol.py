"""One unary call on an HTTP/2 connection of its own, as a sans-IO state machine.

A process that makes a single call and exits (the CNI plugin, once per pod) pays for every
module it imports, and the full client's connection (:mod:`minigrpc.http2.connection`, with its
events and both ends), built for long-lived connections with many streams, is the larger part of
that.  This machine runs exactly one stream (id 1) and imports three modules of
:mod:`minigrpc.http2`, the ones the full connection is made of too, so that it writes no rule
of HTTP/2 itself:

* :mod:`minigrpc.http2.frames`: every frame is read by its
  :class:`~minigrpc.http2.frames.FrameReader` (the server's preface, the MAX_FRAME_SIZE we
  advertised and header blocks checked on each frame's header, RFC 9113 §3.4, §4.2, §6.10) and
  its payload by the same per-type functions; header blocks are joined and decoded by its
  :class:`~minigrpc.http2.frames.HeaderBlocks` (RFC 9113 §4.3; RFC 7541 with its dynamic table
  and Huffman coding);
* :mod:`minigrpc.http2.streams`: our SETTINGS and the connection window we open, the server's
  SETTINGS checked and applied (RFC 9113 §6.5), both windows both ways (RFC 9113 §6.9), and the
  stream's state (RFC 9113 §5.1): what a frame on stream 1, or on any other, means is looked
  up in its table;
* :mod:`minigrpc.http2.hpack_codec`: our request block, Huffman-coded without adding to the
  dynamic table, a peer's lower HEADER_TABLE_SIZE announced all the same (RFC 7541 §4.2).

Its frame handlers have the names the full connection's have (``_handle_data``,
``_handle_settings``, ...).  Every gRPC rule comes from the modules the full client uses: the
request headers and the header checks (:mod:`minigrpc.protocol.headers`), message framing
(:mod:`minigrpc.protocol.wire`), and what the server's frames mean for the call
(:mod:`minigrpc.protocol.client_outcome`, with the status tables of
:mod:`minigrpc.protocol.status`).  All of the request goes in the first write, within the peer's
windows and frame size, resumed as WINDOW_UPDATEs and SETTINGS arrive; a connection error
(RFC 9113 §5.4.1) sends GOAWAY with its code and ends the call UNAVAILABLE, a stream error
(RFC 9113 §5.4.2) resets the stream and ends it as the full client's would.

The I/O, the deadline and the one transparent retry are :mod:`minigrpc.oneshot`'s.
"""

import time

from ..http2 import hpack_codec, streams
from ..http2.frames import (
    ACK,
    CANCEL,
    END_STREAM,
    NO_ERROR,
    PROTOCOL_ERROR,
    STREAM_CLOSED,
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
    ping_payload,
    priority_payload,
    refuse_push_promise,
    rst_stream_frame,
    rst_stream_payload,
    settings_ack,
    settings_payload,
    window_update_payload,
)
from ..http2.hpack_codec import Header
from ..http2.streams import (
    INFORMATIONAL,
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
)
from . import client_outcome, headers, wire
from .codes import Code
from .headers import ResponseHead
from .status import DEADLINE_EXCEEDED_DETAILS, CallError, CallStatus, CardinalityViolation, Metadata

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, List, Optional, Sequence, Tuple

#: The call's stream: the first a client opens (RFC 9113 §5.1.1).
STREAM_ID = 1


class OneShotCall:
    """A unary call and its connection: :meth:`initiate`, then :meth:`receive_data` for every
    read and :meth:`data_to_send` after it, until :attr:`status` is set; then :meth:`close`.

    :attr:`retryable` is True only when the server provably never processed the call (what
    :class:`minigrpc.driver.attempts.Attempts` looks at).  :attr:`response` is the response payload
    once the call ended OK.
    """

    def __init__(
        self,
        request_headers: "Sequence[Header]",
        request: bytes,
        *,
        deadline: "Optional[float]" = None,
        max_receive_message_length: "Optional[int]" = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        stream_window: int = streams.DEFAULT_STREAM_WINDOW,
        connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: "Optional[int]" = streams.CALL_MAX_HEADER_LIST_SIZE,
        clock: "Callable[[], float]" = time.monotonic,
        peer: str = "",
    ) -> None:
        self.deadline = deadline
        #: The target as the user gave it (``Target.display``), named in connection errors.
        self.peer = peer
        self._clock = clock
        self._request_headers = list(request_headers)
        self._request = memoryview(request)
        self._settings = streams.client_settings(
            stream_window, max_frame_size, streams.CONNECTION_MAX_HEADER_LIST_SIZE
        )
        self._connection_window = connection_window
        self._max_header_list_size = max_header_list_size
        self._max_receive = max_receive_message_length
        self._reader = FrameReader(max_frame_size, streams.MAX_HEADER_BLOCK, settings_first=True)
        self._blocks = HeaderBlocks(hpack_codec.Decoder(
            hpack_codec.DEFAULT_TABLE_SIZE, streams.CONNECTION_MAX_HEADER_LIST_SIZE
        ))
        self._encoder = hpack_codec.Encoder()
        self._out: List[bytes] = []
        # What the server allows us to send, and what we allow it (RFC 9113 §6.5, §6.9).
        self._peer = PeerSettings()
        self._send_window = self._peer.initial_window
        self._inbound = InboundWindow(connection_window)
        self._streams = Streams(client=True)
        # The call's stream: idle until initiate() opens it.
        self._stream_window = stream_window
        self._stream = Stream(self._peer.initial_window, stream_window)
        self._messages = wire.MessageDecoder(max_receive_message_length)
        self._received: List[Tuple[bool, bytes]] = []
        self.response_head: Optional[ResponseHead] = None
        self.initial_metadata: Metadata = ()
        self.trailing_metadata: Metadata = ()
        self._trailers: Optional[List[Header]] = None
        self.settings_received = False
        self.bytes_received = 0
        self.goaway_error_code: Optional[int] = None
        self.goaway_debug_data = b""
        self._failed = False
        self.status: Optional[CallStatus] = None
        self.retryable = False
        self.response: Optional[bytes] = None

    # -- sending ------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the preface (the full client's, value for value), HEADERS and the request."""
        self._out.append(streams.preface(self._settings, self._connection_window, True))
        block = self._encoder.encode(hpack_codec.outbound_fields(self._request_headers))
        self._stream = self._streams.send_headers(
            STREAM_ID, self._peer.initial_window, self._stream_window
        )
        self._out.extend(header_frames(STREAM_ID, block, self._peer.max_frame_size))
        self._write_request()

    def data_to_send(self) -> bytes:
        """The bytes queued since the last call, in order."""
        out, self._out = self._out, []
        return b"".join(out)

    def expire(self) -> None:
        """The deadline passed: RST_STREAM(CANCEL) and DEADLINE_EXCEEDED."""
        self._finish(
            CallStatus(Code.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS), CANCEL
        )

    def close(self) -> None:
        """Say goodbye: GOAWAY(NO_ERROR), unless a connection error already sent a GOAWAY."""
        if not self._failed:
            self._failed = True
            self._out.append(goaway_frame(0, NO_ERROR))

    def _write_request(self) -> None:
        """DATA within the windows and the peer's frame size; END_STREAM on the last."""
        stream = self._stream
        while stream.sending and self.status is None:
            size = min(len(self._request), self._send_window, stream.outbound_window,
                       self._peer.max_frame_size)
            if size <= 0 and self._request:
                return
            chunk, self._request = self._request[:size], self._request[size:]
            last = not self._request
            self._out.append(data_frame(STREAM_ID, chunk, last))
            self._send_window -= size
            stream.outbound_window -= size
            if last:
                self._streams.apply(STREAM_ID, stream, SEND_END_STREAM)

    # -- receiving ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the socket; frames after the call's end are not looked at."""
        if self.status is not None:
            return
        self.bytes_received += len(data)
        try:
            self._reader.read(data, _HANDLERS, self)
            self._write_request()
        except FrameError as exc:
            self._fail(exc.error_code, client_outcome.connection_error_details(
                exc, not self.settings_received, self.peer
            ))

    def connection_lost(self, error_text: "Optional[str]") -> None:
        """The socket closed (``error_text`` None: EOF) or failed before the call ended.

        A server that closes before its SETTINGS never saw the call: retryable, as on the full
        client.
        """
        if self.status is not None:
            return
        self.retryable = not self.settings_received
        self._failed = True
        details = client_outcome.lost_details(
            error_text, self.bytes_received, self.settings_received, self.peer
        )
        details += client_outcome.goaway_note(self.goaway_error_code, self.goaway_debug_data)
        self._finish(CallStatus(Code.UNAVAILABLE, details))

    def _on_stream(self, stream_id: int, event: int, kind: str) -> "Optional[Stream]":
        """The stream a ``kind`` frame is for, or None when the frame is dropped
        (:data:`minigrpc.http2.streams.TRANSITIONS`); a connection error is raised, a stream
        error ends the call."""
        result = streams.received(self._streams.state(stream_id), event, stream_id, kind)
        if result == STREAM_CLOSED_ERROR:
            self._stream_error(STREAM_CLOSED)
        return self._streams.active.get(stream_id) if result >= 0 else None

    def _stream_error(self, error_code: int) -> None:
        """A stream error on the call's stream (RFC 9113 §5.4.2): we reset it ourselves."""
        status, _ = client_outcome.reset_status(error_code, False, False, ())
        self._finish(status, error_code)

    def _handle_data(self, flags: int, stream_id: int, payload: bytes) -> None:
        """DATA (RFC 9113 §6.1): counted against both windows, returned as it arrives once half
        a window is used (RFC 9113 §6.9), its messages decoded."""
        data = data_payload(flags, stream_id, payload)
        length = len(payload)
        self._inbound.receive(length)
        stream = self._on_stream(stream_id, RECV_DATA, "DATA")
        if stream is None:
            return
        stream.inbound.receive(length)
        try:
            messages = self._messages.feed(data) if data else []
            self._received.extend(messages)
            if len(self._received) > 1:
                raise CardinalityViolation(client_outcome.EXTRA_MESSAGE_DETAILS)
        except CallError as exc:
            self._finish(CallStatus(exc.code_number, str(exc), self.initial_metadata), CANCEL)
        else:
            if flags & END_STREAM:
                self._streams.apply(STREAM_ID, stream, RECV_END_STREAM)
                self._end_of_stream()
        streams.acknowledge(self._out, self._inbound, STREAM_ID, stream, length)

    def _handle_headers(self, flags: int, stream_id: int, payload: bytes) -> None:
        """HEADERS (RFC 9113 §6.2): a header block, whole or continued."""
        block = self._blocks.headers(flags, stream_id, payload)
        if block is not None:
            self._header_block(block)

    def _handle_continuation(self, flags: int, stream_id: int, payload: bytes) -> None:
        """CONTINUATION (RFC 9113 §6.10): the next fragment of the open header block."""
        block = self._blocks.continuation(flags, stream_id, payload)
        if block is not None:
            self._header_block(block)

    def _header_block(self, block: "List[Header]") -> None:
        """A whole header block, decoded (the dynamic table must follow every block, RFC 7541
        §2.2): the response headers or the trailers."""
        blocks = self._blocks
        try:
            # A client's peer opens no stream (RFC 9113 §5.1.1): no new one is made here.
            stream = self._streams.receive_headers(blocks.stream_id, 0, 0)
            if stream is None:
                return
            if streams.depends_on_itself(stream.state, blocks.stream_id, blocks.dependency):
                raise StreamError(PROTOCOL_ERROR, "a stream that depends on itself")
        except StreamError as exc:
            self._stream_error(exc.error_code)
            return
        end_stream = blocks.end_stream
        kind = stream.response_block(hpack_codec.find_header(block, b":status"), end_stream)
        if kind == INFORMATIONAL:
            return
        if end_stream:
            self._streams.apply(STREAM_ID, stream, RECV_END_STREAM)
        if kind == streams.RESPONSE:
            self._on_response_headers(block, end_stream)
            return
        failure = client_outcome.block_failure(
            block, self._max_header_list_size, headers.malformed_trailers
        )
        if failure is not None:
            self._finish(*failure)
            return
        self._trailers = block
        self.trailing_metadata = wire.decode_metadata(block)
        self._end_of_stream()

    def _handle_settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        """SETTINGS (RFC 9113 §6.5; the server's first frame, RFC 9113 §3.4): applied in order
        and acknowledged (RFC 9113 §6.5.3)."""
        settings = settings_payload(flags, stream_id, payload)
        if flags & ACK:
            return
        self._peer.apply(settings, self._streams.active.values(), self._encoder)
        self.settings_received = True
        self._out.append(settings_ack())

    def _handle_window_update(self, flags: int, stream_id: int, payload: bytes) -> None:
        """WINDOW_UPDATE (RFC 9113 §6.9): more room for the request."""
        increment = window_update_payload(stream_id, payload)
        if not stream_id:
            self._send_window = streams.widen_connection(self._send_window, increment)
            return
        stream = self._on_stream(stream_id, RECV_WINDOW_UPDATE, "WINDOW_UPDATE")
        if stream is None:
            return
        try:
            stream.widen(increment)
        except StreamError as exc:
            self._stream_error(exc.error_code)

    def _handle_ping(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PING (RFC 9113 §6.7): answered."""
        data = ping_payload(stream_id, payload)
        if not flags & ACK:
            self._out.append(ping_ack(data))

    def _handle_rst_stream(self, flags: int, stream_id: int, payload: bytes) -> None:
        """RST_STREAM (RFC 9113 §6.4): the server ends the call (PROTOCOL-HTTP2.md, Errors)."""
        error_code = rst_stream_payload(stream_id, payload)
        stream = self._on_stream(stream_id, RECV_RST_STREAM, "RST_STREAM")
        if stream is None:
            return
        self._streams.apply(STREAM_ID, stream, RECV_RST_STREAM)
        past = self.deadline is not None and self._clock() >= self.deadline
        status, retryable = client_outcome.reset_status(
            error_code, True, past, self.initial_metadata
        )
        self.retryable = retryable
        self._finish(status)

    def _handle_priority(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PRIORITY (RFC 9113 §6.3): ignored (RFC 9113 §5.3.2), but the call's stream cannot
        depend on itself (RFC 9113 §5.3.1)."""
        dependency = priority_payload(stream_id, payload)
        if stream_id == STREAM_ID and streams.depends_on_itself(
            self._streams.state(STREAM_ID), STREAM_ID, dependency
        ):
            self._stream_error(PROTOCOL_ERROR)

    def _handle_goaway(self, flags: int, stream_id: int, payload: bytes) -> None:
        """GOAWAY (RFC 9113 §6.8): below our stream the call was never processed; at or above
        it the response may still come, and a later loss of the connection names this code."""
        last_stream_id, self.goaway_error_code, self.goaway_debug_data = goaway_payload(
            stream_id, payload
        )
        if last_stream_id < STREAM_ID:
            self.retryable = True
            self._finish(client_outcome.refused_by_goaway(last_stream_id))

    def _handle_push_promise(self, flags: int, stream_id: int, payload: bytes) -> None:
        """PUSH_PROMISE (RFC 9113 §6.6): ENABLE_PUSH is 0 in our SETTINGS (RFC 9113 §8.4)."""
        refuse_push_promise(flags, stream_id, payload)

    def _on_response_headers(self, block: "List[Header]", end_stream: bool) -> None:
        failure = client_outcome.block_failure(
            block, self._max_header_list_size, headers.malformed_response
        )
        if failure is not None:
            self._finish(*failure)
            return
        head = self.response_head = headers.read_response_headers(block)
        if end_stream:
            # Trailers-Only: grpcio reports its metadata as trailing, initial stays empty.
            self._trailers = block
            self.trailing_metadata = wire.decode_metadata(block)
            self._end_of_stream()
            return
        self.initial_metadata = wire.decode_metadata(block)
        failure = client_outcome.not_grpc_status(head)
        if failure is not None:
            self._finish(*failure)

    def _end_of_stream(self) -> None:
        """The server ended the stream: the status, then the message as the caller gets it."""
        status = client_outcome.final_status(
            self.response_head,
            self._trailers or (),
            self.initial_metadata,
            self.trailing_metadata,
            self._messages.at_boundary,
            len(self._received),
            True,
        )
        if status.code_number == Code.OK:
            compressed, payload = self._received[0]
            encoding = self.response_head.encoding if self.response_head is not None else None
            try:
                self.response = wire.decode_message(
                    compressed, payload, encoding, self._max_receive
                )
            except CallError as exc:
                status = CallStatus(
                    exc.code_number, str(exc), self.initial_metadata, self.trailing_metadata
                )
        self._finish(status)

    def _finish(self, status: CallStatus, reset_code: "Optional[int]" = None) -> None:
        """Record the status once; reset our side of the stream if it is still open.

        A server that ends the stream before our request is complete gets RST_STREAM(NO_ERROR)
        (PROTOCOL-HTTP2.md, "Responses"), as on the full client.
        """
        if self.status is not None:
            return
        self.status = status
        stream = self._stream
        if self._failed or stream.closed:
            return  # the connection is gone, or the stream closed (RFC 9113 §5.1)
        if reset_code is None and stream.sending:
            reset_code = NO_ERROR
        if reset_code is not None:
            self._out.append(rst_stream_frame(STREAM_ID, reset_code))
            self._streams.apply(STREAM_ID, stream, SEND_RST_STREAM)

    def _fail(self, error_code: int, details: str) -> None:
        """A connection error: GOAWAY with its code (RFC 9113 §5.4.1); the call UNAVAILABLE."""
        if self.status is not None:
            return
        self._out.append(goaway_frame(0, error_code))
        self._failed = True
        details += client_outcome.goaway_note(self.goaway_error_code, self.goaway_debug_data)
        self._finish(CallStatus(Code.UNAVAILABLE, details))


def _until_done(
    handler: "Callable[[OneShotCall, int, int, bytes], None]",
) -> "Callable[[OneShotCall, int, int, bytes], bool]":
    """``handler``, then whether the call has its status, which ends the read: what follows
    is not looked at."""

    def handle(call: OneShotCall, flags: int, stream_id: int, payload: bytes) -> bool:
        handler(call, flags, stream_id, payload)
        return call.status is not None

    return handle


#: One handler per frame type (RFC 9113 §6), named as the full connection's are; frames of other
#: types are ignored (RFC 9113 §5.5).
_HANDLERS = handlers_by_type([_until_done(handler) for handler in (
    OneShotCall._handle_data,
    OneShotCall._handle_headers,
    OneShotCall._handle_priority,
    OneShotCall._handle_rst_stream,
    OneShotCall._handle_settings,
    OneShotCall._handle_push_promise,
    OneShotCall._handle_ping,
    OneShotCall._handle_goaway,
    OneShotCall._handle_window_update,
    OneShotCall._handle_continuation,
)])
