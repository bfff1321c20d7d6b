"""The client's connection behaviour : lazy connect, connect failures, reconnects,
GOAWAY, REFUSED_STREAM, MAX_CONCURRENT_STREAMS, wait_for_ready, close.

Peers are real: grpcio servers (tests/peers.py) where grpcio can play the part, otherwise the
scripted h2 server of tests/support/scripted_peer.py on a real unix socket.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Set

import pytest

import minigrpc
from minigrpc import RpcError, StatusCode
from minigrpc.http2.frames import MAX_CONCURRENT_STREAMS
from tests.interop import empty_pb2
from tests.peers import ADDRESS_KINDS, short_temp_dir
from tests.support.scripted_peer import (
    INITIAL_WINDOW_SIZE,
    WAIT,
    ErrorCodes,
    RawConn,
    ScriptedServer,
    ServerGrpcConnection,
    ServerRequest,
    echo_response,
)

pytestmark = pytest.mark.timeout(60)

EMPTY_CALL = "/grpc.testing.TestService/EmptyCall"


def empty_call(channel: minigrpc.Channel) -> Any:
    return channel.unary_unary(
        EMPTY_CALL,
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )


def echo(request: ServerRequest) -> None:
    request.respond(b"echo:" + request.message)


@pytest.fixture
def tmp_dir() -> Iterator[str]:
    import shutil

    directory = short_temp_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


# -- connect failures ------------------------------------------------------------------------


def test_missing_socket_is_unavailable_with_the_os_error(tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "missing.sock")
    with minigrpc.insecure_channel("unix:" + path) as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary("/a.B/C")(b"", timeout=5)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert info.value.details() == (
        'connection error: desc = "transport: Error while dialing: '
        f'dial unix {path}: connect: no such file or directory"'
    )
    assert str(info.value).startswith("rpc error: code = Unavailable desc = connection error")


def test_refused_unix_socket(tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "dead.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound but not listening: connect() is refused
    try:
        with minigrpc.insecure_channel("unix://" + path) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=5)
    finally:
        dead.close()
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert info.value.details().endswith(f'dial unix {path}: connect: connection refused"')


def test_refused_tcp_port() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with minigrpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary("/a.B/C")(b"", timeout=5)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert f"dial tcp 127.0.0.1:{port}: connect: connection refused" in info.value.details()


def test_abstract_socket_nobody_listens() -> None:
    name = f"minigrpc-nobody-{os.getpid()}"
    with minigrpc.insecure_channel("unix-abstract:" + name) as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary("/a.B/C")(b"", timeout=5)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert f"dial unix @{name}: connect: connection refused" in info.value.details()


def test_eof_before_settings_is_unavailable() -> None:
    with ScriptedServer.h2(echo, on_connect=lambda conn: False) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=5)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert "error reading server preface" in info.value.details()


def test_a_server_that_is_not_http2_fails_fast(tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "http1.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        # keep the connection open: the client must not wait for more
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with minigrpc.insecure_channel("unix:" + path) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=30)
    finally:
        listener.close()
        thread.join(5)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert "not a SETTINGS frame" in info.value.details()


def test_invalid_target_fails_calls_unavailable() -> None:
    with minigrpc.insecure_channel("unix:") as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary("/a.B/C")(b"", timeout=5)
    assert info.value.code() is StatusCode.UNAVAILABLE


@pytest.mark.parametrize("method", ["", "/a.B/C\r\nx-injected: 1", "/a.B/\0"])
def test_malformed_method_fails_before_sending(grpcio_server_factory: Any, method: str) -> None:
    """An empty :path or one with CR/LF/NUL never goes out (an h2 server would kill the whole
    connection); the call fails INTERNAL and the channel stays usable."""
    server = grpcio_server_factory("unix")
    with minigrpc.insecure_channel(server.target) as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary(method)(b"", timeout=5)
        assert info.value.code() is StatusCode.INTERNAL
        assert info.value.details() == f"malformed method name: {method!r}"
        assert isinstance(empty_call(chan)(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)


# -- reconnecting ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ADDRESS_KINDS)
def test_server_restart_between_calls(grpcio_server_factory: Any, kind: str) -> None:
    server = grpcio_server_factory(kind)
    with minigrpc.insecure_channel(server.target) as chan:
        call = empty_call(chan)
        assert isinstance(call(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)
        server.restart()
        assert isinstance(call(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)


@pytest.mark.parametrize("kind", ADDRESS_KINDS)
def test_server_down_then_back(grpcio_server_factory: Any, kind: str) -> None:
    """The failed dial is sticky (gRFC A62, as in grpcio): calls fail at once until the channel
    tries again after its backoff; a call that waits for ready is answered then."""
    server = grpcio_server_factory(kind)
    with minigrpc.insecure_channel(server.target) as chan:
        call = empty_call(chan)
        call(empty_pb2.Empty(), timeout=10)
        server.stop()
        with pytest.raises(RpcError) as info:
            call(empty_pb2.Empty(), timeout=10)
        assert info.value.code() is StatusCode.UNAVAILABLE
        server.start()
        started = time.monotonic()
        assert isinstance(call(empty_pb2.Empty(), timeout=10, wait_for_ready=True),
                          empty_pb2.Empty)
        assert time.monotonic() - started < 3.0  # the first backoff: 1 s ± 20%


class GatedServicer:
    """A servicer whose EmptyCall waits until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def EmptyCall(self, request: Any, context: Any) -> Any:
        self.entered.set()
        self.gate.wait(30)
        return empty_pb2.Empty()


