"""The server's memory budget (minigrpc.protocol.memory_budget) as the sans-IO server applies it.

An h2 client and a :class:`ServerGrpcConnection` exchange bytes in memory, so what the server
charges, which windows it withholds and which streams it refuses are checked exactly: a client
that sends as fast as its windows allow to a handler that never reads must be stopped at the
budget plus what was already granted, whatever the size of its messages, and must get its
window back once the handler reads.
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional

import h2.config
import h2.connection
import h2.events
import pytest

from minigrpc.driver.server_options import ServerOptions
from minigrpc.protocol import wire
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.grpc_connection import DEFAULT_BUFFER_LIMIT
from minigrpc.protocol.memory_budget import (
    MESSAGE_OVERHEAD,
    PACKED_OVERHEAD,
    VIEW_OVERHEAD,
    MemoryBudget,
)
from minigrpc.protocol.server_protocol import (
    CallStarted,
    CallTerminated,
    RequestReady,
    ServerGrpcConnection,
    ServerSettings,
)

KIB = 1024
MIB = 1024 * 1024
#: Small windows, so that a test fills them in a few thousand messages.
SETTINGS = ServerSettings(initial_window_size=256 * KIB, connection_window=1 * MIB)
HEADERS = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/svc/Stream"),
    (b":authority", b"localhost"),
    (b"content-type", b"application/grpc"),
]


class Pair:
    """An h2 client and a ServerGrpcConnection back to back, sharing ``budget``."""

    def __init__(self, budget: MemoryBudget, settings: ServerSettings = SETTINGS) -> None:
        self.budget = budget
        self.server = ServerGrpcConnection(settings, shape_from_handler=True, memory=budget)
        self.server.initiate()
        self.server.memory.owner = self.server
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.client.initiate_connection()
        self.resets: List[h2.events.StreamReset] = []
        self.responses: List[Any] = []
        self.exchange()

    def exchange(self) -> List[Any]:
        """Move bytes both ways until both sides are quiet; the server's call events."""
        events: List[Any] = []
        for _ in range(100):
            for account in self.budget.resumable():  # as the server's I/O loop does
                owner = account.owner
                assert isinstance(owner, ServerGrpcConnection)
                owner.resume_credit()
            data = self.client.data_to_send()
            if data:
                events.extend(self.server.receive_data(data))
            back = self.server.data_to_send()
            for event in self.client.receive_data(back) if back else []:
                if isinstance(event, h2.events.StreamReset):
                    self.resets.append(event)
                elif isinstance(event, h2.events.DataReceived):
                    self.client.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
                self.responses.append(event)
            if not data and not back:
                break
        return events

    def open_stream(self, streaming: bool = True) -> int:
        stream_id = self.client.get_next_available_stream_id()
        self.client.send_headers(stream_id, HEADERS)
        events = self.exchange()
        started = [e for e in events if isinstance(e, CallStarted)]
        if started:
            self.server.accept_call(stream_id, streaming)
        return stream_id

    def room(self, stream_id: int) -> int:
        return min(
            self.client.local_flow_control_window(stream_id), self.client.max_outbound_frame_size
        )

    def flood(self, stream_id: int, message: bytes, batch: int = 64) -> int:
        """Send ``message`` again and again as long as the windows allow; the bytes sent."""
        framed = wire.encode_message(message) * batch
        pending = b""
        sent = 0
        while True:
            room = self.room(stream_id)
            if room <= 0:
                return sent
            pending = pending or framed
            chunk, pending = pending[:room], pending[room:]
            self.client.send_data(stream_id, chunk)
            sent += len(chunk)
            self.exchange()


