"""minigrpc.aio's server against four clients: grpcio's blocking and asyncio clients and
minigrpc's blocking and asyncio clients, over TCP, a unix path and an abstract socket.

The server runs on its own event loop (tests/support/aio_server.py); the handlers of ``t.S``
cover every shape ``grpc.aio`` allows.  Each client is driven through :class:`Client`, which
returns what the call ended with, so one assertion covers all four.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, NamedTuple, Tuple

import pytest

import minigrpc
from minigrpc import StatusCode, aio
from tests.peers import ADDRESS_KINDS
from tests.support.aio_server import ECHO_INITIAL, ECHO_TRAILING, SERVICE, AioServer

try:
    import grpc
except ImportError:  # PyPy, or an interpreter grpcio has no wheel for: minigrpc's clients run
    grpc = None

#: What a failed call raises, whichever client made it.
RPC_ERRORS: Tuple[type, ...] = (minigrpc.RpcError,) + ((grpc.RpcError,) if grpc else ())

pytestmark = [pytest.mark.timeout(60)]

CLIENTS = ("grpcio", "grpcio-aio", "minigrpc", "minigrpc-aio")


class Outcome(NamedTuple):
    """How a call ended, in minigrpc's terms whichever client made it."""

    responses: List[bytes]
    code: StatusCode
    details: str
    initial: Tuple[Tuple[str, Any], ...]
    trailing: Tuple[Tuple[str, Any], ...]


def _code(code: Any) -> StatusCode:
    return StatusCode[code.name]


def _pairs(metadata: Any) -> Tuple[Tuple[str, Any], ...]:
    return tuple((key, value) for key, value in (metadata or ()))


class Client:
    """One of :data:`CLIENTS` calling ``target``; each call returns an :class:`Outcome`."""

    def __init__(self, kind: str, target: str, credentials: Any = None, **options: Any) -> None:
        if kind.startswith("grpcio") and grpc is None:
            pytest.skip("grpcio is not installed for this interpreter")
        self.kind = kind
        self.target = target
        self.credentials = credentials
        self.options = list(options.get("options", ()))

    # -- blocking clients (grpcio or minigrpc): the module differs, the API does not --------

    def _blocking(self, shape: str, method: str, request: Any, **kwargs: Any) -> Outcome:
        module: Any = grpc if self.kind == "grpcio" else minigrpc
        if self.credentials is not None:
            channel = module.secure_channel(self.target, self.credentials(module), self.options)
        else:
            channel = module.insecure_channel(self.target, self.options)
        with channel:
            callable_ = getattr(channel, shape)(f"/{SERVICE}/{method}")
            responses: List[bytes] = []
            try:
                if shape in ("unary_unary", "stream_unary"):
                    response, call = callable_.with_call(request, **kwargs)
                    responses.append(response)
                else:
                    call = callable_(request, **kwargs)
                    responses.extend(call)
            except module.RpcError as error:
                call = error
            return Outcome(
                responses,
                _code(call.code()),
                call.details() or "",
                _pairs(call.initial_metadata()),
                _pairs(call.trailing_metadata()),
            )

    # -- asyncio clients -----------------------------------------------------------------

    async def _async(self, shape: str, method: str, request: Any, **kwargs: Any) -> Outcome:
        module: Any = grpc.aio if self.kind == "grpcio-aio" else aio
        if self.credentials is not None:
            top = grpc if self.kind == "grpcio-aio" else minigrpc
            channel = module.secure_channel(self.target, self.credentials(top), self.options)
        else:
            channel = module.insecure_channel(self.target, self.options)
        async with channel:
            call = getattr(channel, shape)(f"/{SERVICE}/{method}")(request, **kwargs)
            responses: List[bytes] = []
            try:
                if shape in ("unary_unary", "stream_unary"):
                    responses.append(await call)
                else:
                    async for response in call:
                        responses.append(response)
            except RPC_ERRORS:
                pass
            return Outcome(
                responses,
                _code(await call.code()),
                await call.details() or "",
                _pairs(await call.initial_metadata()),
                _pairs(await call.trailing_metadata()),
            )

    def call(self, shape: str, method: str, request: Any, **kwargs: Any) -> Outcome:
        if self.kind in ("grpcio", "minigrpc"):
            if shape.startswith("stream"):
                request = iter(request)
            return self._blocking(shape, method, request, **kwargs)
        if shape.startswith("stream"):
            items = list(request)

            async def generate() -> Any:
                for item in items:
                    yield item

            request = generate()
        return asyncio.run(self._async(shape, method, request, **kwargs))


@pytest.fixture(scope="module")
def tcp_server() -> Any:
    with AioServer("tcp") as server:
        yield server


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest, tcp_server: AioServer) -> Client:
    return Client(request.param, tcp_server.target)


