"""Hedging (gRFC A6, "Hedging Policy") on both APIs and all four call shapes, against grpcio's and
minigrpc's servers.

A method's ``hedgingPolicy`` comes from ``grpc.service_config`` with
``grpc.experimental.enable_hedging``.  The server's handler behaves by the attempt it serves:
the n-th attempt of a call (its ``grpc-previous-rpc-attempts``, which grpcio's server shows its
handlers; minigrpc's keeps ``grpc-*`` headers from them, and there the n-th arrival of the
call's key is its n-th attempt, since hedges go out one ``hedgingDelay`` apart) answers at once,
fails with a status, or is slow: it waits until its call is cancelled (its ``add_callback``
runs), or for long.  Every attempt and every cancellation is recorded, and tests wait on those
records, never on a timer; timings are bounds with generous margins.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from concurrent import futures
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import minigrpc
from minigrpc import aio
from tests.support.channel_peers import APIS, four_methods, free_port, server_module

pytestmark = [pytest.mark.timeout(60)]

SERVICE = "test.Hedged"
UNARY = f"/{SERVICE}/Unary"
STREAM = f"/{SERVICE}/Stream"
COLLECT = f"/{SERVICE}/Collect"
CHAT = f"/{SERVICE}/Chat"
SHAPES = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
METHODS = {"unary_unary": UNARY, "unary_stream": STREAM, "stream_unary": COLLECT,
           "stream_stream": CHAT}

#: How long a slow attempt waits for its cancellation before it answers anyway.
SLOW = 8.0


class Attempt:
    """One attempt as a server saw it."""

    def __init__(self, key: str, index: int, previous: Optional[str], server: str) -> None:
        self.key = key
        self.index = index
        self.previous = previous
        self.server = server
        self.requests: List[bytes] = []
        self.cancelled = False
        self.arrived_at = time.monotonic()

    def __repr__(self) -> str:
        return (f"<Attempt {self.key}#{self.index} prev={self.previous} on {self.server}: "
                f"{len(self.requests)} requests, {'' if self.cancelled else 'not '}cancelled>")


class Hedged:
    """The handlers: ``x-key`` names the call, ``x-plan`` says what each attempt does, by
    attempt number: ``ok`` (answer at once), ``slow`` (wait for the cancellation, up to
    :data:`SLOW`, then answer) or a status code name (fail at once, Trailers-Only)."""

    def __init__(self, grpc: Any, name: str, shared: Optional[Hedged] = None) -> None:
        self.grpc = grpc
        self.name = name
        #: Servers of one test share their records (round_robin spreads a call's attempts).
        self.book: Dict[str, Any] = shared.book if shared is not None else {
            "attempts": [], "counts": collections.Counter(),
            "changed": threading.Condition()}

    @property
    def attempts(self) -> List[Attempt]:
        attempts: List[Attempt] = self.book["attempts"]
        return attempts

    def of(self, key: str) -> List[Attempt]:
        with self.book["changed"]:
            return [attempt for attempt in self.attempts if attempt.key == key]

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> bool:
        with self.book["changed"]:
            return bool(self.book["changed"].wait_for(predicate, timeout))

    def _plan(self, context: Any, requests: Optional[Iterator[bytes]]) -> Tuple[Attempt, str]:
        metadata = {key: value for key, value in context.invocation_metadata()
                    if isinstance(value, str)}
        key = metadata.get("x-key", "")
        previous = metadata.get("grpc-previous-rpc-attempts")
        changed = self.book["changed"]
        # The call's callbacks run when it terminates: before the handler returned, only a
        # cancellation does that (and one that came first refuses the callback).
        terminated = threading.Event()
        if not context.add_callback(terminated.set):
            terminated.set()
        with changed:
            index = self.book["counts"][key]
            self.book["counts"][key] += 1
            attempt = Attempt(key, index, previous, self.name)
            self.attempts.append(attempt)
            changed.notify_all()
        number = int(previous) if previous is not None else index
        plan = metadata.get("x-plan", "ok").split(",")
        action = plan[number] if number < len(plan) else plan[-1]
        if requests is not None:
            try:
                for request in requests:
                    with changed:
                        attempt.requests.append(request)
                        changed.notify_all()
            except Exception:  # the request stream of a cancelled call
                if not terminated.wait(SLOW):
                    raise
        if (action == "slow" and terminated.wait(SLOW)) or terminated.is_set():
            with changed:
                attempt.cancelled = True
                changed.notify_all()
            context.abort(self.grpc.StatusCode.CANCELLED, "cancelled")
        elif action != "ok":
            if "x-pushback" in metadata:
                context.set_trailing_metadata(
                    (("grpc-retry-pushback-ms", metadata["x-pushback"]),))
            context.abort(getattr(self.grpc.StatusCode, action), f"attempt {number}")
        context.send_initial_metadata((("x-server", self.name), ("x-attempt", str(number))))
        return attempt, action

    def unary(self, request: bytes, context: Any) -> bytes:
        self._plan(context, None)
        return request

    def stream(self, request: bytes, context: Any) -> Iterator[bytes]:
        self._plan(context, None)
        for _ in range(3):
            yield request

    def collect(self, requests: Iterator[bytes], context: Any) -> bytes:
        attempt, _ = self._plan(context, requests)
        return b"".join(attempt.requests)

    def chat(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        attempt, _ = self._plan(context, requests)
        yield from attempt.requests

    def handler(self) -> Any:
        return four_methods(self.grpc, SERVICE, self)


class Server:
    """A started server of :class:`Hedged` on a port of 127.0.0.1."""

    def __init__(self, implementation: str, name: str = "server",
                 shared: Optional[Hedged] = None, port: int = 0) -> None:
        self.implementation = implementation
        grpc = server_module(implementation)
        self.hedged = Hedged(grpc, name, shared)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((self.hedged.handler(),))
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.stop(0).wait(30)


@pytest.fixture(params=["minigrpc", "grpcio"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "grpcio":
        from tests.peers import grpcio_in_process

        if not grpcio_in_process():
            pytest.skip("needs grpcio in this process")
    started = Server(request.param)
    yield started
    started.stop()


def config(max_attempts: int = 3, delay: str = "0.5s", codes: Any = ("UNAVAILABLE",),
           **top: Any) -> str:
    return json.dumps({"methodConfig": [{
        "name": [{"service": SERVICE}],
        "hedgingPolicy": {"maxAttempts": max_attempts, "hedgingDelay": delay,
                          "nonFatalStatusCodes": list(codes)},
    }], **top})


def options(text: str, *more: Any) -> List[Any]:
    return [("grpc.service_config", text), ("grpc.experimental.enable_hedging", 1), *more]


class Outcome:
    """How one call ended, whichever API and shape made it."""

    def __init__(self, code: str, responses: List[bytes], initial: Dict[str, Any],
                 elapsed: float) -> None:
        self.code = code
        self.responses = responses
        self.initial = initial
        self.elapsed = elapsed

    def __repr__(self) -> str:
        return f"<Outcome {self.code} {self.responses} {self.initial} {self.elapsed:.3f}s>"


REQUESTS = [b"a", b"b", b"c"]


def _blocking(target: str, opts: Any, shape: str, key: str, plan: str,
              timeout: Optional[float]) -> Outcome:
    metadata = (("x-key", key), ("x-plan", plan))
    started = time.monotonic()
    with minigrpc.insecure_channel(target, options=opts) as channel:
        multicallable = getattr(channel, shape)(METHODS[shape])
        request: Any = iter(REQUESTS) if shape.startswith("stream") else b"one"
        try:
            if shape.endswith("unary"):
                response, call = multicallable.with_call(request, timeout=timeout,
                                                         metadata=metadata)
                responses = [response]
            else:
                call = multicallable(request, timeout=timeout, metadata=metadata)
                responses = list(call)
        except minigrpc.RpcError as error:
            return Outcome(error.code().name, [], dict(error.initial_metadata() or ()),
                           time.monotonic() - started)
        return Outcome("OK", responses, dict(call.initial_metadata()),
                       time.monotonic() - started)


def _aio(target: str, opts: Any, shape: str, key: str, plan: str,
         timeout: Optional[float]) -> Outcome:
    metadata = (("x-key", key), ("x-plan", plan))

    async def main() -> Outcome:
        started = time.monotonic()
        async with aio.insecure_channel(target, options=opts) as channel:
            multicallable = getattr(channel, shape)(METHODS[shape])
            request: Any = iter(REQUESTS) if shape.startswith("stream") else b"one"
            call = multicallable(request, timeout=timeout, metadata=metadata)
            try:
                if shape.endswith("unary"):
                    responses = [await call]
                else:
                    responses = [response async for response in call]
            except aio.AioRpcError as error:
                return Outcome(error.code().name, [], dict(error.initial_metadata() or ()),
                               time.monotonic() - started)
            return Outcome("OK", responses, dict(await call.initial_metadata()),
                           time.monotonic() - started)

    return asyncio.run(main())


def hedged_call(api: str, target: str, opts: Any, shape: str, key: str, plan: str,
                timeout: Optional[float] = 20) -> Outcome:
    run = _blocking if api == "blocking" else _aio
    return run(target, opts, shape, key, plan, timeout)


def expected(shape: str) -> List[bytes]:
    if shape == "unary_unary":
        return [b"one"]
    if shape == "unary_stream":
        return [b"one"] * 3
    if shape == "stream_unary":
        return [b"".join(REQUESTS)]
    return list(REQUESTS)


# -- the first answer wins ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
def test_a_slow_first_attempt_is_overtaken_by_the_hedge(api: str, shape: str,
                                                         server: Server) -> None:
    """Attempt 0 is slow, attempt 1 (0.3 s later) answers at once: the call answers from
    attempt 1 long before attempt 0 would, and attempt 0's handler sees its cancellation; a
    stream's requests reach both attempts."""
    key = f"overtaken-{api}-{shape}"
    outcome = hedged_call(api, server.target, options(config(delay="0.3s")), shape, key,
                          "slow,ok")
    assert outcome.code == "OK", outcome
    assert outcome.responses == expected(shape)
    assert outcome.initial.get("x-attempt") == "1", outcome
    assert 0.25 <= outcome.elapsed < SLOW / 2, outcome
    hedged = server.hedged
    assert hedged.wait_for(lambda: any(a.cancelled for a in hedged.attempts if a.key == key))
    attempts = hedged.of(key)
    assert len(attempts) == 2, attempts
    if server.implementation == "grpcio":
        assert [a.previous for a in attempts] == [None, "1"]
    if shape.startswith("stream"):
        assert [a.requests for a in attempts] == [REQUESTS, REQUESTS]


