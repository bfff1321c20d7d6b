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
from tests.support.channel_peers import APIS, server_module

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
        return f"<Attempt {self.key}#{self.index} prev={self.previous} on {self.server}>"


class Hedged:
    """The handlers: ``x-key`` names the call, ``x-plan`` says what each attempt does, by
    attempt number: ``ok`` (answer at once), ``slow`` (wait for the cancellation, up to
    :data:`SLOW`, then answer) or a status code name (fail at once, Trailers-Only)."""

    def __init__(self, grpc: Any, name: str, shared: "Optional[Hedged]" = None) -> None:
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
            for request in requests:
                with changed:
                    attempt.requests.append(request)
                    changed.notify_all()
        if action == "slow":
            # The call's callbacks run when it terminates: before the handler returned, only a
            # cancellation does that.
            terminated = threading.Event()
            context.add_callback(terminated.set)
            if terminated.wait(SLOW):
                with changed:
                    attempt.cancelled = True
                    changed.notify_all()
                context.abort(self.grpc.StatusCode.CANCELLED, "cancelled")
        elif action != "ok":
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
        grpc = self.grpc
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Unary": grpc.unary_unary_rpc_method_handler(self.unary),
            "Stream": grpc.unary_stream_rpc_method_handler(self.stream),
            "Collect": grpc.stream_unary_rpc_method_handler(self.collect),
            "Chat": grpc.stream_stream_rpc_method_handler(self.chat),
        })


class Server:
    """A started server of :class:`Hedged` on a port of 127.0.0.1."""

    def __init__(self, implementation: str, name: str = "server",
                 shared: Optional[Hedged] = None) -> None:
        self.implementation = implementation
        grpc = server_module(implementation)
        self.hedged = Hedged(grpc, name, shared)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((self.hedged.handler(),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
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
