"""The server's I/O half: one thread, a selector loop, every connection.

:class:`ServerLoop` is the machinery behind :class:`minigrpc.blocking.server_api.Server` (which adds
grpcio's public methods): accepting, reading, writing with backpressure, timers, the wake-up of
the I/O thread and the stop choreography.  What a call is, from its first event to its handler
and back, is :class:`minigrpc.blocking.server_handlers.CallHandling`, which it builds on.

Design:

* One I/O thread runs a ``selectors`` loop over the listening sockets and every connection, so
  an idle connection costs a socket and a few objects, not a thread, and a slow or stalled
  client only ever delays itself: sockets are non-blocking and nothing in the loop waits for a
  handler.  The gRPC rules live in the sans-IO :mod:`minigrpc.protocol.server_protocol`.
* Handlers run on a ``concurrent.futures`` executor, as in grpcio
  (:mod:`minigrpc.blocking.server_handlers`
  starts them once a pass of the loop has read every ready socket).  What a handler does to the
  wire (initial metadata, its result) is posted to the I/O thread through a queue and a
  self-pipe wake-up (:class:`minigrpc.blocking.server_commands.CommandQueue`), or, for a call alone
  on an idle server, written by the handler's thread itself (:meth:`ServerLoop._send_outcome`).
  Each connection's output buffer is bounded: beyond it the loop stops reading from that
  client and stops handing DATA to the connection, so a client that never reads cannot make us
  buffer without bound.
* Fairness: a pass of the loop reads each ready connection once, at most
  :data:`minigrpc.net.sockets.LARGE_READ` bytes, and writes it at most its output room, so a
  connection's share of the I/O thread per pass is bounded however much it sends; what it
  sent beyond is read in the next passes, after every other ready connection had its turn.
  Frames that do no work are bounded by :mod:`minigrpc.http2.flood`, and what a connection
  may make the server buffer by :mod:`minigrpc.protocol.memory_budget` (a connection whose received
  data alone is over its share is not read at all until a handler takes some).
* Deadlines (``grpc-timeout``) are timers in the I/O loop.  On expiry the client gets
  DEADLINE_EXCEEDED trailers and the handler's context turns inactive (docs/wire-rules.md,
  "Deadlines and cancellation").
* ``stop(grace)`` drains gracefully with two GOAWAY frames (docs/wire-rules.md, "GOAWAY and PING");
  ``stop(0)`` or an expired grace ends the calls still running UNAVAILABLE, as grpc-core's does.
"""

import concurrent.futures
import heapq
import itertools
import selectors
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..driver import server_dispatch as _dispatch
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
from ..net import sockets
from ..net.sockets import Listener, peer_identity, peer_name
from ..protocol import server_protocol as _protocol
from ..protocol.enums import StatusCode
from ..protocol.grpc_connection import DATA_BATCH
from .server_commands import CommandQueue
from .server_handlers import CallHandling
from .servicer_context import ServicerContext

try:
    from ..net.trace import tracer_for as _tracer_for
except ImportError:  # pragma: no cover - trace.py is optional
    _tracer_for = None  # type: ignore[assignment]

__all__ = ["ServerLoop"]

#: The server's logger (handler exceptions, dropped connections); named after the public API.
_LOGGER = get_logger("minigrpc.server")

#: Deadline timers kept before the heap is checked for timers of finished calls.
_TIMER_COMPACT_MIN = 1024
#: Server states.
_NEW, _STARTED, _STOPPING, _STOPPED = range(4)


class BlockingServerConnection:
    """One accepted socket, its protocol state and its unsent output."""

    __slots__ = (
        "calls",
        "charged_output",
        "close_when_flushed",
        "closed",
        "idle_since",
        "lingering",
        "output",
        "peer",
        "protocol",
        "read_size",
        "reading",
        "senders",
        "sock",
        "tls",
        "tracer",
        "writing",
    )

    def __init__(
        self, sock: socket.socket, protocol: _protocol.ServerGrpcConnection, peer: str
    ) -> None:
        self.sock = sock
        self.protocol = protocol
        self.peer = peer
        self.output = bytearray()
        #: How much of ``output`` is charged to the connection's memory account.
        self.charged_output = 0
        self.calls: Dict[int, ServicerContext] = {}
        #: Calls streaming responses: their handlers learn after each flush what was written.
        self.senders: Set[ServicerContext] = set()
        #: The TLS engine of a connection accepted on a secure port (:mod:`minigrpc.net.tls`).
        self.tls: Any = None
        #: Size of the next ``recv()`` (:func:`minigrpc.net.sockets.next_read_size`).
        self.read_size = sockets.SMALL_READ
        self.reading = True
        self.writing = False
        self.closed = False
        self.close_when_flushed = False
        #: Our side is shut down for writing; we read (and drop) until the client closes.
        self.lingering = False
        #: When the connection last started or ended a call (or was accepted): its idleness
        #: for ``grpc.max_connection_idle_ms`` counts from here, as grpc-go's does.
        self.idle_since = time.monotonic()
        self.tracer = _tracer_for("server", peer) if _tracer_for is not None else None


