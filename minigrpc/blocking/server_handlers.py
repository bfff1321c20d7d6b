"""The blocking server's calls: from the protocol's call events to the handler and back.

:class:`CallHandling` is the half of :class:`minigrpc.blocking.server_loop.ServerLoop` that knows
what a call is; the loop itself (:mod:`minigrpc.blocking.server_loop`) only moves bytes, runs
timers and stops. It starts a call when the protocol reports one
(:class:`~minigrpc.protocol.server_events.CallStarted`), finds and admits its handler
(:mod:`minigrpc.driver.server_dispatch`), feeds a request-streaming handler its messages as they
arrive, runs the handler on the executor, hands its streamed responses and its outcome back to the
protocol, and ends the call however it ends.

Threads.  The I/O thread runs everything that touches a connection's protocol (its state
is not thread-safe): the methods below that take a ``connection``, and
:meth:`CallHandling._write_outcome` and :meth:`CallHandling._send_responses`.  Handler threads
run :meth:`CallHandling._run_handler` and what it calls; what they have for the wire goes
through the loop (:meth:`~minigrpc.blocking.server_loop.ServerLoop._post`,
:meth:`~minigrpc.blocking.server_loop.ServerLoop._send_outcome`).  With the
``minigrpc.unary_handlers_on_io_thread`` option, unary-unary handlers run on the I/O thread
itself instead (:meth:`CallHandling._submit`), as grpclib's do on its event loop.
``add_callback`` callbacks run on a thread of their own, so a slow callback holds neither.

Everything a server decides per call that does not depend on how it waits (handler lookup,
admission, (de)serialisation, the status that ends a call) is
:mod:`minigrpc.driver.server_dispatch`, shared with the asyncio server; what is here is how threads
wait for it.
"""

import collections
import concurrent.futures
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Deque, List, Optional, Set, Tuple

from ..driver import server_dispatch as _dispatch
from ..driver.logs import get_logger
from ..driver.server_options import ServerOptions
from ..driver.server_timers import cancel_stalled, stall_due
from ..protocol import server_protocol as _protocol
from ..protocol import status
from ..protocol.enums import StatusCode
from .server_call import RESPONSES_PER_PASS, RESPONSES_PER_TURN, RequestStream, ResponseCredit
from .servicer_context import ServicerContext, _Abort

if TYPE_CHECKING:  # pragma: no cover
    from .server_loop import BlockingServerConnection

__all__ = ["CallHandling"]

#: The server's logger (handler exceptions); named after the public API.
_LOGGER = get_logger("minigrpc.server")


