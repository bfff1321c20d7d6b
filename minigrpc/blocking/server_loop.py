"""The blocking server's I/O: one thread, a selector loop, every connection.

:class:`ServerLoop` is the machinery behind :class:`minigrpc.blocking.server_api.Server` (which
holds it and adds grpcio's public methods): accepting, reading, writing with backpressure,
timers, the wake-up of the I/O thread and its end.  What happens to calls and connections is
decided by the driver (:class:`minigrpc.driver.server_driver.ServerDriver`), which the loop
feeds what it reads and whose primitives it carries out (:class:`~minigrpc.driver.
server_driver.ServerIO`); how handlers wait for their calls is
:class:`minigrpc.blocking.server_handlers.CallHandlers`.

Design:

* One I/O thread runs a ``selectors`` loop over the listening sockets and every connection, so
  an idle connection costs a socket and a few objects, not a thread, and a slow or stalled
  client only ever delays itself: sockets are non-blocking and nothing in the loop waits for a
  handler.  The gRPC rules live in the sans-IO :mod:`minigrpc.protocol.server_protocol`.
* Handlers run on a ``concurrent.futures`` executor, as in grpcio (the handlers start once a
  pass of the loop has read every ready socket).  What a handler does to the wire (initial
  metadata, its result) is posted to the I/O thread through a queue and a self-pipe wake-up
  (:class:`minigrpc.blocking.server_commands.CommandQueue`), or, for a call alone on an idle
  server, written by the handler's thread itself (:meth:`ServerLoop.send_outcome`).  Each
  connection's output buffer is bounded: beyond it the loop stops reading from that client and
  stops handing DATA to the connection, so a client that never reads cannot make us buffer
  without bound.
* Fairness: a pass of the loop reads each ready connection once, at most
  :data:`minigrpc.net.sockets.LARGE_READ` bytes, and writes it at most its output room, so a
  connection's share of the I/O thread per pass is bounded however much it sends; what it
  sent beyond is read in the next passes, after every other ready connection had its turn.
  Frames that do no work are bounded by :mod:`minigrpc.http2.flood`, and what a connection
  may make the server buffer by :mod:`minigrpc.protocol.memory_budget` (a connection whose
  received data alone is over its share is not read at all until a handler takes some).
* Timers (deadlines, the request-stall check, the handshake and idle timeouts, the steps of a
  drain and a stop) are a heap in the same loop: no thread sleeps per call.
"""

import selectors
import socket
import threading
import time
from concurrent.futures import Executor
from typing import Any, Callable, List, Optional, Set, Tuple

from ..driver.logs import get_logger
from ..driver.server_call_state import CallState
from ..driver.server_dispatch import OVER_BUDGET
from ..driver.server_driver import ServedConnection, ServerDriver
from ..driver.server_options import ServerOptions
from ..net import sockets
from ..net.server_listeners import accept_batch
from ..net.sockets import Listener, peer_identity, peer_name
from ..protocol.enums import StatusCode
from ..protocol.server_events import CallStarted
from .server_commands import CommandQueue
from .server_handlers import CallHandlers
from .servicer_context import ServicerContext
from .timers import TimerHandle, TimerHeap

try:
    from ..net.trace import tracer_for as _tracer_for
except ImportError:  # pragma: no cover - trace.py is optional
    _tracer_for = None  # type: ignore[assignment]

__all__ = ["BlockingServerConnection", "ServerLoop"]

#: The server's logger (internal errors, dropped connections); named after the public API.
_LOGGER = get_logger("minigrpc.server")

#: Server states.
NEW, STARTED, STOPPING, STOPPED = range(4)


class BlockingServerConnection:
    """One accepted socket, its unsent output, and the driver's state of it (``served``)."""

    __slots__ = ("closed", "output", "protocol", "read_size", "reading", "senders", "served",
                 "sock", "writing")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.served: ServedConnection = None  # type: ignore[assignment]  # set once opened
        self.protocol: Any = None  # the served connection's, kept at hand
        self.output = bytearray()
        #: Calls streaming responses: their handlers learn after each flush what was written.
        self.senders: Set[ServicerContext] = set()
        #: Size of the next ``recv()`` (:func:`minigrpc.net.sockets.next_read_size`).
        self.read_size = sockets.SMALL_READ
        self.reading = True
        self.writing = False
        self.closed = False


