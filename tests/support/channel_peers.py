"""Servers for the tests of long-lived channels: one behaviour, on grpcio's server or minigrpc's.

:class:`BehaviourServer` serves ``/test.Behaviour/*`` with raw bytes (no protobuf) on
``127.0.0.1`` (or a unix socket), on grpcio's server or on minigrpc's (both take the same
servicer code through their ``grpc`` module).  What a call does is said by its metadata, so one
server serves every test:

* ``x-key: k`` and ``x-fail: n``: the first ``n`` calls with key ``k`` fail with ``x-code``
  (a status code name, UNAVAILABLE by default); ``x-pushback: ms`` adds
  ``grpc-retry-pushback-ms`` to their trailers;
* ``x-wait: ms``: the handler waits up to that long (or until :meth:`BehaviourServer.release`);
* ``x-size: n``: the response is ``n`` bytes instead of the request echoed;
* ``x-headers-first: 1``: the handler sends its response headers before failing (a call a
  client may no longer retry).

Every call is recorded (:attr:`BehaviourServer.calls`): its method and metadata, and the answer
carries the server's name in the initial metadata (``x-server``), so a test counts which server
took which call.  Streaming methods: ``Stream`` (one request, ``x-count`` responses),
``Collect`` (many requests, their concatenation back), ``Chat`` (each request echoed).
"""

from __future__ import annotations

import collections
import threading
from concurrent import futures
from typing import Any, Dict, Iterator, List, Optional, Tuple

from tests.peers import grpcio_in_process

SERVICE = "test.Behaviour"
UNARY = f"/{SERVICE}/Unary"
STREAM = f"/{SERVICE}/Stream"
COLLECT = f"/{SERVICE}/Collect"
CHAT = f"/{SERVICE}/Chat"

#: The longest a handler waits when asked to (``x-wait``), whatever it was asked.
MAX_WAIT = 30.0


class Record:
    """One call as the server saw it."""

    def __init__(self, method: str, metadata: Dict[str, str], server: str) -> None:
        self.method = method
        self.metadata = metadata
        self.server = server

    def __repr__(self) -> str:
        return f"<Record {self.method} {self.metadata}>"


