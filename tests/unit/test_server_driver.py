"""The server driver (minigrpc.driver.server_driver) on a fake clock, against a real h2 client.

No sockets, no threads, no event loop: a recording stand-in for a server's I/O primitives
(:class:`RecordingIO`) takes the driver's timers, flushes, closes and handler starts, and the
bytes move between an h2 client and the driven connection by hand.  Both real servers carry
these same decisions out (tests/unit/test_server_behaviour.py, tests/aio/test_server.py check
them end to end); what is pinned here is the decision itself, at the exact time it is due.
"""

from __future__ import annotations

import errno
import random
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import h2.config
import h2.connection
import h2.errors
import h2.events
import hpack
import hyperframe.frame
import pytest

from minigrpc.driver import handlers as mg_handlers
from minigrpc.driver.server_call_state import CallState
from minigrpc.driver.server_driver import ServedConnection, ServerDriver
from minigrpc.driver.server_options import ServerOptions
from minigrpc.driver.server_timers import CLOSE_FLUSH_TIMEOUT, DRAIN_PING_TIMEOUT, LINGER_TIMEOUT
from minigrpc.protocol import wire
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.server_events import CallStarted


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    def __init__(self, when: float, callback: Callable[..., None], args: Tuple[Any, ...]) -> None:
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class RecordingIO:
    """The driver's primitives, recorded (and timers kept, to be run on the fake clock)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timers: List[FakeTimer] = []
        self.log: List[Tuple[str, Any]] = []
        self.started: List[CallState] = []
        self.ended: List[Tuple[CallState, bool]] = []
        self.driver: ServerDriver = None  # type: ignore[assignment]
        self.shutdown_ok = True
        #: What the calls' contexts read.
        self.default_compression: Optional[int] = None
        self.call_lock = threading.Lock()
        #: What a close writes at once (the harness hands it to the client).
        self.last_words: Callable[[ServedConnection], None] = lambda connection: None

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> FakeTimer:
        timer = FakeTimer(when, callback, args)
        self.timers.append(timer)
        return timer

    def pending(self) -> List[FakeTimer]:
        return [timer for timer in self.timers if not timer.cancelled]

    def advance(self, seconds: float) -> None:
        """Move the clock on, running each timer that comes due, in order."""
        end = self.clock.now + seconds
        while True:
            due = sorted(
                (t for t in self.pending() if t.when <= end), key=lambda timer: timer.when
            )
            if not due:
                break
            timer = due[0]
            self.timers.remove(timer)
            self.clock.now = max(self.clock.now, timer.when)
            timer.callback(*timer.args)
        self.clock.now = end

    def flush_soon(self, connection: ServedConnection) -> None:
        self.log.append(("flush", connection))

    def shutdown_write(self, connection: ServedConnection) -> bool:
        self.log.append(("shutdown", connection))
        return self.shutdown_ok

    def close(self, connection: ServedConnection) -> None:
        self.log.append(("close", connection))
        if not connection.lingering:
            self.last_words(connection)
        self.driver.connection_closed(connection, "closed by the server")

    def rest_listener(self, listener: Any) -> None:
        self.log.append(("rest", listener))

    def arm_listener(self, listener: Any) -> None:
        self.log.append(("arm", listener))

    def new_call(self, connection: ServedConnection, event: CallStarted) -> CallState:
        return CallState(self, connection, event)

    def start_handler(self, call: CallState) -> None:
        self.started.append(call)

    def requests_arrived(self, call: CallState) -> None:
        self.log.append(("requests", call))

    def wake(self, call: CallState) -> None:
        self.log.append(("wake", call))

    def call_ended(self, call: CallState, answered: bool) -> None:
        self.ended.append((call, answered))

    def run_callbacks(self, call: CallState, callbacks: List[Callable[..., Any]]) -> None:
        for callback in callbacks:
            callback()

    def did(self, what: str) -> bool:
        return any(kind == what for kind, _ in self.log)


def _echo(request: bytes, context: Any) -> bytes:
    return request


class Harness:
    """A driver, its recording I/O, and one connection to an h2 client."""

    def __init__(
        self,
        options: Optional[List[Tuple[str, Any]]] = None,
        maximum_concurrent_rpcs: Optional[int] = None,
        awaits_interceptors: bool = False,
        interceptors: Tuple[Any, ...] = (),
        handshake: bool = True,
        rng: Optional[random.Random] = None,
    ) -> None:
        self.clock = FakeClock()
        self.io = RecordingIO(self.clock)
        self.driver = ServerDriver(
            self.io,
            ServerOptions(options, None, maximum_concurrent_rpcs, interceptors),
            awaits_interceptors=awaits_interceptors,
            clock=self.clock,
            rng=rng,
        )
        self.driver.handlers.add_registered("t.S", {
            "Unary": mg_handlers.unary_unary_rpc_method_handler(_echo),
            "Stream": mg_handlers.stream_stream_rpc_method_handler(_echo),
        })
        self.io.driver = self.driver
        self.io.last_words = lambda connection: self._deliver(connection.outgoing())
        self.served = self.driver.open_connection("link", "ipv4:127.0.0.1:1", ("127.0.0.1",), None)
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.events: List[Any] = []
        #: GOAWAY frames from the server (h2 stops reading at the first, so they are read here).
        self.goaway_frames: List[hyperframe.frame.GoAwayFrame] = []
        #: The frames that came after the first GOAWAY.
        self.late_frames: List[hyperframe.frame.Frame] = []
        #: Answer the server's PINGs (after a GOAWAY too, as gRPC clients do).
        self.answer_pings = True
        self._raw_replies = bytearray()
        if handshake:
            self.client.initiate_connection()
            self.exchange()

    def exchange(self) -> None:
        """Move bytes both ways until both sides are quiet, as a server's flush would."""
        for _ in range(50):
            moved = False
            data = self.client.data_to_send() + bytes(self._raw_replies)
            self._raw_replies.clear()
            if data and not self.served.closed:
                self.driver.received(self.served, data)
                moved = True
            if not self.served.closed:
                out = self.served.outgoing()
                if out:
                    moved = True
                    self._deliver(out)
                self.driver.flushed(self.served, 0, False)
            if not moved:
                return

    def _deliver(self, data: bytes) -> None:
        """The server's frames to the h2 client, one by one; after a GOAWAY (which h2 takes as
        the connection's end) they are read here, and PINGs answered by hand."""
        view = memoryview(data)
        while view:
            frame, length = hyperframe.frame.Frame.parse_frame_header(view[:9])
            frame.parse_body(view[9 : 9 + length])
            raw = bytes(view[: 9 + length])
            view = view[9 + length :]
            if isinstance(frame, hyperframe.frame.GoAwayFrame):
                self.goaway_frames.append(frame)
            if self.goaway_frames:
                self.late_frames.append(frame)
                if (
                    isinstance(frame, hyperframe.frame.PingFrame)
                    and "ACK" not in frame.flags
                    and self.answer_pings
                ):
                    ack = hyperframe.frame.PingFrame(0, frame.opaque_data)
                    ack.flags.add("ACK")
                    self._raw_replies += ack.serialize()
                continue
            for event in self.client.receive_data(raw):
                self.events.append(event)
                if isinstance(event, h2.events.DataReceived):
                    self.client.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )

    def request(
        self,
        path: str = "/t.S/Unary",
        body: Optional[bytes] = wire.encode_message(b"hi"),
        end: bool = True,
        timeout: Optional[bytes] = None,
    ) -> int:
        stream_id = self.client.get_next_available_stream_id()
        headers = [
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
            (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ]
        if timeout is not None:
            headers.append((b"grpc-timeout", timeout))
        self.client.send_headers(stream_id, headers, end_stream=body is None and end)
        if body is not None:
            self.client.send_data(stream_id, body, end_stream=end)
        self.exchange()
        return stream_id

    def call(self, stream_id: int) -> CallState:
        return self.served.calls[stream_id]

    def outcome(self, stream_id: int) -> Dict[str, Any]:
        found: Dict[str, Any] = {"status": None, "message": None, "body": b"", "reset": None}
        for event in self.events:
            if getattr(event, "stream_id", None) != stream_id:
                continue
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                headers = dict(event.headers)
                if b"grpc-status" in headers:
                    found["status"] = int(headers[b"grpc-status"])
                    found["message"] = headers.get(b"grpc-message", b"").decode()
            elif isinstance(event, h2.events.DataReceived):
                found["body"] += event.data
            elif isinstance(event, h2.events.StreamReset):
                found["reset"] = event.error_code
        return found

    def goaways(self) -> List[hyperframe.frame.GoAwayFrame]:
        return self.goaway_frames


# -- calls ------------------------------------------------------------------------------------


def test_a_whole_unary_request_starts_its_handler_once_and_its_answer_ends_the_call() -> None:
    harness = Harness()
    stream_id = harness.request()
    call = harness.call(stream_id)
    assert harness.io.started == [call]
    assert call._request == b"hi" and call._counted
    assert harness.driver.active_calls == 1
    assert not [t for t in harness.io.pending() if t.callback == harness.driver._check_stall]
    ran: List[str] = []
    assert call._add_callback(lambda: ran.append("done"))
    harness.clock.now += 5
    assert harness.driver.finish(call, StatusCode.OK, "", b"answer")
    harness.exchange()
    assert harness.outcome(stream_id)["status"] == 0
    assert harness.outcome(stream_id)["body"] == wire.encode_message(b"answer")
    assert harness.io.ended == [(call, True)]
    assert ran == ["done"]
    assert call._terminated and call._termination_code is StatusCode.OK
    assert harness.driver.active_calls == 0
    assert harness.served.idle_since == harness.clock.now
    # Ended once: a second answer, or the connection's end, changes nothing.
    assert not harness.driver.finish(call, StatusCode.INTERNAL, "late")
    assert not call._add_callback(lambda: ran.append("late"))
    assert ran == ["done"] and len(harness.io.ended) == 1


def test_an_unknown_method_is_answered_trailers_only_and_never_runs() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Nope")
    assert harness.io.started == []
    assert harness.outcome(stream_id)["status"] == StatusCode.UNIMPLEMENTED.number
    assert harness.outcome(stream_id)["message"] == "Method not found!"
    assert [answered for _, answered in harness.io.ended] == [True]
    assert harness.driver.active_calls == 0 and not harness.served.calls


def test_calls_past_the_concurrency_limit_are_refused() -> None:
    harness = Harness(maximum_concurrent_rpcs=1)
    first = harness.request()
    second = harness.request()
    assert harness.io.started == [harness.call(first)]
    assert harness.outcome(second)["status"] == StatusCode.RESOURCE_EXHAUSTED.number
    harness.driver.finish(harness.call(first), StatusCode.OK, "", b"")
    third = harness.request()
    assert harness.io.started[-1] is harness.call(third)


def test_a_deadline_ends_the_call_with_deadline_exceeded_at_its_time() -> None:
    harness = Harness()
    stream_id = harness.request(timeout=b"2S")
    call = harness.call(stream_id)
    harness.io.advance(1.999)
    harness.exchange()
    assert not call._terminated
    harness.io.advance(0.002)
    harness.exchange()
    assert call._terminated and call._termination_code is StatusCode.DEADLINE_EXCEEDED
    assert harness.outcome(stream_id)["status"] == StatusCode.DEADLINE_EXCEEDED.number
    assert harness.io.ended == [(call, False)]  # the handler did not answer: cancel it
    assert harness.driver.active_calls == 0


def test_an_answered_call_leaves_no_timer_behind() -> None:
    harness = Harness()
    stream_id = harness.request(timeout=b"600S")
    call = harness.call(stream_id)
    deadline = [t for t in harness.io.pending() if t.callback == harness.driver._expire]
    assert len(deadline) == 1
    harness.driver.finish(call, StatusCode.OK, "", b"")
    assert deadline[0].cancelled


def test_a_stalled_request_is_cancelled_at_its_last_progress_plus_the_timeout() -> None:
    harness = Harness(options=[("minigrpc.request_stall_timeout_ms", 3000)])
    stream_id = harness.request(body=wire.encode_message(b"x" * 100)[:20], end=False)
    call = harness.call(stream_id)
    assert harness.io.started == []  # a unary handler waits for its whole request
    harness.io.advance(2.0)
    harness.client.send_data(stream_id, b"y" * 10)  # progress: the stall counts from here
    harness.exchange()
    harness.io.advance(2.5)
    assert not call._terminated
    harness.io.advance(0.6)
    harness.exchange()
    assert call._terminated and call._termination_code is StatusCode.CANCELLED
    assert harness.outcome(stream_id)["reset"] == h2.errors.ErrorCodes.CANCEL
    assert harness.io.started == []


def test_a_request_that_completes_cancels_its_stall_check() -> None:
    harness = Harness(options=[("minigrpc.request_stall_timeout_ms", 3000)])
    message = wire.encode_message(b"x" * 100)
    stream_id = harness.request(body=message[:20], end=False)
    harness.client.send_data(stream_id, message[20:], end_stream=True)
    harness.exchange()
    call = harness.call(stream_id)
    assert harness.io.started == [call]
    assert not [t for t in harness.io.pending() if t.callback == harness.driver._check_stall]


def test_a_streamed_request_starts_its_handler_at_once_and_reports_its_messages() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=wire.encode_message(b"one"), end=False)
    call = harness.call(stream_id)
    assert harness.io.started == [call]
    assert ("requests", call) in harness.io.log
    assert harness.driver.take_request(call) == b"one"
    assert harness.driver.take_request(call) is None
    harness.client.send_data(stream_id, wire.encode_message(b"two"), end_stream=True)
    harness.exchange()
    assert call._request_closed
    assert harness.driver.take_request(call) == b"two"


