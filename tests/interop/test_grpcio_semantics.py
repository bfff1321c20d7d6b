"""grpcio's semantics where grpcio's own unit tests found minigrpc different, case by case.

Each case runs the same code twice, once with ``api`` = minigrpc and once with grpcio, against
real peers (a grpcio or a minigrpc server on loopback), and asserts the same outcome, so grpcio
is the reference in the same run:

* grpcio's documented-abstract classes are abstract classes that code subclasses and checks
  ``isinstance`` against (a handler built by subclassing ``RpcMethodHandler``, a
  ``GenericRpcHandler`` subclass), and what the library returns passes those checks;
* a ``stream_unary(...).future()`` progresses with nobody waiting: its callbacks fire on OK, on
  DEADLINE_EXCEEDED and when the server fails the call, and ``done()`` turns True;
* an exception in a client interceptor comes out as a failed future, not from ``future()``;
* a failed call's ``cancelled()``, ``traceback()`` and ``debug_error_string()``;
* ``abort`` with a value that is not a status code, and ``ServicerContext.details()``;
* channel and server options: ``grpc.secondary_user_agent``, ``grpc.so_reuseport``;
* grpcio's experimental server handlers: a method's own thread pool and non-blocking streaming
  handlers that answer through ``on_next`` from any thread;
* a watched channel notices its server going away while no call runs.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import sys
import threading
from concurrent import futures
from typing import Any, Callable, Iterator, List, Optional

import pytest

import minigrpc

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

SERVICE = "semantics.Echo"


@pytest.fixture(params=["minigrpc", "grpcio"])
def api(request: pytest.FixtureRequest) -> Any:
    return minigrpc if request.param == "minigrpc" else grpc


@contextlib.contextmanager
def serving(api: Any, handler: Any) -> Iterator[str]:
    """A server of ``api`` with one generic handler on loopback; yields its target."""
    server = api.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None).wait(10)


def echo_service(api: Any, **extra: Any) -> Any:
    """``Echo`` (unary), ``Count`` (client stream: the number of requests) and ``extra``."""

    def echo(request: bytes, context: Any) -> bytes:
        return request

    def count(requests: Iterator[bytes], context: Any) -> bytes:
        return str(sum(1 for _ in requests)).encode()

    handlers = {
        "Echo": api.unary_unary_rpc_method_handler(echo),
        "Count": api.stream_unary_rpc_method_handler(count),
        **extra,
    }
    return api.method_handlers_generic_handler(SERVICE, handlers)


# -- abstract classes that code subclasses ------------------------------------------------------


def subclassed_handler(api: Any) -> Any:
    """A generic handler and method handler written the way grpcio's tests write them: by
    subclassing and setting the eight attributes in ``__init__``."""

    class MethodHandler(api.RpcMethodHandler):
        def __init__(self) -> None:
            self.request_streaming = False
            self.response_streaming = False
            self.request_deserializer = None
            self.response_serializer = None
            self.unary_unary = lambda request, context: b"handled:" + request
            self.unary_stream = None
            self.stream_unary = None
            self.stream_stream = None

    class GenericHandler(api.GenericRpcHandler):
        def service(self, handler_call_details: Any) -> Any:
            assert isinstance(handler_call_details, api.HandlerCallDetails)
            if handler_call_details.method == f"/{SERVICE}/Echo":
                return MethodHandler()
            return None

    return GenericHandler()


@pytest.mark.parametrize("server_api", ["minigrpc", "grpcio"])
def test_a_subclassed_rpc_method_handler_serves_calls(api: Any, server_api: str) -> None:
    served = minigrpc if server_api == "minigrpc" else grpc
    with serving(served, subclassed_handler(served)) as target:
        with api.insecure_channel(target) as channel:
            assert channel.unary_unary(f"/{SERVICE}/Echo")(b"x", timeout=10) == b"handled:x"


def test_the_abstract_classes_cannot_be_instantiated_without_their_methods(api: Any) -> None:
    for abstract in (
        api.Future, api.Call, api.RpcContext, api.GenericRpcHandler, api.ServiceRpcHandler,
        api.ServicerContext, api.Channel, api.Server, api.ServerInterceptor,
        api.UnaryUnaryClientInterceptor, api.UnaryUnaryMultiCallable,
    ):
        with pytest.raises(TypeError):
            abstract()


def test_what_the_library_builds_passes_isinstance(api: Any) -> None:
    handler = api.unary_unary_rpc_method_handler(lambda request, context: request)
    assert isinstance(handler, api.RpcMethodHandler)
    generic = api.method_handlers_generic_handler(SERVICE, {"Echo": handler})
    assert isinstance(generic, api.ServiceRpcHandler)
    assert isinstance(generic, api.GenericRpcHandler)
    assert generic.service_name() == SERVICE
    server = api.server(futures.ThreadPoolExecutor(max_workers=1))
    channel = api.insecure_channel("127.0.0.1:1")
    try:
        assert isinstance(server, api.Server) and isinstance(channel, api.Channel)
        assert isinstance(channel.unary_unary("/a.B/C"), api.UnaryUnaryMultiCallable)
        assert isinstance(channel.unary_stream("/a.B/C"), api.UnaryStreamMultiCallable)
        assert isinstance(channel.stream_unary("/a.B/C"), api.StreamUnaryMultiCallable)
        assert isinstance(channel.stream_stream("/a.B/C"), api.StreamStreamMultiCallable)
    finally:
        channel.close()
        server.stop(None)


def test_the_handler_context_is_a_servicer_context(api: Any) -> None:
    seen: List[Any] = []

    def look(request: bytes, context: Any) -> bytes:
        seen.append(context)
        return request

    with serving(api, echo_service(api, Look=api.unary_unary_rpc_method_handler(look))) as target:
        with api.insecure_channel(target) as channel:
            channel.unary_unary(f"/{SERVICE}/Look")(b"", timeout=10)
    assert isinstance(seen[0], api.ServicerContext) and isinstance(seen[0], api.RpcContext)


# -- returned objects pass grpcio's type checks -------------------------------------------------


def test_every_call_object_is_a_call_and_a_future(api: Any) -> None:
    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as channel:
        echo = channel.unary_unary(f"/{SERVICE}/Echo")
        _, call = echo.with_call(b"x", timeout=10)
        future = echo.future(b"x", timeout=10)
        count_future = channel.stream_unary(f"/{SERVICE}/Count").future(iter([b"a"]), timeout=10)
        stream = channel.unary_stream(f"/{SERVICE}/Missing")(b"x", timeout=10)
        with pytest.raises(api.RpcError) as failed:
            channel.unary_unary(f"/{SERVICE}/Missing")(b"x", timeout=10)
        for thing in (call, future, count_future, stream, failed.value):
            assert isinstance(thing, api.Call), thing
            assert isinstance(thing, api.Future), thing
        assert isinstance(stream, api.RpcError)
        assert count_future.result(timeout=10) == b"1"
        assert future.result(timeout=10) == b"x"
        assert call.result() == b"x"  # a finished call is a done future with the response
        with pytest.raises(api.RpcError):
            next(stream)


# -- a stream-unary future progresses on its own ------------------------------------------------


def test_a_stream_unary_future_fires_its_callback_on_ok_without_a_waiter(api: Any) -> None:
    release = threading.Event()
    fired = threading.Event()

    def requests() -> Iterator[bytes]:
        yield b"a"
        release.wait(10)
        yield b"b"

    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as channel:
        future = channel.stream_unary(f"/{SERVICE}/Count").future(requests(), timeout=10)
        future.add_done_callback(lambda f: fired.set())
        assert not future.done()
        release.set()
        assert fired.wait(10), "the callback never fired"
        assert future.done() and future.code() is api.StatusCode.OK
        assert future.result() == b"2"


def test_a_stream_unary_future_ends_at_its_deadline_without_a_waiter(api: Any) -> None:
    """The requests never end; the deadline does: callbacks fire and ``done()`` is True."""
    stop = threading.Event()
    fired = threading.Event()

    def requests() -> Iterator[bytes]:
        yield b"a"
        stop.wait(30)

    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as channel:
        future = channel.stream_unary(f"/{SERVICE}/Count").future(requests(), timeout=0.5)
        future.add_done_callback(lambda f: fired.set())
        assert fired.wait(10), "the callback never fired"
        stop.set()
        assert future.done()
        assert future.code() is api.StatusCode.DEADLINE_EXCEEDED
        assert isinstance(future.exception(), api.RpcError)
        assert future.traceback() is not None


def test_a_stream_unary_future_ends_when_the_server_fails_it_without_a_waiter(api: Any) -> None:
    """The requests never end; the server fails the call after the first: callbacks fire and
    ``done()`` is True with the server's status, while the request iterator still blocks."""
    stop = threading.Event()
    fired = threading.Event()

    def refuse(requests: Iterator[bytes], context: Any) -> bytes:
        next(requests)
        context.abort(api.StatusCode.FAILED_PRECONDITION, "one is enough")

    def requests() -> Iterator[bytes]:
        yield b"a"
        stop.wait(30)

    service = echo_service(api, Refuse=api.stream_unary_rpc_method_handler(refuse))
    with serving(api, service) as target, api.insecure_channel(target) as channel:
        future = channel.stream_unary(f"/{SERVICE}/Refuse").future(requests(), timeout=30)
        future.add_done_callback(lambda f: fired.set())
        try:
            assert fired.wait(10), "the callback never fired"
            assert future.done() and future.code() is api.StatusCode.FAILED_PRECONDITION
            assert future.details() == "one is enough"
            assert isinstance(future.exception(), api.RpcError)
        finally:
            stop.set()


