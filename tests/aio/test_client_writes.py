"""What minigrpc.aio's client writes after a read: a PING ACK (RFC 9113 §6.7) goes out at the
loop's next turn, in the same write as a call the woken coroutine starts meanwhile, and on its
own when nothing else is written.

The server is a scripted peer on a real unix socket that pings with every response, as grpc-go's
servers do (its bandwidth probe); the client is minigrpc.aio's channel on a plain asyncio loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

import pytest
from hyperframe.frame import DataFrame, PingFrame

from minigrpc import aio
from tests.support.scripted_peer import (
    GRPC_OK_HEADERS,
    RawConn,
    ScriptedServer,
    StreamRecord,
    grpc_message,
    reply_payload,
    rpc_script,
)

pytestmark = [pytest.mark.timeout(60)]

PATH = "/test.Echo/Echo"
TRAILERS = ((b"grpc-status", b"0"),)


def _probe(stream_id: int) -> bytes:
    return stream_id.to_bytes(8, "big")


def _ack(stream_id: int) -> bytes:
    return PingFrame(0, opaque_data=_probe(stream_id), flags=["ACK"]).serialize()


def _ping_with_response(conn: RawConn, request: StreamRecord) -> Optional[str]:
    """A PING and the whole response in one write (so in one read of the client's)."""
    stream_id = request.stream_id
    conn.send(
        PingFrame(0, opaque_data=_probe(stream_id)).serialize()
        + conn.header_frames(stream_id, GRPC_OK_HEADERS)
        + DataFrame(stream_id, grpc_message(reply_payload(conn, request))).serialize()
        + conn.header_frames(stream_id, TRAILERS, end_stream=True)
    )
    return None


def test_ping_ack_joins_the_next_calls_request() -> None:
    writes: List[bytes] = []

    async def body() -> None:
        async with aio.insecure_channel(server.target) as channel:
            echo = channel.unary_unary(PATH)
            assert await echo(b"first") == b"first"  # connected, and its ACK written
            transport: Any = channel._transport
            connection = next(iter(transport.subchannels.connections.values()))._transport
            loop_write = connection.write

            def write(data: Any) -> None:
                writes.append(bytes(data))
                loop_write(data)

            connection.write = write
            await asyncio.sleep(0)  # the first call's ACK, if it is still waiting
            writes.clear()
            assert await echo(b"second") == b"second"
            assert await echo(b"third") == b"third"
            requests = list(writes)
            connection.write = loop_write
        # The second call's request went out alone; the third's carried the second's ACK.
        assert len(requests) == 2, requests
        assert _ack(3) not in requests[0]
        assert requests[1].startswith(_ack(3)), requests[1][:40]

    with ScriptedServer(rpc_script(_ping_with_response)) as server:
        asyncio.run(body())
        assert not server.errors


def test_ping_ack_goes_out_when_nothing_else_is_written() -> None:
    async def body() -> None:
        async with aio.insecure_channel(server.target) as channel:
            assert await channel.unary_unary(PATH)(b"only") == b"only"
            conn = server.connections[0]
            loop = asyncio.get_running_loop()
            acked = await loop.run_in_executor(
                None, conn.wait_for, lambda: _probe(1) in conn.ping_acks
            )
            assert acked, conn.ping_acks

    with ScriptedServer(rpc_script(_ping_with_response)) as server:
        asyncio.run(body())
        assert not server.errors
