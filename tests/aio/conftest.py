"""Fixtures the asyncio tests share."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.aio.async_peers import GrpcioAioServer


@pytest.fixture(scope="module")
def grpcio_aio_server() -> Iterator[GrpcioAioServer]:
    """One grpc.aio server with the interop TestService for a module's side-by-side tests."""
    peer = GrpcioAioServer()
    yield peer
    peer.close()
