"""The call objects of the asyncio API: awaitable unary calls and async-iterable streams.

A call runs in a task of its own (``_run``): it finds a connection, opens the stream, sends a
request iterator's messages from a second task, and waits for the status, so that deadlines
hold and ``done()`` turns true whether or not anybody reads.  Responses are taken by whoever
reads (``await call``, ``read()``, ``async for``); a reader that stops taking them stops the
window the protocol returns to the server (:class:`minigrpc.protocol.grpc_connection.Inbound`).

A unary call needs no task when the channel's connection is ready (``_start_now``): its request
is written before the multi-callable returns, and the call ends in a callback from the
connection (its response read, a reset, its deadline timer, a cancel), which resolves the future
``await call`` waits on.  That saves the two event-loop turns a task costs (its first step, and
its end waking the awaiter); only a transparent retry then needs the task.

Cancelling the call, or the task that awaits or reads it, sends RST_STREAM(CANCEL) and ends it
CANCELLED, as grpcio does (PROTOCOL-HTTP2.md, Errors).
"""

import asyncio
import time
from typing import Any, AsyncIterator, Callable, List, Optional, Tuple

from ..driver.attempts import finished
from ..driver.call_steps import START, CallSteps
from ..driver.connectivity import ChannelConnectivity
from ..driver.invocation import CANCELLED, REQUESTS_FAILED, CallFailed, Invocation
from ..protocol.client_protocol import ClientCall
from ..protocol.enums import StatusCode
from ..protocol.status import CallStatus
from . import interfaces as _interfaces
from .client_connection import AsyncClientConnection
from .errors import EOF, AioRpcError, UsageError
from .hedge import AsyncHedge
from .metadata import Metadata
from .transport import AsyncTransport

READY = ChannelConnectivity.READY

#: A stream is taken either by iteration or by ``read()``/``write()``, never both (UsageError,
#: as in grpcio); and nothing is written after ``done_writing()``.
MIXED_STYLES = "a call's stream is either iterated or read()/written, never both"
HALF_CLOSED = 'RPC is half closed after calling "done_writing".'
FINISHED = "RPC already finished."


