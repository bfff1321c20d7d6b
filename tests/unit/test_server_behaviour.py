"""minigrpc server behaviour over real sockets (PROTOCOL-HTTP2.md and RFC 9113).

Clients are real: grpcio, and a raw h2 client (tests/support/minigrpc_server.py) for requests that
gRPC
libraries never send.  Handlers use grpcio's ServicerContext API.  Nothing sleeps to
synchronise: handlers signal Events, and every wait has a timeout that fails the test.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import stat
import threading
import time
from concurrent import futures
from typing import Any, Callable, Dict, Iterator, List

import h2.errors
import pytest

import minigrpc
from minigrpc.driver import handlers as mg_handlers
from tests.interop import empty_pb2, messages_pb2
from tests.support.minigrpc_server import (
    ADDRESS_KINDS,
    EMPTY_PATH,
    IO_THREAD_OPTION,
    MinigrpcServer,
    echo_from_threads,
    interop_callables,
)
from tests.support.scripted_peer import RawH2Client, connect, grpc_request_headers

grpc = pytest.importorskip("grpc")

pytestmark = pytest.mark.timeout(90)

WAIT = 10.0  # seconds any Event wait may take before the test fails


def _bytes_handlers(behaviours: Dict[str, Callable[[bytes, Any], Any]]) -> Any:
    """A generic handler for service ``test.Bytes`` whose methods take and return bytes."""
    return mg_handlers.method_handlers_generic_handler(
        "test.Bytes",
        {name: mg_handlers.unary_unary_rpc_method_handler(fn) for name, fn in behaviours.items()},
    )


def _call(channel: Any, method: str) -> Any:
    return channel.unary_unary(f"/test.Bytes/{method}")


@pytest.fixture(params=ADDRESS_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- request validation over the wire (as grpc-go's server does it)
# ------------------------------------------


def test_raw_rejections_and_connection_survives(kind: str) -> None:
    with MinigrpcServer(kind) as server, RawH2Client(server.target) as client:
        response = client.call(grpc_request_headers(method=b"GET"))
        assert (response.http_status, response.grpc_status) == (405, 13)
        response = client.call(grpc_request_headers(content_type=b"text/plain"), b"\0\0\0\0\0")
        assert (response.http_status, response.grpc_status) == (415, 3)
        assert response.header(b"content-type") == b"application/grpc"
        response = client.call(grpc_request_headers("/no.Such/Method"), b"\0\0\0\0\0")
        assert response.trailers_only and response.grpc_status == 12
        assert response.grpc_message == "Method not found!"
        # No te header: accepted, as grpc-go's server does.
        response = client.call(grpc_request_headers(EMPTY_PATH, te=False), b"\0\0\0\0\0")
        assert response.http_status == 200 and response.grpc_status == 0
        assert response.messages() == [(False, b"")]
        # PING is answered on the same connection.
        client.conn.ping(b"pingpong")
        client.flush()
        client.read_until(lambda: b"pingpong" in client.ping_acks)


def test_unsupported_request_encoding_is_unimplemented() -> None:
    with MinigrpcServer("tcp") as server, RawH2Client(server.target) as client:
        response = client.call(
            grpc_request_headers(extra=[(b"grpc-encoding", b"snappy")]), b"\x01\0\0\0\x01x"
        )
        assert response.grpc_status == 12
        accepted = (response.header(b"grpc-accept-encoding") or b"").split(b",")
        assert b"gzip" in accepted and b"snappy" not in accepted


def test_oversized_metadata_fails_the_call_only() -> None:
    with MinigrpcServer("tcp") as server, RawH2Client(server.target) as client:
        client.read_until(lambda: 6 in client.remote_settings)
        assert client.remote_settings[6] == 16384  # MAX_HEADER_LIST_SIZE advertised
        response = client.call(
            grpc_request_headers(extra=[(b"x-big", b"v" * 30000)]), b"\0\0\0\0\0"
        )
        assert response.http_status == 431 and response.grpc_status == 8
        response = client.call(grpc_request_headers(), b"\0\0\0\0\0")
        assert response.grpc_status == 0


def test_excess_streams_are_refused_with_refused_stream() -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold(request: bytes, context: Any) -> bytes:
        started.release()
        release.wait(WAIT)
        return b"ok"

    options = [("grpc.max_concurrent_streams", 2)]
    with MinigrpcServer(
        "tcp", handlers=[_bytes_handlers({"Hold": hold})], options=options
    ) as server, RawH2Client(server.target) as client:
        client.read_until(lambda: 3 in client.remote_settings)
        assert client.remote_settings[3] == 2
        # Behave like a client racing the limit: ignore it.
        client.conn.remote_settings.acknowledge()
        client.conn.remote_settings[3] = 100
        client.conn.remote_settings.acknowledge()
        body = b"\0\0\0\0\x01x"
        first = client.send_request(grpc_request_headers("/test.Bytes/Hold"), body)
        second = client.send_request(grpc_request_headers("/test.Bytes/Hold"), body)
        assert started.acquire(timeout=WAIT) and started.acquire(timeout=WAIT)
        third = client.send_request(grpc_request_headers("/test.Bytes/Hold"), body)
        refused = client.wait_response(third)
        assert refused.reset_code == h2.errors.ErrorCodes.REFUSED_STREAM
        release.set()
        assert client.wait_response(first).grpc_status == 0
        assert client.wait_response(second).grpc_status == 0


# -- handler semantics (grpcio's) ------------------------------------------------------------------


def _raise(request: bytes, context: Any) -> bytes:
    raise ValueError("boom")


def _return_none(request: bytes, context: Any) -> None:
    return None


def _set_code_return_none(request: bytes, context: Any) -> None:
    context.set_code(minigrpc.StatusCode.NOT_FOUND)
    context.set_details("no such thing")
    return None


def _abort(request: bytes, context: Any) -> bytes:
    context.set_trailing_metadata((("x-why", "because"),))
    context.abort(minigrpc.StatusCode.PERMISSION_DENIED, "go away")
    raise AssertionError("abort() must raise")


def _abort_ok(request: bytes, context: Any) -> bytes:
    context.abort(minigrpc.StatusCode.OK, "not ok")
    return b""


def _abort_with_status(request: bytes, context: Any) -> bytes:
    status = grpc.Status()
    status.code = minigrpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
    status.details = "precondition"  # type: ignore[attr-defined]
    status.trailing_metadata = (("x-s", "1"),)  # type: ignore[attr-defined]
    context.abort_with_status(status)
    return b""


def _abort_with_grpcio_enum(request: bytes, context: Any) -> bytes:
    """A handler written for grpcio uses grpcio's enum; it must run unchanged."""
    context.abort(grpc.StatusCode.OUT_OF_RANGE, "grpcio enum")
    return b""


