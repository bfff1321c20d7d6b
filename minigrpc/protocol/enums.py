"""grpcio's enums, ``grpc.StatusCode`` and ``grpc.Compression``, made from the plain tables below.

:class:`minigrpc.protocol.codes.Code` holds each status code's name and number,
:data:`~minigrpc.protocol.codes.CODE_TEXTS` and :data:`~minigrpc.protocol.codes.GO_NAMES` their
texts, and :data:`minigrpc.protocol.codes.COMPRESSIONS` the compressions; this module turns them
into the enums that grpcio's API hands out and takes (``call.code()``, ``context.abort(code, ...)``,
``compression=grpc.Compression.Gzip``), and nothing else.  It is a module of its own because
:mod:`enum` and the classes it makes are dear to a cold start (about 1.5 ms; 3 ms on CPython 3.6,
where enum imports collections and functools), and the one-shot CNI plugin, which carries
statuses as numbers, never imports it (:mod:`minigrpc.protocol.status`).
"""

import enum
import sys
from typing import Any, Optional, Tuple

from .codes import CODE_NAMES, CODE_TEXTS, COMPRESSIONS, GO_NAMES, Code


def _value(number: int) -> Tuple[int, str]:
    """A member's value, ``(number, text)`` exactly as in grpcio."""
    return number, CODE_TEXTS[number]


class StatusCode(enum.Enum):
    """The 17 gRPC status codes (``doc/statuscodes.md``; :class:`minigrpc.protocol.codes.Code`).

    Each value is ``(number, text)`` exactly as in grpcio, so code written for grpcio that looks
    at ``code.value[0]`` keeps working. :attr:`number` and :attr:`go_name` are minigrpc additions.
    """

    OK = _value(Code.OK)
    CANCELLED = _value(Code.CANCELLED)
    UNKNOWN = _value(Code.UNKNOWN)
    INVALID_ARGUMENT = _value(Code.INVALID_ARGUMENT)
    DEADLINE_EXCEEDED = _value(Code.DEADLINE_EXCEEDED)
    NOT_FOUND = _value(Code.NOT_FOUND)
    ALREADY_EXISTS = _value(Code.ALREADY_EXISTS)
    PERMISSION_DENIED = _value(Code.PERMISSION_DENIED)
    RESOURCE_EXHAUSTED = _value(Code.RESOURCE_EXHAUSTED)
    FAILED_PRECONDITION = _value(Code.FAILED_PRECONDITION)
    ABORTED = _value(Code.ABORTED)
    OUT_OF_RANGE = _value(Code.OUT_OF_RANGE)
    UNIMPLEMENTED = _value(Code.UNIMPLEMENTED)
    INTERNAL = _value(Code.INTERNAL)
    UNAVAILABLE = _value(Code.UNAVAILABLE)
    DATA_LOSS = _value(Code.DATA_LOSS)
    UNAUTHENTICATED = _value(Code.UNAUTHENTICATED)

    @property
    def number(self) -> int:
        """The code's integer, as sent in ``grpc-status``."""
        return int(self.value[0])

    @property
    def go_name(self) -> str:
        """The name grpc-go prints (``codes.Code.String()``), e.g. ``DeadlineExceeded``.

        The CNI plugin's messages must read exactly like the Go plugin's, which embed it.
        """
        return GO_NAMES[self.number]

    @classmethod
    def from_number(cls, number: int) -> "Optional[StatusCode]":
        """The code for a wire integer, or None when it is outside 0..16."""
        return _MEMBERS[number] if 0 <= number < len(_MEMBERS) else None


if [code.name for code in StatusCode] != list(CODE_NAMES):  # pragma: no cover - a typo above
    raise ImportError("StatusCode's members differ from minigrpc.protocol.codes.Code")
#: The members by number.
_MEMBERS = list(StatusCode)


class Compression(enum.IntEnum):
    """grpcio's ``grpc.Compression`` (same names and values;
    :data:`minigrpc.protocol.codes.COMPRESSIONS`)."""

    NoCompression = 0
    Deflate = 1
    Gzip = 2


if [(member.name, member.value) for member in Compression] != [  # pragma: no cover
        (name, value) for value, (name, _) in enumerate(COMPRESSIONS)]:
    raise ImportError("Compression's members differ from minigrpc.protocol.codes.COMPRESSIONS")


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