# -- statuses --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
def test_a_non_fatal_status_sends_the_next_hedge_at_once(api: str, shape: str,
                                                          server: Server) -> None:
    """Two UNAVAILABLE answers, then OK: with a delay of 10 s, the three attempts go out one
    after the other's end, not after the delay (gRFC A6)."""
    key = f"non-fatal-{api}-{shape}"
    outcome = hedged_call(api, server.target, options(config(delay="10s")), shape, key,
                          "UNAVAILABLE,UNAVAILABLE,ok")
    assert outcome.code == "OK", outcome
    assert outcome.responses == expected(shape)
    assert outcome.elapsed < 5.0, outcome
    assert len(server.hedged.of(key)) == 3


@pytest.mark.parametrize("api", APIS)
def test_a_fatal_status_ends_the_call_and_cancels_the_others(api: str, server: Server) -> None:
    """Attempt 0 is slow, attempt 1 fails INTERNAL (not in nonFatalStatusCodes): the call ends
    INTERNAL at once, attempt 0 is cancelled, and no third attempt goes out (it would, a
    second later)."""
    key = f"fatal-{api}"
    outcome = hedged_call(api, server.target, options(config(delay="1s")), "unary_unary",
                          key, "slow,INTERNAL,ok")
    assert outcome.code == "INTERNAL", outcome
    assert outcome.elapsed < SLOW / 2, outcome
    hedged = server.hedged
    assert hedged.wait_for(lambda: any(a.cancelled for a in hedged.of(key)))
    assert len(hedged.of(key)) == 2


