"""grpc-go's interop client (the library antrea-agent is built on) against minigrpc.aio's
server: every case of grpc's doc/interop-test-descriptions.md that the blocking server passes,
over a unix path, an abstract socket and TCP.

The interop TestService's servicer is plain functions, so this also runs grpcio's
"migration" path: handlers on the executor, their context's wire operations on the loop.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.go_peers import GoPeers, run_interop_case
from tests.interop.test_go_interop import STREAMING_CASES, UNARY_CASES, go_peers
from tests.peers import ADDRESS_KINDS
from tests.support.aio_server import AioServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.go_peer]

__all__ = ["go_peers"]  # the session fixture that builds the Go peers


@pytest.fixture(scope="module", params=ADDRESS_KINDS)
def aio_server(request: pytest.FixtureRequest) -> Iterator[AioServer]:
    with AioServer(request.param) as server:
        yield server


@pytest.mark.parametrize("case", UNARY_CASES + STREAMING_CASES)
def test_grpc_go_client_against_the_aio_server(
    go_peers: GoPeers, aio_server: AioServer, case: str
) -> None:
    completed: Any = run_interop_case(go_peers, aio_server.target, case)
    report = f"exit {completed.returncode}: {completed.stdout}{completed.stderr}"
    assert completed.returncode == 0, report
    assert f"{case} passed" in completed.stdout
