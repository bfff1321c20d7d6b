"""The servers the command line is tested against, each started once per session.

``peer`` is parametrized over every implementation (minigrpc's blocking and asyncio servers,
grpcio with grpcio-reflection and grpcio-health-checking, grpc-go with its reflection and
health), each listening on a unix socket and on TCP; a test that takes it runs once per peer.
A peer that cannot run here (no Go toolchain, no grpcio) is skipped with the reason.
"""

from __future__ import annotations

import shutil
from typing import Dict, Iterator, List, NamedTuple

import pytest

from tests.cli.support import (
    ServerProcess,
    grpcio_addons_refused,
    grpcio_python,
    python_server,
)
from tests.go_peers import GoPeers, GoServer, GoUnavailable, build_go_peers
from tests.peers import short_temp_dir

PEERS = ("minigrpc", "minigrpc-aio", "grpcio", "grpc-go")


class Peer(NamedTuple):
    name: str
    unix: str
    tcp: str


class _Started:
    """Servers started on first use, stopped at the end of the session."""

    def __init__(self) -> None:
        self.peers: Dict[str, Peer] = {}
        self._stops: List[object] = []
        self._directories: List[str] = []

    def get(self, name: str, go_peers: object) -> Peer:
        peer = self.peers.get(name)
        if peer is None:
            directory = short_temp_dir()
            self._directories.append(directory)
            if name == "grpc-go":
                assert isinstance(go_peers, GoPeers)
                server = GoServer(go_peers, [f"unix:{directory}/s.sock", "tcp:127.0.0.1:0"],
                                  extra_args=["-addons"])
                server.start()
                self._stops.append(server)
                unix, tcp = server.targets
            else:
                process = python_server(name, [f"unix:{directory}/s.sock", "127.0.0.1:0"])
                self._stops.append(process)
                unix, tcp = process.targets
            peer = Peer(name, unix, tcp)
            self.peers[name] = peer
        return peer

    def close(self) -> None:
        for server in self._stops:
            server.stop()  # type: ignore[attr-defined]
        for directory in self._directories:
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def _started() -> Iterator[_Started]:
    started = _Started()
    yield started
    started.close()


@pytest.fixture(scope="session")
def go_peers_or_none() -> object:
    try:
        return build_go_peers()
    except GoUnavailable as exc:
        return str(exc)


@pytest.fixture(scope="session", params=PEERS)
def peer(request: pytest.FixtureRequest, _started: _Started, go_peers_or_none: object) -> Peer:
    name = request.param
    if name == "grpc-go" and not isinstance(go_peers_or_none, GoPeers):
        pytest.skip(f"grpc-go peers unavailable: {go_peers_or_none}")
    if name == "grpcio":
        python = grpcio_python()
        if python is None:
            pytest.skip("no Python with grpcio (PyPy: set MINIGRPC_TEST_GRPCIO_PYTHON)")
        refused = grpcio_addons_refused(python)
        if refused:
            pytest.skip(f"grpcio's reflection and health add-ons do not load: {refused}")
    return _started.get(name, go_peers_or_none)


@pytest.fixture(scope="session")
def go_peers(go_peers_or_none: object) -> GoPeers:
    if not isinstance(go_peers_or_none, GoPeers):
        pytest.skip(f"grpc-go peers unavailable: {go_peers_or_none}")
    return go_peers_or_none


@pytest.fixture
def no_reflection_server() -> Iterator[ServerProcess]:
    """minigrpc serving the TestService (and health) without reflection, on a unix socket."""
    directory = short_temp_dir()
    process = python_server("minigrpc", [f"unix:{directory}/s.sock"], "--no-reflection")
    yield process
    process.stop()
    shutil.rmtree(directory, ignore_errors=True)
