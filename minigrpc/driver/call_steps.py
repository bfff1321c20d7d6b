"""One client call's way to a stream, as steps: the reconnect and retry loop of a channel,
written once for the blocking and the asyncio transport.

A call asks :meth:`CallSteps.next` what to do, the transport does it with its own I/O (sockets
and threads, or the event loop), and tells the steps what came of it:

==========  ======================================================  ============================
step        the transport                                           then tells
==========  ======================================================  ============================
``DIAL``    closes :attr:`~CallSteps.retired` if set, and dials     :meth:`~CallSteps.dialled`,
            a connection for the channel                            ``dial_failed``,
                                                                    ``dial_timed_out`` or
                                                                    ``dial_abandoned``
``WAIT``    waits until the dial another call runs has ended, or    nothing
            the deadline
``START``   makes the call's attempt and starts it on               :meth:`~CallSteps.attempt_ended`
            :attr:`~CallSteps.connection`                           (nothing if the connection
                                                                    could not take it)
``SLEEP``   sleeps :attr:`~CallSteps.delay` seconds                 nothing
``FINISH``  ends the call without a stream, with                    --
            :attr:`~CallSteps.status`
``DONE``    (``connect_only``) nothing: the channel is READY        --
==========  ======================================================  ============================

The decisions are all here and in what it asks: the channel's connection and connectivity state
(:class:`~minigrpc.driver.subchannel.Subchannel`), the call's retry budget, deadline and
backoff (:class:`~minigrpc.driver.attempts.Attempts`):

* a closed channel ends the call CANCELLED ("Channel closed!"); a passed deadline,
  DEADLINE_EXCEEDED;
* a failed dial ends the call UNAVAILABLE with the dial's error, unless it waits for ready: then
  it backs off (gRPC's connection backoff, ``doc/connection-backoff.md``) and dials again;
* a call the server provably never processed (RST_STREAM(REFUSED_STREAM), a stream above a
  GOAWAY's last-stream-id: RFC 9113 §8.7) is tried again once, on a new connection if need be;
  a call waiting for ready whose server closed before saying anything backs off and tries again;
* a call is tried again only while it can be sent again in full and nothing of it reached the
  application (:meth:`CallSteps.commit`).

What a channel would add goes here too, once for both transports: retry policies (gRPC A6) are
another verdict of :meth:`CallSteps.attempt_ended` (a status the policy names, its own backoff
as a ``SLEEP``, the attempt count for ``grpc-previous-rpc-attempts``); several subchannels
(pick_first, round_robin) are a picker in place of the one subchannel :meth:`CallSteps.next`
asks, the channel's state made from theirs; keepalive pings (A8) are a subchannel's timer that
the transports already have a clock for.
"""

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..protocol.client_protocol import ClientCall
from ..protocol.status import CallStatus
from .attempts import BACK_OFF, RETRY_NOW, deadline_status
from .subchannel import DIAL, WAIT

if TYPE_CHECKING:  # pragma: no cover
    from .channel_core import TransportOptions
    from .subchannel import Subchannel

__all__ = ["DIAL", "DONE", "FINISH", "SLEEP", "START", "WAIT", "CallSteps"]

#: Start the call on :attr:`CallSteps.connection`.
START = "start"
#: Back off for :attr:`CallSteps.delay` seconds.
SLEEP = "sleep"
#: End the call without a stream, with :attr:`CallSteps.status`.
FINISH = "finish"
#: The channel is READY (``connect_only``).
DONE = "done"


class CallSteps:
    """One call's attempts, from its first dial to the attempt that is its outcome."""

    __slots__ = (
        "_backing_off",
        "_committed",
        "_connect_only",
        "_final",
        "_judged",
        "_subchannel",
        "attempts",
        "connection",
        "delay",
        "retired",
        "status",
    )

    def __init__(
        self,
        subchannel: "Subchannel[Any]",
        options: "TransportOptions",
        deadline: Optional[float],
        wait_for_ready: bool,
        connect_only: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._subchannel = subchannel
        self.attempts = options.attempts(deadline, wait_for_ready, clock)
        #: ``START``: the connection to start the call on (then, that of its last attempt).
        self.connection: Any = None
        #: ``FINISH``: the status the call ends with.
        self.status: Optional[CallStatus] = None
        #: ``SLEEP``: for how long.
        self.delay = 0.0
        #: ``DIAL``: a connection the dial replaces, for the transport to close (or None).
        self.retired: Any = None
        self._connect_only = connect_only
        self._backing_off = False
        self._committed = False
        #: The last attempt judged by :meth:`attempt_ended`, and the verdict.
        self._judged: Optional[ClientCall] = None
        self._final = True

    @property
    def deadline(self) -> Optional[float]:
        return self.attempts.deadline

    def next(self) -> str:
        """The next step (module docstring); :attr:`connection`, :attr:`delay` or
        :attr:`status` hold what it needs.  On ``DIAL`` the channel is CONNECTING: the caller
        must report how the dial went."""
        if self.status is not None:
            return FINISH
        if self._backing_off:
            self._backing_off = False
            delay = self.attempts.next_delay()
            if delay is not None:
                self.delay = delay
                return SLEEP
        subchannel = self._subchannel
        status = self.attempts.before_attempt(subchannel.closed)
        if status is not None:
            self.status = status
            return FINISH
        picked = subchannel.pick()
        if picked is DIAL:
            self.retired = subchannel.begin_dial()
            return DIAL
        if picked is WAIT:
            return WAIT
        self.connection = picked
        return DONE if self._connect_only else START

    # -- what came of a dial ------------------------------------------------------------------

    def dialled(self, connection: Any) -> bool:
        """The dial gave ``connection``; False if the channel closed meanwhile (close it)."""
        self.retired = None
        return self._subchannel.dialled(connection)

    def dial_failed(self, details: str) -> None:
        """The dial failed: UNAVAILABLE with ``details``, or, waiting for ready, back off."""
        self.retired = None
        subchannel = self._subchannel
        subchannel.dial_failed()
        status = self.attempts.after_connect_failure(details, subchannel.closed)
        if status is None:
            self._backing_off = True
        else:
            self.status = status

    def dial_timed_out(self) -> None:
        """The call's deadline passed while it dialled: DEADLINE_EXCEEDED."""
        self.dial_abandoned()
        self.status = deadline_status()

    def dial_abandoned(self) -> None:
        """The dial stopped unfinished (the call was cancelled or interrupted)."""
        self.retired = None
        self._subchannel.dial_abandoned()

    # -- what came of an attempt --------------------------------------------------------------

    def attempt_ended(self, call: ClientCall) -> bool:
        """The attempt ``call`` started on :attr:`connection` (``START``) runs or has ended:
        True if it is the call's outcome, False if the call is to be tried again (the next step
        says how).  Asked again about the same attempt, it answers the same."""
        if not call.done:
            return True
        if call is self._judged:
            return self._final
        final = True
        if not self._committed:
            verdict = self.attempts.after_attempt(
                call, self.connection.protocol.bytes_received, self._subchannel.closed
            )
            if verdict == BACK_OFF:  # the server closed before saying anything
                self._backing_off = True
                final = False
            elif verdict == RETRY_NOW:  # never processed
                final = False
        self._judged, self._final = call, final
        return final

    def commit(self) -> None:
        """Part of the call cannot be sent again (a request stream's messages went out) or
        reached the application (a response): no attempt follows the current one."""
        self._committed = True

    def cancel(self, status: CallStatus) -> None:
        """The call was cancelled before it had a stream: the next step ends it with
        ``status``."""
        if self.status is None:
            self.status = status
