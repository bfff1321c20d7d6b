"""minigrpc's client against a real grpcio server: the unary interop cases (gRPC's
doc/interop-test-descriptions.md)
and the client's own behaviour, over a unix path socket, an abstract socket and TCP.

``grpcio_target`` (tests/conftest.py) is parametrized over the three address kinds, so every
test here runs three times against the interop TestService of tests/interop/servicer.py.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, List

import pytest

import minigrpc
from minigrpc import Compression, RpcError, StatusCode
from tests.interop import empty_pb2, messages_pb2
from tests.peers import ADDRESS_KINDS

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

SERVICE = "/grpc.testing.TestService/"
LARGE_REQUEST = 271_828
LARGE_RESPONSE = 314_159
SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"


@pytest.fixture
def channel(grpcio_target: str) -> Iterator[minigrpc.Channel]:
    with minigrpc.insecure_channel(grpcio_target) as chan:
        yield chan


def empty_call(channel: minigrpc.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "EmptyCall",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )


def unary_call(channel: minigrpc.Channel) -> Any:
    return channel.unary_unary(
        SERVICE + "UnaryCall",
        request_serializer=messages_pb2.SimpleRequest.SerializeToString,
        response_deserializer=messages_pb2.SimpleResponse.FromString,
    )


def large_request(**fields: Any) -> messages_pb2.SimpleRequest:
    return messages_pb2.SimpleRequest(
        response_size=LARGE_RESPONSE,
        payload=messages_pb2.Payload(body=bytes(LARGE_REQUEST)),
        **fields,
    )


# -- the interop cases -----------------------------------------------------------------------


def test_empty_unary(channel: minigrpc.Channel) -> None:
    response, call = empty_call(channel).with_call(empty_pb2.Empty(), timeout=10)
    assert isinstance(response, empty_pb2.Empty)
    assert call.code() is StatusCode.OK
    assert call.details() == ""


def test_large_unary(channel: minigrpc.Channel) -> None:
    response = unary_call(channel)(large_request(), timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE
    assert response.payload.body == bytes(LARGE_RESPONSE)


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_client_compressed_unary(channel: minigrpc.Channel, compression: Compression) -> None:
    call = unary_call(channel)
    # (1) "uncompressed with expect_compressed{true} -> INVALID_ARGUMENT" needs a server that can
    # see the request's compressed flag; grpcio's servicer API cannot (tests/interop/servicer.py),
    # so that half is covered against a scripted server in test_client_connection.py.
    expect = messages_pb2.BoolValue(value=True)
    response = call(large_request(expect_compressed=expect), timeout=10, compression=compression)
    assert len(response.payload.body) == LARGE_RESPONSE
    response = call(
        large_request(expect_compressed=messages_pb2.BoolValue(value=False)), timeout=10
    )
    assert len(response.payload.body) == LARGE_RESPONSE


def test_channel_level_compression(grpcio_target: str) -> None:
    with minigrpc.insecure_channel(grpcio_target, compression=Compression.Gzip) as chan:
        response = unary_call(chan)(large_request(), timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE


def test_server_compressed_unary(grpcio_target: str, wire_trace: List[str]) -> None:
    with minigrpc.insecure_channel(grpcio_target) as chan:
        call = unary_call(chan)
        on = call(large_request(response_compressed=messages_pb2.BoolValue(value=True)), timeout=10)
        off = call(
            large_request(response_compressed=messages_pb2.BoolValue(value=False)), timeout=10
        )
    assert len(on.payload.body) == LARGE_RESPONSE
    assert len(off.payload.body) == LARGE_RESPONSE
    trace = "\n".join(wire_trace)
    # The compressed flag where the client can see it: the first response was gzip, flag 1.
    assert "grpc-encoding: gzip" in trace
    assert "flag=1" in trace
    assert "flag=0" in trace


def test_status_code_and_message(channel: minigrpc.Channel) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message="test status message")
    )
    with pytest.raises(RpcError) as info:
        unary_call(channel)(request, timeout=10)
    assert info.value.code() is StatusCode.UNKNOWN
    assert info.value.details() == "test status message"
    assert str(info.value) == "rpc error: code = Unknown desc = test status message"


def test_special_status_message(channel: minigrpc.Channel) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=2, message=SPECIAL_MESSAGE)
    )
    with pytest.raises(RpcError) as info:
        unary_call(channel)(request, timeout=10)
    assert info.value.code() is StatusCode.UNKNOWN
    assert info.value.details() == SPECIAL_MESSAGE


def test_custom_metadata(channel: minigrpc.Channel) -> None:
    metadata = [
        ("x-grpc-test-echo-initial", "test_initial_metadata_value"),
        ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"),
    ]
    response, call = unary_call(channel).with_call(large_request(), metadata=metadata, timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE
    assert ("x-grpc-test-echo-initial", "test_initial_metadata_value") in call.initial_metadata()
    assert ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab") in call.trailing_metadata()


def test_custom_metadata_is_echoed_on_error_too(channel: minigrpc.Channel) -> None:
    metadata = [("x-grpc-test-echo-trailing-bin", b"\x0a\x0b\x0a\x0b\x0a\x0b")]
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=9, message="m")
    )
    with pytest.raises(RpcError) as info:
        unary_call(channel)(request, metadata=metadata, timeout=10)
    assert info.value.code() is StatusCode.FAILED_PRECONDITION
    assert (
        "x-grpc-test-echo-trailing-bin",
        b"\x0a\x0b\x0a\x0b\x0a\x0b",
    ) in info.value.trailing_metadata()


def test_unimplemented_method(channel: minigrpc.Channel) -> None:
    call = channel.unary_unary(SERVICE + "UnimplementedCall")
    with pytest.raises(RpcError) as info:
        call(b"", timeout=10)
    assert info.value.code() is StatusCode.UNIMPLEMENTED


def test_unimplemented_service(channel: minigrpc.Channel) -> None:
    call = channel.unary_unary("/grpc.testing.UnimplementedService/UnimplementedCall")
    with pytest.raises(RpcError) as info:
        call(b"", timeout=10)
    assert info.value.code() is StatusCode.UNIMPLEMENTED


# -- deadlines, limits, metadata rules -------------------------------------------------------


def test_deadline_on_a_sleeping_handler(grpcio_interop_server: Any) -> None:
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        with pytest.raises(RpcError) as info:
            empty_call(chan)(
                empty_pb2.Empty(), timeout=0.2, metadata=[("x-test-sleep-ms", "30000")]
            )
        assert info.value.code() is StatusCode.DEADLINE_EXCEEDED
        assert info.value.details() == "Deadline Exceeded"
        # The RST_STREAM(CANCEL) ended the handler's wait: no sleeper is left on the server.
        assert grpcio_interop_server.servicer.wait_for_no_sleepers(10)
        # The connection is still good for the next call.
        assert isinstance(empty_call(chan)(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)


def test_grpc_timeout_reaches_the_server(grpcio_interop_server: Any) -> None:
    servicer = grpcio_interop_server.servicer
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        empty_call(chan)(empty_pb2.Empty(), timeout=30, metadata=[("x-marker", "timeout")])
    recorded = [c for c in servicer.calls if ("x-marker", "timeout") in c.metadata]
    assert recorded
    assert recorded[-1].time_remaining is not None
    assert 0 < recorded[-1].time_remaining <= 30


def test_user_agent_and_primary_user_agent(grpcio_interop_server: Any) -> None:
    servicer = grpcio_interop_server.servicer
    options = [("grpc.primary_user_agent", "cni-test/1.0")]
    with minigrpc.insecure_channel(grpcio_interop_server.target, options=options) as chan:
        empty_call(chan)(empty_pb2.Empty(), timeout=10, metadata=[("x-marker", "ua")])
    recorded = [c for c in servicer.calls if ("x-marker", "ua") in c.metadata][-1]
    agent = dict(recorded.metadata)["user-agent"]
    assert agent.startswith(f"cni-test/1.0 grpc-python-minigrpc/{minigrpc.__version__}")


def test_receive_limit_gives_resource_exhausted(channel: minigrpc.Channel) -> None:
    call = unary_call(channel)
    with pytest.raises(RpcError) as info:
        call(messages_pb2.SimpleRequest(response_size=5 * 1024 * 1024), timeout=10)
    assert info.value.code() is StatusCode.RESOURCE_EXHAUSTED
    assert "received message larger than max" in info.value.details()
    # The discarded data was acknowledged: the connection carries on.
    assert len(call(large_request(), timeout=10).payload.body) == LARGE_RESPONSE


def test_send_limit_gives_resource_exhausted_before_sending(grpcio_interop_server: Any) -> None:
    servicer = grpcio_interop_server.servicer
    before = len(servicer.calls)
    options = [("grpc.max_send_message_length", 1000)]
    with minigrpc.insecure_channel(grpcio_interop_server.target, options=options) as chan:
        with pytest.raises(RpcError) as info:
            unary_call(chan)(large_request(), timeout=10)
    assert info.value.code() is StatusCode.RESOURCE_EXHAUSTED
    assert info.value.details().startswith("grpc: trying to send message larger than max (")
    assert len(servicer.calls) == before


@pytest.mark.parametrize(
    "metadata",
    [
        [("Upper", "v")],
        [("x-bad", "line\nbreak")],
        [("x-bad", "é")],
        [("grpc-custom", "v")],
        [(":path", "/x")],
        # grpcio raises TypeError for a key or value of the wrong type, ValueError for an item
        # that is not a pair; minigrpc's error for those is both.
        ([("x-int", 5)], TypeError),
        ([(5, "v")], TypeError),
        ([("x-bin", 5)], TypeError),
        ({"x": "v"}, ValueError),
    ],
)
def test_invalid_metadata_fails_before_anything_is_sent(
    grpcio_interop_server: Any, metadata: Any
) -> None:
    metadata, raised = metadata if isinstance(metadata, tuple) else (metadata, RpcError)
    servicer = grpcio_interop_server.servicer
    before = len(servicer.calls)
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        with pytest.raises(raised) as info:
            empty_call(chan)(empty_pb2.Empty(), timeout=10, metadata=metadata)
        if raised is RpcError:
            # grpcio: StatusCode.INTERNAL, "Invalid metadata" (checked against grpcio 1.85).
            assert info.value.code() is StatusCode.INTERNAL
            assert info.value.details().startswith("Invalid metadata")
        assert len(servicer.calls) == before


def test_binary_and_ascii_metadata_reach_the_server(grpcio_interop_server: Any) -> None:
    servicer = grpcio_interop_server.servicer
    metadata = [("x-marker", "md"), ("x-two", "a"), ("x-two", "b"), ("x-raw-bin", b"\x00\x01\xff")]
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        empty_call(chan)(empty_pb2.Empty(), timeout=10, metadata=metadata)
    recorded = [c for c in servicer.calls if ("x-marker", "md") in c.metadata][-1]
    assert [v for k, v in recorded.metadata if k == "x-two"] == ["a", "b"]
    assert ("x-raw-bin", b"\x00\x01\xff") in recorded.metadata


# -- big messages and concurrency ------------------------------------------------------------


@pytest.mark.parametrize("kind", ADDRESS_KINDS)
def test_16_mib_messages_with_raised_limits(grpcio_server_factory: Any, kind: str) -> None:
    size = 16 * 1024 * 1024
    limits = [
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.max_send_message_length", 64 << 20),
    ]
    server = grpcio_server_factory(kind, options=limits)
    with minigrpc.insecure_channel(server.target, options=limits) as chan:
        request = messages_pb2.SimpleRequest(
            response_size=size, payload=messages_pb2.Payload(body=bytes(size))
        )
        response = unary_call(chan)(request, timeout=60)
    assert len(response.payload.body) == size


def test_unlimited_receive_option(grpcio_target: str) -> None:
    options = [("grpc.max_receive_message_length", -1)]
    with minigrpc.insecure_channel(grpcio_target, options=options) as chan:
        response = unary_call(chan)(messages_pb2.SimpleRequest(response_size=5 << 20), timeout=30)
    assert len(response.payload.body) == 5 << 20


def test_eight_threads_fifty_calls_each_on_one_channel(channel: minigrpc.Channel) -> None:
    call = unary_call(channel)
    errors: List[BaseException] = []
    sizes: List[int] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        try:
            for n in range(50):
                size = (index * 50 + n) % 2000
                response = call(messages_pb2.SimpleRequest(response_size=size), timeout=30)
                with lock:
                    sizes.append(len(response.payload.body) - size)
        except BaseException as exc:  # reported below
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(50)
    assert not errors
    assert len(sizes) == 400
    assert set(sizes) == {0}


def test_concurrent_large_calls_in_both_directions(channel: minigrpc.Channel) -> None:
    # Requests and responses larger than the peer's initial windows, in flight together:
    # flow control must neither deadlock nor leak window.
    call = unary_call(channel)
    results: List[int] = []
    errors: List[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(3):
                request = messages_pb2.SimpleRequest(
                    response_size=1_500_000, payload=messages_pb2.Payload(body=bytes(1_200_000))
                )
                results.append(len(call(request, timeout=60).payload.body))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert results == [1_500_000] * 12


# -- future() ----------------------------------------------------------------------------------


def test_future_result_and_call_methods(channel: minigrpc.Channel) -> None:
    done = threading.Event()
    future = unary_call(channel).future(large_request(), timeout=10)
    future.add_done_callback(lambda f: done.set())
    response = future.result(timeout=10)
    assert len(response.payload.body) == LARGE_RESPONSE
    assert done.wait(10)
    assert future.done() and not future.running() and not future.cancelled()
    assert future.code() is StatusCode.OK
    assert future.exception() is None


def test_future_error_is_delivered(channel: minigrpc.Channel) -> None:
    request = messages_pb2.SimpleRequest(
        response_status=messages_pb2.EchoStatus(code=7, message="no")
    )
    future = unary_call(channel).future(request, timeout=10)
    error = future.exception(timeout=10)
    assert isinstance(error, RpcError)
    assert error.code() is StatusCode.PERMISSION_DENIED
    assert future.code() is StatusCode.PERMISSION_DENIED
    with pytest.raises(RpcError):
        future.result()


def test_future_cancel_resets_the_stream(grpcio_interop_server: Any) -> None:
    from minigrpc.blocking.channel import FutureCancelledError

    servicer = grpcio_interop_server.servicer
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        call = empty_call(chan)
        future = call.future(empty_pb2.Empty(), timeout=30, metadata=[("x-test-sleep-ms", "30000")])
        with pytest.raises(Exception) as waited:
            future.result(timeout=0.2)
        assert type(waited.value).__name__ == "FutureTimeoutError"
        assert future.cancel()
        assert future.cancelled()
        assert future.code() is StatusCode.CANCELLED
        with pytest.raises(FutureCancelledError):
            future.result()
        # RST_STREAM(CANCEL) reached grpcio: the handler's wait ended.
        assert servicer.wait_for_no_sleepers(10)
        assert not future.cancel()
        # The channel still works, including while the cancelled worker held the reader role.
        assert isinstance(call(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)


def test_mixed_concurrent_load_on_one_channel(grpcio_interop_server: Any) -> None:
    """Small, large, failing, expiring and cancelled calls from 8 threads on one connection.

    A short deadline may expire while its thread is writing other threads' frames; the
    connection must survive that (the unsent bytes go to the next writer).
    """
    import random

    errors: List[BaseException] = []
    with minigrpc.insecure_channel(grpcio_interop_server.target) as chan:
        call = unary_call(chan)

        def worker(seed: int) -> None:
            rnd = random.Random(seed)
            try:
                for _ in range(25):
                    kind = rnd.choice(["small", "big", "expire", "cancel", "error"])
                    if kind == "small":
                        call(messages_pb2.SimpleRequest(response_size=10), timeout=30)
                    elif kind == "big":
                        request = messages_pb2.SimpleRequest(
                            response_size=300_000,
                            payload=messages_pb2.Payload(body=bytes(200_000)),
                        )
                        assert len(call(request, timeout=30).payload.body) == 300_000
                    elif kind == "expire":
                        with pytest.raises(RpcError) as info:
                            call(
                                messages_pb2.SimpleRequest(),
                                timeout=0.05,
                                metadata=[("x-test-sleep-ms", "5000")],
                            )
                        assert info.value.code() is StatusCode.DEADLINE_EXCEEDED
                    elif kind == "cancel":
                        future = call.future(
                            messages_pb2.SimpleRequest(),
                            timeout=30,
                            metadata=[("x-test-sleep-ms", "5000")],
                        )
                        future.cancel()
                        assert future.code() is StatusCode.CANCELLED
                    else:
                        status = messages_pb2.EchoStatus(code=3, message="x")
                        with pytest.raises(RpcError) as info:
                            call(messages_pb2.SimpleRequest(response_status=status), timeout=30)
                        assert info.value.code() is StatusCode.INVALID_ARGUMENT
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors[:3]
        # Still one healthy connection afterwards.
        assert isinstance(empty_call(chan)(empty_pb2.Empty(), timeout=10), empty_pb2.Empty)
