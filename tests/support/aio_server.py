"""minigrpc.aio's server for the tests: its own event loop on a thread, and an asyncio servicer.

* :class:`AioServer` runs ``minigrpc.aio.server()`` on an event loop in a background thread, so
  that any client (grpcio's or minigrpc's, blocking or asyncio) can call it from the test's own
  thread.  By default it also serves the interop ``TestService`` (whose servicer is plain
  functions: they run on the executor, as grpcio's asyncio server runs them).
* :class:`AsyncServicer` is ``t.S``: the handler shapes of ``grpc.aio`` (``async def``, async
  generators, the ``read()``/``write()`` style, plain functions and generators), on bytes.

Nothing here sleeps to synchronise: handlers that must wait hold on an event the test sets.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence

import minigrpc
from minigrpc import StatusCode, aio
from minigrpc.descriptors import add_servicer
from tests.interop import test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import listen_address, short_temp_dir

SERVICE = "t.S"
#: Metadata keys: echo this value in the initial / trailing metadata.
ECHO_INITIAL = "x-echo-initial"
ECHO_TRAILING = "x-echo-trailing"


class AsyncServicer:
    """The handlers of ``t.S`` (requests and responses are bytes)."""

    def __init__(self) -> None:
        #: Set by the test to release a handler waiting in ``Wait``.
        self.release: Optional[asyncio.Event] = None
        #: How each ``Wait`` call ended: "cancelled", "released"; and its context's view.
        self.outcomes: asyncio.Queue[str] = asyncio.Queue()
        self.started: asyncio.Queue[str] = asyncio.Queue()
        #: Responses ``Flood`` has handed to ``write()`` so far.
        self.written = 0
        self.threads: List[str] = []
        self.done_callbacks: List[bool] = []

    # -- unary -----------------------------------------------------------------------------

    async def Echo(self, request: bytes, context: aio.ServicerContext) -> Optional[bytes]:
        metadata = dict(context.invocation_metadata())
        if ECHO_INITIAL in metadata:
            await context.send_initial_metadata([(ECHO_INITIAL, metadata[ECHO_INITIAL])])
        if ECHO_TRAILING in metadata:  # as an aio.Metadata, which grpcio accepts too
            context.set_trailing_metadata(aio.Metadata((ECHO_TRAILING, metadata[ECHO_TRAILING])))
        if request.startswith(b"abort:"):
            await context.abort(StatusCode.NOT_FOUND, request[6:].decode())
        if request == b"abort-ok":
            await context.abort(StatusCode.OK, "ignored")
        if request == b"raise":
            raise ValueError("boom")
        if request == b"set-code":
            context.set_code(StatusCode.FAILED_PRECONDITION)
            context.set_details("set by the handler")
            return None
        if request == b"none":
            return None
        if request == b"peer":
            return context.peer().encode()
        if request == b"dict-trailers":
            try:
                context.set_trailing_metadata({"x-key": "value"})  # type: ignore[arg-type]
            except TypeError:
                return b"TypeError"
            return b"accepted"
        if request == b"auth":
            security = context.auth_context()["transport_security_type"][0]
            identities = context.peer_identities() or [b"-"]
            return security + b"," + identities[0]
        if request == b"deadline":
            remaining = context.time_remaining()
            return b"none" if remaining is None else str(remaining).encode()
        return request

    async def Wait(self, request: bytes, context: aio.ServicerContext) -> bytes:
        """Waits for :attr:`release`; reports whether it was released or cancelled."""
        assert self.release is not None
        context.add_done_callback(lambda ctx: self.done_callbacks.append(ctx.cancelled()))
        self.started.put_nowait(request.decode())
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.outcomes.put_nowait("cancelled")
            raise
        self.outcomes.put_nowait("released")
        return request

    def SyncEcho(self, request: bytes, context: Any) -> bytes:
        self.threads.append(threading.current_thread().name)
        if request == b"abort":
            context.abort(StatusCode.PERMISSION_DENIED, "sync abort")
        context.set_trailing_metadata([("x-sync", "yes")])
        return request + b" (sync)"

    # -- response streaming ----------------------------------------------------------------

    async def Split(self, request: bytes, context: aio.ServicerContext) -> AsyncIterator[bytes]:
        """An async generator: one response per byte of the request, then an error if asked."""
        for index in range(len(request)):
            yield request[index : index + 1]
        if request.endswith(b"!"):
            await context.abort(StatusCode.DATA_LOSS, "after the responses")

    async def SplitWriter(self, request: bytes, context: aio.ServicerContext) -> None:
        """The write() style; compression may be chosen only before the headers go out."""
        context.set_compression(minigrpc.Compression.Deflate)
        for index in range(len(request)):
            await context.write(request[index : index + 1])
        try:
            context.set_compression(minigrpc.Compression.Gzip)
        except RuntimeError:
            return
        raise AssertionError("set_compression() after the headers did not raise")

    def SyncSplit(self, request: bytes, context: Any) -> Iterator[bytes]:
        for index in range(len(request)):
            yield request[index : index + 1]

    async def Flood(self, request: bytes, context: aio.ServicerContext) -> None:
        """``int(request)`` responses of 64 KiB, counted in :attr:`written`."""
        chunk = b"f" * 65536
        for _ in range(int(request)):
            await context.write(chunk)
            self.written += 1

    # -- request streaming -----------------------------------------------------------------

    async def Join(self, requests: AsyncIterator[bytes], context: aio.ServicerContext) -> bytes:
        return b"".join([request async for request in requests])

    async def JoinRead(self, requests: Any, context: aio.ServicerContext) -> bytes:
        parts = []
        while True:
            message = await context.read()
            if message is aio.EOF:
                return b"".join(parts)
            parts.append(message)

    async def First(self, requests: AsyncIterator[bytes], context: aio.ServicerContext) -> bytes:
        """The request iterator is an async iterator proper: ``__anext__`` works on it."""
        return await requests.__anext__()

    async def SelfCancel(self, request: bytes, context: aio.ServicerContext) -> bytes:
        """A handler whose own work is cancelled (not the call)."""
        raise asyncio.CancelledError()

    def SyncJoin(self, requests: Iterator[bytes], context: Any) -> bytes:
        return b"".join(requests)

    async def Chat(
        self, requests: AsyncIterator[bytes], context: aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request.upper()

    async def ChatRW(self, requests: Any, context: aio.ServicerContext) -> None:
        while True:
            message = await context.read()
            if message is aio.EOF:
                return
            await context.write(message.upper())

    async def Mixed(
        self, requests: AsyncIterator[bytes], context: aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """read() and the request iterator, yield and write(), mixed: grpcio's server allows it."""
        first = await context.read()
        rest = [request async for request in requests]
        yield first
        await context.write(b"+".join(rest))

    def SyncChat(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        for request in requests:
            yield request.upper()


#: Each method of ``t.S`` and its shape.
SHAPES: Dict[str, str] = {
    "Echo": "unary_unary",
    "Wait": "unary_unary",
    "SyncEcho": "unary_unary",
    "Split": "unary_stream",
    "SplitWriter": "unary_stream",
    "SyncSplit": "unary_stream",
    "Flood": "unary_stream",
    "Join": "stream_unary",
    "JoinRead": "stream_unary",
    "SyncJoin": "stream_unary",
    "First": "stream_unary",
    "SelfCancel": "unary_unary",
    "Chat": "stream_stream",
    "ChatRW": "stream_stream",
    "SyncChat": "stream_stream",
    "Mixed": "stream_stream",
}


def generic_handler(servicer: AsyncServicer) -> Any:
    handlers = {
        name: getattr(minigrpc, f"{shape}_rpc_method_handler")(getattr(servicer, name))
        for name, shape in SHAPES.items()
    }
    return minigrpc.method_handlers_generic_handler(SERVICE, handlers)


class AioServer:
    """A started ``minigrpc.aio`` server on its own event-loop thread (module docstring)."""

    def __init__(
        self,
        kind: str = "tcp",
        with_interop: bool = True,
        credentials: Any = None,
        handlers: Sequence[Any] = (),
        **server_kwargs: Any,
    ) -> None:
        self.kind = kind
        self.directory = short_temp_dir() if kind == "unix" else None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aio-server-loop")
        self.thread.start()
        self.interop_servicer = TestServiceServicer()
        try:
            self.servicer: AsyncServicer = self.run(self._make_servicer())
            self.server = aio.server(**server_kwargs)
            self.server.add_generic_rpc_handlers([generic_handler(self.servicer), *handlers])
            if with_interop:
                add_servicer(
                    self.server,
                    test_pb2.DESCRIPTOR.services_by_name["TestService"],
                    self.interop_servicer,
                )
            address = listen_address(kind, self.directory)
            if credentials is None:
                port = self.server.add_insecure_port(address)
            else:
                port = self.server.add_secure_port(address, credentials)
            self.port = port
            self.target = f"127.0.0.1:{port}" if kind == "tcp" else address
            self.run(self.server.start())
        except BaseException:
            self._stop_loop()
            raise

    async def _make_servicer(self) -> AsyncServicer:
        servicer = AsyncServicer()
        servicer.release = asyncio.Event()
        return servicer

    def run(self, coroutine: Any, timeout: float = 30) -> Any:
        """Run ``coroutine`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call_soon(self, function: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(function, *args)

    def next_outcome(self, timeout: float = 10) -> str:
        return self.run(asyncio.wait_for(self.servicer.outcomes.get(), timeout))

    def next_started(self, timeout: float = 10) -> str:
        return self.run(asyncio.wait_for(self.servicer.started.get(), timeout))

    def stop(self, grace: Optional[float] = None) -> None:
        self.interop_servicer.release_sleepers()
        try:
            self.run(self.server.stop(grace))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        if self.directory:
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> AioServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
