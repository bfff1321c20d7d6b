"""One client call's way to a stream, as steps: the reconnect and retry loop of a channel,
written once for the blocking and the asyncio transport.

A call asks :meth:`CallSteps.next` what to do, the transport does it with its own I/O (sockets
and threads, or the event loop), and tells the steps what came of it:

==========  ==================================================  ==============================
step        the transport                                       then tells
==========  ==================================================  ==============================
``WAIT``    waits for the channel's next change (a dial or a    nothing
            lookup ended, a backoff ran out), or the deadline
``START``   makes the call's attempt                            :meth:`~CallSteps.attempt_ended`
            (:meth:`~CallSteps.new_attempt`) and starts it on   (nothing if the connection
            :attr:`~CallSteps.connection`                       could not take it)
``SLEEP``   sleeps :attr:`~CallSteps.delay` seconds             nothing
``FINISH``  ends the call without a stream, with                --
            :attr:`~CallSteps.status`
==========  ==================================================  ==============================

After every step the transport carries out the channel's work that asking left (dials, name
lookups: :meth:`~minigrpc.driver.subchannel.Subchannels.take_work`).

The decisions are all here and in what it asks: the channel's connections and connectivity state
(:class:`~minigrpc.driver.subchannel.Subchannels`: which connection, its load-balancing policy,
its dials and their backoff), the call's deadline and backoff
(:class:`~minigrpc.driver.attempts.Attempts`), and its retries
(:class:`~minigrpc.driver.retries.CallRetries`, gRFC A6):

* a closed channel ends the call CANCELLED ("Channel closed!"); a passed deadline,
  DEADLINE_EXCEEDED;
* a channel in TRANSIENT_FAILURE (every address failed) ends the call UNAVAILABLE with the last
  error, unless it waits for ready: then it waits while the channel tries again (gRPC's
  connection backoff, ``doc/connection-backoff.md``);
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

"""

import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from ..protocol.client_protocol import ClientCall
from ..protocol.codes import Code
from ..protocol.status import CallStatus
from ..protocol.wire import Framed, framed_size
from .retries import (
    NOT_PROCESSED,
    CallRetries,
    RetryOptions,
    fits_call_buffer,
    pushback,
    transparent_retry,
)
from .subchannel import FAIL, WAIT

if TYPE_CHECKING:  # pragma: no cover
    from .channel_core import TransportOptions
    from .subchannel import Subchannels

__all__ = ["FINISH", "SLEEP", "START", "WAIT", "CallSteps", "NewCall"]

#: Start the call on :attr:`CallSteps.connection`.
START = "start"
#: Back off for :attr:`CallSteps.delay` seconds.
SLEEP = "sleep"
#: End the call without a stream, with :attr:`CallSteps.status`.
FINISH = "finish"

#: Makes one attempt of a call: ``new_call(request, unary_response, previous_attempts)``
#: (:meth:`minigrpc.driver.invocation.Invocation.new_call`).
NewCall = Callable[[Optional[Framed], bool, int], ClientCall]


def _no_call(request: Optional[Framed], unary_response: bool, previous: int) -> ClientCall:
    return ClientCall(request=request, unary_response=unary_response)


#: The channel options of retries when the caller gives none (tests).
_DEFAULT_RETRY_OPTIONS = RetryOptions()


class CallSteps:
    """One call's attempts, from its first pick to the attempt that is its outcome.

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
        "_final",
        "_judged",
        "_messages",
        "_new_call",
        "_refused_retried",
        "_request",
        "_retry_at",
        "_retry_options",
        "_subchannels",
        "_unary_response",
        "attempts",
        "clock",
        "connection",
        "delay",
        "retries",
        "status",
    )

    def __init__(
        self,
        subchannels: "Subchannels[Any]",
        options: "TransportOptions",
        deadline: Optional[float],
        wait_for_ready: bool,
        clock: Callable[[], float] = time.monotonic,
        retries: Optional[CallRetries] = None,
        new_call: NewCall = _no_call,
        request: Optional[Framed] = None,
        unary_response: bool = True,
        retry_options: RetryOptions = _DEFAULT_RETRY_OPTIONS,
    ) -> None:
        self._subchannels = subchannels
        self.attempts = options.attempts(deadline, wait_for_ready, clock)
        self.clock = clock
        self.retries = retries
        #: ``START``: the connection to start the call on (then, that of its last attempt).
        self.connection: Any = None
        #: ``FINISH``: the status the call ends with.
        self.status: Optional[CallStatus] = None
        #: ``SLEEP``: for how long.
        self.delay = 0.0
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
        :attr:`status` hold what it needs.  It may leave the channel work to do
        (:meth:`~minigrpc.driver.subchannel.Subchannels.take_work`)."""
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
        subchannels = self._subchannels
        status = self.attempts.before_attempt(subchannels.closed)
        if status is not None:
            self.status = status
            self.finish()
            return FINISH
        picked = subchannels.pick(self.attempts.wait_for_ready, self.clock())
        if picked is WAIT:
            return WAIT
        if picked is FAIL:
            self.status = CallStatus(Code.UNAVAILABLE, subchannels.failure)
            self.finish()
            return FINISH
        self.connection = picked
        return START

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
            if status.code_number == Code.OK:  # answered: nothing to try again
                self._committed = final = True
            else:
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
            and not self._subchannels.closed
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
