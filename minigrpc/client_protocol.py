"""The client side of gRPC over HTTP/2 as a sans-IO state machine: bytes in, bytes and calls out.

This module turns h2 events into per-call outcomes and never touches a socket or a clock it was
not given, so every rule below is unit-tested against a real server-side ``H2Connection`` in
memory. :mod:`minigrpc.transport` adds the socket, the lock and the waiting.

What it implements (grpc-wire.md, from the client's side):

* Requests (§1): the header block in grpc-go's order, ``te: trailers``, ``grpc-timeout``,
  metadata already validated by the caller, the header-list limit the peer advertised.
* Responses (§2, §3): per-stream reassembly of Length-Prefixed-Messages whatever the DATA frame
  boundaries, the receive limit checked on the prefix, Trailers-Only, the ``grpc-status`` /
  ``grpc-message`` / ``grpc-status-details-bin`` trailers, and a synthesized status for broken
  peers decided by ``content-type`` (HTTP status mapping, §4.1).
* RST_STREAM (§4.2) through :func:`minigrpc.status.status_from_rst_stream`; REFUSED_STREAM marks
  the call as never processed, so the transport may retry it (§5).
* Flow control (§6): every DATA frame is acknowledged with its ``flow_controlled_length``
  (padding included) the moment it arrives, also for calls already given up, so no window is
  ever leaked; requests are cut into ``min(window, max frame size)`` chunks.
* GOAWAY (§5, §7): calls above ``last_stream_id`` fail as never processed (retryable); calls at
  or below it continue, which needs :func:`minigrpc.http2.reopen_after_goaway` because h2 closes
  its whole state machine on GOAWAY. The inbound bytes are cut after each GOAWAY frame by
  :class:`minigrpc.http2.FrameSplitter` so that no event is lost.
* Stream limit (§7, pitfall 3): at most 100 concurrent calls until the server's SETTINGS arrive,
  then its MAX_CONCURRENT_STREAMS. The caller waits for a slot; nothing fails.
"""

import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import h2.connection
import h2.errors
import h2.events
import h2.exceptions

from . import http2, wire
from .status import (
    Metadata,
    Status,
    StatusCode,
    http2_error_name,
    parse_grpc_status,
    rst_stream_details,
    status_from_http,
    status_from_rst_stream,
)

Header = Tuple[bytes, bytes]

#: ``te: trailers`` "to detect incompatible proxies" (PROTOCOL-HTTP2.md, Requests).
_TE = (b"te", b"trailers")
_CONTENT_TYPE = (b"content-type", b"application/grpc")
_CANCEL = int(h2.errors.ErrorCodes.CANCEL)
_NO_ERROR = int(h2.errors.ErrorCodes.NO_ERROR)
_REFUSED_STREAM = int(h2.errors.ErrorCodes.REFUSED_STREAM)

#: The details grpcio reports for a call whose deadline passed (grpc-wire.md §5).
DEADLINE_EXCEEDED_DETAILS = "Deadline Exceeded"


def is_grpc_content_type(value: Optional[bytes]) -> bool:
    """``application/grpc``, optionally with ``+subtype`` or ``;params`` (PROTOCOL-HTTP2.md)."""
    if value is None:
        return False
    value = value.lower()
    return value == b"application/grpc" or value.startswith(
        (b"application/grpc+", b"application/grpc;")
    )


def malformed_path(path: str) -> bool:
    """True if ``path`` cannot be a ``:path`` value (RFC 9113 §8.3.1 and §8.2.1).

    The method name is the one request header the application chooses freely, and h2's
    outbound validation is off (:func:`minigrpc.http2.client_config`): an empty path is a
    protocol error (h2's normalisation strips surrounding ASCII whitespace first, so a path of
    only whitespace is empty too), and CR, LF or NUL would make an h2-based server kill the
    whole connection.
    """
    return not path.strip(_ASCII_WHITESPACE) or "\r" in path or "\n" in path or "\0" in path


#: What ``bytes.strip()`` removes, and so what h2's outbound normalisation strips from values.
_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"


