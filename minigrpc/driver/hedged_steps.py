"""One hedged call's attempts as steps, written once for the blocking and the asyncio transport
(gRFC A6, "Hedging Policy"; :mod:`minigrpc.driver.hedging` decides, this module keeps the
attempts).

A hedged call has several attempts in flight at once, each of which finds its own connection:
attempt n is a :class:`~minigrpc.driver.call_steps.CallSteps` of its own (without a retry
policy), so that it is picked, waits for the channel, waits for ready and is retried
transparently (RST_STREAM(REFUSED_STREAM), a stream above a GOAWAY's last-stream-id) exactly as
a call that is not hedged: the transparent retry replaces the attempt, with its number, and
:class:`~minigrpc.driver.hedging.CallHedging` only hears of the replacement's end (so a refusal
is retried once per attempt, where a call that is not hedged has one for the call).  Attempts
may thereby land on different connections, as the load-balancing policy picks.  What the
transport carries out:

================================  ==============================================================
the transport                     then tells (and carries out what the answer says)
================================  ==============================================================
starts the call                   :meth:`HedgedSteps.start`: the attempts to run (attempt 0)
runs an attempt's steps           (:mod:`~minigrpc.driver.call_steps`: the attempt's
                                  :attr:`HedgeAttempt.steps`), then waits for its
                                  Response-Headers or its end
Response-Headers arrived          :meth:`HedgedSteps.headers_arrived`: the attempts to cancel
the attempt ended                 :meth:`HedgedSteps.attempt_ended`: run it again (a transparent
                                  retry), and the attempts to cancel
:attr:`HedgedSteps.wake_at` came  :meth:`HedgedSteps.due`: the hedges to start now
a request message to send         :meth:`HedgedSteps.message_sent`: where to send it, and the
                                  attempts to cancel (the buffer overflowed)
the request ended                 :meth:`HedgedSteps.request_closed`: where to end it
the application cancelled         :meth:`HedgedSteps.cancel`: the attempts to cancel
================================  ==============================================================

The call is *settled* (:attr:`HedgedSteps.settled`) once its outcome is known: an attempt whose
Response-Headers arrived won (the others are cancelled at once, and the call goes on as an
ordinary call on that attempt), or the call ended (a fatal status, the last attempt's status, the
deadline, a cancel).  :attr:`HedgedSteps.outcome` is then the attempt the call is, as the
transport's ``(connection, call)`` pair: initial metadata, messages, trailing metadata and
status come from it alone.

Request messages go to every attempt with a stream, and are kept for the attempts still to come
(each new attempt replays them, :meth:`ClientCall.replay`), within the retry buffer; past it the
call is committed to its oldest attempt in flight and the others are cancelled.  Every method
that reads or changes the attempts runs under ``guard`` (the blocking transport's lock; nothing
on the event loop), which is also what makes a new attempt's replay and a message's fan-out
exclusive: a message reaches each attempt exactly once.
"""

import contextlib
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, List, Optional, Tuple

from ..protocol.client_protocol import ClientCall
from ..protocol.codes import Code
from ..protocol.status import CallStatus
from ..protocol.wire import Framed, framed_size
from .attempts import deadline_status, finished
from .call_steps import CallSteps, NewCall
from .hedging import CallHedging
from .retries import RetryOptions, pushback

if TYPE_CHECKING:  # pragma: no cover
    from .channel_core import TransportOptions
    from .subchannel import Subchannels

__all__ = ["HedgeAttempt", "HedgedSteps", "Target"]

#: Where a request message or the request's end goes: an attempt's connection and call.
Target = Tuple[Any, ClientCall]


class HedgeAttempt:
    """One attempt of a hedged call: its steps, and the stream it has (once it has one)."""

    __slots__ = ("call", "connection", "handle", "number", "steps")

    def __init__(self, number: int, steps: CallSteps) -> None:
        self.number = number
        #: How it finds its connection (and is retried transparently).
        self.steps = steps
        #: Its current connection and protocol call, once its steps started it.
        self.connection: Any = None
        self.call: Optional[ClientCall] = None
        #: What the transport keeps to carry it out (a thread's handle, a task).
        self.handle: Any = None

    @property
    def live(self) -> bool:
        """It has a call that has not ended."""
        call = self.call
        return call is not None and not call.done

    def __repr__(self) -> str:
        return f"<HedgeAttempt {self.number} {self.call!r}>"


