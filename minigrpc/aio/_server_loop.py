"""The asyncio server's I/O: connections on the event loop, one task per call, timers, stop.

This is :mod:`minigrpc.server_loop` for an event loop.  Both drive the same sans-IO
:class:`~minigrpc.server_protocol.ServerConnection` and take every per-call decision from
:mod:`minigrpc.server_dispatch` (handler lookup, admission, (de)serialisation, the status that
ends a call); only the waiting differs:

* Each accepted socket is an :class:`AioConnection` (an ``asyncio.Protocol``): bytes from the
  loop go into the protocol, the call events come out, and what the protocol queued is written
  to the loop's transport.  TLS is the same in-memory engine the blocking server uses
  (:class:`minigrpc.tls.TLSEngine`), so reloading credentials and the auth context behave alike.
* Each call runs as a task: the handler is looked up (awaiting ``grpc.aio`` server
  interceptors), its request awaited, and its response and status handed to the protocol.
  ``async def`` handlers and async generators run on the loop; plain functions and generators
  run on the executor, as grpcio runs them.
* Backpressure both ways (RFC 9113 §5.2; PROTOCOL-HTTP2.md leaves flow control to HTTP/2):
  a streamed request is taken from the protocol only when the handler reads, so unread messages
  hold the client's window back; a handler's ``write()`` waits while
  :data:`~minigrpc.server_call.RESPONSE_HIGH_WATER` bytes of its responses wait for the client's
  window, and the connection stops reading and producing DATA while its transport holds
  ``minigrpc.max_output_buffer`` unsent bytes.
* A call that ends without the handler's answer (RST_STREAM from the client, its deadline, the
  connection lost, the server stopped) cancels the handler's task, as grpcio's asyncio server
  does.
* ``stop(grace)`` drains with two GOAWAY frames, as the blocking server does
  (docs/wire-rules.md, "GOAWAY and PING").
"""

import asyncio
import functools
import inspect
import logging
import socket
import time
from concurrent.futures import Executor
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import errors, wire
from .. import handlers as _handlers
from .. import server_dispatch as _dispatch
from .. import server_protocol as _protocol
from ..protocol import DATA_BATCH
from ..server_call import RESPONSE_HIGH_WATER
from ..server_options import ServerOptions
from ..server_timers import (
    CLOSE_FLUSH_TIMEOUT,
    DRAIN_PING_TIMEOUT,
    LINGER_TIMEOUT,
    cancel_stalled,
    idle_recheck,
    stall_due,
    stop_deadline,
)
from ..sockets import LISTEN_BACKLOG, Listener, peer_identity, peer_name
from ..status import StatusCode
from ._errors import AbortError
from ._servicer_context import ServicerContext, SyncRequests, SyncServicerContext

try:
    from ..trace import tracer_for as _tracer_for
except ImportError:  # pragma: no cover - trace.py is optional
    _tracer_for = None  # type: ignore[assignment]

__all__ = ["AioConnection", "AioServerLoop"]

_LOGGER = logging.getLogger("minigrpc.server")

#: Server states.
NEW, STARTED, STOPPING, STOPPED = range(4)
#: What ``next()`` returns at the end of a synchronous response generator.
_END = object()
#: A synchronous handler's response that its connection's memory budget could not take.
_OVER_BUDGET = object()


def _release_reservation(memory: Any, running: "asyncio.Future[Any]") -> None:
    """A synchronous handler's call ended before its response came back: release the memory
    its thread reserved for it (and retrieve its exception, which nobody awaits)."""
    if running.cancelled() or running.exception() is not None:
        return
    response = running.result()
    if isinstance(response, bytes):
        memory.unreserve(len(response))


def _close_quietly(close: Any) -> None:
    """Close a synchronous response generator on the executor; one that a cancelled ``next()``
    is still running in cannot be closed (ValueError), and ends with that ``next()``."""
    try:
        close()
    except ValueError:
        pass
    except Exception:
        _LOGGER.exception("closing a response generator failed")


