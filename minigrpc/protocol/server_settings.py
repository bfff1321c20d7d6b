"""A server connection's limits and sizes, as its options set them.

:class:`ServerSettings` is what :class:`minigrpc.protocol.server_protocol.ServerGrpcConnection` is
built with; :mod:`minigrpc.driver.server_options` makes one from ``grpc.server()``'s options, once
per server. The values are checked here, so a connection never starts with limits HTTP/2 forbids.
"""

from typing import FrozenSet, Optional

from ..http2 import streams
from . import wire

__all__ = ["ServerSettings"]

#: The largest flow-control window HTTP/2 allows (RFC 9113 §6.9.1).
_MAX_WINDOW = 2**31 - 1


class ServerSettings:
    """Per-connection limits and sizes; :mod:`minigrpc.driver.server_options` builds it from the
    options.

    Defaults follow grpcio/grpc-go where they have one (docs/wire-rules.md): a 4 MiB receive limit,
    no send limit, 100 concurrent streams, a 16 KiB request header list (what grpcio advertises),
    4 MiB stream windows and 1 MiB frames.
    """

    __slots__ = (
        "connection_window",
        "enabled_encodings",
        "initial_window_size",
        "max_concurrent_streams",
        "max_frame_size",
        "max_header_list_size",
        "max_receive_message_length",
        "max_send_message_length",
    )

    def __init__(
        self,
        *,
        max_receive_message_length: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        max_send_message_length: Optional[int] = None,
        max_concurrent_streams: int = 100,
        max_header_list_size: int = streams.CALL_MAX_HEADER_LIST_SIZE,
        initial_window_size: int = streams.DEFAULT_STREAM_WINDOW,
        connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
        max_frame_size: int = streams.DEFAULT_MAX_FRAME_SIZE,
        enabled_encodings: FrozenSet[str] = frozenset(wire.SUPPORTED_ENCODINGS),
    ) -> None:
        if max_concurrent_streams < 1:
            raise ValueError("max_concurrent_streams must be at least 1")
        if not 16384 <= max_frame_size <= 2**24 - 1:
            raise ValueError("max_frame_size must be between 16384 and 16777215 (RFC 9113 §6.5.2)")
        if not 65535 <= initial_window_size <= _MAX_WINDOW:
            raise ValueError("initial window size must be between 65535 and 2**31-1")
        if not 65535 <= connection_window <= _MAX_WINDOW:
            raise ValueError("connection window must be between 65535 and 2**31-1")
        if max_header_list_size < 1024:
            raise ValueError("max_header_list_size must be at least 1024")
        self.max_receive_message_length = max_receive_message_length
        self.max_send_message_length = max_send_message_length
        self.max_concurrent_streams = max_concurrent_streams
        self.max_header_list_size = max_header_list_size
        self.initial_window_size = initial_window_size
        self.connection_window = connection_window
        self.max_frame_size = max_frame_size
        #: The encodings requests may use and responses may be compressed with
        #: (``grpc.compression_enabled_algorithms_bitset``); identity is always among them.
        self.enabled_encodings = enabled_encodings | {"identity"}
