"""minigrpc and grpc-go over TLS, both directions: ALPN h2, server verification, mutual TLS,
``grpc.ssl_target_name_override`` and the failures a user meets.

tests/interop/test_tls.py does the same against grpcio; this file uses grpc-go (the library
antrea-agent runs), built by tests/go_peers.py. Certificates are made once for this file by
tests/support/tls_certs.py and written as PEM files for the Go binaries, which take them as flags:

* the Go server (tests/go/interop_server): ``-tls_cert``, ``-tls_key`` and, for mutual TLS,
  ``-client_ca`` (grpc-go's ``credentials.NewTLS``, which offers ALPN h2 itself);
* the Go client (tests/go/interop_client): ``-ca``, ``-server_host_override``, ``-cert``,
  ``-key`` and ``-tls12`` (TLS 1.2 at most).

Everything runs over TCP to 127.0.0.1, the way a secure port is normally used, and a few calls
also over unix sockets (path and abstract), where both sides check the name "localhost". A grpc-go
client against the grpc-go server checks the peers themselves, so a failure elsewhere is
minigrpc's. Every test is skipped, with the reason, when Go or openssl is missing.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import uuid
from typing import Any, Dict, Iterator, List, Sequence

import pytest

import minigrpc
from minigrpc import RpcError, StatusCode
from minigrpc.descriptors import add_servicer, stub
from tests.go_peers import GoPeers, GoServer, GoUnavailable, build_go_peers, run_interop_case
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import listen_address, short_temp_dir
from tests.support.tls_certs import OVERRIDE_NAME, Certificates, make_certificates

pytestmark = [pytest.mark.timeout(60), pytest.mark.go_peer]

#: The interop cases the grpc-go client runs against minigrpc's TLS server.
GO_CLIENT_CASES = ["empty_unary", "large_unary", "client_streaming", "server_streaming",
                   "ping_pong"]
#: Unix socket kinds that also get TLS calls (the tests of tests/peers.py's address kinds).
UNIX_KINDS = ["unix", "unix-abstract"]
LARGE_REQUEST = 271_828
LARGE_RESPONSE = 314_159
WAIT = 10.0


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def go_peers() -> GoPeers:
    try:
        return build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"grpc-go peers unavailable: {exc}")


@pytest.fixture(scope="module")
def certs() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


@pytest.fixture(scope="module")
def pem(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The certificates as PEM files (the Go binaries read files): name -> path."""
    directory = tmp_path_factory.mktemp("go-tls-pem")
    paths: Dict[str, str] = {}
    for name, data in certs._asdict().items():
        path = directory / f"{name}.pem"
        path.write_bytes(data)
        paths[name] = str(path)
    return paths


def _go_server(go_peers: GoPeers, flags: Sequence[str]) -> GoServer:
    return GoServer(go_peers, ["tcp:127.0.0.1:0"], extra_args=list(flags))


@pytest.fixture(scope="module")
def go_tls_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    """grpc-go serving TLS with the certificate for localhost, 127.0.0.1 and the override name."""
    flags = ["-tls_cert", pem["server_chain"], "-tls_key", pem["server_key"]]
    with _go_server(go_peers, flags) as server:
        yield server.targets[0]


@pytest.fixture(scope="module")
def go_mtls_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    """grpc-go serving TLS that requires a client certificate signed by the test CA."""
    flags = ["-tls_cert", pem["server_chain"], "-tls_key", pem["server_key"],
             "-client_ca", pem["ca"]]
    with _go_server(go_peers, flags) as server:
        yield server.targets[0]


@pytest.fixture(scope="module")
def go_override_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    """grpc-go serving TLS with a certificate that names only ``foo.test.example``."""
    flags = ["-tls_cert", pem["override_chain"], "-tls_key", pem["override_key"]]
    with _go_server(go_peers, flags) as server:
        yield server.targets[0]


