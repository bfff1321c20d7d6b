"""The client's reconnect and retry loop without I/O: :class:`minigrpc.driver.call_steps.CallSteps`
over a :class:`minigrpc.driver.subchannel.Subchannel`, as both transports step it.

Each test plays the transport: it asks for the next step and reports what came of it, with a
fake clock.  The connections are the real sans-IO protocol state
(:meth:`TransportOptions.new_protocol`) with the three things a transport's connection adds
(``usable``, ``started``, ``close``); the calls are real ``ClientCall`` objects, ended the way
the protocol ends them.
"""

from __future__ import annotations

from typing import List, Optional

import h2.config
import h2.connection
import pytest

from minigrpc.driver.attempts import finished
from minigrpc.driver.call_steps import DIAL, DONE, FINISH, SLEEP, START, WAIT, CallSteps
from minigrpc.driver.channel_core import TransportOptions
from minigrpc.driver.connectivity import ChannelConnectivity
from minigrpc.driver.subchannel import Subchannel
from minigrpc.protocol.client_protocol import ClientCall
from minigrpc.protocol.codes import Code
from minigrpc.protocol.status import CallStatus

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
    """A transport's connection as the subchannel sees it, around the real protocol state."""

    def __init__(self) -> None:
        self.protocol = OPTIONS.new_protocol("test")
        self.usable = True
        self.started = False
        self.closed = False

    def settings_arrive(self) -> None:
        """The server's preface (its SETTINGS), from h2 as an independent server."""
        server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        server.initiate_connection()
        self.protocol.receive_data(server.data_to_send())

    def close(self) -> None:
        self.closed = True
        self.usable = False


class Channel:
    """A subchannel and the states it reported, in order."""

    def __init__(self) -> None:
        self.states: List[ChannelConnectivity] = []
        self.subchannel: Subchannel[Connection] = Subchannel(self.states.append)
        #: The fake clock's time.
        self.now = 100.0

    def steps(
        self, deadline: Optional[float] = None, wait_for_ready: bool = False, **kwargs: bool
    ) -> CallSteps:
        return CallSteps(
            self.subchannel, OPTIONS, deadline, wait_for_ready, clock=lambda: self.now, **kwargs
        )

    def connected(self) -> Connection:
        """Dial once, successfully, through a call's steps."""
        steps = self.steps()
        assert steps.next() is DIAL
        connection = Connection()
        assert steps.dialled(connection)
        return connection


def ended(status: CallStatus, retryable: bool = False) -> ClientCall:
    call = finished(ClientCall(), status)
    call.retryable = retryable
    return call


OK = CallStatus(Code.OK)
REFUSED = CallStatus(Code.UNAVAILABLE, "stream refused (REFUSED_STREAM)")
LOST = CallStatus(Code.UNAVAILABLE, "connection closed before the server said anything")


def test_the_first_call_dials_and_then_starts_on_the_new_connection() -> None:
    channel = Channel()
    steps = channel.steps()
    assert steps.next() is DIAL
    assert channel.subchannel.state is CONNECTING
    connection = Connection()
    assert steps.dialled(connection)
    assert steps.next() is START and steps.connection is connection
    assert channel.states == [CONNECTING, READY]


def test_a_call_while_another_dials_waits_for_that_dial() -> None:
    channel = Channel()
    first, second = channel.steps(), channel.steps()
    assert first.next() is DIAL
    assert second.next() is WAIT
    connection = Connection()
    first.dialled(connection)
    assert second.next() is START and second.connection is connection
    assert channel.states == [CONNECTING, READY]


def test_a_waiting_call_dials_itself_after_the_other_dial_failed() -> None:
    channel = Channel()
    first, second = channel.steps(), channel.steps()
    assert (first.next(), second.next()) == (DIAL, WAIT)
    first.dial_failed("connection refused")
    assert second.next() is DIAL
    assert channel.states == [CONNECTING, TRANSIENT_FAILURE, CONNECTING]


def test_a_failed_dial_fails_the_call_unavailable_with_its_error() -> None:
    channel = Channel()
    steps = channel.steps()
    steps.next()
    steps.dial_failed('dial unix /x: connect: connection refused')
    assert steps.next() is FINISH
    assert steps.status == CallStatus(Code.UNAVAILABLE, 'dial unix /x: connect: connection refused')
    assert channel.subchannel.state is TRANSIENT_FAILURE