# -- failed calls -------------------------------------------------------------------------------


def test_a_failed_call_is_a_done_future_with_a_traceback(api: Any) -> None:
    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as channel:
        missing = channel.unary_unary(f"/{SERVICE}/Missing")
        with pytest.raises(api.RpcError) as failed:
            missing(b"x", timeout=10)
        error = failed.value
        assert error.code() is api.StatusCode.UNIMPLEMENTED
        assert not error.cancelled() and error.done() and not error.running()
        assert error.exception() is error
        assert error.traceback() is not None
        assert isinstance(error.debug_error_string(), str)
        future = missing.future(b"x", timeout=10)
        assert isinstance(future.exception(timeout=10), api.RpcError)
        assert future.traceback(timeout=10) is not None
        _, call = channel.unary_unary(f"/{SERVICE}/Echo").with_call(b"x", timeout=10)
        assert call.debug_error_string() == ""  # nothing to say about a call that went well


# -- client interceptors: an exception is a failed future ---------------------------------------


def raising_interceptor(api: Any) -> Any:
    class Raising(
        api.UnaryUnaryClientInterceptor,
        api.StreamUnaryClientInterceptor,
        api.UnaryStreamClientInterceptor,
    ):
        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            raise ValueError("unary interceptor")

        def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
            raise ValueError("stream interceptor")

        def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
            raise ValueError("response-stream interceptor")

    return Raising()


