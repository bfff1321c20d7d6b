"""minigrpc's client against a hostile server.

Every scenario of :func:`tests.hostile.scenarios.client_scenarios` runs against a real socket
peer
that breaks one rule. The call must end with the documented StatusCode (PROTOCOL-HTTP2.md,
doc/statuscodes.md and doc/http-grpc-status-mapping.md; the
scenario names the section), within its deadline, or on its own when it has none; nothing may
hang, print a traceback or leak a thread or a socket, and the same channel must succeed on the
next call once the peer behaves.

``HOSTILE_CLIENT=grpcio`` runs the same scenarios with grpcio's client instead, as a reference
for what a mature implementation does (a development aid; some grpc-go-documented codes differ).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from tests.hostile.scenarios import ClientScenario, client_scenarios, record_observation
from tests.support.scripted_peer import ResourceSnapshot, ScriptedServer

CLIENT_IMPL = os.environ.get("HOSTILE_CLIENT", "minigrpc")

if CLIENT_IMPL == "grpcio":
    grpc: Any = pytest.importorskip("grpc")
    RpcError: Any = grpc.RpcError
else:
    try:
        import minigrpc
        import minigrpc.blocking.channel

        grpc = minigrpc
        RpcError = minigrpc.RpcError
    except Exception as exc:  # ImportError, or a half-written module
        pytest.skip(f"minigrpc's client is not available yet: {exc!r}", allow_module_level=True)

PATH = "/hostile.Peer/Call"
#: A call with no deadline that has not ended after this long is a hang (a failure).
HANG_LIMIT = 10.0
#: How far past its deadline a DEADLINE_EXCEEDED may arrive (scheduling on a loaded CI box).
DEADLINE_SLACK = 3.0

SCENARIOS = client_scenarios()

#: Scenarios whose failure is a known bug, with the fix; filled in by the lead when a fix lands.
#: A listed scenario still runs and must still pass or fail exactly as stated.
KNOWN_BUGS: Dict[str, Tuple[str, str]] = {}

#: Scenarios that exposed a bug which is now fixed: scenario -> the fix (for docs/robustness.md).
FIXED_BUGS: Dict[str, str] = {
    "garbage_preface_then_hang": (
        "an HTTP/1.1 answer on a socket kept open hung a call without deadline (h2 waited for"
        " the 4.7 MB 'frame' the text encodes); fixed: the server's first frame must be"
        " SETTINGS (RFC 9113 §3.4), checked on its 9-byte header (http2.frames.FrameReader,"
        " for both ends and the one-shot client)"
    ),
    "header_block_over_call_limit": (
        "20 kB response headers were accepted; fixed: response headers and trailers are"
        " checked against http2.CALL_MAX_HEADER_LIST_SIZE, over it INTERNAL"
    ),
}


def fix_of(name: str) -> str:
    if name in KNOWN_BUGS:
        return KNOWN_BUGS[name][1]
    return FIXED_BUGS.get(name, "")


def _identity(data: bytes) -> bytes:
    return data


def run_bounded(fn: Callable[[], Any], limit: float) -> Tuple[str, Any, float]:
    """Run ``fn`` in a thread; ("ok", value) / ("error", exc) / ("hung", None), and seconds."""
    result: List[Any] = []

    def target() -> None:
        try:
            result.append(("ok", fn()))
        except BaseException as exc:
            result.append(("error", exc))

    start = time.monotonic()
    worker = threading.Thread(target=target, name="hostile-client-call", daemon=True)
    worker.start()
    worker.join(limit)
    elapsed = time.monotonic() - start
    if not result:
        return "hung", None, elapsed
    kind, value = result[0]
    return kind, value, elapsed


def outcome_code(kind: str, value: Any) -> str:
    if kind == "ok":
        return "OK"
    if kind == "hung":
        return "HUNG"
    if isinstance(value, RpcError) and hasattr(value, "code"):
        return str(value.code().name)
    return f"raised {type(value).__name__}: {value}"


@pytest.fixture
def thread_exceptions() -> Iterator[List[Any]]:
    """Exceptions that escaped any thread (a traceback the user would see)."""
    caught: List[Any] = []
    if not hasattr(threading, "excepthook"):
        # Python 3.7 has no threading.excepthook: catch what escapes Thread.run instead.
        previous_run = threading.Thread.run

        def run(self: threading.Thread) -> None:
            try:
                previous_run(self)
            except BaseException as exc:
                caught.append(exc)
                raise

        threading.Thread.run = run  # type: ignore[method-assign]
        try:
            yield caught
        finally:
            threading.Thread.run = previous_run  # type: ignore[method-assign]
        return
    previous = threading.excepthook

    def hook(args: Any) -> None:
        caught.append(args)

    threading.excepthook = hook
    try:
        yield caught
    finally:
        threading.excepthook = previous


def _params() -> List[Any]:
    params = []
    for scenario in SCENARIOS:
        marks = []
        if scenario.name in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[scenario.name][0]))
        params.append(pytest.param(scenario, True, id=f"{scenario.name}-deadline", marks=marks))
        if not scenario.deadline_only:
            params.append(
                pytest.param(scenario, False, id=f"{scenario.name}-nodeadline", marks=marks)
            )
    return params


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("scenario", "with_deadline"), _params())
def test_client_scenario(
    scenario: ClientScenario,
    with_deadline: bool,
    request: pytest.FixtureRequest,
    capfd: pytest.CaptureFixture[str],
    thread_exceptions: List[Any],
) -> None:
    run_client_scenario(scenario, with_deadline, False, request, capfd, thread_exceptions)


class AioChannel:
    """minigrpc.aio's channel behind the blocking shape the scenarios drive: its event loop
    runs in a thread of its own, joined on ``close()``, and each call is one coroutine."""

    def __init__(self, target: str) -> None:
        import asyncio

        from minigrpc import aio

        self._asyncio = asyncio
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="aio-loop")
        self._thread.start()

        async def make() -> Any:
            return aio.insecure_channel(target)

        self._channel = self._run(make())

    def _run(self, coroutine: Any) -> Any:
        return self._asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def unary_unary(self, path: str, **serializers: Any) -> Callable[..., Any]:
        def call(request: bytes, timeout: Optional[float] = None) -> Any:
            async def invoke() -> Any:
                return await self._channel.unary_unary(path, **serializers)(
                    request, timeout=timeout
                )

            return self._run(invoke())

        return call

    def close(self) -> None:
        self._run(self._channel.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "scenario", [pytest.param(s, id=s.name) for s in SCENARIOS if s.name not in KNOWN_BUGS]
)
def test_aio_client_scenario(
    scenario: ClientScenario,
    request: pytest.FixtureRequest,
    capfd: pytest.CaptureFixture[str],
    thread_exceptions: List[Any],
) -> None:
    """The same scenarios, with a deadline, against minigrpc.aio's client."""
    if CLIENT_IMPL != "minigrpc":
        pytest.skip("the asyncio variant runs minigrpc's client only")
    run_client_scenario(scenario, True, False, request, capfd, thread_exceptions, AioChannel)