def test_waiting_for_ready_backs_off_exponentially_up_to_the_cap_and_the_deadline() -> None:
    channel = Channel()
    steps = channel.steps(deadline=channel.now + 10.0, wait_for_ready=True)
    delays = []
    while True:
        step = steps.next()
        if step is DIAL:
            steps.dial_failed("connection refused")
        elif step is SLEEP:
            delays.append(steps.delay)
            channel.now += steps.delay
        else:
            break
    # 1, 2, 4, then capped at 5 but cut at the deadline (3 s left).
    assert delays == [1.0, 2.0, 4.0, 3.0]
    assert step is FINISH and steps.status is not None
    assert steps.status.code_number == Code.DEADLINE_EXCEEDED


def test_a_dial_cut_by_the_deadline_is_deadline_exceeded_and_the_channel_idle() -> None:
    channel = Channel()
    steps = channel.steps(deadline=channel.now + 1.0)
    steps.next()
    steps.dial_timed_out()
    assert steps.next() is FINISH and steps.status is not None
    assert steps.status.code_number == Code.DEADLINE_EXCEEDED
    assert channel.subchannel.state is IDLE and not channel.subchannel.dialling


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
    running = ClientCall()
    old.protocol.calls[1] = running  # a call still runs there
    old.usable = False  # GOAWAY: no new calls
    channel.subchannel.connection_unusable(old)
    steps = channel.steps()
    assert steps.next() is DIAL and steps.retired is None
    assert channel.states == [CONNECTING, READY, IDLE, CONNECTING]


def test_a_replaced_idle_connection_is_given_back_to_be_closed() -> None:
    channel = Channel()
    old = channel.connected()
    old.usable = False
    steps = channel.steps()
    assert steps.next() is DIAL and steps.retired is old


def test_a_stale_connection_is_not_reused() -> None:
    """Used, idle again, and the server never sent its SETTINGS: the next call dials."""
    channel = Channel()
    connection = channel.connected()
    connection.started = True
    steps = channel.steps()
    assert steps.next() is DIAL and steps.retired is connection


def test_a_connection_whose_server_spoke_is_reused_while_idle() -> None:
    channel = Channel()
    connection = channel.connected()
    connection.started = True
    connection.settings_arrive()
    assert connection.protocol.settings_received
    steps = channel.steps()
    assert steps.next() is START and steps.connection is connection


def test_only_the_channels_own_connection_makes_it_idle() -> None:
    channel = Channel()
    old = channel.connected()
    old.usable = False
    replacing = channel.steps()
    replacing.next()
    replacing.dialled(Connection())
    channel.subchannel.connection_unusable(old)  # the old one's last call ended
    assert channel.subchannel.state is READY


def test_a_closed_channel_ends_calls_cancelled_and_refuses_a_late_connection() -> None:
    channel = Channel()
    dialling = channel.steps()
    dialling.next()
    assert channel.subchannel.close() is None
    assert not dialling.dialled(Connection())  # the transport closes it
    assert dialling.next() is FINISH
    assert dialling.status == CallStatus(Code.CANCELLED, "Channel closed!")
    assert channel.states == [CONNECTING, SHUTDOWN]


def test_shutdown_is_final_and_each_state_is_told_once() -> None:
    channel = Channel()
    connection = channel.connected()
    channel.subchannel.connection_unusable(connection)
    channel.subchannel.connection_unusable(connection)
    assert channel.subchannel.close() is connection
    channel.subchannel.dial_failed()
    assert channel.states == [CONNECTING, READY, IDLE, SHUTDOWN]


def test_a_call_cancelled_before_it_has_a_stream_ends_with_the_given_status() -> None:
    channel = Channel()
    steps = channel.steps()
    cancelled = CallStatus(Code.CANCELLED, "Locally cancelled by application!")
    steps.cancel(cancelled)
    assert steps.next() is FINISH and steps.status is cancelled


def test_connecting_until_ready_ends_when_connected() -> None:
    channel = Channel()
    steps = channel.steps(wait_for_ready=True, connect_only=True)
    assert steps.next() is DIAL
    steps.dial_failed("connection refused")
    assert steps.next() is SLEEP
    assert steps.next() is DIAL
    connection = Connection()
    steps.dialled(connection)
    assert steps.next() is DONE and steps.connection is connection


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
    assert channel.subchannel.peer_accepts("gzip") is expected


def test_the_replaced_connection_no_longer_moves_the_channels_state() -> None:
    """Its last call ends while the new connection is dialled: the channel stays CONNECTING."""
    channel = Channel()
    old = channel.connected()
    old.protocol.calls[1] = ClientCall()
    old.usable = False
    channel.subchannel.connection_unusable(old)
    steps = channel.steps()
    assert steps.next() is DIAL
    channel.subchannel.connection_unusable(old)
    assert channel.subchannel.state is CONNECTING
    assert channel.states == [CONNECTING, READY, IDLE, CONNECTING]


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
    return CallSteps(channel.subchannel, OPTIONS, deadline, False, clock=lambda: channel.now,
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
