"""One call on a server, as both servers keep it: what its handler reads and sets, and where the
call stands, with no I/O.

:class:`CallState` is the base of both servicer contexts (the blocking
:class:`minigrpc.blocking.servicer_context.ServicerContext` and the asyncio
:class:`minigrpc.aio.servicer_context.ServicerContext`).  It holds grpcio's ``ServicerContext``
accessors and setters that never touch the wire (metadata, peer, deadline, auth context, code,
details, trailing metadata, compression), and the call's place in the driver
(:mod:`minigrpc.driver.server_driver`): its connection and stream, its handler once admitted,
its request, its timers, whether it ended and how, and the callbacks to run when it does.  The
driver changes that state only through the ``_``-prefixed methods below (they are minigrpc's,
not grpcio's API); the contexts add the methods that wait or write, each in its own way.

:mod:`minigrpc.driver.server_dispatch` reads ``_method``, ``_code``, ``_details``, ``_aborted``
and ``_terminated`` to decide the status that ends the call.
"""

import enum
import threading
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Tuple,
    Union,
)

from ..protocol import status, wire
from ..protocol.enums import StatusCode
from ..protocol.server_events import CallStarted
from ..protocol.status import Metadata
from .logs import get_logger

if TYPE_CHECKING:  # pragma: no cover
    from typing import Protocol

    from ..protocol.server_protocol import ServerGrpcConnection

    class CallServer(Protocol):
        """What a context hands the wire to: the server's calls (the blocking
        :class:`~minigrpc.blocking.server_handlers.CallHandlers`, the asyncio
        :class:`~minigrpc.aio.server_handlers.CallTasks`)."""

        #: The compression responses start with (a ``Compression``; None for none).
        default_compression: Optional[int]
        #: Guards what handler threads and the server both touch on a call.
        call_lock: threading.Lock

        def cancel(self, call: Any) -> None: ...

        def send_initial_metadata(
            self, call: Any, headers: List[Tuple[bytes, bytes]], encoding: Optional[str]
        ) -> None: ...

__all__ = ["NO_DEADLINE", "PLAINTEXT_AUTH_CONTEXT", "CallState", "Metadatum"]

_LOGGER = get_logger("minigrpc.server")

#: Reserved keys a handler may still put in its trailing metadata (grpcio allows the same).
_TRAILER_ONLY_KEYS = frozenset((wire.STATUS_DETAILS_KEY,))

#: grpcio's ``auth_context()`` of a plaintext connection.
PLAINTEXT_AUTH_CONTEXT: Dict[str, List[bytes]] = {
    "security_level": [b"TSI_SECURITY_NONE"],
    "transport_security_type": [b"insecure"],
}

#: What ``time_remaining()`` says when the client set no deadline. grpcio documents None but
#: returns a huge float in practice; minigrpc follows the documented contract.
NO_DEADLINE = None


class Metadatum(NamedTuple):
    """One metadata item, as grpcio's ``invocation_metadata()`` yields them."""

    key: str
    value: Union[str, bytes]


def _status_code(code: Any) -> StatusCode:
    """The code a handler's ``set_code``/``abort`` value puts on the wire, as grpcio decides it.

    minigrpc's StatusCode, or grpcio's (the same names and values: a handler written for grpcio
    passes ``grpc.StatusCode.NOT_FOUND``); anything else, a number included, is UNKNOWN, as
    grpcio sends it (``abort(3, ...)`` is not INVALID_ARGUMENT there either).
    """
    if isinstance(code, StatusCode):
        return code
    name = getattr(code, "name", None)
    if isinstance(name, str) and name in StatusCode.__members__ and isinstance(code, enum.Enum):
        return StatusCode[name]
    return StatusCode.UNKNOWN


def _text(details: Any) -> Optional[str]:
    """Status details as text: grpcio accepts str or UTF-8 bytes."""
    if isinstance(details, (bytes, bytearray)):
        return bytes(details).decode("utf-8", "replace")
    return None if details is None else str(details)