@pytest.mark.parametrize("kind", ADDRESS_KINDS)
def test_graceful_stop_lets_the_call_in_flight_finish(tmp_dir: str, kind: str) -> None:
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    from minigrpc.descriptors import add_servicer
    from tests.interop import test_pb2
    from tests.peers import listen_address

    servicer = GatedServicer()
    executor = futures.ThreadPoolExecutor(max_workers=4)
    server = grpc.server(executor)
    add_servicer(server, test_pb2.TEST_SERVICE, servicer)
    address = listen_address(kind, tmp_dir)
    port = server.add_insecure_port(address)
    target = address if address.startswith("unix") else f"127.0.0.1:{port}"
    server.start()
    results: List[Any] = []
    try:
        with minigrpc.insecure_channel(target) as chan:
            call = empty_call(chan)

            def in_flight() -> None:
                try:
                    results.append(call(empty_pb2.Empty(), timeout=30))
                except RpcError as exc:
                    results.append(exc)

            thread = threading.Thread(target=in_flight)
            thread.start()
            assert servicer.entered.wait(10)
            stopped = server.stop(grace=20)  # GOAWAY now, while the handler still runs
            servicer.gate.set()
            thread.join(30)
            assert stopped.wait(20)
    finally:
        servicer.gate.set()
        server.stop(None)
        executor.shutdown(wait=True)
    assert len(results) == 1
    assert isinstance(results[0], empty_pb2.Empty), results[0]


def test_goaway_above_the_call_retries_it_on_a_new_connection() -> None:
    def handler(request: ServerRequest) -> None:
        if request.connection.index == 0:
            # "I processed nothing": the call is above last_stream_id and never started.
            request.connection.goaway(last_stream_id=0)
            request.connection.close()
        else:
            echo(request)

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            assert chan.unary_unary("/a.B/C")(b"x", timeout=10) == b"echo:x"
        assert len(server.connections) == 2


def test_goaway_covering_the_call_lets_it_finish_then_reconnects() -> None:
    def handler(request: ServerRequest) -> None:
        conn = request.connection
        if conn.index == 0 and request.stream_id == 1:
            conn.goaway(last_stream_id=2**31 - 1, then_ping=True)  # grpc-go's graceful stop
            conn.goaway(last_stream_id=request.stream_id)
        echo(request)

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            assert call(b"1", timeout=10) == b"echo:1"
            assert call(b"2", timeout=10) == b"echo:2"
        assert [c.index for c in server.connections] == [0, 1]


