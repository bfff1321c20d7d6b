"""What grpcio's asyncio API does at the edges of a call's life, with both clients, same server.

Each client test runs once with grpcio's grpc.aio and once with minigrpc.aio, against one
grpc.aio server, and checks what both must do, so that a divergence fails the minigrpc run:

* A call cancelled before its task ever ran (``cancel()`` right after the call was made) is
  over: reading it raises CancelledError, awaiting it too, its code is CANCELLED, and a
  write to it raises InvalidStateError (a call that ended refuses writes, however it ended).
* A stream the server ended OK is done only once its responses are read: until then
  ``done()`` is False, ``code()`` waits, and ``cancel()`` ends it CANCELLED (reading on
  raises CancelledError), through an interceptor that returns an iterator too; closing the
  channel cancels it so.
* Interceptors of a call the application feeds with ``write()`` get the written requests as
  an async iterator, which they may wrap: what they pass on is what the server receives.
  Once the call has ended (an interceptor cancelled it), ``write()`` raises
  InvalidStateError.
* Interceptors see the call's metadata as an ``aio.Metadata``, empty when the call has none,
  so that they can build on it.
* An intercepted call with no real call behind it has no metadata (None): its chain was
  cancelled before it made one, or an interceptor answered with a response of its own.
* Call credentials on an insecure channel: UsageError, in grpcio's words.
* ``wait_for_state_change()``: a pending wait returns when the channel closes; on a closed
  channel it raises UsageError instead of waiting for ever.
* ``grpc.ssl_session_cache``: a secure channel's first connection makes a full TLS handshake,
  the next ones (new channels with the same cache) resume its session, as the server's
  ``auth_context()`` says; a second server of the same name cannot resume the first one's
  session, and its own replaces it in the cache.

One client test is minigrpc.aio's alone, where grpcio's client is no reference (it loses the
responses about one run in two): a write that finds the connection closed by the server loses
nothing the server sent before closing.

And one server test, each server with minigrpc.aio's client: a done callback that raises is
logged and the callbacks added after it are not called, as in grpcio.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Any, AsyncIterator, Iterator, List, Optional

import pytest
from hyperframe.frame import DataFrame

import minigrpc
from minigrpc import aio
from tests.aio.async_peers import GrpcioAioServer, client_api, run_on_channel, status_codes
from tests.aio.calls import (
    empty_call,
    full_duplex,
    input_request,
    output_request,
    streaming_input,
    streaming_output,
)
from tests.interop import empty_pb2, messages_pb2
from tests.interop.test_grpcio_credentials import METHOD, Reused, auth_handler, session_cache_of
from tests.peers import grpcio_peer_unavailable
from tests.support.scripted_peer import (
    GRPC_OK_HEADERS,
    RawConn,
    ScriptedServer,
    StreamRecord,
    grpc_message,
    rpc_script,
)
from tests.support.tls_certs import Certificates, make_certificates

pytestmark = [pytest.mark.timeout(60)]

if grpcio_peer_unavailable() is not None:  # pragma: no cover - grpcio-less interpreters
    pytest.skip(str(grpcio_peer_unavailable()), allow_module_level=True)
grpc = pytest.importorskip("grpc")
pytest.importorskip("grpc.aio")

CLIENTS = ["grpcio", "minigrpc"]


@pytest.fixture(scope="module")
def certs() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


# -- a call cancelled before it started ----------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_reading_a_call_cancelled_at_once_raises_cancelled_error(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2), timeout=10)
        assert not call.cancelled()
        assert call.cancel()
        assert not call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call.read()
        assert call.cancelled()
        assert await call.code() == status_codes(client).CANCELLED

    run_on_channel(client, grpcio_aio_server.target, body)


@pytest.mark.parametrize("client", CLIENTS)
def test_writing_to_a_call_cancelled_at_once_raises_invalid_state(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        call = streaming_input(channel)(timeout=10)
        assert call.cancel()
        with pytest.raises(asyncio.InvalidStateError):
            await call.write(input_request(1))
        await call.done_writing()  # nothing to end: no error either
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await call.code() == status_codes(client).CANCELLED

    run_on_channel(client, grpcio_aio_server.target, body)


# -- a stream whose status came before its responses were read -----------------------------------


def _all_at_once(conn: RawConn, request: StreamRecord) -> Optional[str]:
    """Three responses and an OK status in one write, so in one read of the client's: the
    status is known before the application reads the first response."""
    stream_id = request.stream_id
    conn.send(
        conn.header_frames(stream_id, GRPC_OK_HEADERS)
        + b"".join(
            DataFrame(stream_id, grpc_message(_response(size))).serialize() for size in (1, 2, 3)
        )
        + conn.header_frames(stream_id, ((b"grpc-status", b"0"),), end_stream=True)
    )
    return None


def _response(size: int) -> bytes:
    return messages_pb2.StreamingOutputCallResponse(
        payload=messages_pb2.Payload(body=bytes(size))
    ).SerializeToString()


class _ForwardingInterceptor:
    """Returns an async iterator over the call's responses rather than the call (grpcio's own
    test of this case does)."""

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)

        async def forward() -> AsyncIterator[Any]:
            async for response in call:
                yield response

        return forward()


def _stream_interceptor(client: str) -> Any:
    base = client_api(client).UnaryStreamClientInterceptor
    return type("Forwarding", (_ForwardingInterceptor, base), {})()


@pytest.fixture()
def all_at_once() -> Iterator[ScriptedServer]:
    with ScriptedServer(rpc_script(_all_at_once)) as server:
        yield server
        assert not server.errors


@pytest.mark.parametrize("intercepted", [False, True], ids=["plain", "intercepted"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_stream_with_unread_responses_is_not_done_and_cancels(
    client: str, intercepted: bool, all_at_once: ScriptedServer
) -> None:
    """grpcio gives a stream its OK status only once its responses are read: until then the
    call is not done, and cancel() ends it CANCELLED."""

    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        with pytest.raises(asyncio.CancelledError):
            async for response in call:
                assert len(response.payload.body) == 1
                assert not call.done()
                assert call.cancel()
        assert call.cancelled() and call.done()
        assert await call.code() == status_codes(client).CANCELLED

    interceptors = [_stream_interceptor(client)] if intercepted else []
    run_on_channel(client, all_at_once.target, body, interceptors=interceptors)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_stream_is_done_once_its_responses_are_read(
    client: str, all_at_once: ScriptedServer
) -> None:
    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        ended = asyncio.Event()
        call.add_done_callback(lambda _call: ended.set())
        sizes = []
        for _ in range(3):
            assert not call.done() and not ended.is_set()
            sizes.append(len((await call.read()).payload.body))
        assert sizes == [1, 2, 3]
        assert await call.read() is client_api(client).EOF
        await ended.wait()
        assert call.done() and not call.cancel() and not call.cancelled()
        assert await call.code() == status_codes(client).OK

    run_on_channel(client, all_at_once.target, body)


def _all_at_once_then_close(conn: RawConn, request: StreamRecord) -> Optional[str]:
    _all_at_once(conn, request)
    return "close"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_stream_whose_connection_closed_keeps_its_unread_responses(client: str) -> None:
    """The server closes the connection after its responses and OK status: what arrived
    is still read, and the call ends OK."""

    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        assert len((await call.read()).payload.body) == 1
        sizes = [len(response.payload.body) async for response in _rest(client, call)]
        assert sizes == [2, 3]
        assert await call.code() == status_codes(client).OK

    with ScriptedServer(rpc_script(_all_at_once_then_close)) as server:
        run_on_channel(client, server.target, body)
        assert not server.errors


def test_a_write_that_finds_the_connection_closed_loses_nothing_already_sent() -> None:
    """The server sends its responses and OK status and closes before the client has read
    them; the client's next write then fails (EPIPE). What the server sent is still read, and
    the call ends OK, as if the read had come first (the blocking client's reader goes on to
    EOF likewise). minigrpc.aio only: grpcio's client ends the call UNAVAILABLE ("Stream
    removed (sendmsg: Broken pipe)") about one run in two here.

    The order is made certain by holding the event loop (the client reads nothing) from the
    moment the server may answer until the client's write: cancelling a second call, which
    writes its RST_STREAM at once."""
    client = "minigrpc"
    seen_both, go, closed = threading.Event(), threading.Event(), threading.Event()

    def answer_then_close(conn: RawConn, request: StreamRecord) -> Optional[str]:
        conn.wait_for(lambda: sum(stream.done for stream in conn.streams.values()) >= 2)
        seen_both.set()
        go.wait(10)
        _all_at_once(conn, request)
        conn.close()
        closed.set()
        return "close"

    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        other = streaming_output(channel)(output_request(4), timeout=10)
        assert await asyncio.get_running_loop().run_in_executor(None, seen_both.wait, 10)
        go.set()
        assert closed.wait(10)  # the loop is held: nothing is read meanwhile
        other.cancel()
        sizes = [len(response.payload.body) async for response in _rest(client, call)]
        assert sizes == [1, 2, 3]
        assert await call.code() == status_codes(client).OK

    with ScriptedServer(rpc_script(answer_then_close)) as server:
        run_on_channel(client, server.target, body)
        assert not server.errors


async def _rest(client: str, call: Any) -> AsyncIterator[Any]:
    """What ``read()`` gives until EOF."""
    while True:
        response = await call.read()
        if response is client_api(client).EOF:
            return
        yield response


@pytest.mark.parametrize("client", CLIENTS)
def test_closing_the_channel_cancels_a_stream_with_unread_responses(
    client: str, all_at_once: ScriptedServer
) -> None:
    async def main() -> None:
        channel = client_api(client).insecure_channel(all_at_once.target)
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        assert len((await call.read()).payload.body) == 1
        await channel.close()
        # grpcio may mark the call done a loop turn after close() returns: code() waits for it.
        try:
            code = await asyncio.wait_for(call.code(), 5)
        except asyncio.TimeoutError:
            if client != "grpcio":
                raise
            # grpcio 1.80 (the last for Python 3.9, in tox) leaves it to its deadline; 1.85 not.
            pytest.skip("this grpcio leaves a stream with unread responses running after close()")
        assert code == status_codes(client).CANCELLED
        assert call.done() and call.cancelled()
        with pytest.raises(asyncio.CancelledError):
            await call.read()

    asyncio.run(main())


def _bidi_all_at_once(conn: RawConn) -> None:
    """A bidi stream answered, once its first request message is in, with two responses and
    an OK status in one write, while the client's request stream is still open."""
    conn.send_settings({})
    conn.wait_for(lambda: any(record.messages for record in conn.streams.values()))
    stream_id = max(conn.streams)
    conn.send(
        conn.header_frames(stream_id, GRPC_OK_HEADERS)
        + b"".join(
            DataFrame(stream_id, grpc_message(_response(size))).serialize() for size in (1, 2)
        )
        + conn.header_frames(stream_id, ((b"grpc-status", b"0"),), end_stream=True)
    )
    conn.wait_eof()