class Behaviour:
    """The handlers, for either server."""

    def __init__(self, grpc: Any, name: str) -> None:
        self.grpc = grpc
        self.name = name
        self.calls: List[Record] = []
        self._failures: Dict[str, int] = collections.Counter()
        self._lock = threading.Lock()
        self.released = threading.Event()
        #: Set whenever a call arrives (tests wait on it, never on a timer).
        self.arrived = threading.Condition(self._lock)

    def _start(self, method: str, context: Any) -> Dict[str, str]:
        metadata = {key: value for key, value in context.invocation_metadata()
                    if isinstance(value, str)}
        with self._lock:
            self.calls.append(Record(method, metadata, self.name))
            self.arrived.notify_all()
            key = metadata.get("x-key", "")
            failing = int(metadata.get("x-fail", "0"))
            fail = failing and self._failures[key] < failing
            if fail:
                self._failures[key] += 1
        if "x-wait" in metadata:
            self.released.wait(min(MAX_WAIT, int(metadata["x-wait"]) / 1000.0))
        if metadata.get("x-headers-first") or not fail:
            context.send_initial_metadata((("x-server", self.name),))
        if fail:
            trailers: List[Tuple[str, str]] = []
            if "x-pushback" in metadata:
                trailers.append(("grpc-retry-pushback-ms", metadata["x-pushback"]))
            if trailers:
                context.set_trailing_metadata(tuple(trailers))
            code = getattr(self.grpc.StatusCode, metadata.get("x-code", "UNAVAILABLE"))
            context.abort(code, f"failure {self._failures[key]} of {failing}")
        return metadata

    def wait_for_calls(self, count: int, timeout: float = 10.0) -> bool:
        with self._lock:
            return self.arrived.wait_for(lambda: len(self.calls) >= count, timeout)

    @staticmethod
    def _answer(request: bytes, metadata: Dict[str, str]) -> bytes:
        if "x-size" in metadata:
            return b"r" * int(metadata["x-size"])
        return request

    def unary(self, request: bytes, context: Any) -> bytes:
        return self._answer(request, self._start(UNARY, context))

    def stream(self, request: bytes, context: Any) -> Iterator[bytes]:
        metadata = self._start(STREAM, context)
        for _ in range(int(metadata.get("x-count", "3"))):
            yield self._answer(request, metadata)

    def collect(self, requests: Iterator[bytes], context: Any) -> bytes:
        metadata = self._start(COLLECT, context)
        return b"".join(requests) if "x-size" not in metadata else self._answer(b"", metadata)

    def chat(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        self._start(CHAT, context)
        yield from requests

    def handler(self) -> Any:
        return four_methods(self.grpc, SERVICE, self)


def four_methods(grpc: Any, service: str, servicer: Any) -> Any:
    """The generic handler of ``service``'s four methods, one per call shape: ``Unary``,
    ``Stream``, ``Collect`` and ``Chat``, served by the servicer's methods of those names in
    lower case."""
    return grpc.method_handlers_generic_handler(service, {
        "Unary": grpc.unary_unary_rpc_method_handler(servicer.unary),
        "Stream": grpc.unary_stream_rpc_method_handler(servicer.stream),
        "Collect": grpc.stream_unary_rpc_method_handler(servicer.collect),
        "Chat": grpc.stream_stream_rpc_method_handler(servicer.chat),
    })


def server_module(implementation: str) -> Any:
    """The ``grpc`` module of a server implementation: ``grpcio`` or ``minigrpc``."""
    if implementation == "grpcio":
        import grpc

        return grpc
    import minigrpc

    return minigrpc


class BehaviourServer:
    """A started server of :class:`Behaviour` on ``address`` (a port of 127.0.0.1 by default)."""

    def __init__(self, implementation: str = "minigrpc", address: str = "127.0.0.1:0",
                 name: str = "server", options: Tuple[Tuple[str, Any], ...] = ()) -> None:
        if implementation == "grpcio" and not grpcio_in_process():
            import pytest

            pytest.skip("needs grpcio in this process")
        self.implementation = implementation
        self.address = address
        self.grpc = server_module(implementation)
        self.behaviour = Behaviour(self.grpc, name)
        self._options = options
        self._server: Any = None
        self.port = 0
        self.start()

    @property
    def calls(self) -> List[Record]:
        return self.behaviour.calls

    @property
    def target(self) -> str:
        if self.address.startswith("unix"):
            return self.address
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Serve (again, on the same port after :meth:`stop`)."""
        self.behaviour.released.clear()
        server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  options=self._options)
        server.add_generic_rpc_handlers((self.behaviour.handler(),))
        address = self.address
        if self.port:
            address = f"127.0.0.1:{self.port}"
        self.port = server.add_insecure_port(address)
        server.start()
        self._server = server

    def release(self) -> None:
        """End every handler's wait now."""
        self.behaviour.released.set()

    def stop(self, grace: Optional[float] = None) -> None:
        self.release()
        if self._server is not None:
            self._server.stop(grace).wait(30)
            self._server = None

    def __enter__(self) -> BehaviourServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def unary(channel: Any, request: bytes = b"hi", **kwargs: Any) -> Any:
    """A unary call of ``/test.Behaviour/Unary`` on a blocking channel; ``with_call``'s pair."""
    return channel.unary_unary(UNARY).with_call(request, **kwargs)


async def aio_unary(channel: Any, request: bytes = b"hi", **kwargs: Any) -> Tuple[bytes, Any]:
    """The same on an asyncio channel: (response, the call)."""
    call = channel.unary_unary(UNARY)(request, **kwargs)
    return await call, call


#: The two client APIs every test of this kind runs on.
APIS = ("blocking", "aio")


class Outcome:
    """How one call ended, whichever API made it."""

    def __init__(self, code: str, details: str, response: Any, initial_metadata: Any,
                 elapsed: float) -> None:
        self.code = code
        self.details = details
        self.response = response
        self.initial_metadata = dict(initial_metadata or ())
        self.elapsed = elapsed

    @property
    def server(self) -> Optional[str]:
        """The name of the server that answered (``x-server``), if one did."""
        value = self.initial_metadata.get("x-server")
        return None if value is None else str(value)

    def __repr__(self) -> str:
        return f"<Outcome {self.code} {self.details!r} after {self.elapsed:.3f}s>"


def _blocking_outcome(grpc: Any, channel: Any, method: str, request: bytes,
                      kwargs: Dict[str, Any]) -> Outcome:
    import time

    started = time.monotonic()
    try:
        response, call = channel.unary_unary(method).with_call(request, **kwargs)
    except grpc.RpcError as error:
        return Outcome(error.code().name, error.details(), None, error.initial_metadata(),
                       time.monotonic() - started)
    return Outcome("OK", "", response, call.initial_metadata(), time.monotonic() - started)


async def _aio_outcome(channel: Any, method: str, request: bytes, kwargs: Dict[str, Any]
                       ) -> Outcome:
    import time

    from minigrpc import aio

    started = time.monotonic()
    call = channel.unary_unary(method)(request, **kwargs)
    try:
        response = await call
    except aio.AioRpcError as error:
        return Outcome(error.code().name, error.details() or "", None, error.initial_metadata(),
                       time.monotonic() - started)
    return Outcome("OK", "", response, await call.initial_metadata(),
                   time.monotonic() - started)


def calls(api: str, target: str, count: int = 1, options: Any = None, method: str = UNARY,
          request: bytes = b"hi", **kwargs: Any) -> List[Outcome]:
    """``count`` unary calls, one after the other, on one new channel of ``api``: minigrpc's
    ``blocking`` or ``aio`` API, or ``grpcio``'s blocking one (the reference)."""
    if api in ("blocking", "grpcio"):
        grpc = server_module("grpcio" if api == "grpcio" else "minigrpc")
        with grpc.insecure_channel(target, options=options) as channel:
            return [_blocking_outcome(grpc, channel, method, request, kwargs)
                    for _ in range(count)]
    import asyncio

    from minigrpc import aio

    async def main() -> List[Outcome]:
        async with aio.insecure_channel(target, options=options) as channel:
            return [await _aio_outcome(channel, method, request, kwargs) for _ in range(count)]

    return asyncio.run(main())


def call_once(api: str, target: str, options: Any = None, **kwargs: Any) -> Outcome:
    """One unary call on a new channel of ``api``."""
    return calls(api, target, 1, options, **kwargs)[0]
