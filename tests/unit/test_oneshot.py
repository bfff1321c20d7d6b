"""minigrpc's one-shot unary client (minigrpc.oneshot) against hostile and real servers.

* Every client-side scenario of :func:`tests.hostile.scenarios.client_scenarios` (SETTINGS
  games, PING and SETTINGS floods, WINDOW_UPDATE overflow, CONTINUATION, Trailers-Only,
  RST_STREAM codes, GOAWAY below and above the call, a peer that closes mid-frame, silence
  until the deadline...) must end with the documented status, as it does for the channel
  (tests/hostile/test_hostile_client.py), while the peer checks that the client broke no rule.
* Scripted peers show the flow control of a large response (WINDOW_UPDATE as data arrives)
  and the HPACK dynamic table and Huffman coding of received blocks.
* Real grpcio and grpc-go servers: tests/interop/test_oneshot_interop.py.
* Importing the client loads neither h2's connection state machine nor the channel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, List, Optional, Tuple

import pytest
from hyperframe.frame import DataFrame, WindowUpdateFrame

from minigrpc import oneshot
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.status import CallStatus
from tests.hostile.scenarios import ClientScenario, client_scenarios
from tests.support.scripted_peer import (
    RawConn,
    ResourceSnapshot,
    ScriptedServer,
    StreamRecord,
    rpc_script,
)

PATH = "/hostile.Peer/Call"
DEADLINE_SLACK = 3.0
HANG_LIMIT = 10.0
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCENARIOS = client_scenarios()


def bounded_call(limit: float, *args: Any, **kwargs: Any) -> Tuple[Optional[Any], float]:
    """``oneshot.unary_call`` in a thread: (its result or None when it hung, seconds)."""
    result: List[Any] = []

    def target() -> None:
        result.append(oneshot.unary_call(*args, **kwargs))

    start = time.monotonic()
    worker = threading.Thread(target=target, name="oneshot-call", daemon=True)
    worker.start()
    worker.join(limit)
    return (result[0] if result else None), time.monotonic() - start


def _params() -> List[Any]:
    params = []
    for scenario in SCENARIOS:
        params.append(pytest.param(scenario, True, id=f"{scenario.name}-deadline"))
        if not scenario.deadline_only:
            params.append(pytest.param(scenario, False, id=f"{scenario.name}-nodeadline"))
    return params


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("scenario", "with_deadline"), _params())
def test_hostile_scenario(
    scenario: ClientScenario, with_deadline: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    snapshot = ResourceSnapshot()
    server = ScriptedServer(scenario.script)
    try:
        payload = (b"hostile-" * (scenario.request_size // 8 + 1))[: scenario.request_size]
        timeout = scenario.deadline if with_deadline else None
        limit = (timeout + DEADLINE_SLACK) if timeout is not None else HANG_LIMIT
        result, elapsed = bounded_call(limit, server.target, PATH, payload, timeout=timeout)
        assert result is not None, f"the call hung: no outcome after {limit:.1f} s"
        status, response = result
        assert isinstance(status, CallStatus)
        assert status.code.name == scenario.expected, (
            f"{scenario.description}: expected {scenario.expected} ({scenario.reference}), "
            f"got {status.code.name} with details {status.details!r}"
        )
        if scenario.expected == "OK":
            assert response == payload, "the response is not the echoed request"
        else:
            assert response is None
        if scenario.details is not None:
            assert status.details == scenario.details
        if scenario.deadline_only:
            assert elapsed <= scenario.deadline + DEADLINE_SLACK
        elif timeout is not None:
            assert elapsed < timeout, "the error arrived only when the deadline expired"
        if scenario.max_requests is not None:
            assert len(server.requests) <= scenario.max_requests
        if scenario.name == "never_answers":
            conn = server.connections[0]
            assert conn.wait_for(lambda: any(code == 8 for _, code in conn.resets)), (
                f"no RST_STREAM(CANCEL) after the deadline; resets seen: {conn.resets}"
            )
    finally:
        server.close()
    assert not server.errors, f"the peer saw the client break a rule: {server.errors!r}"
    snapshot.assert_no_leaks()
    assert "Traceback" not in capfd.readouterr().err


# -- flow control and HPACK against scripted peers --------------------------------------------


def _large_answer(size: int) -> Any:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        conn.respond(request.stream_id, b"z" * size)
        return None

    return rpc_script(fault)


@pytest.mark.timeout(60)
def test_large_response_returns_window_as_data_arrives() -> None:
    """A 1 MB response through 64 KiB windows: it only arrives if the client sends
    WINDOW_UPDATE on the stream and the connection while the DATA comes in (RFC 9113 §6.9)."""
    server = ScriptedServer(_large_answer(1_000_000))
    try:
        status, response = oneshot.unary_call(
            server.target, PATH, b"x", timeout=20.0, stream_window=65535, connection_window=65535
        )
        assert status.code is StatusCode.OK, status
        assert response == b"z" * 1_000_000
        conn = server.connections[0]
        with conn.cond:
            updates = [f for f in conn.frames if isinstance(f, WindowUpdateFrame)]
            data_frames = [f for f in conn.frames if isinstance(f, DataFrame)]
        assert {f.stream_id for f in updates} == {0, 1}
        # Credit came back in pieces while the response streamed, not once at the end.
        assert sum(f.window_increment for f in updates if f.stream_id == 1) >= 1_000_000 - 65535
        assert len(updates) >= 2 * (1_000_000 // 65535) - 2
        assert data_frames, "the request was never sent"
    finally:
        server.close()
    assert not server.errors, server.errors


def _metadata_echo(conn: RawConn, request: StreamRecord) -> Optional[str]:
    """Response headers and trailers that share fields (the HPACK dynamic table, RFC 7541
    §2.3.2) and long values (Huffman-coded by the encoder, RFC 7541 §5.2)."""
    long_value = b"value-" + b"abcdefgh" * 200
    conn.respond(
        request.stream_id,
        b"ok",
        headers=[(b":status", b"200"), (b"content-type", b"application/grpc"),
                 (b"x-shared", long_value)],
        trailers=[(b"grpc-status", b"0"), (b"x-shared", long_value), (b"x-shared", b"2")],
    )
    return None


@pytest.mark.timeout(60)
def test_header_blocks_use_the_dynamic_table_and_huffman() -> None:
    server = ScriptedServer(rpc_script(_metadata_echo))
    try:
        status, response = oneshot.unary_call(server.target, PATH, b"x", timeout=10.0)
    finally:
        server.close()
    long_value = "value-" + "abcdefgh" * 200
    assert status.code is StatusCode.OK, status
    assert response == b"ok"
    assert status.initial_metadata == (("x-shared", long_value),)
    assert status.trailing_metadata == (("x-shared", long_value), ("x-shared", "2"))


@pytest.mark.timeout(60)
def test_request_metadata_is_checked_like_a_channels() -> None:
    with pytest.raises(ValueError, match="invalid"):
        oneshot.unary_call("unix:/nonexistent", PATH, b"", metadata=[("Bad Key", "v")])


@pytest.mark.timeout(60)
def test_missing_socket_reads_like_grpc_go() -> None:
    status, response = oneshot.unary_call("unix:/nonexistent/agent.sock", PATH, b"")
    assert response is None
    assert str(status) == (
        'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while'
        ' dialing: dial unix /nonexistent/agent.sock: connect: no such file or directory"'
    )


# -- what importing it costs -----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_import_leaves_h2_and_the_channel_unloaded() -> None:
    """What the plugin's call path imports: minigrpc's own frame and HPACK codecs, no module of
    h2, hyperframe or hpack (nor the logging they load), none of the channel's machinery, and
    neither zlib nor base64 (loaded only to compress or for ``-bin`` metadata)."""
    code = (
        "import sys, cni_client.client, minigrpc.oneshot; "
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
    ).stdout.decode().split()
    assert {"minigrpc.oneshot", "minigrpc.http2.frames", "minigrpc.http2.hpack_codec"} <= set(
        loaded
    )
    libraries = ("h2", "hyperframe", "hpack", "logging")
    assert not [name for name in loaded if name.split(".")[0] in libraries], loaded
    for heavy in ("minigrpc.protocol.client_protocol", "minigrpc.protocol.grpc_connection",
                  "minigrpc.blocking.transport", "minigrpc.blocking.channel",
                  "minigrpc.blocking.call", "minigrpc.net.trace", "zlib", "base64"):
        assert heavy not in loaded, f"{heavy} is loaded: {loaded}"


# -- fuzzing: any bytes a peer sends end the call with a status --------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hyperframe.frame import SettingsFrame  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from minigrpc.http2 import frames, hpack_codec  # noqa: E402
from minigrpc.protocol import headers, wire  # noqa: E402
from minigrpc.protocol.oneshot_protocol import OneShotCall  # noqa: E402
from tests.support.fuzzing import (  # noqa: E402
    CUTS,
    EDITS,
    RESPONSE_HEADER,
    chunked,
    frame_specs,
    fuzz,
    mutate,
    render,
    valid_response,
)


def _drive(stream: bytes, cuts: List[int]) -> None:
    """Feed ``stream`` in chunks; then the connection ends. The invariants of the channel's
    fuzzing (tests/unit/test_fuzz.py): nothing raises, the call ends with a StatusCode, and an
    OK call has its one message."""
    call = OneShotCall(
        headers.request_headers(path="/f.S/M", authority="localhost", user_agent="fuzz/1"),
        wire.encode_message(b"\x08\x01"),
    )
    call.initiate()
    assert call.data_to_send().startswith(b"PRI * HTTP/2.0")
    for chunk in chunked(stream, cuts):
        call.receive_data(chunk)
        assert isinstance(call.data_to_send(), bytes)
    call.connection_lost(None)
    call.close()
    assert isinstance(call.data_to_send(), bytes)
    final = call.status
    assert final is not None
    assert isinstance(final.code, StatusCode)
    str(final)
    assert (call.response is not None) == (final.code is StatusCode.OK)


@fuzz(300)
@given(
    specs=st.lists(frame_specs(RESPONSE_HEADER), max_size=12),
    with_settings=st.booleans(),
    cuts=CUTS,
)
def test_fuzz_generated_frames(
    specs: List[Tuple[Any, ...]], with_settings: bool, cuts: List[int]
) -> None:
    prefix = SettingsFrame(0).serialize() if with_settings else b""
    _drive(prefix + render(specs), cuts)


@fuzz(300)
@given(edits=EDITS, cuts=CUTS, payload=st.binary(max_size=100))
def test_fuzz_mutated_response(
    edits: List[Tuple[int, int, int]], cuts: List[int], payload: bytes
) -> None:
    _drive(mutate(valid_response(payload), edits), cuts)


@pytest.mark.timeout(120)
@fuzz(20)
@given(
    specs=st.lists(frame_specs(RESPONSE_HEADER), max_size=8),
    edits=EDITS,
    close=st.booleans(),
)
def test_fuzz_over_socket(specs: List[Tuple[Any, ...]], edits: List[Any], close: bool) -> None:
    """Generated answers from a real peer: a status within the deadline, never an exception."""
    answer = mutate(valid_response()[18:], edits) if edits else render(specs)

    def fault(conn: RawConn, request: StreamRecord) -> Any:
        conn.send(answer)
        return "close" if close else None

    with ScriptedServer(rpc_script(fault)) as server:
        result, elapsed = bounded_call(
            0.5 + DEADLINE_SLACK, server.target, "/f.S/M", b"\x08\x01", timeout=0.5
        )
    assert result is not None, f"the call outlived its deadline ({elapsed:.1f} s)"
    assert isinstance(result[0].code, StatusCode)


# -- frames the RFC lets a client ignore or accept, sans-IO ----------------------------------------


def _answered(stream: bytes) -> OneShotCall:
    call = OneShotCall(
        headers.request_headers(path="/f.S/M", authority="localhost", user_agent="t/1"),
        wire.encode_message(b"\x08\x01"),
    )
    call.initiate()
    call.data_to_send()
    call.receive_data(stream)
    return call


def test_ignored_frames_leave_the_call_alone() -> None:
    """ALTSVC (RFC 7838), PRIORITY_UPDATE (RFC 9218), a type nobody defined and PRIORITY
    (deprecated, RFC 9113 §5.3.2) are ignored (RFC 9113 §5.5) between the server's frames."""
    response = valid_response()
    settings_end = 9 + int.from_bytes(response[:3], "big")  # the server's SETTINGS
    ignored = b"".join((
        frames.frame_bytes(0xA, 0, 0, b"\x00\x03abch2=\":443\""),
        frames.frame_bytes(0xA, 0, 1, b""),
        frames.frame_bytes(0x10, 0, 0, b"\x00\x00\x00\x01u=1"),
        frames.frame_bytes(0xEE, 0xFF, 7, b"?"),
        frames.frame_bytes(frames.PRIORITY, 0, 1, bytes(5)),
    ))
    call = _answered(response[:settings_end] + ignored + response[settings_end:])
    assert call.status is not None and call.status.code is StatusCode.OK
    assert call.response == b"\x08\x01"


def test_padding_may_leave_a_headers_fragment_empty() -> None:
    """RFC 9113 §6.2: padding may take all of a HEADERS payload after the Pad Length octet;
    the block then comes in CONTINUATION frames."""
    encoder = hpack_codec.Encoder()
    head = encoder.encode([(b":status", b"200", False), (b"content-type", b"application/grpc",
                                                          False)])
    trailers = encoder.encode([(b"grpc-status", b"0", False)])
    stream = b"".join((
        frames.settings_frame([]),
        frames.frame_bytes(frames.HEADERS, frames.PADDED, 1, b"\x03" + bytes(3)),
        frames.frame_bytes(frames.CONTINUATION, frames.END_HEADERS, 1, head),
        frames.data_frame(1, wire.encode_message(b"\x08\x01"), False),
        frames.frame_bytes(frames.HEADERS, frames.END_HEADERS | frames.END_STREAM, 1, trailers),
    ))
    call = _answered(stream)
    assert call.status is not None and call.status.code is StatusCode.OK, call.status
    assert call.response == b"\x08\x01"
