"""minigrpc.aio's client calls side by side with grpcio's grpc.aio client, same server.

Each test runs once with each client against one grpc.aio server, and checks what both must
do, so that a divergence fails the minigrpc run:

* A response stream is taken either by ``async for`` or by ``read()``: mixing the two raises
  UsageError, and the style chosen first keeps working; iterating again continues the same
  iterator.
* Metadata that is not (str, str | bytes) pairs raises TypeError (ValueError for items that
  are not pairs, such as a dict's keys) before anything is sent; well-typed metadata the wire
  cannot carry (an upper-case key, a non-ASCII value) fails the call and sends nothing either.
* ``grpc.max_receive_message_length`` holds for ``read()`` as for iteration: the message over
  it ends the call RESOURCE_EXHAUSTED, after the messages under it were delivered.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from minigrpc import aio
from tests.aio.async_peers import (
    CALL_ID_KEY,
    GrpcioAioServer,
    client_api,
    run_on_channel,
    status_codes,
)
from tests.aio.calls import empty_call, full_duplex, output_request, streaming_output
from tests.interop import empty_pb2
from tests.peers import grpcio_peer_unavailable

pytestmark = [pytest.mark.timeout(60)]

if grpcio_peer_unavailable() is not None:  # pragma: no cover - grpcio-less interpreters
    pytest.skip(str(grpcio_peer_unavailable()), allow_module_level=True)
grpc = pytest.importorskip("grpc")
pytest.importorskip("grpc.aio")

CLIENTS = ["grpcio", "minigrpc"]
_call_ids = itertools.count()


def _sizes(responses: Any) -> list:
    return [len(response.payload.body) for response in responses]


# -- one reading style per call ------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_read_after_iterating_raises_usage_error(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2, 3), timeout=10)
        responses = call.__aiter__()
        assert _sizes([await responses.__anext__()]) == [1]
        with pytest.raises(client_api(client).UsageError):
            await call.read()
        # Iterating again continues the same iterator; the call is intact.
        assert _sizes([response async for response in call]) == [2, 3]
        assert await call.code() is status_codes(client).OK

    run_on_channel(client, grpcio_aio_server.target, body)


@pytest.mark.parametrize("client", CLIENTS)
def test_iterating_after_read_raises_usage_error(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        call = streaming_output(channel)(output_request(1, 2), timeout=10)
        assert _sizes([await call.read()]) == [1]
        with pytest.raises(client_api(client).UsageError):
            call.__aiter__()
        assert _sizes([await call.read()]) == [2]
        assert await call.read() is client_api(client).EOF
        assert await call.code() is status_codes(client).OK

    run_on_channel(client, grpcio_aio_server.target, body)


@pytest.mark.parametrize("client", CLIENTS)
def test_bidi_call_mixing_styles_raises_usage_error(
    client: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        call = full_duplex(channel)(timeout=10)
        await call.write(output_request(4))
        assert _sizes([await call.read()]) == [4]
        with pytest.raises(client_api(client).UsageError):
            call.__aiter__()
        await call.done_writing()
        assert await call.read() is client_api(client).EOF

        release = asyncio.Event()

        async def requests() -> Any:
            yield output_request(5)
            await release.wait()  # the call runs on until the test is done with it

        iterated = full_duplex(channel)(requests(), timeout=10)
        with pytest.raises(client_api(client).UsageError):
            await iterated.write(output_request(1))
        responses = iterated.__aiter__()
        assert _sizes([await responses.__anext__()]) == [5]
        with pytest.raises(client_api(client).UsageError):
            await iterated.read()
        release.set()
        assert _sizes([response async for response in iterated]) == []
        assert await iterated.code() is status_codes(client).OK

    run_on_channel(client, grpcio_aio_server.target, body)


# -- invalid metadata ----------------------------------------------------------------------------

# What grpcio raises (checked against grpcio 1.85): the type of a key or value, an item that does
# not unpack into two; and what the wire cannot carry, which grpcio fails without sending.
NOT_STR_PAIRS = [
    pytest.param(((42, 42),), TypeError, id="int-key"),
    pytest.param(((None, {}),), TypeError, id="none-key"),
    pytest.param((("normal", object()),), TypeError, id="object-value"),
    pytest.param((("x-int", 42),), TypeError, id="int-value"),
    pytest.param((("x-bin", 5),), TypeError, id="int-binary-value"),
    pytest.param({"x-dict": "v"}, ValueError, id="dict"),
    pytest.param((("k", "v", "w"),), ValueError, id="triple"),
]
UNCARRIABLE = [
    pytest.param((("Upper", "v"),), id="upper-case-key"),
    pytest.param((("bad key!", "v"),), id="invalid-key-characters"),
    pytest.param((("x-text", "caf\u00e9"),), id="non-ascii-value"),
    pytest.param((("x-text", "line\nbreak"),), id="control-character"),
]


def _check_nothing_sent(
    client: str, grpcio_aio_server: GrpcioAioServer, metadata: Any, expected: Any
) -> BaseException:
    """Call with ``metadata`` (after a call-id pair the server records) and return what was
    raised; a call that then works on the same channel reaches the server, the failed one not."""
    failed_id, next_id = f"{client}-{next(_call_ids)}", f"{client}-{next(_call_ids)}"
    caught = []

    async def body(channel: Any) -> None:
        pairs = metadata if isinstance(metadata, dict) else ((CALL_ID_KEY, failed_id), *metadata)
        with pytest.raises(expected) as info:
            call = empty_call(channel)(empty_pb2.Empty(), timeout=10, metadata=pairs)
            await call
        caught.append(info.value)
        works = ((CALL_ID_KEY, next_id),)
        await empty_call(channel)(empty_pb2.Empty(), timeout=10, metadata=works)

    run_on_channel(client, grpcio_aio_server.target, body)
    assert next_id in grpcio_aio_server.record.started
    assert failed_id not in grpcio_aio_server.record.started
    return caught[0]


@pytest.mark.parametrize(("metadata", "expected"), NOT_STR_PAIRS)
@pytest.mark.parametrize("client", CLIENTS)
def test_metadata_not_of_str_pairs_raises_type_or_value_error(
    client: str, grpcio_aio_server: GrpcioAioServer, metadata: Any, expected: Any
) -> None:
    _check_nothing_sent(client, grpcio_aio_server, metadata, expected)


@pytest.mark.parametrize("metadata", UNCARRIABLE)
@pytest.mark.parametrize("client", CLIENTS)
def test_metadata_the_wire_cannot_carry_fails_the_call(
    client: str, grpcio_aio_server: GrpcioAioServer, metadata: Any
) -> None:
    # grpc.aio raises an internal error class here (the blocking grpcio client says INTERNAL
    # "Invalid metadata", as minigrpc's two clients do).
    error = _check_nothing_sent(client, grpcio_aio_server, metadata, Exception)
    if client == "minigrpc":
        assert isinstance(error, aio.AioRpcError)
        assert error.code() is status_codes(client).INTERNAL
        assert error.details().startswith("Invalid metadata")


def test_wrong_metadata_types_raise_at_once_in_minigrpc(grpcio_aio_server: GrpcioAioServer) -> None:
    """minigrpc raises as the call is made, before a call object (or a stream) exists."""

    async def body(channel: Any) -> None:
        with pytest.raises(TypeError):
            streaming_output(channel)(output_request(1), metadata=(("x-int", 1),))
        with pytest.raises(TypeError):
            full_duplex(channel)(metadata=((b"x", b"v"), (3, "v")))

    run_on_channel("minigrpc", grpcio_aio_server.target, body)


# -- grpc.max_receive_message_length -------------------------------------------------------------

MAX_RECEIVE = 1000


@pytest.mark.parametrize("style", ["read", "iterate"])
@pytest.mark.parametrize("client", CLIENTS)
def test_max_receive_message_length_holds_for_every_reading_style(
    client: str, style: str, grpcio_aio_server: GrpcioAioServer
) -> None:
    async def body(channel: Any) -> None:
        request = output_request(MAX_RECEIVE // 2, MAX_RECEIVE * 2)
        call = streaming_output(channel)(request, timeout=10)
        received = []
        with pytest.raises(client_api(client).AioRpcError) as info:
            if style == "read":
                while True:
                    received.append(await call.read())
            else:
                async for response in call:
                    received.append(response)
        assert _sizes(received) == [MAX_RECEIVE // 2]
        assert info.value.code() is status_codes(client).RESOURCE_EXHAUSTED
        assert str(MAX_RECEIVE) in info.value.details()
        assert await call.code() is status_codes(client).RESOURCE_EXHAUSTED

    options = (("grpc.max_receive_message_length", MAX_RECEIVE),)
    run_on_channel(client, grpcio_aio_server.target, body, options=options)
