"""The asyncio server's I/O: connections on the event loop, the driver's timers, stop.

This is :mod:`minigrpc.blocking.server_loop` for an event loop.  Both drive the same sans-IO
:class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection` through the same driver
(:class:`minigrpc.driver.server_driver.ServerDriver`), which decides what happens to calls and
connections; :class:`AsyncServerLoop` carries its decisions out on the event loop
(:class:`~minigrpc.driver.server_driver.ServerIO`), and how a call's task waits is
:class:`minigrpc.aio.server_handlers.CallTasks`.  What is here:

* Each accepted socket is an :class:`AsyncServerConnection` (an ``asyncio.BufferedProtocol``):
  bytes from the loop go to the driver, and what the protocol queued is written to the loop's
  transport.  TLS is the same in-memory engine the blocking server uses
  (:class:`minigrpc.net.tls.TLSEngine`), so reloading credentials and the auth context behave
  alike.
* Backpressure (RFC 9113 §5.2; PROTOCOL-HTTP2.md leaves flow control to HTTP/2): the connection
  stops reading and producing DATA while its transport holds ``minigrpc.max_output_buffer``
  unsent bytes, or while what the client sent alone is over its memory share.
* Accepting is a reader of minigrpc's own rather than ``loop.create_server()``: asyncio's accept
  loop, out of descriptors, logs a traceback per attempt and tries again up to ``backlog``
  times per readiness event, at full CPU; this one rests the listener
  (:mod:`minigrpc.driver.server_accept`), as the blocking server does.
"""

import asyncio
import functools
import socket
import time
from concurrent.futures import Executor
from typing import Any, Callable, List, Optional, Set, cast

from ..driver.logs import get_logger
from ..driver.server_driver import ServedConnection, ServerDriver
from ..driver.server_options import ServerOptions
from ..net.server_listeners import accept_batch
from ..net.sockets import Listener, ReadBuffers, peer_identity, peer_name
from ..protocol.server_events import CallStarted
from .server_handlers import CallTasks
from .servicer_context import ServicerContext

try:
    from ..net.trace import tracer_for as _tracer_for
except ImportError:  # pragma: no cover - trace.py is optional
    _tracer_for = None  # type: ignore[assignment]

__all__ = ["AsyncServerConnection", "AsyncServerLoop"]

_LOGGER = get_logger("minigrpc.server")

#: Server states.
NEW, STARTED, STOPPING, STOPPED = range(4)