@pytest.mark.parametrize("shape", ("unary_unary", "stream_stream"))
@pytest.mark.parametrize("api", APIS)
def test_max_attempts_bounds_the_attempts(api: str, shape: str, server: Server) -> None:
    key = f"bounded-{api}-{shape}"
    outcome = hedged_call(api, server.target, options(config(max_attempts=4, delay="0.05s")),
                          shape, key, "UNAVAILABLE")
    assert outcome.code == "UNAVAILABLE", outcome
    assert len(server.hedged.of(key)) == 4


@pytest.mark.parametrize("api", APIS)
def test_enable_retries_zero_turns_hedging_off(api: str, server: Server) -> None:
    key = f"off-{api}"
    opts = options(config(delay="0.05s"), ("grpc.enable_retries", 0))
    outcome = hedged_call(api, server.target, opts, "unary_unary", key, "UNAVAILABLE,ok")
    assert outcome.code == "UNAVAILABLE", outcome
    assert len(server.hedged.of(key)) == 1


# -- the deadline and cancellation -----------------------------------------------------------


@pytest.mark.parametrize("shape", ("unary_unary", "unary_stream"))
@pytest.mark.parametrize("api", APIS)
def test_the_deadline_spans_every_attempt(api: str, shape: str, server: Server) -> None:
    """Every attempt is slow: the call ends DEADLINE_EXCEEDED at its deadline, and every
    attempt's handler sees its cancellation."""
    key = f"deadline-{api}-{shape}"
    outcome = hedged_call(api, server.target, options(config(delay="0.2s")), shape, key,
                          "slow", timeout=1.0)
    assert outcome.code == "DEADLINE_EXCEEDED", outcome
    assert 0.95 <= outcome.elapsed < SLOW / 2, outcome
    assert_cancelled(server, key)