class Call(_interfaces.Call):
    """What every asyncio call of minigrpc is: the implementation of ``grpc.aio.Call``
    (:class:`minigrpc.aio.interfaces.Call`) that the four kinds below share.

    ``invocation`` is the call's start-up, shared with the blocking API
    (:class:`minigrpc.driver.invocation.Invocation`), ``transport`` the channel's; a call that
    failed before it could start has neither, only its ``failure``.
    """

    _unary_response = True
    #: The request is a stream (an iterator, or ``write()``/``done_writing()``).
    _streaming_request = False

    def __init__(
        self,
        transport: Optional[AsyncTransport],
        invocation: Optional[Invocation],
        request: Any = None,
        request_iterator: Any = None,
        failure: Optional[CallStatus] = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        self._transport = transport
        self._invocation = invocation
        self._request = request
        self._request_iterator = request_iterator
        self._failure = failure
        #: The call's attempts (:mod:`minigrpc.driver.call_steps`), once it started.
        self._steps: Optional[CallSteps] = None
        #: A hedged call's attempts (:mod:`minigrpc.aio.hedge`), once it started.
        self._hedge: Optional[AsyncHedge] = None
        self._connection: Optional[AsyncClientConnection] = None
        self._call: Optional[ClientCall] = None
        self._status: Optional[CallStatus] = None
        self._opened: asyncio.Future[None] = loop.create_future()
        self._finished: asyncio.Future[None] = loop.create_future()
        #: Resolved when the call moves to its next attempt, or ends (None: nobody waits).
        self._attempt_changed: Optional[asyncio.Future[None]] = None
        self._callbacks: List[Callable[[Any], None]] = []
        self._sender: Optional[asyncio.Task[None]] = None
        #: How the responses are taken: "iterator" (``async for``) or "read" (``read()``).
        self._response_style = ""
        self._responses_iterator: Optional[AsyncIterator[Any]] = None
        self._half_closed = False
        #: ``cancel()`` was called (directly, or by a cancelled task that awaited the call).
        self._locally_cancelled = False
        #: What ``await call`` gives a unary response's caller: the response or the error.
        self._outcome: Optional[asyncio.Future[Any]] = (
            loop.create_future() if self._unary_response else None
        )
        #: The deadline timer of a call started without a task.
        self._timer: Optional[asyncio.TimerHandle] = None
        self._task: Optional[asyncio.Task[Any]] = None
        if not self._start_now(loop):
            self._start_task(loop)

    # -- without a task ---------------------------------------------------------------------

    def _start_now(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Start a unary-request, unary-response call on the ready connection, without a task;
        False when it must wait for something (a connection, a stream slot, the write buffer,
        readiness) or failed before it could start: the task does those, as for any call."""
        invocation, transport = self._invocation, self._transport
        if (
            invocation is None
            or transport is None
            or self._failure is not None
            or not self._unary_response
            or self._streaming_request
            or invocation.wait_for_ready
            or invocation.hedging is not None
        ):
            return False
        if transport.subchannels.state is not READY:
            return False
        try:
            framed = invocation.frame(self._request)
        except Exception:  # the task raises it again and reports it
            return False
        self._steps = steps = transport.steps(invocation, framed, True)
        if transport.next_step(steps) is not START:  # closed, past its deadline: the task
            return False
        connection: AsyncClientConnection = steps.connection
        if not connection.can_start_now():  # a stream slot, the write buffer: the task waits
            return False
        call = steps.new_attempt()
        self._connection, self._call = connection, call
        self._opened.set_result(None)
        connection.when_finished(call, self._ended)
        deadline = invocation.deadline
        if deadline is not None:
            self._timer = loop.call_later(deadline - time.monotonic(), connection.expire, call)
        if not connection.start_now(call) and not call.done:
            # The rest of the request waits for window or for the write buffer to drain.
            self._sender = loop.create_task(connection.write_request(call, deadline))
            self._sender.add_done_callback(_retrieve)
        return True

    def _ended(self) -> None:
        """A call started by ``_start_now`` has its status: tried again (by the task) if the
        steps say so (the server never processed it), else its outcome is known."""
        if self._timer is not None:
            self._timer.cancel()
        call, steps = self._call, self._steps
        assert call is not None and steps is not None
        if not self._locally_cancelled and not steps.attempt_ended(call):
            self._start_task(asyncio.get_running_loop())
            return
        outcome = self._outcome
        assert outcome is not None and call.status is not None
        if self._locally_cancelled:
            self._finish(call.status)
            outcome.cancel()
            return
        try:
            response = self._unary_result(call)
        except AioRpcError as exc:
            _resolve(outcome, error=exc)
        else:
            _resolve(outcome, response)

    # -- the task ---------------------------------------------------------------------------

    def _start_task(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run())
        self._task.add_done_callback(self._task_done)

    def _task_done(self, task: "asyncio.Task[Any]") -> None:
        """The task's outcome is the call's: it reaches the user through the call (``await
        call`` for a unary response), never the loop's exception handler."""
        if task.cancelled():
            if self._outcome is not None:
                self._outcome.cancel()
            return
        error = task.exception()
        if self._outcome is not None:
            _resolve(self._outcome, task.result() if error is None else None, error)

    async def _run(self) -> Any:
        try:
            return await self._run_call()
        except AioRpcError:
            raise
        except CallFailed as exc:  # the request did not serialize
            self._cancel_locally(exc.status)
            raise AioRpcError.from_status(exc.status) from None
        except asyncio.CancelledError:
            self._locally_cancelled = True
            self._cancel_locally(CANCELLED)
            raise
        finally:
            if not self._opened.done():
                self._opened.set_result(None)
            if self._status is None:
                call = self._call
                status = call.status if call is not None and call.status is not None else CANCELLED
                self._finish(status)

    async def _run_call(self) -> Any:
        if self._failure is not None:
            self._finish(self._failure)
            raise AioRpcError.from_status(self._failure)
        invocation, transport = self._invocation, self._transport
        assert invocation is not None and transport is not None
        if invocation.hedging is not None:
            return await self._run_hedged(invocation, transport)
        unary_response = self._unary_response
        steps = self._steps
        if steps is None:
            framed = None
            if not self._streaming_request:
                framed = invocation.frame(self._request)
            steps = self._steps = transport.steps(invocation, framed, unary_response)
        unary = unary_response and not self._streaming_request
        while True:
            connection, call = await transport.attempt(steps, unary, self._on_open)
            if call is None:
                assert steps.status is not None
                call = finished(steps.new_attempt(), steps.status)
            self._on_open(connection, call)
            if connection is None or call.done:
                break
            if self._request_iterator is not None and self._sender is None:
                self._sender = asyncio.get_running_loop().create_task(
                    self._send_all(self._request_iterator)
                )
            await connection.wait_done(call, invocation.deadline)
            if steps.attempt_ended(call):
                break
        assert call.status is not None
        if not unary_response:
            self._finish(await self._responses_read(connection, call, call.status))
            return None
        return self._unary_result(call)

    async def _run_hedged(self, invocation: Invocation, transport: AsyncTransport) -> Any:
        """A hedged call (:mod:`minigrpc.aio.hedge`): its attempts run until it is settled on
        one, which then goes on as a call that is not hedged.  Request messages may go out at
        once: the hedge sends them to every attempt."""
        framed = None if self._streaming_request else invocation.frame(self._request)
        hedge = self._hedge = AsyncHedge(transport, invocation, framed, self._unary_response)
        hedge.start()
        if not self._opened.done():
            self._opened.set_result(None)
        if self._request_iterator is not None and self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(
                self._send_all(self._request_iterator)
            )
        connection, call = await hedge.outcome()
        self._on_open(connection, call)
        if connection is not None and not call.done:
            await connection.wait_done(call, invocation.deadline)
        assert call.status is not None
        if not self._unary_response:
            self._finish(await self._responses_read(connection, call, call.status))
            return None
        return self._unary_result(call)

    async def _settled(self) -> None:
        """Wait until the call may be read: it opened, and a hedged call is settled on the
        attempt it is."""
        await asyncio.shield(self._opened)
        hedge = self._hedge
        if hedge is not None and self._status is None:
            connection, call = await hedge.outcome()
            self._on_open(connection, call)

    async def _responses_read(
        self, connection: Optional[AsyncClientConnection], call: ClientCall, status: CallStatus
    ) -> CallStatus:
        """The status of a stream the server ended, once the application may have it.

        As in grpcio, a stream that ended OK ends for the application only once its responses
        have been read: until then it is not done, and ``cancel()`` still ends it CANCELLED.
        Closing the channel meanwhile cancels it so (grpcio's ``close()`` cancels the calls
        it finds running); a connection lost meanwhile leaves the responses to be read and
        the status OK.
        """
        if connection is None or status.code is not StatusCode.OK or not call.messages_waiting:
            return status
        await connection.wait_read(call)
        transport = self._transport
        if call.messages_waiting and transport is not None and transport.subchannels.closed:
            self._locally_cancelled = True
            return CANCELLED
        return status

    def _running(self) -> "asyncio.Future[Any]":
        """What is done once the call is: its task, or (started without one) its end."""
        return self._task if self._task is not None else self._finished

    def _on_open(self, connection: Optional[AsyncClientConnection], call: ClientCall) -> None:
        """The call has an attempt (a retry replaces it), with a stream unless ``connection``
        is None."""
        if call is not self._call:
            self._connection, self._call = connection, call
            self._attempt_moved()
        if not self._opened.done():
            self._opened.set_result(None)

    def _attempt_moved(self) -> None:
        """Wake the readers waiting for the call's next attempt (:meth:`_next_attempt`)."""
        changed, self._attempt_changed = self._attempt_changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def _next_attempt(self, call: ClientCall) -> bool:
        """``call``, the attempt a reader read, ended: True once the call runs its next attempt
        (the server never processed this one, :mod:`minigrpc.driver.call_steps`), False if the
        call ends with it."""
        steps = self._steps
        if steps is None or self._connection is None or steps.attempt_ended(call):
            return False
        while self._call is call and self._status is None:
            if self._attempt_changed is None:
                self._attempt_changed = asyncio.get_running_loop().create_future()
            await self._attempt_changed
        return self._call is not call

    def _unary_result(self, call: ClientCall) -> Any:
        status = call.status
        assert status is not None and self._invocation is not None
        if status.code is StatusCode.OK:
            try:
                response = self._invocation.decode(call.messages[0], call)
            except CallFailed as exc:
                status = exc.status
            else:
                self._finish(status)
                return response
        self._finish(status)
        raise AioRpcError.from_status(status)

    async def _send_all(self, requests: Any) -> None:
        """Send a request iterator's messages (sync or async), then END_STREAM.

        An exception from the iterator ends the call UNKNOWN, as in the blocking API.
        """
        try:
            if hasattr(requests, "__aiter__"):
                async for request in requests:
                    if not await self._send_one(request):
                        return
            else:
                for request in requests:
                    if not await self._send_one(request):
                        return
        except CallFailed as exc:
            self._fail_locally(exc.status)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            self._fail_locally(REQUESTS_FAILED)
            return
        await self._close_requests()

    async def _current_attempt(self) -> bool:
        """Wait until the call has an attempt that runs (the one after an attempt that ended
        is being made); False once the call is over."""
        while self._status is None:
            call = self._call
            if call is not None and not call.done:
                return True
            steps = self._steps
            if call is not None and (steps is None or steps.attempt_ended(call)):
                return False  # that attempt is the call's outcome
            if self._attempt_changed is None:
                self._attempt_changed = asyncio.get_running_loop().create_future()
            await self._attempt_changed
        return False

    async def _send_one(self, request: Any) -> bool:
        """Send one request message on the current attempt, kept for the attempts to come
        while the call may be retried; False once the call is over."""
        invocation = self._invocation
        assert invocation is not None
        framed = invocation.frame(request)
        if self._hedge is not None:
            return self._status is None and await self._hedge.send(framed)
        if not await self._current_attempt():
            return False
        connection, call = self._connection, self._call
        assert connection is not None and call is not None
        if self._steps is not None:
            self._steps.message_sent(framed)  # no await since the attempt was looked at
        if await connection.send(call, framed, False, invocation.deadline):
            return True
        # The attempt ended meanwhile: a retry sends the message again, if there is one.
        return await self._current_attempt()

    async def _close_requests(self) -> None:
        """End the request stream on the current attempt and on any that follows."""
        if self._hedge is not None:
            await self._hedge.close_requests()
            return
        if not await self._current_attempt():
            return
        connection, call = self._connection, self._call
        assert connection is not None and call is not None and self._invocation is not None
        if self._steps is not None:
            self._steps.request_closed()
        await connection.close_request(call, self._invocation.deadline)

    def _fail_locally(self, status: CallStatus) -> None:
        """The request iterator or the serializer failed: the call ends with ``status`` on its
        current attempt, never tried again."""
        if self._hedge is not None:
            self._hedge.cancel(status)
        if self._steps is not None:
            self._steps.commit()
        connection, call = self._connection, self._call
        if connection is not None and call is not None:
            connection.cancel(call, status)

    def _finish(self, status: CallStatus) -> None:
        if self._status is not None:
            return
        self._status = status
        if self._steps is not None:
            self._steps.finish()
        if self._hedge is not None:
            self._hedge.ended(status.code_number)
        if not self._finished.done():
            self._finished.set_result(None)
        self._attempt_moved()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception as exc:  # the call's end may be a read: the connection goes on
                asyncio.get_running_loop().call_exception_handler(
                    {"message": "a call's done callback raised", "exception": exc}
                )

    def _cancel_locally(self, status: CallStatus) -> None:
        """End the call with ``status`` here; an error status the call already had stands.

        An OK status the application has not been given yet (a stream's responses still
        unread, :meth:`_responses_read`) gives way to ``status``, as in grpcio.
        """
        if self._steps is not None:
            self._steps.commit()  # ended here: never tried again
        if self._hedge is not None:
            self._hedge.cancel(status)
        connection, call = self._connection, self._call
        if connection is not None and call is not None:
            connection.cancel(call, status)
        elif call is not None and not call.done:
            finished(call, status)
        ended = call.status if call is not None else None
        self._finish(ended if ended is not None and ended.code is not StatusCode.OK else status)

    # -- grpcio's RpcContext ------------------------------------------------------------------

    def cancelled(self) -> bool:
        return self._status is not None and self._status.code is StatusCode.CANCELLED

    def done(self) -> bool:
        return self._status is not None

    def time_remaining(self) -> Optional[float]:
        deadline = self._invocation.deadline if self._invocation is not None else None
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def cancel(self) -> bool:
        """End the call CANCELLED with RST_STREAM(CANCEL); False if it had already ended."""
        if self._status is not None:
            return False
        self._locally_cancelled = True
        self._cancel_locally(CANCELLED)
        if self._task is not None:
            self._task.cancel()
        if self._sender is not None:
            self._sender.cancel()
        # A task cancelled before it first ran never runs at all (its ``finally`` neither):
        # what waits for the call to open must not wait for a stream that will never be.
        if not self._opened.done():
            self._opened.set_result(None)
        return True

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Run ``callback(call)`` once the call has ended (at once if it has)."""
        if self._status is not None:
            callback(self)
        else:
            self._callbacks.append(callback)

    # -- grpcio's Call ------------------------------------------------------------------------

    def _raise_for_status(self, status: CallStatus) -> None:
        """What reading or writing an ended call raises, as in grpcio: CancelledError once the
        application cancelled it, else the error its status is (nothing when OK)."""
        if self._locally_cancelled:
            raise asyncio.CancelledError()
        if status.code is not StatusCode.OK:
            raise AioRpcError.from_status(status)

    async def _wait_finished(self) -> CallStatus:
        await asyncio.shield(self._finished)
        assert self._status is not None
        return self._status

    async def initial_metadata(self) -> Metadata:
        """The server's response headers, once they arrive (empty for Trailers-Only)."""
        await self._settled()
        connection, call = self._connection, self._call
        if connection is not None and call is not None and not call.done:
            deadline = self._invocation.deadline if self._invocation is not None else None
            await connection.wait_for_headers(call, deadline)
        if call is not None:
            return Metadata.from_tuple(call.initial_metadata)
        return Metadata()

    async def trailing_metadata(self) -> Metadata:
        return Metadata.from_tuple((await self._wait_finished()).trailing_metadata)

    async def code(self) -> StatusCode:
        return (await self._wait_finished()).code

    async def details(self) -> str:
        return (await self._wait_finished()).details

    async def debug_error_string(self) -> str:
        status = await self._wait_finished()
        return "" if status.code is StatusCode.OK else str(status)

    async def wait_for_connection(self) -> None:
        """Return once the call is on a connection (its HEADERS sent) or has ended.

        Raises :class:`AioRpcError` if it ended with an error before that.
        """
        await asyncio.shield(self._opened)
        call = self._call
        if self._status is not None and self._status.code is not StatusCode.OK:
            if call is None or not call.stream_id:
                raise AioRpcError.from_status(self._status)

    def __repr__(self) -> str:
        state = "running" if self._status is None else str(self._status.code)
        return f"<{type(self).__name__} {state}>"


def _retrieve(task: "asyncio.Task[Any]") -> None:
    """Mark a task's outcome as seen: it reaches the user through the call, not the loop."""
    if not task.cancelled():
        task.exception()


def _resolve(
    outcome: "asyncio.Future[Any]", result: Any = None, error: Optional[BaseException] = None
) -> None:
    """Settle a unary call's outcome, unless an awaiter cancelled it first."""
    if outcome.done():
        return
    if error is None:
        outcome.set_result(result)
    else:
        outcome.set_exception(error)
        outcome.exception()  # seen: nobody need await a call that failed


class _UnaryResponseMixin(Call):
    def __await__(self) -> Any:
        """The response; a cancelled awaiter cancels the call (RST_STREAM(CANCEL))."""
        assert self._outcome is not None
        try:
            return (yield from self._outcome.__await__())
        except asyncio.CancelledError:
            self.cancel()
            raise


class _StreamResponseMixin(Call):
    _unary_response = False

    def _take_responses_by(self, style: str) -> None:
        if self._response_style and self._response_style != style:
            raise UsageError(MIXED_STYLES)
        self._response_style = style

    def __aiter__(self) -> AsyncIterator[Any]:
        """The responses; iterating again continues the same iterator, as in grpcio."""
        self._take_responses_by("iterator")
        if self._responses_iterator is None:
            self._responses_iterator = self._responses()
        return self._responses_iterator

    async def _responses(self) -> AsyncIterator[Any]:
        while True:
            response = await self._read()
            if response is EOF:
                return
            yield response

    async def read(self) -> Any:
        """The next response, or :data:`~minigrpc.aio.EOF` once the stream ended OK."""
        self._take_responses_by("read")
        return await self._read()

    async def _read(self) -> Any:
        if self._locally_cancelled:  # responses still buffered are not for the application
            raise asyncio.CancelledError()
        try:
            while True:
                await self._settled()
                connection, call, invocation = self._connection, self._call, self._invocation
                message = None
                if connection is not None and call is not None and invocation is not None:
                    message = await connection.receive(call, invocation.deadline)
                if message is not None or call is None or not await self._next_attempt(call):
                    break
        except asyncio.CancelledError:  # the reading task was cancelled: so is the call
            self.cancel()
            raise
        if message is None:
            self._raise_for_status(await self._wait_finished())
            return EOF
        assert call is not None and invocation is not None
        steps = self._steps
        if steps is not None and not steps.committed:
            steps.commit()  # the application has a response: no retry now
        try:
            return invocation.decode(message, call)
        except CallFailed as exc:
            self._cancel_locally(exc.status)
            raise AioRpcError.from_status(exc.status) from None


class _StreamRequestMixin(Call):
    _streaming_request = True

    async def write(self, request: Any) -> None:
        """Send one request message (only without a request iterator)."""
        if self._request_iterator is not None:
            raise UsageError(MIXED_STYLES)
        if self._half_closed:
            raise asyncio.InvalidStateError(HALF_CLOSED)
        if self._status is not None:  # grpcio: an ended call refuses writes, however it ended
            raise asyncio.InvalidStateError(FINISHED)
        await asyncio.shield(self._opened)
        self._raise_if_ended()
        try:
            sent = await self._send_one(request)
        except CallFailed as exc:
            self._fail_locally(exc.status)
            raise AioRpcError.from_status(exc.status) from None
        except asyncio.CancelledError:
            self.cancel()
            raise
        if not sent:
            self._raise_if_ended()

    async def done_writing(self) -> None:
        """End the request stream (only without a request iterator)."""
        if self._request_iterator is not None:
            raise UsageError(MIXED_STYLES)
        if self._half_closed:
            return
        self._half_closed = True
        await asyncio.shield(self._opened)
        await self._close_requests()

    def _raise_if_ended(self) -> None:
        """Refuse a write to an ended call: the error it ended with, else InvalidStateError.

        The server's status counts even before the application has it (an OK stream whose
        responses are unread, :meth:`_responses_read`): a writer must not wait for reads.
        """
        call = self._call
        status = self._status
        if status is None and call is not None:
            status = call.status
            steps = self._steps
            if status is not None and steps is not None and not steps.attempt_ended(call):
                return  # the attempt is tried again: the write goes to the next one
        if status is not None:
            self._raise_for_status(status)
            raise asyncio.InvalidStateError(FINISHED)


class UnaryUnaryCall(_UnaryResponseMixin, _interfaces.UnaryUnaryCall):
    """``await`` it for the response (grpcio's ``grpc.aio.UnaryUnaryCall``)."""


class UnaryStreamCall(_StreamResponseMixin, _interfaces.UnaryStreamCall):
    """``async for`` over it, or ``read()``, for the responses."""


class StreamUnaryCall(_StreamRequestMixin, _UnaryResponseMixin, _interfaces.StreamUnaryCall):
    """``write()``/``done_writing()`` (or a request iterator), then ``await`` the response."""


class StreamStreamCall(_StreamRequestMixin, _StreamResponseMixin, _interfaces.StreamStreamCall):
    """Both directions stream: ``write()``/``done_writing()`` and ``read()``/``async for``."""



__all__: Tuple[str, ...] = (
    "Call",
    "StreamStreamCall",
    "StreamUnaryCall",
    "UnaryStreamCall",
    "UnaryUnaryCall",
)
