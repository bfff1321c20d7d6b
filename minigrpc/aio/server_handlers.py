"""The asyncio server's calls, as tasks wait for them: a task per call, from its request to its
handler's answer.

What a call is, from its first event to its end, is decided by the driver
(:class:`minigrpc.driver.server_driver.ServerDriver`), for both servers; :class:`CallTasks`
carries out the part that is about tasks.  It is :mod:`minigrpc.blocking.server_handlers` for an
event loop: both take every per-call decision from the driver and
:mod:`minigrpc.driver.server_dispatch` (handler lookup, admission, (de)serialisation, the status
that ends a call), and differ only in how they wait.

* Each call runs as a task: its request awaited (and, with ``grpc.aio``'s coroutine server
  interceptors, its handler looked up through them first), the handler run, and its response and
  status handed to the driver.  ``async def`` handlers and async generators run on the loop;
  plain functions and generators run on the executor, as grpcio runs them.  The task starts once
  it has something to do: at once for a streamed request, when the request is whole for a unary
  one; until then a pending call is its context and a stall timer, as on the blocking server.
* A streamed request is taken from the protocol only when the handler reads, so unread messages
  hold the client's window back (RFC 9113 §5.2); a handler's ``write()`` (or ``yield``) waits
  while its responses waiting for the client's window cost
  :data:`~minigrpc.protocol.memory_budget.RESPONSE_HIGH_WATER` (each counted with its
  per-message overhead, so empty messages count too) or its connection is over its memory
  budget, and after :data:`~minigrpc.driver.server_driver.RESPONSES_PER_TURN` messages in a row
  it lets the event loop run (and all handlers together after
  :data:`~minigrpc.driver.server_driver.RESPONSES_PER_PASS` in one turn of the loop), so that
  handlers yielding tiny messages never keep the loop from its sockets.
* A call that ends without the handler's answer (RST_STREAM from the client, its deadline, the
  connection lost, the server stopped) cancels the handler's task, as grpcio's asyncio server
  does.
"""

import asyncio
import functools
import inspect
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Set, Tuple

from ..driver import handlers as _handlers
from ..driver import server_dispatch as _dispatch
from ..driver.logs import get_logger
from ..driver.server_driver import RESPONSES_PER_PASS, ServerDriver
from ..protocol.enums import StatusCode
from ..protocol.memory_budget import RESPONSE_HIGH_WATER
from ..protocol.server_events import CallStarted
from .servicer_context import ServicerContext, SyncRequests, SyncServicerContext

if TYPE_CHECKING:  # pragma: no cover
    from typing import Protocol

    from ..driver.server_driver import ServedConnection

    class EventLoopIO(Protocol):
        """What the calls need of the server's I/O (:class:`minigrpc.aio.server_loop.
        AsyncServerLoop`)."""

        def flush_soon(self, connection: ServedConnection) -> None: ...


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


def _is_async(behavior: Any) -> bool:
    return inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)