def test_budget_counts_per_connection_and_fair_share() -> None:
    budget = MemoryBudget(4 * MIB, 2 * MIB)
    hog, modest = budget.open_connection(), budget.open_connection()
    hog.charge_inbound(2 * MIB - 1)
    assert not hog.over_budget
    hog.charge_outbound(1)
    assert hog.over_budget and hog.refuse_streams and not hog.stop_reading
    hog.charge_inbound(1)
    assert hog.stop_reading  # what it sent alone is over the connection's limit
    third = budget.open_connection()
    third.charge_inbound(2 * MIB)  # the total is spent now
    assert budget.spent
    assert not modest.over_budget  # holding nothing, it is not held back
    share = budget.fair_share  # a third of the total, with three connections
    modest.charge_inbound(share)
    assert modest.over_budget
    third.close()
    hog.close()
    assert budget.used == share and not modest.over_budget


def test_small_messages_cost_what_they_carry() -> None:
    """2-byte messages are packed: the charge is payload plus the 5-byte prefix and slack,
    not two Python objects per message (tools/measure_buffer_costs.py)."""
    pair = Pair(MemoryBudget())
    stream_id = pair.open_stream()
    pair.client.send_data(stream_id, wire.encode_message(b"ab") * 2000)
    pair.exchange()
    memory = pair.server.memory
    assert memory.inbound == 2000 * (2 + PACKED_OVERHEAD)
    taken = [pair.server.take_request(stream_id) for _ in range(2000)]
    assert taken == [b"ab"] * 2000 and pair.server.take_request(stream_id) is None
    assert memory.inbound == 0


def test_packed_runs_keep_every_message_in_order_whatever_follows_them() -> None:
    """Runs of whole small messages are queued as they came on the wire; a large message, a
    message cut by the frame's end, or an invalid one ends the run and the decoder takes over:
    nothing is lost, reordered or charged twice."""
    pair = Pair(MemoryBudget())
    stream_id = pair.open_stream()
    large = b"L" * 5000
    tail = wire.encode_message(b"split-across-frames")
    messages = [b"a", b"", b"bb"] * 300 + [large] + [b"c"] * 50
    payload = b"".join(wire.encode_message(m) for m in messages) + tail[:7]
    pair.client.send_data(stream_id, payload)
    pair.client.send_data(stream_id, tail[7:] + wire.encode_message(b"d") * 3)
    pair.exchange()
    expected = [*messages, b"split-across-frames", b"d", b"d", b"d"]
    memory = pair.server.memory
    charged = sum(
        len(m) + (PACKED_OVERHEAD if len(m) < 1024 else MESSAGE_OVERHEAD) for m in expected
    )
    assert memory.inbound == charged
    taken = [pair.server.take_request(stream_id) for _ in expected]
    assert taken == expected and pair.server.take_request(stream_id) is None
    assert memory.inbound == 0


def test_large_messages_cost_their_object_overhead() -> None:
    pair = Pair(MemoryBudget())
    stream_id = pair.open_stream()
    pair.client.send_data(stream_id, wire.encode_message(b"x" * 5000) * 3)
    pair.exchange()
    assert pair.server.memory.inbound == 3 * (5000 + MESSAGE_OVERHEAD)
    assert pair.server.take_request(stream_id) == b"x" * 5000


@pytest.mark.parametrize("size", [2, 100, 20_000])
def test_unread_stream_is_stopped_at_the_budget(size: int) -> None:
    """A handler that never reads: the client is stopped once the connection's account is
    over, at most what its windows allowed beyond it, and the server's charge is the bound."""
    limit = 512 * KIB
    pair = Pair(MemoryBudget(4 * MIB, limit))
    stream_id = pair.open_stream()
    sent = pair.flood(stream_id, b"m" * size)
    memory = pair.server.memory
    # What was granted beyond the limit: at most the stream's initial window, charged with
    # each message's overhead (the prefix is on the wire already).
    per_message = (size + PACKED_OVERHEAD) if size < 1024 else (size + MESSAGE_OVERHEAD)
    granted_cost = 256 * KIB * per_message // (size + 5) + per_message
    assert memory.over_budget
    assert memory.inbound <= max(limit, DEFAULT_BUFFER_LIMIT) + granted_cost, (sent, memory.inbound)
    assert pair.room(stream_id) <= 0  # the client can send nothing more


