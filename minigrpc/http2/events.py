"""The events an HTTP/2 connection reports (:class:`minigrpc.http2.connection.HTTP2Connection`).

One small class per thing that happened on the connection, as the frames that caused it were
read: a request or response header block (RFC 9113 §8.1), trailers, DATA (RFC 9113 §6.1), a
stream's end or reset (RFC 9113 §5.1, §6.4), a window opened (RFC 9113 §6.9), the peer's SETTINGS
applied (RFC 9113 §6.5.3), a PING acknowledged (RFC 9113 §6.7), the peer's GOAWAY (RFC 9113
§6.8), and the connection error that ends a read (RFC 9113 §5.4.1).  Both ends' protocols
dispatch on the class (:mod:`minigrpc.protocol.client_protocol`,
:mod:`minigrpc.protocol.server_protocol`).
"""

from typing import List, Optional, Union

from .hpack_codec import Header


class RequestReceived:
    """A new stream's request header block (``stream_ended``: END_STREAM on it)."""

    __slots__ = ("headers", "stream_ended", "stream_id")

    def __init__(self, stream_id: int, headers: List[Header], stream_ended: bool) -> None:
        self.stream_id = stream_id
        self.headers = headers
        self.stream_ended = stream_ended


class ResponseReceived:
    """A stream's response header block (``stream_ended``: Trailers-Only, END_STREAM on it)."""

    __slots__ = ("headers", "stream_ended", "stream_id")

    def __init__(self, stream_id: int, headers: List[Header], stream_ended: bool) -> None:
        self.stream_id = stream_id
        self.headers = headers
        self.stream_ended = stream_ended


class TrailersReceived:
    """A stream's trailers (a second header block, with END_STREAM)."""

    __slots__ = ("headers", "stream_id")

    def __init__(self, stream_id: int, headers: List[Header]) -> None:
        self.stream_id = stream_id
        self.headers = headers


class DataReceived:
    """A DATA frame's payload; ``flow_controlled_length`` counts its padding too (RFC 9113 §6.9)."""

    __slots__ = ("data", "flow_controlled_length", "stream_id")

    def __init__(self, stream_id: int, data: bytes, flow_controlled_length: int) -> None:
        self.stream_id = stream_id
        self.data = data
        self.flow_controlled_length = flow_controlled_length


class StreamEnded:
    """The peer ended its side of the stream (END_STREAM)."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


class StreamReset:
    """The stream was reset: by the peer (``remote_reset``), or by us for its stream error."""

    __slots__ = ("error_code", "remote_reset", "stream_id")

    def __init__(self, stream_id: int, error_code: int, remote_reset: bool) -> None:
        self.stream_id = stream_id
        self.error_code = error_code
        self.remote_reset = remote_reset


class WindowUpdated:
    """The peer opened a send window: a stream's, or the connection's (``stream_id`` 0)."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


class SettingsChanged:
    """The peer's SETTINGS were applied (and acknowledged)."""

    __slots__ = ()


class PingAcknowledged:
    """The peer acknowledged one of our PINGs (RFC 9113 §6.7): its opaque data."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class ConnectionTerminated:
    """The peer sent GOAWAY (RFC 9113 §6.8)."""

    __slots__ = ("additional_data", "error_code", "last_stream_id")

    def __init__(self, error_code: int, last_stream_id: int, additional_data: bytes) -> None:
        self.error_code = error_code
        self.last_stream_id = last_stream_id
        self.additional_data = additional_data


class PeerConnectionError:
    """A connection error in what the peer sent (RFC 9113 §5.4.1); GOAWAY is queued, and
    nothing after it was read.  ``flood``: the peer spent the :attr:`HTTP2Connection.allowance`
    of frames that do no work (RFC 9113 §10.5); ``frame_type`` says which (None: empty
    frames)."""

    __slots__ = ("error_code", "flood", "frame_type", "reason")

    def __init__(
        self, error_code: int, reason: str, flood: bool = False, frame_type: Optional[int] = None
    ) -> None:
        self.error_code = error_code
        self.reason = reason
        self.flood = flood
        self.frame_type = frame_type


Event = Union[
    RequestReceived,
    ResponseReceived,
    TrailersReceived,
    DataReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
    SettingsChanged,
    PingAcknowledged,
    ConnectionTerminated,
    PeerConnectionError,
]
