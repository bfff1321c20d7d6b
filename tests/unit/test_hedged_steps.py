"""A hedged call's attempts without I/O: :class:`minigrpc.driver.hedged_steps.HedgedSteps` over a
channel's real subchannels, on a fake clock, as both transports step it (gRFC A6, "Hedging
Policy").

Each test plays the transport: it starts the attempts the steps list (each through its own
:class:`~minigrpc.driver.call_steps.CallSteps`), reports their Response-Headers or their end,
sends request messages where the steps say, and checks what is to be cancelled.  The calls are
real ``ClientCall`` objects, ended the way the protocol ends them.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from minigrpc.driver.attempts import finished
from minigrpc.driver.call_steps import START
from minigrpc.driver.hedged_steps import HedgeAttempt, HedgedSteps
from minigrpc.driver.hedging import CallHedging
from minigrpc.driver.retries import PUSHBACK_HEADER, RetryBuffer, RetryOptions
from minigrpc.driver.service_config import HedgingPolicy
from minigrpc.protocol.client_protocol import ClientCall
from minigrpc.protocol.codes import Code
from minigrpc.protocol.status import CallStatus
from minigrpc.protocol.wire import Framed, frame_message
from tests.unit.test_call_steps import OPTIONS, Channel, Connection

POLICY = HedgingPolicy(max_attempts=3, hedging_delay=1.0,
                       non_fatal_status_codes=frozenset({Code.UNAVAILABLE}))
REQUEST = frame_message(b"request", False)
DEFAULTS = RetryOptions()


class Hedge:
    """A hedged call on a channel with one ready connection, on the channel's fake clock."""

    def __init__(self, policy: HedgingPolicy = POLICY, request: Optional[Framed] = REQUEST,
                 deadline: Optional[float] = None, options: RetryOptions = DEFAULTS) -> None:
        self.channel = channel = Channel()
        self.connection: Connection = channel.connected()
        #: Each call made: (attempt number, its grpc-previous-rpc-attempts).
        self.made: List[Tuple[ClientCall, int]] = []
        self.steps = HedgedSteps(
            CallHedging(policy, options, RetryBuffer(options.channel_buffer)),
            channel.subchannels, OPTIONS, deadline, False, self._new_call, request, True,
            options, clock=lambda: channel.now)

    def _new_call(self, request: Optional[Framed], unary_response: bool,
                  previous: int) -> ClientCall:
        call = ClientCall(request=request, unary_response=unary_response)
        self.made.append((call, previous))
        return call

    def run(self, attempts: List[HedgeAttempt]) -> List[HedgeAttempt]:
        """Start each attempt on the connection its steps pick."""
        for attempt in attempts:
            assert attempt.steps.next() is START
            assert attempt.steps.connection is self.connection
            call = attempt.steps.new_attempt()
            assert attempt.call is call and attempt.connection is self.connection
        return attempts

    def later(self, seconds: float) -> List[HedgeAttempt]:
        """Let ``seconds`` pass and start the hedges then due."""
        self.channel.now += seconds
        return self.run(self.steps.due())


def end(attempt: HedgeAttempt, code: int, retryable: bool = False,
        trailers: Any = None) -> ClientCall:
    call = attempt.call
    assert call is not None
    finished(call, CallStatus(code, "ended"))
    call.retryable = retryable
    call.trailers = trailers
    return call


def test_attempts_go_out_every_hedging_delay_up_to_max_attempts() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    assert steps.wake_at == hedge.channel.now + 1.0
    assert hedge.later(0.5) == []
    (second,) = hedge.later(0.5)
    (third,) = hedge.later(1.0)
    assert [a.number for a in (first, second, third)] == [0, 1, 2]
    assert [previous for _, previous in hedge.made] == [0, 1, 2]  # grpc-previous-rpc-attempts
    assert steps.wake_at is None  # maxAttempts are out
    assert hedge.later(5.0) == []


def test_the_first_response_headers_win_and_the_others_are_cancelled() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (second,) = hedge.later(1.0)
    assert not steps.settled
    assert steps.headers_arrived(second) == [first]
    assert steps.settled and steps.outcome == (hedge.connection, second.call)
    assert steps.wake_at is None and hedge.later(1.0) == []
    # The loser's end, once cancelled, changes nothing.
    assert steps.attempt_ended(first, end(first, Code.CANCELLED)) == (False, [])
    assert steps.outcome[1] is second.call


def test_a_non_fatal_status_sends_the_next_hedge_at_once() -> None:
    hedge = Hedge(HedgingPolicy(3, 10.0, frozenset({Code.UNAVAILABLE})))
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    assert steps.attempt_ended(first, end(first, Code.UNAVAILABLE)) == (False, [])
    assert steps.wake_at == hedge.channel.now and not steps.settled
    (second,) = hedge.later(0.0)
    assert second.number == 1


