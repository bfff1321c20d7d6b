"""The client's reconnect and retry loop without I/O: :class:`minigrpc.driver.call_steps.CallSteps`
over a channel's :class:`minigrpc.driver.subchannel.Subchannels`, as both transports step them.

Each test plays the transport: it asks for the next step, carries out the channel's work (dial,
retire) by hand, and reports what came of it, with a fake clock.  The connections are the real
sans-IO protocol state (:meth:`TransportOptions.new_protocol`) with the things a transport's
connection adds (``usable``, ``started``, ``close``, ``retire``); the calls are real
``ClientCall`` objects, ended the way the protocol ends them.
"""

from __future__ import annotations

import random
from typing import List, Optional

import h2.config
import h2.connection
import pytest

from minigrpc.driver.attempts import finished
from minigrpc.driver.call_steps import FINISH, SLEEP, START, WAIT, CallSteps
from minigrpc.driver.channel_core import TransportOptions
from minigrpc.driver.connectivity import ChannelConnectivity
from minigrpc.driver.service_config import LoadBalancingConfig
from minigrpc.driver.subchannel import CLOSE, DIAL, Subchannels, Work
from minigrpc.protocol.client_protocol import ClientCall
from minigrpc.protocol.codes import Code
from minigrpc.protocol.status import CallStatus
from minigrpc.protocol.targets import Target, parse_target_addresses

IDLE = ChannelConnectivity.IDLE
CONNECTING = ChannelConnectivity.CONNECTING
READY = ChannelConnectivity.READY
TRANSIENT_FAILURE = ChannelConnectivity.TRANSIENT_FAILURE
SHUTDOWN = ChannelConnectivity.SHUTDOWN

#: No jitter, so that the backoff's delays are exact.
OPTIONS = TransportOptions(
    initial_backoff=1.0, max_backoff=5.0, backoff_multiplier=2.0, backoff_jitter=0.0
)


class Connection:
    """A transport's connection as the subchannels see it, around the real protocol state."""

    def __init__(self) -> None:
        self.protocol = OPTIONS.new_protocol("test")
        self.usable = True
        self.started = False
        self.closed = False
        self.retired = False

    def settings_arrive(self) -> None:
        """The server's preface (its SETTINGS), from h2 as an independent server."""
        server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        server.initiate_connection()
        self.protocol.receive_data(server.data_to_send())

    def close(self) -> None:
        self.closed = True
        self.usable = False

    def retire(self) -> None:
        self.retired = True
        self.usable = False


class NoJitter(random.Random):
    """A random source whose backoffs are exact (the jitter's factor is always 1)."""

    def uniform(self, a: float, b: float) -> float:
        return 1.0


class Channel:
    """A channel's subchannels and the states they reported, in order, on a fake clock."""

    def __init__(self, target: str = "unix:/run/test.sock", policy: str = "pick_first") -> None:
        self.states: List[ChannelConnectivity] = []
        self.subchannels: Subchannels[Connection] = Subchannels(
            self.states.append, parse_target_addresses(target), LoadBalancingConfig(policy),
            initial_backoff=OPTIONS.initial_backoff, max_backoff=OPTIONS.max_backoff,
            rng=NoJitter(0))
        #: The fake clock's time.
        self.now = 100.0

    def steps(self, deadline: Optional[float] = None, wait_for_ready: bool = False) -> CallSteps:
        return CallSteps(
            self.subchannels, OPTIONS, deadline, wait_for_ready, clock=lambda: self.now
        )

    def work(self) -> List[Work]:
        return self.subchannels.take_work()

    def dials(self) -> List[Target]:
        """The addresses the channel's work says to dial now."""
        work = self.work()
        assert all(item.kind == DIAL for item in work), work
        return [item.address for item in work if item.address is not None]

    def connected(self) -> Connection:
        """Dial once, successfully, through a call's steps."""
        steps = self.steps()
        assert steps.next() is WAIT
        (address,) = self.dials()
        connection = Connection()
        assert self.subchannels.dialled(address, connection, self.now)
        return connection