def _set_grpcio_code(request: bytes, context: Any) -> bytes:
    context.set_code(grpc.StatusCode.DATA_LOSS)
    context.set_details("lost")
    return b""


def _metadata_keys(request: bytes, context: Any) -> bytes:
    return ",".join(item.key for item in context.invocation_metadata()).encode()


def _echo(request: bytes, context: Any) -> bytes:
    return request


def _not_bytes(request: bytes, context: Any) -> Any:
    return 42


def _error_with_response(request: bytes, context: Any) -> bytes:
    context.set_code(minigrpc.StatusCode.ALREADY_EXISTS)
    context.set_details("exists")
    return b"ignored"


@pytest.fixture(
    scope="module",
    params=[(), (IO_THREAD_OPTION,)],
    ids=["executor", "io-thread"],
)
def semantics_server(request: pytest.FixtureRequest) -> Iterator[MinigrpcServer]:
    """The handlers above, run on the executor and (the speed option) on the I/O thread."""
    handlers = _bytes_handlers(
        {
            "Raise": _raise,
            "None": _return_none,
            "SetCodeNone": _set_code_return_none,
            "Abort": _abort,
            "AbortOk": _abort_ok,
            "AbortWithStatus": _abort_with_status,
            "Echo": _echo,
            "NotBytes": _not_bytes,
            "ErrorWithResponse": _error_with_response,
            "AbortGrpcioEnum": _abort_with_grpcio_enum,
            "SetGrpcioCode": _set_grpcio_code,
            "MetadataKeys": _metadata_keys,
        }
    )
    with MinigrpcServer("unix", handlers=[handlers], options=list(request.param)) as server:
        yield server


@pytest.fixture(scope="module")
def semantics_channel(semantics_server: MinigrpcServer) -> Iterator[Any]:
    channel = grpc.insecure_channel(semantics_server.target)
    yield channel
    channel.close()


@pytest.mark.parametrize(
    ("method", "code", "details"),
    [
        ("Raise", grpc.StatusCode.UNKNOWN, "Exception calling application: boom"),
        ("None", grpc.StatusCode.INTERNAL, "Failed to serialize response!"),
        ("SetCodeNone", grpc.StatusCode.NOT_FOUND, "no such thing"),
        ("Abort", grpc.StatusCode.PERMISSION_DENIED, "go away"),
        ("AbortOk", grpc.StatusCode.UNKNOWN, ""),
        ("AbortWithStatus", grpc.StatusCode.FAILED_PRECONDITION, "precondition"),
        ("NotBytes", grpc.StatusCode.INTERNAL, "Failed to serialize response!"),
        ("ErrorWithResponse", grpc.StatusCode.ALREADY_EXISTS, "exists"),
        ("AbortGrpcioEnum", grpc.StatusCode.OUT_OF_RANGE, "grpcio enum"),
        ("SetGrpcioCode", grpc.StatusCode.DATA_LOSS, "lost"),
    ],
)
def test_handler_outcomes_match_grpcio(
    semantics_channel: Any, method: str, code: Any, details: str
) -> None:
    with pytest.raises(grpc.RpcError) as excinfo:
        _call(semantics_channel, method)(b"x", timeout=WAIT)
    assert excinfo.value.code() == code
    assert excinfo.value.details() == details


def test_invocation_metadata_items_have_key_and_value(semantics_channel: Any) -> None:
    keys = _call(semantics_channel, "MetadataKeys")(b"", metadata=(("x-k", "v"),), timeout=WAIT)
    assert keys.decode().split(",") == ["user-agent", "x-k"]


def test_abort_keeps_trailing_metadata(semantics_channel: Any) -> None:
    with pytest.raises(grpc.RpcError) as excinfo:
        _call(semantics_channel, "Abort")(b"x", timeout=WAIT)
    assert ("x-why", "because") in [tuple(m) for m in excinfo.value.trailing_metadata()]


