"""The server's orchestration, written once for the blocking and the asyncio server, without I/O.

The sans-IO :class:`~minigrpc.protocol.server_protocol.ServerGrpcConnection` turns a client's
bytes into call events (:mod:`minigrpc.protocol.server_events`) and answers into bytes.  Between
those events and a server's sockets, threads or tasks sit the decisions every server makes;
:class:`ServerDriver` makes them, and each server only carries them out with its own
primitives (:class:`ServerIO`: arm a timer, flush a connection soon, shut or close its socket,
start a handler, wake a waiting one, run callbacks).

Per call (:class:`~minigrpc.driver.server_call_state.CallState`, the servicer context):

* :class:`~minigrpc.protocol.server_events.CallStarted`: the handler is looked up
  (:class:`~minigrpc.driver.server_dispatch.HandlerTable`, behind the server interceptors; with
  ``grpc.aio``'s coroutine interceptors the lookup is awaited in the call's task, which admits
  the call itself), the call admitted or rejected with a Trailers-Only status, its deadline
  armed, and its handler started at once for a streamed request, when the request is whole for
  a unary one;
* a unary request still arriving is watched against ``minigrpc.request_stall_timeout_ms``
  (:func:`~minigrpc.driver.server_timers.stall_due`); a deadline that passes ends the call with
  DEADLINE_EXCEEDED trailers (docs/wire-rules.md, "Deadlines and cancellation");
* the handler's answer goes on the wire (:meth:`ServerDriver.finish`,
  :meth:`ServerDriver.send_response`), ``cancel()`` resets the stream;
* :meth:`ServerDriver.end_call` is the one place a call ends, however it ends (answered, reset,
  expired, cancelled, disconnected, aborted by a stop): it is forgotten, its context turns
  inactive and its timers go, the server learns it (a blocked handler is woken, a task
  cancelled), and its callbacks run, once.

Per connection (:class:`ServedConnection`):

* the handshake timeout (grpc-core's ``grpc.server_handshake_timeout_ms``), the idle drain
  (``grpc.max_connection_idle_ms``, :func:`~minigrpc.driver.server_timers.idle_recheck`), and
  the graceful drain itself: GOAWAY(2^31-1) and a PING, the final GOAWAY on the ACK or after
  :data:`~minigrpc.driver.server_timers.DRAIN_PING_TIMEOUT` (docs/wire-rules.md, "GOAWAY and
  PING"), each GOAWAY's debug data saying why (gRFC A9: ``max_idle``, ``max_age``);
* the connection's age (gRFC A9: ``grpc.max_connection_age_ms`` with ±10% jitter, then
  ``grpc.max_connection_age_grace_ms``, :class:`~minigrpc.driver.server_timers.ConnectionAge`):
  drained at its age, its calls still running cut when the grace is over;
* keepalive (gRFC A8, A9; grpc-core's doc/keepalive.md): the server's PINGs on a silent
  connection and the end of one that stays silent
  (:class:`~minigrpc.driver.keepalive.KeepalivePinger`), and the client's PINGs counted against
  its strikes, GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") past them
  (:class:`~minigrpc.driver.keepalive.PingStrikes`; RFC 9113 §6.7 PING, §6.8 GOAWAY);
* how a connection ends (:meth:`ServerDriver.flushed`): one whose protocol closed flushes its
  last frames, for at most :data:`~minigrpc.driver.server_timers.CLOSE_FLUSH_TIMEOUT`; one that
  drained, or whose GOAWAY is out, lingers: its write side shut, it reads until the client
  closes or :data:`~minigrpc.driver.server_timers.LINGER_TIMEOUT` passes (RFC 9113 §6.8: closing
  outright would answer the client's last frames with a TCP RST, which drops what it has not
  read yet, the GOAWAY and trailers included);
* ``stop(grace)``: every connection drains, and what still runs when the grace ends is cut
  (UNAVAILABLE, as grpc-core's server ends it) and closed; a later ``stop()`` may shorten the
  grace, never lengthen it (:func:`~minigrpc.driver.server_timers.stop_deadline`);
* the memory budget's held-back connections get window again once under budget
  (:meth:`~minigrpc.protocol.memory_budget.MemoryBudget.resumable`), and a listener out of
  descriptors rests (:mod:`minigrpc.driver.server_accept`).

The clock is the caller's (``time.monotonic`` by default), so the driver runs on a fake clock
in its unit tests (``tests/unit/test_server_driver.py``).  It is not thread-safe: the blocking
server calls it on its I/O thread (or a handler thread holding the I/O lock), the asyncio one
on its event loop.
"""

import random
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set