def request_headers(
    *,
    path: str,
    authority: str,
    user_agent: str,
    timeout: Optional[float] = None,
    encoding: Optional[str] = None,
    metadata: Sequence[Header] = (),
) -> List[Header]:
    """The request header block, in grpc-go's order (grpc-wire.md §1.1).

    ``:method :scheme :path :authority content-type user-agent te [grpc-encoding]
    grpc-accept-encoding [grpc-timeout] <metadata>``. Receivers must not depend on the order, but
    pseudo-headers must come first (RFC 9113 §8.3) and a fixed order keeps traces comparable.
    ``metadata`` must already be validated and encoded (:func:`minigrpc.wire.encode_metadata`).
    """
    headers: List[Header] = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.encode("utf-8")),
        (b":authority", authority.encode("utf-8")),
        _CONTENT_TYPE,
        (b"user-agent", user_agent.encode("utf-8")),
        _TE,
    ]
    if encoding is not None:
        headers.append((b"grpc-encoding", encoding.encode("ascii")))
    headers.append((b"grpc-accept-encoding", wire.ACCEPT_ENCODING.encode("ascii")))
    if timeout is not None:
        headers.append((b"grpc-timeout", wire.encode_timeout(timeout).encode("ascii")))
    headers.extend(metadata)
    return headers


def header_list_size(headers: Sequence[Header]) -> int:
    """RFC 9113 §6.5.2: name + value + 32 octets per field (grpc-wire.md §6, Header size)."""
    return sum(len(name) + len(value) + 32 for name, value in headers)


class ClientCall:
    """One unary call on one stream: what is left to send, and what has arrived.

    ``status`` is None while the call runs and set exactly once when it ends. ``retryable`` is
    True only when the server provably never processed the call (REFUSED_STREAM, or a stream above
    a GOAWAY's last-stream-id; grpc-wire.md §5), which is what makes a transparent retry safe.
    A plain class with slots (not a dataclass): the one-shot CNI path avoids importing
    ``dataclasses``.
    """

    __slots__ = (
        "deadline",
        "decoder",
        "header_factory",
        "headers",
        "http_status",
        "initial_metadata",
        "messages",
        "request",
        "request_complete",
        "response_accept_encoding",
        "response_encoding",
        "response_headers",
        "retryable",
        "sent",
        "status",
        "stream_id",
        "trailers",
        "trailing_metadata",
    )

    def __init__(
        self,
        request: bytes,
        headers: List[Header],
        deadline: Optional[float] = None,
        header_factory: Optional[Callable[[Optional[float]], List[Header]]] = None,
    ) -> None:
        self.request = request
        self.headers = headers
        self.deadline = deadline
        #: Rebuilds ``headers`` for the time left when the stream actually opens, so that
        #: ``grpc-timeout`` is right even after waiting for a connection or a stream slot (§1.2).
        self.header_factory = header_factory
        self.stream_id = 0
        self.sent = 0
        self.request_complete = False
        self.status: Optional[Status] = None
        self.retryable = False
        self.http_status: Optional[int] = None
        self.response_encoding: Optional[str] = None
        self.response_accept_encoding: Optional[frozenset] = None
        self.initial_metadata: Metadata = ()
        self.trailing_metadata: Metadata = ()
        self.messages: List[Tuple[bool, bytes]] = []
        self.decoder: Optional[wire.MessageDecoder] = None
        #: The response header block and the trailers as received (bytes pairs); a
        #: Trailers-Only response sets both to its single block.
        self.response_headers: Optional[List[Header]] = None
        self.trailers: Optional[List[Header]] = None

    @property
    def done(self) -> bool:
        return self.status is not None


# -- events handed to the transport ---------------------------------------------------------


class CallFinished(NamedTuple):
    """A call got its final status (trailers, a reset, a GOAWAY above it, or a local decision)."""

    call: ClientCall


class WindowOpened(NamedTuple):
    """Send window may have grown: WINDOW_UPDATE on the stream or stream 0, or new SETTINGS."""

    stream_id: int


class GoAwayReceived(NamedTuple):
    """The server will process nothing above ``last_stream_id``; open no new streams here."""

    last_stream_id: int
    error_code: int
    debug_data: bytes


class ConnectionFailed(NamedTuple):
    """The HTTP/2 connection is unusable (protocol error or transport loss); every call ended."""

    details: str


#: What :meth:`ClientConnectionProtocol.receive_data` and friends report.
CallEvent = Union[CallFinished, WindowOpened, GoAwayReceived, ConnectionFailed]


