"""The asyncio server's I/O: connections on the event loop, their timers, stop.

This is :mod:`minigrpc.blocking.server_loop` for an event loop.  Both drive the same sans-IO
:class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection`; what a call is, from its first
event to its handler and back, is :class:`minigrpc.aio.server_handlers.CallTasks` (a task per
call), which :class:`AioServerLoop` builds on.  What is here:

* Each accepted socket is an :class:`AioConnection` (an ``asyncio.BufferedProtocol``): bytes
  from the loop go into the protocol, the call events come out, and what the protocol queued
  is written to the loop's transport.  TLS is the same in-memory engine the blocking server uses
  (:class:`minigrpc.net.tls.TLSEngine`), so reloading credentials and the auth context behave alike.
* Backpressure (RFC 9113 §5.2; PROTOCOL-HTTP2.md leaves flow control to HTTP/2): the connection
  stops reading and producing DATA while its transport holds ``minigrpc.max_output_buffer``
  unsent bytes, or while what the client sent alone is over its memory share.
* The handshake and idle timers of a connection, with the decisions of
  :mod:`minigrpc.driver.server_timers`.
* ``stop(grace)`` drains with two GOAWAY frames, as the blocking server does
  (docs/wire-rules.md, "GOAWAY and PING").
"""

import asyncio
import functools
import socket
import time
from concurrent.futures import Executor
from typing import Any, Dict, List, Optional, Set

from ..driver.logs import get_logger
from ..driver.server_accept import ACCEPTS_PER_WAKEUP, AcceptBackoff
from ..driver.server_options import ServerOptions
from ..driver.server_timers import (
    CLOSE_FLUSH_TIMEOUT,
    DRAIN_PING_TIMEOUT,
    LINGER_TIMEOUT,
    idle_recheck,
    stop_deadline,
)
from ..net.sockets import Listener, ReadBuffers, peer_identity, peer_name
from ..protocol import server_protocol as _protocol
from ..protocol.enums import StatusCode
from ..protocol.grpc_connection import DATA_BATCH
from .server_handlers import CallTasks
from .servicer_context import ServicerContext

try:
    from ..net.trace import tracer_for as _tracer_for
except ImportError:  # pragma: no cover - trace.py is optional
    _tracer_for = None  # type: ignore[assignment]

__all__ = ["AioConnection", "AioServerLoop"]

_LOGGER = get_logger("minigrpc.server")

