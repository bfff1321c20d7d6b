"""What a streaming call hands between the server's I/O thread and its handler thread.

A handler runs on an executor thread; the HTTP/2 connection belongs to the I/O thread (its state
is not thread-safe).  Two bounded hand-overs connect them, one per direction, so that neither a
fast client nor a slow one can make the server hold more than a fixed amount per call:

* :class:`RequestStream`, the ``request_iterator`` of ``stream_unary`` and ``stream_stream``
  handlers.  The I/O thread moves messages into it from the connection while they cost fewer
  than :data:`REQUEST_QUEUE_LIMIT` bytes (each message counted with its object overhead,
  :data:`minigrpc.protocol.memory_budget.QUEUED_BYTES_OVERHEAD`, so that tiny messages cannot pile
  up by the hundred thousand); past that, messages wait in the connection, whose
  unreturned flow-control window stops the client (RFC 9113 §5.2, PROTOCOL-HTTP2.md leaves flow
  control to HTTP/2).  The handler's reads ask for more once the queue is half empty.
* :class:`ResponseCredit`, for ``unary_stream`` and ``stream_stream`` responses.  A handler may
  hand over messages while its unsent ones cost less than
  :data:`~minigrpc.protocol.memory_budget.RESPONSE_HIGH_WATER` and its
  connection is within its memory budget; then it waits until the client's window and the
  socket have taken enough.  A message costs its framed size plus a per-message overhead
  (:func:`minigrpc.protocol.memory_budget.response_cost`), never nothing: a client that stops
  returning window blocks its handler, whether it yields megabytes or empty messages.  What a
  handler hands over waits in the call's outbox; the I/O thread is woken once for all that
  arrives meanwhile and moves at most :data:`~minigrpc.driver.server_driver.RESPONSES_PER_TURN`
  of them per pass of its loop (and :data:`~minigrpc.driver.server_driver.RESPONSES_PER_PASS`
  of all calls' together).

The asyncio server (:mod:`minigrpc.aio.server_handlers`) applies the same numbers, with tasks
instead of these hand-overs.
"""

import collections
import threading
from typing import Any, Callable, Deque, Iterator, List, Optional, Tuple

from ..driver.server_dispatch import CallEndedError
from ..driver.server_driver import RESPONSES_PER_TURN
from ..protocol.enums import StatusCode
from ..protocol.memory_budget import (
    QUEUED_BYTES_OVERHEAD,
    RESPONSE_HIGH_WATER,
    ConnectionMemory,
    response_cost,
)

__all__ = [
    "REQUEST_QUEUE_LIMIT",
    "REQUEST_QUEUE_LIMIT_OVER_BUDGET",
    "CallEndedError",
    "RequestStream",
    "ResponseCredit",
]

#: What received, unread request messages of a call may cost before it stops taking more.
REQUEST_QUEUE_LIMIT = 1024 * 1024
#: The same while the connection is over its memory budget: a handler that reads still gets
#: its next messages, one that does not holds little (:mod:`minigrpc.protocol.memory_budget`).
REQUEST_QUEUE_LIMIT_OVER_BUDGET = 64 * 1024

class RequestStream:
    """The request iterator of a request-streaming handler (see the module docstring).

    ``deserialize`` turns bytes into a message in the handler's thread; ``pull`` asks the I/O
    thread to move more messages in (it is called without the lock held).  A message that
    fails to deserialize raises ``on_bad_message()``'s exception, which ends the call.
    """

    #: What a queued message costs beyond its bytes (counted against :attr:`room`).
    MESSAGE_OVERHEAD = QUEUED_BYTES_OVERHEAD

    def __init__(
        self,
        deserialize: Optional[Callable[[bytes], Any]],
        pull: Callable[[], None],
        on_bad_message: Callable[[], BaseException],
        memory: Optional[ConnectionMemory] = None,
    ) -> None:
        self._deserialize = deserialize
        #: The connection's account: what waits here is charged to it until the handler reads.
        self._memory = memory
        self._pull = pull
        self._on_bad_message = on_bad_message
        self._ready = threading.Condition(threading.Lock())
        self._messages: Deque[bytes] = collections.deque()
        self._queued_bytes = 0
        self._ended = False
        self._ended_by: Optional[StatusCode] = None
        #: The I/O thread stopped taking messages because the queue was full.
        self._stalled = False

    # -- the I/O thread ----------------------------------------------------------------------

    @property
    def room(self) -> int:
        """What more messages may cost here (0 or less: full)."""
        memory = self._memory
        if memory is not None and memory.over_budget:
            return REQUEST_QUEUE_LIMIT_OVER_BUDGET - self._queued_bytes
        return REQUEST_QUEUE_LIMIT - self._queued_bytes

    @property
    def has_room(self) -> bool:
        return self.room > 0

    def put(self, message: bytes) -> None:
        self.put_many([message])

    def put_many(self, messages: List[bytes]) -> None:
        """Queue messages for the handler: one hand-over (lock, charge, wake-up) for all."""
        cost = sum(map(len, messages)) + QUEUED_BYTES_OVERHEAD * len(messages)
        with self._ready:
            self._messages.extend(messages)
            self._queued_bytes += cost
            if self._memory is not None:
                self._memory.hold(cost)
            self._ready.notify()

    def stall(self) -> None:
        """The queue is full: the next read that empties it halfway calls ``pull``."""
        with self._ready:
            self._stalled = True

    def end(self) -> None:
        """The client half-closed the request: iteration stops after the queued messages."""
        with self._ready:
            self._ended = True
            self._ready.notify_all()

    def terminate(self, code: StatusCode) -> None:
        """The call ended: a waiting or later read raises :class:`CallEndedError`."""
        with self._ready:
            self._ended_by = code
            self._messages.clear()
            if self._memory is not None and self._queued_bytes:
                self._memory.unreserve(self._queued_bytes)
            self._queued_bytes = 0
            self._ready.notify_all()

    # -- the handler thread ------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        pull = False
        with self._ready:
            while not self._messages and not self._ended and self._ended_by is None:
                self._ready.wait()
            if self._ended_by is not None:
                raise CallEndedError(self._ended_by)
            if not self._messages:
                raise StopIteration
            message = self._messages.popleft()
            cost = len(message) + QUEUED_BYTES_OVERHEAD
            self._queued_bytes -= cost
            if self._memory is not None:
                self._memory.unreserve(cost)
            if self._stalled and self._queued_bytes <= REQUEST_QUEUE_LIMIT // 2:
                self._stalled = False
                pull = True
        if pull:
            self._pull()
        if self._deserialize is None:
            return message
        try:
            return self._deserialize(message)
        except Exception:
            raise self._on_bad_message() from None


