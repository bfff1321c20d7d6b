"""Status codes, the RpcError exception, and every table that maps something else to a status.

A gRPC call ends with exactly one status: a code and an optional message. The code usually
arrives in the ``grpc-status`` trailer, but when a peer or the connection misbehaves the library
must synthesize one.  The tables that say how live here, and only here, so the docs and tests
read them from this module instead of retyping them:

* :data:`HTTP_TO_GRPC`: HTTP ``:status`` to gRPC code, used only when a response has no
  ``grpc-status`` (``doc/http-grpc-status-mapping.md``).
* :data:`RST_STREAM_TO_GRPC`: HTTP/2 RST_STREAM error code to gRPC code, on the client
  (PROTOCOL-HTTP2.md, "Errors"; grpc-go's choices where it is silent, docs/wire-rules.md).

Codes and names follow ``doc/statuscodes.md``; :class:`StatusCode` mirrors grpcio's enum so that
``import minigrpc as grpc`` keeps ``grpc.StatusCode.UNAVAILABLE`` working.
"""

import abc
import enum
import sys
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Optional, Tuple, Union

#: Call metadata as grpcio exposes it: ``(key, value)`` pairs, ``bytes`` values for ``-bin`` keys.
Metadata = Tuple[Tuple[str, Union[str, bytes]], ...]


class StatusCode(enum.Enum):
    """The 17 gRPC status codes (``doc/statuscodes.md``).

    Each value is ``(number, text)`` exactly as in grpcio, so code written for grpcio that looks
    at ``code.value[0]`` keeps working. :attr:`number` and :attr:`go_name` are minigrpc additions.
    """

    OK = (0, "ok")
    CANCELLED = (1, "cancelled")
    UNKNOWN = (2, "unknown")
    INVALID_ARGUMENT = (3, "invalid argument")
    DEADLINE_EXCEEDED = (4, "deadline exceeded")
    NOT_FOUND = (5, "not found")
    ALREADY_EXISTS = (6, "already exists")
    PERMISSION_DENIED = (7, "permission denied")
    RESOURCE_EXHAUSTED = (8, "resource exhausted")
    FAILED_PRECONDITION = (9, "failed precondition")
    ABORTED = (10, "aborted")
    OUT_OF_RANGE = (11, "out of range")
    UNIMPLEMENTED = (12, "unimplemented")
    INTERNAL = (13, "internal")
    UNAVAILABLE = (14, "unavailable")
    DATA_LOSS = (15, "data loss")
    UNAUTHENTICATED = (16, "unauthenticated")

    @property
    def number(self) -> int:
        """The code's integer, as sent in ``grpc-status``."""
        return int(self.value[0])

    @property
    def go_name(self) -> str:
        """The name grpc-go prints (``codes.Code.String()``), e.g. ``DeadlineExceeded``.

        The CNI plugin's messages must read exactly like the Go plugin's, which embed it.
        """
        return _GO_NAMES[self]

    @classmethod
    def from_number(cls, number: int) -> "Optional[StatusCode]":
        """The code for a wire integer, or None when it is outside 0..16."""
        return _BY_NUMBER.get(number)


_BY_NUMBER = {code.number: code for code in StatusCode}


def code_for_context(context: Any, code: StatusCode) -> Any:
    """``code`` as the library serving ``context`` spells it.

    minigrpc's servers take grpcio's StatusCode members as well as their own, but grpcio's take
    only grpcio's (another enum's member ends the call UNKNOWN).  The servicers minigrpc ships
    (health, reflection) also run on grpcio's servers, so they answer in the enum of the
    library that defined the context's class: ``grpc``'s when that is grpcio.
    """
    library = sys.modules.get(type(context).__module__.partition(".")[0])
    status_code = getattr(library, "StatusCode", None)
    if status_code is None or status_code is StatusCode:
        return code
    return status_code[code.name]