def test_a_client_reset_ends_the_call_cancelled_and_runs_its_callbacks() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    ran: List[bool] = []
    call._add_callback(lambda: ran.append(True))
    harness.client.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
    harness.exchange()
    assert call._termination_code is StatusCode.CANCELLED
    assert harness.io.ended == [(call, False)]
    assert ran == [True]


def test_cancel_resets_the_stream() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    harness.driver.cancel_call(call)
    harness.exchange()
    assert harness.outcome(stream_id)["reset"] == h2.errors.ErrorCodes.CANCEL
    assert call._termination_code is StatusCode.CANCELLED


def test_a_response_over_the_send_limit_ends_the_call_resource_exhausted() -> None:
    harness = Harness(options=[("grpc.max_send_message_length", 4)])
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    assert harness.driver.send_response(call, b"four", True)
    assert not harness.driver.send_response(call, b"fives", True)
    harness.exchange()
    assert harness.outcome(stream_id)["status"] == StatusCode.RESOURCE_EXHAUSTED.number
    assert harness.io.ended == [(call, True)]


def test_coroutine_interceptors_look_the_handler_up_in_the_calls_task() -> None:
    """grpc.aio's interceptors are awaited by the call's task: it starts before admission, and
    the request that completes meanwhile wakes it rather than starting it twice."""
    harness = Harness(awaits_interceptors=True, interceptors=(object(),))
    stream_id = harness.request()
    call = harness.call(stream_id)
    assert harness.io.started == [call] and not call._counted
    assert ("wake", call) not in harness.io.log
    handler = harness.driver.handlers.lookup("/t.S/Unary", ())
    assert harness.driver.admit(call, handler)
    assert call._counted and harness.io.started == [call]
    assert call._request == b"hi"
    streaming = harness.request("/t.S/Stream", body=None, end=False)
    streamed = harness.call(streaming)
    assert harness.driver.admit(streamed, harness.driver.handlers.lookup("/t.S/Stream", ()))
    assert harness.io.started == [call, streamed]


