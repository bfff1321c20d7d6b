"""One unary call on an HTTP/2 connection of its own, as a sans-IO state machine.

A process that makes a single call and exits (the CNI plugin, once per pod) pays for every
module it imports, and the full client's connection (:mod:`minigrpc.http2.connection`), built
for long-lived connections with many streams, is the largest part of that.  This machine runs
exactly one stream (id 1) on minigrpc's frame codec (:mod:`minigrpc.http2.frames`) and HPACK codec
(:mod:`minigrpc.http2.hpack_codec`), with the frame-header checks of
:class:`minigrpc.http2.reader.FrameSplitter`, and imports neither the full connection nor h2 and the
hyperframe and hpack libraries (nor the :mod:`logging` and :mod:`typing` they load).  Every gRPC
rule comes from the modules the full client uses: the request headers and the header checks
(:mod:`minigrpc.protocol.headers`), message framing (:mod:`minigrpc.protocol.wire`), and what the
server's frames mean for the call (:mod:`minigrpc.protocol.client_outcome`, with the status tables
of :mod:`minigrpc.protocol.status`).

What it does, from the client's side of RFC 9113:

* the connection preface, our SETTINGS (the values :mod:`minigrpc.http2.settings` holds, which the
  full client advertises too) and the connection WINDOW_UPDATE, then HEADERS (split into
  CONTINUATION frames when the block exceeds the peer's MAX_FRAME_SIZE, RFC 9113 §6.10) and
  the request in DATA frames within the peer's windows and frame size (RFC 9113 §6.9), resumed
  as WINDOW_UPDATEs and SETTINGS arrive; all of it in the first write;
* the server's SETTINGS (RFC 9113 §6.5; its first frame, RFC 9113 §3.4) applied and
  acknowledged, PINGs answered (RFC 9113 §6.7); the server's blocks decoded with all of HPACK
  (dynamic table, Huffman coding, RFC 7541), ours sent with Huffman coding and without adding to
  the dynamic table, a peer's lower HEADER_TABLE_SIZE announced all the same (RFC 7541 §4.2);
* response DATA counted against the windows we advertised and returned with WINDOW_UPDATE as
  it arrives, once half a window is used (RFC 9113 §6.9); a peer that overruns them is a
  FLOW_CONTROL_ERROR;
* response headers, messages and trailers, Trailers-Only, RST_STREAM, GOAWAY below or above
  the call (RFC 9113 §6.8), and connection errors (RFC 9113 §5.4.1: GOAWAY with the code, the
  call UNAVAILABLE).

The I/O, the deadline and the one transparent retry are :mod:`minigrpc.oneshot`'s.
"""

import time
from typing import Callable, List, Optional, Sequence, Tuple

from ..http2 import error_codes, frames, hpack_codec, reader
from ..http2 import settings as http2
from ..http2.error_codes import (
    CANCEL,
    COMPRESSION_ERROR,
    FLOW_CONTROL_ERROR,
    NO_ERROR,
    PROTOCOL_ERROR,
)
from ..http2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PING,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Frame,
)
from ..http2.hpack_codec import Header
from . import client_outcome, headers, wire
from .codes import Code
from .headers import ResponseHead
from .status import DEADLINE_EXCEEDED_DETAILS, CallError, CallStatus, CardinalityViolation, Metadata

#: The call's stream: the first a client opens (RFC 9113 §5.1.1).
STREAM_ID = 1
#: RFC 9113 §6.5.2 and §6.9.2: the initial windows and frame size before SETTINGS say otherwise.
_INITIAL_WINDOW = frames.INITIAL_WINDOW
_INITIAL_MAX_FRAME = frames.INITIAL_MAX_FRAME_SIZE
_MAX_WINDOW = frames.MAX_WINDOW


class _ConnectionError(Exception):
    """A connection error (RFC 9113 §5.4.1): the GOAWAY code and what went wrong."""

    def __init__(self, error_code: int, reason: str) -> None:
        super().__init__(reason)
        self.error_code = error_code


