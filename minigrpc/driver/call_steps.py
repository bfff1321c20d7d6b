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
(:class:`~minigrpc.driver.subchannel.Subchannel`), the call's deadline and connection backoff
(:class:`~minigrpc.driver.attempts.Attempts`), and its retries
(:class:`~minigrpc.driver.retries.CallRetries`, gRFC A6):

* a closed channel ends the call CANCELLED ("Channel closed!"); a passed deadline,
  DEADLINE_EXCEEDED;
* a failed dial ends the call UNAVAILABLE with the dial's error, unless it waits for ready: then
  it backs off (gRPC's connection backoff, ``doc/connection-backoff.md``) and dials again;
* an attempt that ended is judged by the method's retry policy: a retryable status is tried
  again after the policy's backoff (or the server's ``grpc-retry-pushback-ms``) as a ``SLEEP``,
  within ``maxAttempts`` and the channel's retry throttling; an attempt the server provably never
  processed (RST_STREAM(REFUSED_STREAM), a stream above a GOAWAY's last-stream-id: RFC 9113
  §8.7) is tried again at once, once, whatever the policy; a call waiting for ready whose
  server closed before saying anything backs off and tries again;
* a call is tried again only until it is *committed*: Response-Headers arrived, a response
  reached the application (:meth:`CallSteps.commit`), or its request outgrew the retry buffer.

Each attempt is made by :meth:`CallSteps.new_attempt`: the request (a unary call's message, or
the messages of a request stream kept for replay, :meth:`CallSteps.message_sent`) and, from the
second attempt on, ``grpc-previous-rpc-attempts``.

