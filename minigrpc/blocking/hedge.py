"""A hedged call carried out with threads (gRFC A6, "Hedging Policy"): what
:class:`~minigrpc.driver.hedged_steps.HedgedSteps` decides, done with the blocking transport.

The blocking client has no reader thread: a connection is read by a thread that waits on it.
A hedged call's attempts may run on several connections at once, each waiting for its
Response-Headers, so each attempt has a thread of its own that runs the attempt's steps
(:meth:`~minigrpc.blocking.transport.BlockingTransport.open`: pick, dial, wait for ready,
transparent retries) and then waits for its Response-Headers or its end, reading its connection
meanwhile.  One more thread starts the hedges when they are due: it waits on a condition
variable until the next hedge (or the deadline), and every attempt's news wakes it; nothing
polls.  The attempts' threads end once the call is settled (a winner, or the end); the winner's
connection is then read by whoever waits on the call, as for a call that is not hedged.

The decisions run under the transport's lock (the channel's retry buffer and throttle are
shared by all its calls), which is also the lock of the condition variable.
"""

import threading
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ..driver.hedged_steps import HedgeAttempt
from ..driver.invocation import CANCELLED
from ..protocol.client_protocol import ClientCall
from ..protocol.status import CallStatus
from ..protocol.wire import Framed
from .client_connection import BlockingClientConnection
from .transport import BlockingTransport, CallHandle

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.invocation import Invocation

__all__ = ["BlockingHedge"]

Outcome = Tuple[Optional[BlockingClientConnection], ClientCall]


class BlockingHedge:
    """One hedged call's attempts on threads; :meth:`outcome` is the attempt the call is."""

    def __init__(
        self,
        transport: BlockingTransport,
        invocation: "Invocation",
        request: Optional[Framed],
        unary_response: bool,
    ) -> None:
        self._transport = transport
        #: On the transport's lock; notified at every attempt's news.
        self._changed = changed = transport.new_condition()
        self._steps = steps = invocation.new_hedged_steps(
            transport.subchannels, transport.options, request, unary_response, guard=changed)
        #: The deadline of the call's attempts.
        self._deadline = steps.deadline

    def placeholder(self) -> ClientCall:
        """A call that stands for the hedged call until it is settled (never started)."""
        return self._steps.placeholder()

    def start(self) -> None:
        """Send attempt 0, and start the thread that sends the hedges when they are due."""
        with self._changed:
            first = self._steps.start()
            for attempt in first:
                self._launch(attempt)
        threading.Thread(target=self._hedge, name="minigrpc-hedge", daemon=True).start()

    def _launch(self, attempt: HedgeAttempt) -> None:
        attempt.handle = CallHandle()
        threading.Thread(
            target=self._run_attempt, args=(attempt,), name="minigrpc-hedge-attempt", daemon=True
        ).start()

    def _hedge(self) -> None:
        """Start each hedge when it is due, until the call is settled."""
        steps = self._steps
        clock = steps.clock
        with self._changed:
            while not steps.settled:
                wake_at = steps.wake_at
                if wake_at is None:
                    self._changed.wait()
                    continue
                timeout = wake_at - clock()
                if timeout > 0:
                    self._changed.wait(timeout)
                    continue
                for attempt in steps.due():
                    self._launch(attempt)
                if steps.settled:
                    self._changed.notify_all()
                    break
                if steps.wake_at == wake_at:
                    # Nothing changed at this instant (a hedge past the deadline waits for the
                    # attempts in flight to end): wait for their news.
                    self._changed.wait()

    def _run_attempt(self, attempt: HedgeAttempt) -> None:
        """Run one attempt until its Response-Headers or its end, and report it."""
        transport, steps, handle = self._transport, self._steps, attempt.handle
        while True:
            connection, call = transport.open(attempt.steps, handle)
            if connection is not None and not call.done:
                connection.wait_for_headers(call, self._deadline)
            with self._changed:
                if not call.done:
                    retry, cancel = False, steps.headers_arrived(attempt)
                else:
                    retry, cancel = steps.attempt_ended(attempt, call)
                self._changed.notify_all()
            _cancel(cancel, CANCELLED)
            if not retry:
                return

    # -- what the call asks ---------------------------------------------------------------------

    def outcome(self, timeout: Optional[float] = None) -> Optional[Outcome]:
        """The attempt the call is, once it is known (a winner, or the end); None if
        ``timeout`` passed first."""
        steps = self._steps
        with self._changed:
            if not steps.settled and not self._changed.wait_for(lambda: steps.settled, timeout):
                return None
            connection, call = steps.outcome
        assert call is not None
        return connection, call

    def settled_outcome(self) -> Optional[Outcome]:
        """:meth:`outcome` if the call is settled, else None at once."""
        with self._changed:
            if not self._steps.settled:
                return None
        return self.outcome()

    def send(self, framed: Framed) -> bool:
        """Send a request message to every attempt (kept for those to come); False once the
        call is over."""
        with self._changed:
            targets, cancel = self._steps.message_sent(framed)
        _cancel(cancel, CANCELLED)
        for connection, call in targets:
            connection.send(call, framed, False, self._deadline)
        return not self._steps.over

    def close_requests(self) -> None:
        """End the request on every attempt (and on those to come)."""
        with self._changed:
            targets = self._steps.request_closed()
        for connection, call in targets:
            connection.close_request(call, self._deadline)

    def ended(self, code: int) -> None:
        """The call ended with ``code`` (for throttling)."""
        with self._changed:
            self._steps.call_ended(code)

    def cancel(self, status: CallStatus) -> bool:
        """Cancel the call: every attempt before it is settled (True), its winner after."""
        with self._changed:
            settled = self._steps.settled
            cancel = self._steps.cancel(status)
            self._changed.notify_all()
        _cancel(cancel, status)
        return not settled


def _cancel(attempts: List[HedgeAttempt], status: CallStatus) -> None:
    """Cancel attempts (RST_STREAM(CANCEL) for those with a stream); their threads wake."""
    for attempt in attempts:
        handle: Any = attempt.handle
        if handle is None:
            continue
        handle.status = status
        handle.cancel()