def test_window_comes_back_when_the_handler_reads() -> None:
    pair = Pair(MemoryBudget(4 * MIB, 512 * KIB))
    stream_id = pair.open_stream()
    pair.flood(stream_id, b"m" * 100)
    assert pair.room(stream_id) <= 0
    while pair.server.take_request(stream_id) is not None:
        pass
    pair.server.resume_credit()  # what the socket layer does for MemoryBudget.resumable()
    pair.exchange()
    assert pair.server.memory.inbound < 105  # at most the partial message the flood ended in
    assert pair.room(stream_id) > 0
    assert pair.client.outbound_flow_control_window > 0


def test_held_back_connection_is_resumable_once_under() -> None:
    budget = MemoryBudget(4 * MIB, 512 * KIB)
    pair = Pair(budget)
    stream_id = pair.open_stream()
    pair.flood(stream_id, b"m" * 100)
    assert budget.resumable() == []  # still over
    while pair.server.take_request(stream_id) is not None:
        pass
    assert budget.resumable() == [pair.server.memory]


def test_new_streams_are_refused_over_budget() -> None:
    pair = Pair(MemoryBudget(4 * MIB, 256 * KIB))
    stream_id = pair.open_stream()
    pair.flood(stream_id, b"m" * 100)
    refused = pair.open_stream()
    assert [(r.stream_id, r.error_code) for r in pair.resets] == [(refused, 7)]  # REFUSED_STREAM


def test_unary_response_over_budget_is_resource_exhausted() -> None:
    """A unary call admitted before its connection went over budget: its response would only
    add to what the client does not read, so the call ends RESOURCE_EXHAUSTED instead."""
    pair = Pair(MemoryBudget(4 * MIB, 256 * KIB))
    unary = pair.client.get_next_available_stream_id()
    pair.client.send_headers(unary, HEADERS)
    pair.client.send_data(unary, wire.encode_message(b"q"), end_stream=True)
    pair.exchange()
    assert any(isinstance(e, RequestReady) for e in pair.server.accept_call(unary, False))
    pair.flood(pair.open_stream(), b"m" * 100)
    assert pair.server.memory.over_budget
    assert pair.server.finish_call(unary, StatusCode.OK, message=b"answer")
    pair.exchange()
    blocks = [
        e.headers for e in pair.responses
        if isinstance(e, (h2.events.ResponseReceived, h2.events.TrailersReceived))
        and e.stream_id == unary
    ]
    assert dict(h for block in blocks for h in block)[b"grpc-status"] == b"8", blocks
    assert not any(
        isinstance(e, h2.events.DataReceived) and e.stream_id == unary for e in pair.responses
    )


def test_queued_responses_are_charged_and_released() -> None:
    pair = Pair(MemoryBudget())
    stream_id = pair.open_stream()
    pair.server.set_output_room(0)  # the socket takes nothing: the response stays queued
    assert pair.server.send_message(stream_id, b"r" * 2000)
    pair.exchange()
    assert pair.server.memory.outbound == 2005 + VIEW_OVERHEAD
    # Small messages are packed together: their bytes and a small overhead each.
    for _ in range(3):
        assert pair.server.send_message(stream_id, b"")
    assert pair.server.memory.outbound == 2005 + VIEW_OVERHEAD + 3 * (5 + PACKED_OVERHEAD)
    # Against the call's high water, each message counts a full MESSAGE_OVERHEAD however
    # little memory it takes: the number of unsent messages is bounded too.
    assert pair.server.queued_response_cost(stream_id) == 2005 + 3 * 5 + 4 * MESSAGE_OVERHEAD
    pair.server.set_output_room(None)
    pair.exchange()
    assert pair.server.memory.outbound == 0


def test_reset_stream_gives_its_charge_back() -> None:
    budget = MemoryBudget()
    pair = Pair(budget)
    stream_id = pair.open_stream()
    pair.client.send_data(stream_id, wire.encode_message(b"ab") * 100 + b"\0\0\0\x10")
    pair.exchange()
    assert budget.used > 0
    pair.client.reset_stream(stream_id)
    events = pair.exchange()
    assert any(isinstance(e, CallTerminated) for e in events)
    assert budget.used == 0


