"""What a client holds while a call runs or after it ended: grpcio's Call and Future objects.

Every one of them is a ``grpc.Call`` and a ``grpc.Future`` (:mod:`minigrpc.driver.interfaces`), as
in grpcio, where code checks ``isinstance`` against both:

* :class:`Call`: a finished unary call that succeeded, as ``with_call`` returns it;
* :class:`InactiveRpcError`: a finished unary call that failed, raised as the ``RpcError``;
* :class:`CallFuture`: what ``unary_unary(...).future()`` returns;
* :class:`StreamingCall`: what a call with a response stream returns (``unary_stream`` and
  ``stream_stream``), and what ``stream_unary(...).future()`` returns.  Like grpcio's
  ``_MultiThreadedRendezvous`` it is at once an iterator of responses, a ``grpc.Call``, a
  ``grpc.Future`` and the ``RpcError`` that iteration raises when the call fails.

minigrpc's client has no reader thread of its own: the thread that waits on a call (iterating
it, asking for its code, waiting on its result) reads the connection on behalf of every call on
it (:mod:`minigrpc.blocking.transport`).  A future is the exception: nobody may be waiting on it,
yet its callbacks must run when the call ends and ``done()`` must say so, as in grpcio; so each
future has one thread that waits for the end (the unary future runs the whole call on it).
Callbacks run on the thread that sees the call end, after it ended.  The other thread minigrpc
starts for a client reads a request iterator (:class:`RequestSender`), because the iterator may
block until responses arrive (a ping-pong).
"""

import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Tuple

from ..driver import interfaces
from ..driver.attempts import finished
from ..driver.call_steps import CallSteps
from ..driver.invocation import CANCELLED, REQUESTS_FAILED, CallFailed
from ..driver.logs import get_logger
from ..protocol import wire
from ..protocol.client_protocol import ClientCall
from ..protocol.codes import Code
from ..protocol.enums import StatusCode
from ..protocol.grpc_connection import Message
from ..protocol.status import (
    CallStatus,
    FutureCancelledError,
    FutureTimeoutError,
    Metadata,
    RpcError,
)
from .client_connection import BlockingClientConnection
from .transport import CallHandle

if TYPE_CHECKING:  # pragma: no cover
    from .hedge import BlockingHedge

#: Decodes one response message of a call (:meth:`minigrpc.driver.invocation.Invocation.decode`).
Decode = Callable[[Message, ClientCall], Any]
#: Opens the call's next attempt (:meth:`minigrpc.blocking.transport.BlockingTransport.open`).
Reopen = Callable[[], Tuple[Optional[BlockingClientConnection], ClientCall]]
#: Runs a call's decision about its attempts where the channel's shared state is safe
#: (:meth:`minigrpc.blocking.transport.BlockingTransport.guarded`).
Guard = Callable[..., Any]

_LOGGER = get_logger(__name__)


def _run_callbacks(callbacks: List[Callable[[], None]]) -> None:
    """Run a call's callbacks; one that raises is logged, and the others still run."""
    for callback in callbacks:
        try:
            callback()
        except Exception:  # a callback's failure is not the call's
            _LOGGER.exception("a call's callback raised")


def traceback_of(error: BaseException) -> Optional[TracebackType]:
    """The traceback of a call's error; one that was never raised gets one here, as in grpcio
    (``future.traceback()`` of a failed call is never None)."""
    if error.__traceback__ is not None:
        return error.__traceback__
    try:
        raise error
    except BaseException:
        return sys.exc_info()[2]


def debug_error_string(status: CallStatus) -> str:
    """A call's ``debug_error_string()``: the status in grpc-go's words (grpcio gives its C
    core's error text), and empty for a call that ended OK, as in grpcio."""
    return "" if status.code is StatusCode.OK else str(status)


class FinishedCall(interfaces.Call, interfaces.Future):
    """A call that has ended, read from :attr:`status`: a ``grpc.Call`` and a done ``Future``.

    ``result()`` is the response of a call that succeeded and raises the error of one that
    failed; callbacks added now run at once (``add_done_callback``) or are refused
    (``add_callback`` returns False), as grpcio does for a call that is over.
    """

    status: CallStatus

    def code(self) -> StatusCode:
        return self.status.code

    def details(self) -> str:
        return self.status.details

    def initial_metadata(self) -> Metadata:
        return self.status.initial_metadata

    def trailing_metadata(self) -> Metadata:
        return self.status.trailing_metadata

    def debug_error_string(self) -> str:
        return debug_error_string(self.status)

    @property
    def status_details_bin(self) -> Optional[bytes]:
        """The raw ``grpc-status-details-bin`` bytes, or None (decode with google.rpc.Status)."""
        return self.status.details_bin

    # grpc.RpcContext
    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> Optional[float]:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False

    # grpc.Future
    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return None

    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        error = self.exception(timeout)
        return None if error is None else traceback_of(error)

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)