#: Scenarios where TCP differs from a unix socket (FIN/RST timing, Nagle, half-close).
TCP_SCENARIOS = (
    "close_before_preface", "garbage_preface_then_close", "length_prefix_cut_then_eof",
    "goaway_then_close_mid_response", "never_answers", "one_byte_at_a_time", "rst_stream_0x08",
    "goaway_above_stream", "padded_data",
)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "scenario",
    [pytest.param(s, id=s.name) for s in SCENARIOS if s.name in TCP_SCENARIOS],
)
def test_client_scenario_tcp(
    scenario: ClientScenario,
    request: pytest.FixtureRequest,
    capfd: pytest.CaptureFixture[str],
    thread_exceptions: List[Any],
) -> None:
    run_client_scenario(scenario, True, True, request, capfd, thread_exceptions)


def run_client_scenario(
    scenario: ClientScenario,
    with_deadline: bool,
    tcp: bool,
    request: pytest.FixtureRequest,
    capfd: pytest.CaptureFixture[str],
    thread_exceptions: List[Any],
    make_channel: Optional[Callable[[str], Any]] = None,
) -> None:
    """One scenario: the documented code in time, recovery, no leak, no traceback."""
    snapshot = ResourceSnapshot()
    server = ScriptedServer(scenario.script, tcp=tcp)
    observed = "?"
    recovered: Optional[bool] = None
    try:
        channel = (make_channel or grpc.insecure_channel)(server.target)
        try:
            call = channel.unary_unary(
                PATH, request_serializer=_identity, response_deserializer=_identity
            )
            payload = (b"hostile-" * (scenario.request_size // 8 + 1))[: scenario.request_size]
            timeout = scenario.deadline if with_deadline else None
            limit = (timeout + DEADLINE_SLACK) if timeout is not None else HANG_LIMIT
            kind, value, elapsed = run_bounded(lambda: call(payload, timeout=timeout), limit)
            observed = outcome_code(kind, value)
            details = value.details() if kind == "error" and hasattr(value, "details") else None
            record_observation(
                request.node.nodeid,
                side="client",
                scenario=scenario.name,
                group=scenario.group,
                description=scenario.description,
                expected=scenario.expected,
                observed=observed,
                details=details,
                seconds=round(elapsed, 3),
                reference=scenario.reference,
                fix=fix_of(scenario.name),
            )
            assert kind != "hung", (
                f"the call hung: no outcome after {limit:.1f} s (deadline {timeout})"
            )
            assert observed == scenario.expected, (
                f"{scenario.description}: expected {scenario.expected} ({scenario.reference}), "
                f"got {observed} with details {details!r}"
            )
            if scenario.expected == "OK":
                assert value == payload, "the response is not the echoed request"
            if scenario.details is not None:
                assert details == scenario.details
            if scenario.deadline_only:
                assert elapsed <= scenario.deadline + DEADLINE_SLACK
            elif timeout is not None:
                assert elapsed < timeout, "the error arrived only when the deadline expired"
            if scenario.max_requests is not None:
                assert len(server.requests) <= scenario.max_requests, (
                    f"the client retried {len(server.requests)} times"
                )
            if scenario.name == "never_answers":
                # An expired deadline is a cancellation: RST_STREAM(CANCEL) (PROTOCOL-HTTP2.md,
                # "GOAWAY Frame").
                conn = server.connections[0]
                assert conn.wait_for(lambda: any(code == 8 for _, code in conn.resets)), (
                    f"no RST_STREAM(CANCEL) after the deadline; resets seen: {conn.resets}"
                )

            # The same channel works again once the peer behaves.
            connections_before = server.connection_count
            server.behave()
            kind, value, _ = run_bounded(
                lambda: call(b"after", timeout=10.0), 10.0 + DEADLINE_SLACK
            )
            recovered = kind == "ok" and value == b"after"
            assert recovered, f"the next call failed: {outcome_code(kind, value)} {value!r}"
            if scenario.new_connection_after:
                assert server.connection_count > connections_before or connections_before > 1, (
                    "the call after GOAWAY did not open a new connection"
                )
        finally:
            channel.close()
    finally:
        server.close()
    assert not server.errors, f"the peer saw the client break a rule: {server.errors!r}"
    snapshot.assert_no_leaks()
    assert not thread_exceptions, f"exception in a thread: {thread_exceptions[0]!r}"
    err = capfd.readouterr().err
    assert "Traceback" not in err, err


@pytest.mark.timeout(60)
def test_scenario_catalogue_is_complete() -> None:
    """The issue's client-side bullet points each have at least one scenario."""
    groups = {scenario.group for scenario in SCENARIOS}
    assert groups >= {
        "connection", "settings", "http-status", "grpc-status", "grpc-message", "cardinality",
        "length-prefix", "compression", "rst-stream", "goaway", "ping", "slow", "frames",
    }
    names = [scenario.name for scenario in SCENARIOS]
    assert len(names) == len(set(names))