def test_the_connections_end_cancels_its_calls() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    harness.driver.connection_closed(harness.served, "the client closed the connection")
    assert call._termination_code is StatusCode.CANCELLED
    assert harness.driver.active_calls == 0
    assert harness.served not in harness.driver.connections
    assert not harness.io.pending()  # the handshake and idle timers went with it


# -- connections ------------------------------------------------------------------------------


def test_a_client_without_preface_is_closed_at_the_handshake_timeout() -> None:
    harness = Harness(options=[("grpc.server_handshake_timeout_ms", 500)], handshake=False)
    harness.io.advance(0.499)
    assert not harness.io.did("close")
    harness.io.advance(0.002)
    assert harness.io.did("close") and harness.served.closed


def test_a_client_that_completed_its_handshake_is_not_closed_for_it() -> None:
    harness = Harness(options=[("grpc.server_handshake_timeout_ms", 500)])
    harness.io.advance(10)
    assert not harness.io.did("close")


def test_an_idle_connection_drains_then_lingers_then_closes() -> None:
    harness = Harness(options=[("grpc.max_connection_idle_ms", 10_000)])
    stream_id = harness.request()
    harness.io.advance(5)
    harness.driver.finish(harness.call(stream_id), StatusCode.OK, "", b"")
    harness.exchange()
    harness.io.advance(9.9)  # idle since the call ended, 5 s after the connection began
    assert not harness.goaways()
    harness.io.advance(0.2)
    harness.exchange()  # GOAWAY(2^31-1) and a PING; h2 answers the PING: the final GOAWAY
    goaways = harness.goaways()
    assert [g.last_stream_id for g in goaways] == [2**31 - 1, stream_id]
    assert [g.additional_data for g in goaways] == [b"max_idle"] * 2  # gRFC A9
    assert harness.io.did("shutdown") and harness.served.lingering
    assert not harness.served.closed
    harness.io.advance(LINGER_TIMEOUT)
    assert harness.served.closed