def test_refused_stream_is_retried_once() -> None:
    """A stream refused after the client sent all of it was never processed (RFC 9113 §8.7): it
    is sent again once, whether the response streams or not, and a request iterator's messages
    too (they are kept until the call is committed, gRFC A6; as on the asyncio API,
    tests/aio/test_client.py); refused twice, the call fails."""
    refused: Set[str] = set()

    def handler(request: ServerRequest) -> None:
        if request.path not in refused or request.path.endswith("/Once"):
            refused.add(request.path)
            request.reset(ErrorCodes.REFUSED_STREAM)
        else:
            echo(request)

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            assert chan.unary_unary("/a.B/C")(b"r", timeout=10) == b"echo:r"
            assert list(chan.unary_stream("/a.B/D")(b"s", timeout=10)) == [b"echo:s"]
            with pytest.raises(RpcError) as info:
                chan.stream_unary("/a.B/Once")(iter([b"t"]), timeout=10)
        assert len(server.requests) == 6
        assert [request.message for request in server.requests[-2:]] == [b"t", b"t"]
    assert info.value.code() is StatusCode.UNAVAILABLE


def test_refused_twice_is_unavailable() -> None:
    with ScriptedServer.h2(lambda request: request.reset(ErrorCodes.REFUSED_STREAM)) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"r", timeout=10)
        assert len(server.requests) == 2
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert "REFUSED_STREAM" in info.value.details()


def test_rst_stream_after_the_full_message_fails_the_call() -> None:
    def handler(request: ServerRequest) -> None:
        conn = request.connection.conn
        with request.connection.lock:
            conn.send_headers(
                request.stream_id, [(b":status", b"200"), (b"content-type", b"application/grpc")]
            )
            conn.send_data(request.stream_id, b"\x00\x00\x00\x00\x01x")
        request.reset(ErrorCodes.NO_ERROR)

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is StatusCode.INTERNAL
    assert "RST_STREAM" in info.value.details()


def test_http_404_page_is_unimplemented() -> None:
    def handler(request: ServerRequest) -> None:
        request.send_raw_headers(
            [(b":status", b"404"), (b"content-type", b"text/html")], end_stream=False
        )
        with request.connection.lock:
            request.connection.conn.send_data(
                request.stream_id, b"<h1>Not Found</h1>", end_stream=True
            )
        request.connection.flush()

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is StatusCode.UNIMPLEMENTED
    assert info.value.details() == (
        "unexpected HTTP status code received from server: 404 (Not Found); "
        'transport: received unexpected content-type "text/html"'
    )


def test_compression_request_headers_and_flag() -> None:
    def handler(request: ServerRequest) -> None:
        request.respond(f"{request.header('grpc-encoding')}:{request.body[0]}".encode())

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            assert call(b"z" * 100, compression=minigrpc.Compression.Gzip, timeout=10) == b"gzip:1"
            assert call(b"z" * 100, timeout=10) == b"None:0"


def test_no_compression_with_an_algorithm_the_server_did_not_list() -> None:
    def handler(request: ServerRequest) -> None:
        conn = request.connection.conn
        with request.connection.lock:
            conn.send_headers(
                request.stream_id,
                [
                    (b":status", b"200"),
                    (b"content-type", b"application/grpc"),
                    (b"grpc-accept-encoding", b"identity,deflate"),
                ],
            )
            reply = f"{request.header('grpc-encoding')}".encode()
            conn.send_data(request.stream_id, b"\x00" + len(reply).to_bytes(4, "big") + reply)
            conn.send_headers(request.stream_id, [(b"grpc-status", b"0")], end_stream=True)
        request.connection.flush()

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(
            server.target, compression=minigrpc.Compression.Gzip
        ) as chan:
            call = chan.unary_unary("/a.B/C")
            assert call(b"a", timeout=10) == b"gzip"  # nothing known yet: compress
            assert call(b"a", timeout=10) == b"None"  # the server listed no gzip
            assert call(b"a", compression=minigrpc.Compression.Deflate, timeout=10) == b"deflate"


