"""The ``context`` a handler receives: grpcio's ``ServicerContext``, on minigrpc's server.

Methods that change the wire (``send_initial_metadata``, ``cancel``) are handed to the server's
I/O thread; the others record state that the server reads when the handler returns.

Logging goes to the ``minigrpc.server`` logger; an exception in a handler is logged there with
its traceback, and the client only sees ``Exception calling application: <message>``.

Choices where implementations differ (docs/wire-rules.md, "Server-side rejections"), made to match
grpcio so that its handlers and clients see what they expect:

* An unknown service or method is Trailers-Only UNIMPLEMENTED ``Method not found!`` (grpcio's
  text; grpc-go names the service or method instead).
* A handler that raises gives UNKNOWN ``Exception calling application: <msg>``, unless it set a
  code first; one that returns None gives INTERNAL ``Failed to serialize response!`` unless it
  set a code (grpcio's ``context.set_code(NOT_FOUND); return None`` idiom).  ``abort(OK, ...)``
  becomes UNKNOWN with an empty message, as in grpcio.
* An expired deadline ends the call with DEADLINE_EXCEEDED trailers (grpc-go resets the stream
  with CANCEL instead; trailers give every client the same unambiguous status).
* ``time_remaining()`` is None without a deadline (grpcio's documented contract; grpcio itself
  returns a huge float).  ``peer()`` is ``ipv4:h:p``, ``ipv6:[h]:p`` or ``unix:`` like grpcio.
* grpcio hides ``grpc-encoding`` from ``invocation_metadata()``, and so do we; the minigrpc-only
  ``ServicerContext.request_compression()`` tells a handler how the request was compressed.
* ``grpc.StatusCode`` members from grpcio are accepted wherever a status code is expected.
"""

import enum
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Tuple,
    Union,
)

from ..driver import interfaces
from ..driver.logs import get_logger
from ..protocol import status, wire
from ..protocol.enums import StatusCode
from ..protocol.status import Metadata
from .server_call import RequestStream, ResponseCredit

if TYPE_CHECKING:  # pragma: no cover
    from .server_handlers import CallHandling
    from .server_loop import BlockingServerConnection

__all__ = ["Metadatum", "ServicerContext"]

_LOGGER = get_logger("minigrpc.server")

#: Reserved keys a handler may still put in its trailing metadata (grpcio allows the same).
_TRAILER_ONLY_KEYS = frozenset((wire.STATUS_DETAILS_KEY,))


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


class _Abort(Exception):
    """Raised into a handler's request iterator when a streamed request does not deserialize
    (the call is ended as aborted); ``abort()`` itself raises a bare ``Exception``, as grpcio."""


#: What ``time_remaining()`` says when the client set no deadline. grpcio documents None but
#: returns a huge float in practice; minigrpc follows the documented contract.
NO_DEADLINE = None