def test_an_unanswered_drain_ping_sends_the_final_goaway_after_its_timeout() -> None:
    harness = Harness()
    harness.driver.start_drain(harness.served)
    out = harness.served.protocol.data_to_send()  # the client never sees it: no ACK comes
    assert out
    harness.io.advance(DRAIN_PING_TIMEOUT)
    assert harness.served.protocol.drained


def test_a_connection_the_protocol_closed_lingers_once_flushed() -> None:
    harness = Harness()
    harness.driver.received(harness.served, b"\x00" * 9 + b"garbage that is no frame at all")
    assert harness.served.protocol.closed
    harness.driver.flushed(harness.served, 100, True)  # the GOAWAY still waits for the socket
    assert harness.served.closing and not harness.served.lingering
    harness.driver.flushed(harness.served, 0, False)
    assert harness.served.lingering
    harness.io.advance(LINGER_TIMEOUT)
    assert harness.served.closed


def test_a_flush_that_never_ends_is_cut_after_its_timeout() -> None:
    harness = Harness()
    harness.driver.received(harness.served, b"\x00" * 9 + b"garbage that is no frame at all")
    harness.driver.flushed(harness.served, 100, True)
    harness.io.advance(CLOSE_FLUSH_TIMEOUT - 0.01)
    assert not harness.served.closed
    harness.io.advance(0.02)
    assert harness.served.closed and not harness.served.lingering