What a channel would add goes here too, once for both transports: several subchannels
(pick_first, round_robin) are a picker in place of the one subchannel :meth:`CallSteps.next`
asks, the channel's state made from theirs; keepalive pings (A8) are a subchannel's timer that
the transports already have a clock for.
"""

import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ..protocol.client_protocol import ClientCall
from ..protocol.codes import Code
from ..protocol.status import CallStatus
from ..protocol.wire import Framed, framed_size
from .attempts import deadline_status
from .retries import (
    NOT_PROCESSED,
    CallRetries,
    RetryOptions,
    fits_call_buffer,
    pushback,
    transparent_retry,
)
from .subchannel import DIAL, WAIT

if TYPE_CHECKING:  # pragma: no cover
    from .channel_core import TransportOptions
    from .subchannel import Subchannel

__all__ = ["DIAL", "DONE", "FINISH", "SLEEP", "START", "WAIT", "CallSteps", "NewCall"]

#: Start the call on :attr:`CallSteps.connection`.
START = "start"
#: Back off for :attr:`CallSteps.delay` seconds.
SLEEP = "sleep"
#: End the call without a stream, with :attr:`CallSteps.status`.
FINISH = "finish"
#: The channel is READY (``connect_only``).
DONE = "done"

#: Makes one attempt of a call: ``new_call(request, unary_response, previous_attempts)``
#: (:meth:`minigrpc.driver.invocation.Invocation.new_call`).
NewCall = Callable[[Optional[Framed], bool, int], ClientCall]


def _no_call(request: Optional[Framed], unary_response: bool, previous: int) -> ClientCall:
    return ClientCall(request=request, unary_response=unary_response)


#: The channel options of retries when the caller gives none (``connect_only``, tests).
_DEFAULT_RETRY_OPTIONS = RetryOptions()


class CallSteps:
    """One call's attempts, from its first dial to the attempt that is its outcome.

    ``retries`` are the call's (its method's retry policy, the channel's buffer and throttle);
    ``new_call`` makes an attempt of it, and ``request`` is a unary call's one message (None
    when the request streams: :meth:`message_sent` and :meth:`request_closed` keep it).

    A unary request without a retry policy needs none of that: its message is kept anyway, and
    only transparent retries apply (``retries`` None; ``retry_options`` say whether they are on
    and how large a request may be to be sent again), which spares every such call the retry
    bookkeeping.
    """

    __slots__ = (
        "_backing_off",
        "_closed",
        "_committed",
        "_connect_only",
        "_final",
        "_judged",
        "_messages",
        "_new_call",
        "_refused_retried",
        "_request",
        "_retry_at",
        "_retry_options",
        "_subchannel",
        "_unary_response",
        "attempts",
        "clock",
        "connection",
        "delay",
        "retired",
        "retries",
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
        retries: Optional[CallRetries] = None,
        new_call: NewCall = _no_call,
        request: Optional[Framed] = None,
        unary_response: bool = True,
        retry_options: RetryOptions = _DEFAULT_RETRY_OPTIONS,
    ) -> None:
        self._subchannel = subchannel
        self.attempts = options.attempts(deadline, wait_for_ready, clock)
        self.clock = clock
        self.retries = retries
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
        #: When the retry policy's next attempt is due (None: none is planned).
        self._retry_at: Optional[float] = None
        #: The last attempt judged by :meth:`attempt_ended`, and the verdict.
        self._judged: Optional[ClientCall] = None
        self._final = True
        self._new_call = new_call
        self._request = request
        self._unary_response = unary_response
        #: A request stream's messages kept for the next attempt, and whether it ended.
        self._messages: List[Framed] = []
        self._closed = False
        self._refused_retried = False
        self._committed = False
        self._retry_options = retry_options
        if retries is not None and request is not None:
            # The one message is kept anyway; it counts against the retry buffer all the same,
            # so that a request too large to buffer commits the call (gRFC A6).
            retries.on_message_sent(framed_size(request))

    @property
    def deadline(self) -> Optional[float]:
        return self.attempts.deadline

    def next(self) -> str:
        """The next step (module docstring); :attr:`connection`, :attr:`delay` or
        :attr:`status` hold what it needs.  On ``DIAL`` the channel is CONNECTING: the caller
        must report how the dial went."""
        if self.status is not None:
            self.finish()
            return FINISH
        if self._retry_at is not None:
            delay = self._retry_at - self.clock()
            self._retry_at = None
            if delay > 0:
                deadline = self.attempts.deadline
                if deadline is not None:
                    # A retry planned past the deadline never starts: the call waits until
                    # then and ends DEADLINE_EXCEEDED, as in grpcio.
                    delay = min(delay, max(0.0, deadline - self.clock()))
                self.delay = delay
                return SLEEP
        if self._backing_off:
            self._backing_off = False
            backoff = self.attempts.next_delay()
            if backoff is not None:
                self.delay = backoff
                return SLEEP
        subchannel = self._subchannel
        status = self.attempts.before_attempt(subchannel.closed)
        if status is not None:
            self.status = status
            self.finish()
            return FINISH
        picked = subchannel.pick()
        if picked is DIAL:
            self.retired = subchannel.begin_dial()
            return DIAL
        if picked is WAIT:
            return WAIT
        self.connection = picked
        return DONE if self._connect_only else START

    def new_attempt(self) -> ClientCall:
        """The call's next attempt (``START``): its request, replayed for a request stream, and
        ``grpc-previous-rpc-attempts`` from the second attempt on (gRFC A6)."""
        retries = self.retries
        previous = retries.attempts_completed if retries is not None else 0
        call = self._new_call(self._request, self._unary_response, previous)
        if self._messages or self._closed:
            call.replay(self._messages, self._closed)
        return call

    # -- a request stream -------------------------------------------------------------------------

    def message_sent(self, framed: Framed) -> None:
        """A request message went out on the current attempt: keep it for the next one while
        the call may be tried again (within the retry buffer; past it the call is committed)."""
        retries = self.retries
        assert retries is not None, "a request stream's steps have retries"
        if retries.on_message_sent(framed_size(framed)):
            self._messages.append(framed)
        elif self._messages:
            self._messages = []

    def request_closed(self) -> None:
        """The request stream ended on the current attempt (a later one ends it too)."""
        self._closed = True

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
        status = call.status
        assert status is not None
        retries = self.retries
        if retries is None:
            final = self._judged_without_policy(call, status)
        else:
            final = self._judged_by_policy(call, status, retries)
        self._judged, self._final = call, final
        return final

    def _judged_without_policy(self, call: ClientCall, status: CallStatus) -> bool:
        """A unary request without a retry policy: only transparent retries (gRFC A6)."""
        if self._committed:
            return True
        if call.retryable and self._replayable() and (
                transparent_retry(NOT_PROCESSED, self._refused_retried)):
            self._refused_retried = True
            return False
        if self._server_never_spoke(status):
            self._backing_off = True  # waiting for ready: this server may yet come up
            return False
        self._committed = True
        return True

    def _replayable(self) -> bool:
        """Retries are on, and the unary request is small enough to be sent again."""
        options, request = self._retry_options, self._request
        return options.enabled and (
            request is None or fits_call_buffer(framed_size(request), options.per_call_buffer))

    def _judged_by_policy(self, call: ClientCall, status: CallStatus,
                          retries: CallRetries) -> bool:
        if call.response_started:
            retries.on_response_headers()  # the application may have seen them (gRFC A6)
        unprocessed = NOT_PROCESSED if call.retryable else ""
        if self._server_never_spoke(status) and not retries.committed and (
                not retries.retries_transparently(unprocessed)):
            self._backing_off = True  # waiting for ready: this server may yet come up
            return False
        code = status.code_number
        pushed_back = pushback(call.trailers or ()) if code != Code.OK else None
        decision = retries.attempt_finished(code, self.clock(), pushed_back, unprocessed)
        if decision.retry_at is None:
            retries.finish()
            return True
        if not decision.transparent:
            self._retry_at = decision.retry_at
        return False

    def _server_never_spoke(self, status: CallStatus) -> bool:
        """A call waiting for ready lost its connection before the server said anything."""
        return (
            self.attempts.wait_for_ready
            and status.code_number == Code.UNAVAILABLE
            and self.connection is not None
            and self.connection.protocol.bytes_received == 0
            and not self._subchannel.closed
        )

    @property
    def committed(self) -> bool:
        """No attempt follows the current one."""
        retries = self.retries
        return self._committed if retries is None else retries.committed

    def commit(self) -> None:
        """Part of the call reached the application (a response): no attempt follows the
        current one, and a request stream's kept messages are let go."""
        self._committed = True
        if self.retries is not None:
            self.retries.commit()
        self._messages = []

    def finish(self) -> None:
        """The call is over, whatever ended it: what it kept for retries is let go."""
        if self.retries is not None:
            self.retries.finish()
        self._messages = []

    def cancel(self, status: CallStatus) -> None:
        """The call was cancelled before it had a stream: the next step ends it with
        ``status``."""
        if self.status is None:
            self.status = status