class Call(FinishedCall):
    """A unary call that ended OK, as ``with_call`` returns it; ``result()`` is the response."""

    def __init__(self, status: CallStatus, response: Any = None) -> None:
        self.status = status
        self._response = response

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._response

    def __repr__(self) -> str:
        return f"<minigrpc.Call code={self.status.code.name}>"


class InactiveRpcError(RpcError, FinishedCall):
    """A unary call that failed: the ``RpcError`` raised, and the call (grpcio's
    ``_InactiveRpcError``).  ``str(e)`` reads like grpc-go's ``status.Error``."""

    def __init__(self, status: CallStatus) -> None:
        super().__init__(str(status))
        self.status = status

    def result(self, timeout: Optional[float] = None) -> Any:
        raise self

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return self

    def __str__(self) -> str:
        return str(self.status)

    def __repr__(self) -> str:
        return f"<RpcError code={self.status.code.name} details={self.status.details!r}>"


class CallFuture(interfaces.Call, interfaces.Future):
    """What ``unary_unary(...).future()`` returns: a ``grpc.Future`` that is also a ``grpc.Call``.

    The call runs on a thread of its own, which resolves the future when the call ends (and
    runs the callbacks there).  Call methods (``code()``, ``details()``, metadata) block until
    the call has ended.
    """

    def __init__(self, handle: CallHandle, timeout: Optional[float]) -> None:
        self.status = CallStatus(Code.OK)
        self._handle = handle
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._exception: Optional[BaseException] = None
        self._traceback: Optional[TracebackType] = None
        self._cancelled = False
        self._callbacks: List[Callable[[], None]] = []

    def resolve(self, outcome: Any) -> None:
        """Record how the call ended (an exception, or ``(response, call)``); run callbacks."""
        with self._lock:
            if self._done.is_set():
                return
            if isinstance(outcome, BaseException):
                self._exception = outcome
                self._traceback = outcome.__traceback__
                status = getattr(outcome, "status", None)
                if isinstance(status, CallStatus):
                    self.status = status
                    self._cancelled = self._cancelled or (
                        status.code is StatusCode.CANCELLED and self._handle.cancelled
                    )
                else:  # not a call's failure: e.g. the request did not serialize
                    self.status = CallStatus(Code.UNKNOWN, str(outcome))
            else:
                self._response, call = outcome
                self.status = call.status
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        _run_callbacks(callbacks)

    # grpc.Future
    def cancel(self) -> bool:
        """Cancel a running call; False if it had already ended."""
        with self._lock:
            if self._done.is_set():
                return False
            self._cancelled = True
        self._handle.cancel()
        self.resolve(InactiveRpcError(self._handle.status))
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

    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        """The traceback of the call's failure, as it was raised (grpcio keeps it too)."""
        error = self.exception(timeout)
        if error is None:
            return None
        return self._traceback or traceback_of(error)

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        if not self.add_callback(lambda: fn(self)):
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
                self._callbacks.append(callback)
                return True
        return False

    def code(self) -> StatusCode:
        self._done.wait()
        return self.status.code

    def details(self) -> str:
        self._done.wait()
        return self.status.details

    def initial_metadata(self) -> Metadata:
        self._done.wait()
        return self.status.initial_metadata

    def trailing_metadata(self) -> Metadata:
        self._done.wait()
        return self.status.trailing_metadata

    def debug_error_string(self) -> str:
        self._done.wait()
        return debug_error_string(self.status)

    def __repr__(self) -> str:
        state = "done" if self._done.is_set() else "running"
        return f"<minigrpc.CallFuture {state}>"