def test_handler_exception_is_logged_with_traceback(
    semantics_channel: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="minigrpc.server"):
        with pytest.raises(grpc.RpcError) as excinfo:
            _call(semantics_channel, "Raise")(b"x", timeout=WAIT)
    assert "Traceback" not in excinfo.value.details()
    records = [r for r in caplog.records if "Exception calling application: boom" in r.getMessage()]
    assert records and records[0].exc_info is not None
    assert "/test.Bytes/Raise" in records[0].getMessage()


def test_echo_large_messages_both_ways(semantics_channel: Any) -> None:
    payload = os.urandom(3 * 1024 * 1024)
    assert _call(semantics_channel, "Echo")(payload, timeout=WAIT) == payload


def test_receive_limit_option() -> None:
    with MinigrpcServer(
        "tcp",
        handlers=[_bytes_handlers({"Echo": _echo})],
        options=[("grpc.max_receive_message_length", 1000)],
    ) as server:
        with grpc.insecure_channel(server.target) as channel:
            assert _call(channel, "Echo")(b"a" * 1000, timeout=WAIT) == b"a" * 1000
            with pytest.raises(grpc.RpcError) as excinfo:
                _call(channel, "Echo")(b"a" * 1001, timeout=WAIT)
            assert excinfo.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            # The connection is still usable.
            assert _call(channel, "Echo")(b"b", timeout=WAIT) == b"b"


def test_server_wide_compression_when_client_accepts() -> None:
    with MinigrpcServer(
        "tcp",
        handlers=[_bytes_handlers({"Echo": _echo})],
        compression=minigrpc.Compression.Gzip,
    ) as server, RawH2Client(server.target) as client:
        headers = grpc_request_headers(
            "/test.Bytes/Echo", extra=[(b"grpc-accept-encoding", b"gzip")]
        )
        response = client.call(headers, b"\0\0\0\0\x05hello")
        assert response.header(b"grpc-encoding") == b"gzip"
        [(flag, payload)] = response.messages()
        assert flag and minigrpc.protocol.wire.decompress("gzip", payload, None) == b"hello"
        response = client.call(grpc_request_headers("/test.Bytes/Echo"), b"\0\0\0\0\x05hello")
        assert response.header(b"grpc-encoding") is None
        assert response.messages() == [(False, b"hello")]
    with MinigrpcServer(
        "tcp",
        handlers=[_bytes_handlers({"Echo": _echo})],
        compression=minigrpc.Compression.Gzip,
    ) as server, grpc.insecure_channel(server.target) as channel:
        assert _call(channel, "Echo")(b"z" * 5000, timeout=WAIT) == b"z" * 5000


def test_handler_set_compression_and_disable_next_message() -> None:
    def gzip_it(request: bytes, context: Any) -> bytes:
        context.set_compression(grpc.Compression.Gzip)  # grpcio's enum works too
        return b"g" * 1000

    def not_this_one(request: bytes, context: Any) -> bytes:
        context.set_compression(minigrpc.Compression.Gzip)
        context.disable_next_message_compression()
        return b"n" * 1000

    handlers = _bytes_handlers({"Gzip": gzip_it, "Plain": not_this_one})
    accept = [(b"grpc-accept-encoding", b"identity,deflate,gzip")]
    with MinigrpcServer("tcp", handlers=[handlers]) as server, RawH2Client(server.target) as client:
        response = client.call(grpc_request_headers("/test.Bytes/Gzip", extra=accept), b"\0" * 5)
        [(flag, payload)] = response.messages()
        assert response.header(b"grpc-encoding") == b"gzip" and flag
        assert minigrpc.protocol.wire.decompress("gzip", payload, None) == b"g" * 1000
        response = client.call(grpc_request_headers("/test.Bytes/Plain", extra=accept), b"\0" * 5)
        assert response.messages() == [(False, b"n" * 1000)]
        # The interop server_compressed_unary case, seen on the wire.
        request = messages_pb2.SimpleRequest(
            response_size=1000, response_compressed=messages_pb2.BoolValue(value=True)
        ).SerializeToString()
        body = len(request).to_bytes(5, "big") + request
        response = client.call(
            grpc_request_headers("/grpc.testing.TestService/UnaryCall", extra=accept), body
        )
        assert response.grpc_status == 0 and response.messages()[0][0] is True


def test_request_compression_is_visible_to_the_handler() -> None:
    seen: List[Any] = []

    def probe(request: bytes, context: Any) -> bytes:
        seen.append((context.request_compression(), context.invocation_metadata()))
        return b""

    with MinigrpcServer("tcp", handlers=[_bytes_handlers({"Probe": probe})]) as server:
        with grpc.insecure_channel(server.target) as channel:
            _call(channel, "Probe")(b"q" * 2000, timeout=WAIT, compression=grpc.Compression.Gzip)
            _call(channel, "Probe")(b"q" * 2000, timeout=WAIT)
    assert [encoding for encoding, _ in seen] == ["gzip", None]
    for _, metadata in seen:
        assert not any(key.startswith("grpc-") for key, _ in metadata)