def ended(status: CallStatus, retryable: bool = False) -> ClientCall:
    call = finished(ClientCall(), status)
    call.retryable = retryable
    return call


OK = CallStatus(Code.OK)
REFUSED = CallStatus(Code.UNAVAILABLE, "stream refused (REFUSED_STREAM)")
LOST = CallStatus(Code.UNAVAILABLE, "connection closed before the server said anything")
REFUSED_DIAL = 'dial unix /run/test.sock: connect: connection refused'


def test_the_first_call_waits_for_the_dial_and_then_starts_on_the_new_connection() -> None:
    channel = Channel()
    steps = channel.steps()
    assert steps.next() is WAIT
    (address,) = channel.dials()
    assert channel.subchannels.state is CONNECTING
    connection = Connection()
    assert channel.subchannels.dialled(address, connection, channel.now)
    assert steps.next() is START and steps.connection is connection
    assert channel.states == [CONNECTING, READY]


def test_a_call_while_another_waits_for_the_dial_starts_no_second_one() -> None:
    channel = Channel()
    first, second = channel.steps(), channel.steps()
    assert first.next() is WAIT
    version = channel.subchannels.version
    assert second.next() is WAIT
    (address,) = channel.dials()  # one dial for both
    connection = Connection()
    channel.subchannels.dialled(address, connection, channel.now)
    assert channel.subchannels.version > version  # what wakes the waiting calls
    assert second.next() is START and second.connection is connection
    assert first.next() is START and first.connection is connection


def test_a_failed_dial_fails_the_waiting_calls_unavailable_with_its_error() -> None:
    channel = Channel()
    steps = channel.steps()
    steps.next()
    (address,) = channel.dials()
    channel.subchannels.dial_failed(address, REFUSED_DIAL, channel.now)
    assert steps.next() is FINISH
    assert steps.status == CallStatus(Code.UNAVAILABLE, REFUSED_DIAL)
    assert channel.states == [CONNECTING, TRANSIENT_FAILURE]


def test_transient_failure_fails_calls_at_once_until_the_backoff_ends() -> None:
    """pick_first's failure is sticky (gRFC A62): calls fail without a dial of their own while
    the channel waits out its backoff (1 s), then dials again by itself."""
    channel = Channel()
    channel.steps().next()
    (address,) = channel.dials()
    channel.subchannels.dial_failed(address, REFUSED_DIAL, channel.now)
    later = channel.steps()
    assert later.next() is FINISH and channel.work() == []
    assert channel.subchannels.next_wakeup() == channel.now + 1.0
    channel.now += 1.0
    channel.subchannels.on_timer(channel.now)
    assert channel.dials() == [address]
    assert channel.subchannels.state is TRANSIENT_FAILURE  # until it connects
    channel.subchannels.dialled(address, Connection(), channel.now)
    assert channel.steps().next() is START
    assert channel.states == [CONNECTING, TRANSIENT_FAILURE, READY]


def test_waiting_for_ready_a_call_waits_through_the_failures() -> None:
    channel = Channel()
    steps = channel.steps(wait_for_ready=True)
    assert steps.next() is WAIT
    (address,) = channel.dials()
    channel.subchannels.dial_failed(address, REFUSED_DIAL, channel.now)
    assert steps.next() is WAIT
    channel.now += 1.0
    channel.subchannels.on_timer(channel.now)
    (address,) = channel.dials()
    connection = Connection()
    channel.subchannels.dialled(address, connection, channel.now)
    assert steps.next() is START and steps.connection is connection


def test_a_call_waiting_past_its_deadline_ends_deadline_exceeded() -> None:
    channel = Channel()
    steps = channel.steps(deadline=channel.now + 1.0, wait_for_ready=True)
    assert steps.next() is WAIT
    channel.now += 1.0
    assert steps.next() is FINISH and steps.status is not None
    assert steps.status.code_number == Code.DEADLINE_EXCEEDED