def test_a_write_to_a_stream_the_server_ended_is_refused_at_once_in_minigrpc() -> None:
    """The server's OK status counts for a writer before the responses are read: the write is
    refused (InvalidStateError) rather than waiting for reads the writer itself holds up, and
    the responses stay readable.  (grpcio's core fails the write INTERNAL instead.)"""

    async def body(channel: Any) -> None:
        call = full_duplex(channel)(timeout=10)
        await call.write(output_request(1, 2))
        assert len((await call.read()).payload.body) == 1
        with pytest.raises(asyncio.InvalidStateError):
            await call.write(output_request(1))
        assert not call.done()
        assert len((await call.read()).payload.body) == 2
        assert await call.read() is aio.EOF
        assert await call.code() == minigrpc.StatusCode.OK

    with ScriptedServer(_bidi_all_at_once) as server:
        run_on_channel("minigrpc", server.target, body)
        assert not server.errors


# -- interceptors of calls fed by write() --------------------------------------------------------


def _counting_interceptor(client: str, kind: str, seen: List[Any]) -> Any:
    """A stream-request interceptor that wraps the request iterator it is given."""
    base = getattr(client_api(client), f"{kind}ClientInterceptor")
    method = "intercept_stream_unary" if kind == "StreamUnary" else "intercept_stream_stream"

    async def intercept(self: Any, continuation: Any, details: Any, requests: Any) -> Any:
        async def counted() -> AsyncIterator[Any]:
            async for request in requests:
                seen.append(len(request.payload.body))
                yield request

        return await continuation(details, counted())

    return type("Counting", (base,), {method: intercept})()


