"""The server side of gRPC over HTTP/2 as a sans-IO state machine: bytes in, call events out.

:class:`ServerGrpcConnection` owns one HTTP/2 connection
(:class:`minigrpc.http2.server.ServerHTTP2Connection`) and turns what a client sends into a few
gRPC-level events (:mod:`minigrpc.protocol.server_events`: :class:`CallStarted`,
:class:`RequestReady`, :class:`RequestMessage`, :class:`RequestEnded`, :class:`CallTerminated`);
the server's driver (:mod:`minigrpc.driver.server_driver`, for both servers) feeds it bytes,
has the handlers run and hands back responses with
:meth:`ServerGrpcConnection.send_initial_metadata`,
:meth:`~ServerGrpcConnection.send_message`, :meth:`~ServerGrpcConnection.finish_call` and
friends.
The checks of each request's frames are :class:`minigrpc.protocol.server_requests.RequestIntake`,
which it builds on, and its limits a :class:`minigrpc.protocol.server_settings.ServerSettings`.
Nothing here touches a socket, a thread or a clock it was not given, so every rule below is
tested byte for byte in ``tests/unit/test_server_protocol.py``.

What this layer decides.  The rules and their reasons are in docs/wire-rules.md (its sections
are named below); the HTTP/2 rules underneath (stream states, flow control, frame and header
block sizes) are the connection's, pinned in ``tests/unit/test_server_http2_rules.py``:

* Request validation, in the order grpc-go applies it ("Server-side rejections"): a ``:method``
  other than POST is 405 + INTERNAL; a content-type that is not ``application/grpc*`` is 415 +
  INVALID_ARGUMENT; a malformed ``grpc-timeout`` or a ``-bin`` value that is not base64 is 400 +
  INTERNAL; a request header list above the per-call limit is 431 + RESOURCE_EXHAUSTED.  A
  missing ``te`` is accepted.  Every rejection is one HEADERS frame with END_STREAM that carries
  ``content-type: application/grpc`` and a ``grpc-status``, followed by RST_STREAM(NO_ERROR)
  while the request is still open (PROTOCOL-HTTP2.md, Early Server Closure).  A request that is
  not gRPC at all (405, 415) and still open is answered at its END_STREAM instead, so that a
  framing fault later in it is answered as that fault (RFC 9113 §8.1.1).
* Stream limits: we advertise MAX_CONCURRENT_STREAMS and refuse excess streams with
  RST_STREAM(REFUSED_STREAM), which clients retry, rather than the connection error RFC 9113
  §5.1.2 allows, which would fail every call on the connection.  The header-list limit we
  advertise is enforced per call too (431 + RESOURCE_EXHAUSTED, above).
* Frame sizes: every frame header is checked as soon as its 9 bytes arrive
  (:class:`minigrpc.http2.connection.HTTP2Connection`): a frame longer than the MAX_FRAME_SIZE we
  advertise is GOAWAY(FRAME_SIZE_ERROR) (RFC 9113 §4.2), and a header block that keeps growing
  through CONTINUATION frames is GOAWAY(ENHANCE_YOUR_CALM) (CVE-2024-27316), in both cases
  before the body is buffered.
* Messages ("Messages and compression"): the receive limit is checked on the length prefix
  before the body is buffered (RESOURCE_EXHAUSTED); the compressed flag needs a supported
  ``grpc-encoding`` (INTERNAL otherwise); an unsupported encoding is UNIMPLEMENTED plus
  ``grpc-accept-encoding``; a unary request must carry exactly one message (INTERNAL, as
  grpc-go).
* Flow control ("Flow control and sizes"): every DATA frame is acknowledged by its
  ``flow_controlled_length`` as soon as it is buffered, so large messages never deadlock;
  responses are written in chunks of ``min(window, max frame, remaining)`` and resumed on
  WINDOW_UPDATE and SETTINGS changes (:mod:`minigrpc.protocol.server_responses` writes them). The
  socket layer bounds how many DATA bytes may sit unsent
  (:meth:`ServerGrpcConnection.set_output_room`) so a client that opens its window but never reads
  cannot make us buffer without bound.
* Memory (RFC 9113 §10.5): what each connection buffers is charged to its account in the
  server's :class:`minigrpc.protocol.memory_budget.MemoryBudget`, at its real cost; over budget,
  window is withheld (:mod:`minigrpc.protocol.grpc_connection`), new streams are refused with
  RST_STREAM(REFUSED_STREAM) and a unary response that would add to the pile ends as
  RESOURCE_EXHAUSTED.
* Floods (RFC 9113 §10.5): frames that do no work (PING, SETTINGS, PRIORITY, RST_STREAM, a
  WINDOW_UPDATE on stream 0, an empty DATA frame) spend a per-connection allowance
  (:class:`minigrpc.http2.flood.FrameBudget`); a client that exhausts it (a PING or SETTINGS
  flood, the rapid reset of CVE-2023-44487) gets GOAWAY(ENHANCE_YOUR_CALM) and is closed.
* Graceful shutdown ("GOAWAY and PING"): GOAWAY(2^31-1) and a PING, then, on the PING's ACK,
  GOAWAY(highest stream seen); streams opened after that are refused, and the streams that
  drain are served to their end (RFC 9113 §6.8).
"""

