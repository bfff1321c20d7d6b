"""The asyncio server's calls: a task per call, from the protocol's events to the handler and back.

:class:`CallTasks` is the half of :class:`minigrpc.aio.server_loop.AioServerLoop` that knows
what a call is; the loop itself (:mod:`minigrpc.aio.server_loop`) only moves bytes between
connections and the event loop, runs their timers and stops.  It is
:mod:`minigrpc.blocking.server_handlers` for an event loop: both take every per-call decision from
:mod:`minigrpc.driver.server_dispatch` (handler lookup, admission, (de)serialisation, the status
that ends a call) and :mod:`minigrpc.driver.server_timers`, and differ only in how they wait.

* Each call runs as a task: the handler is looked up (awaiting ``grpc.aio`` server
  interceptors), its request awaited, and its response and status handed to the protocol.
  ``async def`` handlers and async generators run on the loop; plain functions and generators
  run on the executor, as grpcio runs them.  The task starts once it has something to do: at
  once for a streamed request, when the request is whole for a unary one; until then a
  pending call is its context and a stall timer, as on the blocking server.
* A streamed request is taken from the protocol only when the handler reads, so unread messages
  hold the client's window back (RFC 9113 §5.2); a handler's ``write()`` (or ``yield``) waits
  while its responses waiting for the client's window cost
  :data:`~minigrpc.blocking.server_call.RESPONSE_HIGH_WATER` (each counted with its per-message
  overhead, so empty messages count too) or its connection is over its memory budget, and
  after :data:`~minigrpc.blocking.server_call.RESPONSES_PER_TURN` messages in a row it lets the
  event loop run (and all handlers together after
  :data:`~minigrpc.blocking.server_call.RESPONSES_PER_PASS` in one turn of the loop), so that
  handlers yielding tiny messages never keep the loop from its sockets.
* A call that ends without the handler's answer (RST_STREAM from the client, its deadline, the
  connection lost, the server stopped) cancels the handler's task, as grpcio's asyncio server
  does.
"""

import asyncio
import functools
import inspect
import time
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, List, Optional, Set, Tuple

from ..blocking.server_call import RESPONSE_HIGH_WATER, RESPONSES_PER_PASS, RESPONSES_PER_TURN
from ..driver import handlers as _handlers
from ..driver import server_dispatch as _dispatch
from ..driver.logs import get_logger
from ..driver.server_options import ServerOptions
from ..driver.server_timers import cancel_stalled, stall_due
from ..protocol import server_protocol as _protocol
from ..protocol import status
from ..protocol.enums import StatusCode
from .errors import AbortError
from .servicer_context import ServicerContext, SyncRequests, SyncServicerContext

if TYPE_CHECKING:  # pragma: no cover
    from .server_loop import AioConnection

__all__ = ["CallTasks"]

_LOGGER = get_logger("minigrpc.server")

#: What ``next()`` returns at the end of a synchronous response generator.
_END = object()


def _release_reservation(memory: Any, running: "asyncio.Future[Any]") -> None:
    """A synchronous handler's call ended before its response came back: release the memory
    its thread reserved for it (and retrieve its exception, which nobody awaits)."""
    if running.cancelled() or running.exception() is not None:
        return
    message = running.result().message
    if message is not None:
        memory.unreserve(len(message))


def _close_quietly(close: Any) -> None:
    """Close a synchronous response generator on the executor; one that a cancelled ``next()``
    is still running in cannot be closed (ValueError), and ends with that ``next()``."""
    try:
        close()
    except ValueError:
        pass
    except Exception:
        _LOGGER.exception("closing a response generator failed")