class AioConnection(asyncio.Protocol):
    """One accepted connection: the protocol state, its transport and its calls."""

    def __init__(self, server: "AioServerLoop", tls_context: Any) -> None:
        self.server = server
        self.protocol = _protocol.ServerConnection(
            server._settings, shape_from_handler=True, memory=server._memory
        )
        self.protocol.memory.owner = self
        self.tls: Any = None
        if tls_context is not None:
            from ..tls import TLSEngine

            self.tls = TLSEngine(tls_context, server_side=True)
        self.peer = "unknown"
        #: The frame trace of this connection (``MINIGRPC_TRACE``, :mod:`minigrpc.trace`).
        self.tracer: Any = None
        self.transport: Optional[asyncio.Transport] = None
        self.calls: Dict[int, ServicerContext] = {}
        self.closed = False
        #: Our side is finished: shut for writing (drained) or closing.
        self.closing = False
        self._close_started = False
        self.idle_since = time.monotonic()
        self._limit = server._options.max_output_buffer
        #: How much of the transport's unsent output is charged to the memory account.
        self._charged_output = 0
        #: Reading is paused: the transport's output is full, or what the client sent alone
        #: is over the connection's memory limit (:mod:`minigrpc.memory_budget`).
        self._output_full = False
        self._reading_paused = False
        self._flush_scheduled = False
        self._input_scheduled = False
        self._timers: List[asyncio.TimerHandle] = []

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.peer = peer_name(sock)
            self.protocol.set_peer(self.server._peers, peer_identity(sock))
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if _tracer_for is not None:
            self.tracer = _tracer_for("server", self.peer)
        transport.set_write_buffer_limits(high=self._limit)
        self.server._connections.add(self)
        self.protocol.initiate()
        self.protocol.set_output_room(min(self._limit, DATA_BATCH))
        options = self.server._options
        loop = self.server._loop
        if options.handshake_timeout is not None:
            self._timers.append(loop.call_later(options.handshake_timeout, self._check_handshake))
        if options.max_connection_idle is not None:
            self._timers.append(loop.call_later(options.max_connection_idle, self._check_idle))
        self.flush()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return  # drained and shut for writing: nothing the client says matters any more
        if self.tls is not None:
            try:
                data = self.tls.decrypt(data)
            except OSError as exc:
                self.close(f"TLS failed: {exc}")
                return
            if not data:
                self.flush()  # the handshake may have something to send
                return
        if self.tracer is not None:
            self.tracer.received(data)  # HTTP/2, decrypted
        self._receive(data)

    def _receive(self, data: bytes) -> None:
        """Hand what was read to the protocol, at most a pass's worth of it
        (:data:`minigrpc.frame_budget.PASS_LIMIT`): the rest waits, reading paused, for the
        event loop's next turn, after every other connection's ready callbacks."""
        self._input_scheduled = False
        if self.closed or self.closing:
            return
        try:
            events = self.protocol.receive_data(data)
            self.server._handle_events(self, events)
            self.flush()
        except Exception:
            self._internal_error()
            return
        if self.protocol.pending_input and not self._input_scheduled:
            self._input_scheduled = True
            self.server._loop.call_soon(self._receive, b"")
        self._update_reading()

    def eof_received(self) -> Optional[bool]:
        return False  # HTTP/2 has no half-closed connection: close our side too

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        for timer in self._timers:
            timer.cancel()
        self.protocol.memory.close()
        reason = "the client closed the connection" if exc is None else f"connection lost: {exc}"
        self.server._handle_events(self, self.protocol.connection_lost(reason))
        for context in list(self.calls.values()):
            self.server._end_call(self, context, StatusCode.CANCELLED)
        self.server._connection_closed(self)

    def pause_writing(self) -> None:
        # The transport holds ``max_output_buffer`` unsent bytes: stop reading from a client
        # that does not read, and the protocol gets no room for more DATA (see flush()).
        self._output_full = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._output_full = False
        self.flush()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.closed or self.closing:
            return
        pause = (
            self._output_full or self.protocol.memory.stop_reading or self.protocol.pending_input
        )
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    # -- output -----------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        """Flush once the running handlers of this loop pass have had their turn: responses
        queued meanwhile share a write."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.server._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what the protocol queued, within the output bound; wake waiting calls; close
        when the protocol is done."""
        self._flush_scheduled = False
        transport = self.transport
        if self.closed or transport is None:
            return
        protocol = self.protocol
        tls = self.tls
        while True:
            if tls is None:
                data = protocol.data_to_send()
                if data and self.tracer is not None:
                    self.tracer.sent(data)
            elif tls.established:
                data = protocol.data_to_send()
                if data and self.tracer is not None:
                    self.tracer.sent(data)  # the trace shows HTTP/2, not ciphertext
                data = tls.encrypt(data)
            else:
                data = tls.outgoing()  # handshake records; HTTP/2 waits for the handshake
            if data and not self.closing:
                transport.write(data)
            room = self._limit - transport.get_write_buffer_size()
            if protocol.closed:
                break
            starved = protocol.starved
            protocol.set_output_room(max(min(room, DATA_BATCH), 0))
            if room <= 0 or not starved:
                break
        unsent = transport.get_write_buffer_size()
        if unsent != self._charged_output:
            protocol.memory.charge_outbound(unsent - self._charged_output)
            self._charged_output = unsent
        self._update_reading()
        self.server._resume_held_back()
        for context in list(self.calls.values()):
            context._wake()
        if protocol.closed:
            self.close(protocol.close_reason)
        elif protocol.drained and not self.calls:
            self._linger()

    def _linger(self) -> None:
        """Close a drained connection gracefully: shut our write side and let the client close
        (as :meth:`minigrpc.server_loop.ServerLoop._linger`, RFC 9113 §6.8)."""
        transport = self.transport
        if self.closing or transport is None:
            return
        self.closing = True
        if self.tls is None and transport.can_write_eof():
            transport.write_eof()
            self._timers.append(self.server._loop.call_later(LINGER_TIMEOUT, self.abort))
        else:
            transport.close()

    def close(self, reason: str = "") -> None:
        """Close after what is queued is written, but never wait long for a client that does
        not read."""
        if self.closed or self._close_started or self.transport is None:
            return
        self._close_started = True
        if reason:
            _LOGGER.debug("closing the connection from %s: %s", self.peer, reason)
        self.closing = True
        self.transport.close()
        self._timers.append(self.server._loop.call_later(CLOSE_FLUSH_TIMEOUT, self.abort))

    def abort(self) -> None:
        if not self.closed and self.transport is not None:
            self.transport.abort()

    def _internal_error(self) -> None:
        _LOGGER.exception(
            "minigrpc server: internal error on the connection from %s; closing it", self.peer
        )
        self.abort()

    # -- timers -----------------------------------------------------------------------------

    def _check_handshake(self) -> None:
        """Close a client that never sent the preface and SETTINGS (grpc-core's
        ``grpc.server_handshake_timeout_ms``)."""
        if not self.closed and not self.protocol.handshake_complete:
            self.close("no HTTP/2 preface and SETTINGS in time")

    def _check_idle(self) -> None:
        """``grpc.max_connection_idle_ms``: drain a connection without calls for that long
        (:func:`~minigrpc.server_timers.idle_recheck`)."""
        idle = self.server._options.max_connection_idle
        if self.closed or idle is None or self.protocol.draining:
            return
        now = time.monotonic()
        busy = bool(self.calls) or self.protocol.active_calls > 0
        recheck = idle_recheck(now, idle, self.idle_since, busy)
        if recheck is not None:
            self._timers.append(self.server._loop.call_later(recheck - now, self._check_idle))
            return
        self.start_drain()

    def start_drain(self) -> None:
        """GOAWAY(2^31-1) and a PING now; GOAWAY(last stream) on the ACK or a timer."""
        self.protocol.start_drain()
        self._timers.append(
            self.server._loop.call_later(DRAIN_PING_TIMEOUT, self.send_final_goaway)
        )
        self.flush()

    def send_final_goaway(self) -> None:
        if not self.closed:
            self.protocol.send_final_goaway()
            self.flush()


class AioServerLoop:
    """The event loop's half of a server (module docstring); :class:`minigrpc.aio.Server`
    adds grpcio's public methods."""

    def __init__(
        self,
        executor: Optional[Executor],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        self._executor = executor
        self._options = options
        self._settings = options.protocol_settings()
        self._maximum_concurrent_rpcs = maximum_concurrent_rpcs
        self._default_compression = options.compression if compression is None else compression
        self._handler_table = _dispatch.HandlerTable()
        #: What all connections may buffer, and each of them (:mod:`minigrpc.memory_budget`).
        self._memory = options.memory_budget()
        #: Floods by peer: a peer sent away for one opens its next connections with less.
        self._peers = _protocol.PeerHistory(time.monotonic)
        self._listeners: List[Listener] = []
        self._servers: List[asyncio.AbstractServer] = []
        self._connections: Set[AioConnection] = set()
        self._tasks: Set[asyncio.Task[None]] = set()
        self._active_rpcs = 0
        self._state = NEW
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # start()
        self._stop_deadline: Optional[float] = None
        self._stop_timers: List[asyncio.TimerHandle] = []
        self._terminated: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None

    def _terminated_event(self) -> asyncio.Event:
        if self._terminated is None:
            self._terminated = asyncio.Event()
        return self._terminated

    async def _serve(self) -> None:
        """Start accepting on every listener (``start()``)."""
        self._loop = asyncio.get_running_loop()
        for listener in self._listeners:
            # asyncio listens again with its own backlog (100): keep the one the blocking
            # server uses, or a burst of connections would be refused.
            server = await self._loop.create_server(
                functools.partial(AioConnection, self, listener.tls),
                sock=listener.sock,
                backlog=LISTEN_BACKLOG,
            )
            self._servers.append(server)

    def _resume_held_back(self) -> None:
        """Give window again to connections that were held back and are under budget now."""
        for account in self._memory.resumable():
            connection = account.owner
            if isinstance(connection, AioConnection) and not connection.closed:
                connection.protocol.resume_credit()
                connection.schedule_flush()

    # -- calls ------------------------------------------------------------------------------

    def _handle_events(self, connection: AioConnection, events: List[Any]) -> None:
        for event in events:
            if isinstance(event, _protocol.RequestReady):
                context = connection.calls.get(event.stream_id)
                if context is not None:
                    context._request = event.message
                    context._request_encoding = event.encoding
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

    def _start_call(self, connection: AioConnection, event: _protocol.CallStarted) -> None:
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
        if self._admit(context, handler):
            self._spawn(context, self._run_call(context))

    def _spawn(self, context: ServicerContext, coroutine: Any) -> None:
        task = self._loop.create_task(coroutine)
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
        """Admit the call (:meth:`~minigrpc.server_dispatch.HandlerTable.admit`) or reject it."""
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
                serialized = (
                    None
                    if response is None
                    else _dispatch.serialize_response(context._method, handler, response)
                )
                self._finish(context, *_dispatch.outcome_of_response(context, serialized))
                return
            memory = context._connection.protocol.memory
            running = self._loop.run_in_executor(
                self._executor, self._run_sync_unary, context, argument
            )
            try:
                # Shielded: a call that ends meanwhile must still release what the thread
                # reserves when it finishes.
                serialized = await asyncio.shield(running)
            except asyncio.CancelledError:
                running.add_done_callback(functools.partial(_release_reservation, memory))
                raise
            if serialized is _OVER_BUDGET:
                self._finish(context, StatusCode.RESOURCE_EXHAUSTED, _protocol.OVER_BUDGET_DETAILS)
                return
            if serialized is not None:
                memory.unreserve(len(serialized))  # charged as queued, if it is
            self._finish(context, *_dispatch.outcome_of_response(context, serialized))
        except asyncio.CancelledError:
            if not context._terminated:
                # Cancelled by the application, not by the call's end: the client still
                # waits, so it learns the call was cancelled; the cancellation goes on.
                self._finish(context, StatusCode.CANCELLED, "the handler was cancelled")
                raise
        except Exception as exc:
            outcome = _dispatch.outcome_of_exception(context, exc)
            if outcome is not None:
                self._finish(context, *outcome)

    @staticmethod
    def _is_async(behavior: Any) -> bool:
        return inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)

    def _run_sync_unary(self, context: ServicerContext, argument: Any) -> Any:
        """Executor thread: a plain-function unary-response handler, its response serialized
        and its cost reserved in the connection's memory account before it goes back to the
        loop, as the blocking server does (:meth:`~minigrpc.memory_budget.ConnectionMemory.
        reserve`); :data:`_OVER_BUDGET` if the connection is over budget."""
        behavior: Any = context._behavior
        response = behavior(argument, SyncServicerContext(context, self._loop))
        if response is None:
            return None
        serialized = _dispatch.serialize_response(context._method, context._handler, response)
        if serialized is not None and not context._connection.protocol.memory.reserve(
            len(serialized)
        ):
            return _OVER_BUDGET
        return serialized

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
        """The whole unary request; None if the call ended first.  A request that makes no
        progress for ``minigrpc.request_stall_timeout_ms`` is cancelled, as the blocking server
        does (:mod:`minigrpc.server_timers`)."""
        stall = self._options.request_stall_timeout
        protocol = context._connection.protocol
        while context._request is None:
            if context._terminated:
                return None
            due = stall_due(protocol, context._stream_id, stall) if stall else None
            if due is None or stall is None:
                await context._wait()
                continue
            remaining = due - time.monotonic()
            if remaining <= 0:
                events = cancel_stalled(protocol, context._stream_id, stall)
                self._handle_events(context._connection, events)
                context._connection.schedule_flush()
                return None
            try:
                await asyncio.wait_for(context._wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return context._request

    async def _read_request(self, context: ServicerContext) -> Optional[bytes]:
        """The next streamed request message, None at its end; raises
        :class:`~minigrpc.server_dispatch.CallEndedError` once the call is over."""
        connection = context._connection
        protocol = connection.protocol
        while True:
            if context._terminated:
                raise _dispatch.CallEndedError(context._termination_code or StatusCode.CANCELLED)
            try:
                message = protocol.take_request(context._stream_id)
            except errors.CallError as exc:
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
        """Queue one streamed response, after waiting while too much of the call's output waits
        for the client's window; raises CallEndedError once the call is over."""
        serialized = _dispatch.serialize_response(context._method, context._handler, response)
        if serialized is None:
            self._finish(context, *_dispatch.outcome_without_response(context))
            raise _dispatch.CallEndedError(StatusCode.INTERNAL)
        connection = context._connection
        protocol = connection.protocol
        while (
            not context._terminated
            and protocol.queued_response_bytes(context._stream_id) >= RESPONSE_HIGH_WATER
        ):
            await context._wait()
        if context._terminated:
            raise _dispatch.CallEndedError(context._termination_code or StatusCode.CANCELLED)
        compress = context._compress_next
        context._compress_next = True  # disable_next_message_compression is per message
        try:
            protocol.send_message(
                context._stream_id,
                serialized,
                encoding=wire.compression_name(context._compression),
                compress_message=compress,
            )
        except errors.MessageTooLarge as exc:
            self._finish(context, exc.code, str(exc))
            raise _dispatch.CallEndedError(exc.code) from None
        context._initial_metadata_sent = True  # the first message sent the response headers
        connection.schedule_flush()

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
        connection: AioConnection,
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

    # -- stop -------------------------------------------------------------------------------

    def _connection_closed(self, connection: AioConnection) -> None:
        self._connections.discard(connection)
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def _stop(self, grace: Optional[float]) -> None:
        """Refuse new connections now; drain (or cancel) the calls; return once all is closed."""
        if self._state == NEW:
            self._state = STOPPED
            self._close_listeners()
            self._terminated_event().set()
            return
        if self._state == STOPPED:
            return
        self._state = STOPPING
        self._close_listeners()
        now = time.monotonic()
        deadline = stop_deadline(self._stop_deadline, now, grace)
        if deadline is not None and deadline <= now:
            self._abort_connections()
        elif deadline is not None:  # None: a later stop() never extends the grace
            first = self._stop_deadline is None
            self._stop_deadline = deadline
            if first:
                for connection in list(self._connections):
                    connection.start_drain()
            self._stop_timers.append(
                self._loop.call_later(deadline - now, self._grace_expired, deadline)
            )
        while self._connections:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        for timer in self._stop_timers:
            timer.cancel()
        self._state = STOPPED
        self._terminated_event().set()

    def _close_listeners(self) -> None:
        for server in self._servers:
            server.close()
        self._servers = []
        for listener in self._listeners:
            listener.close()
        self._listeners = []

    def _grace_expired(self, deadline: float) -> None:
        if self._stop_deadline == deadline:
            self._abort_connections()

    def _abort_connections(self) -> None:
        """Reset every call with CANCEL, GOAWAY, and close (``stop(0)``, an expired grace)."""
        for connection in list(self._connections):
            if connection.closed:
                continue
            self._handle_events(connection, connection.protocol.abort_all())
            for context in list(connection.calls.values()):
                self._end_call(connection, context, StatusCode.CANCELLED)
            connection.flush()
            connection.abort()  # do not wait for a client that does not read
