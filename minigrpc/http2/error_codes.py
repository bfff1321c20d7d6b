"""HTTP/2's error codes (RFC 9113 §7), their names, and the errors that end a connection.

An HTTP/2 endpoint says why it ends a stream or a connection with a 32-bit error code, in
RST_STREAM (RFC 9113 §6.4) or GOAWAY (RFC 9113 §6.8).  The codes are named here once, for both
ends, the frame codec and the trace; gRPC's reading of them (which status a client's call gets
for a RST_STREAM) is gRPC's and lives in :mod:`minigrpc.protocol.codes`.

:class:`FrameError` and its subclasses are connection errors (RFC 9113 §5.4.1) that a frame's
header or layout shows; each carries the code its GOAWAY sends.
"""

from typing import Mapping, Optional

#: HTTP/2 error codes (RFC 9113 §7) that minigrpc sends or acts on, in RST_STREAM and GOAWAY.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

#: Every HTTP/2 error code RFC 9113 §7 defines, by its name there (the names grpc-go and h2
#: print); :func:`http2_error_name` reads them.
HTTP2_ERROR_NAMES: Mapping[int, str] = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}


def http2_error_name(error_code: int) -> str:
    """``CANCEL`` for 8 (:data:`HTTP2_ERROR_NAMES`), ``0x2a`` for a code RFC 9113 §7 does not
    define."""
    name = HTTP2_ERROR_NAMES.get(error_code)
    return name if name is not None else f"{error_code:#x}"


class FrameError(ValueError):
    """A connection error that a frame's header or layout shows (RFC 9113 §5.4.1).

    ``error_code`` is the GOAWAY code that tells the peer why the connection ends.
    """

    error_code = PROTOCOL_ERROR

    def __init__(self, message: str, error_code: Optional[int] = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class PrefaceError(FrameError):
    """The first bytes from a client are not the HTTP/2 connection preface (RFC 9113 §3.4)."""


class ServerPrefaceError(FrameError):
    """The server's first frame is not SETTINGS (its connection preface, RFC 9113 §3.4).

    A peer that is not HTTP/2 at all (``HTTP/1.1 400 ...`` reads as a 4.7 MB frame header) is
    caught here on its first 9 bytes, instead of leaving a call waiting for a body that never
    comes.
    """


class FrameSizeError(FrameError):
    """A frame header announced more than the MAX_FRAME_SIZE we advertised (RFC 9113 §4.2).

    Raised as soon as the 9-byte header is in, before a byte of the body is buffered: checked
    only once the whole body had arrived, a peer announcing 16 MiB would make us hold up to
    16 MiB and keep the connection open while waiting for it. It is a connection error,
    answered with GOAWAY(FRAME_SIZE_ERROR) (RFC 9113 §4.2, §5.4.1).
    """

    error_code = FRAME_SIZE_ERROR

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame too large ({length} > {limit} bytes, FRAME_SIZE_ERROR)")
        self.length = length
        self.limit = limit


class HeaderBlockTooLarge(FrameError):
    """HEADERS/PUSH_PROMISE plus CONTINUATION frames grew past the limit before END_HEADERS.

    Failing on the encoded size as the block grows, before it is decoded, stops a CONTINUATION
    flood (CVE-2024-27316) without buffering it.  The answer is GOAWAY(ENHANCE_YOUR_CALM)
    (RFC 9113 §10.5).
    """

    error_code = ENHANCE_YOUR_CALM