def test_partial_messages_on_many_streams_all_complete() -> None:
    """Ten unary requests of 300 KiB, sent a slice of each in turn, on a connection allowed
    256 KiB: over budget, one partial message at a time still gets window (the lead stream),
    so they all complete instead of waiting for each other."""
    pair = Pair(MemoryBudget(4 * MIB, 256 * KIB))
    bodies = {}
    for _ in range(10):
        stream_id = pair.open_stream(streaming=False)
        bodies[stream_id] = memoryview(wire.encode_message(b"u" * 300 * KIB))
    ready: List[int] = []
    for _ in range(10_000):
        progress = False
        for stream_id, body in list(bodies.items()):
            room = min(pair.room(stream_id), 16 * KIB, len(body))
            if room > 0:
                last = room == len(body)
                pair.client.send_data(stream_id, body[:room].tobytes(), end_stream=last)
                bodies[stream_id] = body[room:]
                if room == len(body):
                    del bodies[stream_id]
                progress = True
        ready += [e.stream_id for e in pair.exchange() if isinstance(e, RequestReady)]
        if not progress and not pair.client.data_to_send():
            break
    assert sorted(ready) == list(range(1, 21, 2))
    assert pair.server.memory.inbound == 0


def test_server_option_sets_the_budget() -> None:
    options = ServerOptions([("minigrpc.max_buffered_bytes", 8 * MIB)])
    budget = options.memory_budget()
    assert (budget.limit, budget.connection_limit) == (8 * MIB, 2 * MIB)
    both = ServerOptions(
        [("minigrpc.max_buffered_bytes", 8 * MIB), ("minigrpc.max_connection_buffered_bytes", MIB)]
    ).memory_budget()
    assert both.connection_limit == MIB
    small = ServerOptions([("minigrpc.max_connection_buffered_bytes", MIB)]).protocol_settings()
    assert (small.connection_window, small.initial_window_size) == (MIB, MIB)
    default = ServerOptions([]).protocol_settings()
    assert (default.connection_window, default.initial_window_size) == (16 * MIB, 4 * MIB)
    with pytest.raises(ValueError, match="max_buffered_bytes"):
        ServerOptions([("minigrpc.max_buffered_bytes", 1000)])


def test_streamed_response_waits_for_the_budget() -> None:
    """A streaming handler's next response waits while its connection is over budget, and
    goes on once the I/O thread finds the account resumable and pokes the call's credit."""
    from minigrpc.blocking.server_call import ResponseCredit
    from minigrpc.protocol.memory_budget import response_cost

    budget = MemoryBudget(4 * MIB, 256 * KIB)
    account = budget.open_connection()
    account.charge_outbound(256 * KIB)  # responses the client does not read
    credit = ResponseCredit(account)
    outcome: List[Optional[bool]] = []
    handler = threading.Thread(target=lambda: outcome.append(credit.offer(b"x" * 1000, True)))
    handler.start()
    assert credit_waits_for(budget, account)
    assert outcome == []  # still over: it waits
    account.release_outbound(256 * KIB)  # the client read
    assert budget.resumable() == [account]
    credit.poke()
    handler.join(5)
    assert outcome == [True] and account.reserved == response_cost(1000)
    messages, cost, more = credit.take(None)
    assert messages == [(b"x" * 1000, True)] and cost == response_cost(1000) and not more
    account.unreserve(cost)
    assert budget.total == 0


def credit_waits_for(budget: MemoryBudget, account: Any) -> bool:
    """The handler found the account over budget: it is listed to be resumed (bounded poll of
    the budget's own record; the handler thread sets nothing else to wait on)."""
    ticker = threading.Event()
    for _ in range(500):
        if account in budget._waiting:
            return True
        ticker.wait(0.01)
    return False


