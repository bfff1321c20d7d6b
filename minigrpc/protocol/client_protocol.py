"""The client side of gRPC over HTTP/2 as a sans-IO state machine: bytes in, bytes and events out.

This module turns the events of the client's HTTP/2 connection
(:class:`minigrpc.http2.client.ClientHTTP2Connection`) into per-call events and never touches a
socket or a clock it was not given, so every rule below is unit-tested against a real
server-side ``H2Connection`` in memory.  :mod:`minigrpc.blocking.transport` adds the socket, the
lock and the waiting.

What it implements, from the client's side (PROTOCOL-HTTP2.md unless said otherwise):

* Requests: the header block (:func:`minigrpc.protocol.headers.request_headers`), then any number of
  Length-Prefixed-Messages; the last DATA frame carries END_STREAM, or an empty one does when the
  request stream ends after its last message.  The peer's MAX_HEADER_LIST_SIZE is checked before
  a header block is sent (RFC 9113 §6.5.2).
* Responses: the response headers, the messages (one for a unary method, checked both ways; any
  number for a server-streaming one), and the trailers with ``grpc-status``, ``grpc-message`` and
  ``grpc-status-details-bin``; Trailers-Only; a synthesized status for peers that are not gRPC,
  decided by ``content-type`` and ``:status`` (doc/http-grpc-status-mapping.md).
* RST_STREAM through :func:`minigrpc.protocol.codes.status_from_rst_stream`; REFUSED_STREAM marks
  the call
  as never processed, so the transport may retry it transparently.
* Flow control: :class:`minigrpc.protocol.grpc_connection.Inbound` and
  :class:`~minigrpc.protocol.grpc_connection.Outbound`.
* GOAWAY (RFC 9113 §6.8): calls above ``last_stream_id`` fail as never processed (retryable);
  calls at or below it continue on the same connection.
* Stream limit: at most 100 concurrent calls until the server's SETTINGS arrive (grpc-go's
  assumption; RFC 9113 §6.5.2 assumes no limit), then its MAX_CONCURRENT_STREAMS.  The caller
  waits for a slot; nothing fails.
"""

import enum
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..http2 import client as client_http2
from ..http2 import streams
from ..http2.client import ClientHTTP2Connection
from ..http2.hpack_codec import Header
from . import client_outcome, headers, wire
from . import grpc_connection as protocol
from .codes import Code
from .grpc_connection import CANCEL, DATA_BATCH, NO_ERROR, Inbound, Message, Outbound, SendState
from .headers import ResponseHead, header_list_size
from .status import DEADLINE_EXCEEDED_DETAILS, CallError, CallStatus, CardinalityViolation, Metadata
from .wire import DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH, decode_metadata

#: The opaque data of the client's keepalive PINGs (RFC 9113 §6.7: eight octets, any value).
KEEPALIVE_PING_DATA = b"minigrpc"

#: A call's :attr:`ClientCall.receive_limit` when it takes the connection's.
CONNECTION_LIMIT = -1


class CallPhase(enum.Enum):
    """Where a client call is."""

    #: Not on a stream yet: waiting for a connection or a stream slot.
    WAITING = "waiting"
    #: HEADERS sent; the response is on its way.
    OPEN = "open"
    #: The status is known (trailers, a reset, a GOAWAY above it, or a local decision).
    ENDED = "ended"