def _wait_for_attempts(server: Server, key: str, count: int = 3) -> None:
    hedged = server.hedged
    assert hedged.wait_for(lambda: len(hedged.of(key)) >= count), hedged.of(key)


async def attempts_out(server: Server, key: str) -> None:
    """Wait (off the event loop) until the server saw the call's three attempts."""
    await asyncio.get_running_loop().run_in_executor(None, _wait_for_attempts, server, key)


def slow(key: str) -> Tuple[Tuple[str, str], ...]:
    """The metadata of a call whose every attempt is slow."""
    return (("x-key", key), ("x-plan", "slow"))


def assert_cancelled(server: Server, key: str, count: int = 3) -> None:
    """``count`` attempts of the call ``key`` saw their cancellation."""
    hedged = server.hedged
    assert hedged.wait_for(lambda: sum(a.cancelled for a in hedged.of(key)) == count), \
        hedged.of(key)


@pytest.mark.parametrize("shape", ("unary_stream", "stream_stream"))
def test_a_blocking_cancel_cancels_every_attempt(shape: str, server: Server) -> None:
    key = f"cancel-blocking-{shape}"
    metadata = slow(key)
    with minigrpc.insecure_channel(server.target,
                                   options=options(config(delay="0.1s"))) as channel:
        request: Any = iter(REQUESTS) if shape.startswith("stream") else b"one"
        call = getattr(channel, shape)(METHODS[shape])(request, metadata=metadata, timeout=20)
        _wait_for_attempts(server, key)
        assert call.cancel()
        assert call.code() is minigrpc.StatusCode.CANCELLED
        assert_cancelled(server, key)


def test_a_blocking_future_cancel_cancels_every_attempt(server: Server) -> None:
    key = "cancel-future"
    metadata = slow(key)
    with minigrpc.insecure_channel(server.target,
                                   options=options(config(delay="0.1s"))) as channel:
        future = channel.unary_unary(UNARY).future(b"one", metadata=metadata, timeout=20)
        _wait_for_attempts(server, key)
        assert future.cancel()
        assert future.cancelled()
        assert_cancelled(server, key)


