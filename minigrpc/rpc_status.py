"""grpcio-status's ``rpc_status`` on protobuf alone: rich errors as ``google.rpc.Status``.

gRPC's doc/statuscodes.md gives a call a code and a message; the richer error model puts a
``google.rpc.Status`` (the same code and message, plus typed details such as
``google.rpc.BadRequest``) serialized in the ``grpc-status-details-bin`` trailer
(:data:`minigrpc.protocol.wire.STATUS_DETAILS_KEY`, the one place that names it).  On the server::

    context.abort_with_status(rpc_status.to_status(status))

and on the client, from the ``RpcError`` (or any finished call)::

    status = rpc_status.from_call(error)   # None when the trailer is absent

``await rpc_status.aio.from_call(call)`` does the same for a ``grpc.aio`` call.  Both sides work
with grpcio peers: the trailer is the same bytes.  ``google.rpc.Status`` is
googleapis-common-protos' class where that is installed, else minigrpc's copy (see
:mod:`minigrpc._pb`), available here as :data:`status_pb2`.
"""

import collections
import types
from typing import Any, Optional

from . import _pb
from .protocol import wire
from .protocol.enums import StatusCode
from .protocol.status import Status

__all__ = ["aio", "from_call", "status_pb2", "to_status"]

#: The module defining ``google.rpc.Status``.
status_pb2: Any = _pb.messages("google.rpc.status_pb2", "minigrpc._pb.status_pb2")


class _Status(
    collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), Status
):
    """What :func:`to_status` returns: a ``grpc.Status`` (for ``abort_with_status``)."""


def _code(number: int) -> StatusCode:
    code = StatusCode.from_number(number)
    if code is None:
        raise ValueError(f"Invalid status code {number}")
    return code


def to_status(status: Any) -> Status:
    """A ``grpc.Status`` for ``abort_with_status`` from a ``google.rpc.Status``: its code and
    message become the call's, and the whole message travels in the trailer.

    ValueError if ``status.code`` is not a gRPC status code (0-16).
    """
    return _Status(
        code=_code(status.code),
        details=status.message,
        trailing_metadata=((wire.STATUS_DETAILS_KEY, status.SerializeToString()),),
    )


def _rich_status(code: Any, details: Optional[str], trailing_metadata: Any) -> Any:
    """The ``google.rpc.Status`` in a finished call's trailers, checked against its status."""
    for key, value in trailing_metadata or ():
        if key != wire.STATUS_DETAILS_KEY:
            continue
        rich = status_pb2.Status.FromString(value)
        if code.value[0] != rich.code:
            raise ValueError(
                f"Code in Status proto ({_code_name(rich.code)}) doesn't match status code "
                f"({code})"
            )
        if details != rich.message:
            raise ValueError(
                f"Message in Status proto ({rich.message}) doesn't match status details "
                f"({details})"
            )
        return rich
    return None


def _code_name(number: int) -> str:
    code = StatusCode.from_number(number)
    return str(code) if code is not None else str(number)


def from_call(call: Any) -> Any:
    """The ``google.rpc.Status`` a finished call (or its ``RpcError``) carried, or None.

    Works on minigrpc's calls and grpcio's.  ValueError if the trailer's code or message is not
    the call's own: a status that contradicts the call is not to be trusted.
    """
    trailing_metadata = call.trailing_metadata()
    if trailing_metadata is None:
        return None
    return _rich_status(call.code(), call.details(), trailing_metadata)


async def _from_aio_call(call: Any) -> Any:
    """:func:`from_call` for a ``grpc.aio`` call, whose accessors are awaited."""
    trailing_metadata = await call.trailing_metadata()
    if trailing_metadata is None:
        return None
    return _rich_status(await call.code(), await call.details(), trailing_metadata)


#: ``rpc_status.aio.from_call``, as grpcio-status names it.
aio = types.SimpleNamespace(from_call=_from_aio_call)
