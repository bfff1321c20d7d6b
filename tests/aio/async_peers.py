"""asyncio servers as real peers for minigrpc.aio's client: grpcio's ``grpc.aio`` and grpclib.

Both serve the interop ``grpc.testing.TestService`` (gRPC's doc/interop-test-descriptions.md)
with the conventions of tests/interop/servicer.py, so that one test body runs against every
peer: ``x-test-sleep-ms: N`` makes a handler wait up to N ms (less if the call ends first or
the test releases it: a waiting handler, not a sleep that synchronises), and the echo keys are
sent back in the headers and trailers.

Each server runs on an event loop of its own, in a thread (:class:`LoopThread`), because a test
body runs its client with ``asyncio.run`` in the test's thread.  What a handler saw of its call
ending early (a cancellation by RST_STREAM, or a deadline) is recorded in
:class:`HandlerRecord`, which a test can wait on from its own loop.

grpcio and grpclib are imported lazily: a peer that is not installed is skipped by the caller.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple

from tests.interop import empty_pb2, messages_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY, ECHO_TRAILING_KEY, SLEEP_KEY

SERVICE = "/grpc.testing.TestService/"
#: Metadata naming a call, for :class:`HandlerRecord`.
CALL_ID_KEY = "x-test-call-id"

#: How long a test waits for a handler to notice that its call ended.
NOTICE_TIMEOUT = 10.0


class HandlerRecord:
    """Which calls' handlers have finished, by the ``x-test-call-id`` their client sent; safe
    to use from any thread.  A test that makes a handler wait (``x-test-sleep-ms``) and then
    cancels the call learns here that the handler saw its call end, whichever way the library
    tells a handler (a cancelled task, an ended request stream)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.started: List[str] = []
        self.finished: List[str] = []
        self._released: Optional[asyncio.Event] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def _note(self, seen: List[str], metadata: Any) -> None:
        call_ids = [value for key, value in metadata if key == CALL_ID_KEY]
        if call_ids:
            with self._changed:
                seen.append(call_ids[0])
                self._changed.notify_all()

    def note_started(self, metadata: Any) -> None:
        self._note(self.started, metadata)

    def note_finished(self, metadata: Any) -> None:
        self._note(self.finished, metadata)

    async def _wait(self, seen: List[str], call_id: str, timeout: float) -> bool:
        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: call_id in seen, timeout)

        return await asyncio.get_running_loop().run_in_executor(None, wait)

    async def wait_started(self, call_id: str, timeout: float = NOTICE_TIMEOUT) -> bool:
        """True once the handler of the call with ``call_id`` runs (from any loop)."""
        return await self._wait(self.started, call_id, timeout)

    async def wait_finished(self, call_id: str, timeout: float = NOTICE_TIMEOUT) -> bool:
        """True once the handler of the call with ``call_id`` has finished (from any loop)."""
        return await self._wait(self.finished, call_id, timeout)

    # -- the waiting handlers of x-test-sleep-ms --------------------------------------------

    def _release_event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
            self._loop = asyncio.get_running_loop()
        return self._released

    async def wait_if_asked(self, metadata: Any) -> None:
        values = [value for key, value in metadata if key == SLEEP_KEY]
        if values:
            try:
                await asyncio.wait_for(self._release_event().wait(), int(values[0]) / 1000.0)
            except asyncio.TimeoutError:
                pass

    def release_sleepers(self) -> None:
        """End every ``x-test-sleep-ms`` wait now (teardown); later waits wait again."""
        if self._released is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._release)

    def _release(self) -> None:
        released, self._released = self._released, asyncio.Event()
        if released is not None:
            released.set()


def _echo(metadata: Any) -> Tuple[Tuple[Tuple[str, Any], ...], Tuple[Tuple[str, Any], ...]]:
    initial = tuple((k, v) for k, v in metadata if k == ECHO_INITIAL_KEY)
    trailing = tuple((k, v) for k, v in metadata if k == ECHO_TRAILING_KEY)
    return initial, trailing


def _responses_for(request: Any) -> List[Any]:
    return [
        messages_pb2.StreamingOutputCallResponse(payload=messages_pb2.Payload(body=bytes(p.size)))
        for p in request.response_parameters
    ]


def _status_of(request: Any) -> Optional[Tuple[int, str]]:
    if request.HasField("response_status") and request.response_status.code != 0:
        return request.response_status.code, request.response_status.message
    return None


def client_api(client: str) -> Any:
    """The asyncio API a side-by-side test runs as ``client``: grpc.aio or minigrpc.aio."""
    if client == "grpcio":
        import grpc.aio

        return grpc.aio
    from minigrpc import aio

    return aio