def test_an_interceptor_exception_comes_out_as_a_failed_future(api: Any) -> None:
    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as plain:
        channel = api.intercept_channel(plain, raising_interceptor(api))
        for future in (
            channel.unary_unary(f"/{SERVICE}/Echo").future(b"x", timeout=10),
            channel.stream_unary(f"/{SERVICE}/Count").future(iter([b"a"]), timeout=10),
        ):
            assert isinstance(future, api.Future) and isinstance(future, api.Call)
            assert future.done() and future.code() is api.StatusCode.INTERNAL
            assert isinstance(future.exception(), ValueError)
            with pytest.raises(ValueError):
                future.result()
        responses = channel.unary_stream(f"/{SERVICE}/Echo")(b"x", timeout=10)
        with pytest.raises(ValueError):
            next(iter(responses))
        with pytest.raises(ValueError):
            channel.unary_unary(f"/{SERVICE}/Echo").with_call(b"x", timeout=10)


def test_a_continuation_returns_a_call_and_a_future(api: Any) -> None:
    seen: List[Any] = []

    class Looking(api.UnaryUnaryClientInterceptor, api.StreamUnaryClientInterceptor):
        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            seen.append(continuation(details, request))
            return seen[-1]

        def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
            seen.append(continuation(details, requests))
            return seen[-1]

    with serving(api, echo_service(api)) as target, api.insecure_channel(target) as plain:
        channel = api.intercept_channel(plain, Looking())
        assert channel.unary_unary(f"/{SERVICE}/Echo")(b"x", timeout=10) == b"x"
        assert channel.stream_unary(f"/{SERVICE}/Count")(iter([b"a"]), timeout=10) == b"1"
        with pytest.raises(api.RpcError):
            channel.unary_unary(f"/{SERVICE}/Missing")(b"x", timeout=10)
        assert channel.unary_unary(f"/{SERVICE}/Echo").future(b"y", timeout=10).result() == b"y"
    for outcome in seen:
        assert isinstance(outcome, api.Call) and isinstance(outcome, api.Future), outcome


