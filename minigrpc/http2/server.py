"""The server's end of an HTTP/2 connection (RFC 9113) as a sans-IO state machine.

:class:`ServerHTTP2Connection` is what
:class:`minigrpc.protocol.server_protocol.ServerGrpcConnection` (and so both servers, blocking and
:mod:`minigrpc.aio`) drives: bytes in, small event objects and bytes out, on minigrpc's own frame
codec (:mod:`minigrpc.http2.frames`) and HPACK codec (:mod:`minigrpc.http2.hpack_codec`).  The
rules both ends share (stream states, flow control both ways, SETTINGS, header-block assembly,
PING, GOAWAY, RST_STREAM, the flood counts) are
:class:`minigrpc.http2.connection.HTTP2Connection`'s.  What is the server's:

* the preface (RFC 9113 §3.4): the client's 24-octet magic, checked as it arrives
  (:class:`minigrpc.http2.error_codes.PrefaceError`, before any frame is parsed), then its
  SETTINGS; ours is one SETTINGS frame with minigrpc's values and the connection's WINDOW_UPDATE
  (SETTINGS cannot change the connection window, RFC 9113 §6.9.2).
* streams: opened by the client, odd identifiers in increasing order (RFC 9113 §5.1.1).  A
  HEADERS frame on a lower odd stream that is not open is on a closed one; one on an even stream
  is on an idle one (the server pushes nothing, RFC 9113 §8.4), a connection error.  How many
  may be open at once is the caller's to police: it refuses a stream over its
  MAX_CONCURRENT_STREAMS with RST_STREAM(REFUSED_STREAM), which clients retry, where the RFC
  would allow a connection error that ends every call (RFC 9113 §5.1.2).
* request header blocks: the first opens the stream (:class:`RequestReceived`); a
  ``content-length`` is held against the DATA that follows (RFC 9113 §8.1.1: a mismatch is a
  stream error PROTOCOL_ERROR); a second block is trailers and must end the stream (RFC 9113
  §8.1).  What a block says is the caller's to validate
  (:func:`minigrpc.protocol.headers.malformed_request`), as a stream error (RFC 9113 §8.1.1).
* response header blocks HPACK-coded without the dynamic table, the last few remembered.
* the header-list limit: the decoder's lies above the MAX_HEADER_LIST_SIZE we advertise
  (:data:`HPACK_LIMIT_FACTOR`), which the caller enforces per call with a gRPC status, so
  that one oversized request fails its call and not the connection.
"""

from typing import List, Optional, Sequence

from . import error_codes, frames
from . import settings as http2
from .connection import _RESET_BY_US, HTTP2Connection, Stream, _Failure
from .events import Event, PeerConnectionError, RequestReceived, TrailersReceived
from .frames import (
    INITIAL_WINDOW_SIZE,
    MAX_CONCURRENT_STREAMS,
    MAX_FRAME_SIZE,
    MAX_HEADER_LIST_SIZE,
)
from .hpack_codec import Header, find_header

__all__ = ["HEADER_BLOCK_SLACK", "HPACK_LIMIT_FACTOR", "ServerHTTP2Connection"]

#: How much larger than the advertised per-call limit the decoder's header-list limit is.
HPACK_LIMIT_FACTOR = 4
#: Room for padding (at most 256 octets per frame) above the decoder's limit, in the encoded
#: size a header block may grow to before END_HEADERS.
HEADER_BLOCK_SLACK = 64 * 256