from typing import (
    Any,
    Callable,
    Dict,
    Hashable,
    List,
    Optional,
    Tuple,
)

from ..http2 import events as events_
from ..http2 import frames
from ..http2.flood import PASS_LIMIT, PASS_MESSAGES, FrameBudget, PeerHistory, flood_name
from ..http2.server import ServerHTTP2Connection
from . import headers as hdrs
from . import wire
from .enums import StatusCode
from .grpc_connection import CANCEL, INTERNAL_ERROR, NO_ERROR, SendState
from .memory_budget import OVER_BUDGET_DETAILS, ConnectionMemory, MemoryBudget, unsent_cost
from .server_events import (
    CallEvent,
    CallStarted,
    CallTerminated,
    RequestEnded,
    RequestMessage,
    RequestReady,
)
from .server_requests import DrainPhase, RequestIntake
from .server_responses import ResponseWriter, ServerStream
from .server_settings import ServerSettings
from .status import DEADLINE_EXCEEDED_DETAILS, MessageTooLarge

__all__ = [
    "PASS_MESSAGES",
    "CallEvent",
    "CallStarted",
    "CallTerminated",
    "PeerHistory",
    "RequestEnded",
    "RequestMessage",
    "RequestReady",
    "ServerGrpcConnection",
    "ServerSettings",
]

Headers = List[Tuple[bytes, bytes]]

#: The payload of the PING that follows the first GOAWAY; its ACK proves the client has seen the
#: GOAWAY, so every stream it opened before is already known to us (docs/wire-rules.md,
#: "GOAWAY and PING"). The bytes are grpc-go's, so traces of both servers look alike.
DRAIN_PING_PAYLOAD = b"\x01\x06\x01\x08\x00\x03\x03\x09"
#: The payload of a keepalive PING: any 8 bytes other than the drain PING's.
KEEPALIVE_PING_PAYLOAD = b"\x00" * 8
#: "The last stream the sender might process" before the real one is known (RFC 9113 §6.8).
_MAX_STREAM_ID = 2**31 - 1
#: A lead allowance with no bound (the receive limit lifted).
_UNBOUNDED = 2**63
#: GOAWAY code for a client that floods us (RFC 9113 §10.5).
ENHANCE_YOUR_CALM = frames.ENHANCE_YOUR_CALM
#: What a call still running at ``stop(0)`` (or when the grace ends) is told: grpc-core's words.
SHUTDOWN_DETAILS = "Cancelling all calls"


# ------------------------------------------------------------------------------------------------
# The connection
# ------------------------------------------------------------------------------------------------


