"""grpc.aio's abstract classes, side by side with grpcio's.

In grpcio the calls, ``Channel``, the four multi-callables, ``Server`` and ``ServicerContext``
of ``grpc.aio`` are abstract classes with private implementations: code subclasses them (and
must implement what they declare), annotates with them (``UnaryUnaryCall[Req, Resp]``) and
checks ``isinstance`` against them.  For each name:

* minigrpc.aio's abstract methods are exactly grpcio's (installed grpcio is the reference),
  less those a newer grpcio added (the oldest Pythons get an older grpcio: 1.62 on 3.7, 1.80
  on 3.9; minigrpc follows the newest, ``minigrpc.grpc_alias.GRPCIO_VERSION``);
* a subclass that implements none of them cannot be instantiated (TypeError), one that
  implements all of them can, with both libraries;
* the objects of a live call (the server, the channel, each kind's multi-callable and call,
  the handler's context) are instances of their class, with each library against its own
  server on loopback (grpcio's handler context is the exception: it is not one).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Dict, Generic, Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc import aio

grpc = pytest.importorskip(
    "grpc", reason="grpcio (a test dependency) is not installed: it is the reference here"
)
from grpc import aio as grpc_aio  # noqa: E402

pytestmark = pytest.mark.timeout(60)

#: grpc.aio's abstract classes.
ABSTRACT = (
    "RpcContext",
    "Call",
    "UnaryUnaryCall",
    "UnaryStreamCall",
    "StreamUnaryCall",
    "StreamStreamCall",
    "UnaryUnaryMultiCallable",
    "UnaryStreamMultiCallable",
    "StreamUnaryMultiCallable",
    "StreamStreamMultiCallable",
    "Channel",
    "Server",
    "ServicerContext",
)
#: Those generic in the request and response types.
GENERIC = (
    "UnaryUnaryCall",
    "UnaryStreamCall",
    "StreamUnaryCall",
    "StreamStreamCall",
    "UnaryUnaryMultiCallable",
    "UnaryStreamMultiCallable",
    "StreamUnaryMultiCallable",
    "StreamStreamMultiCallable",
    "ServicerContext",
)

#: What grpcio added to an abstract class after releases still installed on old Pythons (1.80
#: has neither, 1.84 has both): an abstract method the installed grpcio's class lacks altogether,
#: and the multi-callables it did not yet make generic.
ADDED_LATER = {"ServicerContext": frozenset({"abort_with_status"})}
GENERIC_LATER = ("StreamUnaryMultiCallable", "StreamStreamMultiCallable")

SERVICE = "abstract.Echo"
KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
KIND_NAMES = ("UnaryUnary", "UnaryStream", "StreamUnary", "StreamStream")


@pytest.fixture(params=["minigrpc", "grpcio"])
def api(request: pytest.FixtureRequest) -> Tuple[Any, Any]:
    """(the asyncio module, the library whose handler helpers go with it)."""
    return (aio, minigrpc) if request.param == "minigrpc" else (grpc_aio, grpc)


@pytest.mark.parametrize("name", ABSTRACT)
def test_abstract_methods_are_grpcios(name: str) -> None:
    ours, theirs = getattr(aio, name), getattr(grpc_aio, name)
    assert ours.__abstractmethods__, name
    later = {method for method in ADDED_LATER.get(name, ()) if not hasattr(theirs, method)}
    assert sorted(ours.__abstractmethods__) == sorted(theirs.__abstractmethods__ | later), (
        f"{name}: grpcio {grpc.__version__}'s abstract methods differ"
    )


@pytest.mark.parametrize("name", ABSTRACT)
def test_a_subclass_must_implement_the_abstract_methods(api: Tuple[Any, Any], name: str) -> None:
    base = getattr(api[0], name)
    bare = type(f"Bare{name}", (base,), {})
    with pytest.raises(TypeError, match="abstract"):
        bare()

    def implemented(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    complete = type(
        f"Complete{name}", (base,), {method: implemented for method in base.__abstractmethods__}
    )
    assert isinstance(complete(), base)


@pytest.mark.parametrize("name", GENERIC)
def test_generic_in_request_and_response(api: Tuple[Any, Any], name: str) -> None:
    """``grpc.aio.UnaryUnaryCall[Request, Response]`` is an annotation code evaluates."""
    base = getattr(api[0], name)
    if api[1] is grpc and name in GENERIC_LATER and Generic not in base.__mro__:
        pytest.skip(f"grpcio {grpc.__version__}'s {name} is not generic yet (1.84's is)")
    assert base[bytes, str].__origin__ is base


async def live_objects(aio_api: Any, library: Any) -> Dict[str, List[Any]]:
    """The objects of one call of each kind to a server of the same library, by the name of
    the class each should be an instance of."""
    contexts: List[Any] = []

    async def echo(request: bytes, context: Any) -> bytes:
        contexts.append(context)
        return request

    async def echo_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
        contexts.append(context)
        yield request

    async def join(requests: AsyncIterator[bytes], context: Any) -> bytes:
        contexts.append(context)
        return b"".join([request async for request in requests])

    async def echo_each(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        contexts.append(context)
        async for request in requests:
            yield request

    def requests() -> Iterator[bytes]:
        return iter([b"a", b"b"])

    server = aio_api.server()
    server.add_generic_rpc_handlers((library.method_handlers_generic_handler(SERVICE, {
        "Echo": library.unary_unary_rpc_method_handler(echo),
        "EchoStream": library.unary_stream_rpc_method_handler(echo_stream),
        "Join": library.stream_unary_rpc_method_handler(join),
        "EchoEach": library.stream_stream_rpc_method_handler(echo_each),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with aio_api.insecure_channel(f"127.0.0.1:{port}") as channel:
            callables = [
                channel.unary_unary(f"/{SERVICE}/Echo"),
                channel.unary_stream(f"/{SERVICE}/EchoStream"),
                channel.stream_unary(f"/{SERVICE}/Join"),
                channel.stream_stream(f"/{SERVICE}/EchoEach"),
            ]
            calls = [
                callables[0](b"x", timeout=10),
                callables[1](b"y", timeout=10),
                callables[2](requests(), timeout=10),
                callables[3](requests(), timeout=10),
            ]
            assert await calls[0] == b"x"
            assert [response async for response in calls[1]] == [b"y"]
            assert await calls[2] == b"ab"
            assert [response async for response in calls[3]] == [b"a", b"b"]
            objects: Dict[str, List[Any]] = {
                "Server": [server],
                "Channel": [channel],
                "ServicerContext": contexts,
                "RpcContext": calls,
                "Call": calls,
            }
            for kind, multi_callable, call in zip(KIND_NAMES, callables, calls):
                objects[f"{kind}MultiCallable"] = [multi_callable]
                objects[f"{kind}Call"] = [call]
            return objects
    finally:
        await server.stop(None)


def test_the_objects_of_a_live_call_are_instances(api: Tuple[Any, Any]) -> None:
    aio_api, library = api
    objects = asyncio.run(live_objects(aio_api, library))
    assert sorted(objects) == sorted(ABSTRACT)
    assert len(objects["ServicerContext"]) == len(KINDS)
    if library is grpc:
        # grpcio's own context (a Cython class) is not a grpc.aio.ServicerContext; minigrpc's
        # is, as the abstract class promises.
        del objects["ServicerContext"]
    for name, instances in objects.items():
        for instance in instances:
            assert isinstance(instance, getattr(aio_api, name)), (name, instance)
    # and of its own kind only: a unary call is not a stream's
    assert not isinstance(objects["UnaryUnaryCall"][0], aio_api.UnaryStreamCall)
    assert not isinstance(objects["StreamStreamCall"][0], aio_api.UnaryUnaryCall)