class ServerHTTP2Connection(HTTP2Connection):
    """A server's HTTP/2 connection state, without I/O (see the module docstring).

    :meth:`initiate` queues our SETTINGS; :meth:`receive_data` takes the bytes read and returns
    events; :meth:`data_to_send` returns everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        *,
        stream_window: int = http2.DEFAULT_STREAM_WINDOW,
        connection_window: int = http2.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE,
        max_concurrent_streams: Optional[int] = None,
        max_header_list_size: int = http2.CALL_MAX_HEADER_LIST_SIZE,
    ) -> None:
        header_list_limit = max(
            http2.CONNECTION_MAX_HEADER_LIST_SIZE, max_header_list_size * HPACK_LIMIT_FACTOR
        )
        super().__init__(
            stream_window=stream_window,
            connection_window=connection_window,
            max_frame_size=max_frame_size,
            max_header_list_size=max_header_list_size,
            header_list_limit=header_list_limit,
            max_header_block=header_list_limit + HEADER_BLOCK_SLACK,
        )
        self._max_concurrent_streams = max_concurrent_streams
        #: Octets of the client's magic still to check (RFC 9113 §3.4).
        self._preface_left = len(http2.CLIENT_PREFACE)

    # -- sending ------------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue our SETTINGS and the connection's WINDOW_UPDATE (RFC 9113 §3.4, §6.9.2).

        The stream window we advertise counts from now: the client cannot send on a stream
        before it has read these SETTINGS.
        """
        settings = [
            (INITIAL_WINDOW_SIZE, self._stream_window),
            (MAX_FRAME_SIZE, self._max_frame_size),
            (MAX_HEADER_LIST_SIZE, self._max_header_list_size),
        ]
        if self._max_concurrent_streams is not None:
            settings.insert(0, (MAX_CONCURRENT_STREAMS, self._max_concurrent_streams))
        self._out.append(frames.settings_frame(settings))
        self._open_connection_window()

    def send_headers(
        self, stream_id: int, headers: Sequence[Header], end_stream: bool = False
    ) -> None:
        """Response headers, or with ``end_stream`` trailers (or a Trailers-Only response),
        on an open stream (RFC 9113 §8.1)."""
        self._queue_header_block(stream_id, self.streams[stream_id], headers, end_stream)

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> List[Event]:
        """The client's magic first (RFC 9113 §3.4), then frames
        (:meth:`HTTP2Connection.receive_data`)."""
        if self._preface_left:
            if self.closed:
                return []
            seen = len(http2.CLIENT_PREFACE) - self._preface_left
            take = min(self._preface_left, len(data))
            if data[:take] != http2.CLIENT_PREFACE[seen : seen + take]:
                error = error_codes.PrefaceError("invalid HTTP/2 connection preface")
                self.close_connection(error.error_code)
                return [PeerConnectionError(error.error_code, str(error))]
            self._preface_left -= take
            data = data[take:]
            if not data:
                return []
        return super().receive_data(data)

    # -- what the role says -------------------------------------------------------------------

    def _idle(self, stream_id: int) -> bool:
        """Even streams would be the server's, which opens none; odd ones above the last the
        client opened are not opened yet (RFC 9113 §5.1.1)."""
        return not stream_id % 2 or stream_id > self.last_peer_stream_id

    def _first_frame_error(self, header: bytes) -> Exception:
        return error_codes.PrefaceError(f"the client's first frame is not SETTINGS ({header!r})")

    def _on_block(
        self, stream_id: int, block: List[Header], end_stream: bool, events: List[Event]
    ) -> None:
        """A request's headers on a new stream, or its trailers (RFC 9113 §8.1)."""
        if self._opens_stream(stream_id):
            stream = self._open(stream_id)
            length = find_header(block, b"content-length")
            if length is not None:
                left = _content_length(length)
                if left is None or (end_stream and left):
                    # Malformed (RFC 9113 §8.1.1): a stream error.
                    self._stream_error(stream_id, error_codes.PROTOCOL_ERROR, events)
                    return
                stream.content_left = left
            events.append(RequestReceived(stream_id, block, end_stream))
            if end_stream:
                self._end_remote(stream_id, stream, events)
            return
        if stream_id not in self.streams and stream_id not in self._closed:
            # Below the last stream opened and never used (RFC 9113 §5.1.1).
            raise _Failure(
                error_codes.PROTOCOL_ERROR,
                f"HEADERS on stream {stream_id}, below the last stream opened",
            )
        trailed = self._stream(stream_id, "HEADERS", events)
        if trailed is None:
            return
        if not end_stream or trailed.content_left:
            # Trailers must end the request, after all the content it announced (RFC 9113
            # §8.1, §8.1.1): malformed, a stream error.
            self._stream_error(stream_id, error_codes.PROTOCOL_ERROR, events)
            return
        events.append(TrailersReceived(stream_id, block))
        self._end_remote(stream_id, trailed, events)

    def _on_block_error(self, stream_id: int, error_code: int, events: List[Event]) -> None:
        """A block that is a stream error whatever it says: on a new stream, the stream is
        opened and reset at once (it counts as used, RFC 9113 §5.1.1), without an event."""
        if self._opens_stream(stream_id):
            self.last_peer_stream_id = stream_id
            self._out.append(frames.rst_stream_frame(stream_id, error_code))
            self._remember_closed(stream_id, _RESET_BY_US)
            return
        super()._on_block_error(stream_id, error_code, events)

    def _opens_stream(self, stream_id: int) -> bool:
        """A block on ``stream_id`` opens it: odd, above every stream the client opened
        (RFC 9113 §5.1.1)."""
        return stream_id % 2 == 1 and stream_id > self.last_peer_stream_id

    def _open(self, stream_id: int) -> Stream:
        """The client opens ``stream_id`` (RFC 9113 §5.1.1); lower streams it never used are
        closed implicitly."""
        self.last_peer_stream_id = stream_id
        stream = Stream(self._peer_initial_window, self._stream_window)
        stream.headers_received = True
        self.streams[stream_id] = stream
        return stream


def _content_length(value: bytes) -> Optional[int]:
    """A ``content-length`` value (RFC 9110 §8.6: one or more digits), or None if malformed."""
    value = value.strip()
    if not value.isdigit():
        return None
    return int(value)