class CallState:
    """What a handler's context records and reads, whatever the server's I/O: grpcio's
    ``ServicerContext`` accessors and setters that never touch the wire.

    The blocking :class:`ServicerContext` and the asyncio one (:mod:`minigrpc.aio`) add the
    methods that do (initial metadata, cancel, abort, the end of the call).
    :mod:`minigrpc.driver.server_dispatch` reads ``_method``, ``_code``, ``_details``, ``_aborted``
    and ``_terminated`` to decide the status that ends the call.  ``connection`` is anything with
    the attributes ``peer`` (grpcio's peer string) and ``tls`` (its
    :class:`~minigrpc.net.tls.TLSEngine` or None).
    """

    __slots__ = (
        "_aborted",
        "_behavior",
        "_code",
        "_code_as_set",
        "_compress_next",
        "_compression",
        "_connection",
        "_deadline",
        "_details",
        "_handler",
        "_initial_metadata_sent",
        "_metadata",
        "_metadata_items",
        "_method",
        "_request_encoding",
        "_stream_id",
        "_terminated",
        "_termination_code",
        "_trailing_headers",
        "_trailing_metadata",
    )

    def __init__(
        self,
        connection: Any,
        stream_id: int,
        method: str,
        metadata: Metadata,
        deadline: Optional[float],
        handler: Any,
        compression: Optional[int],
    ) -> None:
        self._handler = handler
        #: The handler's callable of its shape, found once when the call starts.
        self._behavior: Optional[Callable[..., Any]] = None
        self._connection = connection
        self._stream_id = stream_id
        self._method = method
        self._metadata = metadata
        self._metadata_items: Optional[Tuple[Metadatum, ...]] = None
        self._deadline = deadline
        #: The code the call ends with, and the value the handler gave (``code()``).
        self._code: Optional[StatusCode] = None
        self._code_as_set: Any = None
        self._details: Optional[str] = None
        self._trailing_metadata: Metadata = ()
        self._trailing_headers: Optional[List[Tuple[bytes, bytes]]] = None
        self._initial_metadata_sent = False
        self._compression = compression
        self._compress_next = True
        self._request_encoding: Optional[str] = None
        self._aborted = False
        self._terminated = False
        self._termination_code: Optional[StatusCode] = None

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
        return self._connection.peer

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
            from ..net.tls import PLAINTEXT_AUTH_CONTEXT

            return {key: list(values) for key, values in PLAINTEXT_AUTH_CONTEXT.items()}
        return tls.auth_context()

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

    def _finish_on(
        self, protocol: Any, code: StatusCode, details: str, message: Optional[bytes]
    ) -> bool:
        """End the call on ``protocol`` (its
        :class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection`)
        with this status, the unary response if any, and what the handler set: trailing
        metadata, compression (PROTOCOL-HTTP2.md, Responses).  False if the call is gone."""
        finished: bool = protocol.finish_call(
            self._stream_id,
            code,
            details,
            message=message,
            trailing_metadata=self._trailing_headers,
            encoding=wire.compression_name(self._compression),
            compress_message=self._compress_next,
        )
        return finished

    def _send_message_on(
        self, protocol: Any, message: bytes, compress: bool
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


class ServicerContext(CallState, interfaces.ServicerContext):
    """The context a handler receives: grpcio's ``ServicerContext`` API for unary calls.

    Methods that change the wire (``send_initial_metadata``, ``cancel``) are handed to the I/O
    thread; the others only record state that is read when the handler returns.  Two minigrpc
    additions: :meth:`request_compression` and :meth:`trailing_metadata` / :meth:`code` /
    :meth:`details` getters (grpcio has the last three too).
    """

    __slots__ = (
        "_callbacks",
        "_request_closed",
        "_request_complete",
        "_requests",
        "_response_credit",
        "_server",
    )

    def __init__(
        self,
        server: "CallHandling",
        connection: "BlockingServerConnection",
        stream_id: int,
        method: str,
        metadata: Metadata,
        deadline: Optional[float],
        handler: Any,
    ) -> None:
        super().__init__(
            connection, stream_id, method, metadata, deadline, handler, server._default_compression
        )
        self._server = server
        self._request_complete = False
        #: The request iterator of a request-streaming method, and whether the client has
        #: half-closed it (its last messages may still wait in the connection).
        self._requests: Optional[RequestStream] = None
        self._request_closed = False
        #: Send backpressure of a response-streaming method.
        self._response_credit: Optional[ResponseCredit] = None
        self._callbacks: Optional[List[Callable[[], Any]]] = None

    # -- RpcContext ------------------------------------------------------------------------------

    def is_active(self) -> bool:
        """False once the call ended: answered, cancelled, reset by the client or past deadline."""
        if self._terminated:
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    def cancel(self) -> None:
        """Cancel the call: the client gets RST_STREAM(CANCEL), i.e. CANCELLED
        (PROTOCOL-HTTP2.md, Errors)."""
        self._server._post(self._server._cancel_call, self)

    def add_callback(self, callback: Callable[[], Any]) -> bool:
        """Run ``callback`` (on a minigrpc thread) when the call ends, however it ends.

        Returns False, without registering it, if the call has already ended (grpcio's rule).
        """
        with self._server._callback_lock:
            if self._terminated:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(callback)
            return True

    # -- ServicerContext -------------------------------------------------------------------------

    def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Send the response headers now, with this metadata (at most once, as in grpcio)."""
        headers = wire.encode_metadata(initial_metadata)
        with self._server._callback_lock:
            if self._initial_metadata_sent:
                raise ValueError("Initial metadata no longer allowed!")
            self._initial_metadata_sent = True
        encoding = wire.compression_name(self._compression) if self._compress_next else None
        self._server._post(self._server._send_initial_metadata, self, headers, encoding)

    def abort(self, code: Any, details: str) -> NoReturn:
        """End the call with ``code`` and ``details`` by raising an exception (grpcio's contract).

        Like grpcio: OK is logged and becomes UNKNOWN with empty details; a value that is not a
        status code (``abort(42, ...)``) is UNKNOWN with the details given.  What it raises is a
        bare ``Exception``, as grpcio's is: code that wraps handlers tells an abort from the
        handler's own error by that (OpenTelemetry's server interceptor records any other
        exception on the span); the server knows the call aborted from the context.
        """
        self._record_abort(code, details)
        raise Exception()  # grpcio's type, which wrappers check

    def abort_with_status(self, status: Any) -> NoReturn:
        """``abort`` with a ``grpc.Status``-like object (code, details, trailing_metadata)."""
        self.set_trailing_metadata(getattr(status, "trailing_metadata", None) or ())
        self.abort(status.code, status.details)

    # -- called by the server --------------------------------------------------------------------

    def _mark_ended(self, code: StatusCode) -> Optional[List[Callable[[], Any]]]:
        with self._server._callback_lock:
            if self._terminated:
                return None
            self._terminated = True
            self._termination_code = code
            callbacks, self._callbacks = self._callbacks, None
        # Wake a handler blocked on the request iterator or on sending.
        if self._requests is not None:
            self._requests.terminate(code)
        if self._response_credit is not None:
            self._response_credit.end()
        return callbacks

    def __repr__(self) -> str:
        return f"<ServicerContext {self._method} stream={self._stream_id} peer={self.peer()}>"