class ResponseCredit:
    """A streaming call's responses between its handler and the I/O thread (module
    docstring): the call's outbox, and what its handler may hand over before it waits."""

    def __init__(self, memory: Optional[ConnectionMemory] = None) -> None:
        self._changed = threading.Condition(threading.Lock())
        #: The connection's account: each message is reserved in it when handed over.
        self._memory = memory
        #: Handed over by the handler, not yet taken by the I/O thread: (message, compress).
        self._outbox: List[Tuple[bytes, bool]] = []
        #: What the outbox costs (:func:`~minigrpc.protocol.memory_budget.response_cost`).
        self._posted = 0
        #: What the call's queued responses cost on the connection, waiting for the client's
        #: window or socket room.
        self._queued = 0
        #: The I/O thread was told to take the outbox, and has not emptied it since.
        self._scheduled = False
        #: The handler handed over the call's outcome: later responses are dropped.
        self._closed = False
        self._ended = False

    def offer(self, message: bytes, compress: bool) -> Optional[bool]:
        """Handler thread: wait for room, then put ``message`` in the outbox.

        None once the call ended (nothing was taken); True when the I/O thread must be told
        to take the outbox (:meth:`take`), False when it already was.  The handler waits
        while the call's unsent responses cost :data:`RESPONSE_HIGH_WATER` or more, while
        its outbox holds what the I/O thread takes in one pass (:data:`RESPONSES_PER_TURN`:
        a hundred handler threads yielding tiny messages must not starve the I/O thread of
        the GIL), or while its connection is over budget (until :meth:`poke` says the
        budget has room).
        """
        cost = response_cost(len(message))
        memory = self._memory
        with self._changed:
            while not self._ended and not self._closed:
                if (
                    self._posted + self._queued >= RESPONSE_HIGH_WATER
                    or len(self._outbox) >= RESPONSES_PER_TURN
                ):
                    self._changed.wait()
                elif memory is None or memory.reserve_or_wait(cost):
                    break
                else:
                    self._changed.wait()
            if self._ended or self._closed:
                return None
            self._outbox.append((message, compress))
            self._posted += cost
            if self._scheduled:
                return False
            self._scheduled = True
            return True

    def take(self, limit: Optional[int]) -> Tuple[List[Tuple[bytes, bool]], int, bool]:
        """I/O thread: up to ``limit`` messages from the outbox (all with None), what they
        cost (still reserved: the caller releases it as it queues them), and whether more
        are left (the caller takes them later; the handler will not tell it again)."""
        with self._changed:
            outbox = self._outbox
            if limit is None or len(outbox) <= limit:
                taken, self._outbox = outbox, []
            else:
                taken, self._outbox = outbox[:limit], outbox[limit:]
            cost = sum(response_cost(len(message)) for message, _ in taken)
            self._posted -= cost
            if taken:
                self._changed.notify_all()  # a handler waiting at the high water may go on
            more = bool(self._outbox)
            if not more:
                self._scheduled = False
            return taken, cost, more

    def close(self) -> None:
        """Handler side: the call's outcome is handed over.  What the outbox holds still goes
        out before it; a response offered later is dropped, as grpcio drops a non-blocking
        handler's responses after its end."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def poke(self) -> None:
        """I/O thread: the connection's memory budget has room again (see :meth:`offer`)."""
        with self._changed:
            self._changed.notify_all()

    def written(self, queued: int) -> None:
        """I/O thread: the call's queued responses now cost ``queued`` (after queueing more,
        or a flush)."""
        with self._changed:
            if queued != self._queued:
                self._queued = queued
                self._changed.notify_all()

    def end(self) -> None:
        """The call ended: wake the handler, and give back what its outbox had reserved."""
        with self._changed:
            self._ended = True
            posted, self._posted = self._posted, 0
            self._outbox = []
            self._changed.notify_all()
        if posted and self._memory is not None:
            self._memory.unreserve(posted)