def test_pushback_delays_the_next_hedge() -> None:
    hedge = Hedge(HedgingPolicy(3, 10.0, frozenset({Code.UNAVAILABLE})))
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    steps.attempt_ended(first, end(first, Code.UNAVAILABLE,
                                   trailers=[(PUSHBACK_HEADER.encode(), b"2500")]))
    assert steps.wake_at == hedge.channel.now + 2.5


def test_a_fatal_status_ends_the_call_and_cancels_the_others() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (second,) = hedge.later(1.0)
    call = end(second, Code.INTERNAL)
    assert steps.attempt_ended(second, call) == (False, [first])
    assert steps.settled and steps.over and steps.outcome == (hedge.connection, call)


def test_the_last_non_fatal_status_ends_the_call() -> None:
    hedge = Hedge(HedgingPolicy(2, 1.0, frozenset({Code.UNAVAILABLE})))
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (second,) = hedge.later(1.0)
    assert steps.attempt_ended(first, end(first, Code.UNAVAILABLE)) == (False, [])
    assert not steps.settled
    last = end(second, Code.UNAVAILABLE)
    assert steps.attempt_ended(second, last) == (False, [])
    assert steps.settled and steps.outcome[1] is last


def test_an_attempt_the_server_refused_is_retried_transparently() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    refused = end(first, Code.UNAVAILABLE, retryable=True)
    assert steps.attempt_ended(first, refused) == (True, [])
    hedge.run([first])  # the transport runs the same attempt's steps again
    assert first.call is not refused and [p for _, p in hedge.made] == [0, 0]


def test_request_messages_reach_every_attempt_once() -> None:
    hedge = Hedge(request=None)
    steps = hedge.steps
    one, two = frame_message(b"one", False), frame_message(b"two", False)
    (first,) = hedge.run(steps.start())
    targets, cancel = steps.message_sent(one)
    assert targets == [(hedge.connection, first.call)] and cancel == []
    (second,) = hedge.later(1.0)
    assert second.call is not None
    assert second.call.request.queued_messages == 1  # made after "one": it replays it
    targets, _ = steps.message_sent(two)
    assert targets == [(hedge.connection, first.call), (hedge.connection, second.call)]
    assert second.call.request.queued_messages == 1  # "two" is the transport's to send
    assert steps.request_closed() == targets
    (third,) = hedge.later(1.0)  # made after both: it replays both and the end
    assert third.call is not None and third.call.request.queued_messages == 2
    assert third.call.request.state.name == "CLOSING"


def test_a_request_outgrowing_the_buffer_commits_the_call_to_its_oldest_attempt() -> None:
    options = RetryOptions(per_call_buffer=10)
    hedge = Hedge(request=None, options=options)
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (second,) = hedge.later(1.0)
    targets, cancel = steps.message_sent(frame_message(b"x" * 20, False))
    assert cancel == [second]
    assert targets == [(hedge.connection, first.call)]
    assert hedge.later(1.0) == []  # committed: no more hedges
    assert not steps.settled  # until its Response-Headers or its end
    assert steps.headers_arrived(first) == []
    assert steps.outcome[1] is first.call


def test_a_hedge_due_past_the_deadline_never_starts() -> None:
    channel_now = Channel().now
    hedge = Hedge(HedgingPolicy(3, 10.0, frozenset({Code.UNAVAILABLE})),
                  deadline=channel_now + 2.0)
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    assert steps.wake_at == hedge.channel.now + 2.0  # the deadline comes first
    steps.attempt_ended(first, end(first, Code.UNAVAILABLE, trailers=[
        (PUSHBACK_HEADER.encode(), b"5000")]))
    assert not steps.settled
    assert hedge.later(2.0) == []
    assert steps.settled and steps.over
    status = steps.outcome[1].status  # type: ignore[union-attr]
    assert status is not None and status.code_number == Code.DEADLINE_EXCEEDED


def test_a_cancel_cancels_every_attempt_and_ends_the_call() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (second,) = hedge.later(1.0)
    status = CallStatus(Code.CANCELLED, "cancelled")
    assert steps.cancel(status) == [first, second]
    assert steps.settled and steps.outcome[0] is None
    assert steps.outcome[1] is not None and steps.outcome[1].status == status
    assert hedge.later(5.0) == []


def test_after_the_headers_a_cancel_cancels_the_winner() -> None:
    hedge = Hedge()
    steps = hedge.steps
    (first,) = hedge.run(steps.start())
    (_second,) = hedge.later(1.0)
    steps.headers_arrived(first)
    assert steps.cancel(CallStatus(Code.CANCELLED, "cancelled")) == [first]
