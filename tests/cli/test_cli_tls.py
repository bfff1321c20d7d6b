"""The command line over TLS against grpc-go: ``--cacert``, mutual TLS with ``--cert`` and
``--key``, ``--authority``, and the failures a user meets (an unknown CA, a name the certificate
does not carry, no client certificate where one is required).

grpc-go's interop server serves TLS with ``-tls_cert``/``-tls_key`` (and requires a client
certificate with ``-client_ca``), and its health and reflection with ``-addons``; the
certificates are made for this file by tests/support/tls_certs.py.
"""

from __future__ import annotations

from typing import Dict, Iterator, List

import pytest

from tests.cli.support import assert_no_traceback, run_tool
from tests.go_peers import GoPeers, GoServer
from tests.support.tls_certs import OVERRIDE_NAME, Certificates, make_certificates

pytestmark = [pytest.mark.timeout(120), pytest.mark.go_peer]

EMPTY = "grpc.testing.TestService/EmptyCall"


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    certs: Certificates = make_certificates() or pytest.skip("the openssl command is missing")
    directory = tmp_path_factory.mktemp("cli-tls")
    paths = {}
    for name, data in certs._asdict().items():
        path = directory / f"{name}.pem"
        path.write_bytes(data)
        paths[name] = str(path)
    return paths


def _go_tls_server(go_peers: GoPeers, *flags: str) -> Iterator[str]:
    server = GoServer(go_peers, ["tcp:127.0.0.1:0"], extra_args=["-addons", *flags])
    server.start()
    try:
        yield server.targets[0]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tls_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    yield from _go_tls_server(go_peers, "-tls_cert", pem["server_chain"], "-tls_key",
                              pem["server_key"])


@pytest.fixture(scope="module")
def mtls_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    yield from _go_tls_server(go_peers, "-tls_cert", pem["server_chain"], "-tls_key",
                              pem["server_key"], "-client_ca", pem["ca"])


@pytest.fixture(scope="module")
def override_target(go_peers: GoPeers, pem: Dict[str, str]) -> Iterator[str]:
    """A server whose certificate names only foo.test.example."""
    yield from _go_tls_server(go_peers, "-tls_cert", pem["override_chain"], "-tls_key",
                              pem["override_key"])


def test_call_list_and_health_with_cacert(tls_target: str, pem: Dict[str, str]) -> None:
    run = run_tool("call", tls_target, EMPTY, "--cacert", pem["ca"])
    assert (run.code, run.stdout, run.stderr) == (0, "{}\n", "status: OK\n")
    run = run_tool("list", tls_target, "--cacert", pem["ca"])
    assert run.code == 0 and "grpc.testing.TestService" in run.stdout.splitlines(), run.stderr
    run = run_tool("health", tls_target, "--cacert", pem["ca"])
    assert (run.code, run.stdout) == (0, "status: SERVING\n"), run.stderr


def test_the_trace_shows_https(tls_target: str, pem: Dict[str, str]) -> None:
    run = run_tool("call", tls_target, EMPTY, "--cacert", pem["ca"], "--trace")
    assert run.code == 0
    assert ":scheme: https" in run.stderr


@pytest.mark.parametrize("flags", [[], ["--cacert", "other_ca"]])
def test_a_certificate_from_an_unknown_ca_is_refused(tls_target: str, pem: Dict[str, str],
                                                     flags: List[str]) -> None:
    flags = [pem.get(flag, flag) for flag in flags]
    run = run_tool("call", tls_target, EMPTY, *flags)
    assert_no_traceback(run)
    assert run.code == 14
    assert "authentication handshake failed" in run.stderr
    assert "unable to get local issuer certificate" in run.stderr
    run = run_tool("health", tls_target, *flags)
    assert (run.code, run.stdout) == (2, "")
    assert run.stderr.startswith(f'error: failed to connect service at "{tls_target}": ')


def test_mutual_tls(mtls_target: str, pem: Dict[str, str]) -> None:
    run = run_tool("call", mtls_target, EMPTY, "--cacert", pem["ca"], "--cert",
                   pem["client_chain"], "--key", pem["client_key"])
    assert (run.code, run.stdout) == (0, "{}\n"), run.stderr
    run = run_tool("health", mtls_target, "--cacert", pem["ca"], "--cert", pem["client_chain"],
                   "--key", pem["client_key"])
    assert (run.code, run.stdout) == (0, "status: SERVING\n"), run.stderr
    run = run_tool("call", mtls_target, EMPTY, "--cacert", pem["ca"])
    assert_no_traceback(run)
    assert run.code == 14, run.stderr


def test_authority_names_the_certificate(override_target: str, pem: Dict[str, str]) -> None:
    run = run_tool("call", override_target, EMPTY, "--cacert", pem["ca"])
    assert run.code == 14
    assert "authentication handshake failed" in run.stderr
    run = run_tool("call", override_target, EMPTY, "--cacert", pem["ca"], "--authority",
                   OVERRIDE_NAME, "--trace")
    assert run.code == 0, run.stderr
    assert f":authority: {OVERRIDE_NAME}" in run.stderr
    run = run_tool("health", override_target, "--cacert", pem["ca"], "--authority",
                   OVERRIDE_NAME)
    assert (run.code, run.stdout) == (0, "status: SERVING\n"), run.stderr


def test_a_pem_that_does_not_load_is_a_usage_error(tls_target: str, pem: Dict[str, str]) -> None:
    run = run_tool("call", tls_target, EMPTY, "--cacert", pem["client_key"])
    assert_no_traceback(run)
    assert run.code == 64
    assert "invalid TLS credentials" in run.stderr