# -- the server's side: abort codes and details -------------------------------------------------


def context_service(api: Any, behaviour: Callable[[Any], Optional[bytes]]) -> Any:
    def handle(request: bytes, context: Any) -> Optional[bytes]:
        return behaviour(context)

    return api.method_handlers_generic_handler(
        SERVICE, {"Do": api.unary_unary_rpc_method_handler(handle)}
    )


@pytest.mark.parametrize(
    ("code", "expected"),
    [(42, "UNKNOWN"), (3, "UNKNOWN"), ("NOT_FOUND", "NOT_FOUND"), ("OK", "UNKNOWN")],
)
def test_abort_codes_as_grpcio(api: Any, code: Any, expected: str) -> None:
    """The wire status a handler's ``abort`` gives: a value that is not a status code is
    UNKNOWN with the details kept (OK too, but its details are dropped); both servers, one
    grpcio client."""
    abort_code = getattr(api.StatusCode, code) if isinstance(code, str) else code

    def behaviour(context: Any) -> Optional[bytes]:
        context.abort(abort_code, "Abandon ship!")
        return None

    with serving(api, context_service(api, behaviour)) as target:
        with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/Do")(b"", timeout=10)
    assert caught.value.code() is getattr(grpc.StatusCode, expected)
    assert caught.value.details() == ("" if code == "OK" else "Abandon ship!")


def test_abort_raises_a_bare_exception_as_grpcio(api: Any) -> None:
    """grpcio's ``abort`` raises ``Exception()`` itself; code that wraps handlers tells an
    abort from a handler's own error by that (OpenTelemetry's server interceptor records any
    other exception on the span), so the type is part of the contract."""
    raised: List[type] = []

    def behaviour(context: Any) -> Optional[bytes]:
        try:
            context.abort(api.StatusCode.NOT_FOUND, "gone")
        except BaseException as exc:
            raised.append(type(exc))
            raise
        return None

    with serving(api, context_service(api, behaviour)) as target:
        with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/Do")(b"", timeout=10)
    assert raised == [Exception]
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND


def test_servicer_context_details_and_code_read_back_as_grpcio(api: Any) -> None:
    read: List[Any] = []

    def behaviour(context: Any) -> Optional[bytes]:
        read.append((context.code(), context.details()))
        context.set_code(api.StatusCode.NOT_FOUND)
        context.set_details("gone ☺")
        read.append((context.code(), context.details()))
        return None

    with serving(api, context_service(api, behaviour)) as target:
        with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/Do")(b"", timeout=10)
    assert read == [(None, None), (api.StatusCode.NOT_FOUND, "gone ☺".encode())]
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert caught.value.details() == "gone ☺"


# -- channel and server options -------------------------------------------------------------------