class CallTasks:
    """The calls of an asyncio server, as tasks wait for them (module docstring)."""

    def __init__(
        self, io: "EventLoopIO", driver: ServerDriver, executor: Optional[Executor]
    ) -> None:
        self._io = io
        self._driver = driver
        self._executor = executor
        #: What the calls' contexts read (:class:`~minigrpc.driver.server_call_state.CallState`).
        self.default_compression = driver.default_compression
        self.call_lock = driver.call_lock
        self._tasks: Set[asyncio.Task[None]] = set()
        #: Streamed responses all handlers handed over in this turn of the event loop.
        self._turn_responses = 0
        #: The event loop the calls' tasks run on, once the server serves.
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # serve_on()

    def serve_on(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def wait_all(self) -> None:
        """Until every call's task has ended (``stop()``)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    # -- what the driver has the event loop do (ServerIO) ----------------------------------

    def new_call(self, connection: "ServedConnection", event: CallStarted) -> ServicerContext:
        return ServicerContext(self, connection, event)

    def start_handler(self, call: ServicerContext) -> None:
        """The call's task: its handler, or with coroutine interceptors its lookup first."""
        coroutine = self._run_call(call) if call._counted else self._intercept_then_run(call)
        task = self._loop.create_task(coroutine)
        call._run_in(task)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def call_ended(self, call: ServicerContext, answered: bool) -> None:
        """Wake what the call's task waits for; unless the handler answered, cancel the task,
        as grpcio's asyncio server does."""
        call._wake()
        if not answered:
            call._cancel_task()

    def run_callbacks(self, call: ServicerContext, callbacks: List[Callable[..., Any]]) -> None:
        """Run the callbacks in order; as in grpcio, one that raises is logged and ends the
        run (the callbacks after it are not called), and the call's outcome stays as it was."""
        for callback in callbacks:
            try:
                callback(call)
            except Exception:
                _LOGGER.exception("an add_done_callback() callback raised")
                return

    # -- what the context hands over ---------------------------------------------------------

    def cancel(self, call: ServicerContext) -> None:
        self._driver.cancel_call(call)

    def send_initial_metadata(
        self, call: ServicerContext, headers: List[Tuple[bytes, bytes]], encoding: Optional[str]
    ) -> None:
        self._driver.send_initial_metadata(call, headers, encoding)

    async def read_request(self, call: ServicerContext) -> Optional[bytes]:
        """The next streamed request message, None at its end; raises
        :class:`~minigrpc.driver.server_dispatch.CallEndedError` once the call is over."""
        take = self._driver.take_request
        while True:
            if call._terminated:
                raise _dispatch.CallEndedError(call._termination_code or StatusCode.CANCELLED)
            message = take(call)
            if message is not None:
                self._io.flush_soon(call._connection)  # taking it may have returned window
                return message
            if call._request_closed and not call._terminated:
                return None
            if not call._terminated:
                await call._wait()

    async def send_response(self, call: ServicerContext, response: Any) -> None:
        """Queue one streamed response, after waiting while the call's unsent responses cost
        too much or its connection is over budget (the blocking server's rule,
        :class:`minigrpc.blocking.server_call.ResponseCredit`); raises CallEndedError once the
        call is over."""
        serialized = _dispatch.serialize_response(call._method, call._handler, response)
        if serialized is None:
            self._driver.finish(call, *_dispatch.outcome_without_response(call))
            raise _dispatch.CallEndedError(StatusCode.INTERNAL)
        served = call._connection
        protocol = served.protocol
        stream_id = call._stream_id
        while not call._terminated:
            if protocol.queued_response_cost(stream_id) >= RESPONSE_HIGH_WATER:
                await call._wait()  # woken by the flush that writes some of it
            elif protocol.memory.over_budget:
                # Reported by MemoryBudget.resumable() once under budget: the flush that finds
                # it so wakes this connection's calls (ServerDriver.resume_held_back).
                protocol.memory.holding_back()
                await call._wait()
            else:
                break
        if call._terminated or not self._driver.send_response(
            call, serialized, call._take_compress_flag()
        ):
            raise _dispatch.CallEndedError(call._termination_code or StatusCode.CANCELLED)
        self._io.flush_soon(served)
        yield_now = call._count_response()
        self._turn_responses += 1
        if self._turn_responses == 1:
            self._loop.call_soon(self._new_turn)  # runs first in the loop's next turn
        if yield_now or self._turn_responses >= RESPONSES_PER_PASS:
            # A handler that never awaits anything else would otherwise run until the high
            # water in one step of its task, and a hundred of them in one turn of the loop,
            # while the loop polls no socket and answers no PING (RFC 9113 §6.7).
            await asyncio.sleep(0)

    def _new_turn(self) -> None:
        """The event loop's next turn: the handlers' allowance of responses is whole again."""
        self._turn_responses = 0

    # -- the call's task ---------------------------------------------------------------------

    async def _intercept_then_run(self, call: ServicerContext) -> None:
        """Look the handler up through the server interceptors (grpcio's order: the first one
        outermost), then admit the call and run it."""
        table = self._driver.handlers
        interceptors = table.interceptors

        async def step(index: int, details: Any) -> Any:
            if index == len(interceptors):
                return table.lookup(details.method, details.invocation_metadata)
            return await interceptors[index].intercept_service(
                lambda following: step(index + 1, following), details
            )

        try:
            handler = await step(0, _handlers.HandlerCallDetails(call._method, call._metadata))
        except asyncio.CancelledError:
            return
        except Exception as exc:
            self._driver.reject(call, _dispatch.lookup_failed(call._method, exc))
            return
        if call._terminated or not self._driver.admit(call, handler):
            return
        await self._run_call(call)

    async def _run_call(self, call: ServicerContext) -> None:
        """The call's task: the request, the handler, the outcome (grpcio's semantics)."""
        handler = call._handler
        finish = self._driver.finish
        try:
            if handler.request_streaming:
                argument: Any = (
                    call._requests()
                    if _is_async(call._behavior)
                    else SyncRequests(call, self._loop)
                )
            else:
                request = await self._unary_request(call)
                if request is None:
                    return  # the call ended before its request was complete
                try:
                    argument = _dispatch.deserialize_request(call._method, handler, request)
                except _dispatch.BadRequest:
                    finish(call, *_dispatch.BAD_REQUEST)
                    return
            if handler.response_streaming:
                await self._stream_responses(call, argument)
                finish(call, *_dispatch.outcome_of_stream_end(call))
                return
            if inspect.iscoroutinefunction(call._behavior):
                response = await call._behavior(argument, call)
                finish(call, *_dispatch.outcome_of_return(call, handler, response))
                return
            memory = call._connection.protocol.memory
            running = self._loop.run_in_executor(
                self._executor, self._run_sync_unary, call, argument
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
            finish(call, *outcome)
        except asyncio.CancelledError:
            if not call._terminated:
                # Cancelled by the application, not by the call's end: the client still
                # waits, so it learns the call was cancelled; the cancellation goes on.
                finish(call, StatusCode.CANCELLED, "the handler was cancelled")
                raise
        except Exception as exc:
            failure = _dispatch.outcome_of_exception(call, exc)
            if failure is not None:
                finish(call, *failure)

    def _run_sync_unary(self, call: ServicerContext, argument: Any) -> _dispatch.Outcome:
        """Executor thread: a plain-function unary-response handler and the outcome it returns,
        its response reserved in the connection's memory account before it goes back to the
        loop, as the blocking server does (:data:`~minigrpc.driver.server_dispatch.OVER_BUDGET`
        if the connection is over budget)."""
        behavior: Any = call._behavior
        response = behavior(argument, SyncServicerContext(call, self._loop))
        outcome = _dispatch.outcome_of_return(call, call._handler, response)
        message = outcome.message
        if message is not None and not call._connection.protocol.memory.reserve(len(message)):
            return _dispatch.OVER_BUDGET
        return outcome

    async def _stream_responses(self, call: ServicerContext, argument: Any) -> None:
        """Send what a response-streaming handler yields (or writes), in any of its forms."""
        behavior: Any = call._behavior
        if inspect.isasyncgenfunction(behavior):
            responses = behavior(argument, call)
            try:
                async for response in responses:
                    await self.send_response(call, response)
            finally:
                await responses.aclose()
            return
        if inspect.iscoroutinefunction(behavior):
            await behavior(argument, call)  # the reader/writer style: it calls write()
            return
        # A plain function returning an iterator: both it and the iteration run on the executor.
        responses = await self._loop.run_in_executor(
            self._executor, behavior, argument, SyncServicerContext(call, self._loop)
        )
        try:
            while True:
                response = await self._loop.run_in_executor(
                    self._executor, next, responses, _END
                )
                if response is _END:
                    return
                await self.send_response(call, response)
        finally:
            close = getattr(responses, "close", None)
            if close is not None:
                self._loop.run_in_executor(self._executor, _close_quietly, close)

    async def _unary_request(self, call: ServicerContext) -> Optional[bytes]:
        """The whole unary request; None if the call ended first.  Only a call looked up
        through interceptors starts before its request is whole (the driver watches its stall
        meanwhile)."""
        while call._request is None:
            if call._terminated:
                return None
            await call._wait()
        return call._request