@pytest.mark.parametrize("client", CLIENTS)
def test_interceptors_see_written_requests_as_an_iterator(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    seen: List[Any] = []

    async def body(channel: Any) -> None:
        call = streaming_input(channel)(timeout=10)
        for size in (3, 5, 7):
            await call.write(input_request(size))
        await call.done_writing()
        assert (await call).aggregated_payload_size == 15
        assert await call.code() == status_codes(client).OK

    run_on_channel(
        client,
        grpcio_aio_server.target,
        body,
        interceptors=[_counting_interceptor(client, "StreamUnary", seen)],
    )
    assert seen == [3, 5, 7]


@pytest.mark.parametrize("client", CLIENTS)
def test_bidi_interceptors_see_written_requests_as_an_iterator(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    seen: List[Any] = []

    async def body(channel: Any) -> None:
        call = full_duplex(channel)(timeout=10)
        sizes = []
        for size in (2, 4):
            request = output_request(size)
            request.payload.body = bytes(size)
            await call.write(request)
            sizes.append(len((await call.read()).payload.body))
        await call.done_writing()
        try:
            end = await call.read()
        except StopAsyncIteration:
            if client != "grpcio":
                raise
            # grpcio 1.62 (the last for Python 3.7) ends an intercepted stream this way.
            pytest.skip("this grpcio's intercepted read() raises StopAsyncIteration at the end")
        assert end is client_api(client).EOF
        assert sizes == [2, 4]

    run_on_channel(
        client,
        grpcio_aio_server.target,
        body,
        interceptors=[_counting_interceptor(client, "StreamStream", seen)],
    )
    assert seen == [2, 4]


@pytest.mark.parametrize("client", CLIENTS)
def test_writing_after_an_interceptor_cancelled_the_call_raises_invalid_state(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    class Cancelling(client_api(client).StreamUnaryClientInterceptor):  # type: ignore[misc]
        async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any):
            call = await continuation(details, requests)
            call.cancel()
            return call

    async def body(channel: Any) -> None:
        call = streaming_input(channel)(timeout=10)
        with pytest.raises(asyncio.InvalidStateError):
            await call.write(input_request(1))
        with pytest.raises(asyncio.CancelledError):
            await call
        assert call.cancelled() and call.done()
        assert await call.code() == status_codes(client).CANCELLED

    run_on_channel(client, grpcio_aio_server.target, body, interceptors=[Cancelling()])


# -- what interceptors see, and the metadata of a call without a real one -------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_interceptors_see_an_empty_metadata_for_a_call_without_one(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    api = client_api(client)
    seen: List[Any] = []

    class Extending(api.UnaryUnaryClientInterceptor):  # type: ignore[misc]
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any):
            seen.append(details.metadata)
            extended = api.Metadata(*details.metadata, ("x-grpc-test-echo-initial", "added"))
            return await continuation(
                api.ClientCallDetails(
                    method=details.method,
                    timeout=details.timeout,
                    metadata=extended,
                    credentials=details.credentials,
                    wait_for_ready=details.wait_for_ready,
                ),
                request,
            )

    async def body(channel: Any) -> None:
        call = empty_call(channel)(empty_pb2.Empty(), timeout=10)
        await call
        assert (await call.initial_metadata())["x-grpc-test-echo-initial"] == "added"

    run_on_channel(client, grpcio_aio_server.target, body, interceptors=[Extending()])
    assert len(seen) == 1 and isinstance(seen[0], api.Metadata) and len(seen[0]) == 0


@pytest.mark.parametrize("client", CLIENTS)
def test_a_chain_cancelled_before_its_call_has_no_metadata(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body_with(channel: Any, reached: asyncio.Event) -> None:
        call = streaming_output(channel)(output_request(1), timeout=10)
        await reached.wait()
        assert call.cancel()
        with pytest.raises(asyncio.CancelledError):
            async for _response in call:
                pass
        assert call.cancelled() and call.done()
        assert await call.code() == status_codes(client).CANCELLED
        assert await call.initial_metadata() is None
        assert await call.trailing_metadata() is None

    async def main() -> None:
        reached = asyncio.Event()
        never = asyncio.get_running_loop().create_future()

        class Stalling(client_api(client).UnaryStreamClientInterceptor):  # type: ignore[misc]
            async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any):
                reached.set()
                await never

        async with client_api(client).insecure_channel(
            grpcio_aio_server.target, interceptors=[Stalling()]
        ) as ch:
            await body_with(ch, reached)

    asyncio.run(main())


@pytest.mark.parametrize("client", CLIENTS)
def test_a_call_an_interceptor_answered_has_no_metadata(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    answer = empty_pb2.Empty()

    class Answering(client_api(client).UnaryUnaryClientInterceptor):  # type: ignore[misc]
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any):
            return answer

    class Passing(client_api(client).UnaryUnaryClientInterceptor):  # type: ignore[misc]
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any):
            call = await continuation(details, request)
            await call
            return call

    async def body(channel: Any) -> None:
        call = empty_call(channel)(empty_pb2.Empty(), timeout=10)
        assert (await call) is answer
        assert call.done() and not call.cancel() and not call.cancelled()
        assert await call.code() == status_codes(client).OK
        assert await call.details() == ""
        assert await call.initial_metadata() is None
        assert await call.trailing_metadata() is None
        assert await call.debug_error_string() is None

    run_on_channel(client, grpcio_aio_server.target, body, interceptors=[Passing(), Answering()])