from ..protocol import server_protocol as _protocol
from ..protocol.enums import StatusCode
from ..protocol.grpc_connection import DATA_BATCH
from ..protocol.server_events import (
    CallEvent,
    CallStarted,
    CallTerminated,
    RequestEnded,
    RequestReady,
)
from ..protocol.status import CallError
from . import keepalive as _keepalive
from . import server_dispatch as _dispatch
from . import server_timers as _timers
from .logs import get_logger
from .server_accept import AcceptBackoff
from .server_call_state import CallState
from .server_options import ServerOptions
from .server_timers import (
    CLOSE_FLUSH_TIMEOUT,
    DRAIN_PING_TIMEOUT,
    LINGER_TIMEOUT,
    cancel_stalled,
    idle_recheck,
    stall_due,
    stop_deadline,
)

if TYPE_CHECKING:  # pragma: no cover - what each server provides
    from typing import Protocol

    class Timer(Protocol):
        """What ``call_at`` returns: ``asyncio.TimerHandle``, or the blocking loop's own."""

        def cancel(self) -> None: ...

    class ServerIO(Protocol):
        """The primitives a server carries the driver's decisions out with.

        Connections are the driver's :class:`ServedConnection`; ``link`` is the server's own
        object for it.  Calls are the servicer contexts the server made in :meth:`new_call`.
        """

        def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> Timer:
            """Run ``callback(*args)`` at ``when`` (on the driver's clock), on the thread or
            loop that runs the driver."""

        def flush_soon(self, connection: "ServedConnection") -> None:
            """Write what the connection's protocol queued, in this pass or turn (and then
            report :meth:`ServerDriver.flushed`)."""

        def shutdown_write(self, connection: "ServedConnection") -> bool:
            """Shut the socket's write side once what is queued is written, and keep reading
            (dropping what arrives) until the client closes; False if it could not be."""

        def close(self, connection: "ServedConnection") -> None:
            """Write what the socket takes at once, close it, and report
            :meth:`ServerDriver.connection_closed` (now, or once the socket has closed)."""

        def rest_listener(self, listener: Any) -> None:
            """Stop accepting on ``listener`` for now."""

        def arm_listener(self, listener: Any) -> None:
            """Accept on ``listener`` again."""

        def new_call(self, connection: "ServedConnection", event: CallStarted) -> CallState:
            """The servicer context of a call that starts."""

        def start_handler(self, call: Any) -> None:
            """Run the call's handler (or, with coroutine interceptors, its lookup first)."""

        def requests_arrived(self, call: Any) -> None:
            """Messages of the call's streamed request wait, or the request ended."""

        def wake(self, call: Any) -> None:
            """Something the call's handler may wait for changed (its request, window, the
            memory budget)."""

        def call_ended(self, call: Any, answered: bool) -> None:
            """The call ended (:meth:`ServerDriver.end_call`); ``answered``: by its handler's
            answer or a rejection, so nothing is left to cancel."""

        def run_callbacks(self, call: Any, callbacks: List[Callable[..., Any]]) -> None:
            """Run the callbacks registered on the call, in order."""


__all__ = ["RESPONSES_PER_PASS", "RESPONSES_PER_TURN", "ServedConnection", "ServerDriver"]

_LOGGER = get_logger("minigrpc.server")

#: Response messages of one call that the server queues in one pass of its loop (blocking), or
#: that an asyncio handler hands over before it lets the event loop run: a handler yielding tiny
#: messages must not keep the server from reading, writing and answering PINGs on every other
#: stream and connection.  Enough that the pass's fixed cost stays small beside the messages'.
RESPONSES_PER_TURN = 256
#: The same for all calls together, in one pass of the I/O thread or one turn of the event
#: loop: a hundred calls of tiny messages must not make one pass a hundred times longer (as
#: :data:`minigrpc.http2.flood.PASS_MESSAGES` bounds the request messages of a pass).
RESPONSES_PER_PASS = 1024