@pytest.mark.parametrize("shape", ("unary_unary", "stream_stream"))
def test_an_asyncio_cancel_cancels_every_attempt(shape: str, server: Server) -> None:
    key = f"cancel-aio-{shape}"
    metadata = slow(key)

    async def main() -> None:
        async with aio.insecure_channel(server.target,
                                        options=options(config(delay="0.1s"))) as channel:
            request: Any = iter(REQUESTS) if shape.startswith("stream") else b"one"
            call = getattr(channel, shape)(METHODS[shape])(request, metadata=metadata,
                                                           timeout=20)
            await attempts_out(server, key)
            assert call.cancel()
            assert await call.code() is minigrpc.StatusCode.CANCELLED

    asyncio.run(main())
    assert_cancelled(server, key)


def test_an_asyncio_task_cancelled_cancels_every_attempt(server: Server) -> None:
    key = "cancel-aio-task"
    metadata = slow(key)

    async def main() -> None:
        async with aio.insecure_channel(server.target,
                                        options=options(config(delay="0.1s"))) as channel:
            task = asyncio.ensure_future(
                channel.unary_unary(UNARY)(b"one", metadata=metadata, timeout=20))
            await attempts_out(server, key)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert_cancelled(server, key)


# -- several servers -------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_round_robin_spreads_the_hedges(api: str, server: Server) -> None:
    """Three servers under round_robin: the attempts of a call land on several of them (the
    first one picks among the connections ready by then), and the call answers from the last
    (the two before are slow)."""
    others = [Server(server.implementation, name, shared=server.hedged)
              for name in ("second", "third")]
    try:
        ports = [server.port] + [other.port for other in others]
        target = "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)
        text = config(delay="0.3s", loadBalancingConfig=[{"round_robin": {}}])
        key = f"spread-{api}"
        outcome = hedged_call(api, target, options(text), "unary_unary", key, "slow,slow,ok")
        assert outcome.code == "OK", outcome
        assert outcome.initial.get("x-attempt") == "2"
        attempts = server.hedged.of(key)
        assert len(attempts) == 3, attempts
        assert attempts[1].server != attempts[2].server, attempts
        assert_cancelled(server, key, 2)
    finally:
        for other in others:
            other.stop()


def test_closing_a_blocking_channel_cancels_every_attempt(server: Server) -> None:
    key = "close-blocking"
    metadata = slow(key)
    channel = minigrpc.insecure_channel(server.target, options=options(config(delay="0.1s")))
    call = channel.unary_stream(STREAM)(b"one", metadata=metadata, timeout=20)
    _wait_for_attempts(server, key)
    channel.close()
    assert call.code() is minigrpc.StatusCode.CANCELLED
    assert_cancelled(server, key)


def test_closing_an_asyncio_channel_cancels_every_attempt(server: Server) -> None:
    key = "close-aio"
    metadata = slow(key)

    async def main() -> None:
        channel = aio.insecure_channel(server.target, options=options(config(delay="0.1s")))
        call = channel.unary_unary(UNARY)(b"one", metadata=metadata, timeout=20)
        await attempts_out(server, key)
        await channel.close()
        assert await call.code() is minigrpc.StatusCode.CANCELLED

    asyncio.run(main())
    assert_cancelled(server, key)


@pytest.mark.parametrize("api", APIS)
def test_server_pushback_stops_the_hedges(api: str, server: Server) -> None:
    """A negative ``grpc-retry-pushback-ms`` on a non-fatal status: no further hedge goes out,
    and the call ends with that status (minigrpc's server lets no handler set a grpc-*
    trailer)."""
    if server.implementation == "minigrpc":
        pytest.skip("minigrpc's server lets no handler set a grpc-* trailer")
    key = f"pushback-{api}"
    metadata = (("x-key", key), ("x-plan", "UNAVAILABLE"), ("x-pushback", "-1"))
    opts = options(config(delay="0.2s"))
    if api == "blocking":
        with minigrpc.insecure_channel(server.target, options=opts) as channel:
            with pytest.raises(minigrpc.RpcError) as raised:
                channel.unary_unary(UNARY)(b"one", metadata=metadata, timeout=20)
            code = raised.value.code()
    else:
        async def main() -> Any:
            async with aio.insecure_channel(server.target, options=opts) as channel:
                call = channel.unary_unary(UNARY)(b"one", metadata=metadata, timeout=20)
                return await call.code()

        code = asyncio.run(main())
    assert code is minigrpc.StatusCode.UNAVAILABLE
    assert len(server.hedged.of(key)) == 1