def test_a_socket_that_cannot_be_shut_is_closed_at_once() -> None:
    harness = Harness()
    harness.io.shutdown_ok = False
    harness.driver.received(harness.served, b"\x00" * 9 + b"garbage that is no frame at all")
    harness.driver.flushed(harness.served, 0, False)
    assert harness.served.closed


# -- stop -------------------------------------------------------------------------------------


def test_stop_with_grace_drains_and_cuts_what_still_runs_when_it_ends() -> None:
    harness = Harness()
    done = harness.request("/t.S/Stream", body=None, end=False)
    running = harness.request("/t.S/Stream", body=None, end=False)
    harness.driver.stop(5.0)
    harness.exchange()
    assert harness.goaways()[0].last_stream_id == 2**31 - 1
    harness.driver.finish(harness.call(done), StatusCode.OK, "")
    harness.exchange()
    call = harness.call(running)
    harness.io.advance(4.9)
    assert not call._terminated
    harness.io.advance(0.2)
    assert call._termination_code is StatusCode.CANCELLED
    assert harness.io.did("close") and harness.served.closed
    ended = [
        frame.stream_id
        for frame in harness.late_frames
        if isinstance(frame, hyperframe.frame.HeadersFrame) and "END_STREAM" in frame.flags
    ]
    assert ended == [done, running]  # OK for the one that finished, UNAVAILABLE for the other