# -- concurrency limits ------------------------------------------------------------------------


def test_calls_above_max_concurrent_streams_wait_instead_of_failing() -> None:
    with ScriptedServer.h2(echo, settings={MAX_CONCURRENT_STREAMS: 1}) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            assert call(b"first", timeout=10) == b"echo:first"  # SETTINGS are known now
            results: List[Any] = []

            def worker(n: int) -> None:
                try:
                    results.append(call(str(n).encode(), timeout=30))
                except RpcError as exc:
                    results.append(exc)

            threads = [threading.Thread(target=worker, args=(n,)) for n in range(10)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        # h2 on the server enforces the limit: a second concurrent stream would have killed
        # the connection. One connection served everything.
        assert len(server.connections) == 1
    assert sorted(results) == sorted(f"echo:{n}".encode() for n in range(10))


def test_deadline_while_waiting_for_a_stream_slot() -> None:
    held: List[ServerRequest] = []
    release = threading.Event()

    def handler(request: ServerRequest) -> None:
        if request.message == b"hold":
            held.append(request)
            threading.Thread(target=lambda: (release.wait(30), echo(request)), daemon=True).start()
        else:
            echo(request)

    with ScriptedServer.h2(handler, settings={MAX_CONCURRENT_STREAMS: 1}) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            call(b"warm-up", timeout=10)
            holder = threading.Thread(target=lambda: call(b"hold", timeout=30))
            holder.start()
            assert server.wait_for_requests(2)
            with pytest.raises(RpcError) as info:
                call(b"waits", timeout=0.2)
            assert info.value.code() is StatusCode.DEADLINE_EXCEEDED
            release.set()
            holder.join(30)
            assert call(b"after", timeout=10) == b"echo:after"


# -- wait_for_ready, close, one-shot ----------------------------------------------------------


def test_wait_for_ready_waits_for_the_server(tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "later.sock")
    options = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 100)]
    results: List[Any] = []
    attempted = threading.Event()

    with minigrpc.insecure_channel("unix:" + path, options=options) as chan:
        call = chan.unary_unary("/a.B/C")
        with pytest.raises(RpcError) as info:
            call(b"", timeout=0.3, wait_for_ready=True)
        assert info.value.code() is StatusCode.DEADLINE_EXCEEDED  # not UNAVAILABLE

        def waiting_call() -> None:
            attempted.set()
            results.append(call(b"w", timeout=30, wait_for_ready=True))

        thread = threading.Thread(target=waiting_call)
        thread.start()
        assert attempted.wait(10)
        server = ScriptedServer.h2(echo)
        os.rename(server.path, path)  # the server appears at the target's path now
        try:
            thread.join(30)
        finally:
            server.close()
    assert results == [b"echo:w"]


def test_without_wait_for_ready_a_missing_server_fails_fast(tmp_dir: str) -> None:
    with minigrpc.insecure_channel("unix:" + os.path.join(tmp_dir, "none.sock")) as chan:
        with pytest.raises(RpcError) as info:
            chan.unary_unary("/a.B/C")(b"", timeout=30)
    assert info.value.code() is StatusCode.UNAVAILABLE


def test_close_cancels_calls_in_flight_and_refuses_new_ones() -> None:
    entered = threading.Event()

    def handler(request: ServerRequest) -> None:
        entered.set()  # never answers

    with ScriptedServer.h2(handler) as server:
        chan = minigrpc.insecure_channel(server.target)
        call = chan.unary_unary("/a.B/C")
        results: List[Any] = []

        def in_flight() -> None:
            try:
                call(b"", timeout=30)
            except RpcError as exc:
                results.append(exc)

        thread = threading.Thread(target=in_flight)
        thread.start()
        assert entered.wait(10)
        chan.close()
        thread.join(10)
        assert results and results[0].code() is StatusCode.CANCELLED
        assert results[0].details() == "Channel closed!"
        with pytest.raises(ValueError):
            call(b"", timeout=1)
        assert server.wait_for_requests(1)


