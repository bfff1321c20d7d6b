"""How much memory a server's buffered data may take: one budget for the server, a share per
connection, counted at what the data really costs.

A server buffers what a client sends before the handler takes it (partial and whole request
messages) and what a handler answered before the client reads it (queued response data and
unsent output).  HTTP/2 gives a receiver the means to bound the first: the sender may send
only as much as the flow-control windows the receiver grants (RFC 9113 §5.2), and a receiver
limits what it commits to each connection (RFC 9113 §10.5).  Counting payload bytes is not
enough: a stream of 2-byte messages costs a Python object or two per message, some fifty
times its payload.  So a charge is what the data occupies, with the per-object overheads
measured below, and the budget is enforced where HTTP/2 puts the levers:

* while a connection is over budget (:attr:`ConnectionMemory.over_budget`), the protocol
  withholds stream and connection WINDOW_UPDATEs (:mod:`minigrpc.protocol.grpc_connection`), and
  the socket layer stops reading from it once what it received alone is over
  (:attr:`~ConnectionMemory. stop_reading`);
* new streams are refused with RST_STREAM(REFUSED_STREAM) (:attr:`~ConnectionMemory.
  refuse_streams`), which a client may retry (PROTOCOL-HTTP2.md, Errors);
* a unary response that would be queued on a connection already over budget ends its call
  with RESOURCE_EXHAUSTED instead.

The server's total may only be spent by connections that hold more than their fair share
(the total divided by the connections): when it is spent, a connection holding little is not
held back, so a well-behaved client keeps being served beside one that hoards.

I/O-free, and single-threaded but for one thing: the I/O thread (or event loop) that drives
the protocols charges and releases, except that a handler thread *reserves* what its unary
response will cost before handing it over (:meth:`ConnectionMemory.reserve`, under a lock), so
that responses produced faster than the I/O thread queues them are counted from the start.
:meth:`MemoryBudget.resumable` tells the I/O thread which connections were held back and may
now be given window again.

Measured costs.  ``python tools/measure_buffer_costs.py`` (500,000 objects in a deque,
VmRSS before and after, in a fresh process per case) on CPython 3.11 and PyPy 7.3.11 (3.9):

==============================================  ==============  ============
what is queued (overhead above the payload)      CPython 3.11    PyPy 7.3.11
==============================================  ==============  ============
``(flag, bytes)`` tuple in a deque               118-121 bytes   78-114 bytes
``bytes`` in a deque                             53-57 bytes     54-90 bytes
``memoryview`` of a ``bytes`` in a deque         375-379 bytes   151-191 bytes
packed into one ``bytearray`` (5-byte prefix)    5.2 bytes       7-10 bytes
==============================================  ==============  ============

(Payloads of 2, 100 and 4,096 bytes.)  The constants below round these up to the larger of
the two interpreters.
"""

import threading
from typing import List, Optional, Set

__all__ = [
    "DEFAULT_CONNECTION_LIMIT",
    "DEFAULT_SERVER_LIMIT",
    "MESSAGE_OVERHEAD",
    "OVER_BUDGET_DETAILS",
    "PACKED_OVERHEAD",
    "QUEUED_BYTES_OVERHEAD",
    "RESPONSE_HIGH_WATER",
    "VIEW_OVERHEAD",
    "ConnectionMemory",
    "MemoryBudget",
    "response_cost",
    "unsent_cost",
]

#: Defaults sized for a node agent: all connections together, and any one of them.
DEFAULT_SERVER_LIMIT = 64 * 1024 * 1024
DEFAULT_CONNECTION_LIMIT = 16 * 1024 * 1024
#: A received message kept as a ``(flag, payload)`` tuple in a deque, above its payload.
MESSAGE_OVERHEAD = 128
#: A ``bytes`` object in a deque (a request message queued for a handler), above its length.
QUEUED_BYTES_OVERHEAD = 96
#: A ``memoryview`` of a ``bytes`` object in a deque (a queued response piece), above its length.
VIEW_OVERHEAD = 384
#: A small message packed into a shared ``bytearray``: its 5-byte prefix and the array's
#: over-allocation, above its payload.
PACKED_OVERHEAD = 12
#: The status details of a response dropped because its connection is over its budget
#: (RESOURCE_EXHAUSTED), whichever layer drops it.
OVER_BUDGET_DETAILS = "the server's memory budget for this connection is spent"
#: What the response messages of one call that its handler handed over and that are not yet
#: written may cost (:func:`response_cost` each, whether still handed over or queued on the
#: connection) before the handler waits: a client that stops returning window blocks its
#: handler, whether it yields megabytes or empty messages.  Both servers apply it
#: (:mod:`minigrpc.blocking.server_call`, :mod:`minigrpc.aio.server_handlers`).
RESPONSE_HIGH_WATER = 256 * 1024
#: The smallest fair share of the server's total a connection may always hold.
_MIN_FAIR_SHARE = 256 * 1024
#: The 5-byte prefix of a Length-Prefixed-Message (PROTOCOL-HTTP2.md).
_PREFIX = 5


