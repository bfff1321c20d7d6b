"""How a server connection takes requests: the checks of each request's frames, in order.

:class:`RequestIntake` is the half of
:class:`minigrpc.protocol.server_protocol.ServerGrpcConnection` that turns a client's HEADERS,
DATA, END_STREAM and RST_STREAM into call events; the connection (HTTP/2, flow control, responses,
drain) is :class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection`, which builds on it.  It
is sans-IO like the rest of the protocol: no socket, no thread, and no clock but the connection's.
What it decides (docs/wire-rules.md, "Server-side rejections" and "Messages and compression"):

* a new stream is refused with RST_STREAM(REFUSED_STREAM) once the connection closed to new
  streams, has ``max_concurrent_streams`` open, or is over its memory budget (PROTOCOL-HTTP2.md,
  Errors: retryable);
* a request that is not gRPC gets its HTTP status and the gRPC status grpc-go gives it, as one
  Trailers-Only HEADERS frame (PROTOCOL-HTTP2.md, "Responses"), once the request is complete;
  a malformed header block (RFC 9113 §8.1.1) is RST_STREAM(PROTOCOL_ERROR);
* request messages are checked against the receive limit on their length prefix, and a unary
  request must carry exactly one message (INTERNAL otherwise, as grpc-go);
* a client's RST_STREAM ends the call (CANCELLED, or what its error code maps to).
"""

import enum
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from ..http2.events import DataReceived, RequestReceived, StreamEnded, StreamReset
from ..http2.frames import http2_error_name
from . import headers as hdrs
from . import wire
from .enums import StatusCode
from .grpc_connection import NO_ERROR, PROTOCOL_ERROR, REFUSED_STREAM, GrpcConnection, Outbound
from .memory_budget import ConnectionMemory
from .server_events import (
    CallEvent,
    CallStarted,
    CallTerminated,
    RequestEnded,
    RequestMessage,
    RequestReady,
)
from .server_responses import ResponseWriter, ServerStream
from .server_settings import ServerSettings
from .status import CallError

if TYPE_CHECKING:
    from ..http2.server import ServerHTTP2Connection

__all__ = ["DrainPhase", "RequestIntake"]


class DrainPhase(enum.Enum):
    """Where a graceful shutdown of one connection is (PROTOCOL-HTTP2.md, GOAWAY Frame;
    RFC 9113 §6.8)."""

    #: Taking new streams.
    SERVING = "serving"
    #: GOAWAY(2^31-1) and a PING sent: streams the client opened before it saw them still count.
    ANNOUNCED = "announced"
    #: GOAWAY(highest stream seen) sent: later streams are refused; the calls left finish.
    CLOSED_TO_NEW = "closed to new streams"


