"""What a client holds while a call runs or after it ended: grpcio's Call and Future objects.

* :class:`Call`: a finished unary call, as ``with_call`` returns it.
* :class:`CallFuture`: what ``unary_unary(...).future()`` returns, a Future that is also a Call.
* :class:`StreamingCall`: what a call with a response stream returns (``unary_stream`` and
  ``stream_stream``), and what ``stream_unary(...).future()`` returns.  Like grpcio's
  ``_MultiThreadedRendezvous`` it is at once an iterator of responses, a ``grpc.Call``, a
  ``grpc.Future`` and the ``RpcError`` that iteration raises when the call fails.

minigrpc's client has no thread of its own: the thread that waits on a call (iterating it,
asking for its code, waiting on its result) reads the connection on behalf of every call on it
(:mod:`minigrpc.transport`).  Callbacks registered with ``add_callback`` or
``add_done_callback`` therefore run on the thread that sees the call end, after it ended.
The only thread minigrpc starts for a client is the one that reads a request iterator
(:class:`RequestSender`), because the iterator may block until responses arrive (a ping-pong).
"""

import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple

from . import wire
from .client_protocol import ClientCall
from .errors import CallError, FutureCancelledError, FutureTimeoutError
from .status import CallStatus, FinishedCall, Metadata, RpcError, StatusCode
from .transport import CANCELLED_DETAILS, CallHandle, ClientConnection

Deserializer = Optional[Callable[[bytes], Any]]


class Call(FinishedCall):
    """A finished call, as ``with_call`` returns it (grpcio's ``grpc.Call`` for a unary call)."""

    def __init__(self, status: CallStatus) -> None:
        self.status = status

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """grpcio returns False when the call has already ended, which a finished call has."""
        return False

    def __repr__(self) -> str:
        return f"<minigrpc.Call code={self.status.code.name}>"


def decode_response(
    message: Tuple[bool, bytes],
    encoding: Optional[str],
    max_length: Optional[int],
    deserializer: Deserializer,
    call: ClientCall,
) -> Any:
    """Inflate and deserialize one response message; a failure is an :class:`RpcError`."""
    compressed, payload = message
    try:
        payload = wire.decode_message(compressed, payload, encoding, max_length)
    except CallError as exc:
        raise _error(exc.code, str(exc), call) from None
    if deserializer is None:
        return payload
    try:
        return deserializer(payload)
    except Exception:
        raise _error(StatusCode.INTERNAL, "Exception deserializing response!", call) from None


def _error(code: StatusCode, details: str, call: Optional[ClientCall] = None) -> RpcError:
    initial: Metadata = call.initial_metadata if call is not None else ()
    trailing: Metadata = call.trailing_metadata if call is not None else ()
    return RpcError(CallStatus(code, details, initial, trailing))