# grpc-go's ``codes.Code.String()`` names. Written out rather than derived: "OK" and "Canceled"
# do not follow the CamelCase of the enum names.
_GO_NAMES = {
    StatusCode.OK: "OK",
    StatusCode.CANCELLED: "Canceled",
    StatusCode.UNKNOWN: "Unknown",
    StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
    StatusCode.NOT_FOUND: "NotFound",
    StatusCode.ALREADY_EXISTS: "AlreadyExists",
    StatusCode.PERMISSION_DENIED: "PermissionDenied",
    StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
    StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    StatusCode.ABORTED: "Aborted",
    StatusCode.OUT_OF_RANGE: "OutOfRange",
    StatusCode.UNIMPLEMENTED: "Unimplemented",
    StatusCode.INTERNAL: "Internal",
    StatusCode.UNAVAILABLE: "Unavailable",
    StatusCode.DATA_LOSS: "DataLoss",
    StatusCode.UNAUTHENTICATED: "Unauthenticated",
}


def go_code_text(code: StatusCode, number: Optional[int] = None) -> str:
    """Render a code the way grpc-go's ``codes.Code.String()`` does.

    A wire number outside 0..16 (which we pass through as UNKNOWN) prints as ``Code(<n>)``.
    """
    if number is not None and number != code.number:
        return f"Code({number})"
    return code.go_name


class Status(abc.ABC):
    """grpcio's ``grpc.Status``: what ``ServicerContext.abort_with_status`` takes.

    An abstract class with three attributes, ``code``, ``details`` and ``trailing_metadata``,
    exactly as in grpcio, so that libraries written for grpcio can subclass it; grpcio-status
    does (``rpc_status.to_status`` returns a namedtuple that is also a ``grpc.Status``).
    """

    code: "StatusCode"
    details: str
    trailing_metadata: Metadata


class CallStatus(NamedTuple):
    """The final outcome of one call: what the trailers (or the library) said.

    ``number`` keeps the wire integer when it was outside the enum (``doc/statuscodes.md``: a
    value outside 0-16 is reported as UNKNOWN, but the original is worth keeping for messages).
    ``details_bin`` is the raw ``grpc-status-details-bin`` trailer (a serialized
    ``google.rpc.Status``), left undecoded so that minigrpc needs no extra protos.
    A NamedTuple rather than a dataclass: importing ``dataclasses`` (and ``inspect``) costs the
    one-shot CNI plugin several milliseconds.
    """

    code: StatusCode
    details: str = ""
    initial_metadata: Metadata = ()
    trailing_metadata: Metadata = ()
    number: Optional[int] = None
    details_bin: Optional[bytes] = None

    def __str__(self) -> str:
        return f"rpc error: code = {go_code_text(self.code, self.number)} desc = {self.details}"


#: The details both sides report for a call whose deadline passed, in grpcio's words.
DEADLINE_EXCEEDED_DETAILS = "Deadline Exceeded"


class RpcError(Exception):
    """Raised for every call that does not end with OK: grpcio's ``grpc.RpcError``.

    As in grpcio, the base class carries nothing and takes any arguments, so code may raise
    and subclass it.  What minigrpc raises is also the call that failed: a finished unary call
    (``minigrpc.calls.InactiveRpcError``) or the streaming call itself, so
    ``except grpc.RpcError as e: e.code()`` works unchanged.  Their ``str(e)`` reads like
    grpc-go's ``status.Error`` (``rpc error: code = Unavailable desc = ...``), which is what the
    CNI plugin must print.  The accessors below are declared for type checkers only, as the
    type stubs of grpcio declare them: an ``RpcError`` constructed by hand has none.
    """

    if TYPE_CHECKING:  # pragma: no cover - what every RpcError minigrpc raises offers

        def code(self) -> StatusCode: ...

        def details(self) -> str: ...

        def initial_metadata(self) -> Metadata: ...

        def trailing_metadata(self) -> Metadata: ...

        def debug_error_string(self) -> str: ...


def parse_grpc_status(value: Union[bytes, str, None]) -> Tuple[StatusCode, Optional[int]]:
    """Decode a ``grpc-status`` header value (PROTOCOL-HTTP2.md, "Responses").

    Returns the code and the wire integer. A missing or unparsable value is UNKNOWN
    (PROTOCOL-HTTP2.md, Responses); a number outside 0..16 is UNKNOWN with the number kept.
    """
    if value is None:
        return StatusCode.UNKNOWN, None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not text or not all("0" <= char <= "9" for char in text):  # ASCII digits only
        return StatusCode.UNKNOWN, None
    number = int(text)
    code = StatusCode.from_number(number)
    if code is None:
        return StatusCode.UNKNOWN, number
    return code, None


