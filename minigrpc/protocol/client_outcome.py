"""What a client concludes about one call from what the server sent, free of any connection
state and of I/O.

Two clients read server frames: the full client (:mod:`minigrpc.protocol.client_protocol`, on its
HTTP/2 connection, :mod:`minigrpc.http2.client`) and the one-shot unary client
(:mod:`minigrpc.protocol.oneshot_protocol`, on
minigrpc's own frame and HPACK codecs, for the CNI plugin's single call).  Every decision that turns
server behaviour into a call status is written here once, and both call it:

* a received header block that is over the per-call limit or malformed (RFC 9113 §6.5.2,
  §8.1.1): :func:`block_failure`;
* the response headers: a Trailers-Only block, or a response that is not gRPC
  (PROTOCOL-HTTP2.md, "Responses"; doc/http-grpc-status-mapping.md): :func:`not_grpc_status`;
* the status once the stream ended, with the unary cardinality and framing checks:
  :func:`final_status`;
* RST_STREAM from either side (PROTOCOL-HTTP2.md, "Errors"): :func:`reset_status`;
* GOAWAY above the call (RFC 9113 §6.8) and a lost connection: :func:`refused_by_goaway`,
  :func:`goaway_note`, :func:`lost_details`, :func:`connection_error_details`.

The tables these read (HTTP status and RST_STREAM codes to gRPC codes) stay in
:mod:`minigrpc.protocol.status`; the header rules stay in :mod:`minigrpc.protocol.headers`.
"""

from ..http2.frames import CANCEL, PROTOCOL_ERROR, REFUSED_STREAM, http2_error_name
from ..http2.hpack_codec import Header
from . import headers
from .codes import Code, rst_stream_details, status_from_rst_stream
from .headers import ResponseHead
from .status import DEADLINE_EXCEEDED_DETAILS, CallStatus, Metadata

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    #: A failed call and the RST_STREAM code that ends its stream (None: no reset needed).
    Failure = Tuple[CallStatus, Optional[int]]
else:  # an alias at run time: only a name for other modules' annotations
    Failure = tuple

#: A unary call got a second response message (grpc-go's words).
EXTRA_MESSAGE_DETAILS = (
    "cardinality violation: expected <EOF> for non server-streaming RPCs, "
    "but received another message"
)
#: The response message could not be deserialized (grpcio's words).
DESERIALIZE_FAILED_DETAILS = "Exception deserializing response!"


def block_failure(
    block: "Sequence[Header]",
    max_header_list_size: "Optional[int]",
    malformed: "Callable[[Sequence[Header]], str]",
) -> "Optional[Failure]":
    """Why a response header block or trailer block ends the call, or None if it is fine.

    Over the per-call limit (RFC 9113 §6.5.2): INTERNAL and RST_STREAM(CANCEL), like grpc-go's
    "peer header list size exceeded limit".  The connection's own limit kills the
    connection, so it is kept high and this one is checked per call.  Malformed (``malformed``
    is :func:`minigrpc.protocol.headers.malformed_response` or ``malformed_trailers``): a stream
    error (RFC 9113 §8.1.1), INTERNAL and RST_STREAM(PROTOCOL_ERROR); the connection lives on.
    """
    limit = max_header_list_size
    if limit is not None:
        size = headers.header_list_size(block)
        if size > limit:
            details = f"peer header list size exceeded limit ({size} > {limit} bytes)"
            return CallStatus(Code.INTERNAL, details), CANCEL
    problem = malformed(block)
    if problem:
        details = f"malformed header block from the server: {problem}"
        return CallStatus(Code.INTERNAL, details), PROTOCOL_ERROR
    return None


def not_grpc_status(head: ResponseHead) -> "Optional[Failure]":
    """Response headers (not Trailers-Only) that are not gRPC end the call at once.

    A proxy's 404 page or an HTTP/1-ish server: the status comes from ``:status`` alone and the
    stream is cancelled, as grpc-go does (doc/http-grpc-status-mapping.md).
    """
    if head.is_grpc:
        return None
    return headers.http_failure_status(head.http_status, head.content_type), CANCEL