#: Server states.
NEW, STARTED, STOPPING, STOPPED = range(4)
class AioConnection(asyncio.BufferedProtocol):
    """One accepted connection: the protocol state, its transport and its calls.

    The transport reads into the server's :class:`~minigrpc.net.sockets.ReadBuffers` rather than
    into a new 256 KiB bytes object each time (the mmap, mremap and munmap of
    :data:`minigrpc.net.sockets.SMALL_READ`, on every read: with a connection per caller, every call
    is a read).  One set serves every connection: the loop finishes each read, its bytes copied
    out, before it starts the next, so the server holds one buffer, not one per client.
    """

    def __init__(self, server: "AioServerLoop", tls_context: Any) -> None:
        self.server = server
        self.protocol = _protocol.ServerGrpcConnection(
            server._settings, shape_from_handler=True, memory=server._memory
        )
        self.protocol.memory.owner = self
        self.tls: Any = None
        if tls_context is not None:
            from ..net.tls import TLSEngine

            self.tls = TLSEngine(tls_context, server_side=True)
        self.peer = "unknown"
        #: The frame trace of this connection (``MINIGRPC_TRACE``, :mod:`minigrpc.net.trace`).
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
        #: is over the connection's memory limit (:mod:`minigrpc.protocol.memory_budget`).
        self._output_full = False
        self._reading_paused = False
        self._flush_scheduled = False
        #: A call started in the read being handled: its task takes its first step on the
        #: loop's next pass (see _receive).
        self._started_calls = False
        self._input_scheduled = False
        self._timers: List[asyncio.TimerHandle] = []

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.server._state != STARTED:
            transport.abort()  # accepted as the server stopped: refused, as later ones are
            return
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

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server._reads.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server._reads.take(nbytes))

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
        (:data:`minigrpc.http2.flood.PASS_LIMIT`): the rest waits, reading paused, for the
        event loop's next turn, after every other connection's ready callbacks."""
        self._input_scheduled = False
        if self.closed or self.closing:
            return
        try:
            # What handling the read queues goes out in one flush: schedule_flush() meanwhile
            # schedules nothing more.
            self._flush_scheduled = True
            self._started_calls = False
            events = self.protocol.receive_data(data)
            self.server._handle_events(self, events)
            if self._started_calls:
                # The calls' tasks run on the loop's next pass, before this flush: a handler
                # that answers at once shares the write with what the read queued (the ACK of
                # a PING, a WINDOW_UPDATE), one write and one pass per read rather than two.
                self.server._loop.call_soon(self.flush)
            else:
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
            self._output_full or self.protocol.stop_reading or self.protocol.pending_input
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
        (as :meth:`minigrpc.blocking.server_loop.ServerLoop._linger`, RFC 9113 §6.8)."""
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
        (:func:`~minigrpc.driver.server_timers.idle_recheck`)."""
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


class AioServerLoop(CallTasks):
    """The event loop's half of a server (module docstring), on the calls of :class:`CallTasks`;
    :class:`minigrpc.aio.Server` adds grpcio's public methods."""

    def __init__(
        self,
        executor: Optional[Executor],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        super().__init__(executor, options, maximum_concurrent_rpcs, compression)
        self._settings = options.protocol_settings()
        #: What all connections may buffer, and each of them
        #: (:mod:`minigrpc.protocol.memory_budget`).
        self._memory = options.memory_budget()
        #: Floods by peer: a peer sent away for one opens its next connections with less.
        self._peers = _protocol.PeerHistory(time.monotonic)
        #: What every connection reads into (see AioConnection).
        self._reads = ReadBuffers()
        self._listeners: List[Listener] = []
        #: The listeners being watched by the event loop, and those resting after running out
        #: of descriptors, with the timer that arms them again
        #: (:mod:`minigrpc.driver.server_accept`).
        self._armed: Set[Listener] = set()
        self._resting: Dict[Listener, asyncio.TimerHandle] = {}
        self._accept_backoff: Dict[Listener, AcceptBackoff] = {}
        #: Accepted sockets whose transport is being made (``connect_accepted_socket``).
        self._accepting: Set[asyncio.Task[Any]] = set()
        self._connections: Set[AioConnection] = set()
        self._state = NEW
        self._stop_deadline: Optional[float] = None
        self._stop_timers: List[asyncio.TimerHandle] = []
        self._terminated: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None

    def _terminated_event(self) -> asyncio.Event:
        if self._terminated is None:
            self._terminated = asyncio.Event()
        return self._terminated

    async def _serve(self) -> None:
        """Start accepting on every listener (``start()``).

        The accepting is a reader of minigrpc's own rather than ``loop.create_server()``:
        asyncio's accept loop, out of descriptors, logs a traceback per attempt and tries again
        up to ``backlog`` times per readiness event, at full CPU; this one rests the listener
        (:mod:`minigrpc.driver.server_accept`), as the blocking server does."""
        self._loop = asyncio.get_running_loop()
        for listener in self._listeners:
            self._arm_listener(listener)

    def _arm_listener(self, listener: Listener) -> None:
        self._resting.pop(listener, None)
        if listener in self._listeners and listener not in self._armed:
            self._armed.add(listener)
            self._loop.add_reader(listener.sock, self._accept, listener)

    def _accept(self, listener: Listener) -> None:
        """Accept what the listener has, at most :data:`~minigrpc.driver.server_accept.
        ACCEPTS_PER_WAKEUP`; out of descriptors or buffers, stop watching it and arm it again
        from a timer."""
        backoff = self._accept_backoff.get(listener)
        if backoff is None:
            backoff = self._accept_backoff[listener] = AcceptBackoff(listener.display)
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, _address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                delay = backoff.failed(exc)
                if delay is not None and listener in self._armed:
                    self._armed.discard(listener)
                    self._loop.remove_reader(listener.sock)
                    self._resting[listener] = self._loop.call_later(
                        delay, self._arm_listener, listener
                    )
                return
            backoff.accepted()
            sock.setblocking(False)
            task = self._loop.create_task(
                self._loop.connect_accepted_socket(
                    functools.partial(AioConnection, self, listener.tls), sock
                )
            )
            self._accepting.add(task)
            task.add_done_callback(functools.partial(self._accepted, sock))

    def _accepted(self, sock: socket.socket, task: "asyncio.Task[Any]") -> None:
        """The transport of an accepted socket is made (its AioConnection is serving), or
        failed: the socket is closed (the client sees its connection end)."""
        self._accepting.discard(task)
        if task.cancelled():
            sock.close()
            return
        exc = task.exception()
        if exc is not None:
            _LOGGER.debug("setting up an accepted connection failed: %s", exc)
            sock.close()

    def _resume_held_back(self) -> None:
        """Give window again to connections that were held back and are under budget now."""
        for account in self._memory.resumable():
            connection = account.owner
            if isinstance(connection, AioConnection) and not connection.closed:
                connection.protocol.resume_credit()
                connection.schedule_flush()

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
        if self._accepting:
            # Sockets accepted just before the listeners closed: their connections are
            # refused as they are made (AioConnection.connection_made).
            await asyncio.wait(list(self._accepting))
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        for timer in self._stop_timers:
            timer.cancel()
        self._state = STOPPED
        self._terminated_event().set()

    def _close_listeners(self) -> None:
        for listener in self._armed:
            self._loop.remove_reader(listener.sock)
        self._armed.clear()
        for timer in self._resting.values():
            timer.cancel()
        self._resting.clear()
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
