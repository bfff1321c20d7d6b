"""How a call's status travels: CallStatus, RpcError, grpcio's Status, the grpc-status value.

A gRPC call ends with exactly one status, a code and an optional message
(``doc/statuscodes.md``).  The codes and every table that maps something else to one are in
:mod:`minigrpc.protocol.codes`; this module holds what carries a status: :class:`CallStatus` (what
a call ended with, as numbers), :class:`RpcError` (grpcio's exception), :class:`Status`
(grpcio's abstract status) and the parsing of a ``grpc-status`` value.

Everything here holds a code as its number.  grpcio's enum member
(:class:`minigrpc.protocol.enums.StatusCode`) is made only when asked (``CallStatus.code``,
:func:`enum_member`), so the one-shot CNI plugin's path never loads :mod:`enum`.

The failures that end one call and already know their status code are here too
(:class:`CallError` and its subclasses).  Both sides meet the same failures while they decode
what the peer sent: a malformed Length-Prefixed-Message, a message over the receive limit, a
compressed message they cannot inflate, a second message where the method allows one.  Each is
an exception class that carries its code, so a protocol layer catches :class:`CallError` once
and ends the call with ``exc.code_number`` and ``str(exc)``.  The texts are grpc-go's, so logs
of both implementations read alike.
"""

import abc

from .codes import CODE_NAMES, Code, go_code_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple, Union
    from typing import NamedTuple as Record

    from .enums import StatusCode
else:
    from .._records import Record

if TYPE_CHECKING:  # pragma: no cover
    #: Call metadata as grpcio exposes it: ``(key, value)`` pairs, ``bytes`` values for
    #: ``-bin`` keys.
    Metadata = Tuple[Tuple[str, Union[str, bytes]], ...]
else:  # an alias at run time: only a name for other modules' annotations
    Metadata = tuple


class Status(abc.ABC):
    """grpcio's ``grpc.Status``: what ``ServicerContext.abort_with_status`` takes.

    An abstract class with three attributes, ``code``, ``details`` and ``trailing_metadata``,
    exactly as in grpcio, so that libraries written for grpcio can subclass it; grpcio-status
    does (``rpc_status.to_status`` returns a namedtuple that is also a ``grpc.Status``).
    """

    code: "StatusCode"
    details: str
    trailing_metadata: Metadata


class CallStatus(Record):
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
    number: "Optional[int]" = None
    details_bin: "Optional[bytes]" = None

    @property
    def code(self) -> "StatusCode":
        """The code as grpcio's enum member (:class:`minigrpc.protocol.enums.StatusCode`)."""
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
    (``minigrpc.blocking.call.InactiveRpcError``) or the streaming call itself, so
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


def parse_grpc_status(value: "Union[bytes, str, None]") -> "Tuple[int, Optional[int]]":
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


#: grpcio's enum members by number, filled on the first :func:`enum_member` (every call's status
#: asks for one: an import statement per call would cost more than the lookup).
_ENUM_MEMBERS: "List[StatusCode]" = []


def enum_member(code: int) -> "StatusCode":
    """grpcio's enum member for code number ``code`` (0..16); loads the enum on first use."""
    members = _ENUM_MEMBERS
    if not members:
        from .enums import StatusCode

        members.extend(StatusCode)
    return members[code] if 0 <= code < len(members) else members[Code.UNKNOWN]


class CallError(Exception):
    """A failure that ends one call with :attr:`code_number` and ``str(self)`` as its details."""

    #: The status code (:class:`minigrpc.protocol.codes.Code`).
    code_number = Code.INTERNAL
    #: Whole messages decoded from the same bytes before the failure: they are delivered, then
    #: the call ends (a reader gets every message before the one over the limit, as in grpcio).
    completed: "Sequence[Tuple[bool, bytes]]" = ()

    @property
    def code(self) -> "StatusCode":
        """The status code as grpcio's enum member."""
        return enum_member(self.code_number)


class ProtocolViolation(CallError):
    """The peer broke a gRPC framing rule, e.g. a flag byte that is neither 0 nor 1: INTERNAL."""


class CardinalityViolation(CallError):
    """More or fewer messages than the method's kind allows (PROTOCOL-HTTP2.md): INTERNAL.

    ``doc/statuscodes.md`` lists UNIMPLEMENTED for this, but grpc-go answers INTERNAL, and so do
    grpcio and minigrpc.
    """


class MessageTooLarge(CallError):
    """A message exceeds the configured limit: RESOURCE_EXHAUSTED."""

    code_number = Code.RESOURCE_EXHAUSTED

    def __init__(self, length: int, limit: int, sending: bool = False) -> None:
        self.length = length
        self.limit = limit
        self.sending = sending
        if sending:
            text = f"grpc: trying to send message larger than max ({length} vs. {limit})"
        else:
            text = f"grpc: received message larger than max ({length} vs. {limit})"
        super().__init__(text)


class UnsupportedEncoding(CallError, ValueError):
    """A ``grpc-encoding`` this side cannot decode (doc/compression.md).

    On a client that is INTERNAL.  A server never gets this far: it rejects the request's
    headers with UNIMPLEMENTED and its own ``grpc-accept-encoding`` instead.
    """


class DecompressionError(CallError, ValueError):
    """A compressed message that does not inflate: INTERNAL (doc/compression.md)."""


class FutureTimeoutError(Exception):
    """``result()``/``exception()`` timed out (grpcio's ``grpc.FutureTimeoutError``).

    Not a call failure: the call may still succeed; only the wait ended.
    """


class FutureCancelledError(Exception):
    """``result()`` of a cancelled future (grpcio's ``grpc.FutureCancelledError``)."""
