"""The asyncio API's exceptions and its end-of-stream marker, with grpcio's names and text.

* :class:`AioRpcError`: a call that ended with a status other than OK.  It is a
  :class:`minigrpc.RpcError`, so ``except grpc.RpcError`` catches it as with grpcio, and its
  metadata are :class:`~minigrpc.aio.Metadata` objects.
* :class:`UsageError`, :class:`AbortError`, :class:`InternalError` under :class:`BaseError`:
  misuse of the API (mixing the iterator and ``read()``/``write()`` styles, using a closed
  channel), a servicer's ``abort()``, and a library failure.
* :data:`EOF`: what ``read()`` returns once a response stream has ended (false in a boolean
  context, as grpcio's).
"""

from typing import Any, Optional, Tuple

from ..protocol.enums import StatusCode
from ..protocol.status import CallStatus, RpcError
from .metadata import Metadata

__all__ = [
    "EOF",
    "AbortError",
    "AioRpcError",
    "BaseError",
    "InternalError",
    "UsageError",
    "init_grpc_aio",
    "shutdown_grpc_aio",
]


class BaseError(Exception):
    """The base of the asyncio API's own exceptions (grpcio's ``grpc.aio.BaseError``)."""


class UsageError(BaseError):
    """The API was used in a way it does not allow (grpcio's ``grpc.aio.UsageError``)."""


class AbortError(BaseError):
    """Raised inside a servicer by ``await context.abort(...)`` to end its call."""


class InternalError(BaseError):
    """A failure inside the library, not the peer's or the application's."""


class _EndOfStream:
    """The type of :data:`EOF`: one instance, false, printed as grpcio prints it."""

    _instance: "Optional[_EndOfStream]" = None

    def __new__(cls) -> "_EndOfStream":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<grpc.aio.EOF>"

    def __reduce__(self) -> str:
        return "EOF"


#: ``read()`` returns this once the response stream has ended.
EOF = _EndOfStream()


class AioRpcError(RpcError):
    """The final status of a call that did not end OK: grpcio's ``grpc.aio.AioRpcError``.

    Raised when such a call is awaited or read.  Its accessors are plain methods (the status
    is known), unlike the call's own coroutines.
    """

    def __init__(
        self,
        code: StatusCode,
        initial_metadata: Optional[Metadata] = None,
        trailing_metadata: Optional[Metadata] = None,
        details: Optional[str] = None,
        debug_error_string: Optional[str] = None,
    ) -> None:
        # value[0]: the code's number, in grpcio's enum too (code may build these with either).
        status = CallStatus(
            code.value[0], details or "", tuple(initial_metadata or ()),
            tuple(trailing_metadata or ()),
        )
        super().__init__()
        #: The record the blocking API's errors carry too (wire number, details-bin).
        self.status = status
        self._code = code
        self._details = details
        self._initial_metadata = initial_metadata
        self._trailing_metadata = trailing_metadata
        self._debug_error_string = debug_error_string

    @classmethod
    def from_status(cls, status: CallStatus) -> "AioRpcError":
        """The error for a call that ended with ``status`` (the blocking API's record)."""
        error = cls(
            status.code,
            Metadata.from_tuple(status.initial_metadata),
            Metadata.from_tuple(status.trailing_metadata),
            status.details,
            str(status),
        )
        error.status = status  # keeps the wire number and grpc-status-details-bin
        return error

    def code(self) -> StatusCode:
        return self._code

    def details(self) -> Optional[str]:  # type: ignore[override]
        return self._details

    def initial_metadata(self) -> Optional[Metadata]:  # type: ignore[override]
        return self._initial_metadata

    def trailing_metadata(self) -> Optional[Metadata]:  # type: ignore[override]
        return self._trailing_metadata

    def debug_error_string(self) -> Optional[str]:  # type: ignore[override]
        return self._debug_error_string

    def __str__(self) -> str:
        return (
            f"<{type(self).__name__} of RPC that terminated with:\n"
            f"\tstatus = {self._code}\n"
            f'\tdetails = "{self._details}"\n'
            f'\tdebug_error_string = "{self._debug_error_string}"\n'
            ">"
        )

    __repr__ = __str__

    def __reduce__(self) -> Tuple[Any, ...]:
        return (
            type(self),
            (
                self._code,
                self._initial_metadata,
                self._trailing_metadata,
                self._details,
                self._debug_error_string,
            ),
        )


def init_grpc_aio() -> None:
    """grpcio starts its C core's asyncio integration here; minigrpc needs nothing started."""


def shutdown_grpc_aio() -> None:
    """The counterpart of :func:`init_grpc_aio`; nothing to stop."""
