"""The call events the server's sans-IO connection hands its socket layer.

:meth:`minigrpc.protocol.server_protocol.ServerGrpcConnection.receive_data` turns the frames of a
read into a few gRPC-level events: a call started (its request headers were valid), a unary request
is complete, streamed request messages wait, the request ended, or a call ended without the
handler's answer.  Both servers act on these and nothing else, through their driver
(:mod:`minigrpc.driver.server_driver`), as the HTTP/2 connection's events
(:mod:`minigrpc.http2.connection`) are the vocabulary between it and the server protocol.
"""

from typing import Optional, Union

from .enums import StatusCode
from .status import Metadata

__all__ = [
    "CallEvent",
    "CallStarted",
    "CallTerminated",
    "RequestEnded",
    "RequestMessage",
    "RequestReady",
]


class CallStarted:
    """A valid request's headers arrived: look up the handler now (or reject the call).

    ``deadline`` is on the clock the connection was given (``time.monotonic`` by default), or
    None when the client sent no ``grpc-timeout``.  ``metadata`` is the application metadata
    (``user-agent`` included, transport headers dropped), as grpcio's ``invocation_metadata()``.
    """

    __slots__ = ("authority", "deadline", "metadata", "method", "stream_id")

    def __init__(
        self,
        stream_id: int,
        method: str,
        metadata: Metadata,
        deadline: Optional[float],
        authority: str,
    ) -> None:
        self.stream_id = stream_id
        self.method = method
        self.metadata = metadata
        self.deadline = deadline
        self.authority = authority

    def __repr__(self) -> str:
        return f"CallStarted(stream_id={self.stream_id}, method={self.method!r})"


class RequestReady:
    """The unary request is complete (one message, then END_STREAM): run the handler.

    ``message`` is already decompressed; ``encoding`` names the compression it arrived with
    (None when the message was not compressed), which ``ServicerContext.request_compression()``
    exposes.
    """

    __slots__ = ("encoding", "message", "stream_id")

    def __init__(self, stream_id: int, message: bytes, encoding: Optional[str]) -> None:
        self.stream_id = stream_id
        self.message = message
        self.encoding = encoding

    def __repr__(self) -> str:
        return f"RequestReady(stream_id={self.stream_id}, {len(self.message)} bytes)"


class RequestMessage:
    """Messages of a streaming request are waiting: take them with ``take_request``.

    Sent once per DATA frame that completed at least one message, only for calls accepted as
    request-streaming (:meth:`ServerGrpcConnection.accept_call`).  Pulling instead of pushing lets
    the socket layer take messages only as fast as the handler reads them: what it leaves in
    the connection holds back the stream's window (PROTOCOL-HTTP2.md leaves flow control to
    HTTP/2; RFC 9113 §5.2), so a client cannot make the server buffer without bound.
    """

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"RequestMessage(stream_id={self.stream_id})"


class RequestEnded:
    """The client half-closed a streaming request on a message boundary: no more messages."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id

    def __repr__(self) -> str:
        return f"RequestEnded(stream_id={self.stream_id})"


class CallTerminated:
    """A started call ended without the handler's answer: mark its context inactive.

    ``code`` is what the handler's context reports: CANCELLED when the client reset the stream or
    the connection went away (PROTOCOL-HTTP2.md, Connection failure), DEADLINE_EXCEEDED when the
    deadline passed, or the status of a rejection this layer sent itself (for example
    RESOURCE_EXHAUSTED).
    """

    __slots__ = ("code", "details", "stream_id")

    def __init__(self, stream_id: int, code: StatusCode, details: str) -> None:
        self.stream_id = stream_id
        self.code = code
        self.details = details

    def __repr__(self) -> str:
        return f"CallTerminated(stream_id={self.stream_id}, code={self.code.name})"


CallEvent = Union[CallStarted, RequestReady, RequestMessage, RequestEnded, CallTerminated]