class HedgedSteps:
    """One hedged call's attempts (module docstring): ``hedging`` decides, ``new_call`` makes a
    protocol call of attempt n (``new_call(request, unary_response, n)``), ``request`` is a
    unary request's message (None when the request streams)."""

    def __init__(
        self,
        hedging: CallHedging,
        subchannels: "Subchannels[Any]",
        options: "TransportOptions",
        deadline: Optional[float],
        wait_for_ready: bool,
        new_call: NewCall,
        request: Optional[Framed],
        unary_response: bool,
        retry_options: RetryOptions,
        clock: Callable[[], float] = time.monotonic,
        guard: Optional[ContextManager[Any]] = None,
    ) -> None:
        self.hedging = hedging
        self.deadline = deadline
        self.clock = clock
        self.attempts: List[HedgeAttempt] = []
        self._subchannels = subchannels
        self._options = options
        self._wait_for_ready = wait_for_ready
        self._new_call = new_call
        self._request = request
        self._unary_response = unary_response
        self._retry_options = retry_options
        self._guard: ContextManager[Any] = guard if guard is not None else contextlib.nullcontext()
        #: The request messages kept for attempts still to come, and whether the request ended.
        self._messages: List[Framed] = []
        self._closed = False
        #: The call's outcome is known (:attr:`outcome`).
        self.settled = False
        #: The attempt the call is, or a call that ended without one (cancel, deadline).
        self.outcome: Tuple[Any, Optional[ClientCall]] = (None, None)
        #: The winner's Response-Headers settled the call: its end is still to be counted.
        self._winner_running = False

    # -- attempts ---------------------------------------------------------------------------------

    def _attempt(self, number: int) -> HedgeAttempt:
        holder: List[HedgeAttempt] = []

        def new_call(request: Optional[Framed], unary_response: bool, _: int) -> ClientCall:
            return self._made(holder[0], request, unary_response)

        steps = CallSteps(
            self._subchannels,
            self._options,
            self.deadline,
            self._wait_for_ready,
            clock=self.clock,
            new_call=new_call,
            request=self._request,
            unary_response=self._unary_response,
            retry_options=self._retry_options,
        )
        attempt = HedgeAttempt(number, steps)
        holder.append(attempt)
        self.attempts.append(attempt)
        return attempt

    def _made(self, attempt: HedgeAttempt, request: Optional[Framed],
              unary_response: bool) -> ClientCall:
        """The attempt's steps make its (next) call: with ``grpc-previous-rpc-attempts`` and
        the request messages so far, on the connection its steps picked."""
        with self._guard:
            call = self._new_call(request, unary_response, attempt.number)
            if self._messages or self._closed:
                call.replay(self._messages, self._closed)
            if self.hedging.committed and self.hedging.winner == attempt.number:
                # The winner has them and nobody else will: let them go, and the winner is
                # never replayed again.
                self._messages = []
                attempt.steps.commit()
            attempt.connection = attempt.steps.connection
            attempt.call = call
            return call

    def start(self) -> List[HedgeAttempt]:
        """The call starts: attempt 0 goes out at once."""
        hedging = self.hedging
        if self.settled:  # cancelled before it started
            return []
        first = self._attempt(hedging.start(self.clock()))
        if self._request is not None:
            # A unary request is in every attempt's call; it counts against the buffer all the
            # same, so that a request too large to buffer commits the call to attempt 0
            # (gRFC A6, "Memory Management").
            hedging.on_message_sent(framed_size(self._request))
        return [first]

    @property
    def wake_at(self) -> Optional[float]:
        """When to call :meth:`due` (the next hedge, or the deadline); None: nothing to wake for."""
        if self.settled:
            return None
        due = self.hedging.next_hedge_at
        deadline = self.deadline
        if deadline is not None and (due is None or deadline < due):
            return deadline
        return due

    def due(self) -> List[HedgeAttempt]:
        """The hedges to start now.  A hedge due past the deadline never starts; a call that then
        has no attempt in flight ends DEADLINE_EXCEEDED."""
        if self.settled:
            return []
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            if not self.hedging.active:
                self._settle(None, finished(self.placeholder(), deadline_status()))
            return []
        return [self._attempt(number) for number in self.hedging.hedges_due(now)]

    def placeholder(self) -> ClientCall:
        """A call of this call that never starts: what stands for it while it is not settled,
        and what it ends with when it ends without an attempt."""
        return self._new_call(self._request, self._unary_response, 0)

    def _settle(self, connection: Any, call: ClientCall) -> None:
        if not self.settled:
            self.settled = True
            self.outcome = (connection, call)
            self.hedging.finish()
            self._messages = []

    def _winner(self) -> Optional[HedgeAttempt]:
        number = self.hedging.winner
        for attempt in self.attempts:
            if attempt.number == number:
                return attempt
        return None

    def _over(self, attempt: HedgeAttempt) -> bool:
        return attempt.number not in self.hedging.active

    def _by_number(self, numbers: Tuple[int, ...]) -> List[HedgeAttempt]:
        return [attempt for attempt in self.attempts if attempt.number in numbers]

    # -- what came of an attempt ------------------------------------------------------------------

    def headers_arrived(self, attempt: HedgeAttempt) -> List[HedgeAttempt]:
        """``attempt``'s Response-Headers arrived: it wins unless the call is settled or
        committed to another; the attempts to cancel."""
        hedging = self.hedging
        if self.settled:
            return []
        if hedging.committed and hedging.winner != attempt.number:
            return [attempt]  # overtaken (the buffer committed the call to another)
        cancel = self._by_number(hedging.on_response_headers(attempt.number))
        assert attempt.call is not None
        self._settle(attempt.connection, attempt.call)
        self._winner_running = True
        attempt.steps.commit()  # after Response-Headers, never replayed
        return cancel

    def attempt_ended(
        self, attempt: HedgeAttempt, call: ClientCall
    ) -> Tuple[bool, List[HedgeAttempt]]:
        """``attempt``'s call ended: whether to run it again (its steps retry it transparently,
        or it waits for ready), and the attempts to cancel."""
        if not attempt.steps.attempt_ended(call):
            return True, []
        if self.settled:
            return False, []
        status = call.status
        assert status is not None
        code = status.code_number
        pushed_back = pushback(call.trailers or ()) if code != Code.OK else None
        decision = self.hedging.attempt_finished(attempt.number, code, self.clock(), pushed_back)
        if decision.finish:
            self._settle(attempt.connection, call)
            return False, self._by_number(decision.cancel)
        if self.deadline is not None and self.clock() >= self.deadline and not self.hedging.active:
            self._settle(attempt.connection, call)
        return False, []

    # -- the request stream -----------------------------------------------------------------------

    def _targets(self) -> List[Target]:
        """Where a request message goes now: every attempt with a call that has not ended (the
        winner only, once committed)."""
        hedging = self.hedging
        targets = []
        for attempt in self.attempts:
            if hedging.committed and attempt.number != hedging.winner:
                continue
            call = attempt.call
            if call is not None and not call.done:
                targets.append((attempt.connection, call))
        return targets

    def message_sent(self, framed: Framed) -> Tuple[List[Target], List[HedgeAttempt]]:
        """A request message is to be sent: where to, and the attempts to cancel (the buffer
        overflowed: the call is committed to its oldest attempt in flight)."""
        hedging = self.hedging
        keep, cancel = hedging.on_message_sent(framed_size(framed))
        if hedging.committed:
            # Only the winner needs the message: it is sent to it, or kept for it while it has
            # no call yet; a winner that misses a kept message is never replayed again.
            winner = self._winner()
            keep = winner is not None and winner.call is None
            if winner is not None and not keep:
                self._messages = []
                winner.steps.commit()
        if keep:
            self._messages.append(framed)
        return self._targets(), self._by_number(cancel)

    def request_closed(self) -> List[Target]:
        """The request ended: the attempts to end it on (those to come replay the end)."""
        self._closed = True
        return self._targets()

    # -- the end ----------------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        """The call has ended (settled on an attempt that ended, or on none)."""
        call = self.outcome[1]
        return self.settled and call is not None and call.done

    def call_ended(self, code: int) -> None:
        """The call that Response-Headers settled ended with ``code``: throttling counts it as
        the winner's end (an attempt that settled the call by ending was counted then)."""
        if self._winner_running:
            self._winner_running = False
            winner = self.hedging.winner
            if winner is not None:
                self.hedging.attempt_finished(winner, code, self.clock())

    def cancel(self, status: CallStatus) -> List[HedgeAttempt]:
        """The application cancelled the call (or its request failed) with ``status``: the
        attempts to cancel (the winner's, once settled)."""
        if self.settled:
            call = self.outcome[1]
            return [a for a in self.attempts if a.call is call and a.live]
        live = [attempt for attempt in self.attempts if not self._over(attempt) or attempt.live]
        self._settle(None, finished(self.placeholder(), status))
        return live