class OneShotCall:
    """A unary call and its connection: :meth:`initiate`, then :meth:`receive_data` for every
    read and :meth:`data_to_send` after it, until :attr:`status` is set; then :meth:`close`.

    :attr:`retryable` is True only when the server provably never processed the call (what
    :class:`minigrpc.driver.attempts.Attempts` looks at).  :attr:`response` is the response payload
    once the call ended OK.
    """

    def __init__(
        self,
        request_headers: Sequence[Header],
        request: bytes,
        *,
        deadline: Optional[float] = None,
        max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        stream_window: int = http2.DEFAULT_STREAM_WINDOW,
        connection_window: int = http2.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: Optional[int] = http2.CALL_MAX_HEADER_LIST_SIZE,
        clock: Callable[[], float] = time.monotonic,
        peer: str = "",
    ) -> None:
        self.deadline = deadline
        #: The target as the user gave it (``Target.display``), named in connection errors.
        self.peer = peer
        self._clock = clock
        self._request_headers = list(request_headers)
        self._request = memoryview(request)
        self._request_ended = False
        self._stream_window = stream_window
        self._connection_window = connection_window
        self._max_frame_size = max_frame_size
        self._max_header_list_size = max_header_list_size
        self._max_receive = max_receive_message_length
        self._splitter = reader.FrameSplitter(
            max_frame_size=max_frame_size,
            max_header_block=http2.MAX_HEADER_BLOCK,
            expect_settings_first=True,
        )
        self._encoder = hpack_codec.Encoder()
        self._decoder = hpack_codec.Decoder(
            hpack_codec.DEFAULT_TABLE_SIZE, http2.CONNECTION_MAX_HEADER_LIST_SIZE
        )
        self._out: List[bytes] = []
        self._pending = b""
        # Send side: what the peer allows (RFC 9113 §6.9).
        self._send_connection = _INITIAL_WINDOW
        self._send_stream = _INITIAL_WINDOW
        self._peer_initial_window = _INITIAL_WINDOW
        self._peer_max_frame = _INITIAL_MAX_FRAME
        # Receive side: what we advertised and have not yet returned.
        self._recv_connection = connection_window
        self._recv_stream = stream_window
        self._owed_connection = 0
        self._owed_stream = 0
        # A header block being collected (HEADERS or PUSH_PROMISE, then CONTINUATION).
        self._block: Optional[List[bytes]] = None
        self._block_stream = 0
        self._block_end_stream = False
        #: The server ended the stream (END_STREAM), or either side reset it.
        self._remote_ended = False
        self._reset = False
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
        """Queue the preface, SETTINGS, the connection WINDOW_UPDATE, HEADERS and the request."""
        # The full client's SETTINGS frame, value for value and in its order.
        self._out.append(http2.CLIENT_PREFACE)
        self._out.append(frames.client_settings(
            self._stream_window,
            self._max_frame_size,
            http2.CONNECTION_MAX_HEADER_LIST_SIZE,
            hpack_codec.DEFAULT_TABLE_SIZE,
        ))
        if self._connection_window > _INITIAL_WINDOW:
            increment = self._connection_window - _INITIAL_WINDOW
            self._out.append(frames.window_update_frame(0, increment))
        block = self._encoder.encode(hpack_codec.outbound_fields(self._request_headers))
        self._out.extend(frames.header_frames(STREAM_ID, block, self._peer_max_frame))
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
            self._out.append(frames.goaway_frame(0, NO_ERROR))

    def _write_request(self) -> None:
        """DATA within the windows and the peer's frame size; END_STREAM on the last."""
        while not self._request_ended and self.status is None:
            size = min(
                len(self._request), self._send_connection, self._send_stream, self._peer_max_frame
            )
            if size <= 0 and self._request:
                return
            chunk, self._request = self._request[:size], self._request[size:]
            last = not self._request
            self._out.append(frames.data_frame(STREAM_ID, chunk, last))
            self._send_connection -= size
            self._send_stream -= size
            self._request_ended = last

    # -- receiving ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the socket; frames after the call's end are not looked at."""
        if self.status is not None:
            return
        self.bytes_received += len(data)
        try:
            try:
                self._splitter.feed(data)
            except error_codes.FrameError as exc:
                raise _ConnectionError(
                    exc.error_code, client_outcome.connection_error_details(
                        exc, isinstance(exc, error_codes.ServerPrefaceError), self.peer
                    )
                ) from None
            buffer = self._pending + data if self._pending else data
            view = memoryview(buffer)
            pos = 0
            header_length = frames.FRAME_HEADER_LENGTH
            while self.status is None and len(buffer) - pos >= header_length:
                length = int.from_bytes(view[pos : pos + 3], "big")
                body = pos + header_length
                if len(buffer) - body < length:
                    break
                self._frame(view[pos:body], view[body : body + length])
                pos = body + length
            self._pending = bytes(view[pos:]) if self.status is None else b""
            self._return_window()
            self._write_request()
        except _ConnectionError as exc:
            self._fail(exc.error_code, str(exc))

    def connection_lost(self, error_text: Optional[str]) -> None:
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

    def _frame(self, header: memoryview, body: memoryview) -> None:
        try:
            frame = frames.parse_frame(header, body)
        except error_codes.FrameError as exc:
            raise _ConnectionError(
                exc.error_code, self._reading(f"invalid frame: {exc}")
            ) from None
        kind = frame.type
        if self._block is not None and kind != CONTINUATION:
            raise _ConnectionError(
                PROTOCOL_ERROR, self._reading("a frame inside a header block")
            )
        if kind == DATA:
            self._on_data(frame)
        elif kind == HEADERS:
            self._check_stream(frame.stream_id, "HEADERS")
            self._block = [frame.data]
            self._block_stream = frame.stream_id
            self._block_end_stream = bool(frame.flags & END_STREAM)
            if frame.flags & END_HEADERS:
                self._end_block()
        elif kind == PUSH_PROMISE:
            # ENABLE_PUSH is 0 in our SETTINGS (RFC 9113 §8.4).
            raise _ConnectionError(PROTOCOL_ERROR, self._reading("PUSH_PROMISE received"))
        elif kind == CONTINUATION:
            if self._block is None or frame.stream_id != self._block_stream:
                raise _ConnectionError(
                    PROTOCOL_ERROR, self._reading("CONTINUATION without a header block")
                )
            self._block.append(frame.data)
            if frame.flags & END_HEADERS:
                self._end_block()
        elif kind == SETTINGS:
            if not frame.flags & ACK:
                self._on_settings(frame)
        elif kind == WINDOW_UPDATE:
            self._on_window_update(frame)
        elif kind == PING:
            if not frame.flags & ACK:
                self._out.append(frames.ping_ack(frame.data))
        elif kind == RST_STREAM:
            self._check_stream(frame.stream_id, "RST_STREAM")
            self._reset = True
            past = self.deadline is not None and self._clock() >= self.deadline
            status, retryable = client_outcome.reset_status(
                frame.error_code, True, past, self.initial_metadata
            )
            self.retryable = retryable
            self._finish(status)
        elif kind == GOAWAY:
            self._on_goaway(frame)
        # PRIORITY (deprecated, RFC 9113 §5.3.2) and frames of unknown types (§5.5) are ignored.

    def _reading(self, what: str) -> str:
        return client_outcome.connection_error_details(
            what, not self.settings_received, self.peer
        )

    def _check_stream(self, stream_id: int, kind: str) -> None:
        """Frames of a stream we never opened are a connection error (RFC 9113 §5.1, idle)."""
        if stream_id != STREAM_ID:
            raise _ConnectionError(
                PROTOCOL_ERROR, self._reading(f"{kind} on stream {stream_id}, never opened")
            )

    def _on_settings(self, frame: Frame) -> None:
        """Apply the peer's SETTINGS in order (RFC 9113 §6.5.2) and acknowledge them (§6.5.3)."""
        for setting, value in frame.settings:
            error = frames.setting_error(setting, value)
            if error is not None:
                raise _ConnectionError(error[0], self._reading(error[1]))
            if setting == frames.INITIAL_WINDOW_SIZE:
                self._send_stream += value - self._peer_initial_window
                self._peer_initial_window = value
                if self._send_stream > _MAX_WINDOW:
                    raise _ConnectionError(
                        FLOW_CONTROL_ERROR, self._reading("stream window over 2^31-1")
                    )
            elif setting == frames.MAX_FRAME_SIZE:
                self._peer_max_frame = value
            elif setting == frames.HEADER_TABLE_SIZE:
                self._encoder.limit_table_size(value)
        self.settings_received = True
        self._out.append(frames.settings_ack())

    def _on_window_update(self, frame: Frame) -> None:
        if frame.stream_id == 0:
            self._send_connection += frame.window_increment
            if self._send_connection > _MAX_WINDOW:
                raise _ConnectionError(
                    FLOW_CONTROL_ERROR, self._reading("connection window over 2^31-1")
                )
            return
        self._check_stream(frame.stream_id, "WINDOW_UPDATE")
        self._send_stream += frame.window_increment
        if self._send_stream > _MAX_WINDOW:
            # A stream error (RFC 9113 §6.9.1): this client resets the stream itself.
            status, _ = client_outcome.reset_status(FLOW_CONTROL_ERROR, False, False, ())
            self._finish(status, FLOW_CONTROL_ERROR)

    def _on_goaway(self, frame: Frame) -> None:
        """GOAWAY (RFC 9113 §6.8): below our stream the call was never processed; at or above
        it the response may still come, and a later loss of the connection names this code."""
        self.goaway_error_code = frame.error_code
        self.goaway_debug_data = frame.data
        if frame.last_stream_id < STREAM_ID:
            self.retryable = True
            self._finish(client_outcome.refused_by_goaway(frame.last_stream_id))

    def _on_data(self, frame: Frame) -> None:
        self._check_stream(frame.stream_id, "DATA")
        length = frame.flow_controlled_length
        if length > self._recv_connection or length > self._recv_stream:
            raise _ConnectionError(
                FLOW_CONTROL_ERROR, self._reading("DATA beyond the advertised window")
            )
        self._recv_connection -= length
        self._recv_stream -= length
        self._owed_connection += length
        self._owed_stream += length
        try:
            messages = self._messages.feed(frame.data) if frame.data else []
            self._received.extend(messages)
            if len(self._received) > 1:
                raise CardinalityViolation(client_outcome.EXTRA_MESSAGE_DETAILS)
        except CallError as exc:
            self._finish(CallStatus(exc.code_number, str(exc), self.initial_metadata), CANCEL)
            return
        if frame.flags & END_STREAM:
            self._remote_ended = True
            self._end_of_stream()

    def _return_window(self) -> None:
        """WINDOW_UPDATE for the DATA consumed, once half a window is used (RFC 9113 §6.9)."""
        if frames.window_update_due(
            self._recv_connection, self._owed_connection, self._connection_window
        ):
            self._out.append(frames.window_update_frame(0, self._owed_connection))
            self._recv_connection += self._owed_connection
            self._owed_connection = 0
        if self.status is None and frames.window_update_due(
            self._recv_stream, self._owed_stream, self._stream_window
        ):
            self._out.append(frames.window_update_frame(STREAM_ID, self._owed_stream))
            self._recv_stream += self._owed_stream
            self._owed_stream = 0

    def _end_block(self) -> None:
        """A whole header block arrived: decode it (the dynamic table must follow every block,
        RFC 7541 §2.2) and act on it as response headers or trailers."""
        assert self._block is not None
        encoded = b"".join(self._block)
        self._block = None
        try:
            block = self._decoder.decode(encoded)
        except hpack_codec.HeaderListTooLarge as exc:
            raise _ConnectionError(PROTOCOL_ERROR, self._reading(str(exc))) from None
        except hpack_codec.DecodingError as exc:
            raise _ConnectionError(
                COMPRESSION_ERROR, self._reading(f"header block: {exc}")
            ) from None
        end_stream = self._block_end_stream
        if self.response_head is None:
            self._on_response_headers(block, end_stream)
        elif not end_stream:
            raise _ConnectionError(PROTOCOL_ERROR, self._reading("trailers without END_STREAM"))
        else:
            self._remote_ended = True
            failure = client_outcome.block_failure(
                block, self._max_header_list_size, headers.malformed_trailers
            )
            if failure is not None:
                self._finish(*failure)
                return
            self._trailers = block
            self.trailing_metadata = wire.decode_metadata(block)
            self._end_of_stream()

    def _on_response_headers(self, block: List[Header], end_stream: bool) -> None:
        status_value = hpack_codec.find_header(block, b":status")
        if status_value is not None and status_value[:1] == b"1" and not end_stream:
            return  # 1xx: informational, the response headers follow (RFC 9110 §15.2)
        self._remote_ended = end_stream
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

    def _finish(self, status: CallStatus, reset_code: Optional[int] = None) -> None:
        """Record the status once; reset our side of the stream if it is still open.

        A server that ends the stream before our request is complete gets RST_STREAM(NO_ERROR)
        (PROTOCOL-HTTP2.md, "Responses"), as on the full client.
        """
        if self.status is not None:
            return
        self.status = status
        if self._reset or self._failed or (self._remote_ended and self._request_ended):
            return  # the stream is closed (RFC 9113 §5.1), or the connection is
        if reset_code is None and not self._request_ended:
            reset_code = NO_ERROR
        if reset_code is not None:
            self._out.append(frames.rst_stream_frame(STREAM_ID, reset_code))
            self._reset = True

    def _fail(self, error_code: int, details: str) -> None:
        """A connection error: GOAWAY with its code (RFC 9113 §5.4.1); the call UNAVAILABLE."""
        if self.status is not None:
            return
        self._out.append(frames.goaway_frame(0, error_code))
        self._failed = True
        details += client_outcome.goaway_note(self.goaway_error_code, self.goaway_debug_data)
        self._finish(CallStatus(Code.UNAVAILABLE, details))