# -- channel -------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_call_credentials_on_an_insecure_channel_raise_usage_error(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    credentials = grpc.access_token_call_credentials("token")
    if client == "minigrpc":
        credentials = minigrpc.access_token_call_credentials("token")

    async def body(channel: Any) -> None:
        with pytest.raises(
            client_api(client).UsageError,
            match="Call credentials are only valid on secure channels",
        ):
            empty_call(channel)(empty_pb2.Empty(), credentials=credentials)

    run_on_channel(client, grpcio_aio_server.target, body)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_closed_channel_ends_state_waits(client: str, grpcio_aio_server: GrpcioAioServer) -> None:
    async def main() -> None:
        channel = client_api(client).insecure_channel(grpcio_aio_server.target)
        idle = channel.get_state(False)
        started = asyncio.Event()

        async def wait() -> None:
            started.set()
            await channel.wait_for_state_change(idle)

        pending = asyncio.get_running_loop().create_task(wait())
        await started.wait()
        await channel.close()
        await pending  # returned: SHUTDOWN is a change
        assert channel.get_state(False).name == "SHUTDOWN"
        with pytest.raises(client_api(client).UsageError):
            await channel.wait_for_state_change(channel.get_state(False))

    asyncio.run(main())


@pytest.mark.parametrize("client", CLIENTS)
def test_a_session_cache_resumes_tls_sessions(client: str, certs: Certificates) -> None:
    reused = Reused()
    cache = session_cache_of(client)
    rpc = grpc if client == "grpcio" else minigrpc
    credentials = rpc.ssl_channel_credentials(root_certificates=certs.ca)
    options = [("grpc.ssl_session_cache", cache)]
    servers = []
    for _ in range(2):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((auth_handler(grpc, reused),))
        credentials_of_server = grpc.ssl_server_credentials(
            [(certs.server_key, certs.server_chain)]
        )
        servers.append((server, server.add_secure_port("localhost:0", credentials_of_server)))
        server.start()

    async def main() -> None:
        (_, first), (_, second) = servers
        for port in (first, first, second, second, first):
            target = f"localhost:{port}"
            async with client_api(client).secure_channel(target, credentials, options) as channel:
                assert await channel.unary_unary(METHOD)(b"x", timeout=10) == b"x"

    try:
        asyncio.run(main())
    finally:
        for server, _ in servers:
            server.stop(None)
    said = [context["ssl_session_reused"] for context in reused.contexts]
    assert said == [[b"false"], [b"true"], [b"false"], [b"true"], [b"false"]]


