"""The client's end of an HTTP/2 connection (RFC 9113) as a sans-IO state machine.

:class:`ClientHTTP2Connection` is what :mod:`minigrpc.protocol.client_protocol` (and so both the
blocking client and :mod:`minigrpc.aio`) drives: bytes in, small event objects and bytes out, on
minigrpc's own frame codec (:mod:`minigrpc.http2.frames`) and HPACK codec
(:mod:`minigrpc.http2.hpack_codec`), the ones the one-shot client uses too; the server's end is
:class:`minigrpc.http2.server.ServerHTTP2Connection`, and
:mod:`minigrpc.protocol.grpc_connection`'s shared
:class:`~minigrpc.protocol.grpc_connection.Outbound` and
:class:`~minigrpc.protocol.grpc_connection.Inbound` write and credit through either.  It does only
what a gRPC client needs, which is less than a general HTTP/2 endpoint, and it does it per frame
without the event, frame and state-machine objects a general library builds for every frame.

The rules both ends share (stream states, flow control both ways, SETTINGS, header-block
assembly, PING, GOAWAY, RST_STREAM) are :class:`minigrpc.http2.connection.HTTP2Connection`'s.
What is the client's:

* streams: opened by us, odd identifiers in increasing order (RFC 9113 §5.1.1;
  :class:`StreamIDsExhausted` past 2^31-1): a frame on an even stream or one not opened yet is
  on an idle stream.
* the preface (RFC 9113 §3.4): ours is the magic, our SETTINGS (ENABLE_PUSH 0) and the
  connection's WINDOW_UPDATE; the server's first frame must be SETTINGS.
* request header blocks HPACK-coded without the dynamic table, the last few remembered.
* response header blocks: 1xx informational responses are skipped (RFC 9110 §15.2); a second
  block must end the stream (trailers, RFC 9113 §8.1).  Validating what a block says is the
  caller's (:func:`minigrpc.protocol.headers.malformed_response`): a malformed block is a stream
  error there (RFC 9113 §8.1.1).

A connection error (RFC 9113 §5.4.1) is reported as the last event of the read,
:class:`PeerConnectionError`, after the events of the frames before it; the GOAWAY with its code is
queued already.
"""

from typing import List, Sequence

from . import error_codes, frames, hpack_codec, settings
from .connection import CLOSED_STREAMS_KEPT, HTTP2Connection, Stream, _Failure
from .events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    PeerConnectionError,
    PingAcknowledged,
    ResponseReceived,
    SettingsChanged,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from .frames import MAX_WINDOW
from .hpack_codec import Header, find_header

__all__ = [
    "CLOSED_STREAMS_KEPT",
    "ClientHTTP2Connection",
    "ConnectionTerminated",
    "DataReceived",
    "Event",
    "PeerConnectionError",
    "PingAcknowledged",
    "ResponseReceived",
    "SettingsChanged",
    "Stream",
    "StreamEnded",
    "StreamIDsExhausted",
    "StreamReset",
    "TrailersReceived",
    "WindowUpdated",
]


class StreamIDsExhausted(Exception):
    """No stream identifier is left on this connection (RFC 9113 §5.1.1): open a new one."""


class ClientHTTP2Connection(HTTP2Connection):
    """A client's HTTP/2 connection state, without I/O (see the module docstring).

    :meth:`initiate` queues the preface; :meth:`receive_data` takes the bytes read and returns
    events; :meth:`data_to_send` returns everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        *,
        stream_window: int = settings.DEFAULT_STREAM_WINDOW,
        connection_window: int = settings.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = settings.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: int = settings.CONNECTION_MAX_HEADER_LIST_SIZE,
    ) -> None:
        super().__init__(
            stream_window=stream_window,
            connection_window=connection_window,
            max_frame_size=max_frame_size,
            max_header_list_size=max_header_list_size,
        )
        #: The identifier of the next stream to open (RFC 9113 §5.1.1: odd, increasing).
        self.next_stream_id = 1

    # -- sending ------------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the connection preface, our SETTINGS and the connection's WINDOW_UPDATE
        (RFC 9113 §3.4; SETTINGS cannot change the connection window, RFC 9113 §6.9.2).

        The stream windows we advertise count from now: the peer cannot send on a stream before
        it has read these SETTINGS.
        """
        self._out.append(settings.CLIENT_PREFACE)
        self._out.append(
            frames.client_settings(
                self._stream_window,
                self._max_frame_size,
                self._max_header_list_size,
                hpack_codec.DEFAULT_TABLE_SIZE,
            )
        )
        self._open_connection_window()

    @property
    def open_outbound_streams(self) -> int:
        return len(self.streams)

    def get_next_available_stream_id(self) -> int:
        """The identifier the next :meth:`send_headers` must use (RFC 9113 §5.1.1)."""
        if self.next_stream_id > MAX_WINDOW:
            raise StreamIDsExhausted("stream ids exhausted")
        return self.next_stream_id

    def send_headers(
        self, stream_id: int, headers: Sequence[Header], end_stream: bool = False
    ) -> None:
        """Open ``stream_id`` (:meth:`get_next_available_stream_id`) with this request block.

        The block is HPACK-coded without adding to the dynamic table, so the same header list
        always codes to the same bytes: those of the last few lists are remembered.
        """
        if stream_id != self.next_stream_id:
            raise ValueError(f"stream {stream_id} is not the next stream to open")
        self.next_stream_id = stream_id + 2
        stream = Stream(self._peer_initial_window, self._stream_window)
        self.streams[stream_id] = stream
        self._queue_header_block(stream_id, stream, headers, end_stream)

    # -- what the role says -------------------------------------------------------------------

    def _idle(self, stream_id: int) -> bool:
        """Even streams are the server's, which cannot open any (push is refused); odd ones
        from :attr:`next_stream_id` on are not opened yet (RFC 9113 §5.1.1)."""
        return not stream_id % 2 or stream_id >= self.next_stream_id

    def _first_frame_error(self, header: bytes) -> Exception:
        return error_codes.ServerPrefaceError(
            f"first frame received is not a SETTINGS frame ({header!r})"
        )

    def _on_block(
        self, stream_id: int, block: List[Header], end_stream: bool, events: List[Event]
    ) -> None:
        """Response headers, or trailers (RFC 9113 §8.1)."""
        stream = self._stream(stream_id, "HEADERS", events)
        if stream is None:
            return
        if not stream.headers_received:
            code = find_header(block, b":status")
            if code is not None and code[:1] == b"1" and not end_stream:
                return  # 1xx: informational, the response headers follow (RFC 9110 §15.2)
            stream.headers_received = True
            events.append(ResponseReceived(stream_id, block, end_stream))
        elif not end_stream:
            raise _Failure(error_codes.PROTOCOL_ERROR, "trailers without END_STREAM")
        else:
            events.append(TrailersReceived(stream_id, block))
        if end_stream:
            self._end_remote(stream_id, stream, events)
