"""Shared pytest fixtures: real grpcio peers serving the interop TestService.

Fixtures (grpcio is imported only when one of them is used):

* ``grpcio_target``: parametrized over ``unix``, ``unix-abstract`` and ``tcp``; yields the client
  target of a running grpcio server for that address kind (session-scoped servers, started on
  first use, so each kind starts once per run).
* ``grpcio_interop_server``: the same, but the :class:`tests.peers.GrpcioServer` itself, for a
  test that needs more than the target (e.g. ``.servicer.calls``); it shares the parameter with
  ``grpcio_target`` when a test uses both.
* ``grpcio_server_factory``: per-test factory ``(kind, services=None, **kwargs) ->
  GrpcioServer`` with stop/start/restart on a fixed address (reconnect tests); everything it
  created is stopped at the end of the test.
* ``short_tmp_dir``: a short-path temporary directory (unix socket paths are length-limited).

Where grpcio cannot be imported (PyPy) and ``MINIGRPC_TEST_GRPCIO_PYTHON`` names a CPython that
has it, the servers of these fixtures run in that CPython (tests/peers.py).  Tests that need
grpcio in this process skip there, and their skip reason says so.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import sys
from typing import Any, Callable, Dict, Iterator, List

# The suite forks subprocesses (the plugin, agents) while grpcio peers run in this process.
# grpcio's fork handlers then abort some children before exec with "epoll_wait error: Bad file
# descriptor" (seen with grpcio 1.80 on Python 3.9); no child ever uses grpc. Set before grpc loads.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

import pytest

from tests.peers import (
    ADDRESS_KINDS,
    GrpcioServer,
    GrpcioServerPool,
    grpcio_in_process,
    grpcio_peer_unavailable,
    short_temp_dir,
)


def pytest_configure(config: pytest.Config) -> None:
    # grpc-core logs connection events (e.g. GOAWAY) at INFO on stderr; keep test output clean.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    config.addinivalue_line(
        "markers", "grpcio_peer: the test talks to a real grpcio server from tests/peers.py"
    )
    config.addinivalue_line(
        "markers", "go_peer: the test talks to grpc-go built by tests/go_peers.py"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which grpc-go the Go peer tests ran against and how long its build took."""
    go_peers = sys.modules.get("tests.go_peers")
    built = getattr(go_peers, "built_this_session", lambda: None)()
    if built is not None:
        terminalreporter.write_line(f"Go peers: {built.describe()}")


class _SessionServers:
    """One lazily started grpcio interop server per address kind, shared by the session."""

    def __init__(self) -> None:
        self._pool = GrpcioServerPool()
        self._servers: Dict[str, GrpcioServer] = {}

    def get(self, kind: str) -> GrpcioServer:
        server = self._servers.get(kind)
        if server is None:
            server = self._pool.create(kind)
            self._servers[kind] = server
        return server

    def close(self) -> None:
        self._pool.close()
        self._servers.clear()


@pytest.fixture(scope="session")
def grpcio_interop_servers() -> Iterator[_SessionServers]:
    reason = grpcio_peer_unavailable()
    if reason is not None:
        pytest.skip(reason)
    servers = _SessionServers()
    yield servers
    servers.close()


@pytest.fixture(params=ADDRESS_KINDS)
def grpcio_interop_server(
    request: pytest.FixtureRequest, grpcio_interop_servers: _SessionServers
) -> Iterator[GrpcioServer]:
    server = grpcio_interop_servers.get(request.param)
    if not server.running:  # a test stopped it; bring it back
        server.start()
    yield server
    server.servicer.release_sleepers()


@pytest.fixture
def grpcio_target(grpcio_interop_server: GrpcioServer) -> str:
    return grpcio_interop_server.target


@pytest.fixture
def grpcio_server_factory() -> Iterator[Callable[..., GrpcioServer]]:
    reason = grpcio_peer_unavailable()
    if reason is not None:
        pytest.skip(reason)
    pool = GrpcioServerPool()

    def create(kind: str, services: Any = None, **kwargs: Any) -> GrpcioServer:
        return pool.create(kind, services, **kwargs)

    yield create
    pool.close()


@pytest.fixture
def short_tmp_dir() -> Iterator[str]:
    directory = short_temp_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


# -- skip reasons where grpcio cannot load in this process ----------------------------------

_NO_GRPCIO_HERE = ("needs grpcio in this process, and grpcio runs only on CPython (the interop"
                   " suites reach it in a CPython child instead)")


def _name_the_reason(report: Any) -> None:
    """Say why a test skipped for lack of grpcio where that is the interpreter, not a missing
    install: ``pytest.importorskip("grpc")`` alone would only say that it is not there."""
    longrepr = report.longrepr
    if not (report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3):
        return
    reason = str(longrepr[2])
    if "'grpc'" in reason or "grpcio (a test dependency)" in reason:
        report.longrepr = (longrepr[0], longrepr[1], "Skipped: " + _NO_GRPCIO_HERE)
    elif ("grpcio" in reason or "grpc_tools" in reason) and "CPython" not in reason:
        report.longrepr = (longrepr[0], longrepr[1],
                           reason + " (grpcio and grpcio-tools run only on CPython)")


if not grpcio_in_process() and platform.python_implementation() != "CPython":

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
        outcome = yield
        _name_the_reason(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
        outcome = yield
        _name_the_reason(outcome.get_result())


@pytest.fixture
def wire_trace() -> Iterator[List[str]]:
    """Lines of minigrpc's frame trace (the ``minigrpc.protocol.wire`` logger) during the test."""
    lines: List[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("minigrpc.protocol.wire")
    handler = Collect(logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old_level)