class AsyncServerConnection(asyncio.BufferedProtocol):
    """One accepted connection: its transport, and the driver's state of it (``served``).

    The transport reads into the server's :class:`~minigrpc.net.sockets.ReadBuffers` rather than
    into a new 256 KiB bytes object each time (the mmap, mremap and munmap of
    :data:`minigrpc.net.sockets.SMALL_READ`, on every read: with a connection per caller, every
    call is a read).  One set serves every connection: the loop finishes each read, its bytes
    copied out, before it starts the next, so the server holds one buffer, not one per client.
    """

    def __init__(self, server: "AsyncServerLoop", tls_context: Any) -> None:
        self.server = server
        self.tls: Any = None
        if tls_context is not None:
            from ..net.tls import TLSEngine

            self.tls = TLSEngine(tls_context, server_side=True)
        self.served: ServedConnection = None  # type: ignore[assignment]  # connection_made()
        self.protocol: Any = None  # the served connection's, kept at hand
        self.transport: Optional[asyncio.Transport] = None
        #: The transport reported the connection lost.
        self.closed = False
        #: Our side is finished (shut for writing, closing or aborted): input is dropped.
        self._finished = False
        #: Why the server closed the connection, for the driver's log.
        self._reason = ""
        self._limit = server.options.max_output_buffer
        #: Reading is paused: the transport's output is full, or what the client sent alone
        #: is over the connection's memory limit (:mod:`minigrpc.protocol.memory_budget`).
        self._output_full = False
        self._reading_paused = False
        self._flush_scheduled = False
        #: A call started in the read being handled: its task takes its first step on the
        #: loop's next pass (see _receive).
        self.started_calls = False
        self._input_scheduled = False

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.server.serving:
            transport.abort()  # accepted as the server stopped: refused, as later ones are
            return
        sock = transport.get_extra_info("socket")
        peer, identity = "unknown", None
        if sock is not None:
            peer, identity = peer_name(sock), peer_identity(sock)
        # The frame trace of this connection (``MINIGRPC_TRACE``, :mod:`minigrpc.net.trace`).
        tracer = _tracer_for("server", peer) if _tracer_for is not None else None
        transport.set_write_buffer_limits(high=self._limit)
        self.served = self.server.driver.open_connection(self, peer, identity, self.tls, tracer)
        self.protocol = self.served.protocol
        self.flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server.reads.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server.reads.take(nbytes))

    def data_received(self, data: bytes) -> None:
        if self._finished or self.served is None:
            return  # shut for writing or closing: nothing the client says matters any more
        self._receive(data)

    def _receive(self, data: Optional[bytes]) -> None:
        """Hand what was read to the driver (None: the rest of an earlier read), at most a
        pass's worth of it (:data:`minigrpc.http2.flood.PASS_LIMIT`): the rest waits, reading
        paused, for the event loop's next turn, after every other connection's ready
        callbacks."""
        self._input_scheduled = False
        if self.closed or self._finished:
            return
        try:
            # What handling the read queues goes out in one flush: schedule_flush() meanwhile
            # schedules nothing more.
            self._flush_scheduled = True
            self.started_calls = False
            if data is None:
                self.server.driver.resume_input(self.served)
            else:
                self.server.driver.received(self.served, data)
            if self.started_calls:
                # The calls' tasks run on the loop's next pass, before this flush: a handler
                # that answers at once shares the write with what the read queued (the ACK of
                # a PING, a WINDOW_UPDATE), one write and one pass per read rather than two.
                self.server.loop.call_soon(self.flush)
            else:
                self.flush()
        except Exception:
            self._internal_error()
            return
        if self.protocol.pending_input and not self._input_scheduled:
            self._input_scheduled = True
            self.server.loop.call_soon(self._receive, None)
        self._update_reading()

    def eof_received(self) -> Optional[bool]:
        return False  # HTTP/2 has no half-closed connection: close our side too

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        if self.served is not None:
            reason = self._reason or (
                "the client closed the connection" if exc is None else f"connection lost: {exc}"
            )
            self.server.driver.connection_closed(self.served, reason)
        self.server.connection_closed()

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
        if transport is None or self.closed or self._finished:
            return
        protocol = self.protocol
        pause = self._output_full or protocol.stop_reading or protocol.pending_input
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
            self.server.loop.call_soon(self.flush)

    def _write(self) -> None:
        """What the protocol queued, to the transport, within the output bound."""
        transport = self.transport
        assert transport is not None
        served = self.served
        while True:
            data = served.outgoing()
            if data:
                transport.write(data)
            if not served.output_room(self._limit - transport.get_write_buffer_size()):
                return

    def flush(self) -> None:
        """Write what the protocol queued, within the output bound; wake waiting calls; tell
        the driver, which ends the connection when it is time."""
        self._flush_scheduled = False
        transport = self.transport
        if self.closed or self._finished or transport is None:
            return
        self._write()
        self._update_reading()
        driver = self.server.driver
        driver.resume_held_back()
        for call in list(self.served.calls.values()):
            cast(ServicerContext, call)._wake()
        # The transport writes what it holds before an EOF or a close: nothing must wait.
        driver.flushed(self.served, transport.get_write_buffer_size(), False)

    def shutdown_write(self) -> bool:
        """Shut our write side once the transport's buffer is out, and read until the client
        closes; over TLS (whose engine is ours), close after the buffer instead."""
        transport = self.transport
        if transport is None or self.closed:
            return False
        self._finished = True
        if self.tls is None and transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()
        return True

    def close_now(self, reason: str = "") -> None:
        """Write what the transport takes at once, and close without waiting any more."""
        transport = self.transport
        if self.closed or transport is None:
            return
        if reason:
            self._reason = reason
        if not self._finished and self.served is not None and not self.served.lingering:
            self._write()
        self._finished = True
        transport.abort()

    def _internal_error(self) -> None:
        """A bug while serving this connection: log it, drop only this one, with
        GOAWAY(INTERNAL_ERROR) first if it can still be sent (RFC 9113 §5.4.1)."""
        _LOGGER.exception(
            "minigrpc server: internal error on the connection from %s; closing it",
            self.served.peer if self.served is not None else "?",
        )
        try:
            driver = self.server.driver
            driver.handle_events(self.served, self.protocol.fail_internally())
            self.close_now("internal error")
        except Exception:
            _LOGGER.exception("minigrpc server: sending GOAWAY(INTERNAL_ERROR) failed")
            if self.transport is not None:
                self.transport.abort()


