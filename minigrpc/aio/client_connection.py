"""One asyncio client connection: an HTTP/2 connection driven by the event loop.

:class:`AsyncClientConnection` is an :class:`asyncio.Protocol` around the same sans-IO
:class:`~minigrpc.protocol.client_protocol.ClientGrpcConnection` that the blocking transport drives:
bytes from the loop go into it, the bytes it queues go out, and every coroutine waiting on a
call (for a response, send window or a stream slot) is woken after each chunk and checks its
own condition again.  No gRPC rule lives here; this module only waits.

A unary call on a connection that is ready needs no waiting coroutine at all: it is started at
once (:meth:`AsyncClientConnection.start_now`) and told of its end by a callback run straight
from ``data_received`` (:meth:`AsyncClientConnection.when_finished`), so that the response
reaches the coroutine awaiting it one event-loop turn after it was read.

Memory stays bounded both ways: a writer waits for flow-control window and for the loop's write
buffer to drain (``pause_writing``), and a reader that stops taking messages stops the protocol
from returning window to the server (:class:`minigrpc.protocol.grpc_connection.Inbound`), which
holds the server's sender back (RFC 9113 §5.2).

:class:`minigrpc.aio.transport.AsyncTransport` dials these connections for a channel and
replaces them.
"""

import asyncio
import os
import time
from typing import Any, Callable, Dict, List, Optional

from ..driver.attempts import CHANNEL_CLOSED, deadline_status, passed
from ..driver.channel_core import TransportOptions
from ..driver.invocation import CANCELLED
from ..net.sockets import ReadBuffers, client_tracer, os_error_text
from ..protocol.client_protocol import CallEvent, CallFinished, ClientCall, GoAwayReceived
from ..protocol.grpc_connection import Message
from ..protocol.status import CallStatus

__all__ = ["AsyncClientConnection"]


