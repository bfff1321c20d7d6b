"""Status codes, the RpcError exception, and every table that maps something else to a status.

A gRPC call ends with exactly one status: a code and an optional message. The code usually
arrives in the ``grpc-status`` trailer, but when a peer or the connection misbehaves the library
must synthesize one.  The tables that say how live here, and only here, so the docs and tests
read them from this module instead of retyping them:

* :class:`Code`: the 17 codes' names and numbers (``doc/statuscodes.md``), with their texts
  (:data:`CODE_TEXTS`, grpcio's) and grpc-go's names (:data:`GO_NAMES`).
* :data:`HTTP_TO_GRPC`: HTTP ``:status`` to gRPC code, used only when a response has no
  ``grpc-status`` (``doc/http-grpc-status-mapping.md``).
* :data:`RST_STREAM_TO_GRPC`: HTTP/2 RST_STREAM error code to gRPC code, on the client
  (PROTOCOL-HTTP2.md, "Errors"; grpc-go's choices where it is silent, docs/wire-rules.md).

Everything here holds a code as its number, the integer ``grpc-status`` carries.  grpcio's
enum, :class:`minigrpc.enums.StatusCode` (``grpc.StatusCode``), is built from these
tables in a module of its own, because the :mod:`enum` module and the classes it makes cost the
one-shot CNI plugin about 1.5 ms of a cold start (3 ms on CPython 3.6, where enum imports
collections and functools): the plugin's path (headers, client_outcome, oneshot_protocol) never
loads it, and a :class:`CallStatus` or :class:`~minigrpc.errors.CallError` gives the enum member
(``.code``) only when asked.  ``minigrpc.status.StatusCode`` still works: it loads the enum then.
"""

import abc
from typing import TYPE_CHECKING, Any, List, Mapping, NamedTuple, Optional, Tuple, Union

if TYPE_CHECKING:
    from .enums import StatusCode

#: Call metadata as grpcio exposes it: ``(key, value)`` pairs, ``bytes`` values for ``-bin`` keys.
Metadata = Tuple[Tuple[str, Union[str, bytes]], ...]


class Code:
    """The 17 gRPC status codes (``doc/statuscodes.md``): each name and its number, as sent in
    ``grpc-status``.  Plain integers, so that code that only moves statuses around (the one-shot
    client above all) needs no enum; :class:`minigrpc.enums.StatusCode` is made from this
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
CODE_NAMES: Tuple[str, ...] = tuple(
    name for _, name in sorted((number, name) for name, number in vars(Code).items()
                               if name.isupper()))

#: grpcio's text of each code (the second item of ``StatusCode.X.value``), by number: the name in
#: lower case with spaces, for every code.
CODE_TEXTS: Tuple[str, ...] = tuple(name.lower().replace("_", " ") for name in CODE_NAMES)

#: grpc-go's ``codes.Code.String()`` names, by number. Written out rather than derived: "OK" and
#: "Canceled" do not follow the CamelCase of the names.
GO_NAMES: Tuple[str, ...] = (
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


def go_code_text(code: int, number: Optional[int] = None) -> str:
    """Render code number ``code`` the way grpc-go's ``codes.Code.String()`` does.

    A wire number outside 0..16 (which we pass through as UNKNOWN, keeping it in ``number``)
    prints as ``Code(<n>)``.
    """
    if number is not None and number != code:
        return f"Code({number})"
    return GO_NAMES[code]


#: The enum's members by number, filled in by :mod:`minigrpc.enums` when it is imported.
ENUM_MEMBERS: "List[StatusCode]" = []


def enum_member(code: int) -> "StatusCode":
    """grpcio's enum member for code number ``code`` (0..16); loads the enum on first use."""
    if not ENUM_MEMBERS:
        from .enums import StatusCode  # noqa: F401 - its import fills ENUM_MEMBERS
    return ENUM_MEMBERS[code]


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

    ``code_number`` is the code (:class:`Code`), ``code`` the same as grpcio's enum member.
    ``number`` keeps the wire integer when it was outside the enum (``doc/statuscodes.md``: a
    value outside 0-16 is reported as UNKNOWN, but the original is worth keeping for messages).
    ``details_bin`` is the raw ``grpc-status-details-bin`` trailer (a serialized
    ``google.rpc.Status``), left undecoded so that minigrpc needs no extra protos.
    A NamedTuple rather than a dataclass: importing ``dataclasses`` (and ``inspect``) costs the
    one-shot CNI plugin several milliseconds.
    """

    code_number: int
    details: str = ""
    initial_metadata: Metadata = ()
    trailing_metadata: Metadata = ()
    number: Optional[int] = None
    details_bin: Optional[bytes] = None

    @property
    def code(self) -> "StatusCode":
        """The code as grpcio's enum member (:class:`minigrpc.enums.StatusCode`)."""
        return enum_member(self.code_number)

    @property
    def code_name(self) -> str:
        """The code's name, ``UNAVAILABLE``, without the enum."""
        return CODE_NAMES[self.code_number]

    def __str__(self) -> str:
        return (f"rpc error: code = {go_code_text(self.code_number, self.number)}"
                f" desc = {self.details}")


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


def parse_grpc_status(value: Union[bytes, str, None]) -> Tuple[int, Optional[int]]:
    """Decode a ``grpc-status`` header value (PROTOCOL-HTTP2.md, "Responses").

    Returns the code (:class:`Code`) and the wire integer. A missing or unparsable value is
    UNKNOWN (PROTOCOL-HTTP2.md, Responses); a number outside 0..16 is UNKNOWN with the number
    kept.
    """
    if value is None:
        return Code.UNKNOWN, None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not text or not all("0" <= char <= "9" for char in text):  # ASCII digits only
        return Code.UNKNOWN, None
    number = int(text)
    if number >= len(CODE_NAMES):
        return Code.UNKNOWN, number
    return number, None


#: HTTP ``:status`` to gRPC code, for responses without ``grpc-status``
#: (``doc/http-grpc-status-mapping.md``).
#: Anything else, 200 included, is UNKNOWN.
HTTP_TO_GRPC: Mapping[int, int] = {
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

#: HTTP/2 RST_STREAM error code (RFC 9113 §7) to gRPC code on the client, as grpc-go maps it
#: (PROTOCOL-HTTP2.md, "Errors"; docs/wire-rules.md, "RST_STREAM codes on the client"). Unlisted
#: codes are INTERNAL.
RST_STREAM_TO_GRPC: Mapping[int, int] = {
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


def http2_error_name(error_code: int) -> str:
    """``CANCEL`` for 8 (:data:`HTTP2_ERROR_NAMES`), ``0x2a`` for a code RFC 9113 §7 does not
    define."""
    name = HTTP2_ERROR_NAMES.get(error_code)
    return name if name is not None else f"{error_code:#x}"


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


# Hidden from type checkers (the ``TYPE_CHECKING`` import above declares the name): a module-level
# ``__getattr__`` would make every misspelt ``status.<name>`` type-check as Any.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """``minigrpc.status.StatusCode``, where the enum lived before :mod:`minigrpc.enums`
        (PEP 562: Python 3.7 and newer, what the library needs; the plugin never asks)."""
        if name == "StatusCode":
            from .enums import StatusCode

            return StatusCode
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