def status_codes(client: str) -> Any:
    """The StatusCode enum of ``client``'s API."""
    if client == "grpcio":
        import grpc

        return grpc.StatusCode
    from minigrpc import StatusCode

    return StatusCode


def run_on_channel(
    client: str, target: str, body: Callable[[Any], Awaitable[None]], **channel_arguments: Any
) -> None:
    """Run ``body(channel)`` on a new event loop, with a ``client_api(client)`` channel to
    ``target`` (``channel_arguments``: ``options``, ``interceptors``) closed after it."""

    async def main() -> None:
        async with client_api(client).insecure_channel(target, **channel_arguments) as channel:
            await body(channel)

    asyncio.run(main())


class LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` runs a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Awaitable[Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


# -- grpcio's grpc.aio ---------------------------------------------------------------------------


class AioTestService:
    """The interop TestService in ``async def`` handlers on grpc.aio's ServicerContext API.

    A handler's end is recorded from the context's done callback: grpc.aio cancels a waiting
    handler's task, or ends its request stream, depending on where it waits (and its
    ``cancelled()`` stays False in the second case).
    """

    def __init__(self, record: HandlerRecord) -> None:
        self.record = record

    async def _begin(self, method: str, context: Any) -> Any:
        metadata = tuple((m[0], m[1]) for m in context.invocation_metadata() or ())
        context.add_done_callback(lambda _context: self.record.note_finished(metadata))
        self.record.note_started(metadata)
        await self.record.wait_if_asked(metadata)
        initial, trailing = _echo(metadata)
        if initial:
            await context.send_initial_metadata(initial)
        if trailing:
            context.set_trailing_metadata(trailing)
        return metadata

    async def _abort_if_asked(self, request: Any, context: Any) -> None:
        import grpc

        status = _status_of(request)
        if status is not None:
            code = next((c for c in grpc.StatusCode if c.value[0] == status[0]), None)
            await context.abort(code or grpc.StatusCode.UNKNOWN, status[1])

    async def EmptyCall(self, request: Any, context: Any) -> Any:
        await self._begin("EmptyCall", context)
        return empty_pb2.Empty()

    async def UnaryCall(self, request: Any, context: Any) -> Any:
        import grpc

        await self._begin("UnaryCall", context)
        await self._abort_if_asked(request, context)
        if request.HasField("response_compressed") and request.response_compressed.value:
            context.set_compression(grpc.Compression.Gzip)
        return messages_pb2.SimpleResponse(
            payload=messages_pb2.Payload(body=bytes(request.response_size))
        )

    async def StreamingOutputCall(self, request: Any, context: Any) -> AsyncIterator[Any]:
        await self._begin("StreamingOutputCall", context)
        await self._abort_if_asked(request, context)
        for response in _responses_for(request):
            yield response

    async def StreamingInputCall(self, request_iterator: Any, context: Any) -> Any:
        await self._begin("StreamingInputCall", context)
        total = 0
        async for request in request_iterator:
            total += len(request.payload.body)
        return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

    async def FullDuplexCall(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        await self._begin("FullDuplexCall", context)
        async for request in request_iterator:
            await self._abort_if_asked(request, context)
            for response in _responses_for(request):
                yield response


class GrpcioAioServer:
    """``grpc.aio.server()`` with :class:`AioTestService` on TCP (or TLS), on its own loop."""

    def __init__(self, credentials: Any = None, extra_handlers: Any = ()) -> None:
        import grpc

        from minigrpc.descriptors import add_servicer
        from tests.interop import test_pb2

        self.record = HandlerRecord()
        self.servicer = AioTestService(self.record)
        self._thread = LoopThread()

        async def start() -> Tuple[Any, int]:
            server = grpc.aio.server()
            add_servicer(server, test_pb2.TEST_SERVICE, self.servicer)
            if extra_handlers:
                server.add_generic_rpc_handlers(tuple(extra_handlers))
            if credentials is None:
                port = server.add_insecure_port("127.0.0.1:0")
            else:
                port = server.add_secure_port("127.0.0.1:0", credentials)
            await server.start()
            return server, port

        self._server, self.port = self._thread.run(start())
        self.target = f"127.0.0.1:{self.port}"

    def stop(self, grace: Optional[float] = None) -> None:
        """Stop serving (``grace`` as grpc.aio's ``stop``); returns when it has stopped."""
        if self._server is not None:
            self.record.release_sleepers()
            server, self._server = self._server, None
            self._thread.run(server.stop(grace))

    def close(self) -> None:
        self.stop(0)
        self._thread.close()


# -- grpclib ---------------------------------------------------------------------------------------


class GrpclibTestService:
    """The interop TestService as a grpclib servable (``__mapping__``), on grpclib's Stream."""

    def __init__(self, record: HandlerRecord) -> None:
        self.record = record

    def __mapping__(self) -> Dict[str, Any]:
        from grpclib.const import Cardinality, Handler

        def handler(name: str, cardinality: Any, request: Any, reply: Any) -> Tuple[str, Any]:
            method = getattr(self, name)

            async def run(stream: Any) -> None:
                try:
                    await method(stream)
                finally:
                    self.record.note_finished(tuple(stream.metadata.items()))

            return SERVICE + name, Handler(run, cardinality, request, reply)

        return dict(
            [
                handler("EmptyCall", Cardinality.UNARY_UNARY, empty_pb2.Empty, empty_pb2.Empty),
                handler(
                    "UnaryCall",
                    Cardinality.UNARY_UNARY,
                    messages_pb2.SimpleRequest,
                    messages_pb2.SimpleResponse,
                ),
                handler(
                    "StreamingOutputCall",
                    Cardinality.UNARY_STREAM,
                    messages_pb2.StreamingOutputCallRequest,
                    messages_pb2.StreamingOutputCallResponse,
                ),
                handler(
                    "StreamingInputCall",
                    Cardinality.STREAM_UNARY,
                    messages_pb2.StreamingInputCallRequest,
                    messages_pb2.StreamingInputCallResponse,
                ),
                handler(
                    "FullDuplexCall",
                    Cardinality.STREAM_STREAM,
                    messages_pb2.StreamingOutputCallRequest,
                    messages_pb2.StreamingOutputCallResponse,
                ),
            ]
        )

    async def _begin(self, stream: Any) -> Tuple[Tuple[str, Any], ...]:
        metadata = tuple(stream.metadata.items())
        self.record.note_started(metadata)
        await self.record.wait_if_asked(metadata)
        initial, trailing = _echo(metadata)
        await stream.send_initial_metadata(metadata=initial)
        return trailing

    @staticmethod
    async def _end(stream: Any, trailing: Any, request: Any = None) -> None:
        from grpclib.const import Status

        status = _status_of(request) if request is not None else None
        if status is None:
            await stream.send_trailing_metadata(metadata=trailing)
        else:
            await stream.send_trailing_metadata(
                status=Status(status[0]), status_message=status[1], metadata=trailing
            )

    async def EmptyCall(self, stream: Any) -> None:
        await stream.recv_message()
        trailing = await self._begin(stream)
        await stream.send_message(empty_pb2.Empty())
        await self._end(stream, trailing)

    async def UnaryCall(self, stream: Any) -> None:
        request = await stream.recv_message()
        trailing = await self._begin(stream)
        if _status_of(request) is None:
            body = bytes(request.response_size)
            await stream.send_message(
                messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=body))
            )
        await self._end(stream, trailing, request)

    async def StreamingOutputCall(self, stream: Any) -> None:
        request = await stream.recv_message()
        trailing = await self._begin(stream)
        if _status_of(request) is None:
            for response in _responses_for(request):
                await stream.send_message(response)
        await self._end(stream, trailing, request)

    async def StreamingInputCall(self, stream: Any) -> None:
        trailing = await self._begin(stream)
        total = 0
        async for request in stream:
            total += len(request.payload.body)
        await stream.send_message(
            messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)
        )
        await self._end(stream, trailing)

    async def FullDuplexCall(self, stream: Any) -> None:
        trailing = await self._begin(stream)
        async for request in stream:
            if _status_of(request) is not None:
                await self._end(stream, trailing, request)
                return
            for response in _responses_for(request):
                await stream.send_message(response)
        await self._end(stream, trailing)


class GrpclibServer:
    """grpclib's ``Server`` with :class:`GrpclibTestService` on TCP, on its own loop."""

    def __init__(self) -> None:
        from grpclib.server import Server

        self.record = HandlerRecord()
        self._thread = LoopThread()

        async def start() -> Tuple[Any, int]:
            server = Server([GrpclibTestService(self.record)])
            await server.start("127.0.0.1", 0)
            port = server._server.sockets[0].getsockname()[1]  # grpclib keeps asyncio's Server
            return server, port

        self._server, self.port = self._thread.run(start())
        self.target = f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.record.release_sleepers()

        async def stop() -> None:
            self._server.close()
            await self._server.wait_closed()

        self._thread.run(stop())
        self._thread.close()


def grpclib_unavailable() -> Optional[str]:
    """Why grpclib cannot serve here (a skip reason), or None."""
    try:
        import grpclib  # noqa: F401
    except ImportError:
        return "grpclib is not installed (the test extra has it from Python 3.7)"
    return None
