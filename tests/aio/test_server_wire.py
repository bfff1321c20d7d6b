"""minigrpc.aio's server on the wire, seen by a scripted HTTP/2 client: the graceful stop's two
GOAWAY frames (docs/wire-rules.md, "GOAWAY and PING"), the idle and handshake timeouts, and a
client's RST_STREAM reaching the handler as a cancellation.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

import pytest

from tests.support.aio_server import SERVICE, AioServer
from tests.support.scripted_peer import RawH2Client, connect, grpc_request_headers

pytestmark = [pytest.mark.timeout(60)]

WAIT = 10.0
EMPTY = b"\0\0\0\0\0"


def test_graceful_stop_sends_two_goaways_and_lets_the_call_finish() -> None:
    server = AioServer("tcp", with_interop=False)
    raw = RawH2Client(server.target)
    try:
        stream = raw.send_request(grpc_request_headers(f"/{SERVICE}/Wait"), b"\0\0\0\0\x01w")
        assert server.next_started() == "w"
        stopped: Future[Any] = asyncio.run_coroutine_threadsafe(
            server.server.stop(WAIT), server.loop
        )
        # Step 1: GOAWAY(2^31-1) and a PING; step 2 (after our ACK): GOAWAY(last stream).
        raw.read_until(lambda: len(raw.goaways) >= 2)
        assert [g.last_stream_id for g in raw.goaways] == [2**31 - 1, stream]
        assert all(g.error_code == 0 for g in raw.goaways)
        server.call_soon(server.servicer.release.set)
        with pytest.raises(ConnectionError):
            raw.read_until(lambda: False)  # the answer, then the server closes
        assert raw.responses[stream].grpc_status == 0
        stopped.result(WAIT)
    finally:
        raw.close()
        server.stop()


def test_max_connection_idle_drains_idle_connections() -> None:
    options = [("grpc.max_connection_idle_ms", 200)]
    with AioServer("unix", options=options) as server, RawH2Client(server.target) as client:
        assert client.call(grpc_request_headers(), EMPTY).grpc_status == 0
        with pytest.raises(ConnectionError):
            client.read_until(lambda: False)  # GOAWAY(2^31-1), PING, GOAWAY(1), then EOF
        assert [g.last_stream_id for g in client.goaways] == [2**31 - 1, 1]


def test_handshake_timeout_closes_silent_connections() -> None:
    options = [("grpc.server_handshake_timeout_ms", 200)]
    with AioServer("tcp", options=options) as server:
        silent = connect(server.target)
        with RawH2Client(server.target) as healthy:
            try:
                while silent.recv(65536):  # the server's SETTINGS, then EOF
                    pass
                assert healthy.call(grpc_request_headers(), EMPTY).grpc_status == 0
            finally:
                silent.close()


def test_rst_stream_cancels_the_handler() -> None:
    with AioServer("tcp", with_interop=False) as server, RawH2Client(server.target) as raw:
        stream = raw.send_request(grpc_request_headers(f"/{SERVICE}/Wait"), b"\0\0\0\0\x01r")
        assert server.next_started() == "r"
        raw.conn.reset_stream(stream, 8)  # CANCEL
        raw.flush()
        assert server.next_outcome() == "cancelled"
        assert server.servicer.done_callbacks == [True]


def test_frame_trace_of_the_aio_server(caplog: pytest.LogCaptureFixture) -> None:
    """With ``minigrpc.protocol.wire`` at DEBUG (what ``MINIGRPC_TRACE=1`` sets), the asyncio server
    traces each connection's frames as the blocking server does (minigrpc/net/trace.py)."""
    import logging

    from minigrpc.net.trace import WIRE_LOGGER
    from tests.aio.test_server import Client

    caplog.set_level(logging.DEBUG, logger=WIRE_LOGGER.name)
    with AioServer("tcp", with_interop=False) as server:
        assert Client("minigrpc", server.target).call("unary_unary", "Echo", b"t").responses
    lines = [r.getMessage() for r in caplog.records if r.name == WIRE_LOGGER.name]
    received = [line for line in lines if line.startswith("server <-- ")]
    sent = [line for line in lines if line.startswith("server --> ")]
    assert received and received[0].split("  ", 1)[1].startswith("PREFACE"), lines[:3]
    assert any(f":path: /{SERVICE}/Echo" in line for line in received), received
    assert any("HEADERS" in line and "grpc-status: 0" in line for line in sent), sent