def test_primary_and_secondary_user_agents_go_around_the_librarys_own(api: Any) -> None:
    agents: List[str] = []

    def behaviour(context: Any) -> Optional[bytes]:
        agents.extend(value for key, value in context.invocation_metadata() if key == "user-agent")
        return b""

    options = [("grpc.primary_user_agent", "first/1"), ("grpc.secondary_user_agent", "last/2")]
    with serving(grpc, context_service(grpc, behaviour)) as target:
        with api.insecure_channel(target, options=options) as channel:
            channel.unary_unary(f"/{SERVICE}/Do")(b"", timeout=10)
        with api.insecure_channel(target) as channel:
            channel.unary_unary(f"/{SERVICE}/Do")(b"", timeout=10)
    with_options, plain = agents
    assert with_options.startswith("first/1 ") and with_options.endswith(" last/2")
    assert with_options == f"first/1 {plain} last/2"
    assert plain.startswith("grpc-python")


@contextlib.contextmanager
def port_held_with_so_reuseport() -> Iterator[int]:
    """A TCP port on loopback bound (not listening) by a socket with SO_REUSEPORT, the way
    grpcio's tests reserve a port for a server to take over."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]
    finally:
        holder.close()


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT here")
def test_so_reuseport_lets_a_server_share_a_reserved_port(api: Any) -> None:
    server = api.server(
        futures.ThreadPoolExecutor(max_workers=2),
        handlers=[echo_service(api)],
        options=[("grpc.so_reuseport", 1)],
    )
    with port_held_with_so_reuseport() as port:
        assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert channel.unary_unary(f"/{SERVICE}/Echo")(b"x", timeout=10) == b"x"
    finally:
        server.stop(None).wait(10)


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT here")
def test_without_so_reuseport_a_port_in_use_does_not_bind() -> None:
    """minigrpc's default differs from grpc-core's (on by default on Linux): a second server
    on a port in use fails instead of silently sharing it."""
    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=1))
    with port_held_with_so_reuseport() as port, pytest.raises(RuntimeError, match="bind"):
        server.add_insecure_port(f"127.0.0.1:{port}")
    server.stop(None)


# -- grpcio's experimental server handlers --------------------------------------------------------


class RecordingPool(futures.ThreadPoolExecutor):
    """A method's own pool (``experimental_thread_pool``) that says whether it ran anything."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.used = threading.Event()

    def submit(self, *args: Any, **kwargs: Any) -> Any:  # (fn, /, *args, **kwargs)
        self.used.set()
        return super().submit(*args, **kwargs)


def non_blocking_service(api: Any, pool: RecordingPool, later: RecordingPool) -> Any:
    """``Countdown``: a non-blocking unary-stream handler that returns at once and answers
    from another thread; ``Twice``: a stream-stream one that answers each request twice and
    ends with a status set on the context."""

    def countdown(request: bytes, context: Any, on_next: Callable[[Any], None]) -> None:
        def answer() -> None:
            for n in range(int(request), 0, -1):
                on_next(str(n).encode())
            context.set_trailing_metadata((("counted", request.decode()),))
            on_next(None)
            on_next(b"after the end")  # dropped

        later.submit(answer)

    def twice(requests: Iterator[bytes], context: Any, on_next: Callable[[Any], None]) -> None:
        for request in requests:
            on_next(request)
            on_next(request)
        context.set_code(api.StatusCode.NOT_FOUND)
        context.set_details("no more")
        on_next(None)

    for behaviour in (countdown, twice):
        behaviour.experimental_non_blocking = True  # type: ignore[attr-defined]
        behaviour.experimental_thread_pool = pool  # type: ignore[attr-defined]
    return api.method_handlers_generic_handler(
        SERVICE,
        {
            "Countdown": api.unary_stream_rpc_method_handler(countdown),
            "Twice": api.stream_stream_rpc_method_handler(twice),
        },
    )


