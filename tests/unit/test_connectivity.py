"""Channel connectivity (gRPC's doc/connectivity-semantics-and-api.md) with grpcio's API:
``Channel.subscribe``/``unsubscribe`` and ``channel_ready_future``, on real sockets."""

from __future__ import annotations

import queue
import threading
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


def test_a_watched_channel_notices_its_server_going_away_while_idle(
    server: MinigrpcServer,
) -> None:
    log = StateLog()
    with minigrpc.insecure_channel(server.target) as channel:
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.IDLE
        channel.unary_unary("/grpc.testing.TestService/EmptyCall")(b"", timeout=WAIT)
        assert log.until(ChannelConnectivity.READY)[-1] is ChannelConnectivity.READY
        server.stop(grace=WAIT)
        # No call runs: the channel's watch thread reads the GOAWAY and EOF and reports IDLE.
        assert log.next() is ChannelConnectivity.IDLE
        with pytest.raises(minigrpc.RpcError):
            channel.unary_unary("/grpc.testing.TestService/EmptyCall")(b"", timeout=WAIT)
        assert log.until(ChannelConnectivity.TRANSIENT_FAILURE) == [
            ChannelConnectivity.CONNECTING,
            ChannelConnectivity.TRANSIENT_FAILURE,
        ]


def watch_threads() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "minigrpc-watch"]


def test_only_a_watched_channel_reads_while_idle_and_calls_share_the_reading(
    server: MinigrpcServer,
) -> None:
    """Without subscribers no thread reads an idle connection (a one-shot client starts
    none); with one, the watch thread and the calls' threads take turns reading, and it ends
    once the last subscriber has gone."""
    log = StateLog()
    empty = "/grpc.testing.TestService/EmptyCall"
    before = set(watch_threads())
    with minigrpc.insecure_channel(server.target) as channel:
        channel.unary_unary(empty)(b"", timeout=WAIT)
        assert set(watch_threads()) == before
        channel.subscribe(log)
        assert log.next() is ChannelConnectivity.READY
        started = [thread for thread in watch_threads() if thread not in before]
        assert len(started) == 1
        for _ in range(20):
            channel.unary_unary(empty)(b"", timeout=WAIT)
        channel.unsubscribe(log)
        started[0].join(WAIT)
        assert not started[0].is_alive()
        channel.unary_unary(empty)(b"", timeout=WAIT)
    assert log.states.empty()


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
