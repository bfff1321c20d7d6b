"""The interop TestService's methods as minigrpc.aio multi-callables, and request builders.

Shared by the asyncio client's tests: each test body is a coroutine run with plain
``asyncio.run`` on a channel to one server (:func:`run`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from minigrpc import aio
from tests.interop import empty_pb2, messages_pb2

SERVICE = "/grpc.testing.TestService/"
LARGE_REQUEST = 271_828
LARGE_RESPONSE = 314_159


def run(target: str, body: Callable[[aio.Channel], Awaitable[None]]) -> None:
    async def main() -> None:
        async with aio.insecure_channel(target) as channel:
            await body(channel)

    asyncio.run(main())


def empty_call(channel: aio.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "EmptyCall",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )


def unary_call(channel: aio.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "UnaryCall",
        request_serializer=messages_pb2.SimpleRequest.SerializeToString,
        response_deserializer=messages_pb2.SimpleResponse.FromString,
    )


def streaming_output(channel: aio.Channel) -> Any:
    return channel.unary_stream(
        SERVICE + "StreamingOutputCall",
        request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
    )


def streaming_input(channel: aio.Channel) -> Any:
    return channel.stream_unary(
        SERVICE + "StreamingInputCall",
        request_serializer=messages_pb2.StreamingInputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingInputCallResponse.FromString,
    )


def full_duplex(channel: aio.Channel) -> Any:
    return channel.stream_stream(
        SERVICE + "FullDuplexCall",
        request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
        response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
    )


def output_request(*sizes: int, interval_us: int = 0) -> Any:
    return messages_pb2.StreamingOutputCallRequest(
        response_parameters=[
            messages_pb2.ResponseParameters(size=size, interval_us=interval_us) for size in sizes
        ]
    )


def input_request(size: int) -> Any:
    return messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=bytes(size)))


def request_with_status(code: int = 2, message: str = "test status message") -> Any:
    request = output_request()
    request.response_status.code = code
    request.response_status.message = message
    return request