def test_a_later_stop_shortens_the_grace_but_never_extends_it() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    harness.driver.stop(10.0)
    harness.driver.stop(30.0)
    harness.io.advance(9.0)
    assert not call._terminated
    harness.driver.stop(0.5)
    harness.io.advance(0.6)
    assert call._terminated


# -- listeners --------------------------------------------------------------------------------


class _Listener:
    display = "127.0.0.1:1"


def test_a_listener_out_of_descriptors_rests_and_is_armed_again() -> None:
    harness = Harness()
    listener = _Listener()
    harness.driver.accept_failed(listener, OSError(errno.EMFILE, "Too many open files"))
    assert ("rest", listener) in harness.io.log
    harness.io.advance(1.0)
    assert ("arm", listener) in harness.io.log


def test_a_listener_resting_when_the_server_stops_stays_closed() -> None:
    harness = Harness()
    listener = _Listener()
    harness.driver.accept_failed(listener, OSError(errno.EMFILE, "Too many open files"))
    harness.driver.stop(None)
    harness.io.advance(1.0)
    assert ("arm", listener) not in harness.io.log


def test_an_accept_error_of_one_connection_does_not_rest_the_listener() -> None:
    harness = Harness()
    harness.driver.accept_failed(_Listener(), OSError(errno.ECONNABORTED, "aborted"))
    assert not harness.io.did("rest")


@pytest.mark.parametrize("grace", [None, 0.0])
def test_stop_without_grace_ends_every_call_unavailable(grace: Optional[float]) -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    harness.driver.stop(grace)
    assert call._termination_code is StatusCode.CANCELLED
    assert harness.io.ended == [(call, False)]
    assert harness.served.closed


# -- connection age (gRFC A9) -----------------------------------------------------------------


