"""Failures that end one call and already know their gRPC status code.

Both sides meet the same failures while they decode what the peer sent: a malformed
Length-Prefixed-Message, a message over the receive limit, a compressed message they cannot
inflate, a second message where the method allows one.  Each failure is an exception class that
carries its status code (``doc/statuscodes.md``), so a protocol layer catches :class:`CallError`
once and ends the call with ``exc.code_number`` (or the enum member, ``exc.code``) and
``str(exc)``, instead of mapping each exception by hand.  The texts are grpc-go's, so logs of both
implementations read alike.
"""

from typing import TYPE_CHECKING, Sequence, Tuple

from .codes import Code
from .status import enum_member

if TYPE_CHECKING:
    from .enums import StatusCode

class CallError(Exception):
    """A failure that ends one call with :attr:`code_number` and ``str(self)`` as its details."""

    #: The status code (:class:`minigrpc.protocol.codes.Code`).
    code_number = Code.INTERNAL
    #: Whole messages decoded from the same bytes before the failure: they are delivered, then
    #: the call ends (a reader gets every message before the one over the limit, as in grpcio).
    completed: Sequence[Tuple[bool, bytes]] = ()

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