class CallTasks:
    """The calls of an asyncio server (module docstring); :class:`AioServerLoop` adds the I/O."""

    def __init__(
        self,
        executor: Optional[Executor],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        self._executor = executor
        self._options = options
        self._maximum_concurrent_rpcs = maximum_concurrent_rpcs
        self._default_compression = options.compression if compression is None else compression
        self._handler_table = _dispatch.HandlerTable()
        self._tasks: Set[asyncio.Task[None]] = set()
        self._active_rpcs = 0
        #: Streamed responses all handlers handed over in this turn of the event loop.
        self._turn_responses = 0
        #: The event loop the calls' tasks run on, once the server serves.
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # _serve()

    def _handle_events(self, connection: "AioConnection", events: List[Any]) -> None:
        for event in events:
            if isinstance(event, _protocol.RequestReady):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    context._request = event.message
                    context._request_encoding = event.encoding
                    if context._stall_timer is not None:
                        context._stall_timer.cancel()
                        context._stall_timer = None
                    if context._task is None and context._counted:
                        # Admitted while its request was incomplete: its task starts now.
                        self._spawn(context, self._run_call(context))
                    else:
                        context._wake()
            elif isinstance(event, _protocol.CallStarted):
                self._start_call(connection, event)
            elif isinstance(event, _protocol.CallTerminated):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    self._end_call(connection, context, event.code)
            elif isinstance(event, (_protocol.RequestMessage, _protocol.RequestEnded)):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    if isinstance(event, _protocol.RequestEnded):
                        context._request_closed = True
                    context._wake()

    def _start_call(self, connection: "AioConnection", event: _protocol.CallStarted) -> None:
        connection.idle_since = time.monotonic()
        context = ServicerContext(
            self,
            connection,
            event.stream_id,
            event.method,
            event.metadata,
            event.deadline,
            self._default_compression,
        )
        connection.calls[event.stream_id] = context
        if event.deadline is not None:
            context._timer = self._loop.call_later(
                max(0.0, event.deadline - time.monotonic()), self._expire_call, context
            )
        if self._handler_table.interceptors:
            # grpc.aio interceptors are coroutines: the lookup, and the call, run in a task.
            self._spawn(context, self._intercept_then_run(context))
            return
        try:
            handler = self._handler_table.lookup(event.method, event.metadata)
        except Exception as exc:
            self._reject(context, _dispatch.lookup_failed(event.method, exc))
            return
        if not self._admit(context, handler) or context._task is not None:
            return  # rejected, or its whole request came with the admission: started
        if context._handler.request_streaming:
            self._spawn(context, self._run_call(context))
            return
        # A unary request still arriving: the task starts with its RequestReady.  Until then
        # the call is its context and, against slowloris, a timer: no task, no event, as on
        # the blocking server (a pending call costs what it costs there).
        self._watch_stall(context)

    def _watch_stall(self, context: ServicerContext) -> None:
        """Arm the ``minigrpc.request_stall_timeout_ms`` check of a call whose unary request
        is incomplete (:func:`~minigrpc.driver.server_timers.stall_due`)."""
        stall = self._options.request_stall_timeout
        if stall is None or context._request is not None:
            return
        due = stall_due(context._connection.protocol, context._stream_id, stall)
        if due is not None:
            context._stall_timer = self._loop.call_later(
                max(0.0, due - time.monotonic()), self._check_stall, context
            )

    def _check_stall(self, context: ServicerContext) -> None:
        """The request may have stalled: cancel the call if it made no progress for the
        stall timeout (:func:`~minigrpc.driver.server_timers.cancel_stalled`), else look again when
        it would have."""
        context._stall_timer = None
        connection = context._connection
        stall = self._options.request_stall_timeout
        if (
            stall is None
            or context._request is not None
            or connection.calls.get(context._stream_id) is not context
        ):
            return
        due = stall_due(connection.protocol, context._stream_id, stall)
        if due is None:
            return
        if time.monotonic() < due:
            self._watch_stall(context)
            return
        _LOGGER.debug(
            "cancelling stream %d from %s: its request made no progress for %.1f s",
            context._stream_id,
            connection.peer,
            stall,
        )
        events = cancel_stalled(connection.protocol, context._stream_id, stall)
        self._handle_events(connection, events)
        connection.schedule_flush()

    def _spawn(self, context: ServicerContext, coroutine: Any) -> None:
        task = self._loop.create_task(coroutine)
        context._connection._started_calls = True  # its read flushes after the task's step
        context._task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _intercept_then_run(self, context: ServicerContext) -> None:
        """Look the handler up through the server interceptors (grpcio's order: the first one
        outermost), then run the call."""
        interceptors = self._handler_table.interceptors
        table = self._handler_table

        async def step(index: int, details: Any) -> Any:
            if index == len(interceptors):
                return table.lookup(details.method, details.invocation_metadata)
            return await interceptors[index].intercept_service(
                lambda following: step(index + 1, following), details
            )

        try:
            details = _handlers.HandlerCallDetails(context._method, context._metadata)
            handler = await step(0, details)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            self._reject(context, _dispatch.lookup_failed(context._method, exc))
            return
        if context._terminated or not self._admit(context, handler):
            return
        await self._run_call(context)

    def _admit(self, context: ServicerContext, handler: Any) -> bool:
        """Admit the call (:meth:`~minigrpc.driver.server_dispatch.HandlerTable.admit`) or reject
        it."""
        admission = self._handler_table.admit(
            context._method, handler, self._active_rpcs, self._maximum_concurrent_rpcs
        )
        if isinstance(admission, _dispatch.Outcome):
            self._reject(context, admission)
            return False
        context._handler = admission.handler
        context._behavior = admission.behavior
        context._counted = True
        self._active_rpcs += 1
        connection = context._connection
        events = connection.protocol.accept_call(
            context._stream_id, bool(admission.handler.request_streaming)
        )
        if events:
            self._handle_events(connection, events)
            connection.schedule_flush()
        return True

    def _reject(self, context: ServicerContext, outcome: _dispatch.Outcome) -> None:
        connection = context._connection
        connection.protocol.reject_call(context._stream_id, outcome.code, outcome.details)
        self._end_call(connection, context, outcome.code, cancel=False)
        connection.schedule_flush()

    async def _run_call(self, context: ServicerContext) -> None:
        """The call's task: the request, the handler, the outcome (grpcio's semantics)."""
        handler = context._handler
        try:
            if handler.request_streaming:
                argument: Any = (
                    context._requests()
                    if self._is_async(context._behavior)
                    else SyncRequests(context, self._loop)
                )
            else:
                request = await self._unary_request(context)
                if request is None:
                    return  # the call ended before its request was complete
                try:
                    argument = _dispatch.deserialize_request(context._method, handler, request)
                except _dispatch.BadRequest:
                    self._finish(context, *_dispatch.BAD_REQUEST)
                    return
            if handler.response_streaming:
                await self._stream_responses(context, argument)
                self._finish(context, *_dispatch.outcome_of_stream_end(context))
                return
            if inspect.iscoroutinefunction(context._behavior):
                response = await context._behavior(argument, context)
                self._finish(context, *_dispatch.outcome_of_return(context, handler, response))
                return
            memory = context._connection.protocol.memory
            running = self._loop.run_in_executor(
                self._executor, self._run_sync_unary, context, argument
            )
            try:
                # Shielded: a call that ends meanwhile must still release what the thread
                # reserves when it finishes.
                outcome = await asyncio.shield(running)
            except asyncio.CancelledError:
                running.add_done_callback(functools.partial(_release_reservation, memory))
                raise
            if outcome.message is not None:
                memory.unreserve(len(outcome.message))  # charged as queued, if it is
            self._finish(context, *outcome)
        except asyncio.CancelledError:
            if not context._terminated:
                # Cancelled by the application, not by the call's end: the client still
                # waits, so it learns the call was cancelled; the cancellation goes on.
                self._finish(context, StatusCode.CANCELLED, "the handler was cancelled")
                raise
        except Exception as exc:
            failure = _dispatch.outcome_of_exception(context, exc)
            if failure is not None:
                self._finish(context, *failure)

    @staticmethod
    def _is_async(behavior: Any) -> bool:
        return inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)

    def _run_sync_unary(self, context: ServicerContext, argument: Any) -> _dispatch.Outcome:
        """Executor thread: a plain-function unary-response handler and the outcome it returns,
        its response reserved in the connection's memory account before it goes back to the
        loop, as the blocking server does (:data:`~minigrpc.driver.server_dispatch.OVER_BUDGET` if
        the
        connection is over budget)."""
        behavior: Any = context._behavior
        response = behavior(argument, SyncServicerContext(context, self._loop))
        outcome = _dispatch.outcome_of_return(context, context._handler, response)
        message = outcome.message
        if message is not None and not context._connection.protocol.memory.reserve(len(message)):
            return _dispatch.OVER_BUDGET
        return outcome

    async def _stream_responses(self, context: ServicerContext, argument: Any) -> None:
        """Send what a response-streaming handler yields (or writes), in any of its forms."""
        behavior: Any = context._behavior
        if inspect.isasyncgenfunction(behavior):
            responses = behavior(argument, context)
            try:
                async for response in responses:
                    await self._send_response(context, response)
            finally:
                await responses.aclose()
            return
        if inspect.iscoroutinefunction(behavior):
            await behavior(argument, context)  # the reader/writer style: it calls write()
            return
        # A plain function returning an iterator: both it and the iteration run on the executor.
        responses = await self._loop.run_in_executor(
            self._executor, behavior, argument, SyncServicerContext(context, self._loop)
        )
        try:
            while True:
                response = await self._loop.run_in_executor(
                    self._executor, next, responses, _END
                )
                if response is _END:
                    return
                await self._send_response(context, response)
        finally:
            close = getattr(responses, "close", None)
            if close is not None:
                self._loop.run_in_executor(self._executor, _close_quietly, close)

    async def _unary_request(self, context: ServicerContext) -> Optional[bytes]:
        """The whole unary request; None if the call ended first.  Only a call looked up
        through interceptors starts before its request is whole; its stall is watched by
        the same timer (:meth:`_watch_stall`)."""
        if context._request is None and context._stall_timer is None:
            self._watch_stall(context)
        while context._request is None:
            if context._terminated:
                return None
            await context._wait()
        return context._request

    async def _read_request(self, context: ServicerContext) -> Optional[bytes]:
        """The next streamed request message, None at its end; raises
        :class:`~minigrpc.driver.server_dispatch.CallEndedError` once the call is over."""
        connection = context._connection
        protocol = connection.protocol
        while True:
            if context._terminated:
                raise _dispatch.CallEndedError(context._termination_code or StatusCode.CANCELLED)
            try:
                message = protocol.take_request(context._stream_id)
            except status.CallError as exc:
                events = protocol.fail_call(context._stream_id, exc.code, str(exc))
                self._handle_events(connection, events)
                connection.schedule_flush()
                continue
            if message is not None:
                connection.schedule_flush()  # taking it may have returned window
                return message
            if context._request_closed:
                return None
            await context._wait()

    def _deserialize_streamed(self, context: ServicerContext, message: bytes) -> Any:
        deserializer = context._handler.request_deserializer
        if deserializer is None:
            return message
        try:
            return deserializer(message)
        except Exception:
            _dispatch.record_bad_request(context)
            raise AbortError() from None

    async def _send_response(self, context: ServicerContext, response: Any) -> None:
        """Queue one streamed response, after waiting while the call's unsent responses cost
        too much or its connection is over budget (the blocking server's rule,
        :class:`minigrpc.blocking.server_call.ResponseCredit`); raises CallEndedError once the call
        is
        over."""
        serialized = _dispatch.serialize_response(context._method, context._handler, response)
        if serialized is None:
            self._finish(context, *_dispatch.outcome_without_response(context))
            raise _dispatch.CallEndedError(StatusCode.INTERNAL)
        connection = context._connection
        protocol = connection.protocol
        stream_id = context._stream_id
        while not context._terminated:
            if protocol.queued_response_cost(stream_id) >= RESPONSE_HIGH_WATER:
                await context._wait()  # woken by the flush that writes some of it
            elif protocol.memory.over_budget:
                # Reported by MemoryBudget.resumable() once under budget: the flush that finds
                # it so wakes this connection's calls (AioServerLoop._resume_held_back).
                protocol.memory.holding_back()
                await context._wait()
            else:
                break
        if context._terminated:
            raise _dispatch.CallEndedError(context._termination_code or StatusCode.CANCELLED)
        compress = context._compress_next
        context._compress_next = True  # disable_next_message_compression is per message
        too_large = context._send_message_on(protocol, serialized, compress)
        if too_large is not None:
            self._finish(context, too_large.code, str(too_large))
            raise _dispatch.CallEndedError(too_large.code)
        context._initial_metadata_sent = True  # the first message sent the response headers
        connection.schedule_flush()
        context._sent_in_turn += 1
        self._turn_responses += 1
        if self._turn_responses == 1:
            self._loop.call_soon(self._new_turn)  # runs first in the loop's next turn
        if (
            context._sent_in_turn >= RESPONSES_PER_TURN
            or self._turn_responses >= RESPONSES_PER_PASS
        ):
            # A handler that never awaits anything else would otherwise run until the high
            # water in one step of its task, and a hundred of them in one turn of the loop,
            # while the loop polls no socket and answers no PING (RFC 9113 §6.7).
            context._sent_in_turn = 0
            await asyncio.sleep(0)

    def _new_turn(self) -> None:
        """The event loop's next turn: the handlers' allowance of responses is whole again."""
        self._turn_responses = 0

    def _send_initial_metadata(
        self, context: ServicerContext, headers: List[Tuple[bytes, bytes]], encoding: Optional[str]
    ) -> None:
        connection = context._connection
        if connection.calls.get(context._stream_id) is context:
            connection.protocol.send_initial_metadata(context._stream_id, headers, encoding)
            connection.schedule_flush()

    def _finish(
        self,
        context: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes] = None,
    ) -> None:
        """The handler's status (and unary response) on the wire, then the call's end."""
        connection = context._connection
        if connection.calls.get(context._stream_id) is not context:
            return  # cancelled, expired or disconnected meanwhile: nobody waits for the answer
        context._finish_on(connection.protocol, code, details, message)
        self._end_call(connection, context, code, cancel=False)
        connection.schedule_flush()

    def _expire_call(self, context: ServicerContext) -> None:
        connection = context._connection
        if connection.calls.get(context._stream_id) is context:
            self._handle_events(connection, connection.protocol.expire_call(context._stream_id))
            connection.schedule_flush()

    def _cancel_call(self, context: ServicerContext) -> None:
        connection = context._connection
        if connection.calls.get(context._stream_id) is context:
            self._handle_events(connection, connection.protocol.cancel_call(context._stream_id))
            connection.schedule_flush()

    def _end_call(
        self,
        connection: "AioConnection",
        context: ServicerContext,
        code: StatusCode,
        cancel: bool = True,
    ) -> None:
        """The one place a call ends, however it ends: forget it, wake and (unless the handler
        answered) cancel its task, run its done callbacks."""
        if connection.calls.pop(context._stream_id, None) is None:
            return
        if context._counted:
            self._active_rpcs -= 1
        if not connection.calls:
            connection.idle_since = time.monotonic()
        if context._timer is not None:
            context._timer.cancel()
        if context._stall_timer is not None:
            context._stall_timer.cancel()
            context._stall_timer = None
        context._terminated = True
        context._termination_code = code
        context._wake()
        task = context._task
        if cancel and task is not None and not task.done():
            task.cancel()
        callbacks, context._callbacks = context._callbacks, None
        if callbacks:
            self._run_done_callbacks(context, callbacks)

    def _run_done_callbacks(self, context: ServicerContext, callbacks: List[Any]) -> None:
        """Run the callbacks in order; as in grpcio, one that raises is logged and ends the
        run (the callbacks after it are not called), and the call's outcome stays as it was."""
        for callback in callbacks:
            try:
                callback(context)
            except Exception:
                _LOGGER.exception("an add_done_callback() callback raised")
                return