def test_maximum_concurrent_rpcs() -> None:
    release = threading.Event()
    entered = threading.Event()

    def hold(request: bytes, context: Any) -> bytes:
        entered.set()
        release.wait(WAIT)
        return b"held"

    with MinigrpcServer(
        "tcp", handlers=[_bytes_handlers({"Hold": hold})], maximum_concurrent_rpcs=1
    ) as server, grpc.insecure_channel(server.target) as channel:
        first = _call(channel, "Hold").future(b"", timeout=WAIT)
        assert entered.wait(WAIT)
        with pytest.raises(grpc.RpcError) as excinfo:
            _call(channel, "Hold")(b"", timeout=WAIT)
        assert excinfo.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert excinfo.value.details() == "Concurrent RPC limit exceeded!"
        release.set()
        assert first.result(timeout=WAIT) == b"held"


def test_handler_without_the_callable_of_its_shape_is_refused_at_registration() -> None:
    missing = mg_handlers.RpcMethodHandler(False, True, None, None, _echo, None, None, None)
    with pytest.raises(TypeError, match=r"/test\.Stream/S is unary_stream.*'unary_stream'"):
        mg_handlers.method_handlers_generic_handler("test.Stream", {"S": missing})
    server = minigrpc.server()
    with pytest.raises(TypeError, match="unary_stream"):
        server.add_registered_method_handlers("test.Stream", {"S": missing})
    with pytest.raises(TypeError, match="not an RpcMethodHandler"):
        server.add_registered_method_handlers("test.Stream", {"S": object()})


def test_server_streaming_handler_of_bytes() -> None:
    def three(request: bytes, context: Any) -> Any:
        return iter([request, request * 2, request * 3])

    generic = mg_handlers.method_handlers_generic_handler(
        "test.Stream", {"S": mg_handlers.unary_stream_rpc_method_handler(three)}
    )
    with MinigrpcServer("tcp", handlers=[generic]) as server:
        with grpc.insecure_channel(server.target) as channel:
            responses = list(channel.unary_stream("/test.Stream/S")(b"ab", timeout=WAIT))
    assert responses == [b"ab", b"abab", b"ababab"]