def final_status(
    head: "Optional[ResponseHead]",
    trailers: "Sequence[Header]",
    initial_metadata: Metadata,
    trailing_metadata: Metadata,
    at_message_boundary: bool,
    messages_received: int,
    unary_response: bool,
) -> CallStatus:
    """The status once the server ended the stream (PROTOCOL-HTTP2.md, "Responses").

    The trailers decide (:func:`minigrpc.protocol.headers.read_status`); an OK status is still
    INTERNAL when the stream ended inside a message or a unary call got no message or several.
    """
    status = headers.read_status(head, trailers, initial_metadata, trailing_metadata)
    if status.code_number != Code.OK:
        return status
    if not at_message_boundary:
        return CallStatus(
            Code.INTERNAL,
            "server closed the stream with an incomplete message",
            initial_metadata,
            trailing_metadata,
        )
    if unary_response and messages_received != 1:
        return CallStatus(
            Code.INTERNAL,
            "cardinality violation: expected one response message for a unary RPC, "
            f"got {messages_received}",
            initial_metadata,
            trailing_metadata,
        )
    return status


def reset_status(
    error_code: int, remote: bool, past_deadline: bool, initial_metadata: Metadata
) -> "Tuple[CallStatus, bool]":
    """The status of a call whose stream was reset, and whether a retry is safe.

    ``remote``: the server sent RST_STREAM, mapped by
    :data:`minigrpc.protocol.codes.RST_STREAM_TO_GRPC` (a CANCEL past the deadline is
    DEADLINE_EXCEEDED); REFUSED_STREAM means nothing was processed, so the call may be retried
    transparently (RFC 9113 §8.7).  Otherwise the client reset the stream itself because the server
    broke a stream-level rule: INTERNAL.
    """
    if not remote:
        details = f"stream reset locally: {rst_stream_details(error_code)}"
        return CallStatus(Code.INTERNAL, details), False
    code = status_from_rst_stream(error_code, past_deadline)
    details = (
        DEADLINE_EXCEEDED_DETAILS
        if code == Code.DEADLINE_EXCEEDED
        else rst_stream_details(error_code)
    )
    return CallStatus(code, details, initial_metadata), error_code == REFUSED_STREAM


def refused_by_goaway(last_stream_id: int) -> CallStatus:
    """A call above a GOAWAY's last-stream-id: never processed, retryable (RFC 9113 §6.8)."""
    return CallStatus(
        Code.UNAVAILABLE,
        f"the server sent GOAWAY (last stream {last_stream_id}) before processing this call",
    )


def goaway_note(error_code: "Optional[int]", debug_data: bytes) -> str:
    """What a lost connection's details add about a prior GOAWAY with an error, as grpc-go
    does: its code and debug data usually explain why the server went away."""
    if not error_code:
        return ""
    return (
        f"; received prior goaway: code: {http2_error_name(error_code)}"
        f", debug data: {debug_data.decode('utf-8', 'replace')!r}"
    )


def lost_details(
    error_text: "Optional[str]", bytes_received: int, settings_received: bool, peer: str
) -> str:
    """Why the connection to ``peer`` ended (``error_text`` None: EOF), in grpc-go's words
    where it has some, naming the target as the user gave it (``Target.display``), as the dial
    and handshake errors do: a program with several channels can tell which one failed.

    Before the server's SETTINGS (its connection preface, RFC 9113 §3.4) grpc-go says it was
    reading the server preface.  ``peer`` "" (a protocol driven without a socket) names none.
    """
    cause = "EOF" if error_text is None else error_text
    if bytes_received == 0 or not settings_received:
        return f'connection error: desc = "error reading server preface: {_at(peer)}{cause}"'
    to = f" to {peer}" if peer else ""
    if error_text is None:
        return f"connection{to} closed before the response was complete"
    return f"connection{to} lost before the response was complete: {cause}"


def connection_error_details(reason: object, reading_preface: bool, peer: str) -> str:
    """A connection error the client detected in what ``peer`` sent (RFC 9113 §5.4.1);
    ``reading_preface``: before the server's SETTINGS was accepted."""
    phase = "error reading server preface" if reading_preface else "error reading from server"
    return f'connection error: desc = "{phase}: {_at(peer)}{reason}"'


def _at(peer: str) -> str:
    """``peer`` in front of a cause, the way the handshake error names it: ``host:port: ``."""
    return f"{peer}: " if peer else ""
