"""``minigrpc.unary_handlers_on_io_thread``: unary-unary handlers run on the server's I/O thread.

The option exists for speed (minigrpc/driver/server_options.py), so what these tests pin down is
that it changes where handlers run and nothing a client can see: which thread runs each of the four
handler shapes, the order of what a handler sends, the outcome of a handler that raises, and
many concurrent calls over several connections.  Each test runs with grpcio's client and with
minigrpc's (so that PyPy, where grpcio does not run, tests the option too).  The handler
semantics tests of test_server_behaviour.py also run with the option on.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any, Dict, Iterator, List

import pytest

import minigrpc
from minigrpc.driver import handlers as mg_handlers
from tests.support.minigrpc_server import IO_THREAD_OPTION, MinigrpcServer, echo_from_threads
from tests.support.scripted_peer import HostileClient, grpc_message, grpc_status_of

#: RFC 9113 §7.
INTERNAL_ERROR = 2

pytestmark = pytest.mark.timeout(90)

WAIT = 10.0  # seconds any call may take before the test fails
#: The name server_api.py gives the I/O thread.
IO_THREAD_NAME = "minigrpc-server-io"


@pytest.fixture(params=["grpcio", "minigrpc"])
def client(request: pytest.FixtureRequest) -> Any:
    """The client library's module: ``insecure_channel``, ``RpcError`` and ``StatusCode``."""
    if request.param == "grpcio":
        return pytest.importorskip("grpc")
    importlib.import_module("minigrpc.blocking.channel")
    return minigrpc