class ServedConnection:
    """What the driver keeps for one connection: its protocol, its calls, where its end stands,
    and its timers.  ``link`` is the server's object for the connection (its socket or
    transport); ``peer`` is grpcio's peer string and ``tls`` the connection's
    :class:`~minigrpc.net.tls.TLSEngine` (None in plaintext), which the calls' contexts read;
    ``tracer`` its frame trace (:mod:`minigrpc.net.trace`), or None."""

    __slots__ = (
        "age",
        "age_timer",
        "calls",
        "charged_output",
        "closed",
        "closing",
        "drain_timer",
        "end_timer",
        "handshake_timer",
        "idle_since",
        "idle_timer",
        "keepalive_timer",
        "lingering",
        "link",
        "peer",
        "pinger",
        "protocol",
        "strikes",
        "tls",
        "tracer",
    )

    def __init__(
        self,
        link: Any,
        protocol: _protocol.ServerGrpcConnection,
        peer: str,
        tls: Any,
        tracer: Any,
        now: float,
    ) -> None:
        self.link = link
        self.protocol = protocol
        self.peer = peer
        self.tls = tls
        self.tracer = tracer
        #: How much of the output the socket has not taken is charged to the memory account.
        self.charged_output = 0
        #: The calls started and not yet ended, by stream.
        self.calls: Dict[int, CallState] = {}
        #: When the connection last started or ended a call (or was accepted): its idleness
        #: for ``grpc.max_connection_idle_ms`` counts from here, as grpc-go's does.
        self.idle_since = now
        #: The protocol closed (a GOAWAY of ours is queued): its last frames are flushing.
        self.closing = False
        #: Our write side is shut; what the client sends is dropped until it closes.
        self.lingering = False
        #: The socket is closed and the calls ended.
        self.closed = False
        self.handshake_timer: Optional[Timer] = None
        self.idle_timer: Optional[Timer] = None
        #: The final GOAWAY of a drain, should the PING's ACK not come first.
        self.drain_timer: Optional[Timer] = None
        #: The close at the end of a flush or a linger.
        self.end_timer: Optional[Timer] = None
        #: gRFC A9's max age and its grace (:class:`~minigrpc.driver.server_timers.
        #: ConnectionAge`), and its timer; set by the driver when the connection opens.
        self.age: Optional[_timers.ConnectionAge] = None
        self.age_timer: Optional[Timer] = None
        #: The server's keepalive PINGs (gRFC A9) and the client's PING strikes (gRFC A8's
        #: policy, as grpc core enforces it), and the PINGs' timer.
        self.pinger: Optional[_keepalive.KeepalivePinger] = None
        self.strikes: Optional[_keepalive.PingStrikes] = None
        self.keepalive_timer: Optional[Timer] = None

    def timers(self) -> List[Optional["Timer"]]:
        return [
            self.handshake_timer,
            self.idle_timer,
            self.drain_timer,
            self.end_timer,
            self.age_timer,
            self.keepalive_timer,
        ]

    def outgoing(self) -> bytes:
        """The bytes to write next: what the protocol queued (traced as HTTP/2), encrypted
        over TLS; before the TLS handshake is done, its records alone (HTTP/2 waits)."""
        tls = self.tls
        if tls is not None and not tls.established:
            handshake: bytes = tls.outgoing()
            return handshake
        data = self.protocol.data_to_send()
        if data:
            self.count_sent()
            if self.tracer is not None:
                self.tracer.sent(data)
        if tls is None:
            return data
        encrypted: bytes = tls.encrypt(data)
        return encrypted

    def count_sent(self) -> None:
        """HEADERS, DATA or a connection WINDOW_UPDATE going out forgive the client's PING
        strikes and restart the server's count of PINGs without data (grpc-core's
        doc/keepalive.md)."""
        if self.protocol.take_data_sent():
            if self.strikes is not None:
                self.strikes.on_data_sent()
            if self.pinger is not None:
                self.pinger.on_data_sent()

    def output_room(self, room: int) -> bool:
        """After a write, with ``room`` bytes left of the server's output bound: give the
        protocol that much room for DATA (at most
        :data:`~minigrpc.protocol.grpc_connection.DATA_BATCH` at a time, so that a batch is sent
        before the next is made), and say whether it has more to write now."""
        protocol = self.protocol
        if protocol.closed:
            return False
        starved = protocol.starved
        protocol.set_output_room(max(min(room, DATA_BATCH), 0))
        return room > 0 and starved