class RequestIntake(GrpcConnection):
    """A server connection's request side (module docstring); ServerGrpcConnection builds on it."""

    # -- what ServerGrpcConnection provides
    # ----------------------------------------------------------

    conn: "ServerHTTP2Connection"
    settings: ServerSettings
    memory: ConnectionMemory
    _clock: Callable[[], float]
    #: None until :meth:`~ServerGrpcConnection.accept_call` tells a call's shape, False for unary.
    _initial_shape: Optional[bool]
    _calls: Dict[int, ServerStream]
    #: Requests that are not gRPC, still open: answered at their END_STREAM (_on_request).
    _unanswered: Dict[int, hdrs.Rejection]
    _highest_stream_id: int
    _last_request: hdrs.LastRequestHead
    _drain_phase: DrainPhase
    _responses: ResponseWriter

    def finish_call(self, stream_id: int, code: StatusCode, details: str = "") -> bool:
        """End the call with this status (:meth:`ServerGrpcConnection.finish_call`)."""
        raise NotImplementedError

    def _forget(self, call: ServerStream) -> None:
        raise NotImplementedError

    def _release(self, call: ServerStream) -> None:
        raise NotImplementedError

    # -- requests --------------------------------------------------------------------------------

    def _on_request(self, event: RequestReceived, out: List[CallEvent]) -> None:
        stream_id = event.stream_id
        if stream_id > self._highest_stream_id:
            self._highest_stream_id = stream_id
        if (
            self._drain_phase is DrainPhase.CLOSED_TO_NEW
            or self._open_streams() >= self.settings.max_concurrent_streams
            or self.memory.refuse_streams
        ):
            # Nothing was processed, so the client may retry elsewhere (PROTOCOL-HTTP2.md, Errors:
            # REFUSED_STREAM is UNAVAILABLE and safe to retry).
            self._reset(stream_id, REFUSED_STREAM)
            return
        headers = event.headers
        head = self._last_request.recall(headers)
        if head is None:
            if hdrs.malformed_request(headers):
                # A stream error (RFC 9113 §8.1.1): the connection's other calls go on.
                self._reset(stream_id, PROTOCOL_ERROR)
                return
            head = hdrs.read_request_headers(
                headers, self.settings.max_header_list_size, self.settings.enabled_encodings
            )
            self._last_request.remember(headers, head)
        request_open = not event.stream_ended
        if isinstance(head, hdrs.Rejection):
            if request_open and head.not_grpc:
                # Not gRPC at all: answered once the request is complete, so that a framing
                # fault later in it (RFC 9113 §8.1.1, §5.4.2) is answered as that fault and is
                # not lost behind an early answer and reset. Its DATA is acknowledged and
                # dropped (_on_data), and the stream counts against the concurrency limit.
                self._unanswered[stream_id] = head
                return
            self._reject(stream_id, head, request_open)
            return
        deadline = None if head.timeout is None else self._clock() + head.timeout
        call = ServerStream(
            stream_id,
            head.encoding,
            head.accept_encodings,
            self.settings.max_receive_message_length,
            self._clock(),
            self._initial_shape,
            Outbound(self.memory, pack_small=True),
        )
        self._calls[stream_id] = call
        out.append(CallStarted(stream_id, head.method, head.metadata, deadline, head.authority))

    def _on_data(self, event: DataReceived, out: List[CallEvent]) -> None:
        stream_id = event.stream_id
        call = self._calls.get(stream_id)
        if call is None or call.request_dispatched or call.finished:
            # Ack at once for calls we no longer read: the connection's window is spent all the
            # same (RFC 9113 §6.9).
            if event.flow_controlled_length:
                self.acknowledge_later(stream_id, event.flow_controlled_length)
            return
        if event.data:
            call.last_progress = self._clock()
        try:
            # Credits the window now, or (for a streaming request whose handler lags) as the
            # messages are taken.
            completed = call.inbound.data_received(
                self, stream_id, event.data, event.flow_controlled_length
            )
        except CallError as exc:
            self._fail_call(call, exc.code, str(exc), out)
            return
        if not completed:
            return
        if call.request_streaming:
            out.append(RequestMessage(stream_id))
        elif call.request_streaming is False and call.inbound.received > 1:
            self._fail_more_than_one(call, out)

    def _fail_more_than_one(self, call: ServerStream, out: List[CallEvent]) -> None:
        self._fail_call(
            call,
            StatusCode.INTERNAL,
            "grpc: received more than one request message for a unary method",
            out,
        )

    def _on_stream_ended(self, event: StreamEnded, out: List[CallEvent]) -> None:
        stream_id = event.stream_id
        call = self._calls.get(stream_id)
        if call is None:
            rejection = self._unanswered.pop(stream_id, None)
            if rejection is not None:
                self._reject(stream_id, rejection, request_open=False)
            return
        call.request_closed = True
        if call.finished:
            # Our END_STREAM went out first; the stream is now fully closed.
            self._forget(call)
            return
        if call.request_streaming is None:
            return  # the rules apply once accept_call() tells the request's shape
        self._request_complete(call, out)

    def _request_complete(self, call: ServerStream, out: List[CallEvent]) -> None:
        """The request's END_STREAM: a unary request is handed over, a stream is ended."""
        stream_id = call.stream_id
        inbound = call.inbound
        if call.request_streaming:
            if not inbound.at_boundary:
                self._fail_call(
                    call,
                    StatusCode.INTERNAL,
                    "grpc: the request stream ended inside a message",
                    out,
                )
            else:
                out.append(RequestEnded(stream_id))
            return
        if call.request_dispatched:
            return
        if inbound.received != 1 or not inbound.at_boundary:
            got = "a partial message" if not inbound.at_boundary else f"{inbound.received} messages"
            self._fail_call(
                call,
                StatusCode.INTERNAL,
                f"grpc: a unary request must carry exactly one message, got {got}",
                out,
            )
            return
        message = call.inbound.take(self, stream_id)
        assert message is not None  # received == 1 and at a boundary
        compressed, payload = message
        try:
            payload = wire.decode_message(
                compressed, payload, call.encoding, self.settings.max_receive_message_length
            )
        except CallError as exc:
            self._fail_call(call, exc.code, str(exc), out)
            return
        call.request_dispatched = True
        out.append(RequestReady(stream_id, payload, call.encoding if compressed else None))

    def _reset_malformed(self, stream_id: int, out: List[CallEvent]) -> None:
        """RST_STREAM(PROTOCOL_ERROR) for a malformed block on a running call (RFC 9113 §8.1.1)."""
        self._reset(stream_id, PROTOCOL_ERROR)
        self._end_reset_call(stream_id, "the client sent malformed trailers (PROTOCOL_ERROR)", out)

    def _on_stream_reset(self, event: StreamReset, out: List[CallEvent]) -> None:
        who = "client" if event.remote_reset else "HTTP/2 layer"
        details = f"the {who} reset the stream ({http2_error_name(event.error_code)})"
        self._end_reset_call(event.stream_id, details, out)

    def _end_reset_call(self, stream_id: int, details: str, out: List[CallEvent]) -> None:
        """Forget a stream that is reset; a call still running ends as CANCELLED (grpcio's code)."""
        self._unanswered.pop(stream_id, None)
        call = self._calls.pop(stream_id, None)
        self._responses.forget(stream_id)
        if call is not None:
            self._release(call)
        if call is not None and not call.finished:
            call.finished = True
            out.append(CallTerminated(stream_id, StatusCode.CANCELLED, details))

    # -- rejections ------------------------------------------------------------------------------

    def _reject(self, stream_id: int, rejection: hdrs.Rejection, request_open: bool) -> None:
        """The Trailers-Only answer of ``rejection`` on a stream that never became a call."""
        if self._stream_closed(stream_id):
            return  # closed by a later frame of the same read: the stream's error is its own
        headers = hdrs.trailers_only(
            rejection.code,
            rejection.details,
            http_status=rejection.http_status,
            extra_headers=rejection.extra_headers,
        )
        self.conn.send_headers(stream_id, headers, end_stream=True)
        if request_open:
            self._reset(stream_id, NO_ERROR)

    def _fail_call(
        self, call: ServerStream, code: StatusCode, details: str, out: List[CallEvent]
    ) -> None:
        """End a started call with an error this layer detected; tell the socket layer."""
        if call.finished:
            return
        call.outbound.discard()
        self.finish_call(call.stream_id, code, details)
        out.append(CallTerminated(call.stream_id, code, details))

    def _open_streams(self) -> int:
        """The client's open streams (RFC 9113 §5.1.2): calls, and requests waiting for their
        rejection; those the connection has closed since (a stream error of its own) are
        dropped."""
        if self._unanswered:
            for stream_id in [s for s in self._unanswered if self._stream_closed(s)]:
                del self._unanswered[stream_id]
        return len(self._calls) + len(self._unanswered)
