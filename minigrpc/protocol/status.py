"""How a call's status travels: CallStatus, RpcError, grpcio's Status, the grpc-status value.

A gRPC call ends with exactly one status, a code and an optional message
(``doc/statuscodes.md``).  The codes and every table that maps something else to one are in
:mod:`minigrpc.protocol.codes`; this module holds what carries a status: :class:`CallStatus` (what
a call ended with, as numbers), :class:`RpcError` (grpcio's exception), :class:`Status`
(grpcio's abstract status) and the parsing of a ``grpc-status`` value.

Everything here holds a code as its number.  grpcio's enum member
(:class:`minigrpc.protocol.enums.StatusCode`) is made only when asked (``CallStatus.code``,
:func:`enum_member`), so the one-shot CNI plugin's path never loads :mod:`enum`.
"""

import abc
from typing import TYPE_CHECKING, NamedTuple, Optional, Tuple, Union

from .codes import CODE_NAMES, Code, go_code_text

if TYPE_CHECKING:
    from .enums import StatusCode

#: Call metadata as grpcio exposes it: ``(key, value)`` pairs, ``bytes`` values for ``-bin`` keys.
Metadata = Tuple[Tuple[str, Union[str, bytes]], ...]


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


def enum_member(code: int) -> "StatusCode":
    """grpcio's enum member for code number ``code`` (0..16); loads the enum on first use."""
    from .enums import StatusCode

    return StatusCode.from_number(code) or StatusCode.UNKNOWN
