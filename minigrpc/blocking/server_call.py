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
  hand over messages while fewer than :data:`RESPONSE_HIGH_WATER` bytes are unsent; then it
  waits until the client's window and the socket have taken enough.  A client that stops
  reading therefore blocks its handler instead of growing memory.
"""

import collections
import threading
from typing import Any, Callable, Deque, Iterator, List, Optional

from ..driver.server_dispatch import CallEndedError
from ..protocol.enums import StatusCode
from ..protocol.memory_budget import QUEUED_BYTES_OVERHEAD, ConnectionMemory

__all__ = [
    "REQUEST_QUEUE_LIMIT",
    "REQUEST_QUEUE_LIMIT_OVER_BUDGET",
    "RESPONSE_HIGH_WATER",
    "CallEndedError",
    "RequestStream",
    "ResponseCredit",
]

#: What received, unread request messages of a call may cost before it stops taking more.
REQUEST_QUEUE_LIMIT = 1024 * 1024
#: The same while the connection is over its memory budget: a handler that reads still gets
#: its next messages, one that does not holds little (:mod:`minigrpc.protocol.memory_budget`).
REQUEST_QUEUE_LIMIT_OVER_BUDGET = 64 * 1024
#: Bytes of response messages a handler may have handed over and not yet seen written.
RESPONSE_HIGH_WATER = 256 * 1024


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
    """How many response bytes a handler may hand over before it waits (module docstring)."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        #: Handed over by the handler, not yet queued on the connection by the I/O thread.
        self._posted = 0
        #: Queued on the connection, waiting for the client's window or socket room.
        self._queued = 0
        self._ended = False

    def acquire(self, size: int, reserve: Optional[Callable[[int], bool]] = None) -> bool:
        """Handler thread: wait for room, then count ``size`` bytes; False once the call ended.

        ``reserve(size)`` is the connection's memory account (False while it is over budget):
        the handler also waits for it, and is woken by :meth:`poke` when the budget has room.
        """
        with self._changed:
            while not self._ended:
                if self._posted + self._queued >= RESPONSE_HIGH_WATER:
                    self._changed.wait()
                elif reserve is None or reserve(size):
                    break
                else:
                    self._changed.wait()
            if self._ended:
                return False
            self._posted += size
            return True

    def poke(self) -> None:
        """I/O thread: the connection's memory budget has room again (see :meth:`acquire`)."""
        with self._changed:
            self._changed.notify_all()

    def handed_over(self, size: int, queued: int) -> None:
        """I/O thread: ``size`` posted bytes were queued; the call now has ``queued`` unsent."""
        with self._changed:
            self._posted -= size
            self._queued = queued
            self._changed.notify_all()

    def written(self, queued: int) -> None:
        """I/O thread: after a flush, the call has ``queued`` bytes left unsent."""
        with self._changed:
            if queued != self._queued:
                self._queued = queued
                self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()
