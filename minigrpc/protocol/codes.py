"""gRPC's status codes as numbers, and every table that maps something else to one.

A gRPC call ends with exactly one status: a code and an optional message.  The code usually
arrives in the ``grpc-status`` trailer, but when a peer or the connection misbehaves the library
must synthesize one.  The tables that say how live here, and only here, so the docs and tests
read them from this module instead of retyping them:

* :class:`Code`: the 17 codes' names and numbers (``doc/statuscodes.md``), with their texts
  (:data:`CODE_TEXTS`, grpcio's) and grpc-go's names (:data:`GO_NAMES`).
* :data:`HTTP_TO_GRPC`: HTTP ``:status`` to gRPC code, used only when a response has no
  ``grpc-status`` (``doc/http-grpc-status-mapping.md``).
* :data:`RST_STREAM_TO_GRPC`: HTTP/2 RST_STREAM error code to gRPC code, on the client
  (PROTOCOL-HTTP2.md, "Errors"; grpc-go's choices where it is silent, docs/wire-rules.md).
* :data:`COMPRESSIONS`: grpcio's compression numbers and the ``grpc-encoding`` each stands for.

Everything here is a plain number or string.  grpcio's enums (:mod:`minigrpc.protocol.enums`)
are made from these tables in a module of their own, because the :mod:`enum` module and the
classes it makes cost the one-shot CNI plugin about 1.5 ms of a cold start (3 ms on CPython 3.6,
where enum imports collections and functools): the plugin's path never loads them.
"""

from ..http2.frames import CANCEL, http2_error_name

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Mapping, Optional, Tuple


class Code:
    """The 17 gRPC status codes (``doc/statuscodes.md``): each name and its number, as sent in
    ``grpc-status``.  Plain integers, so that code that only moves statuses around (the one-shot
    client above all) needs no enum; :class:`minigrpc.protocol.enums.StatusCode` is made from this
    class, member for member."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


#: Each code's name, by number: ``CODE_NAMES[14] == "UNAVAILABLE"``.
CODE_NAMES: "Tuple[str, ...]" = tuple(
    name for _, name in sorted((number, name) for name, number in vars(Code).items()
                               if name.isupper()))

#: grpcio's text of each code (the second item of ``StatusCode.X.value``), by number: the name in
#: lower case with spaces, for every code.
CODE_TEXTS: "Tuple[str, ...]" = tuple(name.lower().replace("_", " ") for name in CODE_NAMES)

#: grpc-go's ``codes.Code.String()`` names, by number. Written out rather than derived: "OK" and
#: "Canceled" do not follow the CamelCase of the names.
GO_NAMES: "Tuple[str, ...]" = (
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
)


def go_code_text(code: int, number: "Optional[int]" = None) -> str:
    """Render code number ``code`` the way grpc-go's ``codes.Code.String()`` does.

    A wire number outside 0..16 (which we pass through as UNKNOWN, keeping it in ``number``)
    prints as ``Code(<n>)``.
    """
    if number is not None and number != code:
        return f"Code({number})"
    return GO_NAMES[code]



#: HTTP ``:status`` to gRPC code, for responses without ``grpc-status``
#: (``doc/http-grpc-status-mapping.md``).
#: Anything else, 200 included, is UNKNOWN.
HTTP_TO_GRPC: "Mapping[int, int]" = {
    400: Code.INTERNAL,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.UNIMPLEMENTED,
    429: Code.UNAVAILABLE,
    431: Code.INTERNAL,
    502: Code.UNAVAILABLE,
    503: Code.UNAVAILABLE,
    504: Code.UNAVAILABLE,
}


def status_from_http(http_status: int) -> int:
    """Map an HTTP status with :data:`HTTP_TO_GRPC`; everything unlisted is UNKNOWN."""
    return HTTP_TO_GRPC.get(http_status, Code.UNKNOWN)


#: HTTP/2 RST_STREAM error code (RFC 9113 §7) to gRPC code on the client, as grpc-go maps it
#: (PROTOCOL-HTTP2.md, "Errors"; docs/wire-rules.md, "RST_STREAM codes on the client"). Unlisted
#: codes are INTERNAL.
RST_STREAM_TO_GRPC: "Mapping[int, int]" = {
    0x0: Code.INTERNAL,  # NO_ERROR: normal only after trailers, which then decide
    0x1: Code.INTERNAL,  # PROTOCOL_ERROR
    0x2: Code.INTERNAL,  # INTERNAL_ERROR
    0x3: Code.RESOURCE_EXHAUSTED,  # FLOW_CONTROL_ERROR (spec: INTERNAL; grpc-go differs)
    0x4: Code.INTERNAL,  # SETTINGS_TIMEOUT
    0x5: Code.INTERNAL,  # STREAM_CLOSED
    0x6: Code.INTERNAL,  # FRAME_SIZE_ERROR
    0x7: Code.UNAVAILABLE,  # REFUSED_STREAM: nothing was processed, safe to retry
    0x8: Code.CANCELLED,  # CANCEL (DEADLINE_EXCEEDED once past the deadline)
    0x9: Code.INTERNAL,  # COMPRESSION_ERROR
    0xA: Code.INTERNAL,  # CONNECT_ERROR
    0xB: Code.RESOURCE_EXHAUSTED,  # ENHANCE_YOUR_CALM
    0xC: Code.PERMISSION_DENIED,  # INADEQUATE_SECURITY
    0xD: Code.INTERNAL,  # HTTP_1_1_REQUIRED
}


def status_from_rst_stream(error_code: int, past_deadline: bool = False) -> int:
    """Map a RST_STREAM the server sent with :data:`RST_STREAM_TO_GRPC`.

    A CANCEL that arrives once the call's deadline has passed is DEADLINE_EXCEEDED
    (PROTOCOL-HTTP2.md, "Errors" and "Client Cancellation").
    """
    if error_code == CANCEL and past_deadline:
        return Code.DEADLINE_EXCEEDED
    return RST_STREAM_TO_GRPC.get(error_code, Code.INTERNAL)


def rst_stream_details(error_code: int) -> str:
    """The details text for a call ended by RST_STREAM, in grpc-go's words."""
    return f"stream terminated by RST_STREAM with error code: {http2_error_name(error_code)}"



#: grpcio's ``grpc.Compression``, by value: each member's name and the ``grpc-encoding`` it stands
#: for.  :class:`minigrpc.protocol.enums.Compression` is made from it; everything below the grpcio
#: API holds a compression as its number.
COMPRESSIONS: "Tuple[Tuple[str, Optional[str]], ...]" = (
    ("NoCompression", None),
    ("Deflate", "deflate"),
    ("Gzip", "gzip"),
)