class ClientConnectionProtocol:
    """gRPC client state for one HTTP/2 connection, without I/O.

    Usage: :meth:`initiate`, then :meth:`start_call` / :meth:`send_request` for each call,
    :meth:`receive_data` for every chunk read from the socket, and :meth:`data_to_send` after each
    of those to get the bytes to write. Not thread-safe: the transport serialises access
    (grpc-wire.md §7, pitfall 6).
    """

    def __init__(
        self,
        *,
        max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        stream_window: int = http2.DEFAULT_STREAM_WINDOW,
        connection_window: int = http2.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: Optional[int] = http2.CALL_MAX_HEADER_LIST_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.conn = h2.connection.H2Connection(config=http2.client_config())
        self.max_receive_message_length = max_receive_message_length
        self._stream_window = stream_window
        self._connection_window = connection_window
        self._max_frame_size = max_frame_size
        self._clock = clock
        self._splitter = http2.FrameSplitter(
            max_frame_size=max_frame_size, expect_settings_first=True
        )
        #: Calls still running, by stream id.
        self.calls: Dict[int, ClientCall] = {}
        #: True once the server's first SETTINGS frame arrived (its stream limit is then known).
        self.settings_received = False
        #: Set by a GOAWAY: the highest stream the server will still process.
        self.goaway_last_stream_id: Optional[int] = None
        self.goaway_error_code: Optional[int] = None
        self.goaway_debug_data = b""
        #: Set once the connection is unusable; the reason, for call details.
        self.failure: Optional[str] = None
        #: Encodings the server listed in grpc-accept-encoding, once a response told us.
        self.peer_accept_encodings: Optional[frozenset] = None
        self.bytes_received = 0
        #: Output h2 queued before a GOAWAY in the same read (see :meth:`receive_data`).
        self._saved_output = b""
        #: Largest response header block (or trailers) accepted per call (grpc-wire.md §6).
        self.max_header_list_size = max_header_list_size

    # -- connection ---------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the preface, our SETTINGS and the connection WINDOW_UPDATE (grpc-wire.md §6).

        Nothing is sent until the first call, so a one-shot client writes the preface, SETTINGS,
        HEADERS and DATA in a single ``send()``.
        """
        http2.start_connection(
            self.conn,
            stream_window=self._stream_window,
            connection_window=self._connection_window,
            max_frame_size=self._max_frame_size,
        )

    def data_to_send(self) -> bytes:
        """Everything h2 queued: frames for calls, ACKs, WINDOW_UPDATEs, PING replies (§7)."""
        if self._saved_output:
            saved, self._saved_output = self._saved_output, b""
            return saved + self.conn.data_to_send()
        return self.conn.data_to_send()

    @property
    def draining(self) -> bool:
        """No new stream may start here (GOAWAY seen, or the connection failed)."""
        return self.goaway_last_stream_id is not None or self.failure is not None

    @property
    def stream_limit(self) -> int:
        """The peer's MAX_CONCURRENT_STREAMS; 100 until its SETTINGS arrive (§7, pitfall 3)."""
        limit = self.conn.remote_settings.max_concurrent_streams
        if not self.settings_received:
            limit = min(limit, http2.DEFAULT_PEER_MAX_CONCURRENT_STREAMS)
        return limit

    def can_start_call(self) -> bool:
        """A new stream may open now: not draining and below the peer's stream limit."""
        if self.draining:
            return False
        return max(len(self.calls), self.conn.open_outbound_streams) < self.stream_limit

    @property
    def idle(self) -> bool:
        return not self.calls

    # -- sending ------------------------------------------------------------------------

    def start_call(self, call: ClientCall) -> List[CallEvent]:
        """Send the call's HEADERS (and as much of its body as the windows allow).

        The caller checks :meth:`can_start_call` first. A header block larger than the peer's
        MAX_HEADER_LIST_SIZE ends the call INTERNAL without sending it (grpc-go does the same;
        grpc-wire.md §6, Header size).
        """
        if call.header_factory is not None:
            left = None if call.deadline is None else call.deadline - self._clock()
            call.headers = call.header_factory(left)
        limit = self.conn.remote_settings.max_header_list_size
        if limit is not None and header_list_size(call.headers) > limit:
            return self._finish(
                call,
                Status(
                    StatusCode.INTERNAL,
                    "header list size to send violates the maximum size "
                    f"({limit} bytes) set by server",
                ),
            )
        try:
            stream_id = self.conn.get_next_available_stream_id()
        except h2.exceptions.NoAvailableStreamIDError:
            # Stream ids are exhausted (2^31): behave as after a GOAWAY, the call never started.
            self.goaway_last_stream_id = self.goaway_last_stream_id or 0
            call.retryable = True
            return self._finish(call, Status(StatusCode.UNAVAILABLE, "stream ids exhausted"))
        call.stream_id = stream_id
        call.decoder = wire.MessageDecoder(self.max_receive_message_length)
        self.conn.send_headers(stream_id, call.headers, end_stream=False)
        self.calls[stream_id] = call
        self.send_request(call)
        return []

    def send_request(self, call: ClientCall) -> bool:
        """Send request bytes while the windows allow; True once END_STREAM is queued.

        Chunks are ``min(stream/connection window, peer's MAX_FRAME_SIZE, remaining)``; the window
        may be zero or negative (the peer lowered INITIAL_WINDOW_SIZE), in which case nothing is
        sent and the transport waits for :class:`WindowOpened` while it keeps reading (§6,
        Sending). The last chunk carries END_STREAM, so a small request is one DATA frame.
        """
        if call.request_complete or call.done:
            return True
        stream_id = call.stream_id
        total = len(call.request)
        view = memoryview(call.request)
        while True:
            window = self.conn.local_flow_control_window(stream_id)
            remaining = total - call.sent
            size = min(window, self.conn.max_outbound_frame_size, remaining)
            if size <= 0 and remaining > 0:
                return False
            end = call.sent + size
            # A view, not a copy: http2's DATA serializer copies the payload exactly once.
            self.conn.send_data(stream_id, view[call.sent : end], end_stream=end == total)
            call.sent = end
            if end == total:
                call.request_complete = True
                return True

    def window_available(self, call: ClientCall) -> bool:
        """True when :meth:`send_request` could make progress now."""
        if call.request_complete or call.done:
            return True
        return (
            min(
                self.conn.local_flow_control_window(call.stream_id),
                self.conn.max_outbound_frame_size,
            )
            > 0
        )

    def cancel(self, call: ClientCall, status: Status) -> List[CallEvent]:
        """End a call locally with RST_STREAM(CANCEL): deadline, cancellation (grpc-wire.md §5).

        The given status wins even if the response had already arrived ("report a locally built
        DEADLINE_EXCEEDED, even if data or trailers have already arrived").
        """
        if call.done:
            return []
        return self._finish(call, status, reset_code=_CANCEL)

    def expire(self, call: ClientCall) -> List[CallEvent]:
        """The deadline passed: RST_STREAM(CANCEL) and DEADLINE_EXCEEDED (grpc-wire.md §5)."""
        return self.cancel(call, Status(StatusCode.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS))

    def abandon(self, call: ClientCall, status: Status) -> List[CallEvent]:
        """End a call that may not have a stream yet (no RST unless it has one)."""
        if call.done:
            return []
        if call.stream_id:
            return self._finish(call, status, reset_code=_CANCEL)
        call.status = status
        return [CallFinished(call)]

    # -- receiving ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[CallEvent]:
        """Feed bytes read from the socket; return what happened to calls and the connection.

        The bytes reach h2 in chunks that end right after any GOAWAY frame, so the
        ``ConnectionTerminated`` event is seen and handled before h2 looks at the next frame
        (grpc-wire.md §7, GOAWAY in h2). A ``ProtocolError`` from h2 means it has queued a GOAWAY:
        the connection is failed and every call ends UNAVAILABLE.
        """
        self.bytes_received += len(data)
        events: List[CallEvent] = []
        if self.failure is not None:
            return events
        try:
            chunks = self._splitter.feed(data)
        except (http2.ServerPrefaceError, http2.FrameSizeError) as exc:
            # Connection errors (RFC 9113 §3.4, §4.2), caught on the 9-byte frame header before
            # h2 would buffer the body.
            if isinstance(exc, http2.FrameSizeError):
                code, phase = h2.errors.ErrorCodes.FRAME_SIZE_ERROR, "error reading from server"
            else:
                code, phase = h2.errors.ErrorCodes.PROTOCOL_ERROR, "error reading server preface"
            try:  # tell the server why, if it can still hear it (RFC 9113 §5.4.1)
                self.conn.close_connection(error_code=code)
            except h2.exceptions.ProtocolError:
                pass
            details = f'connection error: desc = "{phase}: {exc}"'
            events.extend(self.connection_lost(details, protocol_error=True))
            return events
        for index, chunk in enumerate(chunks):
            if index:
                # A later chunk may be a GOAWAY, on which h2 drops its queued output: keep the
                # ACKs and WINDOW_UPDATEs the earlier chunks produced.
                self._saved_output += self.conn.data_to_send()
            try:
                h2_events = self.conn.receive_data(chunk)
            except h2.exceptions.ProtocolError as exc:
                phase = (
                    "error reading from server"
                    if self.settings_received
                    else "error reading server preface"
                )
                details = f'connection error: desc = "{phase}: {exc}"'
                events.extend(self.connection_lost(details, protocol_error=True))
                return events
            for event in h2_events:
                self._handle(event, events)
        return events

    def connection_lost(self, details: str, protocol_error: bool = False) -> List[CallEvent]:
        """The socket closed or failed: every running call ends UNAVAILABLE (grpc-wire.md §5).

        A prior GOAWAY's error code and debug data are appended, as grpc-go does, because they
        usually explain why the server went away.
        """
        events: List[CallEvent] = []
        # Before the server's SETTINGS (its connection preface, RFC 9113 §3.4) the connection
        # was never ready. grpc-go would not have sent anything on it yet, so its calls count as
        # never started and may be retried transparently (grpc-wire.md §5).
        # A peer that answered with something other than HTTP/2 would only do it again.
        handshake_failed = not self.settings_received and not protocol_error
        if self.failure is None:
            if self.goaway_error_code:
                details += (
                    f"; received prior goaway: code: {http2_error_name(self.goaway_error_code)}"
                    f", debug data: {self.goaway_debug_data.decode('utf-8', 'replace')!r}"
                )
            self.failure = details
        for call in list(self.calls.values()):
            call.retryable = call.retryable or handshake_failed
            events.extend(self._finish(call, Status(StatusCode.UNAVAILABLE, self.failure)))
        events.append(ConnectionFailed(self.failure))
        return events

    def _handle(self, event: h2.events.Event, events: List[CallEvent]) -> None:
        if isinstance(event, h2.events.DataReceived):
            self._on_data(event, events)
        elif isinstance(event, h2.events.ResponseReceived):
            self._on_response_headers(event, events)
        elif isinstance(event, h2.events.TrailersReceived):
            call = self.calls.get(event.stream_id)
            if call is not None and not self._oversized(call, event.headers, events):
                call.trailers = list(event.headers)
                call.trailing_metadata = wire.decode_metadata(call.trailers)
        elif isinstance(event, h2.events.StreamEnded):
            call = self.calls.get(event.stream_id)
            if call is not None:
                events.extend(self._finish(call, self._final_status(call)))
        elif isinstance(event, h2.events.StreamReset):
            self._on_reset(event, events)
        elif isinstance(event, (h2.events.WindowUpdated,)):
            events.append(WindowOpened(event.stream_id))
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings_received = True
            events.append(WindowOpened(0))
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._on_goaway(event, events)
        # PingReceived: h2 queued the ACK; the transport flushes after every read (§5, PING).
        # SettingsAcknowledged, InformationalResponseReceived (1xx is skipped, §3), PriorityUpdated,
        # UnknownFrameReceived, PingAckReceived (we never ping): nothing to do.

    def _on_data(self, event: h2.events.DataReceived, events: List[CallEvent]) -> None:
        # Ack first and always, padding included: a call we gave up on still consumed window
        # (grpc-wire.md §6, Receiving).
        if event.flow_controlled_length:
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        call = self.calls.get(event.stream_id)
        if call is None or call.decoder is None or not event.data:
            return
        try:
            call.messages.extend(call.decoder.feed(event.data))
        except wire.MessageTooLarge as exc:
            # Checked on the prefix before buffering; then RST_STREAM(CANCEL) (§6, Message size).
            events.extend(
                self._finish(
                    call,
                    Status(StatusCode.RESOURCE_EXHAUSTED, str(exc), call.initial_metadata),
                    reset_code=_CANCEL,
                )
            )
            return
        except wire.ProtocolViolation as exc:
            events.extend(
                self._finish(
                    call,
                    Status(StatusCode.INTERNAL, str(exc), call.initial_metadata),
                    reset_code=_CANCEL,
                )
            )
            return
        if len(call.messages) > 1:
            # Unary cardinality (grpc-wire.md §2): grpc-go answers INTERNAL.
            events.extend(
                self._finish(
                    call,
                    Status(
                        StatusCode.INTERNAL,
                        "cardinality violation: expected <EOF> for non server-streaming RPCs, "
                        "but received another message",
                        call.initial_metadata,
                    ),
                    reset_code=_CANCEL,
                )
            )

    def _on_response_headers(
        self, event: h2.events.ResponseReceived, events: List[CallEvent]
    ) -> None:
        call = self.calls.get(event.stream_id)
        if call is None or self._oversized(call, event.headers, events):
            return
        call.response_headers = list(event.headers)
        status_text: Optional[bytes] = None
        content_type: Optional[bytes] = None
        encoding: Optional[bytes] = None
        accept: Optional[bytes] = None
        for name, value in event.headers:
            if name == b":status":
                status_text = value
            elif name == b"content-type":
                content_type = value
            elif name == b"grpc-encoding":
                encoding = value
            elif name == b"grpc-accept-encoding":
                accept = value
        if status_text is not None and status_text.isdigit():
            call.http_status = int(status_text)
        if accept is not None:
            call.response_accept_encoding = wire.parse_accept_encoding(accept)
            self.peer_accept_encodings = call.response_accept_encoding
        if encoding is not None:
            call.response_encoding = encoding.decode("ascii", "replace").strip()
        if event.stream_ended is not None:
            # Trailers-Only: one HEADERS block with END_STREAM (§3); the StreamEnded event that
            # follows decides the status from these headers. grpcio reports its metadata as
            # trailing metadata, with empty initial metadata.
            call.trailers = call.response_headers
            call.trailing_metadata = wire.decode_metadata(call.trailers)
            return
        call.initial_metadata = wire.decode_metadata(event.headers)
        if not is_grpc_content_type(content_type) or call.http_status is None:
            # Not a gRPC response at all (a proxy's 404 page, an HTTP/1-ish server): decide now from
            # :status and stop the stream, as grpc-go does (§3, Broken peers).
            events.extend(
                self._finish(
                    call, self._http_status(call.http_status, content_type), reset_code=_CANCEL
                )
            )

    def _oversized(
        self, call: ClientCall, headers: Sequence[Header], events: List[CallEvent]
    ) -> bool:
        """Enforce the per-call header-list limit on response headers and trailers (§6).

        h2's own limit is per connection and kills the connection when exceeded, so it is kept
        high and the per-call limit is checked here: INTERNAL and RST_STREAM(CANCEL), like
        grpc-go's "peer header list size exceeded limit".
        """
        limit = self.max_header_list_size
        if limit is None:
            return False
        size = header_list_size(headers)
        if size <= limit:
            return False
        details = f"peer header list size exceeded limit ({size} > {limit} bytes)"
        events.extend(self._finish(call, Status(StatusCode.INTERNAL, details), reset_code=_CANCEL))
        return True

    def _on_reset(self, event: h2.events.StreamReset, events: List[CallEvent]) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            # RST_STREAM(NO_ERROR) after trailers is normal (grpc-wire.md §3, Early Server Closure).
            return
        code = int(event.error_code)
        if not event.remote_reset:
            # h2 reset the stream itself because the server broke a stream-level rule.
            status = Status(
                StatusCode.INTERNAL, f"stream reset locally: {rst_stream_details(code)}"
            )
        else:
            past = call.deadline is not None and self._clock() >= call.deadline
            grpc_code = status_from_rst_stream(code, past)
            details = (
                DEADLINE_EXCEEDED_DETAILS
                if grpc_code is StatusCode.DEADLINE_EXCEEDED
                else rst_stream_details(code)
            )
            status = Status(grpc_code, details, call.initial_metadata)
            if code == _REFUSED_STREAM:
                # Nothing was processed; safe to retry transparently (§4.2, §5).
                call.retryable = True
        events.extend(self._finish(call, status))

    def _on_goaway(self, event: h2.events.ConnectionTerminated, events: List[CallEvent]) -> None:
        last = event.last_stream_id if event.last_stream_id is not None else 0
        if self.goaway_last_stream_id is not None:
            last = min(last, self.goaway_last_stream_id)
        self.goaway_last_stream_id = last
        self.goaway_error_code = int(event.error_code) if event.error_code is not None else 0
        self.goaway_debug_data = event.additional_data or b""
        for stream_id, call in list(self.calls.items()):
            if stream_id > last:
                # Never processed by the server: safe to retry on a new connection (§5, GOAWAY).
                call.retryable = True
                events.extend(
                    self._finish(
                        call,
                        Status(
                            StatusCode.UNAVAILABLE,
                            f"the server sent GOAWAY (last stream {last}) "
                            "before processing this call",
                        ),
                    )
                )
        if self.calls:
            # Let the calls at or below last_stream_id finish (§7, GOAWAY in h2).
            http2.reopen_after_goaway(self.conn)
        events.append(GoAwayReceived(last, self.goaway_error_code, self.goaway_debug_data))

    # -- statuses -----------------------------------------------------------------------

    def _http_status(self, http_status: Optional[int], content_type: Optional[bytes]) -> Status:
        """Synthesize a status for a response that is not gRPC (grpc-wire.md §3 and §4.1)."""
        parts = []
        if http_status is None:
            code = StatusCode.INTERNAL
            parts.append("malformed header: missing HTTP status")
        else:
            code = status_from_http(http_status)
            parts.append(
                "unexpected HTTP status code received from server: "
                f"{http_status} ({_reason(http_status)})"
            )
        if content_type is None:
            parts.append("malformed header: missing HTTP content-type")
        elif not is_grpc_content_type(content_type):
            parts.append(
                "transport: received unexpected content-type "
                f'"{content_type.decode("ascii", "replace")}"'
            )
        return Status(code, "; ".join(parts))

    def _final_status(self, call: ClientCall) -> Status:
        """The status once the server ended the stream (grpc-wire.md §3)."""
        trailers: Sequence[Header] = call.trailers or ()
        headers: Sequence[Header] = call.response_headers or ()
        content_type = _find(headers, b"content-type")
        grpc_status = _find(trailers, b"grpc-status")
        if not is_grpc_content_type(content_type) or (
            grpc_status is None and call.http_status not in (None, 200)
        ):
            return self._http_status(call.http_status, content_type)
        code, number = parse_grpc_status(grpc_status)
        message = _find(trailers, b"grpc-message")
        details = wire.percent_decode(message) if message is not None else ""
        if grpc_status is None:
            details = details or "server closed the stream without sending a grpc-status"
        details_bin: Optional[bytes] = None
        raw_details_bin = _find(trailers, b"grpc-status-details-bin")
        if raw_details_bin is not None:
            try:
                details_bin = wire.b64decode_lenient(raw_details_bin)
            except ValueError:
                details_bin = None
        initial = call.initial_metadata
        trailing = call.trailing_metadata
        if code is StatusCode.OK:
            if call.decoder is not None and not call.decoder.at_boundary:
                return Status(
                    StatusCode.INTERNAL,
                    "server closed the stream with an incomplete message",
                    initial,
                    trailing,
                )
            if len(call.messages) != 1:
                return Status(
                    StatusCode.INTERNAL,
                    "cardinality violation: expected one response message for a unary RPC, "
                    f"got {len(call.messages)}",
                    initial,
                    trailing,
                )
        return Status(code, details, initial, trailing, number, details_bin)

    def _finish(
        self, call: ClientCall, status: Status, reset_code: Optional[int] = None
    ) -> List[CallEvent]:
        """Record the final status once; reset or close our side of the stream if still open.

        If the server ended the stream while we were still sending, we stop and send
        RST_STREAM(NO_ERROR) (grpc-wire.md §3, Early Server Closure). h2 may already have
        forgotten a closed stream, so its state is checked first (§7, pitfall 1).
        """
        if call.status is not None:
            return []
        call.status = status
        self.calls.pop(call.stream_id, None)
        stream = self.conn.streams.get(call.stream_id) if call.stream_id else None
        if stream is not None and not stream.closed and self.failure is None:
            code = reset_code
            if code is None and not call.request_complete:
                code = _NO_ERROR
            if code is not None:
                try:
                    self.conn.reset_stream(call.stream_id, code)
                except h2.exceptions.ProtocolError:
                    pass
        return [CallFinished(call)]


def _find(headers: Sequence[Header], name: bytes) -> Optional[bytes]:
    for key, value in headers:
        if key == name:
            return value
    return None


def _reason(http_status: int) -> str:
    """The HTTP reason phrase, as grpc-go's ``http.StatusText`` prints it."""
    import http  # only on this error path

    try:
        return http.HTTPStatus(http_status).phrase
    except ValueError:
        return "unknown"
