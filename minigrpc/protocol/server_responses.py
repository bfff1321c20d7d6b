"""How a server connection writes its responses: headers, messages and trailers, in the order
and at the pace HTTP/2 allows.

:class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection` decides *what* a call is answered
(its status, whether a message may still be queued); :class:`ResponseWriter` gets those answers onto
the connection (PROTOCOL-HTTP2.md, Responses):

* the response headers go out once, first, with the ``grpc-encoding`` the client accepts
  (``doc/compression.md``), or a Trailers-Only block when the call ends before any message;
* messages are framed (Length-Prefixed-Message), queued, and handed to the connection in chunks of
  ``min(window, max frame, output room)`` (RFC 9113 §5.2, §6.9); a stream that runs out of
  window or room waits in a set and is resumed on WINDOW_UPDATE, a SETTINGS change or more room;
* the trailers follow the last queued byte, never before it;
* no header block goes out larger than the client's MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2):
  a client may take an oversized block as a connection error that fails all its calls, so
  such a call ends INTERNAL instead.

Nothing here reads input, touches a socket or a clock: like the connection, it is a sans-IO
part, tested through it in ``tests/unit/test_server_protocol.py``.
"""

from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from ..http2.flood import FrameBudget
from ..http2.server import ServerHTTP2Connection
from . import headers as hdrs
from . import wire
from .enums import StatusCode
from .grpc_connection import DEFAULT_BUFFER_LIMIT, Inbound, Outbound

__all__ = ["ResponseWriter", "ServerStream"]

Headers = List[Tuple[bytes, bytes]]


class ServerStream:
    """What a server connection tracks for one stream, from HEADERS until our END_STREAM or a
    reset: the request being read and the response being written."""

    __slots__ = (
        "accept_encodings",
        "encoding",
        "finished",
        "headers_sent",
        "inbound",
        "last_progress",
        "outbound",
        "oversized",
        "request_closed",
        "request_dispatched",
        "request_streaming",
        "response_encoding",
        "stream_id",
        "trailers",
    )

    def __init__(
        self,
        stream_id: int,
        encoding: Optional[str],
        accept_encodings: FrozenSet[str],
        max_receive: Optional[int],
        now: float,
        request_streaming: Optional[bool],
        outbound: Outbound,
    ) -> None:
        self.stream_id = stream_id
        self.encoding = encoding
        self.accept_encodings = accept_encodings
        self.inbound = Inbound(max_receive, DEFAULT_BUFFER_LIMIT, pack_small=True)
        #: The method's request shape: False for one message, True for a stream, None until
        #: the socket layer has found the handler (``ServerGrpcConnection.accept_call``).
        self.request_streaming = request_streaming
        self.request_closed = False
        #: A unary request was handed over (RequestReady); later DATA is ignored.
        self.request_dispatched = False
        #: When the request last made progress (its HEADERS, then each DATA with payload).
        self.last_progress = now
        self.headers_sent = False
        self.response_encoding: Optional[str] = None
        self.outbound = outbound  # response messages not yet handed to the connection
        self.trailers: Optional[Headers] = None  # trailers to send once ``outbound`` is out
        self.finished = False  # our final frame is queued (or the stream is gone)
        self.oversized = ""  # why initial metadata was not sent (too large for the client)