def test_a_blocking_call_waiting_for_ready_waits_for_the_server() -> None:
    """No server yet: a call that does not wait for ready fails UNAVAILABLE (every hedge does);
    one that waits is still running while the channel is in TRANSIENT_FAILURE, and answers once
    the server is up."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    opts = options(config(delay="0.2s"))
    assert hedged_call("blocking", target, opts, "unary_unary", "not-ready", "ok",
                       timeout=5).code == "UNAVAILABLE"
    with minigrpc.insecure_channel(target, options=opts) as channel:
        failing = threading.Event()
        channel.subscribe(
            lambda state: state is minigrpc.ChannelConnectivity.TRANSIENT_FAILURE
            and failing.set())
        future = channel.unary_unary(UNARY).future(b"one", metadata=(("x-key", "ready"),),
                                                   timeout=20, wait_for_ready=True)
        assert failing.wait(10)
        assert not future.done()
        server = Server("minigrpc", port=port)
        try:
            assert future.result(20) == b"one"
        finally:
            server.stop()


def test_an_asyncio_call_waiting_for_ready_waits_for_the_server() -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    opts = options(config(delay="0.2s"))
    assert hedged_call("aio", target, opts, "unary_unary", "not-ready", "ok",
                       timeout=5).code == "UNAVAILABLE"
    servers: List[Server] = []

    async def main() -> bytes:
        async with aio.insecure_channel(target, options=opts) as channel:
            call = channel.unary_unary(UNARY)(b"one", metadata=(("x-key", "ready"),),
                                              timeout=20, wait_for_ready=True)
            state = channel.get_state(try_to_connect=False)
            while state is not minigrpc.ChannelConnectivity.TRANSIENT_FAILURE:
                await channel.wait_for_state_change(state)
                state = channel.get_state(try_to_connect=False)
            assert not call.done()
            servers.append(await asyncio.get_running_loop().run_in_executor(
                None, lambda: Server("minigrpc", port=port)))
            response: bytes = await call
            return response

    try:
        assert asyncio.run(main()) == b"one"
    finally:
        for server in servers:
            server.stop()


@pytest.mark.parametrize("api", APIS)
def test_a_request_outgrowing_the_buffer_commits_the_call_to_its_oldest_attempt(
    api: str, server: Server
) -> None:
    """Two attempts have the first (small) message when a message larger than the call's
    retry buffer comes: the call is committed to attempt 0, attempt 1 is cancelled (its
    server sees it), and attempt 0 gets the whole request and answers."""
    key = f"outgrown-{api}"
    metadata = (("x-key", key), ("x-plan", "ok,slow"))
    opts = options(config(max_attempts=2, delay="0.1s"),
                   ("grpc.per_rpc_retry_buffer_size", 1000))
    small, big = b"s" * 10, b"b" * 2000
    hedged = server.hedged

    def both_have_the_first() -> bool:
        attempts = hedged.of(key)
        return len(attempts) == 2 and all(attempt.requests for attempt in attempts)

    if api == "blocking":
        def requests() -> Iterator[bytes]:
            yield small
            assert hedged.wait_for(both_have_the_first)
            yield big

        with minigrpc.insecure_channel(server.target, options=opts) as channel:
            call = channel.stream_stream(CHAT)(requests(), metadata=metadata, timeout=20)
            responses = list(call)
            initial = dict(call.initial_metadata())
    else:
        async def main() -> Tuple[List[bytes], Dict[str, Any]]:
            async with aio.insecure_channel(server.target, options=opts) as channel:
                call = channel.stream_stream(CHAT)(metadata=metadata, timeout=20)
                await call.write(small)
                assert await asyncio.get_running_loop().run_in_executor(
                    None, hedged.wait_for, both_have_the_first)
                await call.write(big)
                await call.done_writing()
                answered = [response async for response in call]
                return answered, dict(await call.initial_metadata())

        responses, initial = asyncio.run(main())
    assert responses == [small, big]
    assert initial.get("x-attempt") == "0"
    assert_cancelled(server, key, 1)
    assert [attempt.cancelled for attempt in hedged.of(key)] == [False, True]
