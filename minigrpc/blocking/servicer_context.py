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

import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, NoReturn, Optional, Tuple

from ..driver import interfaces
from ..driver.server_call_state import CallState, Metadatum
from ..protocol import wire
from ..protocol.enums import StatusCode
from ..protocol.server_events import CallStarted
from .server_call import RequestStream, ResponseCredit

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.server_call_state import CallServer
    from ..driver.server_driver import ServedConnection


__all__ = ["Metadatum", "ServicerContext"]


class _Abort(Exception):
    """Raised into a handler's request iterator when a streamed request does not deserialize
    (the call is ended as aborted); ``abort()`` itself raises a bare ``Exception``, as grpcio."""


class ServicerContext(CallState, interfaces.ServicerContext):
    """The context a handler receives: grpcio's ``ServicerContext`` API for unary calls.

    Methods that change the wire (``send_initial_metadata``, ``cancel``) are handed to the I/O
    thread; the others only record state that is read when the handler returns.  Two minigrpc
    additions: :meth:`request_compression` and :meth:`trailing_metadata` / :meth:`code` /
    :meth:`details` getters (grpcio has the last three too).
    """

    __slots__ = ("_requests", "_response_credit")

    def __init__(
        self, server: "CallServer", connection: "ServedConnection", event: CallStarted
    ) -> None:
        super().__init__(server, connection, event)
        #: The request iterator of a request-streaming method.
        self._requests: Optional[RequestStream] = None
        #: Send backpressure of a response-streaming method.
        self._response_credit: Optional[ResponseCredit] = None

    # -- RpcContext ------------------------------------------------------------------------------

    def is_active(self) -> bool:
        """False once the call ended: answered, cancelled, reset by the client or past deadline."""
        if self._terminated:
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    def cancel(self) -> None:
        """Cancel the call: the client gets RST_STREAM(CANCEL), i.e. CANCELLED
        (PROTOCOL-HTTP2.md, Errors)."""
        self._server.cancel(self)

    def add_callback(self, callback: Callable[[], Any]) -> bool:
        """Run ``callback`` (on a minigrpc thread) when the call ends, however it ends.

        Returns False, without registering it, if the call has already ended (grpcio's rule).
        """
        return self._add_callback(callback)

    # -- ServicerContext -------------------------------------------------------------------------

    def send_initial_metadata(self, initial_metadata: Iterable[Tuple[str, Any]]) -> None:
        """Send the response headers now, with this metadata (at most once, as in grpcio)."""
        headers = wire.encode_metadata(initial_metadata)
        with self._lock:
            if self._initial_metadata_sent:
                raise ValueError("Initial metadata no longer allowed!")
            self._initial_metadata_sent = True
        self._server.send_initial_metadata(self, headers, self._initial_metadata_encoding())

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

    # -- the server's ----------------------------------------------------------------------------

    def _open_streams(
        self, requests: Optional[RequestStream], credit: Optional[ResponseCredit]
    ) -> None:
        """The hand-overs of a streaming call (:mod:`minigrpc.blocking.server_call`)."""
        self._requests = requests
        self._response_credit = credit

    def _release_waiters(self) -> None:
        """The call ended: wake a handler blocked on its request iterator or on sending."""
        if self._requests is not None:
            self._requests.terminate(self._termination_code or StatusCode.CANCELLED)
        if self._response_credit is not None:
            self._response_credit.end()

    def __repr__(self) -> str:
        return f"<ServicerContext {self._method} stream={self._stream_id} peer={self.peer()}>"
