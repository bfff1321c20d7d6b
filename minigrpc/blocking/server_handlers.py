"""The blocking server's calls, as threads wait for them: handlers on the executor, the hand-over
of their requests and responses, their callbacks.

What a call is, from its first event to its end, is decided by the driver
(:class:`minigrpc.driver.server_driver.ServerDriver`), for both servers; :class:`CallHandlers`
carries out the part that is about threads.  It starts a call's handler on the executor once the
I/O loop's pass has read every ready socket, moves a request-streaming handler's messages into
its iterator (:class:`~minigrpc.blocking.server_call.RequestStream`) as fast as it reads them,
queues the responses a streaming handler hands over
(:class:`~minigrpc.blocking.server_call.ResponseCredit`), has the handler's outcome written, and
runs ``add_callback`` callbacks on a thread of their own, so a slow callback holds neither the
I/O thread nor a handler.

Threads.  The I/O thread runs everything that touches a connection's protocol (its state is
not thread-safe): the methods the driver calls (:meth:`CallHandlers.start_handler` and the
others of :class:`~minigrpc.driver.server_driver.ServerIO`), :meth:`CallHandlers.pull_requests`,
:meth:`CallHandlers.send_responses` and :meth:`CallHandlers.write_outcome`.  Handler threads run
:meth:`CallHandlers.run_handler` and what it calls; what they have for the wire goes through the
loop (:meth:`~minigrpc.blocking.server_loop.ServerLoop.post`,
:meth:`~minigrpc.blocking.server_loop.ServerLoop.send_outcome`).  With the
``minigrpc.unary_handlers_on_io_thread`` option, unary-unary handlers run on the I/O thread
itself instead (:meth:`CallHandlers.submit`), as grpclib's do on its event loop.

Everything a server decides per call that does not depend on how it waits (handler lookup,
admission, (de)serialisation, the status that ends a call) is
:mod:`minigrpc.driver.server_dispatch` and :mod:`minigrpc.driver.server_driver`, shared with the
asyncio server; what is here is how threads wait for it.
"""

import collections
import concurrent.futures
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Deque, List, Optional, Set, Tuple

from ..driver import server_dispatch as _dispatch
from ..driver.logs import get_logger
from ..driver.server_driver import RESPONSES_PER_PASS, RESPONSES_PER_TURN, ServerDriver
from ..driver.server_options import ServerOptions
from ..protocol import server_protocol as _protocol
from ..protocol.enums import StatusCode
from ..protocol.server_events import CallStarted
from .server_call import RequestStream, ResponseCredit
from .servicer_context import ServicerContext, _Abort

if TYPE_CHECKING:  # pragma: no cover
    from typing import Protocol

    from ..driver.server_driver import ServedConnection

    class IOThread(Protocol):
        """What the handlers need of the I/O loop
        (:class:`minigrpc.blocking.server_loop.ServerLoop`)."""

        def post(self, function: Callable[..., None], *args: Any) -> None: ...

        def send_outcome(
            self, call: ServicerContext, code: StatusCode, details: str, message: Optional[bytes]
        ) -> None: ...

        def flush_soon(self, connection: ServedConnection) -> None: ...

        def internal_error(self, connection: ServedConnection) -> None: ...

__all__ = ["CallHandlers"]

#: The server's logger (handler exceptions); named after the public API.
_LOGGER = get_logger("minigrpc.server")