class CallHandling:
    """The calls of a blocking server (module docstring); :class:`ServerLoop` adds the I/O."""

    def __init__(
        self,
        thread_pool: Optional[concurrent.futures.Executor],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        self._options = options
        self._owns_executor = thread_pool is None
        self._executor: concurrent.futures.Executor = thread_pool or (
            concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix="minigrpc-handler",
            )
        )
        self._maximum_concurrent_rpcs = maximum_concurrent_rpcs
        self._default_compression = options.compression if compression is None else int(compression)
        #: The registered and generic handlers and the server interceptors around them.
        self._handler_table = _dispatch.HandlerTable()
        self._active_rpcs = 0
        self._callback_lock = threading.Lock()
        #: Calls whose request messages move on in the next pass (see :meth:`_pull_requests`).
        self._pulls_posted: Set[ServicerContext] = set()
        #: Request messages the current pass may still move to handlers.
        self._pass_messages = _protocol.PASS_MESSAGES
        #: Streamed response messages the current pass may still queue (:meth:`_send_responses`).
        self._pass_responses = RESPONSES_PER_PASS
        #: Handler runs found in the current pass of the I/O loop, submitted together once the
        #: pass has read every ready socket (:meth:`_dispatch`); None outside a pass. The I/O
        #: thread holds the loop's I/O lock for the whole pass, so only it ever sees a list here.
        self._held_dispatches: Optional[List[Tuple[Any, ...]]] = None
        self._callback_queue: Deque[List[Callable[[], Any]]] = collections.deque()
        self._callback_ready = threading.Condition(threading.Lock())
        self._callback_thread: Optional[threading.Thread] = None
        self._callbacks_closing = False

    # -- what the I/O loop provides (minigrpc.blocking.server_loop.ServerLoop)
    # ----------------------------

    #: Connections with output to flush at the end of the loop's pass.
    _dirty: Set["BlockingServerConnection"]

    def _post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the I/O thread soon."""
        raise NotImplementedError

    def _add_timer(self, when: float, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the I/O thread at ``when`` (``time.monotonic()``)."""
        raise NotImplementedError

    def _send_outcome(
        self, context: ServicerContext, code: StatusCode, details: str, message: Optional[bytes]
    ) -> None:
        """Handler thread: have the call's outcome written (:meth:`_write_outcome`)."""
        raise NotImplementedError

    def _internal_error(self, connection: Optional["BlockingServerConnection"]) -> None:
        """A bug while serving ``connection``: log it and drop that connection only."""
        raise NotImplementedError

    # -- the loop's pass -------------------------------------------------------------------------

    def _begin_pass(self) -> None:
        """A pass of the I/O loop starts: hold its handler runs, renew its message allowance."""
        self._held_dispatches = []
        self._pass_messages = _protocol.PASS_MESSAGES
        self._pass_responses = RESPONSES_PER_PASS

    # -- starting calls (I/O thread) -------------------------------------------------------------

    def _handle_events(
        self, connection: "BlockingServerConnection", events: List[_protocol.CallEvent]
    ) -> None:
        started: Optional[List[ServicerContext]] = None
        for event in events:
            if isinstance(event, _protocol.RequestReady):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    context._request_encoding = event.encoding
                    context._request_complete = True
                    self._dispatch(connection, context, event.message)
            elif isinstance(event, _protocol.CallStarted):
                context = self._start_call(connection, event)
                if context is not None:
                    if started is None:
                        started = []
                    started.append(context)
            elif isinstance(event, _protocol.CallTerminated):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    self._end_call(connection, context, event.code)
            elif isinstance(event, (_protocol.RequestMessage, _protocol.RequestEnded)):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    if isinstance(event, _protocol.RequestEnded):
                        context._request_closed = True
                    self._pull_requests(connection, context)
        stall = self._options.request_stall_timeout
        if started and stall is not None:
            # A request that arrived whole with its headers (the usual unary call) needs no
            # timer; one still incomplete gets the slowloris check (module docstring).
            due = time.monotonic() + stall
            for context in started:
                if not context._request_complete and (
                    connection.calls.get(context._stream_id) is context
                ):
                    self._add_timer(due, self._check_stall, connection, context)

    def _check_stall(
        self, connection: "BlockingServerConnection", context: ServicerContext
    ) -> None:
        """``minigrpc.request_stall_timeout_ms``: cancel a call whose request stopped arriving
        (:mod:`minigrpc.driver.server_timers`); the handler never ran."""
        stall = self._options.request_stall_timeout
        stream_id = context._stream_id
        if (
            stall is None
            or context._request_complete
            or connection.calls.get(stream_id) is not context
        ):
            return
        due = stall_due(connection.protocol, stream_id, stall)
        if due is None:
            return
        if time.monotonic() < due:
            self._add_timer(due, self._check_stall, connection, context)
            return
        _LOGGER.debug(
            "cancelling stream %d from %s: its request made no progress for %.1f s",
            stream_id,
            connection.peer,
            stall,
        )
        self._handle_events(connection, cancel_stalled(connection.protocol, stream_id, stall))
        self._dirty.add(connection)

    def _start_call(
        self, connection: "BlockingServerConnection", event: _protocol.CallStarted
    ) -> Optional[ServicerContext]:
        """Find the handler and create the call's context; None if the call was rejected."""
        connection.idle_since = time.monotonic()
        protocol = connection.protocol
        admission: Any
        try:
            handler = self._handler_table.find(event.method, event.metadata)
        except Exception as exc:
            admission = _dispatch.lookup_failed(event.method, exc)
        else:
            admission = self._handler_table.admit(
                event.method, handler, self._active_rpcs, self._maximum_concurrent_rpcs
            )
        if isinstance(admission, _dispatch.Outcome):
            protocol.reject_call(event.stream_id, admission.code, admission.details)
            return None
        handler = admission.handler
        context = ServicerContext(
            self, connection, event.stream_id, event.method, event.metadata, event.deadline, handler
        )
        context._behavior = admission.behavior
        connection.calls[event.stream_id] = context
        self._active_rpcs += 1
        if event.deadline is not None:
            self._add_timer(event.deadline, self._expire_call, connection, context)
        request_streaming = bool(handler.request_streaming)
        if handler.response_streaming:
            context._response_credit = ResponseCredit(protocol.memory)
            connection.senders.add(context)
        if request_streaming:
            # The handler starts now and reads requests as they come (no stall timer: a stream
            # may pause, and its handler decides how long to wait).
            context._request_complete = True
            context._request_encoding = protocol.request_compressed_with(event.stream_id)
            context._requests = RequestStream(
                handler.request_deserializer,
                lambda: self._post(self._pull_requests, connection, context),
                lambda: self._bad_request_message(context),
                protocol.memory,
            )
            self._dispatch(connection, context, None)
        accepted = protocol.accept_call(event.stream_id, request_streaming)
        if accepted:
            self._handle_events(connection, accepted)
        return context

    def _pull_requests(
        self, connection: "BlockingServerConnection", context: ServicerContext
    ) -> None:
        """Move waiting request messages into the handler's iterator while it has room.

        At most :data:`minigrpc.http2.flood.PASS_MESSAGES` in one pass of the loop, for all
        calls together: a handler's queue holds ten thousand tiny messages, and moving them
        all at once would hold the I/O thread; the rest moves in the next passes, after the
        other connections had their turn."""
        requests = context._requests
        if requests is None or connection.calls.get(context._stream_id) is not context:
            return
        protocol = connection.protocol
        stream_id = context._stream_id
        left = self._pass_messages
        message: Optional[bytes] = b""
        try:
            while message is not None:
                room = requests.room
                if room <= 0:
                    requests.stall()
                    break
                if left <= 0:
                    if context not in self._pulls_posted:
                        self._pulls_posted.add(context)
                        self._post(self._pull_posted, connection, context)
                    break
                batch: List[bytes] = []
                while room > 0 and left > 0:
                    message = protocol.take_request(stream_id)
                    if message is None:
                        break
                    batch.append(message)
                    room -= len(message) + RequestStream.MESSAGE_OVERHEAD
                    left -= 1
                if batch:
                    requests.put_many(batch)
            if message is None and context._request_closed:
                requests.end()
        except status.CallError as exc:
            self._handle_events(connection, protocol.fail_call(stream_id, exc.code, str(exc)))
        self._pass_messages = left
        self._dirty.add(connection)  # taking messages may have returned window

    def _pull_posted(
        self, connection: "BlockingServerConnection", context: ServicerContext
    ) -> None:
        """The rest of a pull cut short by :data:`minigrpc.http2.flood.PASS_MESSAGES`."""
        self._pulls_posted.discard(context)
        self._pull_requests(connection, context)

    def _bad_request_message(self, context: ServicerContext) -> BaseException:
        """A streamed request that does not deserialize ends the call (grpcio: INTERNAL)."""
        _dispatch.record_bad_request(context)
        return _Abort()

    def _dispatch(
        self,
        connection: "BlockingServerConnection",
        context: ServicerContext,
        request: Optional[bytes],
    ) -> None:
        """Run the call's handler on the executor; from the I/O loop, at the end of its pass.

        A handler thread woken while the I/O thread is still reading takes the GIL at the I/O
        thread's next ``recv()`` or ``send()``, and the I/O thread then waits to get it back:
        two futex calls per hand-over.  With a connection per client thread, one pass reads
        several sockets, one call each, and ``strace -c -f`` counted 9.3 futex calls per call
        against 2.2 when all the handlers of a pass start after its reads (and 2.2 with the
        same load on one connection, where one read brings several calls anyway).  In A/B runs
        that was 4-6% more calls/s and less CPU per call with a connection per thread, and no
        change on one connection or for a lone call's latency.
        """
        held = self._held_dispatches
        if held is not None:
            held.append((context, request))
            return
        self._submit(context, request)

    def _submit_held_dispatches(self, in_pass: bool = True) -> None:
        """Start the handlers of the calls this pass found, but not of those that ended in
        the same pass (reset, expired, or their connection gone): no one would read what they
        answer, and a rapid reset (RST_STREAM right after a whole request) would otherwise
        buy a handler run per stream."""
        held, self._held_dispatches = self._held_dispatches, None
        for context, request in held or ():
            if context._connection.calls.get(context._stream_id) is context:
                self._submit(context, request, in_pass)

    def _submit(
        self, context: ServicerContext, request: Optional[bytes], in_pass: bool = True
    ) -> None:
        """Start the call's handler: on the executor, or here with
        ``minigrpc.unary_handlers_on_io_thread``.

        A hand-over to an executor thread and back costs two thread wake-ups and the GIL
        changing hands each time; in pure Python that is a large share of a small call's server
        CPU (docs/benchmarks.md, "Server throughput").  grpclib avoids it by running handlers on
        its event loop, and so can a server whose unary handlers never block, when asked to:
        such a handler runs here, in the I/O loop's pass, and its response is written in the
        same pass (:meth:`_send_outcome`).  Only unary-unary handlers qualify: their request is
        whole before they start and their response is one message, so they never wait for the
        I/O thread, which would be waiting for them.  Streaming handlers always use the executor.
        """
        if (
            in_pass
            and request is not None
            and self._options.unary_handlers_on_io_thread
            and not context._handler.response_streaming
        ):
            try:
                self._run_handler(context, context._handler, request)
            except BaseException:  # the loop must survive whatever a handler raises
                self._internal_error(context._connection)
            return
        # grpcio's experimental per-method pool: a behaviour with an ``experimental_thread_pool``
        # attribute (a ThreadPoolExecutor) runs there instead of on the server's executor.
        pool = getattr(context._behavior, "experimental_thread_pool", None)
        executor = pool if isinstance(pool, concurrent.futures.ThreadPoolExecutor) else None
        try:
            (executor or self._executor).submit(
                self._run_handler, context, context._handler, request
            )
        except RuntimeError:  # the executor was shut down
            self._send_outcome(context, StatusCode.UNAVAILABLE, "the server is shutting down", None)

    # -- ending calls (I/O thread) ---------------------------------------------------------------

    def _expire_call(
        self, connection: "BlockingServerConnection", context: ServicerContext
    ) -> None:
        if connection.calls.get(context._stream_id) is context:
            self._handle_events(connection, connection.protocol.expire_call(context._stream_id))
            self._dirty.add(connection)

    def _end_call(
        self, connection: "BlockingServerConnection", context: ServicerContext, code: StatusCode
    ) -> None:
        """The one place a call ends, however it ends (answered, reset, expired, cancelled,
        disconnected): forget it, mark its context inactive, run its callbacks."""
        if connection.calls.pop(context._stream_id, None) is None:
            return
        connection.senders.discard(context)
        self._active_rpcs -= 1
        if not connection.calls:
            connection.idle_since = time.monotonic()
        callbacks = context._mark_ended(code)
        if callbacks:
            self._run_callbacks(callbacks)

    def _cancel_call(self, context: ServicerContext) -> None:
        connection = context._connection
        if connection.calls.get(context._stream_id) is context:
            self._handle_events(connection, connection.protocol.cancel_call(context._stream_id))
            self._dirty.add(connection)

    def _send_initial_metadata(
        self, context: ServicerContext, headers: List[Tuple[bytes, bytes]], encoding: Optional[str]
    ) -> None:
        connection = context._connection
        if connection.calls.get(context._stream_id) is context:
            connection.protocol.send_initial_metadata(context._stream_id, headers, encoding)
            self._dirty.add(connection)

    # -- the handler's answer on the wire (I/O thread) -------------------------------------------

    def _write_outcome(
        self,
        context: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes],
        drain: bool = True,
    ) -> None:
        """I/O thread: the handler's status (and unary response) on the wire, then the end;
        the streamed responses still in the call's outbox go first (``drain``)."""
        connection = context._connection
        if message is not None:
            connection.protocol.memory.unreserve(len(message))  # charged as queued, if it is
        if connection.calls.get(context._stream_id) is not context:
            return  # cancelled, expired or disconnected meanwhile: nobody waits for the answer
        if drain and context._response_credit is not None:
            self._send_responses(context, everything=True)
            if connection.calls.get(context._stream_id) is not context:
                return  # a response over the size limit ended the call
        context._finish_on(connection.protocol, code, details, message)
        self._end_call(connection, context, code)
        self._dirty.add(connection)

    def _send_responses(self, context: ServicerContext, everything: bool = False) -> None:
        """I/O thread: queue the streamed responses the call's handler handed over on the
        connection, at most :data:`~minigrpc.blocking.server_call.RESPONSES_PER_TURN` in this pass,
        and no more than the pass has left of :data:`~minigrpc.blocking.server_call.
        RESPONSES_PER_PASS` (all of them before the call's status, ``everything``); the rest
        in a later pass, after the other calls and connections had their turn."""
        credit = context._response_credit
        if credit is None:
            return
        limit: Optional[int] = None
        if not everything:
            limit = min(RESPONSES_PER_TURN, self._pass_responses)
            if limit <= 0:
                self._post(self._send_responses, context)
                return
        connection = context._connection
        protocol = connection.protocol
        messages, cost, more = credit.take(limit)
        self._pass_responses -= len(messages)
        protocol.memory.unreserve(cost)  # charged as queued, if they are
        if connection.calls.get(context._stream_id) is not context:
            return
        for message, compress in messages:
            too_large = context._send_message_on(protocol, message, compress)
            if too_large is not None:
                self._write_outcome(context, too_large.code, str(too_large), None, drain=False)
                return
        credit.written(protocol.queued_response_cost(context._stream_id))
        if more:
            self._post(self._send_responses, context)
        self._dirty.add(connection)

    # -- handler threads -------------------------------------------------------------------------

    def _run_handler(
        self, context: ServicerContext, handler: Any, request_bytes: Optional[bytes]
    ) -> None:
        """Executor thread: deserialize, call the behaviour, serialize (grpcio's semantics).

        ``request_bytes`` is the unary request, or None for a request-streaming method, whose
        handler reads ``context._requests`` instead.
        """
        if context._terminated:
            return  # cancelled or expired while queued: do not start work nobody awaits
        argument: Any = context._requests
        if request_bytes is not None:
            try:
                argument = _dispatch.deserialize_request(context._method, handler, request_bytes)
            except _dispatch.BadRequest:
                self._send_outcome(context, *_dispatch.BAD_REQUEST)
                return
        behavior: Any = context._behavior
        if handler.response_streaming:
            self._stream_responses(context, handler, behavior, argument)
            return
        try:
            response = behavior(argument, context)
        except Exception as exc:
            self._outcome_of_exception(context, exc)
            return
        self._send_outcome(context, *_dispatch.outcome_of_return(context, handler, response))

    def _outcome_of_exception(self, context: ServicerContext, exc: Exception) -> None:
        """The handler raised: send the status that says so, unless the call already ended."""
        outcome = _dispatch.outcome_of_exception(context, exc)
        if outcome is not None:
            self._send_outcome(context, *outcome)

    def _stream_responses(
        self, context: ServicerContext, handler: Any, behavior: Any, argument: Any
    ) -> None:
        """Executor thread: send each response the handler yields, then the status.

        The handler waits (in :meth:`ResponseCredit.offer`) while too much of what it sent is
        unwritten; a call that ends meanwhile stops the iteration and closes the generator.
        """
        if getattr(behavior, "experimental_non_blocking", False):
            self._start_non_blocking_stream(context, handler, behavior, argument)
            return
        responses: Any = None
        try:
            responses = behavior(argument, context)
            for response in responses:
                if not self._hand_over_response(context, handler, response):
                    return
        except Exception as exc:
            self._outcome_of_exception(context, exc)
            return
        finally:
            close = getattr(responses, "close", None)
            if close is not None:
                close()
        self._send_outcome(context, *_dispatch.outcome_of_stream_end(context))

    def _hand_over_response(self, context: ServicerContext, handler: Any, response: Any) -> bool:
        """Handler's thread: serialize one streamed response and queue it for the I/O thread,
        waiting while too much is unsent; False once the call is over (ended, or this response
        did not serialize and the call now ends INTERNAL)."""
        credit = context._response_credit
        assert credit is not None
        serialized = _dispatch.serialize_response(context._method, handler, response)
        if serialized is None:
            self._send_outcome(context, *_dispatch.outcome_without_response(context))
            return False
        compress = context._compress_next
        context._compress_next = True  # disable_next_message_compression is per message
        wake = credit.offer(serialized, compress)
        if wake is None:
            return False  # the call ended: nobody reads further responses
        if wake:
            self._post(self._send_responses, context)
        return True

    def _start_non_blocking_stream(
        self, context: ServicerContext, handler: Any, behavior: Any, argument: Any
    ) -> None:
        """grpcio's experimental non-blocking streaming handler (a behaviour whose
        ``experimental_non_blocking`` attribute is true): it is called as
        ``behavior(argument, context, on_next)`` and may return before the call is over; it,
        or any thread it hands the work to, calls ``on_next(response)`` for each response and
        ``on_next(None)`` to end the call with the status set on the context (OK if none).
        Responses after the end are dropped, as in grpcio."""

        def on_next(response: Any) -> None:
            if response is not None:
                self._hand_over_response(context, handler, response)
                return
            self._send_outcome(context, *_dispatch.outcome_of_stream_end(context))

        try:
            behavior(argument, context, on_next)
        except Exception as exc:
            self._outcome_of_exception(context, exc)

    # -- callbacks and the executor's end --------------------------------------------------------

    def _run_callbacks(self, callbacks: List[Callable[[], Any]]) -> None:
        """Queue ``add_callback`` callbacks for the callback thread (never the I/O thread)."""
        with self._callback_ready:
            if self._callback_thread is None:
                self._callback_thread = threading.Thread(
                    target=self._callback_worker, name="minigrpc-server-callbacks", daemon=True
                )
                self._callback_thread.start()
            self._callback_queue.append(callbacks)
            self._callback_ready.notify()

    def _callback_worker(self) -> None:
        while True:
            with self._callback_ready:
                while not self._callback_queue and not self._callbacks_closing:
                    self._callback_ready.wait()
                if not self._callback_queue:
                    return
                callbacks = self._callback_queue.popleft()
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    _LOGGER.exception("an add_callback() callback raised")

    def _stop_callback_thread(self) -> None:
        """Let queued callbacks run, then end the callback thread."""
        with self._callback_ready:
            self._callbacks_closing = True
            self._callback_ready.notify_all()

    def _shutdown_executor(self) -> None:
        """The server stopped: let the executor go, if the server created it."""
        if self._owns_executor:
            self._executor.shutdown(wait=False)