class ServerGrpcConnection(RequestIntake):
    """One client connection: HTTP/2 plus the gRPC server rules (see the module docstring).

    Use: :meth:`initiate` once, then :meth:`receive_data` for every chunk read (it returns the
    call events), and after every batch of calls :meth:`data_to_send` for the bytes to write.

    ``shape_from_handler``: when True, each call waits for :meth:`accept_call` to learn whether
    its method streams requests before the one-message rules apply (the socket layer finds the
    handler only after :class:`CallStarted`); when False every call is unary, which is what the
    protocol tests drive.

    ``memory``: the server's memory budget, shared by its connections (a budget of its own,
    with the defaults, when None).
    """

    memory: ConnectionMemory

    def __init__(
        self,
        settings: Optional[ServerSettings] = None,
        clock: Optional[Callable[[], float]] = None,
        shape_from_handler: bool = False,
        memory: Optional[MemoryBudget] = None,
    ) -> None:
        import time

        self.settings = settings or ServerSettings()
        self._clock = clock or time.monotonic
        self._initial_shape: Optional[bool] = None if shape_from_handler else False
        settings = self.settings
        conn = ServerHTTP2Connection(
            stream_window=settings.initial_window_size,
            connection_window=settings.connection_window,
            max_frame_size=settings.max_frame_size,
            max_concurrent_streams=settings.max_concurrent_streams,
            max_header_list_size=settings.max_header_list_size,
        )
        conn.pass_limit = PASS_LIMIT
        super().__init__(conn, settings.connection_window)
        self.conn: ServerHTTP2Connection = conn
        #: This connection's account in the server's memory budget (its own when none is given).
        self.memory = (memory or MemoryBudget()).open_connection()
        # The lead message may go beyond the budget by the largest request message; with the
        # receive limit lifted (None) by whatever its prefix says, as the application asked.
        receive_limit = self.settings.max_receive_message_length
        self.lead_allowance = _UNBOUNDED if receive_limit is None else receive_limit
        self._calls: Dict[int, ServerStream] = {}
        #: Requests that are not gRPC, still open: answered at their END_STREAM (_on_request).
        self._unanswered: Dict[int, hdrs.Rejection] = {}
        self._highest_stream_id = 0
        #: The last well-formed request header block and what it reads as (see _on_request).
        self._last_request = hdrs.LastRequestHead()
        self._drain_phase = DrainPhase.SERVING
        #: What the GOAWAYs of a graceful shutdown say in their debug data (start_drain).
        self._drain_debug_data = b""
        #: The client ACKed the drain's PING (:meth:`cut_after_drain` says how it ends).
        self._drain_ping_answered = False
        self._frame_budget = FrameBudget(self._clock)
        self._peer: Optional[Tuple[PeerHistory, Hashable]] = None
        self._responses = ResponseWriter(
            conn,
            self._calls,
            self.settings.enabled_encodings,
            self._frame_budget,
            self._stream_closed,
            self._after_end_stream,
        )
        #: True once the connection is unusable: the socket layer flushes and closes it.
        self.closed = False
        #: Why the connection closed, for logs.
        self.close_reason = ""
        #: The client's preface and first SETTINGS have arrived (RFC 9113 §3.4).
        self.handshake_complete = False

    # -- lifecycle -------------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue our SETTINGS and connection WINDOW_UPDATE (docs/wire-rules.md, "Flow control and
        sizes")."""
        self.conn.initiate()

    @property
    def active_calls(self) -> int:
        """Streams that have not finished yet (started calls and calls still sending)."""
        return len(self._calls)

    @property
    def draining(self) -> bool:
        return self._drain_phase is not DrainPhase.SERVING

    @property
    def drained(self) -> bool:
        """The final GOAWAY went out and no call is left: the socket can be closed."""
        return self._drain_phase is DrainPhase.CLOSED_TO_NEW and not self._calls

    @property
    def highest_stream_id(self) -> int:
        return self._highest_stream_id

    def data_to_send(self) -> bytes:
        """Everything queued for the socket, in order."""
        self._responses.write_unsent()
        return super().data_to_send()

    def set_output_room(self, room: Optional[int]) -> None:
        """How many more DATA bytes the socket layer will accept now (None: no limit).

        A client can open its window without reading the socket; bounding what we queue by
        what the socket actually drains keeps memory bounded for such clients.
        Raising the room resumes the streams that were waiting for it.
        """
        self._responses.set_output_room(room)

    @property
    def starved(self) -> bool:
        """True when a response waits only for output room (see :meth:`set_output_room`)."""
        return self._responses.starved

    @property
    def stop_reading(self) -> bool:
        """Read no more from the client for now: what it sent alone is over the connection's
        limit (:attr:`minigrpc.protocol.memory_budget.ConnectionMemory.stop_reading`), and no
        partial message may still complete.  The lead message
        (:meth:`~minigrpc.protocol.grpc_connection. GrpcConnection.may_lead`) is granted window up
        to :attr:`lead_allowance` beyond the limit, so its bytes must be read: a socket left unread
        with that window granted would
        stall the message for good (the client keeps to the window it was given)."""
        memory = self.memory
        if not memory.stop_reading:
            return False
        return self.lead_stream is None or memory.inbound >= memory.limit + self.lead_allowance

    @property
    def pending_input(self) -> bool:
        """Part of what was received waits, past what one pass may take
        (:data:`minigrpc.http2.flood.PASS_LIMIT`): call :meth:`receive_data` again, with
        ``b""``, on the next pass of the loop (and read no more from the socket meanwhile)."""
        return self.conn.held and not self.closed

    def set_peer(self, history: PeerHistory, peer: Hashable) -> None:
        """Who the client is (see :class:`minigrpc.http2.flood.PeerHistory`), before its first
        bytes: a peer recently sent away for a flood opens with a smaller allowance, and a
        flood on this connection goes on the peer's record."""
        self._peer = (history, peer)
        self._frame_budget = FrameBudget(self._clock, start=history.start_for(peer))
        self._responses.frame_budget = self._frame_budget

    # -- input -----------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[CallEvent]:
        """Feed bytes read from the socket; return the call events they complete."""
        if self.closed:
            return []
        conn = self.conn
        conn.allowance = self._frame_budget.available()
        out: List[CallEvent] = []
        handlers = _HANDLERS
        for event in conn.receive_data(data):
            handlers[type(event)](self, event, out)
            if self.closed:  # a GOAWAY or a connection error: nothing after it counts
                return out
        self.acknowledge_received()
        flood = self._frame_budget.charge(conn)
        if flood:
            self._flood(out, flood)
            return out
        self._resume_if_under()
        return out

    def _resume_if_under(self) -> None:
        """Window held back for memory comes back as soon as the account is under budget."""
        if self._held_credit and not self.memory.over_budget:
            self.resume_credit()

    # What each event of the HTTP/2 connection does (:data:`_HANDLERS`; DATA, request headers,
    # END_STREAM and RST_STREAM are RequestIntake's).

    def _on_trailers(self, event: events_.TrailersReceived, out: List[CallEvent]) -> None:
        # gRPC requests have none, but a malformed block still ends the stream.
        if hdrs.malformed_trailers(event.headers):
            self._reset_malformed(event.stream_id, out)

    def _on_window_updated(self, event: events_.WindowUpdated, out: List[CallEvent]) -> None:
        if event.stream_id:
            self._responses.pump(event.stream_id)
        else:
            self._responses.pump_blocked()

    def _on_settings(self, event: events_.SettingsChanged, out: List[CallEvent]) -> None:
        # INITIAL_WINDOW_SIZE moves every stream window without a WindowUpdated.
        self.handshake_complete = True
        if self._responses.any_blocked:
            self._responses.pump_blocked()

    def _on_ping_ack(self, event: events_.PingAcknowledged, out: List[CallEvent]) -> None:
        if self._drain_phase is not DrainPhase.SERVING and event.data == DRAIN_PING_PAYLOAD:
            self._drain_ping_answered = True
            if self._drain_phase is DrainPhase.ANNOUNCED:
                self.send_final_goaway()

    def _on_goaway(self, event: events_.ConnectionTerminated, out: List[CallEvent]) -> None:
        # A client GOAWAY: the client is closing the connection and opens nothing new; the
        # calls it still has end as on a lost connection (PROTOCOL-HTTP2.md, Connection
        # failure).
        out.extend(self._connection_failed("the client sent GOAWAY"))

    def _on_connection_error(
        self, event: events_.PeerConnectionError, out: List[CallEvent]
    ) -> None:
        # The connection queued its GOAWAY: PROTOCOL_ERROR for a bad preface, FRAME_SIZE_ERROR
        # (RFC 9113 §4.2; a connection error even on a DATA frame, §5.4, since its body must
        # not be read), ENHANCE_YOUR_CALM for a CONTINUATION flood or a flood of frames that do
        # no work (RFC 9113 §10.5), and so on.
        if event.flood:
            self._flood(out, flood_name(event.frame_type))
        else:
            out.extend(self._connection_failed(event.reason))

    def _flood(self, out: List[CallEvent], what: str) -> bool:
        """The client exhausted its allowance of frames that do no work: GOAWAY(ENHANCE_YOUR_CALM)
        and close (RFC 9113 §10.5; :mod:`minigrpc.http2.flood`). True: the connection is over."""
        out.extend(self.send_away(f"flood of {what}"))
        return True

    def send_away(self, reason: str, debug_data: bytes = b"") -> List[CallEvent]:
        """The client abused the connection: GOAWAY(ENHANCE_YOUR_CALM, ``debug_data``), the
        open calls end as on a lost connection, and the peer's record goes up, so that its next
        connections open with a smaller allowance (:class:`minigrpc.http2.flood.PeerHistory`).

        The one place a client is sent away for what it did: a flood of frames that do no work
        (RFC 9113 §10.5), or PINGs past the keepalive policy's strikes (gRFC A8; the driver
        counts them, and passes ``too_many_pings``).  A client sent away for either reconnects
        at once, and a full opening allowance per connection would be a reward for it.
        """
        if self.closed:
            return []
        events = self._fail_connection(ENHANCE_YOUR_CALM, reason, debug_data)
        if self._peer is not None:
            history, peer = self._peer
            history.sent_away(peer)
        return events

    def connection_lost(self, reason: str = "connection lost") -> List[CallEvent]:
        """The socket closed or failed: every open call is CANCELLED
        (PROTOCOL-HTTP2.md, Connection failure)."""
        if self.closed:
            return []
        self.closed = True
        self.close_reason = reason
        return self._terminate_all(StatusCode.CANCELLED, reason)

    def _fail_connection(
        self, error_code: int, reason: str, debug_data: bytes = b""
    ) -> List[CallEvent]:
        """A connection error: GOAWAY(``error_code``) unless one went out, then close
        (RFC 9113 §5.4.1)."""
        self._close_with(error_code, debug_data)
        return self._connection_failed(reason)

    def end_for_keepalive(self, debug_data: bytes, reason: str) -> List[CallEvent]:
        """The server's keepalive gives the connection up (gRFC A8, A9; the driver decides
        when): its PING went unanswered.  GOAWAY(ENHANCE_YOUR_CALM, ``debug_data``), then the
        open calls end as on a lost connection.  A silent client did nothing wrong, so its
        record stays as it is; one that pings too often is sent away (:meth:`send_away`)."""
        if self.closed:
            return []
        return self._fail_connection(ENHANCE_YOUR_CALM, reason, debug_data)

    def keepalive_ping(self) -> None:
        """A keepalive PING (gRFC A8, A9): the driver decides when, and reads any bytes that
        follow as the client's life."""
        self.conn.ping(KEEPALIVE_PING_PAYLOAD)

    def take_pings_received(self) -> int:
        """The PINGs the client sent since the last call: what the keepalive policy counts."""
        return self.conn.take_pings_received()

    def take_data_sent(self) -> bool:
        """Whether HEADERS, DATA or a connection WINDOW_UPDATE went out since the last call:
        what forgives the client's PING strikes (grpc-core's doc/keepalive.md)."""
        return self.conn.take_data_sent()

    def _connection_failed(self, reason: str) -> List[CallEvent]:
        self.closed = True
        self.close_reason = reason
        return self._terminate_all(StatusCode.CANCELLED, reason)

    def _terminate_all(self, code: StatusCode, details: str) -> List[CallEvent]:
        events: List[CallEvent] = [
            CallTerminated(call.stream_id, code, details)
            for call in self._calls.values()
            if not call.finished
        ]
        self._calls.clear()
        self._unanswered.clear()
        self._responses.forget_all()
        self.memory.close()  # everything the connection buffered goes with it
        return events

    # -- output ----------------------------------------------------------------------------------

    def send_initial_metadata(
        self, stream_id: int, metadata: Headers, encoding: Optional[str] = None
    ) -> bool:
        """Send the response headers now (``ServicerContext.send_initial_metadata``).

        ``encoding`` is the compression wanted for the response message; it is honoured only if the
        client listed it in ``grpc-accept-encoding`` (``doc/compression.md``) and fixed from here
        on, because ``grpc-encoding`` travels in these headers. Returns False if the call is gone.
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished or call.headers_sent:
            return False
        self._responses.send_headers(call, metadata, encoding)
        return True

    def finish_call(
        self,
        stream_id: int,
        code: StatusCode,
        details: str = "",
        *,
        message: Optional[bytes] = None,
        initial_metadata: Optional[Headers] = None,
        trailing_metadata: Optional[Headers] = None,
        encoding: Optional[str] = None,
        compress_message: bool = True,
    ) -> bool:
        """End a call with an optional response message and a status (PROTOCOL-HTTP2.md,
        Responses).

        With a message: headers (unless already sent), the message, then trailers.  Without one
        and without sent headers: Trailers-Only, as for immediate errors.  ``encoding`` asks for
        the message to be compressed (only if the client accepts it); ``compress_message=False``
        is ``disable_next_message_compression``.  A message over ``max_send_message_length``
        turns the call into RESOURCE_EXHAUSTED.  Returns False if the call is already gone
        (reset by the client, expired, or the connection closed).
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished:
            return False
        if message is not None:
            limit = self.settings.max_send_message_length
            if limit is not None and len(message) > limit:
                code = StatusCode.RESOURCE_EXHAUSTED
                details = str(wire.MessageTooLarge(len(message), limit, sending=True))
                message = None
            elif self.memory.over_budget:
                # Queued, it would only add to what the client does not read (module docstring).
                code = StatusCode.RESOURCE_EXHAUSTED
                details = OVER_BUDGET_DETAILS
                message = None
        trailers = hdrs.status_headers(code.number, details)
        if trailing_metadata:
            trailers.extend(trailing_metadata)
        self._responses.finish(
            call, trailers, message, initial_metadata, encoding, compress_message
        )
        return True

    def reject_call(
        self,
        stream_id: int,
        code: StatusCode,
        details: str,
        *,
        trailing_metadata: Optional[Headers] = None,
    ) -> bool:
        """Trailers-Only error for a call the socket layer will not run (PROTOCOL-HTTP2.md,
        Responses).

        Used for unknown methods (UNIMPLEMENTED) and the server-wide RPC limit. No
        :class:`CallTerminated` follows: the caller knows the call ended.
        """
        return self.finish_call(stream_id, code, details, trailing_metadata=trailing_metadata)

    def accept_call(self, stream_id: int, request_streaming: bool) -> List[CallEvent]:
        """The handler is found: apply the rules of its request shape to what already arrived.

        Only with ``shape_from_handler``.  A unary request gets its one-message checks (and
        :class:`RequestReady` if it is already complete); a streaming one reports the messages
        and the END_STREAM that arrived with its headers.
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished or call.request_streaming is not None:
            return []
        call.request_streaming = request_streaming
        out: List[CallEvent] = []
        if request_streaming:
            if call.inbound.count:
                out.append(RequestMessage(stream_id))
        elif call.inbound.received > 1:
            self._fail_more_than_one(call, out)
            return out
        if call.request_closed:
            self._request_complete(call, out)
        return out

    def take_request(self, stream_id: int) -> Optional[bytes]:
        """The next message of a streaming request, inflated; None when none is waiting.

        Taking a message returns its bytes to the stream's flow-control window once fewer than
        :data:`~minigrpc.protocol.grpc_connection.DEFAULT_BUFFER_LIMIT` bytes wait.  Raises
        :class:`~minigrpc.protocol.status.CallError` for a message that cannot be inflated; end the
        call with :meth:`fail_call` then.
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished:
            return None
        message = call.inbound.take(self, stream_id)
        if message is None:
            return None
        self._resume_if_under()
        compressed, payload = message
        return wire.decode_message(
            compressed, payload, call.encoding, self.settings.max_receive_message_length
        )

    def request_compressed_with(self, stream_id: int) -> Optional[str]:
        """The request's ``grpc-encoding`` (None for identity), for ``request_compression()``."""
        call = self._calls.get(stream_id)
        return None if call is None else call.encoding

    def send_message(
        self,
        stream_id: int,
        message: bytes,
        *,
        encoding: Optional[str] = None,
        compress_message: bool = True,
    ) -> bool:
        """Queue one message of a streaming response (headers first, if not sent yet).

        ``encoding`` as for :meth:`finish_call`; it only counts for the first message, which
        sends the headers.  Raises :class:`~minigrpc.protocol.status.MessageTooLarge` above
        ``max_send_message_length`` (nothing is queued).  Returns False if the call is gone.
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished or call.outbound.state is not SendState.OPEN:
            return False
        limit = self.settings.max_send_message_length
        if limit is not None and len(message) > limit:
            raise MessageTooLarge(len(message), limit, sending=True)
        if not call.headers_sent:
            self._responses.send_headers(call, [], encoding)
        self._responses.queue_streamed_message(call, message, compress_message)
        return True

    def queued_response_cost(self, stream_id: int) -> int:
        """What the call's responses still waiting for window or output room count against
        its high water: their framed bytes and a per-message overhead
        (:func:`minigrpc.protocol.memory_budget.unsent_cost`), so that empty messages count too; 0
        when the call is gone."""
        call = self._calls.get(stream_id)
        if call is None:
            return 0
        outbound = call.outbound
        return unsent_cost(outbound.queued_bytes, outbound.queued_messages)

    def fail_call(self, stream_id: int, code: StatusCode, details: str) -> List[CallEvent]:
        """End a started call with an error status (trailers); its :class:`CallTerminated`."""
        call = self._calls.get(stream_id)
        out: List[CallEvent] = []
        if call is not None:
            self._fail_call(call, code, details, out)
        return out

    def expire_call(self, stream_id: int) -> List[CallEvent]:
        """The call's deadline passed: send DEADLINE_EXCEEDED trailers and end the call.

        grpc-go resets the stream with CANCEL instead; trailers give every client, deadline-aware
        or not, the same unambiguous status.
        """
        call = self._calls.get(stream_id)
        if call is None or call.finished:
            return []
        call.outbound.discard()
        self.finish_call(stream_id, StatusCode.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)
        return [CallTerminated(stream_id, StatusCode.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)]

    def request_progress(self, stream_id: int) -> Optional[float]:
        """When the call's still incomplete request last made progress, on the connection's clock.

        That is when its HEADERS or its latest DATA with payload arrived; None once the request
        is complete (message and END_STREAM) or the call is gone.  The socket layer cancels a
        call whose request makes no progress for too long (slowloris).
        """
        call = self._calls.get(stream_id)
        if (
            call is None
            or call.finished
            or call.request_dispatched
            or call.request_closed
            or call.request_streaming  # a stream may pause; its handler decides
        ):
            return None
        return call.last_progress

    def cancel_call(
        self, stream_id: int, details: str = "Cancelled by the server"
    ) -> List[CallEvent]:
        """``ServicerContext.cancel()``: RST_STREAM(CANCEL); the client sees CANCELLED.

        Also used for a request that stalled; ``details`` is what the call's context reports.
        """
        call = self._calls.pop(stream_id, None)
        self._responses.forget(stream_id)
        if call is None:
            return []
        self._release(call)
        if call.finished:
            return []
        call.finished = True
        self._reset(stream_id, CANCEL)
        return [CallTerminated(stream_id, StatusCode.CANCELLED, details)]

    def abort_all(
        self,
        details: str = "the server is shutting down",
        status_details: str = SHUTDOWN_DETAILS,
        debug_data: bytes = b"",
    ) -> List[CallEvent]:
        """``stop(0)`` or an expired grace: end every call and close.

        A call still running gets UNAVAILABLE ``status_details`` (Trailers-Only, or trailers
        after its responses): ``Cancelling all calls`` by default, as grpc-core's server
        answers the calls it cancels at shutdown, so that a client may retry it elsewhere.  Its
        handler's context reports CANCELLED with ``details``.  A call whose status is written
        but whose responses wait for window is reset with CANCEL (PROTOCOL-HTTP2.md, Errors),
        since its trailers cannot go out first.  The last GOAWAY (NO_ERROR) carries
        ``debug_data``.
        """
        if self.closed:
            return []
        events = self._end_every_call(details, status_details)
        self.conn.close_connection(NO_ERROR, debug_data)
        self.closed = True
        self.close_reason = details
        return events

    def cut_after_drain(
        self, details: str, status_details: str, debug_data: bytes
    ) -> List[CallEvent]:
        """The grace after a drain is over (gRFC A9, ``grpc.max_connection_age_grace_ms``): the
        calls still running end as in :meth:`abort_all`, and the connection closes.

        The last GOAWAY is grpcio 1.85's, measured: when the client answered the drain's PING,
        the final GOAWAY(NO_ERROR) it got then stays the last (nothing more is sent before the
        calls' trailers and the close); when it never answered, GOAWAY(last stream,
        INTERNAL_ERROR, ``debug_data``) goes first, since a client that does not answer PINGs
        may not have seen the drain at all, and the connection ends on an error.
        """
        if self.closed:
            return []
        if not self._drain_ping_answered:
            self.conn.close_connection(INTERNAL_ERROR, debug_data)
        events = self._end_every_call(details, status_details)
        self.closed = True
        self.close_reason = details
        return events

    def _end_every_call(self, details: str, status_details: str) -> List[CallEvent]:
        """Every call still open ends UNAVAILABLE ``status_details`` (its handler's context
        CANCELLED ``details``); what the connection held for calls is given back."""
        events: List[CallEvent] = []
        for stream_id in list(self._calls):
            call = self._calls[stream_id]
            if not call.finished:
                events.append(CallTerminated(stream_id, StatusCode.CANCELLED, details))
                call.outbound.discard()
                self.finish_call(stream_id, StatusCode.UNAVAILABLE, status_details)
                if stream_id not in self._calls:
                    continue  # Trailers-Only: ended (and reset NO_ERROR if its request was open)
            self._reset(stream_id, CANCEL)
        self._calls.clear()
        self._unanswered.clear()
        self._responses.forget_all()
        self.memory.close()
        return events

    def fail_internally(self, details: str = "internal error") -> List[CallEvent]:
        """A fault of ours broke this connection: GOAWAY(INTERNAL_ERROR), then it closes.

        RFC 9113 §5.4.1: an endpoint that ends a connection on an error sends GOAWAY first,
        with the last stream it processed and the error code, so that the client knows the end
        was an error, not a graceful close, and which of its streams it may retry elsewhere;
        INTERNAL_ERROR (RFC 9113 §7) is the code for a fault of the implementation.  The open
        calls end as on a lost connection (PROTOCOL-HTTP2.md, Connection failure).
        """
        if self.closed:
            return []
        self.conn.close_connection(INTERNAL_ERROR, b"internal error")
        return self._connection_failed(details)

    def start_drain(self, debug_data: bytes = b"") -> None:
        """Graceful shutdown, step 1: GOAWAY(2^31-1) and a PING (RFC 9113 §6.8;
        docs/wire-rules.md, "GOAWAY and PING").

        Streams the client opens before it sees the GOAWAY are still served; the PING's ACK
        (or :meth:`send_final_goaway` called on a timer) moves to step 2.  Both GOAWAYs carry
        ``debug_data``, which says why (gRFC A9: ``max_age``, ``max_idle``).
        """
        if self.closed or self._drain_phase is not DrainPhase.SERVING:
            return
        self._drain_phase = DrainPhase.ANNOUNCED
        self._drain_debug_data = debug_data
        self.conn.send_goaway(_MAX_STREAM_ID, NO_ERROR, debug_data)
        self.conn.ping(DRAIN_PING_PAYLOAD)

    def send_final_goaway(self) -> None:
        """Graceful shutdown, step 2: GOAWAY(highest stream seen), with the debug data of
        step 1; later streams are refused."""
        if self.closed or self._drain_phase is DrainPhase.CLOSED_TO_NEW:
            return
        self._drain_phase = DrainPhase.CLOSED_TO_NEW
        self.conn.send_goaway(self._highest_stream_id, NO_ERROR, self._drain_debug_data)

    # -- internals -------------------------------------------------------------------------------

    def _after_end_stream(self, call: ServerStream) -> None:
        """Early Server Closure (PROTOCOL-HTTP2.md): END_STREAM while the request is open gets
        RST_STREAM(NO_ERROR)."""
        if not call.request_closed:
            self._reset(call.stream_id, NO_ERROR)
        self._forget(call)

    def _forget(self, call: ServerStream) -> None:
        self._calls.pop(call.stream_id, None)
        self._responses.forget(call.stream_id)
        self._release(call)

    def _release(self, call: ServerStream) -> None:
        """A call is forgotten: what it still buffers goes, and so does its charge."""
        call.inbound.clear(self)
        call.outbound.discard()
        if self.lead_stream == call.stream_id:
            self.lead_stream = self._lead_decoder = None

    def _choose_lead(self) -> Optional[Tuple[int, wire.MessageDecoder]]:
        """The call with the largest partial request message, if any (the nearest to whole)."""
        best: Optional[ServerStream] = None
        for call in self._calls.values():
            decoder = call.inbound.decoder
            if call.finished or decoder.at_boundary:
                continue
            if best is None or decoder.buffered > best.inbound.decoder.buffered:
                best = call
        return None if best is None else (best.stream_id, best.inbound.decoder)

    def resume_credit(self) -> None:
        """Back under budget: the connection's window and each stream's held back window."""
        super().resume_credit()
        for stream_id, call in self._calls.items():
            if call.inbound.waiting_for_window:
                call.inbound.return_deferred(self, stream_id)


#: What each event of :class:`~minigrpc.http2.server.ServerHTTP2Connection` does, by its class.
_HANDLERS: Dict[type, Callable[[ServerGrpcConnection, Any, List[CallEvent]], None]] = {
    events_.DataReceived: ServerGrpcConnection._on_data,
    events_.RequestReceived: ServerGrpcConnection._on_request,
    events_.StreamEnded: ServerGrpcConnection._on_stream_ended,
    events_.TrailersReceived: ServerGrpcConnection._on_trailers,
    events_.StreamReset: ServerGrpcConnection._on_stream_reset,
    events_.WindowUpdated: ServerGrpcConnection._on_window_updated,
    events_.SettingsChanged: ServerGrpcConnection._on_settings,
    events_.PingAcknowledged: ServerGrpcConnection._on_ping_ack,
    events_.ConnectionTerminated: ServerGrpcConnection._on_goaway,
    events_.PeerConnectionError: ServerGrpcConnection._on_connection_error,
}