def _expected_age(seed: int, max_age: float) -> float:
    """The jittered age the driver draws for its first connection from ``Random(seed)``."""
    return max_age * random.Random(seed).uniform(0.9, 1.1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_connection_drains_at_its_jittered_max_age_with_max_age_goaways(seed: int) -> None:
    harness = Harness(options=[("grpc.max_connection_age_ms", 10_000)], rng=random.Random(seed))
    age = _expected_age(seed, 10.0)
    assert 9.0 <= age <= 11.0
    harness.io.advance(age - 0.01)
    harness.exchange()
    assert not harness.goaways()
    harness.io.advance(0.02)
    harness.exchange()  # GOAWAY(2^31-1) and a PING; the ACK brings the final GOAWAY
    goaways = harness.goaways()
    assert [(g.last_stream_id, g.error_code) for g in goaways] == [(2**31 - 1, 0), (0, 0)]
    assert [g.additional_data for g in goaways] == [b"max_age"] * 2
    assert harness.served.lingering  # no call: it ends as a drained connection does


def test_connections_opened_together_get_ages_spread_by_ten_percent() -> None:
    harness = Harness(options=[("grpc.max_connection_age_ms", 100_000)], rng=random.Random(7))
    opened = harness.clock.now
    served = [
        harness.driver.open_connection(f"link{n}", "ipv4:127.0.0.1:1", ("127.0.0.1",), None)
        for n in range(20)
    ]
    ages = [
        timer.when - opened
        for timer in harness.io.pending()
        if timer.callback == harness.driver._check_age and timer.args[0] in served
    ]
    assert len(ages) == 20
    assert all(90.0 <= age <= 110.0 for age in ages)
    assert max(ages) - min(ages) > 5.0  # spread, not all at once


def test_a_call_still_running_after_the_grace_is_cut_unavailable() -> None:
    options = [("grpc.max_connection_age_ms", 10_000), ("grpc.max_connection_age_grace_ms", 2_000)]
    harness = Harness(options=options, rng=random.Random(1))
    age = _expected_age(1, 10.0)
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    ran: List[str] = []
    assert call._add_callback(lambda: ran.append("done"))
    harness.io.advance(age + 0.01)
    harness.exchange()
    assert [g.additional_data for g in harness.goaways()] == [b"max_age"] * 2
    assert not call._terminated and not harness.served.closed  # the grace runs
    harness.io.advance(1.98)
    assert not call._terminated
    harness.io.advance(0.02)
    assert call._termination_code is StatusCode.CANCELLED and ran == ["done"]
    assert harness.served.closed
    trailers = [
        frame
        for frame in harness.late_frames
        if isinstance(frame, hyperframe.frame.HeadersFrame) and frame.stream_id == stream_id
    ]
    assert len(trailers) == 1 and "END_STREAM" in trailers[0].flags, harness.late_frames
    # The server codes header blocks without the dynamic table, so a fresh decoder reads them.
    fields = dict(hpack.Decoder().decode(trailers[0].data, raw=True))
    assert fields[b"grpc-status"] == b"14"  # UNAVAILABLE
    assert fields[b"grpc-message"] == b"max connection age"
    assert harness.goaways()[-1].additional_data == b"max_age"


def test_a_call_that_ends_within_the_grace_is_answered_and_the_connection_drains() -> None:
    options = [("grpc.max_connection_age_ms", 10_000), ("grpc.max_connection_age_grace_ms", 5_000)]
    harness = Harness(options=options, rng=random.Random(1))
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    harness.io.advance(11.1)
    harness.exchange()
    assert len(harness.goaways()) == 2
    harness.driver.finish(harness.call(stream_id), StatusCode.OK, "")
    harness.exchange()
    assert harness.served.lingering
    harness.io.advance(LINGER_TIMEOUT)
    assert harness.served.closed
    assert not [t for t in harness.io.pending() if t.callback == harness.driver._check_age]


def test_without_max_age_no_age_timer_is_armed() -> None:
    harness = Harness()
    assert not [t for t in harness.io.pending() if t.callback == harness.driver._check_age]


# -- keepalive (gRFC A8, A9) ------------------------------------------------------------------


def _pings(frames: List[Any]) -> List[Any]:
    return [
        frame
        for frame in frames
        if isinstance(frame, hyperframe.frame.PingFrame) and "ACK" not in frame.flags
    ]


def test_the_server_pings_a_silent_connection_and_an_answer_keeps_it() -> None:
    options = [("grpc.keepalive_time_ms", 1_000), ("grpc.keepalive_timeout_ms", 500)]
    harness = Harness(options=options)
    harness.io.advance(0.99)
    assert not _pings(_frames(harness.served.outgoing()))
    for _ in range(5):  # each time, a PING after 1 s of silence; the h2 client ACKs it
        harness.io.advance(0.02)
        out = harness.served.outgoing()
        assert len(_pings(_frames(out))) == 1
        harness._deliver(out)
        harness.exchange()
        harness.io.advance(0.98)
    assert not harness.served.closed


def test_a_lingering_connection_gets_no_keepalive_ping() -> None:
    """Its write side is shut (or about to be): a PING could not go out, and the linger's own
    timeout ends it."""
    options = [("grpc.keepalive_time_ms", 600), ("grpc.max_connection_idle_ms", 500)]
    harness = Harness(options=options)
    harness.io.advance(0.5)
    harness.exchange()  # the idle drain's GOAWAYs; the client's ACK is its last word
    assert harness.served.lingering and not harness.served.closed
    harness.io.advance(0.7)  # past the PING's time (0.5 + 0.6), within the linger (1 s)
    assert not harness.served.closed
    assert not _pings(_frames(harness.served.outgoing()))


def test_a_client_that_does_not_answer_the_keepalive_ping_is_cut_with_its_calls() -> None:
    options = [("grpc.keepalive_time_ms", 1_000), ("grpc.keepalive_timeout_ms", 500)]
    harness = Harness(options=options)
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    ran: List[str] = []
    assert call._add_callback(lambda: ran.append("done"))
    harness.io.advance(1.01)
    assert len(_pings(_frames(harness.served.outgoing()))) == 1  # never delivered
    harness.io.advance(0.48)
    assert not harness.served.closed and not call._terminated
    harness.io.advance(0.02)
    assert harness.served.closed and harness.io.did("close")
    assert call._termination_code is StatusCode.CANCELLED and ran == ["done"]
    goaway = harness.goaways()[-1]
    assert (goaway.error_code, goaway.additional_data) == (
        h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, b"ping_timeout"
    )


def test_any_bytes_after_the_ping_count_as_life() -> None:
    """gRFC A8: the time without receiving any bytes, not the ACK alone."""
    options = [("grpc.keepalive_time_ms", 1_000), ("grpc.keepalive_timeout_ms", 500)]
    harness = Harness(options=options)
    harness.io.advance(1.01)
    harness.served.outgoing()  # the PING, never delivered
    harness.io.advance(0.4)
    harness.request()  # a call instead of the ACK
    harness.io.advance(0.4)
    assert not harness.served.closed


def _frames(data: bytes) -> List[Any]:
    frames = []
    view = memoryview(data)
    while view:
        frame, length = hyperframe.frame.Frame.parse_frame_header(view[:9])
        frame.parse_body(view[9 : 9 + length])
        frames.append(frame)
        view = view[9 + length :]
    return frames


def _ping_every(harness: Harness, interval: float, count: int) -> int:
    """The client PINGs ``count`` times, ``interval`` apart; how many went out before the server
    sent GOAWAY (all of them if it never did)."""
    for number in range(count):
        if harness.goaways():
            return number
        harness.client.ping(number.to_bytes(8, "big"))
        harness.exchange()
        harness.io.advance(interval)
    return count


def test_the_fourth_ping_in_quick_succession_is_sent_away_as_grpcio_does() -> None:
    harness = Harness(options=[("grpc.keepalive_permit_without_calls", 1)])
    assert _ping_every(harness, 0.01, 10) == 4
    goaway = harness.goaways()[0]
    assert (goaway.error_code, goaway.additional_data) == (
        h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, b"too_many_pings"
    )
    assert harness.served.protocol.closed


def test_max_ping_strikes_sets_how_many_pings_are_sent_away() -> None:
    options = [("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_ping_strikes", 5)]
    harness = Harness(options=options)
    assert _ping_every(harness, 0.01, 20) == 7


def test_pings_within_the_policy_are_left_alone() -> None:
    options = [
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 50),
    ]
    harness = Harness(options=options)
    assert _ping_every(harness, 0.1, 30) == 30
    assert not harness.served.protocol.closed


def test_without_calls_or_permission_pings_minutes_apart_are_strikes() -> None:
    """No call open and no ``grpc.keepalive_permit_without_calls``: 2 hours (grpc core)."""
    harness = Harness(options=[("grpc.http2.min_ping_interval_without_data_ms", 50)])
    assert _ping_every(harness, 60.0, 10) == 4


def test_responses_between_pings_forgive_the_strikes() -> None:
    harness = Harness()
    stream_id = harness.request("/t.S/Stream", body=None, end=False)
    call = harness.call(stream_id)
    for number in range(10):  # ten PINGs 10 ms apart, each after a response message
        assert harness.driver.send_response(call, b"tick", False)
        harness.exchange()
        harness.client.ping(number.to_bytes(8, "big"))
        harness.exchange()
        harness.io.advance(0.01)
    assert not harness.goaways()
    assert not harness.served.protocol.closed