class AsyncServerLoop:
    """The event loop's side of an asyncio server (module docstring): it carries out the
    driver's decisions (:class:`~minigrpc.driver.server_driver.ServerIO`);
    :class:`minigrpc.aio.server_api.Server` holds it and adds grpcio's public methods."""

    def __init__(self, executor: Optional[Executor], options: ServerOptions) -> None:
        self.options = options
        self.driver = ServerDriver(self, options, awaits_interceptors=True)
        self._calls = CallTasks(self, self.driver, executor)
        #: What every connection reads into (see AsyncServerConnection).
        self.reads = ReadBuffers()
        self.listeners: List[Listener] = []
        #: The listeners being watched by the event loop.
        self._armed: Set[Listener] = set()
        #: Accepted sockets whose transport is being made (``connect_accepted_socket``).
        self._accepting: Set[asyncio.Task[Any]] = set()
        self._state = NEW
        self._terminated: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None
        #: The event loop, once the server serves.
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # start()

    @property
    def serving(self) -> bool:
        """New connections are taken (started, not stopping)."""
        return self._state == STARTED

    def terminated_event(self) -> asyncio.Event:
        if self._terminated is None:
            self._terminated = asyncio.Event()
        return self._terminated

    # -- lifecycle --------------------------------------------------------------------------

    def check_not_started(self) -> None:
        """Ports are added before ``start()``: RuntimeError after."""
        if self._state != NEW:
            raise RuntimeError("ports must be added before start()")

    def add_listeners(self, listeners: List[Listener]) -> None:
        self.listeners.extend(listeners)

    async def start(self) -> None:
        """Start accepting on every listener, on the running event loop (only once)."""
        if self._state != NEW:
            raise RuntimeError("the server has already been started")
        self._state = STARTED
        self.terminated_event()
        self.loop = asyncio.get_running_loop()
        self._calls.serve_on(self.loop)
        for listener in self.listeners:
            self.arm_listener(listener)

    async def stop(self, grace: Optional[float]) -> None:
        """Refuse new connections now; have the driver drain (or cut) the calls
        (:meth:`~minigrpc.driver.server_driver.ServerDriver.stop`); return once all is closed
        and every call's task has ended."""
        if self._state == NEW:
            self._state = STOPPED
            self._close_listeners()
            self.terminated_event().set()
            return
        if self._state == STOPPED:
            return
        self._state = STOPPING
        self._close_listeners()
        self.driver.stop(grace)
        while self.driver.connections:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        if self._accepting:
            # Sockets accepted just before the listeners closed: their connections are
            # refused as they are made (AsyncServerConnection.connection_made).
            await asyncio.wait(list(self._accepting))
        await self._calls.wait_all()
        self._state = STOPPED
        self.terminated_event().set()

    def _close_listeners(self) -> None:
        for listener in list(self._armed):
            self.rest_listener(listener)
        for listener in self.listeners:
            listener.close()
        self.listeners = []

    def connection_closed(self) -> None:
        """A connection is gone: ``stop()`` looks again whether any is left."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    # -- accepting --------------------------------------------------------------------------

    def _accept(self, listener: Listener) -> None:
        """Accept what the listener has; out of descriptors or buffers, the driver rests it."""
        accepted, error = accept_batch(listener)
        if accepted:
            self.driver.accepted(listener)
        for sock in accepted:
            task = self.loop.create_task(
                self.loop.connect_accepted_socket(
                    functools.partial(AsyncServerConnection, self, listener.tls), sock
                )
            )
            self._accepting.add(task)
            task.add_done_callback(functools.partial(self._accepted, sock))
        if error is not None:
            self.driver.accept_failed(listener, error)

    def _accepted(self, sock: socket.socket, task: "asyncio.Task[Any]") -> None:
        """The transport of an accepted socket is made (its connection is serving), or
        failed: the socket is closed (the client sees its connection end)."""
        self._accepting.discard(task)
        if task.cancelled():
            sock.close()
            return
        exc = task.exception()
        if exc is not None:
            _LOGGER.debug("setting up an accepted connection failed: %s", exc)
            sock.close()

    # -- the driver's primitives ------------------------------------------------------------

    def call_at(
        self, when: float, callback: Callable[..., None], *args: Any
    ) -> asyncio.TimerHandle:
        return self.loop.call_later(max(0.0, when - time.monotonic()), callback, *args)

    def flush_soon(self, connection: ServedConnection) -> None:
        connection.link.schedule_flush()

    def shutdown_write(self, connection: ServedConnection) -> bool:
        link: AsyncServerConnection = connection.link
        return link.shutdown_write()

    def close(self, connection: ServedConnection) -> None:
        link: AsyncServerConnection = connection.link
        link.close_now()

    def rest_listener(self, listener: Any) -> None:
        if listener in self._armed:
            self._armed.discard(listener)
            self.loop.remove_reader(listener.sock)

    def arm_listener(self, listener: Any) -> None:
        if listener in self.listeners and listener not in self._armed:
            self._armed.add(listener)
            self.loop.add_reader(listener.sock, self._accept, listener)

    def new_call(self, connection: ServedConnection, event: CallStarted) -> ServicerContext:
        return self._calls.new_call(connection, event)

    def start_handler(self, call: ServicerContext) -> None:
        call._connection.link.started_calls = True  # its read flushes after the task's step
        self._calls.start_handler(call)

    def requests_arrived(self, call: ServicerContext) -> None:
        call._wake()

    def wake(self, call: ServicerContext) -> None:
        call._wake()

    def call_ended(self, call: ServicerContext, answered: bool) -> None:
        self._calls.call_ended(call, answered)

    def run_callbacks(self, call: ServicerContext, callbacks: List[Callable[..., Any]]) -> None:
        self._calls.run_callbacks(call, callbacks)
