"""minigrpc.aio's server: deadlines, cancellation, backpressure, interceptors, limits, TLS and
stop(), against grpcio's and minigrpc's clients.

Handlers that must still be running when the test acts wait on an event the test sets
(tests/support/aio_server.py); nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any, Iterator, List

import pytest

import minigrpc
from minigrpc import StatusCode, aio
from tests.aio.test_server import Client, grpc
from tests.support.aio_server import SERVICE, AioServer
from tests.support.tls_certs import CLIENT_NAME, Certificates, make_certificates

#: For the tests that drive grpcio's client directly.
needs_grpcio = pytest.mark.skipif(grpc is None, reason="grpcio is not installed here")

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture
def server() -> Iterator[AioServer]:
    with AioServer("tcp", with_interop=False) as started:
        yield started


# -- deadlines and cancellation ----------------------------------------------------------------


@pytest.mark.parametrize("client_kind", ["grpcio", "grpcio-aio", "minigrpc", "minigrpc-aio"])
def test_deadline_cancels_the_handler(server: AioServer, client_kind: str) -> None:
    outcome = Client(client_kind, server.target).call("unary_unary", "Wait", b"w", timeout=0.3)
    assert outcome.code is StatusCode.DEADLINE_EXCEEDED
    assert server.next_outcome() == "cancelled"
    # The done callback ran once; whether the call counts as cancelled depends on who ended
    # it first: the server's deadline timer, or the client's RST_STREAM at its own deadline.
    assert len(server.servicer.done_callbacks) == 1


def test_client_cancel_cancels_the_handler_task(server: AioServer) -> None:
    async def main() -> None:
        async with aio.insecure_channel(server.target) as channel:
            call = channel.unary_unary(f"/{SERVICE}/Wait")(b"w")
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(None, server.next_started) == "w"
            assert call.cancel()
            assert await loop.run_in_executor(None, server.next_outcome) == "cancelled"
            assert (await call.code()) is StatusCode.CANCELLED

    asyncio.run(main())
    assert server.servicer.done_callbacks == [True]


@needs_grpcio
def test_grpcio_future_cancel_cancels_the_handler_task(server: AioServer) -> None:
    with grpc.insecure_channel(server.target) as channel:
        future = channel.unary_unary(f"/{SERVICE}/Wait").future(b"w")
        assert server.next_started() == "w"
        future.cancel()
        assert server.next_outcome() == "cancelled"


def test_a_released_handler_answers(server: AioServer) -> None:
    with minigrpc.insecure_channel(server.target) as channel:
        future = channel.unary_unary(f"/{SERVICE}/Wait").future(b"w")
        assert server.next_started() == "w"
        server.call_soon(server.servicer.release.set)
        assert future.result(10) == b"w"
    assert server.next_outcome() == "released"


def test_a_handler_cancelled_by_its_own_code_ends_the_call_cancelled(server: AioServer) -> None:
    outcome = Client("grpcio", server.target).call("unary_unary", "SelfCancel", b"")
    assert (outcome.code, outcome.details) == (StatusCode.CANCELLED, "the handler was cancelled")
    assert Client("grpcio", server.target).call("unary_unary", "Echo", b"e").responses == [b"e"]


def test_the_request_iterator_is_an_async_iterator(server: AioServer) -> None:
    outcome = Client("minigrpc-aio", server.target).call("stream_unary", "First", [b"1", b"2"])
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [b"1"])


def test_read_and_the_request_iterator_mix_as_in_grpcio(server: AioServer) -> None:
    outcome = Client("grpcio-aio", server.target).call("stream_stream", "Mixed", [b"a", b"b", b"c"])
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [b"a", b"b+c"])


def test_trailing_metadata_must_be_pairs(server: AioServer) -> None:
    outcome = Client("grpcio", server.target).call("unary_unary", "Echo", b"dict-trailers")
    assert outcome.responses == [b"TypeError"]


# -- backpressure ----------------------------------------------------------------------------------


def test_a_client_that_stops_reading_holds_the_handler_back(server: AioServer) -> None:
    """Flood writes 120 responses of 64 KiB; the client's 64 KiB window and its own bounded
    buffer, plus the handler's RESPONSE_HIGH_WATER, are all the handler may be ahead of what
    the client has read, so write() must wait (without backpressure it would be 120 ahead)."""
    options = [("minigrpc.initial_window_size", 65535), ("minigrpc.connection_window_size", 65535)]
    total = 120
    ahead: List[int] = []
    with minigrpc.insecure_channel(server.target, options) as channel:
        responses = channel.unary_stream(f"/{SERVICE}/Flood")(str(total).encode(), timeout=30)
        for read, _response in enumerate(responses, 1):
            ahead.append(server.servicer.written - read)
    assert len(ahead) == total and server.servicer.written == total
    assert max(ahead) <= 32, ahead


# -- large messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("client_kind", ["grpcio", "minigrpc-aio"])
def test_message_limits(server: AioServer, client_kind: str) -> None:
    client = Client(client_kind, server.target, options=[("grpc.max_send_message_length", -1)])
    big = b"b" * (3 << 20)
    assert client.call("unary_unary", "Echo", big).responses == [big]
    too_big = client.call("unary_unary", "Echo", b"t" * (5 << 20))
    assert too_big.code is StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("client_kind", ["grpcio", "minigrpc"])
def test_compression_both_ways(client_kind: str) -> None:
    if client_kind == "grpcio" and grpc is None:
        pytest.skip("grpcio is not installed here")
    with AioServer("tcp", with_interop=False, compression=minigrpc.Compression.Gzip) as server:
        module: Any = grpc if client_kind == "grpcio" else minigrpc
        with module.insecure_channel(server.target, compression=module.Compression.Gzip) as channel:
            payload = b"z" * 100_000
            assert channel.unary_unary(f"/{SERVICE}/Echo")(payload, timeout=10) == payload
            chat = channel.stream_stream(f"/{SERVICE}/Chat")(iter([b"a", b"b"]), timeout=10)
            assert list(chat) == [b"A", b"B"]


# -- interceptors ----------------------------------------------------------------------------------


class Recording(aio.ServerInterceptor):
    def __init__(self, name: str, seen: List[str]) -> None:
        self.name = name
        self.seen = seen

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        self.seen.append(f"{self.name}:{handler_call_details.method}")
        metadata = dict(handler_call_details.invocation_metadata)
        if metadata.get("x-deny") == self.name:
            return None
        if metadata.get("x-fail") == self.name:
            raise RuntimeError("interceptor failed")
        return await continuation(handler_call_details)


@pytest.mark.parametrize("client_kind", ["grpcio", "minigrpc-aio"])
def test_server_interceptors(client_kind: str) -> None:
    seen: List[str] = []
    interceptors = [Recording("outer", seen), Recording("inner", seen)]
    with AioServer("tcp", with_interop=False, interceptors=interceptors) as server:
        client = Client(client_kind, server.target)
        assert client.call("unary_unary", "Echo", b"i").responses == [b"i"]
        assert seen == [f"outer:/{SERVICE}/Echo", f"inner:/{SERVICE}/Echo"]
        denied = client.call("unary_unary", "Echo", b"i", metadata=(("x-deny", "inner"),))
        assert denied.code is StatusCode.UNIMPLEMENTED
        failed = client.call("stream_stream", "Chat", [b"a"], metadata=(("x-fail", "outer"),))
        assert failed.code is StatusCode.UNKNOWN
        assert "interceptor failed" in failed.details
        assert client.call("stream_stream", "Chat", [b"a"]).responses == [b"A"]


def test_blocking_interceptors_are_refused() -> None:
    class Blocking:
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            return continuation(details)

    with pytest.raises(ValueError, match="ServerInterceptor"):
        aio.server(interceptors=[Blocking()])


# -- limits ----------------------------------------------------------------------------------------


def test_maximum_concurrent_rpcs() -> None:
    with AioServer("tcp", with_interop=False, maximum_concurrent_rpcs=1) as server:
        with minigrpc.insecure_channel(server.target) as channel:
            waiting = channel.unary_unary(f"/{SERVICE}/Wait").future(b"w")
            assert server.next_started() == "w"
            with pytest.raises(minigrpc.RpcError) as info:
                channel.unary_unary(f"/{SERVICE}/Echo")(b"e", timeout=10)
            assert info.value.code() is StatusCode.RESOURCE_EXHAUSTED
            server.call_soon(server.servicer.release.set)
            assert waiting.result(10) == b"w"
            assert channel.unary_unary(f"/{SERVICE}/Echo")(b"e", timeout=10) == b"e"


# -- TLS -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


@pytest.mark.parametrize("client_kind", ["grpcio", "grpcio-aio", "minigrpc", "minigrpc-aio"])
def test_tls(certificates: Certificates, client_kind: str) -> None:
    credentials = minigrpc.ssl_server_credentials(
        [(certificates.server_key, certificates.server_chain)]
    )

    def channel_credentials(module: Any) -> Any:
        return module.ssl_channel_credentials(root_certificates=certificates.ca)

    with AioServer("tcp", with_interop=False, credentials=credentials) as server:
        client = Client(client_kind, f"localhost:{server.port}", channel_credentials)
        assert client.call("unary_unary", "Echo", b"secret").responses == [b"secret"]
        assert client.call("unary_unary", "Echo", b"auth").responses == [b"ssl,-"]
        assert client.call("stream_stream", "Chat", [b"x", b"y"]).responses == [b"X", b"Y"]


def test_mutual_tls_names_the_client(certificates: Certificates) -> None:
    credentials = minigrpc.ssl_server_credentials(
        [(certificates.server_key, certificates.server_chain)],
        root_certificates=certificates.ca,
        require_client_auth=True,
    )

    def channel_credentials(module: Any) -> Any:
        return module.ssl_channel_credentials(
            root_certificates=certificates.ca,
            private_key=certificates.client_key,
            certificate_chain=certificates.client_chain,
        )

    with AioServer("tcp", with_interop=False, credentials=credentials) as server:
        for kind in ("grpcio", "minigrpc-aio"):
            client = Client(kind, f"localhost:{server.port}", channel_credentials)
            outcome = client.call("unary_unary", "Echo", b"auth")
            assert outcome.responses == [b"ssl," + CLIENT_NAME.encode()]
        plain = Client("grpcio", f"localhost:{server.port}").call("unary_unary", "Echo", b"x")
        assert plain.code is StatusCode.UNAVAILABLE


# -- stop ------------------------------------------------------------------------------------------


def test_stop_with_grace_lets_calls_finish_and_refuses_new_ones() -> None:
    server = AioServer("tcp", with_interop=False)
    try:
        with minigrpc.insecure_channel(server.target) as channel:
            waiting = channel.unary_unary(f"/{SERVICE}/Wait").future(b"w")
            assert server.next_started() == "w"
            stopped: Future[Any] = asyncio.run_coroutine_threadsafe(
                server.server.stop(30), server.loop
            )
            assert server.run(server.server.wait_for_termination(0)) is True
            refused = Client("grpcio", server.target).call("unary_unary", "Echo", b"x")
            assert refused.code is StatusCode.UNAVAILABLE
            server.call_soon(server.servicer.release.set)
            assert waiting.result(10) == b"w"
            stopped.result(10)
            assert server.run(server.server.wait_for_termination(5)) is False
    finally:
        server.stop()


@needs_grpcio
@pytest.mark.parametrize("grace", [None, 0.2])
def test_stop_cancels_what_is_still_running(grace: Any) -> None:
    server = AioServer("tcp", with_interop=False)
    try:
        with grpc.insecure_channel(server.target) as channel:
            waiting = channel.unary_unary(f"/{SERVICE}/Wait").future(b"w")
            assert server.next_started() == "w"
            server.run(server.server.stop(grace))
            assert server.next_outcome() == "cancelled"
            with pytest.raises(grpc.RpcError) as info:
                waiting.result(10)
            # grpc-core's answer to a call cancelled at shutdown (and so ours).
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE
            assert info.value.details() == "Cancelling all calls"
    finally:
        server.stop()


def test_stop_removes_the_unix_socket_file() -> None:
    import os

    server = AioServer("unix", with_interop=False)
    path = server.target[len("unix:") :]
    try:
        assert os.path.exists(path)
        assert Client("minigrpc", server.target).call("unary_unary", "Echo", b"u").responses
        server.run(server.server.stop(None))
        assert not os.path.exists(path)
    finally:
        server.stop()


def test_ports_only_before_start(server: AioServer) -> None:
    with pytest.raises(RuntimeError, match="before start"):
        server.server.add_insecure_port("127.0.0.1:0")
    with pytest.raises(RuntimeError, match="already been started"):
        server.run(server.server.start())


@pytest.mark.parametrize("client_kind", ["grpcio-aio", "minigrpc"])
def test_disabled_compression_is_refused_and_not_advertised(client_kind: str) -> None:
    """``grpc.compression_enabled_algorithms_bitset`` 3 (identity and deflate): a gzip request
    is UNIMPLEMENTED, as on grpcio's server; deflate still works."""
    options = [("grpc.compression_enabled_algorithms_bitset", 3)]
    with AioServer("tcp", with_interop=False, options=options) as server:
        gzip = Client(client_kind, server.target)
        refused = gzip.call(
            "unary_unary", "Echo", b"g", compression=minigrpc.Compression.Gzip
        )
        assert refused.code is StatusCode.UNIMPLEMENTED, refused
        allowed = gzip.call(
            "unary_unary", "Echo", b"d", compression=minigrpc.Compression.Deflate
        )
        assert (allowed.code, allowed.responses) == (StatusCode.OK, [b"d"])