def test_lazy_connect_and_one_connection_for_many_calls() -> None:
    with ScriptedServer.h2(echo) as server:
        chan = minigrpc.insecure_channel(server.target)
        assert server.connections == []  # nothing happens until the first call
        call = chan.unary_unary("/a.B/C")
        for n in range(5):
            assert call(str(n).encode(), timeout=10) == f"echo:{n}".encode()
        chan.close()
        assert len(server.connections) == 1


def test_one_shot_path_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    started: List[str] = []
    original = threading.Thread.start
    caller = threading.current_thread()

    def recording_start(self: threading.Thread) -> None:
        if threading.current_thread() is caller:
            started.append(self.name)
        original(self)

    with ScriptedServer.h2(echo) as server:
        monkeypatch.setattr(threading.Thread, "start", recording_start)
        with minigrpc.insecure_channel(server.target) as chan:
            assert chan.unary_unary("/a.B/C")(b"once", timeout=10) == b"echo:once"
        monkeypatch.undo()
    assert started == []


def test_idle_connection_answers_nothing_but_reconnects_after_server_loss() -> None:
    with ScriptedServer.h2(echo) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            assert call(b"a", timeout=10) == b"echo:a"
            # The server closes the idle connection (as after a restart or an idle timeout).
            first: ServerGrpcConnection = server.connections[0]
            first.goaway(last_stream_id=1)
            first.close()
            assert call(b"b", timeout=10) == b"echo:b"
        assert len(server.connections) == 2


def test_deadline_holds_even_when_the_server_stops_reading(tmp_dir: str) -> None:
    # A server that grants huge windows and then never reads: the request fills the kernel's
    # socket buffers, and the writing caller must still return at its deadline.
    from tests.support.scripted_peer import server_connection

    path = os.path.join(tmp_dir, "deaf.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    accepted: List[socket.socket] = []
    greeted = threading.Event()

    def deaf_server() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)
        h2conn = server_connection({INITIAL_WINDOW_SIZE: 2**31 - 1})
        h2conn.increment_flow_control_window(2**31 - 1 - 65535)
        conn.sendall(h2conn.data_to_send())
        greeted.set()

    thread = threading.Thread(target=deaf_server, daemon=True)
    thread.start()
    try:
        with minigrpc.insecure_channel("unix:" + path) as chan:
            call = chan.unary_unary("/a.B/C")
            with pytest.raises(RpcError) as info:
                call(b"x" * (64 << 20), timeout=1.0)
            assert info.value.code() is StatusCode.DEADLINE_EXCEEDED
            assert greeted.is_set()
    finally:
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


# -- what goes on the wire, and what comes back -------------------------------------------------


@pytest.mark.parametrize("tcp", [False, True])
def test_request_headers_on_the_wire(tcp: bool) -> None:
    with ScriptedServer.h2(echo, tcp=tcp) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            chan.unary_unary("/pkg.Svc/Method")(
                b"hi", timeout=1.5, metadata=[("x-custom", "v"), ("x-custom-bin", b"\xab\xab\xab")]
            )
        headers = server.requests[0].headers
    names = [name for name, _ in headers]
    assert names == [
        b":method", b":scheme", b":path", b":authority", b"content-type", b"user-agent", b"te",
        b"grpc-accept-encoding", b"grpc-timeout", b"x-custom", b"x-custom-bin",
    ]  # fmt: skip
    values = dict(headers)
    assert values[b":path"] == b"/pkg.Svc/Method"
    authority = server.target.encode() if tcp else b"localhost"
    assert values[b":authority"] == authority
    assert values[b"user-agent"] == f"grpc-python-minigrpc/{minigrpc.__version__}".encode()
    assert values[b"te"] == b"trailers"
    timeout = values[b"grpc-timeout"]
    assert timeout.endswith(b"u") and 1_400_000 < int(timeout[:-1]) <= 1_500_000
    assert values[b"x-custom-bin"] == b"q6ur"  # unpadded base64