def test_non_blocking_streaming_handlers_answer_through_on_next(api: Any) -> None:
    """Both servers, one grpcio client: the same responses, status and trailing metadata."""
    pool, later = RecordingPool(), RecordingPool()
    try:
        with serving(api, non_blocking_service(api, pool, later)) as target:
            with grpc.insecure_channel(target) as channel:
                countdown = channel.unary_stream(f"/{SERVICE}/Countdown")(b"3", timeout=10)
                assert list(countdown) == [b"3", b"2", b"1"]
                assert countdown.code() is grpc.StatusCode.OK
                assert ("counted", "3") in countdown.trailing_metadata()
                twice = channel.stream_stream(f"/{SERVICE}/Twice")(iter([b"a", b"b"]), timeout=10)
                with pytest.raises(grpc.RpcError) as ended:
                    for _ in range(5):
                        next(twice)
                assert [ended.value.code(), ended.value.details()] == [
                    grpc.StatusCode.NOT_FOUND,
                    "no more",
                ]
        assert pool.used.is_set(), "the method's experimental_thread_pool was not used"
    finally:
        pool.shutdown()
        later.shutdown()


# -- connectivity ------------------------------------------------------------------------------


def test_a_watched_idle_channel_leaves_ready_when_its_server_stops(api: Any) -> None:
    states: queue.Queue[Any] = queue.Queue()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[echo_service(grpc)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with api.insecure_channel(f"127.0.0.1:{port}") as channel:
        channel.subscribe(states.put, try_to_connect=True)
        while states.get(timeout=10) is not api.ChannelConnectivity.READY:
            pass
        server.stop(None).wait(10)
        assert states.get(timeout=10) is not api.ChannelConnectivity.READY


# -- .proto files loaded at run time --------------------------------------------------------------

DYNAMIC_PROTO = """
syntax = "proto3";
package semantics.dynamic;
message Note { string text = 1; }
service Notes { rpc Echo (Note) returns (Note); }
"""


def _protobuf_too_old_for_grpcio_tools() -> str:
    """Why grpcio-tools' generated code cannot import here, or "": tox's ``oldest`` env pins the
    oldest protobuf setup.cfg admits beside the newest grpcio-tools, whose code needs a newer
    runtime (grpcio's own grpc.protos() fails there just the same)."""
    try:
        from importlib import metadata

        from packaging.requirements import Requirement
    except ImportError:  # Python 3.7, or no packaging: nothing to go by
        return ""
    try:
        requires = metadata.requires("grpcio-tools") or []
        installed = metadata.version("protobuf")
    except metadata.PackageNotFoundError:
        return ""
    for line in requires:
        requirement = Requirement(line)
        if requirement.name == "protobuf" and installed not in requirement.specifier:
            return f"grpcio-tools needs {requirement}, this env has protobuf {installed}"
    return ""


_GRPCIO_TOOLS_UNUSABLE = _protobuf_too_old_for_grpcio_tools()


@pytest.mark.skipif(bool(_GRPCIO_TOOLS_UNUSABLE), reason=_GRPCIO_TOOLS_UNUSABLE or "n/a")
def test_protos_and_services_load_a_proto_file_at_run_time(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """minigrpc's functions give the modules grpcio's do (both run grpcio-tools' compiler),
    and a minigrpc channel calls a grpcio server through the generated stub."""
    directory = tmp_path / "semantics_dynamic_protos"
    directory.mkdir()
    (directory / "notes.proto").write_text(DYNAMIC_PROTO)
    monkeypatch.syspath_prepend(str(tmp_path))
    protos, services = minigrpc.protos_and_services("semantics_dynamic_protos/notes.proto")
    assert (protos, services) == grpc.protos_and_services("semantics_dynamic_protos/notes.proto")

    class Notes(services.NotesServicer):  # type: ignore[name-defined,misc]
        def Echo(self, request: Any, context: Any) -> Any:
            return protos.Note(text=request.text + "!")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    services.add_NotesServicer_to_server(Notes(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with minigrpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = services.NotesStub(channel).Echo(protos.Note(text="hi"), timeout=10)
        assert reply.text == "hi!"
    finally:
        server.stop(None)


def test_protos_without_grpcio_tools_is_not_implemented(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("grpc_tools", "grpc_tools.protoc"):
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="grpcio-tools"):
        api.protos_and_services("semantics_dynamic_protos/absent.proto")
