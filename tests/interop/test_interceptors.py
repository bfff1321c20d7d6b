"""Client and server interceptors with grpcio's classes, on real calls.

Each client case runs on minigrpc's channel against a grpcio server and on grpcio's channel
(the reference for the semantics) against the same server, and must behave the same: order,
``client_call_details`` changes (method, metadata, timeout), seeing the outcome, and
short-circuiting.  Server interceptors run on minigrpc's server and are checked with grpcio's
client.
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any, Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc.descriptors import stub
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import ECHO_INITIAL_KEY
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]


def make_interceptor(api: Any, name: str, log: List[str], **behaviour: Any) -> Any:
    """An interceptor of every client shape that logs, may add metadata, rename the method,
    or answer by itself (``short_circuit``: the value a unary call returns)."""

    class Interceptor(
        api.UnaryUnaryClientInterceptor,
        api.UnaryStreamClientInterceptor,
        api.StreamUnaryClientInterceptor,
        api.StreamStreamClientInterceptor,
    ):
        def _details(self, details: Any) -> Any:
            log.append(f"{name}:{details.method.rsplit('/', 1)[1]}")
            metadata = list(details.metadata or ())
            metadata += behaviour.get("metadata", [])
            method = behaviour.get("method", details.method)
            return _Details(
                method, details.timeout, metadata, details.credentials,
                details.wait_for_ready, details.compression,
            )

        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            if "short_circuit" in behaviour:
                log.append(f"{name}:short")
                return _Answer(behaviour["short_circuit"])
            outcome = continuation(self._details(details), request)
            log.append(f"{name}:{outcome.code().name}")
            return outcome

        def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
            return continuation(self._details(details), request)

        def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
            return continuation(self._details(details), requests)

        def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
            return continuation(self._details(details), requests)

    class _Details(api.ClientCallDetails):
        def __init__(self, *fields: Any) -> None:
            (self.method, self.timeout, self.metadata, self.credentials,
             self.wait_for_ready, self.compression) = fields

    return Interceptor()


class _Answer:
    """What a short-circuiting interceptor returns: a finished, successful call."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def result(self, timeout: Any = None) -> Any:
        return self._response

    def code(self) -> Any:
        return None


@pytest.fixture(params=["minigrpc", "grpcio"])
def api(request: pytest.FixtureRequest) -> Any:
    return minigrpc if request.param == "minigrpc" else grpc


@pytest.fixture
def target(grpcio_interop_servers: Any) -> str:
    server = grpcio_interop_servers.get("unix-abstract")
    if not server.running:
        server.start()
    return server.target  # type: ignore[no-any-return]


def test_order_metadata_and_outcome(api: Any, target: str) -> None:
    log: List[str] = []
    first = make_interceptor(api, "a", log, metadata=[(ECHO_INITIAL_KEY, "from-a")])
    second = make_interceptor(api, "b", log)
    with api.insecure_channel(target) as plain:
        channel = api.intercept_channel(plain, first, second)
        service = stub(test_pb2.TEST_SERVICE, channel)
        response, call = service.EmptyCall.with_call(empty_pb2.Empty(), timeout=10)
    assert response == empty_pb2.Empty()
    assert (ECHO_INITIAL_KEY, "from-a") in call.initial_metadata()
    assert log == ["a:EmptyCall", "b:EmptyCall", "b:OK", "a:OK"]


def test_an_error_reaches_the_interceptor_then_the_caller(api: Any, target: str) -> None:
    log: List[str] = []
    channel = api.intercept_channel(api.insecure_channel(target), make_interceptor(api, "a", log))
    try:
        with pytest.raises(api.RpcError) as caught:
            stub(test_pb2.TEST_SERVICE, channel).UnimplementedCall(empty_pb2.Empty(), timeout=10)
    finally:
        channel.close()
    assert caught.value.code() is api.StatusCode.UNIMPLEMENTED
    assert log == ["a:UnimplementedCall", "a:UNIMPLEMENTED"]


def test_the_interceptor_may_change_the_method(api: Any, target: str) -> None:
    log: List[str] = []
    renamed = make_interceptor(
        api, "a", log, method="/grpc.testing.TestService/UnimplementedCall"
    )
    with api.insecure_channel(target) as plain:
        service = stub(test_pb2.TEST_SERVICE, api.intercept_channel(plain, renamed))
        with pytest.raises(api.RpcError) as caught:
            service.EmptyCall(empty_pb2.Empty(), timeout=10)
    assert caught.value.code() is api.StatusCode.UNIMPLEMENTED