def test_default_authority_option() -> None:
    with ScriptedServer.h2(echo) as server:
        options = [("grpc.default_authority", "agent.local:1234"), ("grpc.unknown_option", 1)]
        with minigrpc.insecure_channel(server.target, options=options) as chan:
            chan.unary_unary("/a.B/C")(b"", timeout=10)
        assert dict(server.requests[0].headers)[b":authority"] == b"agent.local:1234"


def test_bad_minigrpc_option_values_are_rejected() -> None:
    with pytest.raises(ValueError):
        minigrpc.insecure_channel("unix:/x", options=[("minigrpc.max_frame_size", 100)])
    with pytest.raises(ValueError):
        minigrpc.insecure_channel("unix:/x", options=[("minigrpc.initial_window_size", 0)])


def test_window_and_frame_options_reach_the_server() -> None:
    options = [("minigrpc.initial_window_size", 100_000), ("minigrpc.max_frame_size", 32768)]
    settings: List[Any] = []

    def handler(request: ServerRequest) -> None:
        remote = request.connection.conn.remote_settings
        settings.append((remote.initial_window_size, remote.max_frame_size))
        echo(request)

    with ScriptedServer.h2(handler) as server:
        with minigrpc.insecure_channel(server.target, options=options) as chan:
            chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert settings == [(100_000, 32768)]


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


@pytest.mark.parametrize(
    ("data", "extra", "code", "details"),
    [
        (b"\x01\x00\x00\x00\x01x", [], StatusCode.INTERNAL, "compressed flag set with identity"),
        (
            b"\x01\x00\x00\x00\x01x",
            [(b"grpc-encoding", b"snappy")],
            StatusCode.INTERNAL,
            'Decompressor is not installed for grpc-encoding "snappy"',
        ),
        (
            b"\x01\x00\x00\x00\x05xxxxx",
            [(b"grpc-encoding", b"gzip")],
            StatusCode.INTERNAL,
            "failed to decompress",
        ),
        (
            b"\x01" + len(_gzip(bytes(5 << 20))).to_bytes(4, "big") + _gzip(bytes(5 << 20)),
            [(b"grpc-encoding", b"gzip")],
            StatusCode.RESOURCE_EXHAUSTED,
            "received message larger than max",
        ),
        (b"\x02\x00\x00\x00\x01x", [], StatusCode.INTERNAL, "flag must be 0 or 1"),
    ],
)
def test_bad_response_messages(data: bytes, extra: Any, code: StatusCode, details: str) -> None:
    with ScriptedServer.h2(lambda request: request.respond_raw(data, extra)) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is code
    assert details in info.value.details()


def test_gzip_bomb_is_bounded_by_the_receive_limit() -> None:
    bomb = _gzip(bytes(64 << 20))  # 64 MiB of zeros in ~64 KiB
    data = b"\x01" + len(bomb).to_bytes(4, "big") + bomb
    extra = [(b"grpc-encoding", b"gzip")]
    with ScriptedServer.h2(lambda request: request.respond_raw(data, extra)) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is StatusCode.RESOURCE_EXHAUSTED


def test_serializer_and_deserializer_failures_are_internal() -> None:
    def bad_serializer(request: Any) -> bytes:
        raise TypeError("cannot")

    def bad_deserializer(data: bytes) -> Any:
        raise ValueError("garbage")

    with ScriptedServer.h2(echo) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C", request_serializer=bad_serializer)(object(), timeout=10)
            assert info.value.code() is StatusCode.INTERNAL
            assert info.value.details() == "Exception serializing request!"
            assert server.requests == []
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C", response_deserializer=bad_deserializer)(b"", timeout=10)
            assert info.value.code() is StatusCode.INTERNAL
            assert info.value.details() == "Exception deserializing response!"


