"""The client's end of an HTTP/2 connection (RFC 9113).

:class:`ClientHTTP2Connection` is what :mod:`minigrpc.protocol.client_protocol` (and so both the
blocking client and :mod:`minigrpc.aio`) drives: an
:class:`~minigrpc.http2.connection.HTTP2Connection` made of the parts that are the client's:

* streams: opened by us, odd identifiers in increasing order (RFC 9113 §5.1.1; a
  :class:`StreamIDsExhausted` past 2^31-1).  The server opens none (push is refused, RFC 9113
  §8.4), so a frame on an even stream or on one we did not open yet is on an idle stream.
* the preface (RFC 9113 §3.4): ours is the magic, our SETTINGS
  (:func:`minigrpc.http2.streams.client_settings`, ENABLE_PUSH 0) and the connection's
  WINDOW_UPDATE; the server's first frame must be SETTINGS.
* what a response header block means (:func:`response_block`): 1xx informational responses are
  skipped (RFC 9110 §15.2); a second block must end the stream (trailers, RFC 9113 §8.1).
  Validating what a block says is the caller's
  (:func:`minigrpc.protocol.headers.malformed_response`): a malformed block is a stream error
  there (RFC 9113 §8.1.1).

The one-shot call (:mod:`minigrpc.protocol.oneshot_protocol`) is a client too, of one stream,
on the same frame reader, stream table and windows, without this connection.
"""

from typing import List, Optional

from . import streams
from .connection import HTTP2Connection, StreamIDsExhausted
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
from .hpack_codec import Header, find_header
from .streams import CLOSED_STREAMS_KEPT, Stream

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
    "response_block",
]


def response_block(
    stream: Stream, stream_id: int, block: List[Header], end_stream: bool
) -> Optional[Event]:
    """What a header block from the server means (RFC 9113 §8.1,
    :meth:`minigrpc.http2.streams.Stream.response_block`): the response headers, or trailers;
    None for an informational response."""
    kind = stream.response_block(find_header(block, b":status"), end_stream)
    if kind == streams.RESPONSE:
        return ResponseReceived(stream_id, block, end_stream)
    if kind == streams.TRAILERS:
        return TrailersReceived(stream_id, block)
    return None


class ClientHTTP2Connection(HTTP2Connection):
    """A client's HTTP/2 connection state, without I/O (see the module docstring): an
    :class:`~minigrpc.http2.connection.HTTP2Connection` made with the client's parts.

    :meth:`initiate` queues the preface; :meth:`receive_data` takes the bytes read and returns
    events; :meth:`data_to_send` returns everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        *,
        stream_window: int = streams.DEFAULT_STREAM_WINDOW,
        connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: int = streams.CONNECTION_MAX_HEADER_LIST_SIZE,
    ) -> None:
        super().__init__(
            True,
            response_block,
            streams.client_settings(stream_window, max_frame_size, max_header_list_size),
            stream_window=stream_window,
            connection_window=connection_window,
            max_frame_size=max_frame_size,
            header_list_limit=max_header_list_size,
        )
