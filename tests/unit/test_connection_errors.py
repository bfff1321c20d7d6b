"""Connection errors name the target the user gave, on both clients (blocking and asyncio).

A channel that cannot reach its server fails its calls UNAVAILABLE with grpc-go's wording
(``connection error: desc = "transport: ..."``); in every case the details say which target
failed, so that a program with several channels can tell which one. A target without a port
dials 443, as grpcio does, and the error shows that port.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from typing import Any, Iterator, Tuple

import pytest

import minigrpc
from minigrpc import StatusCode, aio
from tests.peers import short_temp_dir
from tests.support.scripted_peer import ScriptedServer, ServerRequest

pytestmark = pytest.mark.timeout(60)

CLIENTS = ("blocking", "aio")


def call_error(client: str, target: str, credentials: Any = None) -> Any:
    """The error of one unary call on a new channel of ``client`` to ``target``."""
    if client == "blocking":
        channel = (
            minigrpc.secure_channel(target, credentials)
            if credentials is not None
            else minigrpc.insecure_channel(target)
        )
        with channel:
            with pytest.raises(minigrpc.RpcError) as info:
                channel.unary_unary("/a.B/C")(b"", timeout=10)
        return info.value

    async def main() -> Any:
        channel = (
            aio.secure_channel(target, credentials)
            if credentials is not None
            else aio.insecure_channel(target)
        )
        async with channel:
            with pytest.raises(aio.AioRpcError) as info:
                await channel.unary_unary("/a.B/C")(b"", timeout=10)
        return info.value

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


def assert_names(error: Any, *texts: str) -> None:
    assert error.code() is StatusCode.UNAVAILABLE, error
    details = error.details()
    assert details.startswith('connection error: desc = "transport: '), details
    for text in texts:
        assert text in details, (text, details)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_missing_unix_socket_is_named(client: str, tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "missing.sock")
    assert_names(call_error(client, "unix:" + path), f"dial unix {path}: ", "no such file")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_missing_abstract_socket_is_named(client: str) -> None:
    name = f"minigrpc-nobody-{os.getpid()}"
    assert_names(call_error(client, "unix-abstract:" + name), f"dial unix @{name}: ")


@pytest.mark.parametrize("client", CLIENTS)
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


@pytest.mark.parametrize("client", CLIENTS)
def test_a_name_that_does_not_resolve_is_named(client: str) -> None:
    # RFC 6761 §6.4: names under .invalid never resolve.
    assert_names(
        call_error(client, "dns:///no-such-host.invalid:50051"),
        "dial tcp: lookup no-such-host.invalid: ",
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failed_tls_handshake_names_the_target(client: str) -> None:
    """TLS to a plaintext HTTP/2 server: the handshake fails, and the details say where."""

    def never_called(request: ServerRequest) -> None:  # pragma: no cover - no request arrives
        raise AssertionError("a request arrived over a failed handshake")

    with ScriptedServer.h2(never_called, tcp=True) as server:
        error = call_error(client, server.target, minigrpc.ssl_channel_credentials())
    assert_names(error, f"authentication handshake failed: {server.target}: ")


def test_the_authority_of_a_target_without_port_is_its_host() -> None:
    """grpcio sends ``:authority: 127.0.0.1`` for the target ``127.0.0.1`` and dials port 443."""
    from minigrpc.targets import parse_target

    for target, authority, display in (
        ("localhost", "localhost", "localhost:443"),
        ("dns:///example.com", "example.com", "example.com:443"),
        ("[::1]", "[::1]", "[::1]:443"),
        ("example.com:80", "example.com:80", "example.com:80"),
    ):
        parsed = parse_target(target)
        assert (parsed.authority, parsed.display) == (authority, display), target