def _link_of(args: Tuple[Any, ...]) -> Optional[BlockingServerConnection]:
    """The connection a timer or command concerns (its first argument, or that one's)."""
    first = args[0] if args else None
    if isinstance(first, CallState):
        first = first._connection
    if isinstance(first, ServedConnection):
        first = first.link
    return first if isinstance(first, BlockingServerConnection) else None


class ServerLoop:
    """The I/O thread of a blocking server (module docstring); it carries out the driver's
    decisions (:class:`~minigrpc.driver.server_driver.ServerIO`)."""

    def __init__(self, executor: Optional[Executor], options: ServerOptions) -> None:
        self.options = options
        self.driver = ServerDriver(self, options)
        self._calls = CallHandlers(self, self.driver, executor, options)
        self.listeners: List[Listener] = []
        self._state = NEW
        self._state_lock = threading.Lock()
        #: Set once every connection is closed and the loop has ended.
        self.terminated = threading.Event()
        self._selector: Optional[selectors.BaseSelector] = None
        #: What handler threads and ``stop()`` hand to the I/O thread, and its wake-up.
        self._commands = CommandQueue(self._command_failed)
        #: The loop's timers (:class:`~minigrpc.blocking.timers.TimerHeap`, also the client's).
        self._timers = TimerHeap()
        self._dirty: Set[BlockingServerConnection] = set()
        #: Connections with input left past the last pass's limit (see :meth:`_receive`).
        self._backlog: Set[BlockingServerConnection] = set()
        #: Held by the I/O thread except while it waits in ``select()``; a handler thread that
        #: gets it may finish its own call there and then (see :meth:`send_outcome`).
        self._io_lock = threading.Lock()
        self._loop_thread: Optional[threading.Thread] = None
        #: ``threading.get_ident()`` of the thread running :meth:`_run_loop`, once it runs.
        self._io_thread_ident: Optional[int] = None

    # -- lifecycle (any thread) ----------------------------------------------------------------

    def check_not_started(self) -> None:
        """Ports are added before ``start()``: RuntimeError after."""
        with self._state_lock:
            if self._state != NEW:
                raise RuntimeError("ports must be added before start()")

    def add_listeners(self, listeners: List[Listener]) -> None:
        self.listeners.extend(listeners)

    def start(self) -> None:
        """Start the I/O thread on the listeners added so far."""
        with self._state_lock:
            if self._state != NEW:
                raise RuntimeError("the server has already been started")
            self._state = STARTED
        selector = selectors.DefaultSelector()
        self._commands.open(selector)
        for listener in self.listeners:
            selector.register(listener.sock, selectors.EVENT_READ, listener)
        self._selector = selector
        self._loop_thread = threading.Thread(
            target=self._run_loop, name="minigrpc-server-io", daemon=True
        )
        self._loop_thread.start()

    def stop(self, grace: Optional[float]) -> threading.Event:
        """Refuse new connections and have the driver stop the rest
        (:meth:`~minigrpc.driver.server_driver.ServerDriver.stop`); :attr:`terminated`."""
        with self._state_lock:
            state = self._state
            if state == NEW:
                self._state = STOPPED
            elif state in (STARTED, STOPPING):
                self._state = STOPPING
        if state == NEW:
            for listener in self.listeners:
                listener.close()
            self.listeners = []
            self._calls.shut_down()
            self.terminated.set()
        elif state != STOPPED:
            self.post(self._begin_stop, grace)
        return self.terminated

    def _begin_stop(self, grace: Optional[float]) -> None:
        for listener in self.listeners:
            self.rest_listener(listener)
            listener.close()
        self.listeners = []
        self.driver.stop(grace)

    # -- cross-thread plumbing -----------------------------------------------------------------

    def post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the I/O thread soon (a connection is not thread-safe)."""
        self._commands.post(function, *args)

    def _command_failed(self, args: Tuple[Any, ...]) -> None:
        self._internal_error(_link_of(args))

    # -- the driver's primitives (I/O thread) --------------------------------------------------

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> TimerHandle:
        return self._timers.push(when, callback, *args)

    def flush_soon(self, connection: ServedConnection) -> None:
        self._dirty.add(connection.link)

    def shutdown_write(self, connection: ServedConnection) -> bool:
        link: BlockingServerConnection = connection.link
        try:
            link.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return False
        return True

    def close(self, connection: ServedConnection) -> None:
        link: BlockingServerConnection = connection.link
        if not connection.lingering:
            self._write(link)  # what the socket takes at once: the GOAWAY, the resets
        self._close(link, "closed by the server")

    def rest_listener(self, listener: Any) -> None:
        if self._selector is not None:
            try:
                self._selector.unregister(listener.sock)
            except (KeyError, ValueError):
                pass

    def arm_listener(self, listener: Any) -> None:
        if listener in self.listeners and self._selector is not None:
            self._selector.register(listener.sock, selectors.EVENT_READ, listener)

    def new_call(self, connection: ServedConnection, event: CallStarted) -> ServicerContext:
        return self._calls.new_call(connection, event)

    def start_handler(self, call: ServicerContext) -> None:
        self._calls.start_handler(call)

    def requests_arrived(self, call: ServicerContext) -> None:
        self._calls.pull_requests(call)

    def wake(self, call: ServicerContext) -> None:
        self._calls.wake(call)

    def call_ended(self, call: ServicerContext, answered: bool) -> None:
        self._calls.call_ended(call, answered)

    def run_callbacks(self, call: ServicerContext, callbacks: List[Callable[..., Any]]) -> None:
        self._calls.run_callbacks(call, callbacks)

    # -- the I/O loop --------------------------------------------------------------------------

    def _run_loop(self) -> None:
        selector = self._selector
        assert selector is not None
        self._io_thread_ident = threading.get_ident()
        self._io_lock.acquire()
        calls = self._calls
        try:
            while True:
                timeout: Optional[float] = None
                backlog = self._backlog
                if backlog:
                    timeout = 0.0  # input left from the last pass: only look what else is ready
                else:
                    first = self._timers.next_due()
                    if first is not None:
                        timeout = max(0.0, first - time.monotonic())
                woken = False
                self._io_lock.release()
                try:
                    ready = selector.select(timeout)
                finally:
                    self._io_lock.acquire()
                calls.begin_pass()
                self._backlog = set()
                for key, mask in ready:
                    data = key.data
                    if data is None:
                        woken = True
                    elif isinstance(data, Listener):
                        self._accept(data)
                    else:
                        if mask & selectors.EVENT_WRITE:
                            self._dirty.add(data)
                        if mask & selectors.EVENT_READ:
                            backlog.discard(data)
                            self._read(data)
                for link in backlog:  # not readable this pass, but input is waiting
                    self._read(link)
                if woken:
                    self._commands.run()
                self._run_timers()
                calls.submit_held()
                self.driver.resume_held_back()
                if self._dirty:
                    dirty = self._dirty
                    self._dirty = set()
                    for link in dirty:
                        try:
                            self._flush(link)
                        except Exception:
                            self._internal_error(link)
                if self._state == STOPPING and not self.driver.connections and not self.listeners:
                    break
        except Exception:  # pragma: no cover - a bug; never leave the server half alive
            _LOGGER.exception("minigrpc server: the I/O loop failed")
        finally:
            try:
                calls.submit_held(in_pass=False)  # only a failed pass leaves any
                self._finish_loop()
            finally:
                self._io_lock.release()

    def _finish_loop(self) -> None:
        self._commands.refuse()
        for connection in list(self.driver.connections):
            self._close(connection.link, "the server stopped")
        for listener in self.listeners:
            listener.close()
        self.listeners = []
        if self._selector is not None:
            self._selector.close()
        self._commands.close()
        with self._state_lock:
            self._state = STOPPED
        self._calls.shut_down()
        self.terminated.set()

    def _run_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        timer = timers.pop_due(now)
        while timer is not None:
            try:
                timer.callback(*timer.args)
            except Exception:
                self._internal_error(_link_of(timer.args))
            timer = timers.pop_due(now)

    def _accept(self, listener: Listener) -> None:
        """Accept what the listener has (out of descriptors or buffers, the driver rests it:
        unregistered, since the selector is level-triggered and the connection that could not
        be taken keeps it readable)."""
        accepted, error = accept_batch(listener)
        if accepted:
            self.driver.accepted(listener)
        for sock in accepted:
            tls = None
            if listener.tls is not None:
                from ..net.tls import TLSEngine

                tls = TLSEngine(listener.tls, server_side=True)
            peer = peer_name(sock)
            tracer = _tracer_for("server", peer) if _tracer_for is not None else None
            link = BlockingServerConnection(sock)
            served = self.driver.open_connection(link, peer, peer_identity(sock), tls, tracer)
            link.served = served
            link.protocol = served.protocol
            assert self._selector is not None
            self._selector.register(sock, selectors.EVENT_READ, link)
            self._dirty.add(link)
        if error is not None:
            self.driver.accept_failed(listener, error)

    def _read(self, link: BlockingServerConnection) -> None:
        if link.closed:
            return
        served = link.served
        if link.protocol.pending_input and not served.lingering:
            # What the last read brought past the pass limit comes before any new read.
            self._receive(link, None)
            return
        try:
            data = link.sock.recv(link.read_size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(link, f"read failed: {exc}")
            return
        if not data:
            self._close(link, "the client closed the connection")
            return
        link.read_size = sockets.next_read_size(len(data))
        if served.lingering:
            return  # drained and shut for writing: nothing the client says matters any more
        self._receive(link, data)

    def _receive(self, link: BlockingServerConnection, data: Optional[bytes]) -> None:
        """Hand what was read to the driver (None: the rest of an earlier read), at most a
        pass's worth of it (:data:`minigrpc.http2.flood.PASS_LIMIT`); the rest waits for the
        next pass."""
        try:
            if data is None:
                self.driver.resume_input(link.served)
            else:
                self.driver.received(link.served, data)
        except Exception:
            self._internal_error(link)
            return
        if link.protocol.pending_input:
            self._backlog.add(link)
        self._dirty.add(link)

    def internal_error(self, connection: ServedConnection) -> None:
        """A handler run on the I/O thread failed beyond its call."""
        self._internal_error(connection.link)

    def _internal_error(self, link: Optional[BlockingServerConnection]) -> None:
        """A bug while serving one connection: log it, drop only that one.

        The client gets GOAWAY(INTERNAL_ERROR) before the close (RFC 9113 §5.4.1), flushed as
        any closing connection's last frames are (at most
        :data:`~minigrpc.driver.server_timers.CLOSE_FLUSH_TIMEOUT`); should that fail too, the
        connection is closed without it.
        """
        _LOGGER.exception(
            "minigrpc server: internal error on the connection from %s; closing it",
            link.served.peer if link is not None else "?",
        )
        if link is None or link.closed:
            return
        try:
            self.driver.handle_events(link.served, link.protocol.fail_internally())
            self._flush(link)
        except Exception:
            _LOGGER.exception("minigrpc server: sending GOAWAY(INTERNAL_ERROR) failed")
            try:
                self._close(link, "internal error")
            except Exception:  # pragma: no cover - last resort
                _LOGGER.exception("minigrpc server: closing the connection failed")

    def _write(self, link: BlockingServerConnection) -> bool:
        """Move what the protocol queued into the output and the socket, within the output
        bound; False if the connection was lost doing it."""
        served = link.served
        output = link.output
        while True:
            data = served.outgoing()
            if data:
                output += data
            sent = 0
            if output:
                try:
                    sent = link.sock.send(output)
                except (BlockingIOError, InterruptedError):
                    pass  # nothing sent: ``sent`` stays 0
                except OSError as exc:
                    self._close(link, f"write failed: {exc}")
                    return False
                if sent:
                    del output[:sent]
            # Once the socket takes nothing, the next batch waits for it to drain.
            room = self.options.max_output_buffer - len(output)
            if not served.output_room(room) or (output and not sent):
                return True

    def _flush(self, link: BlockingServerConnection) -> None:
        """Write what the protocol queued; apply backpressure; end the connection when the
        driver says it is time."""
        if link.closed or not self._write(link):
            return
        served = link.served
        protocol = link.protocol
        unsent = len(link.output)
        for call in link.senders:
            credit = call._response_credit
            if credit is not None:
                credit.written(protocol.queued_response_cost(call._stream_id))
        self.driver.flushed(served, unsent, unsent > 0)
        if link.closed:
            return
        self._update_interest(
            link,
            want_read=served.lingering
            or (protocol.drained and not served.calls)
            or (
                unsent < self.options.max_output_buffer
                and not protocol.closed
                and not protocol.stop_reading
            ),
        )

    def _update_interest(self, link: BlockingServerConnection, want_read: bool) -> None:
        want_write = bool(link.output)
        if want_read == link.reading and want_write == link.writing:
            return
        events = (selectors.EVENT_READ if want_read else 0) | (
            selectors.EVENT_WRITE if want_write else 0
        )
        selector = self._selector
        assert selector is not None
        registered = link.reading or link.writing
        if events and registered:
            selector.modify(link.sock, events, link)
        elif events:
            selector.register(link.sock, events, link)
        elif registered:
            selector.unregister(link.sock)
        link.reading = want_read
        link.writing = want_write

    def _close(self, link: BlockingServerConnection, reason: str) -> None:
        """Close the socket now (what is unsent is dropped) and let the driver end what the
        connection had."""
        if link.closed:
            return
        link.closed = True
        self._dirty.discard(link)
        if self._selector is not None and (link.reading or link.writing):
            try:
                self._selector.unregister(link.sock)
            except (KeyError, ValueError):
                pass
        try:
            link.sock.close()
        except OSError:  # pragma: no cover
            pass
        self.driver.connection_closed(link.served, reason)

    # -- a handler's outcome (handler threads) -------------------------------------------------

    def send_outcome(
        self,
        call: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes],
    ) -> None:
        """Send the outcome: from a handler thread here if the I/O thread is idle, else through it.

        Handing every response to the I/O thread costs a wake-up (a byte on the wake socket,
        ``select()`` returning, two reads) and a thread switch per call: about a third of a call's
        latency (docs/benchmarks.md). When the I/O thread waits in ``select()`` this thread takes
        :attr:`_io_lock`, so it has the connection's protocol state to itself (it is not
        thread-safe), and writes the response directly. Only a call that is alone on the server
        does so: with several in flight the loop is rarely idle anyway, and it writes many responses
        per wake-up and per ``send()`` (in an A/B under 8 concurrent callers, either way cost the
        same CPU per call), so concurrent calls keep the path they always had. Anything unusual (the
        server stopping, the connection draining, unsent output) also goes through the I/O thread.

        A response is counted in its connection's memory account from here on (a reservation,
        :meth:`~minigrpc.protocol.memory_budget.ConnectionMemory.reserve`), and one for a
        connection over budget ends the call RESOURCE_EXHAUSTED at once: handlers answering faster
        than the I/O thread queues their responses cannot pile them up unseen.
        """
        credit = call._response_credit
        if credit is not None:
            credit.close()  # the outcome drains the outbox; nothing offered later joins it
        if message is not None and not call._connection.protocol.memory.reserve(len(message)):
            code, details, message = OVER_BUDGET
        if threading.get_ident() == self._io_thread_ident:
            # A handler run on the I/O thread (CallHandlers.submit): write now, in the loop's
            # pass, unless something it posted (initial metadata, a cancel) must go first.
            if not self._commands.queued:
                self._calls.write_outcome(call, code, details, message)
                return
        elif self._send_outcome_directly(call, code, details, message):
            return
        self.post(self._calls.write_outcome, call, code, details, message)

    def _send_outcome_directly(
        self,
        call: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes],
    ) -> bool:
        """The direct path of :meth:`send_outcome`; False if it must go through the loop."""
        if not self._io_lock.acquire(blocking=False):
            return False
        served = call._connection
        link: BlockingServerConnection = served.link
        try:
            protocol = link.protocol
            if (
                self._commands.queued  # what this handler posted (cancel, metadata) goes first
                or self.driver.active_calls != 1  # others in flight: the loop batches writes
                or self._state != STARTED
                or self._commands.refused
                or link.closed
                or link.output
                or served.closing
                or served.lingering
                or protocol.draining
                or protocol.closed
            ):
                return False
            first_timer = self._timers.next_due()
            self._calls.write_outcome(call, code, details, message)
            self._dirty.discard(link)
            self._flush(link)
            if self._timers.next_due() != first_timer:
                # the loop's select() timeout no longer covers the first timer
                self._commands.wake()
            return True
        except Exception:
            self._internal_error(link)
            self._commands.wake()
            return True
        finally:
            self._io_lock.release()