@pytest.fixture(scope="module")
def go_tls_unix_targets(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[Dict[str, str]]:
    """grpc-go serving TLS on a unix socket path and an abstract one: kind -> target."""
    directory = short_temp_dir()
    addresses = [f"unix:{directory}/go-tls.sock",
                 f"unix-abstract:minigrpc-go-tls-{uuid.uuid4().hex[:16]}"]
    flags = ["-tls_cert", pem["server_chain"], "-tls_key", pem["server_key"]]
    with GoServer(go_peers, addresses, extra_args=flags) as server:
        yield dict(zip(UNIX_KINDS, server.targets))
    shutil.rmtree(directory, ignore_errors=True)


class MinigrpcTlsServer:
    """minigrpc's server with the interop servicer on a secure TCP port of 127.0.0.1, and on
    secure unix sockets of ``unix_kinds`` (``unix_targets`` maps each kind to its target)."""

    def __init__(self, key: bytes, chain: bytes, client_ca: Any = None,
                 unix_kinds: Sequence[str] = ()) -> None:
        self.servicer = TestServiceServicer()
        self.server = minigrpc.server()
        add_servicer(self.server, test_pb2.DESCRIPTOR.services_by_name["TestService"],
                     self.servicer)
        credentials = minigrpc.ssl_server_credentials(
            [(key, chain)], root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
        port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.target = f"127.0.0.1:{port}"
        self.directory = short_temp_dir() if unix_kinds else None
        self.unix_targets: Dict[str, str] = {}
        for kind in unix_kinds:
            address = listen_address(kind, self.directory)
            self.server.add_secure_port(address, credentials)
            self.unix_targets[kind] = address
        self.server.start()

    def stop(self) -> None:
        self.servicer.release_sleepers()
        assert self.server.stop(None).wait(30), "the minigrpc server did not stop"
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def minigrpc_tls_server(certs: Certificates) -> Iterator[MinigrpcTlsServer]:
    server = MinigrpcTlsServer(certs.server_key, certs.server_chain, unix_kinds=UNIX_KINDS)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def minigrpc_tls_target(minigrpc_tls_server: MinigrpcTlsServer) -> str:
    return minigrpc_tls_server.target


@pytest.fixture(scope="module")
def minigrpc_mtls_target(certs: Certificates) -> Iterator[str]:
    server = MinigrpcTlsServer(certs.server_key, certs.server_chain, client_ca=certs.ca)
    yield server.target
    server.stop()


@pytest.fixture(scope="module")
def minigrpc_override_target(certs: Certificates) -> Iterator[str]:
    server = MinigrpcTlsServer(certs.override_key, certs.override_chain)
    yield server.target
    server.stop()


def secure_service(target: str, root: bytes, *, client: Any = None,
                   override: Any = None) -> Any:
    """A minigrpc channel (the caller closes it) and its TestService stub."""
    credentials = minigrpc.ssl_channel_credentials(
        root_certificates=root,
        private_key=client[0] if client else None,
        certificate_chain=client[1] if client else None,
    )
    options = [("grpc.ssl_target_name_override", override)] if override else []
    channel = minigrpc.secure_channel(target, credentials, options=options)
    return channel, stub(test_pb2.TEST_SERVICE, channel)


def large_request() -> Any:
    return messages_pb2.SimpleRequest(
        response_size=LARGE_RESPONSE, payload=messages_pb2.Payload(body=bytes(LARGE_REQUEST))
    )


def _report(completed: subprocess.CompletedProcess[str]) -> str:
    return f"exit {completed.returncode}\nstdout: {completed.stdout}\nstderr: {completed.stderr}"


def go_client(go_peers: GoPeers, target: str, case: str,
              flags: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return run_interop_case(go_peers, target, case, extra_args=flags)


def assert_go_passed(completed: subprocess.CompletedProcess[str], case: str) -> None:
    assert completed.returncode == 0, _report(completed)
    assert f"{case} passed" in completed.stdout


def assert_go_unavailable(completed: subprocess.CompletedProcess[str]) -> None:
    """The Go client's call failed as grpc-go reports a failed TLS handshake."""
    assert completed.returncode == 1, _report(completed)
    assert "code = Unavailable" in completed.stderr, _report(completed)


# -- ALPN ------------------------------------------------------------------------------------


def negotiated_alpn(target: str, root: bytes, offered: List[str]) -> Any:
    """The protocol a TLS server picks from ``offered`` (stdlib ssl client, no HTTP/2)."""
    context = ssl.create_default_context(cadata=root.decode())
    context.set_alpn_protocols(offered)
    host, port = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            return tls.selected_alpn_protocol()


def test_both_servers_choose_h2_by_alpn(
    certs: Certificates, go_tls_target: str, minigrpc_tls_target: str
) -> None:
    for target in (go_tls_target, minigrpc_tls_target):
        assert negotiated_alpn(target, certs.ca, ["http/1.1", "h2"]) == "h2", target


# -- minigrpc client, grpc-go server ---------------------------------------------------------


def test_minigrpc_unary_calls_to_grpc_go_over_tls(certs: Certificates, go_tls_target: str) -> None:
    channel, service = secure_service(go_tls_target, certs.ca)
    with channel:
        assert service.EmptyCall(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()
        response = service.UnaryCall(large_request(), timeout=WAIT)
        assert len(response.payload.body) == LARGE_RESPONSE


@pytest.mark.parametrize("kind", UNIX_KINDS)
def test_minigrpc_calls_to_grpc_go_over_tls_on_unix_sockets(
    certs: Certificates, go_tls_unix_targets: Dict[str, str], kind: str
) -> None:
    channel, service = secure_service(go_tls_unix_targets[kind], certs.ca)
    with channel:
        response = service.UnaryCall(large_request(), timeout=WAIT)
        assert len(response.payload.body) == LARGE_RESPONSE
        request = messages_pb2.StreamingOutputCallRequest(
            response_parameters=[messages_pb2.ResponseParameters(size=n) for n in (1, 70000)])
        sizes = [len(r.payload.body) for r in service.StreamingOutputCall(request, timeout=WAIT)]
        assert sizes == [1, 70000]


def test_minigrpc_streaming_calls_to_grpc_go_over_tls(
    certs: Certificates, go_tls_target: str
) -> None:
    channel, service = secure_service(go_tls_target, certs.ca)
    with channel:
        requests = [
            messages_pb2.StreamingOutputCallRequest(
                response_parameters=[messages_pb2.ResponseParameters(size=size)],
                payload=messages_pb2.Payload(body=bytes(size + 1)),
            )
            for size in (31415, 9, 2653, 58979)
        ]
        sizes = [len(r.payload.body) for r in service.FullDuplexCall(iter(requests), timeout=WAIT)]
        assert sizes == [31415, 9, 2653, 58979]
        inputs = (
            messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=bytes(n)))
            for n in (27182, 8, 1828, 45904)
        )
        total = service.StreamingInputCall(inputs, timeout=WAIT)
        assert total.aggregated_payload_size == 74922


def test_minigrpc_mutual_tls_to_grpc_go(certs: Certificates, go_mtls_target: str) -> None:
    channel, service = secure_service(
        go_mtls_target, certs.ca, client=(certs.client_key, certs.client_chain))
    with channel:
        response = service.UnaryCall(large_request(), timeout=WAIT)
        assert len(response.payload.body) == LARGE_RESPONSE
    channel, service = secure_service(go_mtls_target, certs.ca)  # no client certificate
    with channel:
        with pytest.raises(RpcError) as caught:
            service.EmptyCall(empty_pb2.Empty(), timeout=WAIT)
    assert caught.value.code() is StatusCode.UNAVAILABLE, caught.value


def test_minigrpc_target_name_override_to_grpc_go(
    certs: Certificates, go_override_target: str
) -> None:
    channel, service = secure_service(go_override_target, certs.ca, override=OVERRIDE_NAME)
    with channel:
        assert service.EmptyCall(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()
    channel, service = secure_service(go_override_target, certs.ca)  # 127.0.0.1 is not named
    with channel:
        with pytest.raises(RpcError) as caught:
            service.EmptyCall(empty_pb2.Empty(), timeout=WAIT)
    assert caught.value.code() is StatusCode.UNAVAILABLE, caught.value


def test_minigrpc_rejects_grpc_go_signed_by_another_ca(
    certs: Certificates, go_tls_target: str
) -> None:
    channel, service = secure_service(go_tls_target, certs.other_ca)
    with channel:
        with pytest.raises(RpcError) as caught:
            service.EmptyCall(empty_pb2.Empty(), timeout=WAIT)
    assert caught.value.code() is StatusCode.UNAVAILABLE, caught.value


# -- grpc-go client, minigrpc server ---------------------------------------------------------


@pytest.mark.parametrize("case", GO_CLIENT_CASES)
def test_grpc_go_interop_cases_over_tls(
    go_peers: GoPeers, pem: Dict[str, str], minigrpc_tls_target: str, case: str
) -> None:
    completed = go_client(go_peers, minigrpc_tls_target, case, ["-ca", pem["ca"]])
    assert_go_passed(completed, case)


@pytest.mark.parametrize("kind", UNIX_KINDS)
@pytest.mark.parametrize("case", ["large_unary", "ping_pong"])
def test_grpc_go_over_tls_on_unix_sockets(
    go_peers: GoPeers, pem: Dict[str, str], minigrpc_tls_server: MinigrpcTlsServer, kind: str,
    case: str,
) -> None:
    target = minigrpc_tls_server.unix_targets[kind]
    assert_go_passed(go_client(go_peers, target, case, ["-ca", pem["ca"]]), case)


@pytest.mark.parametrize("version", [[], ["-tls12"]], ids=["tls1.3", "tls1.2"])
def test_grpc_go_mutual_tls(
    go_peers: GoPeers, pem: Dict[str, str], minigrpc_mtls_target: str, version: List[str]
) -> None:
    """With TLS 1.3 minigrpc refuses a missing client certificate after grpc-go's handshake
    has finished; with TLS 1.2, inside it. Either way grpc-go's call is UNAVAILABLE."""
    tls = ["-ca", pem["ca"], *version]
    with_cert = [*tls, "-cert", pem["client_chain"], "-key", pem["client_key"]]
    assert_go_passed(go_client(go_peers, minigrpc_mtls_target, "large_unary", with_cert),
                     "large_unary")
    assert_go_unavailable(go_client(go_peers, minigrpc_mtls_target, "empty_unary", tls))


def test_grpc_go_server_host_override(
    go_peers: GoPeers, pem: Dict[str, str], minigrpc_override_target: str
) -> None:
    override = ["-ca", pem["ca"], "-server_host_override", OVERRIDE_NAME]
    assert_go_passed(go_client(go_peers, minigrpc_override_target, "large_unary", override),
                     "large_unary")
    # Without the override grpc-go checks 127.0.0.1, which that certificate does not name.
    without = go_client(go_peers, minigrpc_override_target, "empty_unary", ["-ca", pem["ca"]])
    assert_go_unavailable(without)


def test_grpc_go_rejects_minigrpc_signed_by_another_ca(
    go_peers: GoPeers, pem: Dict[str, str], minigrpc_tls_target: str
) -> None:
    completed = go_client(go_peers, minigrpc_tls_target, "empty_unary", ["-ca", pem["other_ca"]])
    assert_go_unavailable(completed)


# -- grpc-go with itself: the peers' TLS flags work, so failures above are minigrpc's --------


@pytest.mark.parametrize("case", ["large_unary", "ping_pong"])
def test_grpc_go_client_and_server_over_tls(
    go_peers: GoPeers, pem: Dict[str, str], go_tls_target: str, go_mtls_target: str,
    go_override_target: str, case: str,
) -> None:
    assert_go_passed(go_client(go_peers, go_tls_target, case, ["-ca", pem["ca"]]), case)
    with_cert = ["-ca", pem["ca"], "-cert", pem["client_chain"], "-key", pem["client_key"]]
    assert_go_passed(go_client(go_peers, go_mtls_target, case, with_cert), case)
    override = ["-ca", pem["ca"], "-server_host_override", OVERRIDE_NAME]
    assert_go_passed(go_client(go_peers, go_override_target, case, override), case)


def test_grpc_go_peers_refuse_what_they_should(
    go_peers: GoPeers, pem: Dict[str, str], go_tls_target: str, go_mtls_target: str,
    go_override_target: str,
) -> None:
    """The Go flags are not ignored: each failure the minigrpc tests expect happens between the
    Go peers too (a test whose failure path never fails could not catch anything)."""
    assert_go_unavailable(go_client(go_peers, go_mtls_target, "empty_unary", ["-ca", pem["ca"]]))
    assert_go_unavailable(
        go_client(go_peers, go_override_target, "empty_unary", ["-ca", pem["ca"]]))
    assert_go_unavailable(
        go_client(go_peers, go_tls_target, "empty_unary", ["-ca", pem["other_ca"]]))
    # And the plaintext client is refused by a TLS server.
    assert_go_unavailable(go_client(go_peers, go_tls_target, "empty_unary", []))