#: HTTP ``:status`` to gRPC code, for responses without ``grpc-status``
#: (``doc/http-grpc-status-mapping.md``).
#: Anything else, 200 included, is UNKNOWN.
HTTP_TO_GRPC: Mapping[int, StatusCode] = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    431: StatusCode.INTERNAL,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}


def status_from_http(http_status: int) -> StatusCode:
    """Map an HTTP status with :data:`HTTP_TO_GRPC`; everything unlisted is UNKNOWN."""
    return HTTP_TO_GRPC.get(http_status, StatusCode.UNKNOWN)


#: HTTP/2 error codes (RFC 9113 §7) that minigrpc sends or acts on, in RST_STREAM and GOAWAY.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

#: HTTP/2 RST_STREAM error code (RFC 9113 §7) to gRPC code on the client, as grpc-go maps it
#: (PROTOCOL-HTTP2.md, "Errors"; docs/wire-rules.md, "RST_STREAM codes on the client"). Unlisted
#: codes are INTERNAL.
RST_STREAM_TO_GRPC: Mapping[int, StatusCode] = {
    0x0: StatusCode.INTERNAL,  # NO_ERROR: normal only after trailers, which then decide
    0x1: StatusCode.INTERNAL,  # PROTOCOL_ERROR
    0x2: StatusCode.INTERNAL,  # INTERNAL_ERROR
    0x3: StatusCode.RESOURCE_EXHAUSTED,  # FLOW_CONTROL_ERROR (spec: INTERNAL; grpc-go differs)
    0x4: StatusCode.INTERNAL,  # SETTINGS_TIMEOUT
    0x5: StatusCode.INTERNAL,  # STREAM_CLOSED
    0x6: StatusCode.INTERNAL,  # FRAME_SIZE_ERROR
    0x7: StatusCode.UNAVAILABLE,  # REFUSED_STREAM: nothing was processed, safe to retry
    0x8: StatusCode.CANCELLED,  # CANCEL (DEADLINE_EXCEEDED once past the deadline)
    0x9: StatusCode.INTERNAL,  # COMPRESSION_ERROR
    0xA: StatusCode.INTERNAL,  # CONNECT_ERROR
    0xB: StatusCode.RESOURCE_EXHAUSTED,  # ENHANCE_YOUR_CALM
    0xC: StatusCode.PERMISSION_DENIED,  # INADEQUATE_SECURITY
    0xD: StatusCode.INTERNAL,  # HTTP_1_1_REQUIRED
}


def http2_error_name(error_code: int) -> str:
    """``CANCEL`` for 8, ``0x2a`` for a code RFC 9113 §7 does not define (h2's names).

    h2 is imported here, not at the top: :mod:`minigrpc.status` stays free of h2 for what
    imports it without making calls (the frame tracer, the CNI plugin's error paths).
    """
    import h2.errors

    try:
        return h2.errors.ErrorCodes(error_code).name
    except ValueError:
        return f"{error_code:#x}"


def status_from_rst_stream(error_code: int, past_deadline: bool = False) -> StatusCode:
    """Map a RST_STREAM the server sent with :data:`RST_STREAM_TO_GRPC`.

    A CANCEL that arrives once the call's deadline has passed is DEADLINE_EXCEEDED
    (PROTOCOL-HTTP2.md, "Errors" and "Client Cancellation").
    """
    if error_code == 0x8 and past_deadline:
        return StatusCode.DEADLINE_EXCEEDED
    return RST_STREAM_TO_GRPC.get(error_code, StatusCode.INTERNAL)


def rst_stream_details(error_code: int) -> str:
    """The details text for a call ended by RST_STREAM, in grpc-go's words."""
    return f"stream terminated by RST_STREAM with error code: {http2_error_name(error_code)}"