def test_short_circuit_never_calls_the_server(api: Any) -> None:
    log: List[str] = []
    canned = empty_pb2.Empty()
    interceptor = make_interceptor(api, "a", log, short_circuit=canned)
    # Nothing listens here: a call that reached the network would fail UNAVAILABLE.
    with api.insecure_channel(listen_address("unix-abstract", None)) as plain:
        service = stub(test_pb2.TEST_SERVICE, api.intercept_channel(plain, interceptor))
        assert service.EmptyCall(empty_pb2.Empty(), timeout=10) is canned
    assert log == ["a:short"]


def test_streaming_shapes_pass_through_interceptors(api: Any, target: str) -> None:
    log: List[str] = []
    with api.insecure_channel(target) as plain:
        service = stub(
            test_pb2.TEST_SERVICE, api.intercept_channel(plain, make_interceptor(api, "a", log))
        )
        request = messages_pb2.StreamingOutputCallRequest(
            response_parameters=[messages_pb2.ResponseParameters(size=2)] * 2
        )
        assert len(list(service.StreamingOutputCall(request, timeout=10))) == 2
        total = service.StreamingInputCall(
            iter([messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=b"x"))]),
            timeout=10,
        )
        assert total.aggregated_payload_size == 1
        assert len(list(service.FullDuplexCall(iter([request]), timeout=10))) == 2
    assert log == ["a:StreamingOutputCall", "a:StreamingInputCall", "a:FullDuplexCall"]


def test_intercept_channel_refuses_what_is_not_an_interceptor() -> None:
    with minigrpc.insecure_channel("unix-abstract:x") as channel:
        with pytest.raises(TypeError, match="must derive from"):
            minigrpc.intercept_channel(channel, object())


# -- server interceptors -----------------------------------------------------------------------


class RecordingServerInterceptor(minigrpc.ServerInterceptor):
    def __init__(self, name: str, log: List[str], deny: str = "") -> None:
        self.name = name
        self.log = log
        self.deny = deny

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        method = handler_call_details.method.rsplit("/", 1)[1]
        self.log.append(f"{self.name}:{method}")
        if method == self.deny:
            return None  # short-circuit: the call is UNIMPLEMENTED
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.response_streaming:
            return handler
        inner = handler.unary_unary

        def wrapped(request: Any, context: Any) -> Any:
            self.log.append(f"{self.name}:run")
            return inner(request, context)

        return minigrpc.unary_unary_rpc_method_handler(
            wrapped, handler.request_deserializer, handler.response_serializer
        )


@pytest.fixture
def intercepted_server() -> Iterator[Tuple[str, List[str]]]:
    from tests.interop.servicer import TestServiceServicer

    log: List[str] = []
    server = minigrpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        interceptors=[
            RecordingServerInterceptor("outer", log),
            RecordingServerInterceptor("inner", log, deny="UnaryCall"),
        ],
    )
    minigrpc.add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer())
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    yield address, log
    server.stop(None).wait(30)


def test_server_interceptors_wrap_the_lookup_in_order(
    intercepted_server: Tuple[str, List[str]],
) -> None:
    address, log = intercepted_server
    with grpc.insecure_channel(address) as channel:
        service = stub(test_pb2.TEST_SERVICE, channel)
        assert service.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
        # outer wraps the handler inner returned, so its wrapper runs first.
        assert log == ["outer:EmptyCall", "inner:EmptyCall", "outer:run", "inner:run"]
        del log[:]
        with pytest.raises(grpc.RpcError) as caught:
            service.UnaryCall(messages_pb2.SimpleRequest(), timeout=10)
        assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert log == ["outer:UnaryCall", "inner:UnaryCall"]
        responses = service.StreamingOutputCall(
            messages_pb2.StreamingOutputCallRequest(
                response_parameters=[messages_pb2.ResponseParameters(size=1)]
            ),
            timeout=10,
        )
        assert len(list(responses)) == 1


def test_server_interceptor_sees_invocation_metadata() -> None:
    seen: List[Any] = []
    done = threading.Event()

    class Peek(minigrpc.ServerInterceptor):
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            seen.append(dict(details.invocation_metadata).get("x-peek"))
            done.set()
            return continuation(details)

    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=[Peek()])
    other = listen_address("unix-abstract", None)
    server.add_insecure_port(other)
    server.start()
    try:
        with grpc.insecure_channel(other) as channel:
            with pytest.raises(grpc.RpcError):
                channel.unary_unary("/x/y")(b"", metadata=(("x-peek", "yes"),), timeout=10)
        assert done.wait(10) and seen == ["yes"]
    finally:
        server.stop(None).wait(30)