class AsyncClientConnection(asyncio.BufferedProtocol):
    """One HTTP/2 connection: the loop's transport, the protocol state and the waiters.

    A buffered protocol: the loop reads into buffers kept for the connection
    (:class:`minigrpc.net.sockets.ReadBuffers`) rather than into a new 256 KiB bytes object each
    time.
    """

    def __init__(
        self, options: TransportOptions, on_unusable: Callable[[], None], peer: str = ""
    ) -> None:
        self.protocol = options.new_protocol(peer)
        self._on_unusable = on_unusable
        self._transport: Optional[asyncio.Transport] = None
        self._loop = asyncio.get_running_loop()
        #: Futures of the coroutines waiting for the state to change; resolved by ``_wake``.
        self._waiters: List[asyncio.Future[None]] = []
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        #: The channel sends no new calls here (:meth:`retire`).
        self._retired = False
        #: A call has been started here (:mod:`minigrpc.driver.subchannel` reads it).
        self.started = False
        #: What to run when a call ends (:meth:`when_finished`), by call.
        self._on_finished: Dict[ClientCall, Callable[[], None]] = {}
        #: The frame trace (``MINIGRPC_TRACE=1`` or the ``minigrpc.protocol.wire`` logger), as the
        #: blocking transport writes it; None when tracing is off.
        self._tracer = client_tracer(peer)
        #: Puts the TLS session in the channel's ``grpc.ssl_session_cache`` once it carries a
        #: ticket; True once done (None: nothing to keep).
        self._session_keeper: Optional[Callable[[], bool]] = None
        self._reads = ReadBuffers()
        #: What a read made the protocol queue, written at the loop's next turn (or with the
        #: next write, whichever comes first; :meth:`_settle`).
        self._unsent: List[bytes] = []
        #: Client keepalive (:mod:`minigrpc.driver.client_keepalive`), None when the channel
        #: does not ping; it keeps its one timer on the loop.
        self._keepalive = None if options.keepalive is None else options.keepalive.connection(
            self.protocol, time.monotonic())

    def keep_session(self, keeper: Callable[[], bool]) -> None:
        """Run ``keeper`` now and as data arrives, until it has kept the session."""
        self._session_keeper = None if keeper() else keeper

    def tls_object(self) -> Any:
        """The connection's ``ssl.SSLObject`` (None: plaintext, or not connected yet)."""
        transport = self._transport
        return transport.get_extra_info("ssl_object") if transport is not None else None

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._keepalive is not None:
            self._keepalive.received(time.monotonic())  # the handshake counts as life
            self._arm_keepalive()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reads.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._reads.take(nbytes))

    def data_received(self, data: bytes) -> None:
        if self._tracer is not None:
            self._tracer.received(data)
        if self._session_keeper is not None and self._session_keeper():
            self._session_keeper = None
        keepalive = self._keepalive
        if keepalive is None:
            self._settle(self.protocol.receive_data(data), flush_soon=True)
            return
        keepalive.received(time.monotonic())
        events = self.protocol.receive_data(data)
        for event in events:
            if type(event) is GoAwayReceived:
                keepalive.goaway_received(event.error_code, event.debug_data)
        self._settle(events, flush_soon=True)

    def eof_received(self) -> Optional[bool]:
        return False  # close our side too: HTTP/2 has no half-closed connection

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._closed = True
        self._stop_keepalive()
        self._writable.set()
        if isinstance(exc, OSError):
            self._read_what_is_left()
        if self.protocol.failure is None:
            self._settle(self.protocol.socket_lost(None if exc is None else os_error_text(exc)))
        else:
            self._wake()
        self._on_unusable()

    def _read_what_is_left(self) -> None:
        """Give the protocol what the peer sent before it closed, after a failed write.

        A write to a peer that has closed fails (EPIPE, ECONNRESET) and asyncio then stops
        reading the socket at once, though the kernel still holds what the peer sent before it
        closed: often its last responses and the trailers with the call's status. The blocking
        client's reader goes on to EOF and reads them; here the socket is still open while
        ``connection_lost`` runs (the loop closes it afterwards), so it is read to its end now.
        A TLS connection's bytes would need its session: it is left as it is.
        """
        transport = self._transport
        if transport is None or transport.get_extra_info("sslcontext") is not None:
            return
        sock = transport.get_extra_info("socket")
        if sock is None:
            return
        fd = sock.fileno()
        while fd >= 0 and self.protocol.failure is None:
            try:
                data = os.read(fd, 65536)
            except OSError:  # nothing more (EAGAIN), or the reset the write saw
                return
            if not data:
                return
            self.data_received(data)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
        self._wake()

    # -- keepalive (gRFC A8; minigrpc.driver.client_keepalive) -----------------------------

    def _arm_keepalive(self) -> None:
        """(Re)arm the keepalive timer when the keepalive wants it sooner than it is armed."""
        assert self._keepalive is not None
        if not self._closed:
            self._keepalive.arm(time.monotonic(), self._start_keepalive_timer)

    def _start_keepalive_timer(self, delay: float) -> asyncio.TimerHandle:
        return self._loop.call_later(delay, self._keepalive_due)

    def _keepalive_due(self) -> None:
        """The keepalive timer went off: write a PING, or give the connection up (its calls
        end UNAVAILABLE, the channel hears it is lost, and the socket is dropped without
        waiting for a peer that reads nothing)."""
        keepalive = self._keepalive
        assert keepalive is not None
        if self._closed:
            return
        events = keepalive.on_timer(time.monotonic())
        if self.protocol.failure is None:
            self.flush()
            self._arm_keepalive()
            return
        transport = self._transport
        self._settle(events)  # writes the GOAWAY, reports the loss, closes (no call is left)
        if transport is not None:
            transport.abort()

    def _stop_keepalive(self) -> None:
        if self._keepalive is not None:
            self._keepalive.stop()

    # -- state ----------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """New calls may go here (no GOAWAY, no failure, not closed or retired)."""
        return not self._closed and not self._retired and not self.protocol.draining

    def retire(self) -> None:
        """The channel sends no new calls here any more (its address left the policy): close it
        now if idle, else once its last call is over."""
        self._retired = True
        if self.protocol.idle:
            self.close()

    @property
    def peer_accept_encodings(self) -> Optional[frozenset]:
        return self.protocol.peer_accept_encodings

    def _settle(self, events: List[CallEvent], flush_soon: bool = False) -> None:
        """Write what the protocol queued, tell the calls that ended, and wake every waiter to
        look again.

        ``flush_soon`` (after a read): what the read made the protocol queue (a PING ACK, a
        WINDOW_UPDATE) is written at the loop's next turn instead of now, after the coroutines
        this read woke have run.  A coroutine that starts its next call then sends it in the
        same write, and the one waiting for the response is not kept waiting for a write it
        does not need (grpc-go's servers ping with every response they send).  A connection
        that became unusable writes at once: its GOAWAY must leave before it closes.
        """
        soon = flush_soon and self.usable
        if not soon:
            self.flush()
        if self._on_finished:
            self._tell_finished(events)
        if not self.usable:
            self._on_unusable()
            if self.protocol.idle:
                self.close()
        self._wake()
        if soon:
            self._flush_soon()  # after the wake-ups this read scheduled

    def _tell_finished(self, events: List[CallEvent]) -> None:
        for event in events:
            if type(event) is CallFinished:
                on_finished = self._on_finished.pop(event.call, None)
                if on_finished is not None:
                    on_finished()

    def _flush_soon(self) -> None:
        """Write what the protocol queued at the loop's next turn, or with the next write."""
        data = self.protocol.data_to_send()
        if data:
            self._unsent.append(data)
            if len(self._unsent) == 1:
                self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what the protocol queued, with what a read left for the next turn."""
        data = self.protocol.data_to_send()
        if self._unsent:
            self._unsent.append(data)
            data = b"".join(self._unsent)
            self._unsent.clear()
        if data and self._transport is not None and not self._closed:
            if self._tracer is not None:
                self._tracer.sent(data)
            self._transport.write(data)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(
        self, ready: Callable[[], bool], deadline: Optional[float], call: Optional[ClientCall]
    ) -> None:
        """Wait until ``ready()``; at ``deadline`` the call (if given) ends DEADLINE_EXCEEDED.

        A cancelled waiter (``task.cancel()``) cancels its call: RST_STREAM(CANCEL) goes out
        before the CancelledError travels on (PROTOCOL-HTTP2.md, Errors).
        """
        try:
            while not ready():
                if passed(deadline):
                    if call is not None:
                        self._settle(self.protocol.expire(call))
                    return
                waiter = self._loop.create_future()
                timer = None
                if deadline is not None:
                    timer = self._loop.call_later(deadline - time.monotonic(), _resolve, waiter)
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    if timer is not None:
                        timer.cancel()
        except BaseException:
            if call is not None and not call.done:
                self._settle(self.protocol.cancel(call, CANCELLED))
            raise

    # -- the call -------------------------------------------------------------------------

    async def open(self, call: ClientCall, deadline: Optional[float]) -> bool:
        """Start ``call`` here and write what its request queued; False if it cannot start.

        A call that could not start never reached the server; the transport moves it to a new
        connection.  Above the peer's MAX_CONCURRENT_STREAMS it waits for a slot.
        """
        protocol = self.protocol
        await self._wait(
            lambda: call.done or protocol.can_start_call() or not self.usable, deadline, None
        )
        if call.done:
            return True
        if not protocol.can_start_call():
            if self.usable and passed(deadline):
                self._settle(protocol.abandon(call, deadline_status()))
                return True
            return False
        # HEADERS and the request's DATA go out in one write (one wake-up of the server).
        events = self._start_call(call)
        await self.write_request(call, deadline)
        if call.done:  # refused before it started (a header block too large, say)
            self._settle(events)
        return True

    def can_start_now(self) -> bool:
        """A call may start here without waiting: usable, a stream slot free, and the loop's
        write buffer below its high-water mark."""
        return self.usable and self._writable.is_set() and self.protocol.can_start_call()

    def start_now(self, call: ClientCall) -> bool:
        """Start ``call`` (:meth:`can_start_now` was checked) and write as much of its request
        as the windows allow, without waiting; True if all of it went out.

        The caller registers :meth:`when_finished` first: a call refused before it started
        (a header block too large, say) ends here.
        """
        self._settle(self._start_call(call))
        # A unary request's last message carries END_STREAM: it is all out once that is.
        return (call.done or call.request_complete) and self._writable.is_set()

    def _start_call(self, call: ClientCall) -> List[CallEvent]:
        """Queue the call's HEADERS (after a keepalive PING, if one is due: gRFC A8)."""
        keepalive = self._keepalive
        if keepalive is None:
            events = self.protocol.start_call(call)
        else:
            keepalive.call_starting(time.monotonic())
            events = self.protocol.start_call(call)
            self._arm_keepalive()
        self.started = True
        return events

    def when_finished(self, call: ClientCall, on_finished: Callable[[], None]) -> None:
        """Run ``on_finished()`` once ``call`` has its status, from whatever ended it (a read,
        a reset, the deadline, a cancel, the connection's loss or close)."""
        self._on_finished[call] = on_finished

    def expire(self, call: ClientCall) -> None:
        """The call's deadline passed: RST_STREAM(CANCEL) and DEADLINE_EXCEEDED."""
        if not call.done:
            self._settle(self.protocol.expire(call))

    async def write_request(self, call: ClientCall, deadline: Optional[float]) -> None:
        """Write the call's queued request, waiting for window and for the write buffer."""
        protocol = self.protocol
        while not call.done and not protocol.write_request(call):
            self.flush()
            await self._wait(lambda: call.done or protocol.window_available(call), deadline, call)
        self.flush()
        if not self._writable.is_set():
            await self._wait(self._writable.is_set, deadline, call)

    async def send(
        self, call: ClientCall, framed: Any, last: bool, deadline: Optional[float]
    ) -> bool:
        """Queue one request message and wait until it is written; False if the call ended."""
        self.protocol.send_message(call, framed, last)
        if self._keepalive is not None:
            self._keepalive.data_sent()
        await self.write_request(call, deadline)
        return not call.done

    async def close_request(self, call: ClientCall, deadline: Optional[float]) -> None:
        """End the request stream (END_STREAM) after the messages already sent."""
        self.protocol.close_request(call)
        await self.write_request(call, deadline)

    async def receive(self, call: ClientCall, deadline: Optional[float]) -> Optional[Message]:
        """The next response message, waiting for it; None once the call has ended."""
        await self._wait(lambda: call.done or call.messages_waiting, deadline, call)
        message = self.protocol.take_message(call)
        self._settle([])
        return message

    async def wait_for_headers(self, call: ClientCall, deadline: Optional[float]) -> None:
        await self._wait(lambda: call.done or call.response_head is not None, deadline, call)

    async def wait_done(self, call: ClientCall, deadline: Optional[float]) -> None:
        await self._wait(lambda: call.done, deadline, call)
        self._settle([])

    async def wait_read(self, call: ClientCall) -> None:
        """Wait until the application has taken every response of the ended ``call``, or the
        connection has closed."""
        await self._wait(lambda: not call.messages_waiting or self._closed, None, None)

    def cancel(self, call: ClientCall, status: CallStatus) -> None:
        """End ``call`` now with ``status``: RST_STREAM(CANCEL) if it has a stream."""
        if not call.done:
            self._settle(self.protocol.abandon(call, status))

    def close(self, status: Optional[CallStatus] = None) -> None:
        """Close the connection; calls still running end with ``status`` ("Channel closed!").

        A GOAWAY(NO_ERROR) goes out first when the connection still works.
        """
        if self._closed and self._transport is None:
            return
        events = self.protocol.close(status or CHANNEL_CLOSED)
        self.flush()  # the GOAWAY, unless one went out already
        self._closed = True
        self._stop_keepalive()
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        self._tell_finished(events)
        self._wake()


def _resolve(waiter: "asyncio.Future[None]") -> None:
    """Wake one waiter (its deadline came) unless something woke it first."""
    if not waiter.done():
        waiter.set_result(None)