class CallFuture(Call):
    """What ``future()`` returns: a ``grpc.Future`` that is also a ``grpc.Call`` (as in grpcio).

    Call methods (``code()``, ``details()``, metadata) block until the call has ended.
    """

    def __init__(self, handle: CallHandle, timeout: Optional[float]) -> None:
        super().__init__(CallStatus(StatusCode.OK))
        self._handle = handle
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._exception: Optional[BaseException] = None
        self._cancelled = False
        self._callbacks: List[Callable[[Any], None]] = []

    def _resolve(self, outcome: Any) -> None:
        with self._lock:
            if self._done.is_set():
                return
            if isinstance(outcome, BaseException):
                self._exception = outcome
                if isinstance(outcome, RpcError):
                    self.status = outcome.status
                    self._cancelled = self._cancelled or (
                        outcome.code() is StatusCode.CANCELLED and self._handle.cancelled
                    )
            else:
                self._response, call = outcome
                self.status = call.status
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    # grpc.Future
    def cancel(self) -> bool:
        """Cancel a running call; False if it had already ended."""
        with self._lock:
            if self._done.is_set():
                return False
            self._cancelled = True
        self._handle.cancel()
        self._resolve(RpcError(self._handle.status))
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def running(self) -> bool:
        return not self._done.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: Optional[float] = None) -> Any:
        if not self._done.wait(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        if self._exception is not None:
            raise self._exception
        return self._response

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if not self._done.wait(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        return self._exception

    def traceback(self, timeout: Optional[float] = None) -> Any:
        error = self.exception(timeout)
        return None if error is None else error.__traceback__

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    # grpc.Call / grpc.RpcContext
    def is_active(self) -> bool:
        return not self._done.is_set()

    def time_remaining(self) -> Optional[float]:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(lambda _future: callback())
                return True
        return False

    def code(self) -> StatusCode:
        self._done.wait()
        return super().code()

    def details(self) -> str:
        self._done.wait()
        return super().details()

    def initial_metadata(self) -> Metadata:
        self._done.wait()
        return super().initial_metadata()

    def trailing_metadata(self) -> Metadata:
        self._done.wait()
        return super().trailing_metadata()

    def __repr__(self) -> str:
        state = "done" if self._done.is_set() else "running"
        return f"<minigrpc.CallFuture {state}>"


class StreamingCall(RpcError):
    """A running call with a response stream: iterator, ``grpc.Call``, ``grpc.Future``, error.

    Iterating yields the deserialized responses; once the call ends, iteration stops when its
    status is OK and raises this very object (an :class:`~minigrpc.RpcError`) otherwise, as
    grpcio does.  ``code()``, ``details()`` and the trailing metadata wait for the end;
    ``initial_metadata()`` waits for the response headers.  ``result()`` waits for the end and
    returns the one response of a ``stream_unary`` call (None for a response stream).
    ``cancel()`` sends RST_STREAM(CANCEL) and ends the call CANCELLED.

    ``reopen`` (given for a unary request, whose only message is known) lets the call start
    again, once, on a new connection when the server provably never processed it.
    """

    def __init__(
        self,
        connection: Optional[ClientConnection],
        call: ClientCall,
        deserializer: Deserializer,
        max_receive: Optional[int],
        unary_response: bool = False,
        reopen: Optional[Callable[[], Tuple[Optional[ClientConnection], ClientCall]]] = None,
    ) -> None:
        self._connection = connection
        self._call = call
        self._deserializer = deserializer
        self._max_receive = max_receive
        self._unary_response = unary_response
        self._reopen = reopen
        Exception.__init__(self, "running")
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[], None]] = []
        self._cancelled = False
        self._finished = False
        self._response: Any = None
        self._decode_error: Optional[RpcError] = None
        self._received_any = False
        self.status = call.status or CallStatus(StatusCode.OK)
        if call.done:
            self._on_end()

    # -- the end of the call ----------------------------------------------------------------

    def _on_end(self) -> None:
        """Record the status once the call has ended, and run the callbacks (once)."""
        with self._lock:
            if self._finished:
                return
            status = self._call.status
            if status is None:
                return
            if self._decode_error is not None:
                status = self._decode_error.status
            self._finished = True
            self.status = status
            self.args = (str(status),)
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a callback's failure is not the call's
                import logging

                logging.getLogger("minigrpc.calls").exception("a call's callback raised")

    def _retry_if_never_processed(self) -> bool:
        """Start again on a new connection if the server provably never saw the call."""
        call = self._call
        if self._reopen is None or not call.retryable or self._received_any:
            return False
        reopen, self._reopen = self._reopen, None
        self._connection, self._call = reopen()
        self.status = self._call.status or CallStatus(StatusCode.OK)
        return True

    def _wait_done(self, timeout: Optional[float] = None) -> bool:
        """Wait for the end (reading for the connection); False if ``timeout`` passed first."""
        while True:
            connection, call = self._connection, self._call
            if not call.done and connection is not None:
                connection.wait_done(call, call.deadline, timeout)
            if call.done and self._retry_if_never_processed():
                continue
            break
        if call.done:
            if self._unary_response and not self._finished:
                self._take_unary_response()
            self._on_end()
            return True
        return False

    def _take_unary_response(self) -> None:
        call = self._call
        if call.status is None or call.status.code is not StatusCode.OK:
            return
        message = self._connection.receive(call, None) if self._connection else None
        if message is None:
            return
        try:
            self._response = decode_response(
                message, call.response_encoding, self._max_receive, self._deserializer, call
            )
        except RpcError as exc:
            self._decode_error = exc

    # -- iterator ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            connection, call = self._connection, self._call
            message = None
            if connection is not None:
                message = connection.receive(call, call.deadline)
            if message is not None:
                self._received_any = True
                try:
                    return decode_response(
                        message,
                        call.response_encoding,
                        self._max_receive,
                        self._deserializer,
                        call,
                    )
                except RpcError as exc:
                    # The response was unusable: the call fails with that status.
                    self._decode_error = exc
                    if connection is not None:
                        connection.cancel(call, exc.status)
                    self._on_end()
                    raise self from None
            if call.done and self._retry_if_never_processed():
                continue
            self._on_end()
            if self.status.code is StatusCode.OK:
                raise StopIteration
            raise self

    def next(self) -> Any:
        """grpcio's Python 2 era spelling, still offered by its rendezvous objects."""
        return self.__next__()

    # -- grpc.Call -------------------------------------------------------------------------------

    def initial_metadata(self) -> Metadata:
        call = self._call
        if call.response_head is None and not call.done and self._connection is not None:
            self._connection.wait_for_headers(call, call.deadline)
        return self._call.initial_metadata

    def trailing_metadata(self) -> Metadata:
        self._wait_done()
        return self.status.trailing_metadata

    def code(self) -> StatusCode:
        self._wait_done()
        return self.status.code

    def details(self) -> str:
        self._wait_done()
        return self.status.details

    def debug_error_string(self) -> str:
        self._wait_done()
        return str(self.status)

    # -- grpc.RpcContext -------------------------------------------------------------------------

    def is_active(self) -> bool:
        self._notice_deadline()
        return not self._call.done

    def time_remaining(self) -> Optional[float]:
        deadline = self._call.deadline
        if deadline is None:
            return None
        return max(0.0, deadline - time.monotonic())

    def cancel(self) -> bool:
        """Cancel the call (RST_STREAM(CANCEL)); False if it had already ended."""
        self._notice_deadline()
        call = self._call
        if call.done:
            return False
        self._cancelled = True
        status = CallStatus(StatusCode.CANCELLED, CANCELLED_DETAILS)
        if self._connection is not None:
            self._connection.cancel(call, status)
        else:  # pragma: no cover - a call without a connection has always ended
            call.status = status
        self._on_end()
        return True

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._finished:
                self._callbacks.append(callback)
                return True
        return False

    def _notice_deadline(self) -> None:
        """A call nobody waits on learns of its passed deadline here."""
        if self._connection is not None:
            self._connection.expire_if_overdue(self._call)
        if self._call.done:
            self._on_end()

    # -- grpc.Future -----------------------------------------------------------------------------

    def cancelled(self) -> bool:
        return self._cancelled

    def running(self) -> bool:
        return not self.done()

    def done(self) -> bool:
        self._notice_deadline()
        return self._finished

    def result(self, timeout: Optional[float] = None) -> Any:
        if not self._wait_done(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        if self.status.code is not StatusCode.OK:
            raise self
        return self._response

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if not self._wait_done(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        return None if self.status.code is StatusCode.OK else self

    def traceback(self, timeout: Optional[float] = None) -> Any:
        error = self.exception(timeout)
        return None if error is None else error.__traceback__

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        if not self.add_callback(lambda: fn(self)):
            fn(self)

    def __str__(self) -> str:
        if not self._finished:
            return "<minigrpc.StreamingCall running>"
        return str(self.status)

    def __repr__(self) -> str:
        state = f"code={self.status.code.name}" if self._finished else "running"
        return f"<minigrpc.StreamingCall {state}>"


class RequestSender:
    """Reads a request iterator on a thread of its own and sends each message (grpcio does too).

    The iterator may block until the server has answered (a ping-pong), so it cannot run on the
    thread that reads the responses.  An exception from the iterator cancels the call UNKNOWN
    ("Exception iterating requests!"), one from the serializer INTERNAL ("Exception serializing
    request!"), as in grpcio.  The iterator is left alone once the call has ended.
    """

    def __init__(
        self,
        connection: ClientConnection,
        call: ClientCall,
        requests: Any,
        frame: Callable[[Any], wire.Framed],
    ) -> None:
        self._connection = connection
        self._call = call
        self._requests = requests
        self._frame = frame
        self._thread = threading.Thread(
            target=self._run, name="minigrpc-request-sender", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        connection, call = self._connection, self._call
        try:
            iterator = iter(self._requests)
        except Exception:
            self._fail(StatusCode.UNKNOWN, "Exception iterating requests!")
            return
        while not call.done:
            try:
                request = next(iterator)
            except StopIteration:
                connection.close_request(call, call.deadline)
                return
            except Exception:
                self._fail(StatusCode.UNKNOWN, "Exception iterating requests!")
                return
            try:
                framed = self._frame(request)
            except RpcError as exc:
                self._fail(exc.code(), exc.details())
                return
            if not connection.send(call, framed, False, call.deadline):
                return

    def _fail(self, code: StatusCode, details: str) -> None:
        self._connection.cancel(self._call, CallStatus(code, details))