class CallHandlers:
    """The calls of a blocking server, as threads wait for them (module docstring)."""

    def __init__(
        self,
        loop: "IOThread",
        driver: ServerDriver,
        thread_pool: Optional[concurrent.futures.Executor],
        options: ServerOptions,
    ) -> None:
        self._loop = loop
        self._driver = driver
        self._options = options
        #: What the calls' contexts read (:class:`~minigrpc.driver.server_call_state.CallState`).
        self.default_compression = driver.default_compression
        self.call_lock = driver.call_lock
        self._owns_executor = thread_pool is None
        self._executor: concurrent.futures.Executor = thread_pool or (
            concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix="minigrpc-handler",
            )
        )
        #: Calls whose request messages move on in the next pass (see :meth:`pull_requests`).
        self._pulls_posted: Set[ServicerContext] = set()
        #: Request messages the current pass may still move to handlers.
        self._pass_messages = _protocol.PASS_MESSAGES
        #: Streamed response messages the current pass may still queue (:meth:`send_responses`).
        self._pass_responses = RESPONSES_PER_PASS
        #: Calls whose handlers the current pass of the I/O loop found, started together once
        #: the pass has read every ready socket (:meth:`start_handler`); None outside a pass.
        #: The I/O thread holds the loop's I/O lock for the whole pass, so only it ever sees a
        #: list here.
        self._held: Optional[List[ServicerContext]] = None
        self._callback_queue: Deque[List[Callable[[], Any]]] = collections.deque()
        self._callback_ready = threading.Condition(threading.Lock())
        self._callback_thread: Optional[threading.Thread] = None
        self._callbacks_closing = False

    # -- what the driver has the I/O thread do (ServerIO) ----------------------------------

    def new_call(self, connection: "ServedConnection", event: CallStarted) -> ServicerContext:
        return ServicerContext(self, connection, event)

    def start_handler(self, call: ServicerContext) -> None:
        """Run the call's handler on the executor, at the end of the loop's pass.

        A handler thread woken while the I/O thread is still reading takes the GIL at the I/O
        thread's next ``recv()`` or ``send()``, and the I/O thread then waits to get it back:
        two futex calls per hand-over.  With a connection per client thread, one pass reads
        several sockets, one call each, and ``strace -c -f`` counted 9.3 futex calls per call
        against 2.2 when all the handlers of a pass start after its reads (and 2.2 with the
        same load on one connection, where one read brings several calls anyway).  In A/B runs
        that was 4-6% more calls/s and less CPU per call with a connection per thread, and no
        change on one connection or for a lone call's latency.
        """
        handler = call._handler
        if handler.request_streaming or handler.response_streaming:
            self._open_streams(call, handler)
        held = self._held
        if held is not None:
            held.append(call)
            return
        self.submit(call)

    def _open_streams(self, call: ServicerContext, handler: Any) -> None:
        """The hand-overs of a streaming call (:mod:`minigrpc.blocking.server_call`)."""
        memory = call._connection.protocol.memory
        requests = credit = None
        if handler.request_streaming:
            requests = RequestStream(
                handler.request_deserializer,
                lambda: self._loop.post(self.pull_requests, call),
                lambda: self._bad_request_message(call),
                memory,
            )
        if handler.response_streaming:
            credit = ResponseCredit(memory)
            call._connection.link.senders.add(call)
        call._open_streams(requests, credit)

    def requests_arrived(self, call: ServicerContext) -> None:
        self.pull_requests(call)

    def wake(self, call: ServicerContext) -> None:
        """The connection's memory budget has room again: a handler waiting to hand over a
        response tries again."""
        credit = call._response_credit
        if credit is not None:
            credit.poke()

    def call_ended(self, call: ServicerContext, answered: bool) -> None:
        if call._response_credit is not None:
            call._connection.link.senders.discard(call)
        call._release_waiters()

    def run_callbacks(self, call: ServicerContext, callbacks: List[Callable[..., Any]]) -> None:
        """Queue ``add_callback`` callbacks for the callback thread (never the I/O thread)."""
        with self._callback_ready:
            if self._callback_thread is None:
                self._callback_thread = threading.Thread(
                    target=self._callback_worker, name="minigrpc-server-callbacks", daemon=True
                )
                self._callback_thread.start()
            self._callback_queue.append(callbacks)
            self._callback_ready.notify()

    # -- what the context hands to the I/O thread ------------------------------------------

    def cancel(self, call: ServicerContext) -> None:
        self._loop.post(self._driver.cancel_call, call)

    def send_initial_metadata(
        self, call: ServicerContext, headers: List[Tuple[bytes, bytes]], encoding: Optional[str]
    ) -> None:
        self._loop.post(self._driver.send_initial_metadata, call, headers, encoding)

    # -- the loop's pass (I/O thread) ------------------------------------------------------

    def begin_pass(self) -> None:
        """A pass of the I/O loop starts: hold its handler runs, renew its allowances."""
        self._held = []
        self._pass_messages = _protocol.PASS_MESSAGES
        self._pass_responses = RESPONSES_PER_PASS

    def submit_held(self, in_pass: bool = True) -> None:
        """Start the handlers of the calls this pass found, but not of those that ended in
        the same pass (reset, expired, or their connection gone): no one would read what they
        answer, and a rapid reset (RST_STREAM right after a whole request) would otherwise
        buy a handler run per stream."""
        held, self._held = self._held, None
        for call in held or ():
            if not call._terminated:
                self.submit(call, in_pass)

    def submit(self, call: ServicerContext, in_pass: bool = True) -> None:
        """Start the call's handler: on the executor, or here with
        ``minigrpc.unary_handlers_on_io_thread``.

        A hand-over to an executor thread and back costs two thread wake-ups and the GIL
        changing hands each time; in pure Python that is a large share of a small call's server
        CPU (docs/benchmarks.md, "Server throughput").  grpclib avoids it by running handlers on
        its event loop, and so can a server whose unary handlers never block, when asked to:
        such a handler runs here, in the I/O loop's pass, and its response is written in the
        same pass (:meth:`~minigrpc.blocking.server_loop.ServerLoop.send_outcome`).  Only
        unary-unary handlers qualify: their request is whole before they start and their
        response is one message, so they never wait for the I/O thread, which would be waiting
        for them.  Streaming handlers always use the executor.
        """
        handler = call._handler
        if (
            in_pass
            and self._options.unary_handlers_on_io_thread
            and not handler.request_streaming
            and not handler.response_streaming
        ):
            try:
                self.run_handler(call)
            except BaseException:  # the loop must survive whatever a handler raises
                self._loop.internal_error(call._connection)
            return
        # grpcio's experimental per-method pool: a behaviour with an ``experimental_thread_pool``
        # attribute (a ThreadPoolExecutor) runs there instead of on the server's executor.
        pool = getattr(call._behavior, "experimental_thread_pool", None)
        executor = pool if isinstance(pool, concurrent.futures.ThreadPoolExecutor) else None
        try:
            (executor or self._executor).submit(self.run_handler, call)
        except RuntimeError:  # the executor was shut down
            self._loop.send_outcome(
                call, StatusCode.UNAVAILABLE, "the server is shutting down", None
            )

    # -- requests (I/O thread) ---------------------------------------------------------------

    def pull_requests(self, call: ServicerContext) -> None:
        """Move waiting request messages into the handler's iterator while it has room.

        At most :data:`minigrpc.http2.flood.PASS_MESSAGES` in one pass of the loop, for all
        calls together: a handler's queue holds ten thousand tiny messages, and moving them
        all at once would hold the I/O thread; the rest moves in the next passes, after the
        other connections had their turn."""
        requests = call._requests
        served = call._connection
        if requests is None or served.calls.get(call._stream_id) is not call:
            return
        take = self._driver.take_request
        left = self._pass_messages
        message: Optional[bytes] = b""
        while message is not None:
            room = requests.room
            if room <= 0:
                requests.stall()
                break
            if left <= 0:
                if call not in self._pulls_posted:
                    self._pulls_posted.add(call)
                    self._loop.post(self._pull_posted, call)
                break
            batch: List[bytes] = []
            while room > 0 and left > 0:
                message = take(call)
                if message is None:
                    break
                batch.append(message)
                room -= len(message) + RequestStream.MESSAGE_OVERHEAD
                left -= 1
            if batch:
                requests.put_many(batch)
        if message is None and call._request_closed:
            requests.end()
        self._pass_messages = left
        self._loop.flush_soon(served)  # taking messages may have returned window

    def _pull_posted(self, call: ServicerContext) -> None:
        """The rest of a pull cut short by :data:`minigrpc.http2.flood.PASS_MESSAGES`."""
        self._pulls_posted.discard(call)
        self.pull_requests(call)

    def _bad_request_message(self, call: ServicerContext) -> BaseException:
        """A streamed request that does not deserialize ends the call (grpcio: INTERNAL)."""
        _dispatch.record_bad_request(call)
        return _Abort()

    # -- the handler's answer on the wire (I/O thread) -------------------------------------

    def write_outcome(
        self,
        call: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes],
    ) -> None:
        """The handler's status (and unary response) on the wire, then the call's end; the
        streamed responses still in the call's outbox go first."""
        served = call._connection
        if message is not None:
            served.protocol.memory.unreserve(len(message))  # charged as queued, if it is
        if call._response_credit is not None and served.calls.get(call._stream_id) is call:
            self.send_responses(call, everything=True)
        self._driver.finish(call, code, details, message)

    def send_responses(self, call: ServicerContext, everything: bool = False) -> None:
        """Queue the streamed responses the call's handler handed over on the connection, at
        most :data:`~minigrpc.driver.server_driver.RESPONSES_PER_TURN` in this pass, and no more
        than the pass has left of :data:`~minigrpc.driver.server_driver.RESPONSES_PER_PASS`
        (all of them before the call's status, ``everything``); the rest in a later pass, after
        the other calls and connections had their turn."""
        credit = call._response_credit
        if credit is None:
            return
        limit: Optional[int] = None
        if not everything:
            limit = min(RESPONSES_PER_TURN, self._pass_responses)
            if limit <= 0:
                self._loop.post(self.send_responses, call)
                return
        served = call._connection
        protocol = served.protocol
        messages, cost, more = credit.take(limit)
        self._pass_responses -= len(messages)
        protocol.memory.unreserve(cost)  # charged as queued, if they are
        if served.calls.get(call._stream_id) is not call:
            return
        send = self._driver.send_response
        for message, compress in messages:
            if not send(call, message, compress):
                return
        credit.written(protocol.queued_response_cost(call._stream_id))
        if more:
            self._loop.post(self.send_responses, call)
        self._loop.flush_soon(served)

    # -- handler threads ---------------------------------------------------------------------

    def run_handler(self, call: ServicerContext) -> None:
        """Executor thread: deserialize, call the behaviour, serialize (grpcio's semantics).

        A unary request's bytes are the call's; a request-streaming handler reads its
        :class:`~minigrpc.blocking.server_call.RequestStream` instead.
        """
        if call._terminated:
            return  # cancelled or expired while queued: do not start work nobody awaits
        handler = call._handler
        request = call._request
        argument: Any = call._requests
        if request is not None:
            try:
                argument = _dispatch.deserialize_request(call._method, handler, request)
            except _dispatch.BadRequest:
                self._loop.send_outcome(call, *_dispatch.BAD_REQUEST)
                return
        behavior: Any = call._behavior
        if handler.response_streaming:
            self._stream_responses(call, handler, behavior, argument)
            return
        try:
            response = behavior(argument, call)
        except Exception as exc:
            self._outcome_of_exception(call, exc)
            return
        self._loop.send_outcome(call, *_dispatch.outcome_of_return(call, handler, response))

    def _outcome_of_exception(self, call: ServicerContext, exc: Exception) -> None:
        """The handler raised: send the status that says so, unless the call already ended."""
        outcome = _dispatch.outcome_of_exception(call, exc)
        if outcome is not None:
            self._loop.send_outcome(call, *outcome)

    def _stream_responses(
        self, call: ServicerContext, handler: Any, behavior: Any, argument: Any
    ) -> None:
        """Executor thread: send each response the handler yields, then the status.

        The handler waits (in :meth:`ResponseCredit.offer`) while too much of what it sent is
        unwritten; a call that ends meanwhile stops the iteration and closes the generator.
        """
        if getattr(behavior, "experimental_non_blocking", False):
            self._start_non_blocking_stream(call, handler, behavior, argument)
            return
        responses: Any = None
        try:
            responses = behavior(argument, call)
            for response in responses:
                if not self._hand_over_response(call, handler, response):
                    return
        except Exception as exc:
            self._outcome_of_exception(call, exc)
            return
        finally:
            close = getattr(responses, "close", None)
            if close is not None:
                close()
        self._loop.send_outcome(call, *_dispatch.outcome_of_stream_end(call))

    def _hand_over_response(self, call: ServicerContext, handler: Any, response: Any) -> bool:
        """Handler's thread: serialize one streamed response and queue it for the I/O thread,
        waiting while too much is unsent; False once the call is over (ended, or this response
        did not serialize and the call now ends INTERNAL)."""
        credit = call._response_credit
        assert credit is not None
        serialized = _dispatch.serialize_response(call._method, handler, response)
        if serialized is None:
            self._loop.send_outcome(call, *_dispatch.outcome_without_response(call))
            return False
        wake = credit.offer(serialized, call._take_compress_flag())
        if wake is None:
            return False  # the call ended: nobody reads further responses
        if wake:
            self._loop.post(self.send_responses, call)
        return True

    def _start_non_blocking_stream(
        self, call: ServicerContext, handler: Any, behavior: Any, argument: Any
    ) -> None:
        """grpcio's experimental non-blocking streaming handler (a behaviour whose
        ``experimental_non_blocking`` attribute is true): it is called as
        ``behavior(argument, context, on_next)`` and may return before the call is over; it,
        or any thread it hands the work to, calls ``on_next(response)`` for each response and
        ``on_next(None)`` to end the call with the status set on the context (OK if none).
        Responses after the end are dropped, as in grpcio."""

        def on_next(response: Any) -> None:
            if response is not None:
                self._hand_over_response(call, handler, response)
                return
            self._loop.send_outcome(call, *_dispatch.outcome_of_stream_end(call))

        try:
            behavior(argument, call, on_next)
        except Exception as exc:
            self._outcome_of_exception(call, exc)

    # -- callbacks and the executor's end ----------------------------------------------------

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

    def shut_down(self) -> None:
        """The server stopped: let the executor go, if the server created it, and end the
        callback thread once the queued callbacks ran."""
        if self._owns_executor:
            self._executor.shutdown(wait=False)
        with self._callback_ready:
            self._callbacks_closing = True
            self._callback_ready.notify_all()
