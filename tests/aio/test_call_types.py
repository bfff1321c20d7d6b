"""grpc.aio's call types, side by side with grpcio's: what a call is, intercepted or not.

grpcio's ``grpc.aio`` exports the abstract ``RpcContext`` every call is, a call class per kind
(``UnaryUnaryCall`` ...) and ``InterceptedUnaryUnaryCall``; code checks ``isinstance`` against
them.  Each test runs with ``api`` = minigrpc.aio and with grpc.aio, each against its own
library's asyncio server on loopback, and asserts the same outcome, so grpcio is the reference
in the same run:

* every call object, on a plain channel and on one with an interceptor of each kind, is an
  ``RpcContext``, a ``Call`` and its kind's call class, and still answers;
* ``RpcContext`` is abstract; every name of grpc.aio's ``__all__`` is minigrpc.aio's too.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc import aio

grpc = pytest.importorskip("grpc")
from grpc import aio as grpc_aio  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

SERVICE = "calltypes.Echo"
KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
CALL_CLASSES = dict(
    zip(KINDS, ("UnaryUnaryCall", "UnaryStreamCall", "StreamUnaryCall", "StreamStreamCall"))
)


@pytest.fixture(params=["minigrpc", "grpcio"])
def api(request: pytest.FixtureRequest) -> Tuple[Any, Any]:
    """(the asyncio module, the library whose handler helpers go with it)."""
    return (aio, minigrpc) if request.param == "minigrpc" else (grpc_aio, grpc)


async def echo(request: bytes, context: Any) -> bytes:
    return request


async def echo_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
    yield request


async def join(requests: AsyncIterator[bytes], context: Any) -> bytes:
    return b"".join([request async for request in requests])


async def echo_each(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


def passing_interceptors(aio_api: Any) -> List[Any]:
    """One interceptor of each kind, each continuing with what it was given."""

    class Passing(
        aio_api.UnaryUnaryClientInterceptor,
        aio_api.UnaryStreamClientInterceptor,
        aio_api.StreamUnaryClientInterceptor,
        aio_api.StreamStreamClientInterceptor,
    ):
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            return await continuation(details, request)

        async def intercept_unary_stream(
            self, continuation: Any, details: Any, request: Any
        ) -> Any:
            return await continuation(details, request)

        async def intercept_stream_unary(
            self, continuation: Any, details: Any, requests: Any
        ) -> Any:
            return await continuation(details, requests)

        async def intercept_stream_stream(
            self, continuation: Any, details: Any, requests: Any
        ) -> Any:
            return await continuation(details, requests)

    return [Passing()]


def requests() -> Iterator[bytes]:
    return iter([b"a", b"b"])


async def calls_of_each_kind(aio_api: Any, library: Any, intercepted: bool) -> List[Any]:
    """Make one call of each kind (in KINDS' order) to a server of the same library; return the
    call objects, each checked to answer as it should."""
    server = aio_api.server()
    server.add_generic_rpc_handlers((library.method_handlers_generic_handler(SERVICE, {
        "Echo": library.unary_unary_rpc_method_handler(echo),
        "EchoStream": library.unary_stream_rpc_method_handler(echo_stream),
        "Join": library.stream_unary_rpc_method_handler(join),
        "EchoEach": library.stream_stream_rpc_method_handler(echo_each),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    interceptors = passing_interceptors(aio_api) if intercepted else None
    try:
        async with aio_api.insecure_channel(
            f"127.0.0.1:{port}", interceptors=interceptors
        ) as channel:
            unary = channel.unary_unary(f"/{SERVICE}/Echo")(b"x", timeout=10)
            assert await unary == b"x"
            stream = channel.unary_stream(f"/{SERVICE}/EchoStream")(b"y", timeout=10)
            assert [response async for response in stream] == [b"y"]
            joined = channel.stream_unary(f"/{SERVICE}/Join")(requests(), timeout=10)
            assert await joined == b"ab"
            each = channel.stream_stream(f"/{SERVICE}/EchoEach")(requests(), timeout=10)
            assert [response async for response in each] == [b"a", b"b"]
            for call in (unary, stream, joined, each):
                assert await call.code() is library.StatusCode.OK
            return [unary, stream, joined, each]
    finally:
        await server.stop(None)


@pytest.mark.parametrize("intercepted", [False, True], ids=["plain", "intercepted"])
def test_every_call_is_an_rpc_context_and_its_kinds_call(
    api: Tuple[Any, Any], intercepted: bool
) -> None:
    aio_api, library = api
    calls = asyncio.run(calls_of_each_kind(aio_api, library, intercepted))
    for kind, call in zip(KINDS, calls):
        assert isinstance(call, aio_api.RpcContext), (kind, call)
        assert isinstance(call, aio_api.Call), (kind, call)
        assert isinstance(call, getattr(aio_api, CALL_CLASSES[kind])), (kind, call)
        assert call.done() and not call.cancelled(), (kind, call)
    assert isinstance(calls[0], aio_api.InterceptedUnaryUnaryCall) is intercepted


def test_rpc_context_is_abstract(api: Tuple[Any, Any]) -> None:
    aio_api, _ = api
    with pytest.raises(TypeError):
        aio_api.RpcContext()


def test_every_name_grpc_aio_exports_is_minigrpc_aios() -> None:
    missing = [name for name in grpc_aio.__all__ if not hasattr(aio, name)]
    assert missing == [], f"grpc.aio of grpcio {grpc.__version__} has names minigrpc.aio lacks"