def unsent_cost(framed_bytes: int, messages: int) -> int:
    """What a call's unsent response messages count against its high water
    (:data:`RESPONSE_HIGH_WATER`): their framed bytes plus
    :data:`MESSAGE_OVERHEAD` per message, whether handed over or queued.

    Counting payload bytes alone let a handler yielding empty messages hand over millions of
    them against a limit that never moved; counted this way, every message spends at least
    :data:`MESSAGE_OVERHEAD`, so a call's unsent responses are bounded in number as well as in
    bytes, whatever their size.  It is also what a message handed over and not yet queued
    occupies (a ``(payload, flag)`` pair, as measured above).  Once queued, the memory budget
    is charged what :class:`minigrpc.protocol.grpc_connection.Outbound` really holds (packed small
    messages less), but the count still bounds how many a call may have waiting.
    """
    return framed_bytes + MESSAGE_OVERHEAD * messages


def response_cost(length: int) -> int:
    """:func:`unsent_cost` of one response message of ``length`` payload bytes."""
    return length + _PREFIX + MESSAGE_OVERHEAD


class MemoryBudget:
    """The server's budget: a total, and a limit for each connection (module docstring)."""

    __slots__ = (
        "_accounts",
        "_reserve_lock",
        "_waiting",
        "connection_limit",
        "limit",
        "peak",
        "reserved",
        "used",
    )

    def __init__(
        self,
        limit: int = DEFAULT_SERVER_LIMIT,
        connection_limit: Optional[int] = None,
    ) -> None:
        if limit < 1024 * 1024:
            raise ValueError("the server's memory budget must be at least 1 MiB")
        self.limit = limit
        self.connection_limit = min(
            limit, DEFAULT_CONNECTION_LIMIT if connection_limit is None else connection_limit
        )
        if self.connection_limit < 256 * 1024:
            raise ValueError("a connection's memory budget must be at least 256 KiB")
        #: Bytes charged by all connections (the I/O thread's), bytes reserved by handler
        #: threads (under the lock), and the most the two ever were together (for reports).
        self.used = 0
        self.reserved = 0
        self.peak = 0
        self._accounts: Set[ConnectionMemory] = set()
        #: Serialises reservations (handler threads) with their release (the I/O thread).
        self._reserve_lock = threading.Lock()
        #: Accounts that held back window since the last :meth:`resumable`.
        self._waiting: Set[ConnectionMemory] = set()

    def open_connection(self) -> "ConnectionMemory":
        """A new connection's account; :meth:`ConnectionMemory.close` gives it back."""
        account = ConnectionMemory(self)
        self._accounts.add(account)
        return account

    def charge(self, cost: int) -> None:
        self.used += cost
        total = self.used + self.reserved
        if total > self.peak:
            self.peak = total

    @property
    def total(self) -> int:
        """Everything charged and reserved."""
        return self.used + self.reserved

    @property
    def spent(self) -> bool:
        return self.used + self.reserved >= self.limit

    @property
    def fair_share(self) -> int:
        """What one connection may hold while the total is spent."""
        return max(_MIN_FAIR_SHARE, self.limit // max(1, len(self._accounts)))

    def resumable(self) -> "List[ConnectionMemory]":
        """Connections that held back window and are no longer over budget: give them window
        again (:meth:`minigrpc.protocol.grpc_connection.GrpcConnection.resume_credit`)."""
        if not self._waiting:
            return []
        with self._reserve_lock:  # handler threads add to it too (ConnectionMemory.reserve_or_wait)
            ready = [account for account in self._waiting if not account.over_budget]
            self._waiting.difference_update(ready)
        return ready


class ConnectionMemory:
    """One connection's account in a :class:`MemoryBudget`."""

    __slots__ = ("_budget", "_closed", "inbound", "outbound", "owner", "reserved")

    def __init__(self, budget: MemoryBudget) -> None:
        self._budget = budget
        #: Whatever the transport attaches to find its connection again (:meth:`resumable`).
        self.owner: object = None
        #: Bytes charged for what the client sent and no handler has taken yet.
        self.inbound = 0
        #: Bytes charged for responses and output the client has not read yet.
        self.outbound = 0
        #: Responses handed over by handler threads and not yet queued (:meth:`reserve`).
        self.reserved = 0
        self._closed = False

    @property
    def used(self) -> int:
        return self.inbound + self.outbound + self.reserved

    def reserve(self, cost: int) -> bool:
        """Handler thread: count a response about to be handed to the I/O thread.

        False (nothing reserved) when the connection is over budget: the response is dropped
        (RESOURCE_EXHAUSTED) by the caller instead of queued.
        """
        budget = self._budget
        with budget._reserve_lock:
            if self._closed or self.over_budget:
                return False
            self.reserved += cost
            budget.reserved += cost
            if budget.used + budget.reserved > budget.peak:
                budget.peak = budget.used + budget.reserved
            return True

    def hold(self, cost: int) -> None:
        """I/O thread: charge what a handler thread will release (:meth:`unreserve`): request
        messages moved into a streaming handler's queue (:mod:`minigrpc.blocking.server_call`)."""
        budget = self._budget
        with budget._reserve_lock:
            if not self._closed:
                self.reserved += cost
                budget.reserved += cost
                if budget.used + budget.reserved > budget.peak:
                    budget.peak = budget.used + budget.reserved

    def unreserve(self, cost: int) -> None:
        """I/O thread: the reserved response is being queued (and charged) or dropped."""
        budget = self._budget
        with budget._reserve_lock:
            if not self._closed:
                self.reserved -= cost
                budget.reserved -= cost

    @property
    def limit(self) -> int:
        return self._budget.connection_limit

    def charge_inbound(self, cost: int) -> None:
        if not self._closed:
            self.inbound += cost
            self._budget.charge(cost)

    def release_inbound(self, cost: int) -> None:
        if not self._closed:
            self.inbound -= cost
            self._budget.used -= cost

    def charge_outbound(self, cost: int) -> None:
        if not self._closed:
            self.outbound += cost
            self._budget.charge(cost)

    def release_outbound(self, cost: int) -> None:
        if not self._closed:
            self.outbound -= cost
            self._budget.used -= cost

    @property
    def over_budget(self) -> bool:
        """Over the connection's limit, or holding more than a fair share of a spent total."""
        used = self.inbound + self.outbound + self.reserved
        if used >= self._budget.connection_limit:
            return True
        budget = self._budget
        return budget.used + budget.reserved >= budget.limit and used >= budget.fair_share

    @property
    def refuse_streams(self) -> bool:
        """New streams get RST_STREAM(REFUSED_STREAM) (module docstring)."""
        return self._closed or self.over_budget

    @property
    def stop_reading(self) -> bool:
        """What the client sent alone is over the connection's limit: read no more from it.

        Only received data counts: a connection over budget because it does not read its
        responses must still be read, or its WINDOW_UPDATEs would never arrive.
        """
        return self.inbound >= self._budget.connection_limit

    def holding_back(self) -> None:
        """The protocol withheld window: report this account in :meth:`MemoryBudget.resumable`."""
        with self._budget._reserve_lock:
            self._budget._waiting.add(self)

    def reserve_or_wait(self, cost: int) -> bool:
        """Handler thread, for a streamed response: :meth:`reserve`, or if the connection is
        over budget, report it in :meth:`MemoryBudget.resumable` (the handler waits for that
        and tries again) and return False.  True without a reservation once the connection
        is closed: the call is ending, and nothing will be queued."""
        budget = self._budget
        with budget._reserve_lock:
            if self._closed:
                return True
            if self.over_budget:
                budget._waiting.add(self)
                return False
            self.reserved += cost
            budget.reserved += cost
            if budget.used + budget.reserved > budget.peak:
                budget.peak = budget.used + budget.reserved
            return True

    def close(self) -> None:
        """The connection is gone: give back what it still holds."""
        if self._closed:
            return
        self._closed = True
        budget = self._budget
        budget.used -= self.inbound + self.outbound
        with budget._reserve_lock:
            budget.reserved -= self.reserved
            self.inbound = self.outbound = self.reserved = 0
        budget._accounts.discard(self)
        budget._waiting.discard(self)
