"""minigrpc.rpc_status against grpcio-status, both ways, over real sockets.

The side that is minigrpc uses minigrpc's helpers, the side that is grpcio uses grpcio-status's:
a handler calls ``context.abort_with_status(to_status(status))``, the client gets the same
``google.rpc.Status`` back with ``from_call`` (details included: they travel in the
``grpc-status-details-bin`` trailer).  Also: the errors grpcio-status raises, with its words.
"""

from __future__ import annotations

import asyncio
import importlib
from concurrent import futures
from typing import Any, Iterator, Tuple

import pytest

import minigrpc
import minigrpc.aio
from minigrpc import rpc_status
from minigrpc.protocol import wire
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

PAIRS = [("minigrpc", "grpcio"), ("grpcio", "minigrpc"), ("minigrpc", "minigrpc")]


def _addon(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # absent, or refuses this protobuf (the ``oldest`` env)
        pytest.skip(f"{name} is unavailable here: {exc}")


def _api(library: str) -> Any:
    return minigrpc if library == "minigrpc" else grpc


def _helpers(library: str) -> Any:
    return rpc_status if library == "minigrpc" else _addon("grpc_status.rpc_status")


def _bad_request() -> Any:
    detail = _any_of(
        _addon("google.rpc.error_details_pb2").BadRequest.FieldViolation(
            field="name", description="empty"
        )
    )
    return rpc_status.status_pb2.Status(code=3, message="bad request", details=[detail])


def _any_of(message: Any) -> Any:
    from google.protobuf import any_pb2

    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def _serve(library: str, behaviours: dict) -> Tuple[Any, str]:
    api = _api(library)
    server = api.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        [
            api.method_handlers_generic_handler(
                "test.Rich",
                {name: api.unary_unary_rpc_method_handler(b) for name, b in behaviours.items()},
            )
        ]
    )
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    return server, address


@pytest.fixture(params=PAIRS, ids=["-".join(pair) for pair in PAIRS])
def rich(request: pytest.FixtureRequest) -> Iterator[Tuple[str, Any]]:
    """``(client library, channel)`` to a server of the other library with test.Rich."""
    client, server_library = request.param
    helpers = _helpers(server_library)

    def fail(request: bytes, context: Any) -> bytes:
        context.abort_with_status(helpers.to_status(_bad_request()))
        raise AssertionError("abort_with_status returned")

    def plain(request: bytes, context: Any) -> bytes:
        context.abort(_api(server_library).StatusCode.NOT_FOUND, "plain")
        raise AssertionError("abort returned")

    def contradicting(request: bytes, context: Any) -> bytes:
        status = _bad_request()
        context.set_trailing_metadata(((wire.STATUS_DETAILS_KEY, status.SerializeToString()),))
        context.abort(_api(server_library).StatusCode.INTERNAL, "bad request")
        raise AssertionError("abort returned")

    server, address = _serve(
        server_library, {"Fail": fail, "Plain": plain, "Contradicting": contradicting}
    )
    try:
        with _api(client).insecure_channel(address) as channel:
            yield client, channel
    finally:
        server.stop(None).wait(30)


def _error(channel: Any, api: Any, method: str) -> Any:
    with pytest.raises(api.RpcError) as caught:
        channel.unary_unary(f"/test.Rich/{method}")(b"", timeout=10)
    return caught.value


def test_abort_with_status_reaches_from_call(rich: Tuple[str, Any]) -> None:
    client, channel = rich
    api = _api(client)
    error = _error(channel, api, "Fail")
    assert error.code() is api.StatusCode.INVALID_ARGUMENT
    assert error.details() == "bad request"
    status = _helpers(client).from_call(error)
    assert (status.code, status.message) == (3, "bad request")
    violation = _addon("google.rpc.error_details_pb2").BadRequest.FieldViolation()
    assert status.details[0].Unpack(violation)
    assert (violation.field, violation.description) == ("name", "empty")


def test_from_call_without_the_trailer_is_none(rich: Tuple[str, Any]) -> None:
    client, channel = rich
    api = _api(client)
    assert _helpers(client).from_call(_error(channel, api, "Plain")) is None


def test_a_status_contradicting_the_call_is_refused(rich: Tuple[str, Any]) -> None:
    client, channel = rich
    api = _api(client)
    with pytest.raises(ValueError, match=r"Code in Status proto \(StatusCode.INVALID_ARGUMENT\)"):
        _helpers(client).from_call(_error(channel, api, "Contradicting"))


def test_to_status_is_a_grpc_status_with_the_trailer() -> None:
    status = rpc_status.to_status(_bad_request())
    assert isinstance(status, minigrpc.Status)
    assert status.code is minigrpc.StatusCode.INVALID_ARGUMENT
    assert status.details == "bad request"
    (key, value), = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    assert rpc_status.status_pb2.Status.FromString(value) == _bad_request()


def test_to_status_refuses_a_code_outside_grpcs() -> None:
    with pytest.raises(ValueError, match="Invalid status code 17"):
        rpc_status.to_status(rpc_status.status_pb2.Status(code=17, message="x"))


def test_aio_from_call_on_an_asyncio_channel() -> None:
    grpcio_status = _helpers("grpcio")

    def fail(request: bytes, context: Any) -> bytes:
        context.abort_with_status(grpcio_status.to_status(_bad_request()))
        raise AssertionError("abort_with_status returned")

    server, address = _serve("grpcio", {"Fail": fail})

    async def call() -> Any:
        async with minigrpc.aio.insecure_channel(address) as channel:
            rpc = channel.unary_unary("/test.Rich/Fail")(b"", timeout=10)
            with pytest.raises(minigrpc.aio.AioRpcError):
                await rpc
            return await rpc_status.aio.from_call(rpc)

    try:
        status = asyncio.run(call())
    finally:
        server.stop(None).wait(30)
    assert status == _bad_request()