def test_a_call_never_processed_is_tried_again_once() -> None:
    channel = Channel()
    connection = channel.connected()
    steps = channel.steps()
    assert steps.next() is START
    assert not steps.attempt_ended(ended(REFUSED, retryable=True))
    assert steps.next() is START
    again = ended(REFUSED, retryable=True)
    assert steps.attempt_ended(again)  # the budget is one retry
    assert steps.attempt_ended(again)  # asked twice, the same answer
    assert steps.connection is connection


def test_an_attempt_is_judged_once_whoever_asks() -> None:
    channel = Channel()
    channel.connected()
    steps = channel.steps()
    steps.next()
    call = ended(REFUSED, retryable=True)
    assert not steps.attempt_ended(call)
    assert not steps.attempt_ended(call)  # the reader and the task both ask: one retry
    assert steps.next() is START
    assert steps.attempt_ended(ended(OK))


def test_a_running_attempt_is_the_outcome_until_it_ends() -> None:
    channel = Channel()
    channel.connected()
    steps = channel.steps()
    steps.next()
    assert steps.attempt_ended(ClientCall())


def test_a_committed_call_is_not_tried_again() -> None:
    channel = Channel()
    channel.connected()
    steps = channel.steps()
    steps.next()
    steps.commit()
    assert steps.attempt_ended(ended(REFUSED, retryable=True))


def test_waiting_for_ready_a_server_that_closed_before_saying_anything_is_tried_later() -> None:
    channel = Channel()
    channel.connected()
    steps = channel.steps(wait_for_ready=True)
    steps.next()
    assert not steps.attempt_ended(ended(LOST))
    assert steps.next() is SLEEP and steps.delay == 1.0
    assert steps.next() is START


def test_without_wait_for_ready_that_server_fails_the_call() -> None:
    channel = Channel()
    channel.connected()
    steps = channel.steps()
    steps.next()
    assert steps.attempt_ended(ended(LOST))


def test_a_draining_connection_is_replaced_but_left_to_its_calls() -> None:
    channel = Channel()
    old = channel.connected()
    old.protocol.calls[1] = ClientCall()  # a call still runs there
    old.usable = False  # GOAWAY: no new calls
    channel.subchannels.connection_lost(old, channel.now)
    assert channel.work() == []  # not closed: it closes itself after its last call
    steps = channel.steps()
    assert steps.next() is WAIT and len(channel.dials()) == 1
    assert channel.states == [CONNECTING, READY, IDLE, CONNECTING]


def test_a_lost_idle_connection_is_given_back_to_be_closed() -> None:
    channel = Channel()
    old = channel.connected()
    old.usable = False
    channel.subchannels.connection_lost(old, channel.now)
    (work,) = channel.work()
    assert work.kind == CLOSE and work.connection is old


def test_a_stale_connection_is_not_reused() -> None:
    """Used, idle again, and the server never sent its SETTINGS: the next call dials."""
    channel = Channel()
    connection = channel.connected()
    connection.started = True
    steps = channel.steps()
    assert steps.next() is WAIT
    kinds = [(work.kind, work.connection) for work in channel.work()]
    assert kinds == [(CLOSE, connection), (DIAL, None)]


def test_a_connection_whose_server_spoke_is_reused_while_idle() -> None:
    channel = Channel()
    connection = channel.connected()
    connection.started = True
    connection.settings_arrive()
    assert connection.protocol.settings_received
    steps = channel.steps()
    assert steps.next() is START and steps.connection is connection


def test_a_closed_channel_ends_calls_cancelled_and_refuses_a_late_connection() -> None:
    channel = Channel()
    dialling = channel.steps()
    dialling.next()
    (address,) = channel.dials()
    assert channel.subchannels.close() == []
    assert not channel.subchannels.dialled(address, Connection(), channel.now)
    assert dialling.next() is FINISH
    assert dialling.status == CallStatus(Code.CANCELLED, "Channel closed!")
    assert channel.states == [CONNECTING, SHUTDOWN]