def test_generated_stub_arguments_are_accepted() -> None:
    # grpcio-tools >= 1.63 stubs pass _registered_method=True.
    with ScriptedServer.h2(echo) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C", _registered_method=True)
            response, info = call.with_call(b"s", timeout=10)
    assert response == b"echo:s"
    assert info.code() is StatusCode.OK
    assert info.trailing_metadata() == ()


def test_status_details_bin_reaches_the_error() -> None:
    details = b"\x08\x03\x12\x03bad"
    trailers = [
        (b"grpc-status", b"3"),
        (b"grpc-message", b"bad"),
        (b"grpc-status-details-bin", b"CAMSA2JhZA"),
    ]
    with ScriptedServer.h2(lambda request: request.respond_raw(b"", trailers=trailers)) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is StatusCode.INVALID_ARGUMENT
    assert info.value.status_details_bin == details


def test_connection_lost_mid_call_names_the_cause() -> None:
    def vanish(request: ServerRequest) -> None:
        request.connection.close()

    with ScriptedServer.h2(vanish) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            with pytest.raises(RpcError) as info:
                call(b"", timeout=10)
            assert info.value.code() is StatusCode.UNAVAILABLE
            # A unix socket closed with unread data in it (our ACKs) may read as a reset.
            assert info.value.details() in (
                f"connection to {server.target} closed before the response was complete",
                f"connection to {server.target} lost before the response was complete: "
                "connection reset by peer",
            )


def test_connection_reset_mid_call_names_the_cause() -> None:
    import struct

    def reset(request: ServerRequest) -> None:
        # SO_LINGER with a zero timeout turns close() into a TCP RST.
        request.connection.sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
        )
        request.connection.closed = True
        request.connection.sock.close()  # no shutdown(): that would send a FIN first

    with ScriptedServer.h2(reset, tcp=True) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            with pytest.raises(RpcError) as info:
                chan.unary_unary("/a.B/C")(b"", timeout=10)
    assert info.value.code() is StatusCode.UNAVAILABLE
    assert info.value.details() == (
        f"connection to {server.target} lost before the response was complete: "
        "connection reset by peer"
    )


def test_a_response_followed_by_close_is_not_lost() -> None:
    # A server that answers and hangs up at once: our WINDOW_UPDATE or SETTINGS ACK may hit a
    # closed socket, but the complete response is already in our receive buffer.
    def answer_and_close(request: ServerRequest) -> None:
        request.respond(b"x" * 100_000)
        request.connection.close()

    with ScriptedServer.h2(answer_and_close) as server:
        for _ in range(20):
            with minigrpc.insecure_channel(server.target) as chan:
                assert chan.unary_unary("/a.B/C")(b"", timeout=10) == b"x" * 100_000
        assert len(server.connections) == 20


def test_goaway_then_close_after_each_call_never_fails_the_next_call() -> None:
    # The next call may race with the close; the GOAWAY says it was not processed, so it is
    # retried on a new connection (PROTOCOL-HTTP2.md, "GOAWAY Frame") whichever way the race goes.
    def answer_goaway_close(request: ServerRequest) -> None:
        request.respond(b"y" * 1000)
        request.connection.goaway(last_stream_id=request.stream_id)
        request.connection.close()

    with ScriptedServer.h2(answer_goaway_close) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            call = chan.unary_unary("/a.B/C")
            for _ in range(30):
                assert call(b"", timeout=10) == b"y" * 1000


# -- a call ended by another thread while its reader is blocked in the socket ------------------


def _answer_once_then_stay_silent(conn: RawConn) -> None:
    """Settings, one echoed unary response, then nothing at all, whatever comes: RST_STREAM
    has no answer in HTTP/2 (RFC 9113 §6.4)."""
    conn.send_settings()
    request = conn.next_request()
    assert request is not None
    echo_response(conn, request)
    assert conn.owner is not None
    conn.owner.hang(conn)  # until the client or the test goes away


