"""Channel connectivity (gRPC's doc/connectivity-semantics-and-api.md) with grpcio's API:
``Channel.subscribe``/``unsubscribe`` and ``channel_ready_future``, on real sockets."""

from __future__ import annotations

import queue
from typing import Any, Iterator, List

import pytest

import minigrpc
from minigrpc import ChannelConnectivity
from tests.peers import listen_address
from tests.support.minigrpc_server import MinigrpcServer

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0


class StateLog:
    """A subscriber that queues every state it is told."""

    def __init__(self) -> None:
        self.states: queue.Queue[ChannelConnectivity] = queue.Queue()

    def __call__(self, state: ChannelConnectivity) -> None:
        self.states.put(state)

    def next(self) -> ChannelConnectivity:
        return self.states.get(timeout=WAIT)

    def until(self, wanted: ChannelConnectivity) -> List[ChannelConnectivity]:
        """The states seen up to and including ``wanted``."""
        seen = [self.next()]
        while seen[-1] is not wanted:
            seen.append(self.next())
        return seen


@pytest.fixture
def server() -> Iterator[MinigrpcServer]:
    with MinigrpcServer("unix-abstract") as running:
        yield running


def test_states_match_grpcio_members() -> None:
    grpc = pytest.importorskip("grpc")
    assert [(m.name, m.value) for m in ChannelConnectivity] == [
        (m.name, m.value) for m in grpc.ChannelConnectivity
    ]


def test_subscribe_reports_idle_then_connecting_then_ready(server: MinigrpcServer) -> None:
    log = StateLog()
    with minigrpc.insecure_channel(server.target) as channel:
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.IDLE
        channel.unsubscribe(log)
        channel.subscribe(log, try_to_connect=True)
        assert log.until(ChannelConnectivity.READY) == [
            ChannelConnectivity.IDLE,
            ChannelConnectivity.CONNECTING,
            ChannelConnectivity.READY,
        ]
    assert log.next() is ChannelConnectivity.SHUTDOWN


def test_a_call_connects_and_a_lost_server_shows_at_the_next_call(
    server: MinigrpcServer,
) -> None:
    log = StateLog()
    with minigrpc.insecure_channel(server.target) as channel:
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.IDLE
        channel.unary_unary("/grpc.testing.TestService/EmptyCall")(b"", timeout=WAIT)
        assert log.until(ChannelConnectivity.READY)[-1] is ChannelConnectivity.READY
        server.stop(grace=WAIT)
        # Nothing reads an idle connection, so its loss shows at the next call: the connection
        # ends (IDLE), the redial fails (CONNECTING, TRANSIENT_FAILURE).
        with pytest.raises(minigrpc.RpcError):
            channel.unary_unary("/grpc.testing.TestService/EmptyCall")(b"", timeout=WAIT)
        assert log.until(ChannelConnectivity.TRANSIENT_FAILURE) == [
            ChannelConnectivity.IDLE,
            ChannelConnectivity.CONNECTING,
            ChannelConnectivity.TRANSIENT_FAILURE,
        ]


def test_failed_dial_is_transient_failure() -> None:
    log = StateLog()
    with minigrpc.insecure_channel(listen_address("unix-abstract", None)) as channel:
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.IDLE
        with pytest.raises(minigrpc.RpcError):
            channel.unary_unary("/a/b")(b"", timeout=WAIT)
        assert log.until(ChannelConnectivity.TRANSIENT_FAILURE)[-1] is (
            ChannelConnectivity.TRANSIENT_FAILURE
        )


def test_channel_ready_future_completes_once_a_server_listens() -> None:
    address = listen_address("unix-abstract", None)
    with minigrpc.insecure_channel(address) as channel:
        future = minigrpc.channel_ready_future(channel)
        with pytest.raises(minigrpc.FutureTimeoutError):
            future.result(timeout=0.05)
        assert not future.done()
        done: queue.Queue[Any] = queue.Queue()
        future.add_done_callback(done.put)
        server = minigrpc.server()
        server.add_insecure_port(address)
        server.start()
        try:
            future.result(timeout=WAIT)
            assert done.get(timeout=WAIT) is future
            assert future.done() and not future.cancelled()
        finally:
            server.stop(None).wait(WAIT)


def test_channel_ready_future_can_be_cancelled() -> None:
    with minigrpc.insecure_channel(listen_address("unix-abstract", None)) as channel:
        future = minigrpc.channel_ready_future(channel)
        assert future.cancel()
        assert future.cancelled()
        with pytest.raises(minigrpc.FutureCancelledError):
            future.result(timeout=WAIT)


def test_unparsable_target_is_transient_failure() -> None:
    log = StateLog()
    with minigrpc.insecure_channel("host:99999") as channel:
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.TRANSIENT_FAILURE