def test_empty_responses_are_bounded_in_number() -> None:
    """Empty messages count their framed size and a per-message overhead: a handler can have
    only so many unsent, however small they are, and only one pass's worth of them waiting
    for the I/O thread to take them."""
    from minigrpc.blocking.server_call import (
        RESPONSE_HIGH_WATER,
        RESPONSES_PER_TURN,
        ResponseCredit,
    )
    from minigrpc.protocol.memory_budget import response_cost, unsent_cost

    account = MemoryBudget().open_connection()
    credit = ResponseCredit(account)

    def offer_waits() -> threading.Thread:
        """Offer one more in a thread; it is still waiting a moment later (a bound, not a
        synchronisation: the offers before it returned at once)."""
        thread = threading.Thread(target=credit.offer, args=(b"", True), daemon=True)
        thread.start()
        thread.join(0.2)
        assert thread.is_alive()
        return thread

    wakes = [credit.offer(b"", True) for _ in range(RESPONSES_PER_TURN)]
    assert wakes[0] is True and not any(wakes[1:])  # the I/O thread is told once
    assert account.reserved == RESPONSES_PER_TURN * response_cost(0)
    waiting = offer_waits()  # the outbox holds a pass's worth: the handler waits
    queued = 0
    while True:  # the I/O thread takes the outbox and queues it; the client reads nothing
        messages, cost, _ = credit.take(None)
        account.unreserve(cost)
        queued += len(messages)
        credit.written(unsent_cost(5 * queued, queued))
        waiting.join(5)
        assert not waiting.is_alive()
        unsent = queued + 1
        while unsent % RESPONSES_PER_TURN and unsent_cost(5 * unsent, unsent) < (
            RESPONSE_HIGH_WATER
        ):
            assert credit.offer(b"", True) is not None
            unsent += 1
        if unsent_cost(5 * unsent, unsent) >= RESPONSE_HIGH_WATER:
            break
        waiting = offer_waits()
    waiting = offer_waits()  # at the high water, outbox taken or not: the handler waits
    assert unsent <= RESPONSE_HIGH_WATER // response_cost(0) + 1
    credit.end()  # what is still in the outbox is given back; the waiting offer returns
    waiting.join(5)
    assert not waiting.is_alive() and account.reserved == 0


def test_request_queue_of_a_streaming_handler_is_charged() -> None:
    """Request messages moved into a handler's queue stay charged to the connection until the
    handler reads them, or the call ends."""
    from minigrpc.blocking.server_call import RequestStream
    from minigrpc.driver.server_dispatch import CallEndedError
    from minigrpc.protocol.memory_budget import QUEUED_BYTES_OVERHEAD

    budget = MemoryBudget()
    account = budget.open_connection()
    stream = RequestStream(None, lambda: None, RuntimeError, account)
    for _ in range(3):
        stream.put(b"abc")
    assert budget.total == 3 * (3 + QUEUED_BYTES_OVERHEAD)
    assert next(stream) == b"abc"
    assert budget.total == 2 * (3 + QUEUED_BYTES_OVERHEAD)
    stream.terminate(StatusCode.CANCELLED)
    assert budget.total == 0
    with pytest.raises(CallEndedError):
        next(stream)


def test_spent_total_refuses_only_the_connections_that_hold_it() -> None:
    """With the server's total spent, the connections holding more than a fair share get
    REFUSED_STREAM for new streams, and a connection holding little is still served."""
    budget = MemoryBudget(1 * MIB, 1 * MIB)
    hog = Pair(budget)
    hog.flood(hog.open_stream(), b"m" * 100)
    assert budget.spent and hog.server.memory.over_budget
    modest = Pair(budget)
    unary = modest.client.get_next_available_stream_id()
    modest.client.send_headers(unary, HEADERS)
    modest.client.send_data(unary, wire.encode_message(b"q"), end_stream=True)
    assert any(isinstance(e, CallStarted) for e in modest.exchange())
    assert not modest.resets
    refused = hog.open_stream()
    assert (refused, 7) in [(r.stream_id, r.error_code) for r in hog.resets]