def test_a_closed_channel_has_no_backoff_left_to_wake_for() -> None:
    """A transport that arms its timer after the close (a report that raced it) arms none: the
    timer would outlive the channel by a whole backoff."""
    channel = Channel()
    channel.steps().next()
    (address,) = channel.dials()
    channel.subchannels.dial_failed(address, REFUSED_DIAL, channel.now)
    assert channel.subchannels.next_wakeup() == channel.now + 1.0
    channel.subchannels.close()
    assert channel.subchannels.next_wakeup() is None
    assert channel.subchannels.timer_due() is None


def test_the_transport_rearms_its_timer_only_for_an_earlier_wakeup() -> None:
    """One timer per channel: armed for the first backoff's end, left alone for a later one,
    armed anew once it went off."""
    channel = Channel(LIST, "round_robin")
    channel.steps().next()
    first, second, _third = channel.dials()
    channel.subchannels.dial_failed(first, "refused", channel.now)
    assert channel.subchannels.timer_due() == channel.now + 1.0
    channel.now += 0.5
    channel.subchannels.dial_failed(second, "refused", channel.now)
    assert channel.subchannels.timer_due() is None  # the armed timer comes first
    channel.now += 0.5
    channel.subchannels.on_timer(channel.now)
    assert channel.subchannels.timer_due() == channel.now + 0.5


def test_shutdown_is_final_and_each_state_is_told_once() -> None:
    channel = Channel()
    connection = channel.connected()
    channel.subchannels.connection_lost(connection, channel.now)
    channel.subchannels.connection_lost(connection, channel.now)
    assert channel.subchannels.close() == []
    channel.subchannels.exit_idle(channel.now)
    assert channel.states == [CONNECTING, READY, IDLE, SHUTDOWN]


def test_a_call_cancelled_before_it_has_a_stream_ends_with_the_given_status() -> None:
    channel = Channel()
    steps = channel.steps()
    cancelled = CallStatus(Code.CANCELLED, "Locally cancelled by application!")
    steps.cancel(cancelled)
    assert steps.next() is FINISH and steps.status is cancelled


def test_try_to_connect_dials_an_idle_channel_and_only_that() -> None:
    channel = Channel()
    channel.subchannels.exit_idle(channel.now)
    (address,) = channel.dials()
    channel.subchannels.exit_idle(channel.now)
    assert channel.work() == []
    channel.subchannels.dialled(address, Connection(), channel.now)
    assert channel.states == [CONNECTING, READY]


@pytest.mark.parametrize(
    "accepted, expected", [(None, True), ({"gzip"}, True), ({"deflate"}, False)]
)
def test_compression_only_with_what_the_server_accepts(
    accepted: Optional[set], expected: bool
) -> None:
    """doc/compression.md: never an algorithm the server left out of grpc-accept-encoding."""
    channel = Channel()
    connection = channel.connected()
    connection.protocol.peer_accept_encodings = None if accepted is None else frozenset(accepted)
    assert channel.subchannels.peer_accepts("gzip") is expected


# -- retry policies (gRFC A6) through the steps ---------------------------------------------


def retrying(channel: Channel, deadline: Optional[float] = None, **kwargs: object) -> CallSteps:
    """Steps of a call under a retry policy: 4 attempts, 1 s then 2 s, UNAVAILABLE retried;
    no jitter, so that every wait is exact."""
    import random

    from minigrpc.driver.retries import CallRetries, RetryBuffer, RetryOptions
    from minigrpc.driver.service_config import RetryPolicy

    policy = RetryPolicy(4, 1.0, 10.0, 2.0, frozenset({Code.UNAVAILABLE}))
    no_jitter = random.Random(0)
    no_jitter.uniform = lambda low, high: 1.0  # type: ignore[method-assign]
    retries = CallRetries(policy, RetryOptions(), RetryBuffer(), rng=no_jitter)
    return CallSteps(channel.subchannels, OPTIONS, deadline, False, clock=lambda: channel.now,
                     retries=retries, **kwargs)  # type: ignore[arg-type]


UNAVAILABLE = CallStatus(Code.UNAVAILABLE, "try again")