def _signal_when_reading(
    reading: threading.Event, readers: Optional[List[threading.Thread]] = None
) -> Callable[..., None]:
    """A profile hook for a reading thread: sets ``reading`` (and records the thread) as it
    calls into the kernel to wait for the socket (``recv``, or ``poll``/``select`` before it).
    The non-blocking look a connection takes before reusing an idle connection does not count.
    """

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call" or getattr(arg, "__name__", "") not in ("recv", "poll", "select"):
            return
        caller = frame
        while caller is not None:
            if caller.f_code.co_name == "_peek":
                return
            caller = caller.f_back
        if readers is not None:
            readers.append(threading.current_thread())
        reading.set()

    return hook


@pytest.mark.parametrize("canceller", ["request-iterator-fails", "cancel-from-another-thread"])
def test_a_call_ended_by_another_thread_wakes_its_blocked_reader(canceller: str) -> None:
    """The thread waiting for the next response is the connection's reader, inside the kernel;
    another thread ends the call (the request iterator raises, or ``cancel()``). The server
    never sends another byte, so only the end of the call itself can wake the reader: it must,
    and the reader raises the call's status at once instead of blocking for ever.

    The profile hook makes the order certain: the call ends only once the reader has
    committed to waiting in the kernel, which is the window that used to hang."""
    reading = threading.Event()
    finished = threading.Event()
    outcome: List[Any] = []

    def requests() -> Iterator[bytes]:
        if canceller == "request-iterator-fails":
            assert reading.wait(WAIT)
            raise ValueError("the request iterator fails")
        finished.wait(WAIT)  # sends nothing; the call is cancelled meanwhile
        return
        yield b""  # pragma: no cover - makes this a generator

    with ScriptedServer(_answer_once_then_stay_silent, auto_window_update=False) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            # The connection and both SETTINGS exchanges are done: the server is silent now.
            assert chan.unary_unary("/a.B/C")(b"once", timeout=10) == b"once"
            responses = chan.stream_stream("/a.B/Stream")(requests())

            def read() -> None:
                sys.setprofile(_signal_when_reading(reading))
                try:
                    next(responses)
                except minigrpc.RpcError as exc:
                    outcome.append(exc)
                finally:
                    sys.setprofile(None)

            reader = threading.Thread(target=read, name="blocked-reader")
            reader.start()
            try:
                if canceller == "cancel-from-another-thread":
                    assert reading.wait(WAIT)
                    assert responses.cancel()
                reader.join(WAIT)
                woke = not reader.is_alive()
            finally:
                finished.set()
        reader.join(WAIT)  # closing the channel ends a reader the call could not wake
    assert woke, "the reader stayed blocked in the socket after its call ended"
    [error] = outcome
    if canceller == "request-iterator-fails":
        assert error.code() is StatusCode.UNKNOWN
        assert error.details() == "Exception iterating requests!"
    else:
        assert error.code() is StatusCode.CANCELLED


def test_a_cancelled_future_frees_its_thread_blocked_in_the_socket() -> None:
    """``future.cancel()`` answers at once whatever the future's thread does; that thread, the
    connection's reader, must end too instead of staying blocked in the kernel for ever."""
    reading = threading.Event()
    readers: List[threading.Thread] = []
    with ScriptedServer(_answer_once_then_stay_silent, auto_window_update=False) as server:
        with minigrpc.insecure_channel(server.target) as chan:
            assert chan.unary_unary("/a.B/C")(b"once", timeout=10) == b"once"
            threading.setprofile(_signal_when_reading(reading, readers))
            try:
                future = chan.unary_unary("/a.B/C").future(b"x")
            finally:
                threading.setprofile(None)  # only the future's thread, started above, has it
            assert reading.wait(WAIT)
            assert future.cancel()
            assert future.cancelled()
            readers[0].join(WAIT)
            freed = not readers[0].is_alive()
        readers[0].join(WAIT)  # closing the channel ends a thread the cancel could not wake
    assert readers[0].name == "minigrpc-future"
    assert freed, "the future's thread stayed blocked in the socket after cancel()"