# -- server: done callbacks ----------------------------------------------------------------------


@pytest.mark.parametrize("server_kind", ["grpcio", "minigrpc"])
def test_a_raising_done_callback_ends_the_callbacks_after_it(server_kind: str) -> None:
    api = client_api(server_kind)
    rpc = grpc if server_kind == "grpcio" else __import__("minigrpc")
    called: List[str] = []

    async def main() -> None:
        first_ran = asyncio.Event()

        def first(_context: Any) -> None:
            called.append("first")
            first_ran.set()

        def raising(_context: Any) -> None:
            called.append("raising")
            raise RuntimeError("a callback that fails")

        def after(_context: Any) -> None:
            called.append("after")

        async def handler(request: bytes, context: Any) -> bytes:
            for callback in (first, raising, after):
                context.add_done_callback(callback)
            return request

        server = api.server()
        server.add_generic_rpc_handlers(
            (
                rpc.method_handlers_generic_handler(
                    "test.Callbacks", {"Echo": rpc.unary_unary_rpc_method_handler(handler)}
                ),
            )
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                assert await channel.unary_unary("/test.Callbacks/Echo")(b"x", timeout=10) == b"x"
                await first_ran.wait()  # the callbacks run one after another, synchronously
                # The server still answers.
                assert await channel.unary_unary("/test.Callbacks/Echo")(b"y", timeout=10) == b"y"
        finally:
            await server.stop(None)

    asyncio.run(main())
    assert called[:2] == ["first", "raising"]
    assert "after" not in called