class ServerDriver:
    """A server's calls and connections, decided once for both servers (module docstring).

    ``io`` carries the decisions out (:class:`ServerIO`); ``options`` are the server's, its
    interceptors included; ``awaits_interceptors``: those are coroutines (``grpc.aio``), so a
    call's lookup runs in its task.  ``clock`` and ``rng`` (the max age's jitter) are the
    caller's, so the driver's tests run on a fake clock with a seeded generator.
    """

    def __init__(
        self,
        io: "ServerIO",
        options: ServerOptions,
        awaits_interceptors: bool = False,
        clock: Callable[[], float] = time.monotonic,
        rng: Optional[random.Random] = None,
    ) -> None:
        self._io = io
        #: Spreads each connection's max age (gRFC A9's jitter); seeded in the driver's tests.
        self._rng = rng if rng is not None else random.Random()
        self.options = options
        #: The registered and generic handlers, behind the interceptors.
        self.handlers = _dispatch.HandlerTable(options.interceptors)
        self._maximum_concurrent_rpcs = options.maximum_concurrent_rpcs
        #: The compression of every response the client accepts compressed (a ``Compression``).
        self.default_compression = options.compression
        self._awaits_interceptors = awaits_interceptors
        self.clock = clock
        self._settings = options.protocol_settings()
        #: What all connections may buffer, and each of them
        #: (:mod:`minigrpc.protocol.memory_budget`).
        self.memory = options.memory_budget()
        #: Floods by peer: a peer sent away for one opens its next connections with less.
        self._peers = _protocol.PeerHistory(clock)
        self.connections: Set[ServedConnection] = set()
        #: Admitted calls still running, on all connections (``maximum_concurrent_rpcs``).
        self.active_calls = 0
        #: Guards what handler threads and the driver both touch on a call (its end, its
        #: callbacks); one for the server, as such touches are brief.
        self.call_lock = threading.Lock()
        #: ``stop()`` was called: listeners stay closed.
        self.stopping = False
        self._stop_deadline: Optional[float] = None
        self._accept_backoff: Dict[Any, AcceptBackoff] = {}

    # -- connections ------------------------------------------------------------------------

    def open_connection(
        self, link: Any, peer: str, identity: Any, tls: Any, tracer: Any = None
    ) -> ServedConnection:
        """A connection was accepted: its protocol (our SETTINGS queued) and its timers.

        ``identity`` is who the client is for the flood history
        (:class:`~minigrpc.http2.flood.PeerHistory`); ``tls`` its TLS engine, or None;
        ``tracer`` its frame trace, or None.
        """
        protocol = _protocol.ServerGrpcConnection(
            self._settings, clock=self.clock, shape_from_handler=True, memory=self.memory
        )
        now = self.clock()
        served = ServedConnection(link, protocol, peer, tls, tracer, now)
        protocol.memory.owner = served
        protocol.set_peer(self._peers, identity)
        protocol.initiate()
        protocol.set_output_room(min(self.options.max_output_buffer, DATA_BATCH))
        self.connections.add(served)
        options = self.options
        if options.handshake_timeout is not None:
            served.handshake_timer = self._io.call_at(
                now + options.handshake_timeout, self._check_handshake, served
            )
        if options.max_connection_idle is not None:
            served.idle_timer = self._io.call_at(
                now + options.max_connection_idle, self._check_idle, served
            )
        served.age = _timers.ConnectionAge(options.connection_age, now, self._rng)
        self._arm_age(served)
        keepalive = options.keepalive
        served.strikes = _keepalive.PingStrikes(keepalive)
        served.pinger = _keepalive.KeepalivePinger(keepalive, now, pings_without_calls=True)
        self._arm_keepalive(served)
        return served

    def received(self, served: ServedConnection, data: bytes) -> None:
        """Bytes read from the connection's socket: decrypted over TLS (what the handshake
        answers is flushed; a TLS failure closes the connection), traced, and handed to the
        protocol, at most a pass's worth of them (:data:`minigrpc.http2.flood.PASS_LIMIT`; the
        server calls :meth:`resume_input` on its next pass while ``protocol.pending_input``)."""
        tls = served.tls
        if tls is not None:
            try:
                data = tls.decrypt(data)
            except OSError as exc:
                protocol = served.protocol
                self.handle_events(served, protocol.connection_lost(f"TLS failed: {exc}"))
                self._io.close(served)
                return
            self._io.flush_soon(served)  # the handshake may have something to send
            if not data:
                return
        if served.tracer is not None:
            served.tracer.received(data)  # HTTP/2, decrypted
        if served.pinger is not None:
            served.pinger.on_bytes_received(self.clock())
        self.handle_events(served, served.protocol.receive_data(data))
        self._police_pings(served)

    def resume_input(self, served: ServedConnection) -> None:
        """The next pass's worth of what an earlier read brought past the pass limit."""
        self.handle_events(served, served.protocol.receive_data(b""))
        self._police_pings(served)

    def _police_pings(self, served: ServedConnection) -> None:
        """Count the client's PINGs of this read against its strikes (gRFC A8's policy, as
        grpc core enforces it: :class:`~minigrpc.driver.keepalive.PingStrikes`); one too many
        and the connection ends with GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings").  HEADERS,
        DATA or a connection WINDOW_UPDATE queued first (an answer, a grant for what was read)
        forgive the strikes before, as they would have gone out before the next PING."""
        protocol = served.protocol
        pings = protocol.take_pings_received()
        strikes = served.strikes
        if not pings or strikes is None or served.closed:
            return
        now = self.clock()
        for _ in range(pings):
            if strikes.on_ping_received(now, protocol.active_calls):
                # Sent away as for a flood: the peer's next connections open with less.
                _LOGGER.debug("closing %s: too many pings", served.peer)
                self.handle_events(served, protocol.send_away(
                    "too many pings", _keepalive.TOO_MANY_PINGS_DEBUG_DATA))
                self._io.flush_soon(served)  # the GOAWAY, then the linger of a closed protocol
                return

    def _end_for_keepalive(self, served: ServedConnection, debug_data: bytes, why: str) -> None:
        """GOAWAY(ENHANCE_YOUR_CALM, ``debug_data``), and the connection's calls end."""
        _LOGGER.debug("closing %s: %s", served.peer, why)
        self.handle_events(served, served.protocol.end_for_keepalive(debug_data, why))

    def connection_closed(self, served: ServedConnection, reason: str) -> None:
        """The socket is closed: the calls still open end CANCELLED (PROTOCOL-HTTP2.md,
        Connection failure) and what the connection held is given back."""
        if served.closed:
            return
        served.closed = True
        for timer in served.timers():
            if timer is not None:
                timer.cancel()
        self.connections.discard(served)
        protocol = served.protocol
        self.handle_events(served, protocol.connection_lost(reason))
        for call in list(served.calls.values()):
            self.end_call(call, StatusCode.CANCELLED)
        protocol.memory.close()
        if protocol.close_reason:
            _LOGGER.debug("closing the connection from %s: %s", served.peer, protocol.close_reason)

    def flushed(self, served: ServedConnection, unsent: int, must_wait: bool) -> None:
        """The server wrote what it could of the connection's output: ``unsent`` bytes of it
        wait for the socket (charged to the connection's memory account), and ``must_wait``
        says the server writes them itself before it may shut its write side (an asyncio
        transport writes its buffer before the EOF).  End the connection if it is time (module
        docstring)."""
        protocol = served.protocol
        if unsent != served.charged_output:
            protocol.memory.charge_outbound(unsent - served.charged_output)
            served.charged_output = unsent
        if served.lingering or served.closed:
            return
        if protocol.closed:
            if not served.closing:
                served.closing = True
                served.end_timer = self._io.call_at(
                    self.clock() + CLOSE_FLUSH_TIMEOUT, self._close, served
                )
            if not must_wait:
                self._linger(served)
        elif protocol.drained and not served.calls and not must_wait:
            self._linger(served)

    def _linger(self, served: ServedConnection) -> None:
        """Shut our write side and let the client close (RFC 9113 §6.8): closing outright while
        it still writes (a WINDOW_UPDATE, the ACK of our PING) makes its next ``send()`` fail,
        and grpcio then fails calls whose trailers are already in its receive buffer."""
        served.lingering = True
        if served.end_timer is not None:
            served.end_timer.cancel()
            served.end_timer = None
        if self._io.shutdown_write(served):
            served.end_timer = self._io.call_at(self.clock() + LINGER_TIMEOUT, self._close, served)
        else:
            self._io.close(served)

    def _close(self, served: ServedConnection) -> None:
        """A flush or a linger took too long: close without waiting any more."""
        served.end_timer = None
        if not served.closed:
            self._io.close(served)

    def _check_handshake(self, served: ServedConnection) -> None:
        """Close a connection whose client never sent the preface and SETTINGS.

        Such a connection only costs a socket, but without a limit a client could hold any
        number of them (grpc-core's ``grpc.server_handshake_timeout_ms``, 120 s).
        """
        served.handshake_timer = None
        if not served.closed and not served.protocol.handshake_complete:
            _LOGGER.debug("closing %s: no HTTP/2 preface and SETTINGS in time", served.peer)
            self._io.close(served)

    def _check_idle(self, served: ServedConnection) -> None:
        """``grpc.max_connection_idle_ms``: drain a connection without calls for that long
        (:func:`~minigrpc.driver.server_timers.idle_recheck`)."""
        served.idle_timer = None
        idle = self.options.max_connection_idle
        protocol = served.protocol
        if served.closed or idle is None or protocol.draining:
            return
        now = self.clock()
        busy = bool(served.calls) or protocol.active_calls > 0
        recheck = idle_recheck(now, idle, served.idle_since, busy)
        if recheck is not None:
            served.idle_timer = self._io.call_at(recheck, self._check_idle, served)
            return
        _LOGGER.debug("draining %s: idle for %.1f s", served.peer, idle)
        self.start_drain(served, _timers.MAX_IDLE_DEBUG_DATA)

    def _arm_age(self, served: ServedConnection) -> None:
        age = served.age
        due = None if age is None else age.next_wakeup()
        if due is not None:
            served.age_timer = self._io.call_at(due, self._check_age, served)

    def _check_age(self, served: ServedConnection) -> None:
        """``grpc.max_connection_age_ms`` and its grace (gRFC A9;
        :class:`~minigrpc.driver.server_timers.ConnectionAge`): at the age, the graceful drain
        with GOAWAYs saying ``max_age``; at the end of the grace, the calls still running are
        cut UNAVAILABLE "max connection age" and the connection closes."""
        served.age_timer = None
        age = served.age
        if served.closed or age is None:
            return
        decision = age.poll(self.clock())
        if decision == _timers.DRAIN:
            _LOGGER.debug("draining %s: max connection age", served.peer)
            self.start_drain(served, _timers.MAX_AGE_DEBUG_DATA)
        elif decision == _timers.CUT:
            _LOGGER.debug("closing %s: max connection age grace over", served.peer)
            self._close_ending(served, served.protocol.cut_after_drain(
                _timers.MAX_AGE_DETAILS, _timers.MAX_AGE_DETAILS, _timers.MAX_AGE_CUT_DEBUG_DATA))
            return
        self._arm_age(served)

    def _arm_keepalive(self, served: ServedConnection) -> None:
        pinger = served.pinger
        due = None if pinger is None else pinger.next_wakeup(served.protocol.active_calls)
        if due is not None:
            served.keepalive_timer = self._io.call_at(due, self._check_keepalive, served)

    def _check_keepalive(self, served: ServedConnection) -> None:
        """The server's keepalive (gRFC A9; :class:`~minigrpc.driver.keepalive.
        KeepalivePinger`): a PING after ``grpc.keepalive_time_ms`` without a byte from the
        client; nothing within the timeout after it, and the client is gone: the connection
        ends (GOAWAY(ENHANCE_YOUR_CALM, "ping_timeout"), as grpc core's) and so do its calls,
        whose contexts turn inactive and run their callbacks.  The timer is armed for the
        earliest the PING can be due and looks again when bytes arrived meanwhile, rather
        than being moved at every read."""
        served.keepalive_timer = None
        pinger = served.pinger
        protocol = served.protocol
        if pinger is None or served.closed or served.lingering or protocol.closed:
            return  # ending already: its last frames flush, or the client closes
        decision = pinger.poll(self.clock(), protocol.active_calls)
        if decision == _keepalive.PING:
            protocol.keepalive_ping()
            self._io.flush_soon(served)
        elif decision == _keepalive.DEAD:
            self._end_for_keepalive(
                served, _keepalive.PING_TIMEOUT_DEBUG_DATA, "keepalive ping unanswered"
            )
            self._io.close(served)  # the client is gone: no linger for it
            return
        self._arm_keepalive(served)

    def start_drain(self, served: ServedConnection, debug_data: bytes = b"") -> None:
        """GOAWAY(2^31-1) and a PING now; GOAWAY(last stream) on the ACK, or after
        :data:`~minigrpc.driver.server_timers.DRAIN_PING_TIMEOUT`; both GOAWAYs carry
        ``debug_data`` (gRFC A9: why the connection drains)."""
        protocol = served.protocol
        if served.closed or protocol.draining:
            return
        protocol.start_drain(debug_data)
        served.drain_timer = self._io.call_at(
            self.clock() + DRAIN_PING_TIMEOUT, self._final_goaway, served
        )
        self._io.flush_soon(served)

    def _final_goaway(self, served: ServedConnection) -> None:
        served.drain_timer = None
        if not served.closed:
            served.protocol.send_final_goaway()
            self._io.flush_soon(served)

    def resume_held_back(self) -> None:
        """Give window again to connections held back by the memory budget that are under it
        now, and wake their handlers waiting to send."""
        for account in self.memory.resumable():
            served = account.owner
            if not isinstance(served, ServedConnection) or served.closed:
                continue
            served.protocol.resume_credit()
            for call in served.calls.values():
                self._io.wake(call)
            self._io.flush_soon(served)

    # -- listeners --------------------------------------------------------------------------

    def accepted(self, listener: Any) -> None:
        """``accept()`` succeeded on ``listener``: an episode of failures is over."""
        backoff = self._accept_backoff.get(listener)
        if backoff is not None:
            backoff.accepted()

    def accept_failed(self, listener: Any, exc: OSError) -> None:
        """``accept()`` on ``listener`` raised ``exc``: out of descriptors or buffers, the
        listener rests and is armed again later (:mod:`minigrpc.driver.server_accept`)."""
        backoff = self._accept_backoff.get(listener)
        if backoff is None:
            backoff = self._accept_backoff[listener] = AcceptBackoff(listener.display)
        delay = backoff.failed(exc)
        if delay is not None:
            self._io.rest_listener(listener)
            self._io.call_at(self.clock() + delay, self._rearm_listener, listener)

    def _rearm_listener(self, listener: Any) -> None:
        if not self.stopping:
            self._io.arm_listener(listener)

    # -- stop -------------------------------------------------------------------------------

    def stop(self, grace: Optional[float]) -> None:
        """``stop(grace)``, once the listeners are closed: drain every connection, and cut what
        still runs when the grace ends (at once without one)."""
        self.stopping = True
        now = self.clock()
        deadline = stop_deadline(self._stop_deadline, now, grace)
        if deadline is None:
            return  # a later stop() never extends the grace
        if deadline <= now:
            self.abort_connections()
            return
        first = self._stop_deadline is None
        self._stop_deadline = deadline
        if first:
            for served in list(self.connections):
                self.start_drain(served)
        self._io.call_at(deadline, self._grace_expired, deadline)

    def _grace_expired(self, deadline: float) -> None:
        if self._stop_deadline == deadline:
            self.abort_connections()

    def abort_connections(self) -> None:
        """End every call UNAVAILABLE (their contexts report CANCELLED), GOAWAY, and close
        (``stop(0)``, an expired grace), without waiting for a client that does not read."""
        for served in list(self.connections):
            self._abort(served)

    def _abort(
        self,
        served: ServedConnection,
        details: str = "the server is shutting down",
        status_details: str = _protocol.SHUTDOWN_DETAILS,
        debug_data: bytes = b"",
    ) -> None:
        """End the connection's calls UNAVAILABLE ``status_details`` (their contexts report
        CANCELLED ``details``), GOAWAY with ``debug_data``, and close
        (:meth:`~minigrpc.protocol.server_protocol.ServerGrpcConnection.abort_all`)."""
        if served.closed:
            return
        self._close_ending(served, served.protocol.abort_all(details, status_details, debug_data))

    def _close_ending(self, served: ServedConnection, events: List[CallEvent]) -> None:
        """The protocol ended every call (``events``) and the connection: the handlers learn
        it, and the socket closes without waiting for a client that does not read."""
        self.handle_events(served, events)
        for call in list(served.calls.values()):
            self.end_call(call, StatusCode.CANCELLED)
        self._io.close(served)

    # -- calls ------------------------------------------------------------------------------

    def handle_events(self, served: ServedConnection, events: List[CallEvent]) -> None:
        """What the connection's protocol reported, call by call."""
        calls = served.calls
        for event in events:
            if isinstance(event, RequestReady):
                call = calls.get(event.stream_id)
                if call is not None:
                    call._request_whole(event.message, event.encoding)
                    if call._running:
                        self._io.wake(call)  # its task looks the handler up meanwhile
                    else:
                        self._start_handler(call)
            elif isinstance(event, CallStarted):
                self._start_call(served, event)
            elif isinstance(event, CallTerminated):
                call = calls.get(event.stream_id)
                if call is not None:
                    self.end_call(call, event.code)
            else:  # RequestMessage, RequestEnded
                call = calls.get(event.stream_id)
                if call is not None:
                    if isinstance(event, RequestEnded):
                        call._request_end()
                    self._io.requests_arrived(call)

    def _start_call(self, served: ServedConnection, event: CallStarted) -> None:
        served.idle_since = self.clock()
        call = self._io.new_call(served, event)
        served.calls[event.stream_id] = call
        if event.deadline is not None:
            call._arm_deadline(self._io.call_at(event.deadline, self._expire, call))
        if self._awaits_interceptors and self.handlers.interceptors:
            self._start_handler(call)  # the task awaits the lookup, then admit()
            return
        try:
            handler = self.handlers.find(event.method, event.metadata)
        except Exception as exc:
            self.reject(call, _dispatch.lookup_failed(event.method, exc))
            return
        self.admit(call, handler)

    def _start_handler(self, call: CallState) -> None:
        call._mark_running()
        self._io.start_handler(call)

    def admit(self, call: CallState, handler: Any) -> bool:
        """Admit the call with the ``handler`` its lookup found
        (:meth:`~minigrpc.driver.server_dispatch.HandlerTable.admit`), or reject it; False when
        it was rejected."""
        admission = self.handlers.admit(
            call._method, handler, self.active_calls, self._maximum_concurrent_rpcs
        )
        if isinstance(admission, _dispatch.Outcome):
            self.reject(call, admission)
            return False
        handler = admission.handler
        call._admit(handler, admission.behavior)
        self.active_calls += 1
        served = call._connection
        protocol = served.protocol
        streaming = bool(handler.request_streaming)
        if streaming:
            call._request_streamed(protocol.request_compressed_with(call._stream_id))
            if not call._running:
                self._start_handler(call)
        events = protocol.accept_call(call._stream_id, streaming)
        if events:
            self.handle_events(served, events)
            self._io.flush_soon(served)
        if not call._request_complete:
            self._watch_stall(call)
        return True

    def reject(self, call: CallState, outcome: _dispatch.Outcome) -> None:
        """A Trailers-Only status for a call that will not run (PROTOCOL-HTTP2.md, Responses)."""
        served = call._connection
        served.protocol.reject_call(call._stream_id, outcome.code, outcome.details)
        self.end_call(call, outcome.code, answered=True)
        self._io.flush_soon(served)

    def _watch_stall(self, call: CallState) -> None:
        """Arm the ``minigrpc.request_stall_timeout_ms`` check of a call whose unary request is
        incomplete (:func:`~minigrpc.driver.server_timers.stall_due`)."""
        stall = self.options.request_stall_timeout
        if stall is None or call._request_complete:
            return
        due = stall_due(call._connection.protocol, call._stream_id, stall)
        if due is not None:
            call._arm_stall(self._io.call_at(due, self._check_stall, call))

    def _check_stall(self, call: CallState) -> None:
        """The request may have stalled: cancel the call if it made no progress for the stall
        timeout (its handler never ran), else look again when it would have."""
        call._arm_stall(None)
        served = call._connection
        stall = self.options.request_stall_timeout
        stream_id = call._stream_id
        if stall is None or call._request_complete or served.calls.get(stream_id) is not call:
            return
        due = stall_due(served.protocol, stream_id, stall)
        if due is None:
            return
        if self.clock() < due:
            call._arm_stall(self._io.call_at(due, self._check_stall, call))
            return
        _LOGGER.debug(
            "cancelling stream %d from %s: its request made no progress for %.1f s",
            stream_id,
            served.peer,
            stall,
        )
        self.handle_events(served, cancel_stalled(served.protocol, stream_id, stall))
        self._io.flush_soon(served)

    def _expire(self, call: CallState) -> None:
        """The call's deadline passed: DEADLINE_EXCEEDED trailers, and the call ends."""
        served = call._connection
        if served.calls.get(call._stream_id) is call:
            self.handle_events(served, served.protocol.expire_call(call._stream_id))
            self._io.flush_soon(served)

    def cancel_call(self, call: CallState) -> None:
        """``cancel()``: RST_STREAM(CANCEL); the client sees CANCELLED (PROTOCOL-HTTP2.md,
        Errors)."""
        served = call._connection
        if served.calls.get(call._stream_id) is call:
            self.handle_events(served, served.protocol.cancel_call(call._stream_id))
            self._io.flush_soon(served)

    def send_initial_metadata(
        self, call: CallState, headers: List[Any], encoding: Optional[str]
    ) -> None:
        """``send_initial_metadata()``: the response headers now, with this metadata."""
        served = call._connection
        if served.calls.get(call._stream_id) is call:
            served.protocol.send_initial_metadata(call._stream_id, headers, encoding)
            self._io.flush_soon(served)

    def take_request(self, call: CallState) -> Optional[bytes]:
        """The next message of the call's streamed request, or None: none waits, or one could
        not be inflated and the call ended (its status says why)."""
        served = call._connection
        protocol = served.protocol
        try:
            return protocol.take_request(call._stream_id)
        except CallError as exc:
            self.handle_events(served, protocol.fail_call(call._stream_id, exc.code, str(exc)))
            self._io.flush_soon(served)
            return None

    def send_response(self, call: CallState, message: bytes, compress: bool) -> bool:
        """Queue one streamed response; False when the call is over instead (a message over
        ``max_send_message_length`` ends it RESOURCE_EXHAUSTED)."""
        too_large = call._send_message_on(call._connection.protocol, message, compress)
        if too_large is None:
            return True
        self.finish(call, too_large.code, str(too_large))
        return False

    def finish(
        self,
        call: CallState,
        code: StatusCode,
        details: str,
        message: Optional[bytes] = None,
    ) -> bool:
        """The handler's status (and unary response) on the wire, then the call's end; False
        when the call had already ended (cancelled, expired or disconnected meanwhile: nobody
        waits for the answer)."""
        served = call._connection
        if served.calls.get(call._stream_id) is not call:
            return False
        call._finish_on(served.protocol, code, details, message)
        self.end_call(call, code, answered=True)
        self._io.flush_soon(served)
        return True

    def end_call(self, call: CallState, code: StatusCode, answered: bool = False) -> None:
        """The one place a call ends, however it ends (module docstring)."""
        served = call._connection
        if served.calls.pop(call._stream_id, None) is None:
            return
        if call._counted:
            self.active_calls -= 1
        if not served.calls:
            served.idle_since = self.clock()
        callbacks = call._end(code)
        self._io.call_ended(call, answered)
        if callbacks:
            self._io.run_callbacks(call, callbacks)