class ResponseWriter:
    """Writes the responses of one server connection (see the module docstring).

    ``conn`` is the connection's HTTP/2 end, which the frames are queued on; ``streams`` is the
    connection's table of open streams, shared; ``stream_closed`` says whether the connection
    already closed a stream (a later frame of the same read may have); ``ended`` is called once
    a stream's END_STREAM is queued, for the connection to forget it.
    """

    __slots__ = (
        "_blocked",
        "_conn",
        "_enabled_encodings",
        "_ended",
        "_output_room",
        "_starved",
        "_stream_closed",
        "_streams",
        "_unsent",
        "frame_budget",
    )

    def __init__(
        self,
        conn: ServerHTTP2Connection,
        streams: Dict[int, ServerStream],
        enabled_encodings: FrozenSet[str],
        frame_budget: FrameBudget,
        stream_closed: Callable[[int], bool],
        ended: Callable[[ServerStream], None],
    ) -> None:
        self._conn = conn
        self._streams = streams
        self._enabled_encodings = enabled_encodings
        #: The connection's allowance of frames that do no work: each write earns some back.
        self.frame_budget = frame_budget
        self._stream_closed = stream_closed
        self._ended = ended
        self._blocked: Set[int] = set()  # streams waiting for window or output room
        self._unsent: Set[int] = set()  # streams with messages queued since the last write
        self._output_room: Optional[int] = None  # None: unlimited
        self._starved = False  # a stream stopped for lack of output room, not of window

    # -- the pace: output room and the streams waiting for it ------------------------------------

    def set_output_room(self, room: Optional[int]) -> None:
        """See :meth:`ServerGrpcConnection.set_output_room
        <minigrpc.protocol.server_protocol.ServerGrpcConnection.set_output_room>`."""
        self._output_room = room
        if self._starved and (room is None or room > 0):
            self._starved = False
            self.pump_blocked()

    @property
    def starved(self) -> bool:
        """True when a response waits only for output room, not for window."""
        return self._starved

    @property
    def any_blocked(self) -> bool:
        return bool(self._blocked)

    def write_unsent(self) -> None:
        """Hand the connection the messages queued since the last write; queued together, they
        share DATA frames."""
        if self._unsent:
            unsent, self._unsent = self._unsent, set()
            for stream_id in unsent:
                self.pump(stream_id)

    def forget(self, stream_id: int) -> None:
        """The stream is gone: stop waiting to write it."""
        self._blocked.discard(stream_id)

    def forget_all(self) -> None:
        self._blocked.clear()

    # -- what goes out ---------------------------------------------------------------------------

    def send_headers(self, call: ServerStream, metadata: Headers, encoding: Optional[str]) -> None:
        """The response headers; ``encoding`` only if the client accepts it and the server
        enables it (``doc/compression.md``), fixed from here on."""
        if encoding is not None and (
            encoding not in call.accept_encodings or encoding not in self._enabled_encodings
        ):
            encoding = None
        call.response_encoding = encoding
        if metadata:
            call.oversized = self.oversized(metadata, None)
        headers = hdrs.response_headers(
            encoding, () if call.oversized else metadata, self._enabled_encodings
        )
        call.headers_sent = True
        if not self._stream_closed(call.stream_id):
            self._conn.send_headers(call.stream_id, headers)
            self.frame_budget.earn()

    def queue_message(self, call: ServerStream, message: bytes, compress_message: bool) -> None:
        """Frame one response message (compressed with the response's encoding unless
        ``compress_message`` is False) and queue it behind the others."""
        flag = False
        if call.response_encoding is not None and compress_message:
            message = wire.compress(call.response_encoding, message)
            flag = True
        call.outbound.add(wire.frame_message(message, flag))

    def queue_streamed_message(
        self, call: ServerStream, message: bytes, compress_message: bool
    ) -> None:
        """:meth:`queue_message`, written at the next :meth:`write_unsent` so that messages
        queued meanwhile share DATA frames."""
        self.queue_message(call, message, compress_message)
        self._unsent.add(call.stream_id)

    def finish(
        self,
        call: ServerStream,
        trailers: Headers,
        message: Optional[bytes],
        initial_metadata: Optional[Headers],
        encoding: Optional[str],
        compress_message: bool,
    ) -> None:
        """End the call: headers (unless sent), the message if any, then ``trailers``; or one
        Trailers-Only block when neither headers nor a message go out."""
        oversized = call.oversized or self.oversized(
            trailers, initial_metadata if not call.headers_sent else None
        )
        if oversized:
            # grpc-go resets such a stream; a status says why.
            trailers = hdrs.status_headers(StatusCode.INTERNAL.number, oversized)
            initial_metadata = None
            message = None
        if message is None:
            if call.headers_sent:
                self.queue_trailers(call, trailers)
            else:
                self.send_trailers_only(call, trailers, initial_metadata)
            return
        if not call.headers_sent:
            self.send_headers(call, initial_metadata or [], encoding)
        self.queue_message(call, message, compress_message)
        self.queue_trailers(call, trailers)

    def oversized(self, block: Headers, more: Optional[Headers]) -> str:
        """Why a header block exceeds the client's MAX_HEADER_LIST_SIZE, or "" if it fits."""
        limit = self._conn.peer_max_header_list_size
        if limit is None:
            return ""
        size = hdrs.header_list_size(block) + (hdrs.header_list_size(more) if more else 0) + 64
        if size <= limit:
            return ""
        return f"response metadata of {size} bytes exceeds the client's limit of {limit} bytes"

    def send_trailers_only(
        self, call: ServerStream, trailers: Headers, initial_metadata: Optional[Headers]
    ) -> None:
        """One HEADERS frame with END_STREAM carrying the status (PROTOCOL-HTTP2.md,
        Trailers-Only)."""
        headers: Headers = [(b":status", b"200"), (b"content-type", hdrs.GRPC_CONTENT_TYPE)]
        headers.extend(trailers)
        if initial_metadata:
            headers.extend(initial_metadata)
        call.headers_sent = True
        call.finished = True
        if not self._stream_closed(call.stream_id):
            self._conn.send_headers(call.stream_id, headers, end_stream=True)
        self._ended(call)

    def queue_trailers(self, call: ServerStream, trailers: Headers) -> None:
        """The trailers, sent as soon as every queued message is out."""
        call.trailers = trailers
        self.pump(call.stream_id)

    def pump_blocked(self) -> None:
        """Resume every stream that waits for window or room."""
        for stream_id in list(self._blocked):
            self.pump(stream_id)

    def pump(self, stream_id: int) -> None:
        """Hand the connection as much of the pending response as windows and output room allow."""
        call = self._streams.get(stream_id)
        if call is None or call.finished or self._stream_closed(stream_id):
            # A stream closed in the read being handled: its StreamReset event ends the call.
            self._blocked.discard(stream_id)
            return
        outbound = call.outbound
        conn = self._conn
        if not outbound.empty:
            room = self._output_room
            written = outbound.write(conn, stream_id, room)
            if written:
                self.frame_budget.earn()
            if room is not None:
                room -= written
                self._output_room = room
            if not outbound.empty:
                if room is not None and room <= 0 and outbound.can_write(conn, stream_id):
                    self._starved = True  # the window allows more; only the socket is full
                self._blocked.add(stream_id)
                return
        self._blocked.discard(stream_id)
        if call.trailers is not None:
            trailers, call.trailers = call.trailers, None
            call.finished = True
            conn.send_headers(stream_id, trailers, end_stream=True)
            self._ended(call)