def test_registered_method_handlers() -> None:
    server = minigrpc.server()
    server.add_registered_method_handlers(
        "test.Reg", {"Echo": mg_handlers.unary_unary_rpc_method_handler(_echo)}
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert channel.unary_unary("/test.Reg/Echo")(b"reg", timeout=WAIT) == b"reg"
    finally:
        server.stop(None).wait(WAIT)


def test_api_misuse_is_reported_clearly() -> None:
    with pytest.raises(TypeError, match="not a server interceptor"):
        minigrpc.server(interceptors=[object()])
    with pytest.raises(ValueError, match=r"grpc\.max_concurrent_streams"):
        minigrpc.server(options=[("grpc.max_concurrent_streams", "many")])
    server = minigrpc.server()
    with pytest.raises(RuntimeError, match="cannot listen"):
        server.add_insecure_port("[::1")
    server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(RuntimeError, match="before start"):
            server.add_insecure_port("127.0.0.1:0")
        with pytest.raises(RuntimeError, match="already"):
            server.start()
    finally:
        assert server.stop(None).wait(WAIT)
    assert not server.wait_for_termination(timeout=0)


# -- deadlines and cancellation --------------------------------------------------------------------


def _context_watcher() -> Any:
    """A handler that reports what its context sees, waiting until the call ends."""
    state: Dict[str, Any] = {
        "entered": threading.Event(),
        "callback": threading.Event(),
        "finished": threading.Event(),
    }

    def watch(request: bytes, context: Any) -> bytes:
        state["remaining_first"] = context.time_remaining()
        assert context.add_callback(state["callback"].set)
        state["entered"].set()
        state["callback"].wait(WAIT)
        state["active_after"] = context.is_active()
        state["remaining_after"] = context.time_remaining()
        state["add_after"] = context.add_callback(lambda: None)
        state["finished"].set()
        return b"late"

    return state, watch


def test_deadline_reaches_handler_and_expires(kind: str) -> None:
    state, watch = _context_watcher()
    with MinigrpcServer(kind, handlers=[_bytes_handlers({"Watch": watch})]) as server:
        with grpc.insecure_channel(server.target) as channel:
            with pytest.raises(grpc.RpcError) as excinfo:
                _call(channel, "Watch")(b"", timeout=0.5)
            assert excinfo.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert state["finished"].wait(WAIT)
    assert 0 < state["remaining_first"] <= 1.0  # grpc-timeout is rounded up when encoded
    assert state["active_after"] is False
    # It fell to (about) zero: the client may cancel a moment before our own timer fires.
    assert state["remaining_after"] < min(0.1, state["remaining_first"])
    assert state["add_after"] is False


def test_deadline_timers_of_finished_calls_do_not_accumulate() -> None:
    with MinigrpcServer("unix", handlers=[_bytes_handlers({"Echo": _echo})]) as server:
        with grpc.insecure_channel(server.target) as channel:
            echo = _call(channel, "Echo")
            for _ in range(1500):
                echo(b"t", timeout=600)
        assert len(server.server._loop._timers) <= 1025


def test_timers_of_closed_connections_do_not_accumulate() -> None:
    """Each connection arms a 120 s handshake timer; churn must not pile them up."""
    with MinigrpcServer("unix") as server:
        for _ in range(1100):
            with RawH2Client(server.target) as client:
                assert client.call(grpc_request_headers(), b"\0\0\0\0\0").grpc_status == 0
        assert len(server.server._loop._timers) <= 1025


def test_client_cancel_marks_context_inactive() -> None:
    state, watch = _context_watcher()
    with MinigrpcServer("tcp", handlers=[_bytes_handlers({"Watch": watch})]) as server:
        with grpc.insecure_channel(server.target) as channel:
            future = _call(channel, "Watch").future(b"")
            assert state["entered"].wait(WAIT)
            assert state["remaining_first"] is None  # no deadline
            future.cancel()
            assert state["finished"].wait(WAIT)
    assert state["active_after"] is False


def test_server_side_cancel() -> None:
    def cancel_me(request: bytes, context: Any) -> bytes:
        context.cancel()
        return b"never seen"

    with MinigrpcServer("tcp", handlers=[_bytes_handlers({"Cancel": cancel_me})]) as server:
        with grpc.insecure_channel(server.target) as channel:
            with pytest.raises(grpc.RpcError) as excinfo:
                _call(channel, "Cancel")(b"", timeout=WAIT)
    assert excinfo.value.code() == grpc.StatusCode.CANCELLED


# -- concurrency and misbehaving clients -----------------------------------------------------------


def test_twenty_threads_hundred_calls_each(kind: str) -> None:
    with MinigrpcServer(kind, handlers=[_bytes_handlers({"Echo": _echo})]) as server:
        errors = echo_from_threads(
            grpc.insecure_channel, server.target, "/test.Bytes/Echo", channels=4, threads=20,
            timeout=WAIT,
        )
        assert errors == []


def test_minigrpc_client_twenty_threads() -> None:
    pytest.importorskip("minigrpc.blocking.channel")
    with MinigrpcServer("unix", handlers=[_bytes_handlers({"Echo": _echo})]) as server:
        errors = echo_from_threads(
            minigrpc.insecure_channel, server.target, "/test.Bytes/Echo", channels=1,
            threads=20, timeout=WAIT,
        )
        assert errors == []


def test_stalled_and_garbage_connections_do_not_affect_others(kind: str) -> None:
    with MinigrpcServer(kind) as server:
        stalled = connect(server.target)
        stalled.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")  # preface only, then silence
        half_frame = connect(server.target)
        half_frame.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x10\x04")
        garbage = connect(server.target)
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            with grpc.insecure_channel(server.target) as channel:
                empty, _ = interop_callables(channel)
                for _ in range(3):
                    assert empty(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()
            # The garbage connection is closed by the server (maybe after a GOAWAY).
            garbage.settimeout(WAIT)
            while garbage.recv(65536):
                pass
            # The stalled one is still open: the server sent its SETTINGS and waits.
            stalled.settimeout(WAIT)
            assert stalled.recv(9)[3] == 0x4
        finally:
            for sock in (stalled, half_frame, garbage):
                sock.close()


def test_client_that_never_reads_does_not_block_others() -> None:
    """A client that opens its windows but never reads its socket only stalls itself."""
    big = os.urandom(1024 * 1024)

    def large(request: bytes, context: Any) -> bytes:
        return big

    with MinigrpcServer(
        "tcp",
        handlers=[_bytes_handlers({"Large": large, "Echo": _echo})],
        options=[("minigrpc.max_output_buffer", 256 * 1024)],
    ) as server:
        greedy = RawH2Client(server.target, window=2**31 - 1)
        greedy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for _ in range(30):
            greedy.send_request(grpc_request_headers("/test.Bytes/Large"), b"\0\0\0\0\0")
        try:
            with grpc.insecure_channel(server.target) as channel:
                for _ in range(5):
                    assert _call(channel, "Echo")(b"ok", timeout=WAIT) == b"ok"
            # Output for the greedy connection stays bounded (backpressure, not buffering).
            connections = [served.link for served in server.server._driver.connections]
            assert max(len(c.output) for c in connections) <= 256 * 1024 + 2 * 1024 * 1024
        finally:
            greedy.close()


def test_handshake_timeout_closes_silent_connections() -> None:
    options = [("grpc.server_handshake_timeout_ms", 200)]
    with MinigrpcServer("tcp", options=options) as server:
        silent = connect(server.target)
        preface_only = connect(server.target)
        preface_only.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        with RawH2Client(server.target) as healthy:
            try:
                for sock in (silent, preface_only):
                    while sock.recv(65536):  # the server's SETTINGS, then EOF
                        pass
                # A client that completed its handshake is not affected.
                response = healthy.call(grpc_request_headers(), b"\0\0\0\0\0")
                assert response.grpc_status == 0
            finally:
                silent.close()
                preface_only.close()


def test_max_connection_idle_drains_idle_connections() -> None:
    options = [("grpc.max_connection_idle_ms", 200)]
    with MinigrpcServer("unix", options=options) as server, RawH2Client(server.target) as client:
        assert client.call(grpc_request_headers(), b"\0\0\0\0\0").grpc_status == 0
        with pytest.raises(ConnectionError):
            client.read_until(lambda: False)  # GOAWAY(2^31-1), PING, GOAWAY(1), then EOF
        assert [g.last_stream_id for g in client.goaways] == [2**31 - 1, 1]
        with grpc.insecure_channel(server.target) as channel:  # a new connection works
            empty, _ = interop_callables(channel)
            assert empty(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()


def test_pings_do_not_keep_an_idle_connection() -> None:
    """Idleness counts from the last call, as grpc-go's MaxConnectionIdle: PINGs do not reset it,
    so a client cannot hold an unused connection open by pinging (PINGs the keepalive policy
    allows: more often, they would be sent away as too many)."""
    options = [
        ("grpc.max_connection_idle_ms", 500),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10),
    ]
    pace = threading.Event()  # never set: paces the pings, synchronises nothing
    with MinigrpcServer("unix", options=options) as server, RawH2Client(server.target) as client:
        with pytest.raises(ConnectionError):
            for number in range(int(WAIT / 0.05)):
                if not client.goaways:
                    client.conn.ping(number.to_bytes(8, "big"))
                    client.flush()
                client.read_once()
                pace.wait(0.05)
        assert client.goaways and client.goaways[0].last_stream_id == 2**31 - 1
        assert client.goaways[0].additional_data == b"max_idle"


def test_idle_and_stall_timeouts_have_protective_defaults() -> None:
    """5 min without calls (grpc-go's MaxConnectionIdle, off by default there) and 30 s without
    request progress; 0 turns either off (grpc-core's ``*_ms`` convention)."""
    server_module = importlib.import_module("minigrpc.driver.server_options")
    defaults = server_module.ServerOptions(None)
    assert defaults.max_connection_idle == 300.0
    assert defaults.request_stall_timeout == 30.0
    custom = server_module.ServerOptions(
        [("grpc.max_connection_idle_ms", 0), ("minigrpc.request_stall_timeout_ms", 1500)]
    )
    assert custom.max_connection_idle is None and custom.request_stall_timeout == 1.5
    with pytest.raises(ValueError, match="request_stall_timeout_ms"):
        server_module.ServerOptions([("minigrpc.request_stall_timeout_ms", "soon")])


def test_stalled_request_is_cancelled_and_its_handler_never_runs() -> None:
    """Headers and part of a message, then nothing: RST_STREAM(CANCEL) after the stall timeout,
    with or without a client deadline (slowloris)."""
    ran = threading.Event()

    def record(request: bytes, context: Any) -> bytes:
        ran.set()
        return request

    options = [("minigrpc.request_stall_timeout_ms", 300)]
    handlers = [_bytes_handlers({"Record": record})]
    with MinigrpcServer("tcp", handlers=handlers, options=options) as server, RawH2Client(
        server.target
    ) as client:
        headers = grpc_request_headers("/test.Bytes/Record")
        partial = client.send_request(headers, b"\0\0\0\0\x10" + b"x" * 4, end_stream=False)
        complete_no_end = client.send_request(headers, b"\0\0\0\0\x01x", end_stream=False)
        for stream_id in (partial, complete_no_end):
            response = client.wait_response(stream_id, until_reset=True)
            assert response.reset_code == h2.errors.ErrorCodes.CANCEL
            assert response.headers == []
        assert not ran.is_set()
        # The connection is fine: the next call is served.
        assert client.call(headers, b"\0\0\0\0\x01y").grpc_status == 0
        assert ran.is_set()


def test_request_making_progress_is_not_cancelled() -> None:
    """A slow upload that keeps sending is not a stall: only a lack of progress is."""
    options = [("minigrpc.request_stall_timeout_ms", 1000)]
    pace = threading.Event()  # never set: paces the upload, synchronises nothing
    handlers = [_bytes_handlers({"Echo": _echo})]
    with MinigrpcServer("tcp", handlers=handlers, options=options) as server, RawH2Client(
        server.target
    ) as client:
        body = b"\0\0\0\0\x0c" + b"0123456789ab"
        stream_id = client.send_request(
            grpc_request_headers("/test.Bytes/Echo"), body[:5], end_stream=False
        )
        for index in range(12):  # 12 x 0.15 s: longer than the stall timeout in total
            pace.wait(0.15)
            client.send_body(stream_id, body[5 + index : 6 + index], end_stream=index == 11)
        response = client.wait_response(stream_id)
        assert response.reset_code is None and response.grpc_status == 0
        assert response.messages() == [(False, b"0123456789ab")]


@pytest.mark.parametrize(
    ("extra", "message_start"),
    [
        ((b"grpc-timeout", b"soon"), "malformed grpc-timeout"),
        ((b"x-md-bin", b"!!not base64!!"), 'malformed binary metadata "!!not base64!!"'),
    ],
)
def test_malformed_timeout_or_bin_metadata_is_400_internal(
    extra: Any, message_start: str
) -> None:
    """As grpc-go's server does: one HEADERS with END_STREAM carrying 400 + grpc-status 13,
    then RST_STREAM(NO_ERROR) since the request is still open; the connection stays usable."""
    with MinigrpcServer("tcp") as server, RawH2Client(server.target) as client:
        stream_id = client.send_request(
            grpc_request_headers(extra=[extra]), b"\0\0\0\0\0", end_stream=False
        )
        response = client.wait_response(stream_id, until_reset=True)
        assert (response.http_status, response.grpc_status) == (400, 13)
        assert response.trailers == [] and response.ended
        assert (response.grpc_message or "").startswith(message_start)
        assert response.reset_code == h2.errors.ErrorCodes.NO_ERROR
        assert client.call(grpc_request_headers(), b"\0\0\0\0\0").grpc_status == 0


@pytest.mark.timeout(120)
def test_thousand_idle_connections() -> None:
    with MinigrpcServer("unix") as server:
        idle = []
        try:
            for _ in range(1000):
                sock = connect(server.target)
                sock.sendall(
                    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                )
                idle.append(sock)
            with grpc.insecure_channel(server.target) as channel:
                empty, _ = interop_callables(channel)
                assert empty(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()
            threads = [t.name for t in threading.enumerate() if t.name.startswith("minigrpc")]
            assert len(threads) < 50  # no thread per connection
        finally:
            started = time.monotonic()
            server.stop(None)
            assert time.monotonic() - started < WAIT
            for sock in idle:
                sock.close()


# -- shutdown --------------------------------------------------------------------------------------


def test_graceful_stop_with_calls_in_flight(kind: str) -> None:
    """In-flight calls finish within the grace; later calls fail retryably; nothing hangs
    (PROTOCOL-HTTP2.md, "GOAWAY Frame")."""
    release = threading.Event()
    entered = threading.Semaphore(0)

    def hold(request: bytes, context: Any) -> bytes:
        entered.release()
        release.wait(WAIT)
        return b"finished"

    server = MinigrpcServer(kind, handlers=[_bytes_handlers({"Hold": hold})])
    channel = grpc.insecure_channel(server.target)
    raw = RawH2Client(server.target)
    try:
        in_flight = [_call(channel, "Hold").future(b"", timeout=WAIT) for _ in range(5)]
        raw_stream = raw.send_request(grpc_request_headers("/test.Bytes/Hold"), b"\0\0\0\0\0")
        for _ in range(6):
            assert entered.acquire(timeout=WAIT)
        stopped = server.server.stop(grace=WAIT)
        # Step 1: GOAWAY(2^31-1) and a PING; step 2 (after our ACK): GOAWAY(last stream).
        raw.read_until(lambda: len(raw.goaways) >= 2)
        assert [g.last_stream_id for g in raw.goaways] == [2**31 - 1, raw_stream]
        assert all(g.error_code == 0 for g in raw.goaways)
        # A call racing the shutdown on the old channel either runs or fails retryably.
        racing = _call(channel, "Hold").future(b"", timeout=WAIT)
        # The listener is gone: a new connection fails UNAVAILABLE at once. (grpcio shares
        # subchannels between channels to one target; without a local pool this "new" channel
        # could reuse the draining connection, whose server may not have had the PING ACK yet and
        # so still accepts, and runs, the Hold call.)
        local_pool = [("grpc.use_local_subchannel_pool", 1)]
        with grpc.insecure_channel(server.target, options=local_pool) as late_channel:
            with pytest.raises(grpc.RpcError) as excinfo:
                _call(late_channel, "Hold")(b"", timeout=WAIT)
            assert excinfo.value.code() == grpc.StatusCode.UNAVAILABLE
        release.set()
        assert [future.result(timeout=WAIT) for future in in_flight] == [b"finished"] * 5
        assert raw.wait_response(raw_stream).messages() == [(False, b"finished")]
        try:
            assert racing.result(timeout=WAIT) == b"finished"
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE
        assert stopped.wait(WAIT)
        with pytest.raises(ConnectionError):
            raw.read_until(lambda: False)  # the server closes the drained connection
        if server.socket_path:
            assert not os.path.exists(server.socket_path)
    finally:
        release.set()
        raw.close()
        channel.close()
        server.server.stop(None).wait(WAIT)


def test_graceful_stop_with_minigrpc_client() -> None:
    pytest.importorskip("minigrpc.blocking.channel")
    release = threading.Event()
    entered = threading.Semaphore(0)

    def hold(request: bytes, context: Any) -> bytes:
        entered.release()
        release.wait(WAIT)
        return b"finished"

    server = MinigrpcServer("unix", handlers=[_bytes_handlers({"Hold": hold})])
    try:
        with minigrpc.insecure_channel(
            server.target
        ) as channel, futures.ThreadPoolExecutor(3) as pool:
            hold_call = _call(channel, "Hold")
            results = [pool.submit(hold_call, b"", timeout=WAIT) for _ in range(3)]
            for _ in results:
                assert entered.acquire(timeout=WAIT)
            stopped = server.server.stop(grace=WAIT)
            release.set()
            assert [r.result(timeout=WAIT) for r in results] == [b"finished"] * 3
            assert stopped.wait(WAIT)
            with pytest.raises(minigrpc.RpcError) as excinfo:
                hold_call(b"", timeout=WAIT)
            assert excinfo.value.code() is minigrpc.StatusCode.UNAVAILABLE
    finally:
        release.set()
        server.server.stop(None).wait(WAIT)


def test_stop_without_grace_cancels_in_flight_calls() -> None:
    state, watch = _context_watcher()
    server = MinigrpcServer("tcp", handlers=[_bytes_handlers({"Watch": watch})])
    with grpc.insecure_channel(server.target) as channel:
        future = _call(channel, "Watch").future(b"", timeout=WAIT)
        assert state["entered"].wait(WAIT)
        assert server.server.stop(0).wait(WAIT)
        with pytest.raises(grpc.RpcError) as excinfo:
            future.result(timeout=WAIT)
        assert excinfo.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    assert state["finished"].wait(WAIT)
    assert state["active_after"] is False


def test_grace_expiry_cancels_what_is_left() -> None:
    state, watch = _context_watcher()
    server = MinigrpcServer("unix", handlers=[_bytes_handlers({"Watch": watch})])
    with grpc.insecure_channel(server.target) as channel:
        future = _call(channel, "Watch").future(b"", timeout=WAIT)
        assert state["entered"].wait(WAIT)
        assert server.server.stop(grace=0.3).wait(WAIT)
        with pytest.raises(grpc.RpcError) as excinfo:
            future.result(timeout=WAIT)
        assert excinfo.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    assert state["finished"].wait(WAIT)
    assert state["active_after"] is False


def test_stop_before_start_and_twice() -> None:
    server = minigrpc.server(thread_pool=futures.ThreadPoolExecutor(2))
    assert server.stop(None).is_set()
    assert server.stop(1).is_set()
    assert not server.wait_for_termination(0)


# -- unix socket hygiene ---------------------------------------------------------------------------


@pytest.fixture
def socket_dir(short_tmp_dir: str) -> str:
    return short_tmp_dir


def _serve(address: str, **kwargs: Any) -> Any:
    server = minigrpc.server(**kwargs)
    server.add_insecure_port(address)
    server.start()
    return server


def test_unix_socket_created_with_mode_and_parents_then_removed(socket_dir: str) -> None:
    path = os.path.join(socket_dir, "a", "b", "s.sock")
    server = _serve("unix:" + path)
    try:
        info = os.lstat(path)
        assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    finally:
        assert server.stop(None).wait(WAIT)
    assert not os.path.exists(path)
    server = _serve(f"unix://{path}", options=[("minigrpc.unix_socket_mode", 0o660)])
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
    finally:
        server.stop(None).wait(WAIT)


def test_stale_socket_is_replaced(socket_dir: str) -> None:
    path = os.path.join(socket_dir, "s.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file remains, nobody listens
    server = _serve("unix:" + path)
    try:
        with grpc.insecure_channel("unix:" + path) as channel:
            with pytest.raises(grpc.RpcError) as excinfo:
                channel.unary_unary("/x.Y/Z")(b"", timeout=WAIT)
            assert excinfo.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(None).wait(WAIT)


def test_live_socket_regular_file_and_symlink_are_never_replaced(socket_dir: str) -> None:
    live_path = os.path.join(socket_dir, "live.sock")
    live = _serve("unix:" + live_path)
    try:
        with pytest.raises(RuntimeError, match="listening"):
            minigrpc.server().add_insecure_port("unix:" + live_path)
    finally:
        live.stop(None).wait(WAIT)
    regular = os.path.join(socket_dir, "file.sock")
    with open(regular, "w") as handle:
        handle.write("data")
    with pytest.raises(RuntimeError, match="not a socket"):
        minigrpc.server().add_insecure_port("unix:" + regular)
    assert open(regular).read() == "data"
    link = os.path.join(socket_dir, "link.sock")
    os.symlink(regular, link)
    with pytest.raises(RuntimeError, match="symbolic link"):
        minigrpc.server().add_insecure_port("unix:" + link)
    assert os.path.islink(link)


def test_tcp_port_zero_and_ipv6_any() -> None:
    server = minigrpc.server()
    port = server.add_insecure_port("127.0.0.1:0")
    assert port > 0
    try:
        any_port = server.add_insecure_port("[::]:0")
    except RuntimeError:
        any_port = None  # no IPv6 on this machine
    server.start()
    try:
        targets = [f"127.0.0.1:{port}"]
        if any_port:
            targets += [f"127.0.0.1:{any_port}"]
        for target in targets:
            with grpc.insecure_channel(target) as channel:
                with pytest.raises(grpc.RpcError) as excinfo:
                    channel.unary_unary("/x.Y/Z")(b"", timeout=WAIT)
                assert excinfo.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(None).wait(WAIT)


def test_grpcio_handler_objects_run_unchanged() -> None:
    """What grpcio-generated ``add_*Servicer_to_server`` builds, served by minigrpc.

    grpcio >= 1.62 generated code calls both ``add_generic_rpc_handlers`` and
    ``add_registered_method_handlers`` with grpcio's own handler objects.
    """

    def behaviour(request: Any, context: Any) -> Any:
        return messages_pb2.SimpleResponse(username="u" if request.fill_username else "")

    method_handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=messages_pb2.SimpleRequest.FromString,
            response_serializer=messages_pb2.SimpleResponse.SerializeToString,
        )
    }
    server = minigrpc.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Generic", method_handlers),)
    )
    server.add_registered_method_handlers("test.Registered", method_handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for service in ("test.Generic", "test.Registered"):
                call = channel.unary_unary(
                    f"/{service}/Echo",
                    request_serializer=messages_pb2.SimpleRequest.SerializeToString,
                    response_deserializer=messages_pb2.SimpleResponse.FromString,
                )
                request = messages_pb2.SimpleRequest(fill_username=True)
                assert call(request, timeout=WAIT).username == "u"
    finally:
        server.stop(None).wait(WAIT)
