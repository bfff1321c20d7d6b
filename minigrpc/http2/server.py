"""The server's end of an HTTP/2 connection (RFC 9113).

:class:`ServerHTTP2Connection` is what
:class:`minigrpc.protocol.server_protocol.ServerGrpcConnection` (and so both servers, blocking and
:mod:`minigrpc.aio`) drives: an :class:`~minigrpc.http2.connection.HTTP2Connection` made of the
parts that are the server's:

* the preface (RFC 9113 §3.4): the client's 24-octet magic, checked as it arrives
  (:class:`minigrpc.http2.frames.PrefaceError`, before any frame is parsed), then its SETTINGS;
  ours is one SETTINGS frame with minigrpc's values
  (:func:`minigrpc.http2.streams.server_settings`) and the connection's WINDOW_UPDATE.
* streams: opened by the client, odd identifiers in increasing order (RFC 9113 §5.1.1).  A
  HEADERS frame on a lower odd stream never opened is a connection error; one on an even
  stream is on an idle one the client may not open (the server pushes nothing, RFC 9113 §8.4),
  a connection error too.  How many may be open at once is the caller's to police: it refuses
  a stream over its MAX_CONCURRENT_STREAMS with RST_STREAM(REFUSED_STREAM), which clients
  retry, where the RFC would allow a connection error that ends every call (RFC 9113 §5.1.2).
* what a request header block means (:func:`request_block`): the first opens the stream
  (:class:`RequestReceived`); a ``content-length`` is held against the DATA that follows
  (RFC 9113 §8.1.1: a mismatch is a stream error PROTOCOL_ERROR); a second block is trailers
  and must end the stream (RFC 9113 §8.1).  What a block says is the caller's to validate
  (:func:`minigrpc.protocol.headers.malformed_request`), as a stream error (RFC 9113 §8.1.1).
* the header-list limit: the decoder's lies above the MAX_HEADER_LIST_SIZE we advertise
  (:data:`HPACK_LIMIT_FACTOR`), which the caller enforces per call with a gRPC status, so
  that one oversized request fails its call and not the connection.
"""

from typing import List, Optional

from . import streams
from .connection import HTTP2Connection
from .events import Event, RequestReceived, TrailersReceived
from .frames import PROTOCOL_ERROR, StreamError
from .hpack_codec import Header, find_header
from .streams import Stream

__all__ = ["HEADER_BLOCK_SLACK", "HPACK_LIMIT_FACTOR", "ServerHTTP2Connection", "request_block"]

#: How much larger than the advertised per-call limit the decoder's header-list limit is.
HPACK_LIMIT_FACTOR = 4
#: Room for padding (at most 256 octets per frame) above the decoder's limit, in the encoded
#: size a header block may grow to before END_HEADERS.
HEADER_BLOCK_SLACK = 64 * 256


def request_block(stream: Stream, stream_id: int, block: List[Header], end_stream: bool) -> Event:
    """What a header block from the client means (RFC 9113 §8.1): a request's headers on the
    stream it opens, or its trailers."""
    if not stream.headers_received:
        stream.headers_received = True
        length = find_header(block, b"content-length")
        if length is not None:
            left = _content_length(length)
            if left is None or (end_stream and left):
                raise StreamError(PROTOCOL_ERROR, "a malformed content-length")  # RFC 9113 §8.1.1
            stream.content_left = left
        return RequestReceived(stream_id, block, end_stream)
    if not end_stream or stream.content_left:
        # Trailers must end the request, after all the content it announced (RFC 9113 §8.1,
        # §8.1.1): malformed, a stream error.
        raise StreamError(PROTOCOL_ERROR, "trailers that do not end the request")
    return TrailersReceived(stream_id, block)


def _content_length(value: bytes) -> Optional[int]:
    """A ``content-length`` value (RFC 9110 §8.6: one or more digits), or None if malformed."""
    value = value.strip()
    if not value.isdigit():
        return None
    return int(value)


class ServerHTTP2Connection(HTTP2Connection):
    """A server's HTTP/2 connection state, without I/O (see the module docstring): an
    :class:`~minigrpc.http2.connection.HTTP2Connection` made with the server's parts.

    :meth:`initiate` queues our SETTINGS; :meth:`receive_data` takes the bytes read and returns
    events; :meth:`data_to_send` returns everything queued.  Not thread-safe.
    """

    def __init__(
        self,
        *,
        stream_window: int = streams.DEFAULT_STREAM_WINDOW,
        connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE,
        max_concurrent_streams: Optional[int] = None,
        max_header_list_size: int = streams.CALL_MAX_HEADER_LIST_SIZE,
    ) -> None:
        header_list_limit = max(
            streams.CONNECTION_MAX_HEADER_LIST_SIZE, max_header_list_size * HPACK_LIMIT_FACTOR
        )
        super().__init__(
            False,
            request_block,
            streams.server_settings(
                stream_window, max_frame_size, max_header_list_size, max_concurrent_streams
            ),
            stream_window=stream_window,
            connection_window=connection_window,
            max_frame_size=max_frame_size,
            header_list_limit=header_list_limit,
            max_header_block=header_list_limit + HEADER_BLOCK_SLACK,
        )
