"""A hedged call carried out on the event loop (gRFC A6, "Hedging Policy"): what
:class:`~minigrpc.driver.hedged_steps.HedgedSteps` decides, done with the asyncio transport.

Each attempt is a task: it runs the attempt's steps
(:meth:`~minigrpc.aio.transport.AsyncTransport.attempt`: pick, dial, wait for ready,
transparent retries), then waits for its Response-Headers or its end, and reports it.  One more
task starts the hedges when they are due: it waits for the next hedge (or the deadline) or for
an attempt's news, whichever comes first.  Once the call is settled (a winner, or the end) the
tasks are over, and the call goes on with the winner as a call that is not hedged.
"""

import asyncio
import time
from typing import TYPE_CHECKING, Any, List, Optional, Set, Tuple

from ..driver.attempts import finished
from ..driver.hedged_steps import HedgeAttempt
from ..driver.invocation import CANCELLED
from ..protocol.client_protocol import ClientCall
from ..protocol.status import CallStatus
from ..protocol.wire import Framed
from .client_connection import AsyncClientConnection
from .transport import AsyncTransport

if TYPE_CHECKING:  # pragma: no cover
    from ..driver.invocation import Invocation

__all__ = ["AsyncHedge"]

Outcome = Tuple[Optional[AsyncClientConnection], ClientCall]


class AsyncHedge:
    """One hedged call's attempts as tasks; :meth:`outcome` is the attempt the call is."""

    def __init__(
        self,
        transport: AsyncTransport,
        invocation: "Invocation",
        request: Optional[Framed],
        unary_response: bool,
    ) -> None:
        self._transport = transport
        self._steps = steps = invocation.new_hedged_steps(
            transport.subchannels, transport.options, request, unary_response)
        self._deadline = steps.deadline
        #: Resolved at an attempt's news (None: nobody waits).
        self._changed: Optional[asyncio.Future[None]] = None
        self._settled: Optional[asyncio.Future[None]] = None
        self._tasks: Set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Send attempt 0, and start the task that sends the hedges when they are due."""
        for attempt in self._steps.start():
            self._launch(attempt)
        self._spawn(self._hedge())

    def _spawn(self, work: Any) -> "asyncio.Task[None]":
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _launch(self, attempt: HedgeAttempt) -> None:
        attempt.handle = self._spawn(self._run_attempt(attempt))

    def _news(self) -> None:
        """Wake the task that starts the hedges, and whoever waits for the outcome."""
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)
        settled = self._settled
        if self._steps.settled and settled is not None and not settled.done():
            settled.set_result(None)

    async def _hedge(self) -> None:
        """Start each hedge when it is due, until the call is settled."""
        steps = self._steps
        loop = asyncio.get_running_loop()
        while not steps.settled:
            wake_at = steps.wake_at
            timeout = None if wake_at is None else wake_at - time.monotonic()
            if timeout is None or timeout > 0:
                changed = self._changed
                if changed is None:
                    changed = self._changed = loop.create_future()
                await asyncio.wait((changed,), timeout=timeout)
                continue
            for attempt in steps.due():
                self._launch(attempt)
            if steps.settled:
                self._news()
                return
            if steps.wake_at == wake_at:
                # A hedge past the deadline: wait for the attempts in flight to end.
                changed = self._changed = loop.create_future()
                await changed

    async def _run_attempt(self, attempt: HedgeAttempt) -> None:
        """Run one attempt until its Response-Headers or its end, and report it."""
        transport, steps = self._transport, self._steps
        while True:
            connection, call = await transport.attempt(attempt.steps, False)
            if call is None:
                assert attempt.steps.status is not None
                call = finished(attempt.steps.new_attempt(), attempt.steps.status)
            if connection is not None and not call.done:
                await connection.wait_for_headers(call, self._deadline)
            if not call.done:
                retry, cancel = False, steps.headers_arrived(attempt)
            else:
                retry, cancel = steps.attempt_ended(attempt, call)
            self._cancel(cancel, CANCELLED)
            self._news()
            if not retry:
                return

    def _cancel(self, attempts: List[HedgeAttempt], status: CallStatus) -> None:
        """Cancel attempts: RST_STREAM(CANCEL) for those with a stream, their tasks else."""
        for attempt in attempts:
            connection, call = attempt.connection, attempt.call
            if connection is not None and call is not None and not call.done:
                connection.cancel(call, status)
            elif attempt.handle is not None:
                attempt.handle.cancel()

    # -- what the call asks ---------------------------------------------------------------------

    async def outcome(self) -> Outcome:
        """The attempt the call is, once it is known (a winner, or the end)."""
        steps = self._steps
        if not steps.settled:
            settled = self._settled
            if settled is None:
                settled = self._settled = asyncio.get_running_loop().create_future()
            await asyncio.shield(settled)
        connection, call = steps.outcome
        assert call is not None
        return connection, call

    async def send(self, framed: Framed) -> bool:
        """Send a request message to every attempt (kept for those to come); False once the
        call is over."""
        targets, cancel = self._steps.message_sent(framed)
        self._cancel(cancel, CANCELLED)
        for connection, call in targets:
            await connection.send(call, framed, False, self._deadline)
        return not self._steps.over

    async def close_requests(self) -> None:
        """End the request on every attempt (and on those to come)."""
        for connection, call in self._steps.request_closed():
            await connection.close_request(call, self._deadline)

    def ended(self, code: int) -> None:
        """The call ended with ``code`` (for throttling)."""
        self._steps.call_ended(code)

    def cancel(self, status: CallStatus) -> None:
        """Cancel the call: every attempt before it is settled, its winner after."""
        self._cancel(self._steps.cancel(status), status)
        self._news()
        for task in list(self._tasks):
            task.cancel()