class StreamingCall(RpcError, interfaces.Call, interfaces.Future):
    """A running call with a response stream: iterator, ``grpc.Call``, ``grpc.Future``, error.

    Iterating yields the deserialized responses; once the call ends, iteration stops when its
    status is OK and raises this very object (an :class:`~minigrpc.RpcError`) otherwise, as
    grpcio does.  ``code()``, ``details()`` and the trailing metadata wait for the end;
    ``initial_metadata()`` waits for the response headers.  ``result()`` waits for the end and
    returns the one response of a ``stream_unary`` call (None for a response stream).
    ``cancel()`` sends RST_STREAM(CANCEL) and ends the call CANCELLED.

    An attempt that ends before the call is committed is tried again when the call's ``steps``
    say so (:mod:`minigrpc.driver.call_steps`: its retry policy, or a server that never
    processed it): ``reopen`` opens the next attempt, and the request messages sent so far go
    out again on it (:meth:`send_request`).  ``guard`` runs the steps' decisions where the
    channel's shared retry state is safe.

    A hedged call (``hedge``, :mod:`minigrpc.blocking.hedge`) stands on ``call``, which never
    starts, until it is settled: its request messages go to the hedge, and whatever needs a
    response first waits for the attempt the call is (:meth:`_adopt`), then reads it as any.
    """

    def __init__(
        self,
        connection: Optional[BlockingClientConnection],
        call: ClientCall,
        decode: Decode,
        unary_response: bool = False,
        steps: Optional[CallSteps] = None,
        reopen: Optional[Reopen] = None,
        guard: Optional[Guard] = None,
        hedge: "Optional[BlockingHedge]" = None,
    ) -> None:
        self._connection = connection
        self._call = call
        #: A hedged call's attempts, until the call is settled on one (:meth:`_adopt`); then
        #: still where request messages go (to the winner).
        self._hedge = hedge
        self._adopted = hedge is None
        self._decode = decode
        self._unary_response = unary_response
        self._steps = steps
        self._reopen = reopen
        self._guard: Guard = guard if guard is not None else _unguarded
        Exception.__init__(self, "running")
        self._lock = threading.Lock()
        #: Held while an ended attempt is judged and the next one opened, and while a request
        #: message is recorded for the attempts to come: the two never overlap.
        self._reopening = threading.Lock()
        #: Held while the end is recorded; re-entrant, for a callback that asks for the result.
        self._ending = threading.RLock()
        self._callbacks: List[Callable[[], None]] = []
        self._cancelled = False
        self._finished = False
        self._response: Any = None
        #: The status of a response the call could not use.
        self._decode_error: Optional[CallStatus] = None
        self.status = call.status or CallStatus(Code.OK)
        if call.done:
            self._complete()

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
                status = self._decode_error
            self._finished = True
            self.status = status
            self.args = (str(status),)
            callbacks, self._callbacks = self._callbacks, []
        if self._steps is not None:
            self._guard(self._steps.finish)
        if self._hedge is not None:
            self._hedge.ended(status.code_number)
        _run_callbacks(callbacks)

    def watch(self) -> None:
        """Wait for the end on a thread of its own, so that the callbacks run and ``done()``
        turns True although nobody waits (a future's contract).  Only for a unary response:
        the thread reads the connection, and one response is all it may buffer."""
        if self._unary_response and not self._finished:
            threading.Thread(target=self._wait_done, name="minigrpc-future", daemon=True).start()

    def _tried_again(self, call: ClientCall) -> bool:
        """The attempt ``call`` ended: True once the next attempt is open, if the steps try the
        call again (the server never processed it); whichever thread saw the end first opens it.
        """
        steps, reopen = self._steps, self._reopen
        if steps is None or reopen is None or self._connection is None:
            return False
        with self._reopening:
            if self._call is not call:
                return True
            if self._guard(steps.attempt_ended, call):
                return False
            self._connection, self._call = reopen()
            self.status = self._call.status or CallStatus(Code.OK)
        return True

    def _adopt(self, timeout: Optional[float] = None, wait: bool = True) -> bool:
        """A hedged call: take the attempt it is settled on as the call's (waiting for it,
        within ``timeout``, if ``wait``); False if it is not settled yet."""
        if self._adopted:
            return True
        hedge = self._hedge
        assert hedge is not None
        outcome = hedge.outcome(timeout) if wait else hedge.settled_outcome()
        if outcome is None:
            return False
        with self._reopening:
            if not self._adopted:
                self._connection, self._call = outcome
                self.status = self._call.status or CallStatus(Code.OK)
                self._adopted = True
        return True

    # -- the request stream ------------------------------------------------------------------

    def _current(self, record: Optional[Callable[..., None]], *args: Any) -> Any:
        """The current attempt, with ``record(*args)`` told to the steps while no attempt is
        being replaced (so that the next attempt's replay holds exactly what was recorded)."""
        with self._reopening:
            connection, call = self._connection, self._call
            if record is not None and not call.done:
                self._guard(record, *args)
        return connection, call

    def send_request(self, framed: wire.Framed) -> bool:
        """Send one request message on the current attempt; False once the call is over.

        The message is kept for the attempts to come while the call may be retried
        (:meth:`CallSteps.message_sent`); if the attempt ends meanwhile, the next one sends it
        again with the others, so it counts as sent."""
        if self._hedge is not None:
            return self._hedge.send(framed)
        steps = self._steps
        while True:
            connection, call = self._current(steps.message_sent if steps else None, framed)
            if call.done:
                if self._tried_again(call):
                    continue
                return False
            assert connection is not None
            if connection.send(call, framed, False, call.deadline):
                return True
            return self._tried_again(call)

    def close_requests(self) -> None:
        """End the request stream (END_STREAM), on this attempt and on any that follows."""
        if self._hedge is not None:
            self._hedge.close_requests()
            return
        steps = self._steps
        while True:
            connection, call = self._current(steps.request_closed if steps else None)
            if call.done:
                if self._tried_again(call):
                    continue
                return
            assert connection is not None
            connection.close_request(call, call.deadline)
            return

    def fail(self, status: CallStatus) -> None:
        """End the call here with ``status`` (its request iterator or serializer failed): never
        tried again."""
        if self._hedge is not None:
            self._hedge.cancel(status)
            return
        with self._reopening:
            if self._steps is not None:
                self._guard(self._steps.commit)
            connection, call = self._connection, self._call
        if connection is not None:
            connection.cancel(call, status)

    def _wait_done(self, timeout: Optional[float] = None) -> bool:
        """Wait for the end (reading for the connection); False if ``timeout`` passed first."""
        if not self._adopt(timeout):
            return False
        while True:
            connection, call = self._connection, self._call
            if not call.done and connection is not None:
                connection.wait_done(call, call.deadline, timeout)
            if call.done and self._tried_again(call):
                continue
            break
        if call.done:
            self._complete()
            return True
        return False

    def _complete(self) -> None:
        """Record the end, taking the one response of a unary-response call first.  The
        watcher thread and callers may all get here; the first takes the response."""
        with self._ending:
            if self._unary_response and not self._finished:
                self._take_unary_response()
            self._on_end()

    def _take_unary_response(self) -> None:
        call = self._call
        if call.status is None or call.status.code is not StatusCode.OK:
            return
        message = self._connection.receive(call, None) if self._connection else None
        if message is None:
            return
        try:
            self._response = self._decode(message, call)
        except CallFailed as exc:
            self._decode_error = exc.status

    # -- iterator ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        self._adopt()
        while True:
            connection, call = self._connection, self._call
            message = None
            if connection is not None:
                message = connection.receive(call, call.deadline)
            if message is not None:
                steps = self._steps
                if steps is not None and not steps.committed:
                    self._guard(steps.commit)  # the application has a response: no retry now
                try:
                    return self._decode(message, call)
                except CallFailed as exc:
                    # The response was unusable: the call fails with that status.
                    self._decode_error = exc.status
                    if connection is not None:
                        connection.cancel(call, exc.status)
                    self._on_end()
                    raise self from None
            if call.done and self._tried_again(call):
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
        self._adopt()
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
        return debug_error_string(self.status)

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
        if not self._adopted:
            assert self._hedge is not None
            if self._hedge.cancel(CANCELLED):  # before it was settled: every attempt
                self._cancelled = True
                self._adopt()
                self._on_end()
                return True
            self._adopt()
        call = self._call
        if call.done:
            return False
        self._cancelled = True
        if self._steps is not None:
            self._guard(self._steps.commit)  # cancelled here: never tried again
        if self._connection is not None:
            self._connection.cancel(call, CANCELLED)
        else:  # pragma: no cover - a call without a connection has always ended
            finished(call, CANCELLED)
        self._on_end()
        return True

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._finished:
                self._callbacks.append(callback)
                return True
        return False

    def _notice_deadline(self) -> None:
        """A call nobody waits on learns of its passed deadline here, and of its end (unless
        its last attempt is to be tried again: whoever waits for the call next does that)."""
        if not self._adopt(wait=False):
            return
        call = self._call
        if self._connection is not None:
            self._connection.expire_if_overdue(call)
        if call.done and (self._steps is None or self._guard(self._steps.attempt_ended, call)):
            self._complete()

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

    def traceback(self, timeout: Optional[float] = None) -> Optional[TracebackType]:
        error = self.exception(timeout)
        return None if error is None else traceback_of(error)

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
    request!"), as in grpcio.  The iterator is left alone once the call has ended.  Each message
    goes to the call's current attempt (:meth:`StreamingCall.send_request`).
    """

    def __init__(
        self,
        stream: StreamingCall,
        requests: Any,
        frame: Callable[[Any], wire.Framed],
    ) -> None:
        self._stream = stream
        self._requests = requests
        self._frame = frame
        self._thread = threading.Thread(
            target=self._run, name="minigrpc-request-sender", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        stream = self._stream
        try:
            iterator = iter(self._requests)
        except Exception:
            stream.fail(REQUESTS_FAILED)
            return
        while not stream.done():
            try:
                request = next(iterator)
            except StopIteration:
                stream.close_requests()
                return
            except Exception:
                stream.fail(REQUESTS_FAILED)
                return
            try:
                framed = self._frame(request)
            except CallFailed as exc:
                stream.fail(exc.status)
                return
            if not stream.send_request(framed):
                return


def _unguarded(decision: Callable[..., Any], *args: Any) -> Any:
    return decision(*args)