# -- the four shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["Echo", "SyncEcho"])
def test_unary_unary(client: Client, method: str) -> None:
    outcome = client.call("unary_unary", method, b"hello")
    suffix = b" (sync)" if method == "SyncEcho" else b""
    assert outcome.code is StatusCode.OK, outcome
    assert outcome.responses == [b"hello" + suffix]


@pytest.mark.parametrize("method", ["Split", "SplitWriter", "SyncSplit"])
def test_unary_stream(client: Client, method: str) -> None:
    outcome = client.call("unary_stream", method, b"abc")
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [b"a", b"b", b"c"])


@pytest.mark.parametrize("method", ["Join", "JoinRead", "SyncJoin"])
def test_stream_unary(client: Client, method: str) -> None:
    outcome = client.call("stream_unary", method, [b"a", b"bc", b"", b"d"])
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [b"abcd"])


@pytest.mark.parametrize("method", ["Chat", "ChatRW", "SyncChat"])
def test_stream_stream(client: Client, method: str) -> None:
    outcome = client.call("stream_stream", method, [b"a", b"bc", b"d"])
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [b"A", b"BC", b"D"])


def test_empty_request_stream(client: Client) -> None:
    assert client.call("stream_unary", "Join", []).responses == [b""]
    outcome = client.call("stream_stream", "Chat", [])
    assert (outcome.code, outcome.responses) == (StatusCode.OK, [])


# -- status and metadata -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_, code, details",
    [
        (b"abort:no such thing", StatusCode.NOT_FOUND, "no such thing"),
        (b"abort-ok", StatusCode.UNKNOWN, ""),
        (b"raise", StatusCode.UNKNOWN, "Exception calling application: boom"),
        (b"set-code", StatusCode.FAILED_PRECONDITION, "set by the handler"),
        (b"none", StatusCode.INTERNAL, "Failed to serialize response!"),
    ],
)
def test_unary_errors(client: Client, request_: bytes, code: StatusCode, details: str) -> None:
    outcome = client.call("unary_unary", "Echo", request_)
    assert (outcome.code, outcome.details, outcome.responses) == (code, details, [])


def test_sync_abort(client: Client) -> None:
    outcome = client.call("unary_unary", "SyncEcho", b"abort")
    assert (outcome.code, outcome.details) == (StatusCode.PERMISSION_DENIED, "sync abort")


def test_error_after_streamed_responses(client: Client) -> None:
    outcome = client.call("unary_stream", "Split", b"ab!")
    assert outcome.responses == [b"a", b"b", b"!"]
    assert (outcome.code, outcome.details) == (StatusCode.DATA_LOSS, "after the responses")


def test_unknown_method(client: Client) -> None:
    outcome = client.call("unary_unary", "Nope", b"")
    assert (outcome.code, outcome.details) == (StatusCode.UNIMPLEMENTED, "Method not found!")


def test_metadata_both_ways(client: Client) -> None:
    metadata = ((ECHO_INITIAL, "first"), (ECHO_TRAILING, "last"))
    outcome = client.call("unary_unary", "Echo", b"m", metadata=metadata)
    assert outcome.code is StatusCode.OK
    assert (ECHO_INITIAL, "first") in outcome.initial
    assert (ECHO_TRAILING, "last") in outcome.trailing
    sync = client.call("unary_unary", "SyncEcho", b"m")
    assert ("x-sync", "yes") in sync.trailing


def test_peer_and_deadline(client: Client) -> None:
    peer = client.call("unary_unary", "Echo", b"peer").responses[0].decode()
    assert peer.startswith("ipv4:127.0.0.1:") or peer.startswith("ipv6:")
    assert client.call("unary_unary", "Echo", b"deadline").responses == [b"none"]
    remaining = float(client.call("unary_unary", "Echo", b"deadline", timeout=30).responses[0])
    assert 0 < remaining <= 31  # grpcio rounds grpc-timeout up


# -- sync handlers run on the executor ----------------------------------------------------------


def test_sync_handlers_run_on_the_migration_thread_pool() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2, thread_name_prefix="migration") as pool:
        with AioServer("tcp", with_interop=False, migration_thread_pool=pool) as server:
            outcome = Client("minigrpc", server.target).call("unary_unary", "SyncEcho", b"x")
            assert outcome.responses == [b"x (sync)"]
            assert server.servicer.threads[-1].startswith("migration")


# -- addresses ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ADDRESS_KINDS)
@pytest.mark.parametrize("client_kind", ["grpcio", "minigrpc-aio"])
def test_address_kinds(kind: str, client_kind: str) -> None:
    with AioServer(kind, with_interop=False) as server:
        client = Client(client_kind, server.target)
        assert client.call("unary_unary", "Echo", b"hi").responses == [b"hi"]
        peer = client.call("unary_unary", "Echo", b"peer").responses[0].decode()
        assert peer.startswith("unix") if kind != "tcp" else peer.startswith("ipv")
        if kind == "tcp":
            assert server.port > 0
        else:
            assert server.port == 1
