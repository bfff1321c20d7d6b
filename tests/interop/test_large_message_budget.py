"""A message larger than the server's memory budget, with the message limits lifted.

The budget (:mod:`minigrpc.protocol.memory_budget`) withholds window once a connection holds more
than its share, and the transports stop reading from such a client; but one partial message, the
lead (:meth:`minigrpc.protocol.grpc_connection.GrpcConnection.may_lead`), is granted the window it
still needs, up to the largest request message (without bound once the application lifted the
receive limit, as grpcio's server then takes any size).  Its bytes must then be read: a server
that granted the window and stopped reading would stall the call until its deadline.  Here the
budget is 1 MiB per connection and the message 8 MiB, beyond budget plus the default 4 MiB
message size, through both servers, from minigrpc's and grpcio's clients.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Iterator

import pytest

import minigrpc
from minigrpc import aio

MIB = 1024 * 1024
MESSAGE = bytes(range(256)) * (8 * MIB // 256)
LIFTED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
SERVER_OPTIONS = [*LIFTED, ("minigrpc.max_connection_buffered_bytes", MIB)]
METHOD = "/test.Large/Echo"


def _echo(request: bytes, context: Any) -> bytes:
    return request


async def _echo_async(request: bytes, context: Any) -> bytes:
    return request


def _handlers(echo: Callable[..., Any]) -> Any:
    return minigrpc.method_handlers_generic_handler(
        "test.Large", {"Echo": minigrpc.unary_unary_rpc_method_handler(echo)}
    )


@pytest.fixture
def blocking_target() -> Iterator[str]:
    server = minigrpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=2), options=SERVER_OPTIONS
    )
    server.add_generic_rpc_handlers((_handlers(_echo),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_minigrpc_client_to_the_blocking_server(blocking_target: str) -> None:
    with minigrpc.insecure_channel(blocking_target, options=LIFTED) as channel:
        echo = channel.unary_unary(METHOD)
        for _ in range(2):  # the second on a connection whose budget the first used
            assert echo(MESSAGE, timeout=30) == MESSAGE


def test_grpcio_client_to_the_blocking_server(blocking_target: str) -> None:
    grpc = pytest.importorskip("grpc")
    with grpc.insecure_channel(blocking_target, options=LIFTED) as channel:
        echo = channel.unary_unary(METHOD)
        assert echo(MESSAGE, timeout=30) == MESSAGE


def test_minigrpc_aio_client_to_the_aio_server() -> None:
    async def run() -> None:
        server = aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers((_handlers(_echo_async),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with aio.insecure_channel(f"127.0.0.1:{port}", options=LIFTED) as channel:
                echo = channel.unary_unary(METHOD)
                for _ in range(2):
                    assert await echo(MESSAGE, timeout=30) == MESSAGE
        finally:
            await server.stop(None)

    asyncio.run(run())