class _ThreadRecorder:
    """Handlers of all four shapes that note the name of the thread each one ran on."""

    def __init__(self) -> None:
        self.threads: Dict[str, List[str]] = {}
        self._lock = threading.Lock()

    def _note(self, shape: str) -> None:
        with self._lock:
            self.threads.setdefault(shape, []).append(threading.current_thread().name)

    def unary_unary(self, request: bytes, context: Any) -> bytes:
        self._note("unary_unary")
        return request

    def unary_stream(self, request: bytes, context: Any) -> Iterator[bytes]:
        self._note("unary_stream")
        yield request
        yield request

    def stream_unary(self, requests: Iterator[bytes], context: Any) -> bytes:
        self._note("stream_unary")
        return b"".join(requests)

    def stream_stream(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        self._note("stream_stream")
        yield from requests

    def handler(self) -> Any:
        return mg_handlers.method_handlers_generic_handler(
            "test.Shapes",
            {
                "UnaryUnary": mg_handlers.unary_unary_rpc_method_handler(self.unary_unary),
                "UnaryStream": mg_handlers.unary_stream_rpc_method_handler(self.unary_stream),
                "StreamUnary": mg_handlers.stream_unary_rpc_method_handler(self.stream_unary),
                "StreamStream": mg_handlers.stream_stream_rpc_method_handler(self.stream_stream),
            },
        )


@pytest.mark.parametrize("on_io_thread", [False, True], ids=["executor", "io-thread"])
def test_only_unary_unary_handlers_move_to_the_io_thread(client: Any, on_io_thread: bool) -> None:
    recorder = _ThreadRecorder()
    options = [IO_THREAD_OPTION] if on_io_thread else []
    with MinigrpcServer("unix", handlers=[recorder.handler()], options=options) as server:
        with client.insecure_channel(server.target) as channel:
            assert channel.unary_unary("/test.Shapes/UnaryUnary")(b"a", timeout=WAIT) == b"a"
            responses = channel.unary_stream("/test.Shapes/UnaryStream")(b"b", timeout=WAIT)
            assert list(responses) == [b"b", b"b"]
            stream_unary = channel.stream_unary("/test.Shapes/StreamUnary")
            assert stream_unary(iter([b"c", b"d"]), timeout=WAIT) == b"cd"
            stream_stream = channel.stream_stream("/test.Shapes/StreamStream")
            assert list(stream_stream(iter([b"e", b"f"]), timeout=WAIT)) == [b"e", b"f"]
    ran_on_io_thread = {
        shape: names == [IO_THREAD_NAME] for shape, names in recorder.threads.items()
    }
    assert ran_on_io_thread == {
        "unary_unary": on_io_thread,
        "unary_stream": False,
        "stream_unary": False,
        "stream_stream": False,
    }


def _metadata_then_answer(request: bytes, context: Any) -> bytes:
    context.send_initial_metadata((("x-initial", "1"),))
    context.set_trailing_metadata((("x-trailing", "2"),))
    return request[::-1]


def _raise_base_exception(request: bytes, context: Any) -> bytes:
    raise SystemExit("a handler that exits")


def _echo(request: bytes, context: Any) -> bytes:
    return request


@pytest.fixture(scope="module")
def io_thread_server() -> Iterator[MinigrpcServer]:
    handlers = mg_handlers.method_handlers_generic_handler(
        "test.Bytes",
        {
            "MetadataThenAnswer": mg_handlers.unary_unary_rpc_method_handler(
                _metadata_then_answer
            ),
            "RaiseBaseException": mg_handlers.unary_unary_rpc_method_handler(
                _raise_base_exception
            ),
            "Echo": mg_handlers.unary_unary_rpc_method_handler(_echo),
        },
    )
    with MinigrpcServer("unix", handlers=[handlers], options=[IO_THREAD_OPTION]) as server:
        yield server


def test_initial_metadata_goes_before_the_response(
    client: Any, io_thread_server: MinigrpcServer
) -> None:
    """send_initial_metadata() is posted to the loop; the response must not overtake it."""
    with client.insecure_channel(io_thread_server.target) as channel:
        call = channel.unary_unary("/test.Bytes/MetadataThenAnswer")
        for _ in range(20):
            response, outcome = call.with_call(b"abc", timeout=WAIT)
            assert response == b"cba"
            assert ("x-initial", "1") in [tuple(m) for m in outcome.initial_metadata()]
            assert ("x-trailing", "2") in [tuple(m) for m in outcome.trailing_metadata()]


def test_base_exception_drops_its_connection_and_the_server_goes_on(
    client: Any, io_thread_server: MinigrpcServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler on the I/O thread that raises SystemExit must not stop the I/O loop.

    On the executor such a call is never answered (as in grpcio, the executor keeps the
    exception); on the I/O thread it is handled as an internal error, so its connection
    closes and its client learns at once.
    """
    with caplog.at_level(logging.ERROR, logger="minigrpc.server"):
        with client.insecure_channel(io_thread_server.target) as channel:
            with pytest.raises(client.RpcError) as excinfo:
                channel.unary_unary("/test.Bytes/RaiseBaseException")(b"x", timeout=WAIT)
            assert excinfo.value.code() == client.StatusCode.UNAVAILABLE
    assert any("internal error" in record.getMessage() for record in caplog.records)
    with client.insecure_channel(io_thread_server.target) as channel:
        assert channel.unary_unary("/test.Bytes/Echo")(b"still here", timeout=WAIT) == (
            b"still here"
        )


def test_internal_error_sends_goaway_internal_error_before_the_close(
    io_thread_server: MinigrpcServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An internal error closes its connection after GOAWAY(INTERNAL_ERROR) (RFC 9113 §5.4.1).

    A raw client sees the frames themselves: a call on stream 1 that succeeds, then the call
    on stream 3 whose handler raises SystemExit on the I/O thread; the GOAWAY names stream 3,
    the last one the server processed, and the connection ends.
    """
    peer = HostileClient(io_thread_server.target)
    try:
        peer.send_preface()
        peer.send_headers(1, peer.request_headers("/test.Bytes/Echo"))
        peer.send_data(1, grpc_message(b"first"), end_stream=True)
        assert grpc_status_of(peer.wait_stream_done(1)) == 0
        with caplog.at_level(logging.ERROR, logger="minigrpc.server"):
            peer.send_headers(3, peer.request_headers("/test.Bytes/RaiseBaseException"))
            peer.send_data(3, grpc_message(b"x"), end_stream=True)
            assert peer.wait_eof(), "the server kept the connection open"
        assert [(g.last_stream_id, g.error_code) for g in peer.goaways] == [(3, INTERNAL_ERROR)]
        assert any("internal error" in record.getMessage() for record in caplog.records)
    finally:
        peer.close()


def test_many_callers_on_several_connections(
    client: Any, io_thread_server: MinigrpcServer
) -> None:
    errors = echo_from_threads(
        client.insecure_channel, io_thread_server.target, "/test.Bytes/Echo", channels=4,
        threads=16, timeout=WAIT,
    )
    assert errors == []


@pytest.mark.parametrize("value", ["yes", None])
def test_option_value_must_be_an_integer(value: Any) -> None:
    with pytest.raises(ValueError, match=r"minigrpc\.unary_handlers_on_io_thread"):
        minigrpc.server(options=[("minigrpc.unary_handlers_on_io_thread", value)])