def _connection_of(args: Tuple[Any, ...]) -> Optional[BlockingServerConnection]:
    """The connection a timer or command concerns (its first argument or that one's)."""
    first = args[0] if args else None
    if isinstance(first, BlockingServerConnection):
        return first
    if isinstance(first, ServicerContext):
        return first._connection
    return None


class ServerLoop(CallHandling):
    """The I/O thread of a server (module docstring) on the calls of :class:`CallHandling`;
    :class:`minigrpc.blocking.server_api.Server` adds grpcio's methods."""

    def __init__(
        self,
        thread_pool: Optional[concurrent.futures.Executor],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        super().__init__(thread_pool, options, maximum_concurrent_rpcs, compression)
        self._settings = options.protocol_settings()
        #: What all connections may buffer, and each of them
        #: (:mod:`minigrpc.protocol.memory_budget`).
        self._memory = options.memory_budget()
        #: Floods by peer: a peer sent away for one opens its next connections with less.
        self._peers = _protocol.PeerHistory(time.monotonic)
        self._listeners: List[Listener] = []
        #: Each listener's episodes of running out of descriptors
        #: (:mod:`minigrpc.driver.server_accept`).
        self._accept_backoff: Dict[Listener, AcceptBackoff] = {}
        self._connections: Set[BlockingServerConnection] = set()
        self._state = _NEW
        self._state_lock = threading.Lock()
        self._terminated = threading.Event()
        self._selector: Optional[selectors.BaseSelector] = None
        #: What handler threads and ``stop()`` hand to the I/O thread, and its wake-up.
        self._commands = CommandQueue(self._command_failed)
        self._timers: List[Tuple[float, int, Callable[..., None], Tuple[Any, ...]]] = []
        self._timer_sequence = itertools.count()
        self._dirty: Set[BlockingServerConnection] = set()
        #: Connections with input left past the last pass's limit (see :meth:`_receive`).
        self._backlog: Set[BlockingServerConnection] = set()
        #: Held by the I/O thread except while it waits in ``select()``; a handler thread that
        #: gets it may finish its own call there and then (see :meth:`_send_outcome`).
        self._io_lock = threading.Lock()
        self._loop_thread: Optional[threading.Thread] = None
        #: ``threading.get_ident()`` of the thread running :meth:`_run_loop`, once it runs.
        self._io_thread_ident: Optional[int] = None
        self._stop_deadline: Optional[float] = None

    # -- cross-thread plumbing -------------------------------------------------------------------

    def _post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the I/O thread soon (a connection is not thread-safe)."""
        self._commands.post(function, *args)

    def _command_failed(self, args: Tuple[Any, ...]) -> None:
        self._internal_error(_connection_of(args))

    def _add_timer(self, when: float, function: Callable[..., None], *args: Any) -> None:
        timers = self._timers
        heapq.heappush(timers, (when, next(self._timer_sequence), function, args))
        if len(timers) > _TIMER_COMPACT_MIN and len(timers) > 4 * (
            self._active_rpcs + len(self._connections)
        ):
            self._compact_timers()

    def _compact_timers(self) -> None:
        """Drop timers of calls and connections that already ended.

        A timer stays in the heap until it fires, so at thousands of calls or connections per
        second with long deadlines (or the 120 s handshake timeout) the heap, and the contexts
        and connections it references, would grow for that whole time.  Rebuilding it when it is
        mostly stale keeps memory proportional to what is actually in flight.
        """
        live = []
        for entry in self._timers:
            function, args = entry[2], entry[3]
            if function == self._expire_call:
                connection, context = args
                if connection.calls.get(context._stream_id) is not context:
                    continue
            elif function == self._check_stall:
                connection, context = args
                if context._request_complete:
                    continue
                if connection.calls.get(context._stream_id) is not context:
                    continue
            elif function == self._check_handshake:
                if args[0].closed or args[0].protocol.handshake_complete:
                    continue
            elif function in (self._check_idle, self._final_goaway, self._close):
                if args[0].closed:
                    continue
            live.append(entry)
        heapq.heapify(live)
        self._timers = live

    # -- the I/O loop ----------------------------------------------------------------------------

    def _run_loop(self) -> None:
        selector = self._selector
        assert selector is not None
        self._io_thread_ident = threading.get_ident()
        self._io_lock.acquire()
        try:
            while True:
                timeout: Optional[float] = None
                backlog = self._backlog
                if backlog:
                    timeout = 0.0  # input left from the last pass: only look what else is ready
                elif self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                woken = False
                self._io_lock.release()
                try:
                    ready = selector.select(timeout)
                finally:
                    self._io_lock.acquire()
                self._begin_pass()
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
                for connection in backlog:  # not readable this pass, but input is waiting
                    self._read(connection)
                if woken:
                    self._commands.run()
                if self._timers:
                    self._run_timers()
                self._submit_held_dispatches()
                self._resume_held_back()
                if self._dirty:
                    dirty = self._dirty
                    self._dirty = set()
                    for connection in dirty:
                        try:
                            self._flush(connection)
                        except Exception:
                            self._internal_error(connection)
                if self._state == _STOPPING and not self._connections and not self._listeners:
                    break
        except Exception:  # pragma: no cover - a bug; never leave the server half alive
            _LOGGER.exception("minigrpc server: the I/O loop failed")
        finally:
            try:
                self._submit_held_dispatches(in_pass=False)  # only a failed pass leaves any
                self._finish_loop()
            finally:
                self._io_lock.release()

    def _finish_loop(self) -> None:
        self._commands.refuse()
        for connection in list(self._connections):
            self._close(connection)
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        if self._selector is not None:
            self._selector.close()
        self._commands.close()
        with self._state_lock:
            self._state = _STOPPED
        self._shutdown_executor()
        self._stop_callback_thread()
        self._terminated.set()

    def _resume_held_back(self) -> None:
        """Give window again to connections that were held back and are under budget now."""
        for account in self._memory.resumable():
            connection = account.owner
            if isinstance(connection, BlockingServerConnection) and not connection.closed:
                connection.protocol.resume_credit()
                for context in connection.senders:  # handlers waiting for the budget
                    credit = context._response_credit
                    if credit is not None:
                        credit.poke()
                self._dirty.add(connection)

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, function, args = heapq.heappop(self._timers)
            try:
                function(*args)
            except Exception:
                self._internal_error(_connection_of(args))

    def _accept(self, listener: Listener) -> None:
        """Accept what the listener has, at most :data:`~minigrpc.driver.server_accept.
        ACCEPTS_PER_WAKEUP`; out of descriptors or buffers, rest it (unregistered: the
        selector is level-triggered, and the connection that could not be taken keeps it
        readable) and arm it again from a timer (:mod:`minigrpc.driver.server_accept`)."""
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
                if delay is not None and self._selector is not None:
                    try:
                        self._selector.unregister(listener.sock)
                    except (KeyError, ValueError):
                        return
                    self._add_timer(time.monotonic() + delay, self._rearm_listener, listener)
                return
            backoff.accepted()
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol = _protocol.ServerGrpcConnection(
                self._settings, shape_from_handler=True, memory=self._memory
            )
            connection = BlockingServerConnection(sock, protocol, peer_name(sock))
            protocol.memory.owner = connection
            protocol.set_peer(self._peers, peer_identity(sock))
            if listener.tls is not None:
                from ..net.tls import TLSEngine

                connection.tls = TLSEngine(listener.tls, server_side=True)
            protocol.initiate()
            protocol.set_output_room(self._options.max_output_buffer)
            self._connections.add(connection)
            assert self._selector is not None
            self._selector.register(sock, selectors.EVENT_READ, connection)
            self._dirty.add(connection)
            now = connection.idle_since
            handshake = self._options.handshake_timeout
            if handshake is not None:
                self._add_timer(now + handshake, self._check_handshake, connection)
            idle = self._options.max_connection_idle
            if idle is not None:
                self._add_timer(now + idle, self._check_idle, connection)

    def _rearm_listener(self, listener: Listener) -> None:
        """A listener's rest is over: watch it again, unless the server stopped meanwhile."""
        if listener in self._listeners and self._selector is not None:
            self._selector.register(listener.sock, selectors.EVENT_READ, listener)

    def _check_handshake(self, connection: BlockingServerConnection) -> None:
        """Close a connection whose client never completed the preface and SETTINGS.

        Such a connection only costs a socket here, but without a limit a client could hold
        any number of them (grpc-core's ``grpc.server_handshake_timeout_ms``, 120 s).
        """
        if not connection.closed and not connection.protocol.handshake_complete:
            _LOGGER.debug("closing %s: no HTTP/2 preface and SETTINGS in time", connection.peer)
            self._close(connection)

    def _check_idle(self, connection: BlockingServerConnection) -> None:
        """``grpc.max_connection_idle_ms``: drain a connection without calls for that long
        (:func:`~minigrpc.driver.server_timers.idle_recheck`)."""
        idle = self._options.max_connection_idle
        if connection.closed or idle is None or connection.protocol.draining:
            return
        now = time.monotonic()
        busy = bool(connection.calls) or connection.protocol.active_calls > 0
        recheck = idle_recheck(now, idle, connection.idle_since, busy)
        if recheck is not None:
            self._add_timer(recheck, self._check_idle, connection)
            return
        _LOGGER.debug("draining %s: idle for %.1f s", connection.peer, idle)
        connection.protocol.start_drain()
        self._add_timer(now + DRAIN_PING_TIMEOUT, self._final_goaway, connection)
        self._dirty.add(connection)

    def _final_goaway(self, connection: BlockingServerConnection) -> None:
        if not connection.closed:
            connection.protocol.send_final_goaway()
            self._dirty.add(connection)

    def _read(self, connection: BlockingServerConnection) -> None:
        if connection.closed:
            return
        if connection.protocol.pending_input and not connection.lingering:
            # What the last read brought past the pass limit comes before any new read.
            self._receive(connection, b"")
            return
        try:
            data = connection.sock.recv(connection.read_size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._connection_lost(connection, f"read failed: {exc}")
            return
        if not data:
            self._connection_lost(connection, "the client closed the connection")
            return
        connection.read_size = sockets.next_read_size(len(data))
        if connection.lingering:
            return  # drained and shut for writing: nothing the client says matters any more
        if connection.tls is not None:
            try:
                data = connection.tls.decrypt(data)
            except OSError as exc:
                self._connection_lost(connection, f"TLS failed: {exc}")
                return
            self._dirty.add(connection)  # the handshake may have something to send
            if not data:
                return
        if connection.tracer is not None:
            connection.tracer.received(data)
        self._receive(connection, data)

    def _receive(self, connection: BlockingServerConnection, data: bytes) -> None:
        """Hand what was read to the protocol, at most a pass's worth of it
        (:data:`minigrpc.http2.flood.PASS_LIMIT`); the rest waits for the next pass."""
        protocol = connection.protocol
        try:
            self._handle_events(connection, protocol.receive_data(data))
        except Exception:
            self._internal_error(connection)
            return
        if protocol.pending_input:
            self._backlog.add(connection)
        self._dirty.add(connection)

    def _internal_error(self, connection: Optional[BlockingServerConnection]) -> None:
        """A bug while serving one connection: log it, drop only that one.

        The client gets GOAWAY(INTERNAL_ERROR) before the close (RFC 9113 §5.4.1), flushed as
        any closing connection's last frames are (at most
        :data:`~minigrpc.driver.server_timers.CLOSE_FLUSH_TIMEOUT`); should that fail too, the
        connection is closed without it.
        """
        _LOGGER.exception(
            "minigrpc server: internal error on the connection from %s; closing it",
            connection.peer if connection is not None else "?",
        )
        if connection is None or connection.closed:
            return
        try:
            self._handle_events(connection, connection.protocol.fail_internally())
            self._flush(connection)
        except Exception:
            _LOGGER.exception("minigrpc server: sending GOAWAY(INTERNAL_ERROR) failed")
            try:
                self._connection_lost(connection, "internal error")
            except Exception:  # pragma: no cover - last resort
                _LOGGER.exception("minigrpc server: closing the connection failed")

    def _flush(self, connection: BlockingServerConnection) -> None:
        """Write what the protocol queued; apply backpressure; close when it is time."""
        if connection.closed:
            return
        protocol = connection.protocol
        output = connection.output
        limit = self._options.max_output_buffer
        tls = connection.tls
        while True:
            if tls is None:
                data = protocol.data_to_send()
            elif tls.established:
                data = protocol.data_to_send()
                if data and connection.tracer is not None:
                    connection.tracer.sent(data)  # the trace shows HTTP/2, not ciphertext
                data = tls.encrypt(data)
            else:
                data = tls.outgoing()  # handshake records; HTTP/2 waits for the handshake
            if data:
                output += data
            sent = 0
            if output:
                try:
                    sent = connection.sock.send(output)
                except (BlockingIOError, InterruptedError):
                    pass  # nothing sent: ``sent`` stays 0
                except OSError as exc:
                    self._connection_lost(connection, f"write failed: {exc}")
                    return
                if sent:
                    if connection.tracer is not None and tls is None:
                        connection.tracer.sent(bytes(output[:sent]))
                    del output[:sent]
            room = limit - len(output)
            if protocol.closed:
                break
            starved = protocol.starved
            # The protocol gets at most DATA_BATCH at a time (not the whole output bound),
            # sent before the next batch; once the socket takes nothing, the next batch waits
            # for it to drain.
            protocol.set_output_room(max(min(room, DATA_BATCH), 0))
            if room <= 0 or not starved or (output and not sent):
                break
        for context in connection.senders:
            credit = context._response_credit
            if credit is not None:
                credit.written(protocol.queued_response_cost(context._stream_id))
        unsent = len(output)
        if unsent != connection.charged_output:
            protocol.memory.charge_outbound(unsent - connection.charged_output)
            connection.charged_output = unsent
        if protocol.closed and not connection.close_when_flushed:
            # Flush what the connection queued (its GOAWAY), but never wait long for a client
            # that won't read.
            self._add_timer(time.monotonic() + CLOSE_FLUSH_TIMEOUT, self._close, connection)
            connection.close_when_flushed = True
        elif protocol.drained and not connection.calls and not connection.close_when_flushed:
            if not output:
                self._linger(connection)
            if not connection.closed:
                self._update_interest(connection, want_read=True)
            return
        if connection.close_when_flushed and not output and not connection.lingering:
            # The GOAWAY is out; closing now, with the client's frames still arriving, would
            # answer them with a TCP RST, and a RST makes the client's kernel drop what it has
            # not read yet: the GOAWAY itself (RFC 9113 §5.4.1 wants it seen). Linger instead.
            self._linger(connection)
            if not connection.closed:
                self._update_interest(connection, want_read=True)
            return
        self._update_interest(
            connection,
            want_read=len(output) < limit
            and not protocol.closed
            and not protocol.stop_reading,
        )

    def _linger(self, connection: BlockingServerConnection) -> None:
        """Close a drained or failed connection gracefully: shut our write side, read until the
        client closes.

        Closing outright while the client still writes (a WINDOW_UPDATE, the ACK of our PING)
        makes its next ``send()`` fail with EPIPE or ECONNRESET, and grpcio then fails calls
        whose trailers are already in its receive buffer ("Stream removed"). After
        ``shutdown(SHUT_WR)`` the client reads everything, sees EOF and closes; we close on its
        EOF or after :data:`~minigrpc.driver.server_timers.LINGER_TIMEOUT` (RFC 9113 §6.8: the
        sender of GOAWAY closes once the streams it accepted are done).
        """
        connection.lingering = True
        connection.close_when_flushed = True
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(connection)
            return
        self._add_timer(time.monotonic() + LINGER_TIMEOUT, self._close, connection)

    def _update_interest(self, connection: BlockingServerConnection, want_read: bool) -> None:
        want_write = bool(connection.output)
        if want_read == connection.reading and want_write == connection.writing:
            return
        events = (selectors.EVENT_READ if want_read else 0) | (
            selectors.EVENT_WRITE if want_write else 0
        )
        selector = self._selector
        assert selector is not None
        registered = connection.reading or connection.writing
        if events and registered:
            selector.modify(connection.sock, events, connection)
        elif events:
            selector.register(connection.sock, events, connection)
        elif registered:
            selector.unregister(connection.sock)
        connection.reading = want_read
        connection.writing = want_write

    def _connection_lost(self, connection: BlockingServerConnection, reason: str) -> None:
        if connection.closed:
            return
        self._handle_events(connection, connection.protocol.connection_lost(reason))
        self._close(connection)

    def _close(self, connection: BlockingServerConnection) -> None:
        if connection.closed:
            return
        connection.closed = True
        connection.protocol.memory.close()
        if connection.protocol.close_reason:
            _LOGGER.debug(
                "closing the connection from %s: %s",
                connection.peer,
                connection.protocol.close_reason,
            )
        self._connections.discard(connection)
        self._dirty.discard(connection)
        if self._selector is not None and (connection.reading or connection.writing):
            try:
                self._selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
        try:
            connection.sock.close()
        except OSError:  # pragma: no cover
            pass
        if connection.calls:
            self._handle_events(
                connection, connection.protocol.connection_lost("connection closed")
            )
            for context in list(connection.calls.values()):
                self._end_call(connection, context, StatusCode.CANCELLED)

    def _send_outcome(
        self,
        context: ServicerContext,
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
        credit = context._response_credit
        if credit is not None:
            credit.close()  # the outcome drains the outbox; nothing offered later joins it
        if message is not None and not context._connection.protocol.memory.reserve(len(message)):
            code, details, message = _dispatch.OVER_BUDGET
        if threading.get_ident() == self._io_thread_ident:
            # A handler run on the I/O thread (:meth:`CallHandling._submit`): write now, in the
            # loop's pass, unless something it posted (initial metadata, a cancel) must go first.
            if not self._commands.queued:
                self._write_outcome(context, code, details, message)
                return
        elif self._send_outcome_directly(context, code, details, message):
            return
        self._post(self._write_outcome, context, code, details, message)

    def _send_outcome_directly(
        self,
        context: ServicerContext,
        code: StatusCode,
        details: str,
        message: Optional[bytes],
    ) -> bool:
        """The direct path of :meth:`_send_outcome`; False if it must go through the loop."""
        if not self._io_lock.acquire(blocking=False):
            return False
        try:
            connection = context._connection
            if (
                self._commands.queued  # what this handler posted (cancel, metadata) goes first
                or self._active_rpcs != 1  # others in flight: the loop batches their writes
                or self._state != _STARTED
                or self._commands.refused
                or connection.closed
                or connection.output
                or connection.close_when_flushed
                or connection.protocol.draining
                or connection.protocol.closed
            ):
                return False
            first_timer = self._timers[0][0] if self._timers else None
            self._write_outcome(context, code, details, message)
            self._dirty.discard(connection)
            self._flush(connection)
            if self._timers and self._timers[0][0] != first_timer:
                # the loop's select() timeout no longer covers the first timer
                self._commands.wake()
            return True
        except Exception:
            self._internal_error(context._connection)
            self._commands.wake()
            return True
        finally:
            self._io_lock.release()

    # -- stop ------------------------------------------------------------------------------------

    def _begin_stop(self, grace: Optional[float]) -> None:
        now = time.monotonic()
        for listener in self._listeners:
            if self._selector is not None:
                try:
                    self._selector.unregister(listener.sock)
                except (KeyError, ValueError):
                    pass
            listener.close()
        self._listeners = []
        deadline = stop_deadline(self._stop_deadline, now, grace)
        if deadline is None:
            return  # a later stop() never extends the grace
        if deadline <= now:
            self._abort_connections()
            return
        first = self._stop_deadline is None
        self._stop_deadline = deadline
        if first:
            for connection in list(self._connections):
                connection.protocol.start_drain()
                self._dirty.add(connection)
            self._add_timer(min(deadline, now + DRAIN_PING_TIMEOUT), self._final_goaways)
        self._add_timer(deadline, self._grace_expired, deadline)

    def _final_goaways(self) -> None:
        for connection in list(self._connections):
            connection.protocol.send_final_goaway()
            self._dirty.add(connection)

    def _grace_expired(self, deadline: float) -> None:
        if self._stop_deadline == deadline:
            self._abort_connections()

    def _abort_connections(self) -> None:
        for connection in list(self._connections):
            self._handle_events(connection, connection.protocol.abort_all())
            for context in list(connection.calls.values()):
                self._end_call(connection, context, StatusCode.CANCELLED)
            connection.close_when_flushed = True
            self._flush(connection)
            self._close(connection)  # do not wait for a client that does not read