class ClientCall:
    """One call on one stream: what is left to send, and what has arrived.

    ``status`` is None while the call runs and set exactly once when it ends. ``retryable`` is
    True only when the server provably never processed the call (REFUSED_STREAM, or a stream above
    a GOAWAY's last-stream-id), which is what makes a transparent retry safe.  A plain class with
    slots (not a dataclass): the one-shot CNI path avoids importing ``dataclasses``.
    """

    __slots__ = (
        "deadline",
        "header_factory",
        "headers",
        "initial_metadata",
        "phase",
        "receive_limit",
        "request",
        "response",
        "response_head",
        "response_headers",
        "response_started",
        "retryable",
        "status",
        "stream_id",
        "trailers",
        "trailing_metadata",
        "unary_response",
    )

    def __init__(
        self,
        headers: Optional[List[Header]] = None,
        deadline: Optional[float] = None,
        header_factory: Optional[Callable[[Optional[float]], List[Header]]] = None,
        request: Optional[wire.Framed] = None,
        unary_response: bool = True,
        max_receive_message_length: Optional[int] = CONNECTION_LIMIT,
    ) -> None:
        self.headers: List[Header] = headers or []
        #: The largest response message this call takes (None: no limit); by default the
        #: connection's, else its method's (a service config's ``maxResponseMessageBytes``).
        self.receive_limit = max_receive_message_length
        self.deadline = deadline
        #: Rebuilds ``headers`` for the time left when the stream actually opens, so that
        #: ``grpc-timeout`` is right even after waiting for a connection or a stream slot.
        self.header_factory = header_factory
        self.stream_id = 0
        self.phase = CallPhase.WAITING
        #: The request messages not yet written; ``request`` is a unary call's one framed message.
        self.request = Outbound()
        if request is not None:
            self.request.add(request, last=True)
        #: The response messages; the receive limit and buffer are set when the stream opens.
        self.response: Optional[Inbound] = None
        #: A unary method answers exactly one message (checked both ways).
        self.unary_response = unary_response
        self.status: Optional[CallStatus] = None
        self.retryable = False
        self.response_head: Optional[ResponseHead] = None
        #: Response-Headers arrived (not a Trailers-Only response): the call is past the point
        #: where it may be retried (gRFC A6).
        self.response_started = False
        self.initial_metadata: Metadata = ()
        self.trailing_metadata: Metadata = ()
        #: The response header block and the trailers as received (bytes pairs); a
        #: Trailers-Only response sets both to its single block.
        self.response_headers: Optional[List[Header]] = None
        self.trailers: Optional[List[Header]] = None

    @property
    def done(self) -> bool:
        return self.status is not None

    def replay(self, messages: Sequence[wire.Framed], closed: bool) -> None:
        """Queue what an earlier attempt of the same call sent (a retry, gRFC A6): its request
        messages and, when ``closed``, the end of the request.  Only before the call starts."""
        request = self.request
        for framed in messages:
            request.add(framed)
        if closed and request.state is SendState.OPEN:
            request.close()

    @property
    def request_complete(self) -> bool:
        """The request's END_STREAM has been queued on the connection."""
        return self.request.state is SendState.CLOSED

    @property
    def messages(self) -> List[Message]:
        """The response messages received and not yet taken."""
        return self.response.messages if self.response is not None else []

    @property
    def messages_waiting(self) -> bool:
        """A response message has arrived and not been taken yet."""
        return self.response is not None and self.response.count > 0

    @property
    def response_encoding(self) -> Optional[str]:
        return self.response_head.encoding if self.response_head is not None else None

    def __repr__(self) -> str:
        return f"<ClientCall stream={self.stream_id} {self.phase.value}>"


# -- events handed to the transport ---------------------------------------------------------


class ResponseStarted(NamedTuple):
    """The response headers arrived: ``call.initial_metadata`` is known."""

    call: ClientCall


class MessageReceived(NamedTuple):
    """A whole response message is waiting in ``call.response``."""

    call: ClientCall


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


#: What :meth:`ClientGrpcConnection.receive_data` and friends report.
CallEvent = Union[
    ResponseStarted, MessageReceived, CallFinished, WindowOpened, GoAwayReceived, ConnectionFailed
]


