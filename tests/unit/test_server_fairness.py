"""A connection's share of the server's I/O thread is bounded per pass of its loop.

One read from a socket can hold thousands of requests (256 KiB of HEADERS frames); decoded and
started all at once, they would make every other connection wait. The protocol hands on at most
:data:`minigrpc.http2.flood.PASS_LIMIT` frames' worth of a read and keeps the rest for the next
pass, after the other connections had their turn. Checked at two levels: the sans-IO protocol
(what one ``receive_data`` hands on, and that nothing is lost or reordered), and both servers
over real sockets, where a connection that sent hundreds of calls at once does not delay
another's call behind all of them.

The servers' I/O is held still while both clients write (the blocking server's I/O thread
inside a handler run there, the asyncio server's loop inside a callback), so that both
connections' bytes are waiting when it resumes, the busy one's first.
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any, Callable, Iterator, List

import h2.config
import h2.connection
import pytest
from hyperframe.frame import DataFrame, RstStreamFrame

from minigrpc.driver import handlers as mg_handlers
from minigrpc.http2.flood import PASS_LIMIT
from minigrpc.protocol import wire
from minigrpc.protocol.server_protocol import CallStarted, RequestReady, ServerGrpcConnection
from tests.support.aio_server import AioServer
from tests.support.minigrpc_server import IO_THREAD_OPTION, MinigrpcServer
from tests.support.scripted_peer import HostileClient, grpc_message

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0
#: Calls the busy connection sends in one write: several passes' worth.
CALLS = 500
SERVICE = "fair.Service"
CANCEL = 8


def _client() -> h2.connection.H2Connection:
    client = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    client.initiate_connection()
    return client


def _open(client: h2.connection.H2Connection) -> int:
    stream_id = client.get_next_available_stream_id()
    client.send_headers(
        stream_id,
        [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/svc/Method"),
            (b":authority", b"localhost"),
            (b"content-type", b"application/grpc"),
        ],
    )
    return stream_id


def _request(client: h2.connection.H2Connection, body: bytes) -> int:
    stream_id = _open(client)
    client.send_data(stream_id, wire.encode_message(body), end_stream=True)
    return stream_id


def test_one_receive_hands_on_at_most_a_pass_and_keeps_the_rest_in_order() -> None:
    server = ServerGrpcConnection()
    server.initiate()
    client = _client()
    server.receive_data(client.data_to_send())
    ids = [_request(client, b"%d" % number) for number in range(90)]  # 180 frames
    passes = [server.receive_data(client.data_to_send())]
    while server.pending_input:
        passes.append(server.receive_data(b""))
    started = [[e.stream_id for e in events if isinstance(e, CallStarted)] for events in passes]
    assert len(passes) >= 2
    assert all(len(ids_of_pass) <= PASS_LIMIT for ids_of_pass in started)
    assert [sid for ids_of_pass in started for sid in ids_of_pass] == ids
    ready = [e for events in passes for e in events if isinstance(e, RequestReady)]
    assert [e.message for e in ready] == [b"%d" % number for number in range(90)]


def test_held_input_comes_before_what_is_read_after_it() -> None:
    server = ServerGrpcConnection()
    server.initiate()
    client = _client()
    server.receive_data(client.data_to_send())
    first = [_request(client, b"early") for _ in range(90)]
    events = server.receive_data(client.data_to_send())
    assert server.pending_input
    late = _request(client, b"late")
    events += server.receive_data(client.data_to_send())  # a read arrives anyway
    while server.pending_input:
        events += server.receive_data(b"")
    assert [e.stream_id for e in events if isinstance(e, CallStarted)] == [*first, late]


def test_large_messages_are_cut_by_size_and_arrive_whole() -> None:
    """DATA counts one frame more per KiB: a 512 KiB message (32 frames of 16 KiB) spans
    passes, and arrives whole."""
    server = ServerGrpcConnection()
    server.initiate()
    client = _client()
    client.update_settings({})
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())  # our SETTINGS: MAX_FRAME_SIZE, windows
    stream_id = _open(client)
    message = bytes(range(256)) * 1024 * 2  # 512 KiB: within the default windows
    framed = wire.encode_message(message)
    for start in range(0, len(framed), 16384):
        client.send_data(stream_id, framed[start : start + 16384])
    client.end_stream(stream_id)
    events = server.receive_data(client.data_to_send())
    passes = 1
    while server.pending_input:
        events += server.receive_data(b"")
        passes += 1
    assert passes >= 2
    assert [e.message for e in events if isinstance(e, RequestReady)] == [message]


# -- over real sockets ---------------------------------------------------------------------------


def _calls(client: HostileClient, tag: bytes, count: int) -> bytes:
    headers = client.request_headers(f"/{SERVICE}/Note")
    return b"".join(
        client.header_frames(sid, headers)
        + DataFrame(sid, grpc_message(tag), flags=["END_STREAM"]).serialize()
        for sid in range(1, 2 * count, 2)
    )


def _busy_then_quiet(target: str, hold_io: Callable[[], None], release: threading.Event,
                     order: List[bytes], done: threading.Event) -> None:
    busy, quiet = HostileClient(target), HostileClient(target)
    try:
        for client in (busy, quiet):
            client.send_preface()
            assert client.wait_settings()
        burst = _calls(busy, b"a", CALLS)
        hold_io()
        assert busy.send(burst)  # all of it in the server's socket buffer
        assert quiet.send(_calls(quiet, b"b", 1))
        release.set()
        assert done.wait(WAIT), f"{len(order)} calls of {CALLS + 1} ran"
    finally:
        release.set()
        busy.close()
        quiet.close()
    # Without a bound per pass, the quiet call comes after all the busy one's.
    assert order.index(b"b") <= PASS_LIMIT, order.index(b"b")


def _noting(order: List[bytes], done: threading.Event) -> Callable[[bytes, Any], bytes]:
    def note(request: bytes, context: Any) -> bytes:
        order.append(request)
        if len(order) == CALLS + 1:
            done.set()
        return request

    return note


@pytest.fixture
def order() -> Iterator[List[bytes]]:
    yield []


def test_a_busy_connection_does_not_hold_the_blocking_servers_io_thread(
    order: List[bytes],
) -> None:
    done, held, release = threading.Event(), threading.Event(), threading.Event()

    def hold(request: bytes, context: Any) -> bytes:  # runs on the I/O thread
        held.set()
        release.wait(WAIT)
        return b""

    handler = mg_handlers.method_handlers_generic_handler(
        SERVICE,
        {
            "Note": mg_handlers.unary_unary_rpc_method_handler(_noting(order, done)),
            "Hold": mg_handlers.unary_unary_rpc_method_handler(hold),
        },
    )
    options = [IO_THREAD_OPTION, ("grpc.max_concurrent_streams", 2 * CALLS)]
    with MinigrpcServer("tcp", handlers=[handler], with_interop=False, options=options) as server:
        holder = HostileClient(server.target)
        try:
            holder.send_preface()

            def hold_io() -> None:
                headers = holder.request_headers(f"/{SERVICE}/Hold")
                holder.send(
                    holder.header_frames(1, headers)
                    + DataFrame(1, grpc_message(b""), flags=["END_STREAM"]).serialize()
                )
                assert held.wait(WAIT)

            _busy_then_quiet(server.target, hold_io, release, order, done)
        finally:
            holder.close()


def test_a_busy_connection_does_not_hold_the_asyncio_servers_loop(order: List[bytes]) -> None:
    done, held, release = threading.Event(), threading.Event(), threading.Event()

    async def note(request: bytes, context: Any) -> bytes:
        return _noting(order, done)(request, context)

    handler = mg_handlers.method_handlers_generic_handler(
        SERVICE, {"Note": mg_handlers.unary_unary_rpc_method_handler(note)}
    )

    def hold() -> None:  # a callback on the server's event loop
        held.set()
        release.wait(WAIT)

    options = [("grpc.max_concurrent_streams", 2 * CALLS)]
    with AioServer("tcp", with_interop=False, handlers=[handler], options=options) as server:

        def hold_io() -> None:
            server.call_soon(hold)
            assert held.wait(WAIT)

        _busy_then_quiet(server.target, hold_io, release, order, done)


def test_calls_ended_in_the_pass_that_brought_them_never_reach_the_executor() -> None:
    """Calls that end in the loop pass that brought them (reset by a rapid reset that sends
    whole requests, or with a deadline already past) never run their handlers, and are not
    even handed to the executor: a thread woken for nothing, per stream of the attack."""
    ran: List[bytes] = []
    submitted: List[Any] = []

    class CountingPool(futures.ThreadPoolExecutor):
        def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    def note(request: bytes, context: Any) -> bytes:
        ran.append(request)
        return request

    handler = mg_handlers.method_handlers_generic_handler(
        SERVICE, {"Note": mg_handlers.unary_unary_rpc_method_handler(note)}
    )
    pool = CountingPool(4)
    with MinigrpcServer(
        "tcp", handlers=[handler], with_interop=False, thread_pool=pool
    ) as server:
        client = HostileClient(server.target)
        try:
            client.send_preface()
            assert client.wait_settings()
            headers = client.request_headers(f"/{SERVICE}/Note")
            assert client.send(
                b"".join(
                    client.header_frames(sid, headers)
                    + DataFrame(sid, grpc_message(b"reset"), flags=["END_STREAM"]).serialize()
                    + RstStreamFrame(sid, error_code=CANCEL).serialize()
                    for sid in range(1, 41, 2)
                )
            )
            expired = client.request_headers(f"/{SERVICE}/Note", [(b"grpc-timeout", b"1n")])
            assert client.send(
                client.header_frames(41, expired)
                + DataFrame(41, grpc_message(b"expired"), flags=["END_STREAM"]).serialize()
            )
            assert client.wait_stream_done(41).header("grpc-status") == b"4"  # DEADLINE_EXCEEDED
            assert client.send(
                client.header_frames(43, headers)
                + DataFrame(43, grpc_message(b"after"), flags=["END_STREAM"]).serialize()
            )
            client.wait_stream_done(43)
        finally:
            client.close()
    pool.shutdown()
    assert ran == [b"after"]
    assert len(submitted) == 1, submitted