def trailers_with(pushback: str) -> ClientCall:
    call = ended(UNAVAILABLE)
    call.trailers = [(b"grpc-retry-pushback-ms", pushback.encode())]
    return call


def test_a_retryable_status_sleeps_the_backoff_and_counts_the_attempts() -> None:
    channel = Channel()
    channel.connected()
    made: List[int] = []

    def new_call(request: object, unary_response: bool, previous: int) -> ClientCall:
        made.append(previous)
        return ClientCall()

    steps = retrying(channel, new_call=new_call)
    waits = []
    for _ in range(4):
        assert steps.next() is START
        steps.new_attempt()
        if steps.attempt_ended(ended(UNAVAILABLE)):
            break
        assert steps.next() is SLEEP
        waits.append(steps.delay)
        channel.now += steps.delay
    assert made == [0, 1, 2, 3]  # grpc-previous-rpc-attempts of each attempt
    assert waits == [1.0, 2.0, 4.0]  # and the fourth failure is the call's status


def test_a_status_outside_the_policy_and_ok_end_the_call() -> None:
    channel = Channel()
    channel.connected()
    steps = retrying(channel)
    steps.next()
    assert steps.attempt_ended(ended(CallStatus(Code.INTERNAL, "no")))
    other = retrying(channel)
    other.next()
    assert other.attempt_ended(ended(OK))


def test_pushback_sets_the_wait_and_a_negative_one_ends_the_call() -> None:
    channel = Channel()
    channel.connected()
    steps = retrying(channel)
    steps.next()
    assert not steps.attempt_ended(trailers_with("300"))
    assert steps.next() is SLEEP and steps.delay == pytest.approx(0.3)
    channel.now += 0.3
    assert steps.next() is START
    assert steps.attempt_ended(trailers_with("-1"))


def test_a_retry_due_after_the_deadline_waits_for_it_and_ends_deadline_exceeded() -> None:
    channel = Channel()
    channel.connected()
    steps = retrying(channel, deadline=channel.now + 0.5)
    steps.next()
    assert not steps.attempt_ended(ended(UNAVAILABLE))
    assert steps.next() is SLEEP and steps.delay == pytest.approx(0.5)
    channel.now += steps.delay
    assert steps.next() is FINISH and steps.status is not None
    assert steps.status.code_number == Code.DEADLINE_EXCEEDED


def test_response_headers_commit_the_attempt() -> None:
    channel = Channel()
    channel.connected()
    steps = retrying(channel)
    steps.next()
    call = ended(UNAVAILABLE)
    call.response_started = True
    assert steps.attempt_ended(call)


def test_a_request_streams_messages_are_replayed_until_the_call_is_committed() -> None:
    channel = Channel()
    channel.connected()
    steps = retrying(channel, unary_response=False)
    steps.next()
    first = steps.new_attempt()
    steps.message_sent(b"\0\0\0\0\x01a")
    steps.message_sent(b"\0\0\0\0\x01b")
    steps.request_closed()
    assert first.request.queued_messages == 0  # the transport sends on the attempt itself
    assert not steps.attempt_ended(ended(UNAVAILABLE))
    assert steps.next() is SLEEP
    channel.now += steps.delay
    assert steps.next() is START
    second = steps.new_attempt()
    assert second.request.queued_messages == 2 and second.request_complete is False
    assert second.request.state.name == "CLOSING"
    steps.commit()  # a response reached the application
    assert steps.retries.committed
    assert steps.attempt_ended(ended(UNAVAILABLE))


# -- several addresses and names --------------------------------------------------------------

LIST = "ipv4:10.0.0.1:1,10.0.0.2:2,10.0.0.3:3"


def test_pick_first_tries_the_addresses_in_order_and_keeps_the_first_that_connects() -> None:
    channel = Channel(LIST)
    steps = channel.steps()
    assert steps.next() is WAIT
    (first,) = channel.dials()
    assert first.address == ("10.0.0.1", 1)
    channel.subchannels.dial_failed(first, "refused", channel.now)
    (second,) = channel.dials()
    assert second.address == ("10.0.0.2", 2)
    connection = Connection()
    channel.subchannels.dialled(second, connection, channel.now)
    assert channel.work() == []  # the third is never dialled
    for _ in range(3):
        assert channel.steps().next() is START
    assert steps.next() is START and steps.connection is connection