class ClientGrpcConnection(protocol.GrpcConnection):
    """gRPC client state for one HTTP/2 connection, without I/O.

    Usage: :meth:`initiate`, then for each call :meth:`start_call`, :meth:`send_message` /
    :meth:`close_request` / :meth:`write_request` and :meth:`take_message`;
    :meth:`receive_data` for every chunk read from the socket, and :meth:`data_to_send` after each
    of those for the bytes to write. Not thread-safe: the transport serialises access.
    """

    def __init__(
        self,
        *,
        max_receive_message_length: Optional[int] = DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        stream_window: int = streams.DEFAULT_STREAM_WINDOW,
        connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: Optional[int] = streams.CALL_MAX_HEADER_LIST_SIZE,
        buffer_limit: int = protocol.DEFAULT_BUFFER_LIMIT,
        clock: Callable[[], float] = time.monotonic,
        peer: str = "",
    ) -> None:
        conn = ClientHTTP2Connection(
            stream_window=stream_window,
            connection_window=connection_window,
            max_frame_size=max_frame_size,
        )
        # The connection checks each frame header itself (the server's preface, frame sizes,
        # header-block growth): no splitter in front of it.
        super().__init__(conn, connection_window)
        self.conn: ClientHTTP2Connection = conn
        self.max_receive_message_length = max_receive_message_length
        self._stream_window = stream_window
        self._connection_window = connection_window
        self._max_frame_size = max_frame_size
        self._buffer_limit = buffer_limit
        self._clock = clock
        #: The target as the user gave it (``Target.display``), named in connection errors.
        self.peer = peer
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
        #: Largest response header block (or trailers) accepted per call (RFC 9113 §6.5.2).
        self.max_header_list_size = max_header_list_size
        #: The last well-formed response header block and trailers, with what they read as
        #: (see :meth:`_read_block`).
        self._known_blocks: Dict[bool, Tuple[Sequence[Header], Optional[int], Any]] = {}

    # -- connection ---------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the preface, our SETTINGS and the connection WINDOW_UPDATE (RFC 9113 §3.4).

        Nothing is sent until the first call, so a one-shot client writes the preface, SETTINGS,
        HEADERS and DATA in a single ``send()``.
        """
        self.conn.initiate()

    @property
    def draining(self) -> bool:
        """No new stream may start here (GOAWAY seen, or the connection failed)."""
        return self.goaway_last_stream_id is not None or self.failure is not None

    @property
    def stream_limit(self) -> int:
        """The peer's MAX_CONCURRENT_STREAMS; 100 until its SETTINGS arrive."""
        limit = self.conn.peer_max_concurrent_streams
        if not self.settings_received:
            limit = min(limit, streams.DEFAULT_PEER_MAX_CONCURRENT_STREAMS)
        return limit

    def can_start_call(self) -> bool:
        """A new stream may open now: not draining and below the peer's stream limit."""
        if self.draining:
            return False
        return max(len(self.calls), self.conn.open_outbound_streams) < self.stream_limit

    @property
    def idle(self) -> bool:
        return not self.calls

    def next_deadline(self) -> Optional[float]:
        """The earliest deadline among the running calls, for whoever reads the socket."""
        deadlines = [call.deadline for call in self.calls.values() if call.deadline is not None]
        return min(deadlines) if deadlines else None

    def expire_overdue(self) -> List[CallEvent]:
        """End every running call whose deadline has passed (RST_STREAM(CANCEL))."""
        now = self._clock()
        events: List[CallEvent] = []
        for call in list(self.calls.values()):
            if call.deadline is not None and now >= call.deadline:
                events.extend(self.expire(call))
        return events

    # -- sending ------------------------------------------------------------------------

    def start_call(self, call: ClientCall) -> List[CallEvent]:
        """Send the call's HEADERS and as much of its queued request as the windows allow.

        The caller checks :meth:`can_start_call` first. A header block larger than the peer's
        MAX_HEADER_LIST_SIZE ends the call INTERNAL without sending it, as grpc-go does.
        """
        if call.header_factory is not None:
            left = None if call.deadline is None else call.deadline - self._clock()
            call.headers = call.header_factory(left)
        limit = self.conn.peer_max_header_list_size
        if limit is not None and header_list_size(call.headers) > limit:
            return self._finish(
                call,
                CallStatus(
                    Code.INTERNAL,
                    "header list size to send violates the maximum size "
                    f"({limit} bytes) set by server",
                ),
            )
        try:
            stream_id = self.conn.get_next_available_stream_id()
        except client_http2.StreamIDsExhausted:
            # Stream ids are exhausted (2^31): behave as after a GOAWAY, the call never started.
            self.goaway_last_stream_id = self.goaway_last_stream_id or 0
            call.retryable = True
            return self._finish(call, CallStatus(Code.UNAVAILABLE, "stream ids exhausted"))
        call.stream_id = stream_id
        call.phase = CallPhase.OPEN
        limit = call.receive_limit
        if limit == CONNECTION_LIMIT:
            limit = self.max_receive_message_length
        call.response = Inbound(limit, self._buffer_limit)
        self.conn.send_headers(stream_id, call.headers)
        self.calls[stream_id] = call
        self.write_request(call)
        return []

    def send_message(self, call: ClientCall, framed: wire.Framed, last: bool = False) -> None:
        """Queue one framed request message (``last``: it ends the request) and write."""
        if call.done or call.request.state is not SendState.OPEN:
            return
        call.request.add(framed, last)
        if call.phase is CallPhase.OPEN:
            self.write_request(call)

    def close_request(self, call: ClientCall) -> None:
        """The request has no more messages: END_STREAM once the queue is written."""
        if call.done or call.request.state is not SendState.OPEN:
            return
        call.request.close()
        if call.phase is CallPhase.OPEN:
            self.write_request(call)

    def write_request(self, call: ClientCall) -> bool:
        """Write queued request bytes while the windows allow; True once nothing waits.

        At most :data:`minigrpc.protocol.grpc_connection.DATA_BATCH` bytes are framed at a time;
        the socket layer writes them and calls again at once while the window lasts.

        The last chunk carries END_STREAM when the request is closing, so a small unary request
        is one DATA frame; a request that ends after its last message was written sends an empty
        DATA frame with END_STREAM (PROTOCOL-HTTP2.md, Requests).
        """
        if call.done or call.phase is not CallPhase.OPEN:
            return True
        request = call.request
        request.write(self.conn, call.stream_id, DATA_BATCH, end_stream_on_last=True)
        if not request.empty:
            return False
        if request.state is SendState.CLOSING:
            self.conn.end_stream(call.stream_id)
            request.state = SendState.CLOSED
        return True

    def window_available(self, call: ClientCall) -> bool:
        """True when :meth:`write_request` could make progress now (or nothing waits)."""
        if call.done or call.phase is not CallPhase.OPEN:
            return True
        return call.request.can_write(self.conn, call.stream_id)

    def take_message(self, call: ClientCall) -> Optional[Message]:
        """The oldest response message not yet taken, or None; may return window to the peer."""
        if call.response is None:
            return None
        return call.response.take(self, call.stream_id)

    def cancel(self, call: ClientCall, status: CallStatus) -> List[CallEvent]:
        """End a call locally with RST_STREAM(CANCEL): deadline or cancellation.

        The given status wins even if the response had already arrived: an expired deadline is
        reported as a locally built DEADLINE_EXCEEDED (PROTOCOL-HTTP2.md, Errors).
        """
        if call.done:
            return []
        return self._finish(call, status, reset_code=CANCEL)

    def expire(self, call: ClientCall) -> List[CallEvent]:
        """The deadline passed: RST_STREAM(CANCEL) and DEADLINE_EXCEEDED."""
        return self.cancel(
            call, CallStatus(Code.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)
        )

    def abandon(self, call: ClientCall, status: CallStatus) -> List[CallEvent]:
        """End a call that may not have a stream yet (no RST unless it has one)."""
        if call.done:
            return []
        if call.stream_id:
            return self._finish(call, status, reset_code=CANCEL)
        call.status = status
        call.phase = CallPhase.ENDED
        return [CallFinished(call)]

    def close(self, status: CallStatus) -> List[CallEvent]:
        """The client closes the connection: every call still running ends with ``status``
        (RST_STREAM(CANCEL)), a GOAWAY(NO_ERROR) is queued unless the connection failed already
        (RFC 9113 §6.8), and no call starts here any more."""
        events: List[CallEvent] = []
        for call in list(self.calls.values()):
            events.extend(self.cancel(call, status))
        if self.failure is None:
            self.conn.close_connection()
            self.failure = "connection closed by the client"
        return events

    def send_ping(self) -> None:
        """Queue a keepalive PING (RFC 9113 §6.7; gRFC A8).  Its ACK needs no handling: any
        frame that arrives is life to the keepalive (:mod:`minigrpc.driver.keepalive`)."""
        if self.failure is None:
            self.conn.ping(KEEPALIVE_PING_DATA)

    def abort(self, details: str, error_code: int, debug_data: bytes) -> List[CallEvent]:
        """The client gives the connection up (its keepalive found it dead): a
        GOAWAY(``error_code``, ``debug_data``) is queued, every running call ends UNAVAILABLE
        with ``details`` and no call starts here any more (RFC 9113 §6.8, §5.4.1)."""
        if self.failure is not None:
            return []
        self.conn.close_connection(error_code, debug_data)
        return self.connection_lost(details)

    # -- receiving ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[CallEvent]:
        """Feed bytes read from the socket; return what happened to calls and the connection.

        A connection error (:class:`minigrpc.http2.client.PeerConnectionError`, the last event
        of a read) means a GOAWAY is queued: the connection is failed and every call ends
        UNAVAILABLE, after what the frames before the error meant for the calls.
        """
        self.bytes_received += len(data)
        events: List[CallEvent] = []
        if self.failure is not None:
            return events
        handlers = _HANDLERS
        for event in self.conn.receive_data(data):
            handlers[type(event)](self, event, events)
        if self.failure is None:
            self.acknowledge_received()
        return events

    def socket_lost(self, error: Optional[str]) -> List[CallEvent]:
        """The socket ended: EOF, or ``error`` (the OS's words for it).  Every running call
        ends UNAVAILABLE in grpc-go's words (:func:`client_outcome.lost_details`), which both
        client transports report alike."""
        return self.connection_lost(
            client_outcome.lost_details(
                error, self.bytes_received, self.settings_received, self.peer
            )
        )

    def connection_lost(self, details: str, protocol_error: bool = False) -> List[CallEvent]:
        """The socket closed or failed: every running call ends UNAVAILABLE.

        A prior GOAWAY's error code and debug data are appended, as grpc-go does, because they
        usually explain why the server went away.
        """
        events: List[CallEvent] = []
        # Before the server's SETTINGS (its connection preface, RFC 9113 §3.4) the connection
        # was never ready. grpc-go would not have sent anything on it yet, so its calls count as
        # never started and may be retried transparently. A peer that answered with something
        # other than HTTP/2 would only do it again.
        handshake_failed = not self.settings_received and not protocol_error
        if self.failure is None:
            details += client_outcome.goaway_note(self.goaway_error_code, self.goaway_debug_data)
            self.failure = details
        for call in list(self.calls.values()):
            call.retryable = call.retryable or handshake_failed
            events.extend(self._finish(call, CallStatus(Code.UNAVAILABLE, self.failure)))
        events.append(ConnectionFailed(self.failure))
        return events

    # What each event of the HTTP/2 connection does (:data:`_HANDLERS`).  PINGs are answered
    # and SETTINGS acknowledged by the connection; the transport flushes after every read.

    def _on_connection_error(
        self, event: client_http2.PeerConnectionError, events: List[CallEvent]
    ) -> None:
        details = client_outcome.connection_error_details(
            event.reason, not self.settings_received, self.peer
        )
        events.extend(self.connection_lost(details, protocol_error=True))

    def _on_stream_ended(
        self, event: client_http2.StreamEnded, events: List[CallEvent]
    ) -> None:
        call = self.calls.get(event.stream_id)
        if call is not None:
            events.extend(self._finish(call, self._final_status(call)))

    def _on_window_updated(
        self, event: client_http2.WindowUpdated, events: List[CallEvent]
    ) -> None:
        events.append(WindowOpened(event.stream_id))

    def _on_settings(
        self, event: client_http2.SettingsChanged, events: List[CallEvent]
    ) -> None:
        # INITIAL_WINDOW_SIZE moves every stream window without a WindowUpdated; the threads
        # waiting to send check their windows again.
        self.settings_received = True
        events.append(WindowOpened(0))

    def _on_trailers(
        self, event: client_http2.TrailersReceived, events: List[CallEvent]
    ) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            return
        metadata = self._read_block(call, event.headers, False, events)
        if metadata is None:
            return
        call.trailers = list(event.headers)
        call.trailing_metadata = metadata

    def _read_block(
        self, call: ClientCall, block: Sequence[Header], response: bool, events: List[CallEvent]
    ) -> Any:
        """Check a received block (``response`` headers, else trailers) and read it: the
        :class:`~minigrpc.protocol.headers.ResponseHead` and metadata of response headers, the
        metadata of trailers; None (the call ended) if it is over the limit or malformed.

        A server answers the same blocks call after call, and their checks and reading depend
        on the block and :attr:`max_header_list_size` alone: a block equal to the last
        well-formed one of its kind is not checked and read again.
        """
        known = self._known_blocks.get(response)
        if known is not None and known[0] == block and known[1] == self.max_header_list_size:
            return known[2]
        malformed = headers.malformed_response if response else headers.malformed_trailers
        if self._failed(call, block, malformed, events):
            return None
        metadata = decode_metadata(block)
        reading = (headers.read_response_headers(block), metadata) if response else metadata
        self._known_blocks[response] = (block, self.max_header_list_size, reading)
        return reading

    def _failed(
        self,
        call: ClientCall,
        block: Sequence[Header],
        malformed: Callable[[Sequence[Header]], str],
        events: List[CallEvent],
    ) -> bool:
        """End ``call`` if a received block is over the per-call limit or malformed
        (:func:`minigrpc.protocol.client_outcome.block_failure`); True if so.

        A malformed block is a stream error (RFC 9113 §8.1.1): the connection's other calls go
        on; the connection only decodes them (:mod:`minigrpc.http2.client`).
        """
        failure = client_outcome.block_failure(block, self.max_header_list_size, malformed)
        if failure is None:
            return False
        events.extend(self._finish(call, failure[0], reset_code=failure[1]))
        return True

    def _on_data(self, event: client_http2.DataReceived, events: List[CallEvent]) -> None:
        call = self.calls.get(event.stream_id)
        if call is None or call.response is None:
            # Ack anyway: a call we gave up on still consumed window (RFC 9113 §6.9).
            if event.flow_controlled_length:
                self.acknowledge_later(event.stream_id, event.flow_controlled_length)
            return
        try:
            complete = call.response.data_received(
                self, event.stream_id, event.data, event.flow_controlled_length
            )
            if call.unary_response and call.response.received > 1:
                raise CardinalityViolation(client_outcome.EXTRA_MESSAGE_DETAILS)
        except CallError as exc:
            # The receive limit is checked on the prefix, before the body is buffered; then
            # RST_STREAM(CANCEL).
            events.extend(
                self._finish(
                    call,
                    CallStatus(exc.code_number, str(exc), call.initial_metadata),
                    reset_code=CANCEL,
                )
            )
            return
        if complete:
            events.append(MessageReceived(call))

    def _on_response_headers(
        self, event: client_http2.ResponseReceived, events: List[CallEvent]
    ) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            return
        reading = self._read_block(call, event.headers, True, events)
        if reading is None:
            return
        head, metadata = reading
        call.response_headers = list(event.headers)
        call.response_head = head
        if head.accept_encodings is not None:
            self.peer_accept_encodings = head.accept_encodings
        if event.stream_ended:
            # Trailers-Only: one HEADERS block with END_STREAM; the StreamEnded event that
            # follows decides the status from these headers. grpcio reports its metadata as
            # trailing metadata, with empty initial metadata.
            call.trailers = call.response_headers
            call.trailing_metadata = metadata
            return
        call.initial_metadata = metadata
        call.response_started = True
        failure = client_outcome.not_grpc_status(head)
        if failure is not None:
            events.extend(self._finish(call, failure[0], reset_code=failure[1]))
            return
        events.append(ResponseStarted(call))

    def _on_reset(self, event: client_http2.StreamReset, events: List[CallEvent]) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            # RST_STREAM(NO_ERROR) after trailers is normal (PROTOCOL-HTTP2.md, Responses).
            return
        # ``remote_reset`` False: the connection reset the stream itself because the server
        # broke a stream-level rule.
        past = call.deadline is not None and self._clock() >= call.deadline
        status, retryable = client_outcome.reset_status(
            event.error_code, event.remote_reset, past, call.initial_metadata
        )
        call.retryable = call.retryable or retryable
        events.extend(self._finish(call, status))

    def _on_ping_ack(self, event: client_http2.PingAcknowledged, events: List[CallEvent]) -> None:
        """An ACK of a keepalive PING (:meth:`send_ping`): the transport counts every read as
        life, so there is nothing more to do."""

    def _on_goaway(
        self, event: client_http2.ConnectionTerminated, events: List[CallEvent]
    ) -> None:
        last = event.last_stream_id
        if self.goaway_last_stream_id is not None:
            last = min(last, self.goaway_last_stream_id)
        self.goaway_last_stream_id = last
        self.goaway_error_code = event.error_code
        self.goaway_debug_data = event.additional_data
        for stream_id, call in list(self.calls.items()):
            if stream_id > last:
                # Never processed by the server: safe to retry on a new connection.
                call.retryable = True
                events.extend(self._finish(call, client_outcome.refused_by_goaway(last)))
        events.append(GoAwayReceived(last, self.goaway_error_code, self.goaway_debug_data))

    # -- statuses -----------------------------------------------------------------------

    def _final_status(self, call: ClientCall) -> CallStatus:
        """The status once the server ended the stream (PROTOCOL-HTTP2.md, Responses)."""
        response = call.response
        return client_outcome.final_status(
            call.response_head,
            call.trailers or (),
            call.initial_metadata,
            call.trailing_metadata,
            response is None or response.at_boundary,
            response.received if response is not None else 0,
            call.unary_response,
        )

    def _finish(
        self, call: ClientCall, status: CallStatus, reset_code: Optional[int] = None
    ) -> List[CallEvent]:
        """Record the final status once; reset or close our side of the stream if still open.

        If the server ended the stream while we were still sending, we stop and send
        RST_STREAM(NO_ERROR) (PROTOCOL-HTTP2.md, Responses). A closed stream has left
        ``conn.streams`` already: nothing is sent on it (RFC 9113 §5.1).
        """
        if call.status is not None:
            return []
        call.status = status
        call.phase = CallPhase.ENDED
        self.calls.pop(call.stream_id, None)
        stream = self.conn.streams.get(call.stream_id) if call.stream_id else None
        if stream is not None and not stream.closed and self.failure is None:
            code = reset_code
            if code is None and not call.request_complete:
                code = NO_ERROR
            if code is not None:
                self._reset(call.stream_id, code)
        if not call.request_complete:
            call.request.discard()
        return [CallFinished(call)]


#: What each event of :class:`~minigrpc.http2.client.ClientHTTP2Connection` does, by its class.
_HANDLERS: Dict[type, Callable[[ClientGrpcConnection, Any, List[CallEvent]], None]] = {
    client_http2.DataReceived: ClientGrpcConnection._on_data,
    client_http2.ResponseReceived: ClientGrpcConnection._on_response_headers,
    client_http2.TrailersReceived: ClientGrpcConnection._on_trailers,
    client_http2.StreamEnded: ClientGrpcConnection._on_stream_ended,
    client_http2.StreamReset: ClientGrpcConnection._on_reset,
    client_http2.WindowUpdated: ClientGrpcConnection._on_window_updated,
    client_http2.SettingsChanged: ClientGrpcConnection._on_settings,
    client_http2.PingAcknowledged: ClientGrpcConnection._on_ping_ack,
    client_http2.ConnectionTerminated: ClientGrpcConnection._on_goaway,
    client_http2.PeerConnectionError: ClientGrpcConnection._on_connection_error,
}
