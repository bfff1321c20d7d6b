"""Connection errors name the target the user gave, on every client: the channel's (blocking
and asyncio) and the one-shot call the CNI plugin makes.

A channel that cannot reach its server fails its calls UNAVAILABLE with grpc-go's wording
(``connection error: desc = "transport: ..."``); in every case the details say which target
failed, so that a program with several channels can tell which one. That holds for a
connection that fails later too: a server that closes or answers something other than HTTP/2
before its preface (RFC 9113 §3.4), a connection error after it (§5.4.1), a connection lost
while a call runs. A target without a port dials 443, as grpcio does, and the error shows that
port.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from typing import Any, Iterator, NamedTuple, Tuple

import pytest

import minigrpc
from minigrpc import StatusCode, aio, oneshot
from tests.peers import short_temp_dir
from tests.support.scripted_peer import RawConn, ScriptedServer, ServerRequest, rpc_script

pytestmark = pytest.mark.timeout(60)

CLIENTS = ("blocking", "aio")
#: The channel's clients and the one-shot call (plaintext only, as the plugin needs).
ALL_CLIENTS = (*CLIENTS, "oneshot")


class Failed(NamedTuple):
    """How a call failed: what ``code()`` and ``details()`` said."""

    code: StatusCode
    details: str


def call_error(client: str, target: str, credentials: Any = None) -> Failed:
    """How one unary call on a new connection of ``client`` to ``target`` failed."""
    if client == "oneshot":
        assert credentials is None
        status, response = oneshot.unary_call(target, "/a.B/C", b"", timeout=10)
        assert response is None, status
        return Failed(status.code, status.details)
    if client == "blocking":
        channel = (
            minigrpc.secure_channel(target, credentials)
            if credentials is not None
            else minigrpc.insecure_channel(target)
        )
        with channel:
            with pytest.raises(minigrpc.RpcError) as info:
                channel.unary_unary("/a.B/C")(b"", timeout=10)
        return Failed(info.value.code(), info.value.details())

    async def main() -> Any:
        channel = (
            aio.secure_channel(target, credentials)
            if credentials is not None
            else aio.insecure_channel(target)
        )
        async with channel:
            with pytest.raises(aio.AioRpcError) as info:
                await channel.unary_unary("/a.B/C")(b"", timeout=10)
        return Failed(info.value.code(), info.value.details())

    return asyncio.run(main())


@pytest.fixture
def tmp_dir() -> Iterator[str]:
    directory = short_temp_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local TCP port that refuses connections: bound, never listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _refused(address: Tuple[str, int]) -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.settimeout(5)
        probe.connect(address)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def assert_names(error: Failed, *texts: str, prefix: str = "transport: ") -> None:
    assert error.code is StatusCode.UNAVAILABLE, error
    assert error.details.startswith(f'connection error: desc = "{prefix}'), error.details
    for text in texts:
        assert text in error.details, (text, error.details)


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_missing_unix_socket_is_named(client: str, tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "missing.sock")
    assert_names(call_error(client, "unix:" + path), f"dial unix {path}: ", "no such file")


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_missing_abstract_socket_is_named(client: str) -> None:
    name = f"minigrpc-nobody-{os.getpid()}"
    assert_names(call_error(client, "unix-abstract:" + name), f"dial unix @{name}: ")


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_refused_tcp_port_is_named(client: str, closed_port: int) -> None:
    assert_names(
        call_error(client, f"127.0.0.1:{closed_port}"),
        f"dial tcp 127.0.0.1:{closed_port}: ",
        "connection refused",
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_a_target_without_port_dials_443(client: str) -> None:
    if not _refused(("127.0.0.1", 443)):
        pytest.skip("something answers on 127.0.0.1:443 here")
    assert_names(call_error(client, "127.0.0.1"), "dial tcp 127.0.0.1:443: ", "connection refused")


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_name_that_does_not_resolve_is_named(client: str) -> None:
    # RFC 6761 §6.4: names under .invalid never resolve.
    assert_names(
        call_error(client, "dns:///no-such-host.invalid:50051"),
        "dial tcp: lookup no-such-host.invalid: ",
    )


def never_called(request: ServerRequest) -> None:  # pragma: no cover - no request arrives
    raise AssertionError("a request arrived where no connection was made")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failed_tls_handshake_names_the_target(client: str) -> None:
    """TLS to a plaintext HTTP/2 server: the handshake fails, and the details say where."""

    with ScriptedServer.h2(never_called, tcp=True) as server:
        error = call_error(client, server.target, minigrpc.ssl_channel_credentials())
    assert_names(error, f"authentication handshake failed: {server.target}: ")


@pytest.mark.parametrize("tcp", [True, False], ids=["tcp", "unix"])
@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_server_that_closes_before_its_preface_is_named(client: str, tcp: bool) -> None:
    with ScriptedServer.h2(never_called, on_connect=lambda conn: False, tcp=tcp) as server:
        error = call_error(client, server.target)
    assert_names(error, f"{server.target}: ", prefix="error reading server preface: ")


def answer_in_http1(conn: RawConn) -> None:
    conn.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_server_that_is_not_http2_is_named(client: str) -> None:
    with ScriptedServer(answer_in_http1, tcp=True) as server:
        error = call_error(client, server.target)
    assert_names(
        error,
        f"{server.target}: first frame received is not a SETTINGS frame",
        prefix="error reading server preface: ",
    )


def headers_on_a_stream_never_opened(conn: RawConn, request: Any) -> str:
    """A connection error once the preface is done (RFC 9113 §5.1: a stream the client never
    opened)."""
    conn.send_headers(
        request.stream_id + 2, [(":status", "200"), ("content-type", "application/grpc")]
    )
    return "stop"


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_connection_error_after_the_preface_is_named(client: str) -> None:
    with ScriptedServer(rpc_script(headers_on_a_stream_never_opened), tcp=True) as server:
        error = call_error(client, server.target)
    assert_names(error, f"{server.target}: ", prefix="error reading from server: ")


@pytest.mark.parametrize("tcp", [True, False], ids=["tcp", "unix"])
@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_connection_lost_mid_call_is_named(client: str, tcp: bool) -> None:
    def vanish(request: ServerRequest) -> None:
        request.connection.close()

    with ScriptedServer.h2(vanish, tcp=tcp) as server:
        error = call_error(client, server.target)
    assert error.code is StatusCode.UNAVAILABLE, error
    # A socket closed with unread data in it (our ACKs) may read as a reset, or fail a write.
    closed = f"connection to {server.target} closed before the response was complete"
    lost = f"connection to {server.target} lost before the response was complete: "
    assert error.details == closed or error.details.startswith(lost), error.details


def test_the_authority_of_a_target_without_port_is_its_host() -> None:
    """grpcio sends ``:authority: 127.0.0.1`` for the target ``127.0.0.1`` and dials port 443."""
    from minigrpc.protocol.targets import parse_target

    for target, authority, display in (
        ("localhost", "localhost", "localhost:443"),
        ("dns:///example.com", "example.com", "example.com:443"),
        ("[::1]", "[::1]", "[::1]:443"),
        ("example.com:80", "example.com:80", "example.com:80"),
    ):
        parsed = parse_target(target)
        assert (parsed.authority, parsed.display) == (authority, display), target