class CallState:
    """One call's state on a server (module docstring).

    ``server`` is what the context hands the wire to (its ``call_lock`` guards what a handler
    thread and the driver may both touch: the end of the call and its callbacks, and the initial
    metadata's one sending); ``connection`` is the driver's
    :class:`~minigrpc.driver.server_driver.ServedConnection` (anything with ``peer``, grpcio's
    peer string, ``tls``, its :class:`~minigrpc.net.tls.TLSEngine` or None, and ``protocol``).
    """

    __slots__ = (
        "_aborted",
        "_behavior",
        "_callbacks",
        "_code",
        "_code_as_set",
        "_compress_next",
        "_compression",
        "_connection",
        "_counted",
        "_deadline",
        "_deadline_timer",
        "_details",
        "_handler",
        "_initial_metadata_sent",
        "_lock",
        "_metadata",
        "_metadata_items",
        "_method",
        "_request",
        "_request_closed",
        "_request_complete",
        "_request_encoding",
        "_running",
        "_server",
        "_stall_timer",
        "_stream_id",
        "_terminated",
        "_termination_code",
        "_trailing_headers",
        "_trailing_metadata",
    )

    def __init__(self, server: "CallServer", connection: Any, event: CallStarted) -> None:
        self._server = server
        self._connection = connection
        self._stream_id = event.stream_id
        self._method = event.method
        self._metadata = event.metadata
        self._deadline = event.deadline
        self._lock = server.call_lock
        #: The handler and the callable of its shape, once the call is admitted.
        self._handler: Any = None
        self._behavior: Optional[Callable[..., Any]] = None
        self._metadata_items: Optional[Tuple[Metadatum, ...]] = None
        #: The code the call ends with, and the value the handler gave (``code()``).
        self._code: Optional[StatusCode] = None
        self._code_as_set: Any = None
        self._details: Optional[str] = None
        self._trailing_metadata: Metadata = ()
        self._trailing_headers: Optional[List[Tuple[bytes, bytes]]] = None
        self._initial_metadata_sent = False
        self._compression = server.default_compression
        self._compress_next = True
        #: The unary request's bytes once whole; whether the request is whole (or streamed,
        #: which never stalls); whether the client half-closed a streamed one.
        self._request: Optional[bytes] = None
        self._request_complete = False
        self._request_closed = False
        self._request_encoding: Optional[str] = None
        #: Admitted: it counts against ``maximum_concurrent_rpcs``.
        self._counted = False
        #: Its handler was started (or its lookup, with coroutine interceptors).
        self._running = False
        self._deadline_timer: Optional[Any] = None
        self._stall_timer: Optional[Any] = None
        self._aborted = False
        self._terminated = False
        self._termination_code: Optional[StatusCode] = None
        self._callbacks: Optional[List[Callable[..., Any]]] = None

    # -- grpcio's accessors -------------------------------------------------------------------

    def time_remaining(self) -> Optional[float]:
        """Seconds left before the client's deadline (never negative), or None without one."""
        if self._deadline is None:
            return NO_DEADLINE
        return max(0.0, self._deadline - time.monotonic())

    def invocation_metadata(self) -> Tuple[Metadatum, ...]:
        """The request's metadata, ``user-agent`` included and transport headers left out.

        Items are ``(key, value)`` tuples that also have ``.key`` and ``.value``, like grpcio's.
        Like grpcio, ``grpc-encoding`` and other ``grpc-*`` headers are not part of it; see
        :meth:`request_compression` for whether the request was compressed.
        """
        items = self._metadata_items
        if items is None:
            items = self._metadata_items = tuple(Metadatum(k, v) for k, v in self._metadata)
        return items

    def peer(self) -> str:
        """``ipv4:127.0.0.1:5432``, ``ipv6:[::1]:5432`` or ``unix:`` (plus its path), as grpcio."""
        peer: str = self._connection.peer
        return peer

    def peer_identities(self) -> Optional[List[bytes]]:
        """The client certificate's names on a mutual-TLS connection, else None (as grpcio)."""
        key = self.peer_identity_key()
        return None if key is None else self.auth_context()[key]

    def peer_identity_key(self) -> Optional[str]:
        """``x509_subject_alternative_name`` or ``x509_common_name`` under mutual TLS."""
        context = self.auth_context()
        for key in ("x509_subject_alternative_name", "x509_common_name"):
            if key in context:
                return key
        return None

    def auth_context(self) -> Dict[str, List[bytes]]:
        """grpcio's keys: ``security_level``, ``transport_security_type`` (``ssl`` or
        ``insecure``), and on a TLS connection ``ssl_session_reused`` and the client
        certificate's names."""
        tls = self._connection.tls
        if tls is None:
            return {key: list(values) for key, values in PLAINTEXT_AUTH_CONTEXT.items()}
        context: Dict[str, List[bytes]] = tls.auth_context()
        return context

    def set_trailing_metadata(self, trailing_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Metadata for the trailers; invalid keys or values raise ValueError here.

        ``grpc-status-details-bin`` is allowed, as in grpcio: it carries a serialized
        ``google.rpc.Status`` (what grpcio-status's ``abort_with_status`` sends).
        """
        pairs = tuple(trailing_metadata or ())
        self._trailing_headers = wire.encode_metadata(pairs, _TRAILER_ONLY_KEYS)
        self._trailing_metadata = pairs

    def trailing_metadata(self) -> Metadata:
        return self._trailing_metadata

    def set_code(self, code: Any) -> None:
        """Set the call's status code; grpcio's ``grpc.StatusCode`` members work too."""
        self._record_code(code)

    def _record_code(self, code: Any) -> None:
        self._code_as_set = code
        self._code = _status_code(code)

    def set_details(self, details: str) -> None:
        self._details = _text(details)

    def code(self) -> Any:
        """The code the handler set (as it gave it), or None."""
        return self._code_as_set

    def details(self) -> Optional[bytes]:
        """The details the handler set, as UTF-8 bytes like grpcio's, or None."""
        return None if self._details is None else self._details.encode("utf-8")

    def set_compression(self, compression: Optional[int]) -> None:
        """Compress the response with this ``Compression`` if the client accepts it
        (``doc/compression.md``)."""
        self._compression = (
            None if compression is None else wire.compression_number(compression)
        )

    def disable_next_message_compression(self) -> None:
        self._compress_next = False

    def request_compression(self) -> Optional[str]:
        """minigrpc only: the encoding the request message was compressed with, or None.

        grpcio offers no way to tell, and hides ``grpc-encoding`` from
        :meth:`invocation_metadata`; the interop ``expect_compressed`` check needs it.
        """
        return self._request_encoding

    # -- what the handler's outcome records ---------------------------------------------------

    def _record_abort(self, code: Any, details: Any) -> None:
        """What ``abort(code, details)`` ends the call with, as grpcio decides it: OK is logged
        and becomes UNKNOWN with empty details; a value that is not a status code
        (``abort(42, ...)``) is UNKNOWN with the details given."""
        if code is StatusCode.OK or getattr(code, "name", None) == "OK":
            _LOGGER.error("abort() called with StatusCode.OK; returning UNKNOWN")
            code = StatusCode.UNKNOWN
            details = ""
        self._record_code(code)
        self._details = _text(details)
        self._aborted = True

    def _record_failure(self, code: StatusCode, details: str) -> None:
        """The server ends the call with this status, as an abort would (a streamed request
        that did not deserialize); the handler's own ``code()`` stays what it set."""
        self._code = code
        self._details = details
        self._aborted = True

    def _take_compress_flag(self) -> bool:
        """Whether the next streamed response is compressed;
        ``disable_next_message_compression`` lasts one message."""
        compress = self._compress_next
        self._compress_next = True
        return compress

    def _initial_metadata_encoding(self) -> Optional[str]:
        """The encoding response headers sent now announce (``grpc-encoding``)."""
        return wire.compression_name(self._compression) if self._compress_next else None

    # -- the wire, through the connection's protocol ------------------------------------------

    def _finish_on(
        self,
        protocol: "ServerGrpcConnection",
        code: StatusCode,
        details: str,
        message: Optional[bytes],
    ) -> bool:
        """End the call on ``protocol`` with this status, the unary response if any, and what
        the handler set: trailing metadata, compression (PROTOCOL-HTTP2.md, Responses).  False
        if the call is gone."""
        return protocol.finish_call(
            self._stream_id,
            code,
            details,
            message=message,
            trailing_metadata=self._trailing_headers,
            encoding=wire.compression_name(self._compression),
            compress_message=self._compress_next,
        )

    def _send_message_on(
        self, protocol: "ServerGrpcConnection", message: bytes, compress: bool
    ) -> Optional[status.MessageTooLarge]:
        """Queue one streamed response on ``protocol``, compressed with the call's compression
        unless ``compress`` is False (``disable_next_message_compression``); the error that
        ends the call when the message is over ``max_send_message_length``, else None."""
        try:
            protocol.send_message(
                self._stream_id,
                message,
                encoding=wire.compression_name(self._compression),
                compress_message=compress,
            )
        except status.MessageTooLarge as exc:
            return exc
        return None

    # -- the driver's (minigrpc.driver.server_driver) -----------------------------------------

    def _admit(self, handler: Any, behavior: Callable[..., Any]) -> None:
        """The call may start: its handler and the callable of its shape; it counts now."""
        self._handler = handler
        self._behavior = behavior
        self._counted = True

    def _mark_running(self) -> None:
        self._running = True

    def _request_whole(self, message: bytes, encoding: Optional[str]) -> None:
        """The unary request arrived whole: it can no longer stall."""
        self._request = message
        self._request_encoding = encoding
        self._request_complete = True
        timer, self._stall_timer = self._stall_timer, None
        if timer is not None:
            timer.cancel()

    def _request_streamed(self, encoding: Optional[str]) -> None:
        """The request is a stream: its handler starts now and reads as messages come (a
        stream may pause; its handler decides how long to wait, so it never stalls)."""
        self._request_complete = True
        self._request_encoding = encoding

    def _request_end(self) -> None:
        """The client half-closed the streamed request (its last messages may still wait)."""
        self._request_closed = True

    def _arm_deadline(self, timer: Any) -> None:
        self._deadline_timer = timer

    def _arm_stall(self, timer: Optional[Any]) -> None:
        self._stall_timer = timer

    def _end(self, code: StatusCode) -> Optional[List[Callable[..., Any]]]:
        """The call ended with ``code`` (however it ended): it is no longer active, its timers
        are cancelled, and the callbacks registered so far are handed back to be run, once."""
        with self._lock:
            if self._terminated:
                return None
            self._terminated = True
            self._termination_code = code
            callbacks, self._callbacks = self._callbacks, None
        for timer in (self._deadline_timer, self._stall_timer):
            if timer is not None:
                timer.cancel()
        self._deadline_timer = self._stall_timer = None
        return callbacks

    def _add_callback(self, callback: Callable[..., Any]) -> bool:
        """Keep ``callback`` for the call's end; False (not kept) if it already ended."""
        with self._lock:
            if self._terminated:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(callback)
            return True