def test_pick_first_over_a_list_names_every_address_failing() -> None:
    channel = Channel(LIST)
    steps = channel.steps()
    steps.next()
    for _ in range(3):
        (address,) = channel.dials()
        channel.subchannels.dial_failed(address, f"refused {address.display}", channel.now)
    assert steps.next() is FINISH and steps.status is not None
    assert steps.status.details == (
        "failed to connect to all addresses; last error: refused 10.0.0.3:3")


def test_round_robin_connects_every_address_and_spreads_the_calls() -> None:
    channel = Channel(LIST, "round_robin")
    assert channel.steps().next() is WAIT
    addresses = channel.dials()
    assert len(addresses) == 3
    connections = {address: Connection() for address in addresses}
    channel.subchannels.dial_failed(addresses[2], "refused", channel.now)
    for address in addresses[:2]:
        channel.subchannels.dialled(address, connections[address], channel.now)
    chosen = []
    for _ in range(6):
        steps = channel.steps()
        assert steps.next() is START
        chosen.append(steps.connection)
    assert chosen.count(connections[addresses[0]]) == 3
    assert chosen.count(connections[addresses[1]]) == 3
    channel.now += 1.0
    channel.subchannels.on_timer(channel.now)
    assert channel.dials() == [addresses[2]]  # the failed one, after its backoff


def test_a_name_is_resolved_before_its_addresses_are_dialled() -> None:
    channel = Channel("dns:///service.example:50051")
    steps = channel.steps()
    assert steps.next() is WAIT
    assert [work.kind for work in channel.work()] == ["resolve"]
    assert channel.subchannels.state is CONNECTING
    channel.subchannels.resolved([(2, "10.0.0.7"), (10, "fd00::7")], channel.now)
    (address,) = channel.dials()
    assert address.address == ("10.0.0.7", 50051)
    channel.subchannels.dialled(address, Connection(), channel.now)
    assert steps.next() is START


def test_a_name_that_does_not_resolve_fails_the_calls_with_the_lookups_error() -> None:
    channel = Channel("dns:///nowhere.invalid:1")
    steps = channel.steps()
    waiting = channel.steps(wait_for_ready=True)
    steps.next()
    waiting.next()
    channel.work()
    channel.subchannels.resolve_failed("lookup nowhere.invalid: no such host", channel.now)
    assert steps.next() is FINISH and steps.status is not None
    assert steps.status.details == "lookup nowhere.invalid: no such host"
    assert waiting.next() is WAIT
    assert channel.subchannels.state is TRANSIENT_FAILURE
    channel.now += 1.0
    channel.subchannels.on_timer(channel.now)
    assert [work.kind for work in channel.work()] == ["resolve"]


def test_a_lost_connection_has_the_name_resolved_again_at_most_every_30_seconds() -> None:
    channel = Channel("dns:///service.example:50051")
    channel.steps().next()
    channel.work()
    channel.subchannels.resolved([(2, "10.0.0.7")], channel.now)
    (address,) = channel.dials()
    connection = Connection()
    channel.subchannels.dialled(address, connection, channel.now)
    channel.now += 10.0
    connection.usable = False
    channel.subchannels.connection_lost(connection, channel.now)
    assert [work.kind for work in channel.work()] == [CLOSE]  # too soon to look again
    assert channel.subchannels.next_wakeup() == 130.0
    channel.now = 130.0
    channel.subchannels.on_timer(channel.now)
    assert [work.kind for work in channel.work()] == ["resolve"]
    channel.subchannels.resolved([(2, "10.0.0.8")], channel.now)
    assert channel.steps().next() is WAIT
    (address,) = channel.dials()
    assert address.address == ("10.0.0.8", 50051)
