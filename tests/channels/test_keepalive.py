"""Client keepalive (gRFC A8) on both APIs, against real servers behind a proxy that goes silent.

The reference, grpcio 1.85 with ``grpc.keepalive_time_ms=1000``, ``grpc.keepalive_timeout_ms=1000``,
``grpc.http2.ping_timeout_ms=1000`` and ``grpc.keepalive_permit_without_calls=1``, behind a proxy
that stops forwarding without FIN or RST: the open call fails UNAVAILABLE about 1.6 s later and
the idle channel goes IDLE at 1.5 s.  Here the times are halved, and bounded: a dead connection
is given up between the keepalive time and the keepalive time plus the timeout (plus slack for a
loaded machine); a healthy one is never given up, however short the keepalive time.

The servers are grpcio's and minigrpc's (:mod:`tests.support.channel_peers`) behind
:class:`~tests.support.blackhole_proxy.BlackholeProxy`; a scripted HTTP/2 server sends
GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings"), after which the channel's next connection pings
at twice the interval.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any, Iterator, List, Tuple

import pytest

import minigrpc
from minigrpc import ChannelConnectivity, aio
from minigrpc.http2.frames import ENHANCE_YOUR_CALM
from tests.support.blackhole_proxy import BlackholeProxy
from tests.support.channel_peers import APIS, STREAM, UNARY, BehaviourServer, aio_unary, unary
from tests.support.scripted_peer import RawConn, ScriptedServer

pytestmark = [pytest.mark.timeout(60)]

TIME, TIMEOUT = 0.5, 0.5
#: How late a loaded machine may be, beyond the keepalive time and timeout.
SLACK = 1.0

DEAD_PEER_OPTIONS = [
    ("grpc.keepalive_time_ms", int(TIME * 1000)),
    ("grpc.keepalive_timeout_ms", int(TIMEOUT * 1000)),
    ("grpc.http2.ping_timeout_ms", int(TIMEOUT * 1000)),
]
IDLE_OPTIONS = [*DEAD_PEER_OPTIONS, ("grpc.keepalive_permit_without_calls", 1)]

HELD = (("x-wait", "20000"),)  # the server holds the call: it stays open


@pytest.fixture(params=["minigrpc", "grpcio"])
def proxied(request: pytest.FixtureRequest) -> Iterator[Tuple[BehaviourServer, BlackholeProxy]]:
    server = BehaviourServer(request.param)
    proxy = BlackholeProxy(("127.0.0.1", server.port))
    yield server, proxy
    proxy.close()
    server.stop()


def blocking_state(channel: Any) -> ChannelConnectivity:
    """The channel's state now: a new subscriber hears it first."""
    heard: queue.Queue[ChannelConnectivity] = queue.Queue()
    channel.subscribe(heard.put)
    try:
        return heard.get(timeout=5)
    finally:
        channel.unsubscribe(heard.put)


def left_ready(channel: Any) -> ChannelConnectivity:
    """The first state other than READY the channel reports (it may still be on its way)."""
    heard: queue.Queue[ChannelConnectivity] = queue.Queue()
    channel.subscribe(heard.put)
    try:
        while True:
            state = heard.get(timeout=5)
            if state is not ChannelConnectivity.READY:
                return state
    finally:
        channel.unsubscribe(heard.put)


def assert_dead_in_time(elapsed: float) -> None:
    assert TIME - 0.05 <= elapsed <= TIME + TIMEOUT + SLACK, elapsed


@pytest.mark.parametrize("api", APIS)
def test_a_silent_server_fails_the_open_call_and_the_next_call_reconnects(
    api: str, proxied: Tuple[BehaviourServer, BlackholeProxy]
) -> None:
    server, proxy = proxied
    if api == "blocking":
        with minigrpc.insecure_channel(proxy.target, options=DEAD_PEER_OPTIONS) as channel:
            unary(channel, timeout=10)
            future = channel.unary_unary(UNARY).future(b"hi", metadata=HELD, timeout=20)
            assert server.behaviour.wait_for_calls(2)
            proxy.blackhole()
            started = time.monotonic()
            error = future.exception(timeout=10)
            elapsed = time.monotonic() - started
            assert error is not None and error.code() is minigrpc.StatusCode.UNAVAILABLE, error
            assert "ping timeout" in error.details()
            left_ready(channel)
            unary(channel, timeout=10)
    else:

        async def main() -> float:
            async with aio.insecure_channel(proxy.target, options=DEAD_PEER_OPTIONS) as channel:
                await aio_unary(channel, timeout=10)
                call = channel.unary_unary(UNARY)(b"hi", metadata=HELD, timeout=20)
                loop = asyncio.get_running_loop()
                assert await loop.run_in_executor(None, server.behaviour.wait_for_calls, 2)
                proxy.blackhole()
                started = time.monotonic()
                with pytest.raises(aio.AioRpcError) as raised:
                    await call
                elapsed = time.monotonic() - started
                assert raised.value.code() is minigrpc.StatusCode.UNAVAILABLE
                assert "ping timeout" in (raised.value.details() or "")
                assert channel.get_state() is not ChannelConnectivity.READY
                await aio_unary(channel, timeout=10)
                return elapsed

        elapsed = asyncio.run(main())
    assert_dead_in_time(elapsed)
    assert proxy.accepted == 2  # the dead connection was dropped and a new one made


@pytest.mark.parametrize("api", APIS)
def test_an_idle_channel_that_pings_drops_its_silent_connection(
    api: str, proxied: Tuple[BehaviourServer, BlackholeProxy]
) -> None:
    """With ``keepalive_permit_without_calls`` a channel without calls pings too, and gives up
    (closes its socket; the channel leaves READY) a connection that stopped answering."""
    _server, proxy = proxied
    if api == "blocking":
        with minigrpc.insecure_channel(proxy.target, options=IDLE_OPTIONS) as channel:
            unary(channel, timeout=10)
            proxy.blackhole()
            started = time.monotonic()
            assert proxy.links[0].client_gone.wait(10)
            elapsed = time.monotonic() - started
            left_ready(channel)
            unary(channel, timeout=10)
    else:

        async def main() -> float:
            async with aio.insecure_channel(proxy.target, options=IDLE_OPTIONS) as channel:
                await aio_unary(channel, timeout=10)
                proxy.blackhole()
                started = time.monotonic()
                await asyncio.wait_for(
                    channel.wait_for_state_change(ChannelConnectivity.READY), 10)
                elapsed = time.monotonic() - started
                loop = asyncio.get_running_loop()
                assert await loop.run_in_executor(None, proxy.links[0].client_gone.wait, 10)
                await aio_unary(channel, timeout=10)
                return elapsed

        elapsed = asyncio.run(main())
    assert_dead_in_time(elapsed)
    assert proxy.accepted == 2


HEALTHY_OPTIONS = [
    ("grpc.keepalive_time_ms", 200),
    ("grpc.keepalive_timeout_ms", 200),
    ("grpc.http2.ping_timeout_ms", 200),
]
#: Each call is held longer than the keepalive time, so each pings while it runs.
SLOW = (("x-wait", "300"),)


@pytest.mark.parametrize("api", APIS)
def test_a_healthy_connection_is_never_given_up(
    api: str, proxied: Tuple[BehaviourServer, BlackholeProxy]
) -> None:
    """Calls that outlast a 200 ms keepalive, for two seconds (ten keepalive times): every one
    succeeds, on the one connection, and the channel stays READY."""
    _server, proxy = proxied
    until = time.monotonic() + 2.0
    if api == "blocking":
        with minigrpc.insecure_channel(proxy.target, options=HEALTHY_OPTIONS) as channel:
            count = 0
            while time.monotonic() < until:
                unary(channel, metadata=SLOW, timeout=10)
                count += 1
            assert blocking_state(channel) is ChannelConnectivity.READY
    else:

        async def main() -> int:
            async with aio.insecure_channel(proxy.target, options=HEALTHY_OPTIONS) as channel:
                count = 0
                while time.monotonic() < until:
                    await aio_unary(channel, metadata=SLOW, timeout=10)
                    count += 1
                assert channel.get_state() is ChannelConnectivity.READY
                return count

        count = asyncio.run(main())
    assert count >= 4
    assert proxy.accepted == 1


@pytest.mark.parametrize("api", APIS)
def test_a_call_nobody_reads_keeps_its_healthy_connection(
    api: str, proxied: Tuple[BehaviourServer, BlackholeProxy]
) -> None:
    """A response stream the application does not read for a second, on a 200 ms keepalive:
    the PINGs' ACKs arrive while nobody reads the socket (the blocking channel has no reader
    thread), and still count as life, so the call gets its response."""
    _server, proxy = proxied
    metadata = (("x-wait", "1000"), ("x-count", "1"))
    if api == "blocking":
        with minigrpc.insecure_channel(proxy.target, options=HEALTHY_OPTIONS) as channel:
            responses = channel.unary_stream(STREAM)(b"hi", metadata=metadata, timeout=10)
            assert not responses.done()
            threading.Event().wait(1.2)  # the application is busy: nobody reads
            assert list(responses) == [b"hi"]
    else:

        async def main() -> None:
            async with aio.insecure_channel(proxy.target, options=HEALTHY_OPTIONS) as channel:
                call = channel.unary_stream(STREAM)(b"hi", metadata=metadata, timeout=10)
                await asyncio.sleep(1.2)
                assert [response async for response in call] == [b"hi"]

        asyncio.run(main())
    assert proxy.accepted == 1


CADENCE_TIME = 0.4
CADENCE_PINGS = 5
CADENCE_OPTIONS = [
    ("grpc.keepalive_time_ms", int(CADENCE_TIME * 1000)),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),  # no one-a-minute throttle after two PINGs
]


@pytest.mark.parametrize("api", APIS)
def test_an_idle_channel_pings_every_keepalive_time(api: str) -> None:
    """An idle channel with ``keepalive_permit_without_calls`` pings a server that answers
    every keepalive time (gRFC A8), not every keepalive time plus the timeout (20 s by
    default): the blocking connection has no thread reading its socket, and its timer looks
    for each PING's answer a keepalive time after it.  grpcio pings a keepalive time after
    each ACK too (measured; it also keeps PINGs at least 1 s apart, which minigrpc does not)."""
    times: List[float] = []
    done = threading.Event()

    def script(conn: RawConn) -> None:
        conn.send_settings()
        request = conn.next_request()
        if request is None:
            return
        conn.respond(request.stream_id, b"hi")
        deadline = time.monotonic() + CADENCE_PINGS * CADENCE_TIME + 10
        while len(times) < CADENCE_PINGS and not conn.eof:
            if not conn.wait_for(lambda: len(conn.pings) > len(times) or conn.eof,
                                 deadline - time.monotonic()):
                break
            now = time.monotonic()
            times.extend(now for _ in conn.pings[len(times):])  # each is ACKed at once
        done.set()
        conn.wait_eof()

    with ScriptedServer(script, tcp=True) as server:
        if api == "blocking":
            with minigrpc.insecure_channel(server.target, options=CADENCE_OPTIONS) as channel:
                unary(channel, timeout=10)
                assert done.wait(30)
        else:

            async def main() -> None:
                async with aio.insecure_channel(server.target, options=CADENCE_OPTIONS
                                                ) as channel:
                    await aio_unary(channel, timeout=10)
                    loop = asyncio.get_running_loop()
                    assert await loop.run_in_executor(None, done.wait, 30)

            asyncio.run(main())
        assert not server.errors
    assert len(times) == CADENCE_PINGS, times
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert all(gap >= CADENCE_TIME - 0.05 for gap in gaps), gaps  # no busier than asked
    assert times[-1] - times[0] <= (CADENCE_PINGS - 1) * CADENCE_TIME + SLACK, gaps


FIRST_TIME = 0.3


@pytest.mark.parametrize("api", APIS)
def test_too_many_pings_doubles_the_keepalive_time_of_the_next_connection(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that answers each connection's first keepalive PING with
    GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings") and closes: the next connection's PING comes
    twice as late (gRFC A8), and the channel says why."""
    caplog.set_level(logging.WARNING, logger="minigrpc.channel")
    gaps: List[float] = []

    def script(conn: RawConn) -> None:
        conn.send_settings()
        request = conn.next_request()
        if request is None:
            return
        started = time.monotonic()
        if conn.wait_for(lambda: bool(conn.pings), 5):
            gaps.append(time.monotonic() - started)
        conn.send_goaway(request.stream_id, ENHANCE_YOUR_CALM, b"too_many_pings")

    options = [("grpc.keepalive_time_ms", int(FIRST_TIME * 1000))]
    with ScriptedServer(script, tcp=True) as server:
        if api == "blocking":
            with minigrpc.insecure_channel(server.target, options=options) as channel:
                for _ in range(2):
                    with pytest.raises(minigrpc.RpcError):
                        unary(channel, timeout=10)
        else:

            async def main() -> None:
                async with aio.insecure_channel(server.target, options=options) as channel:
                    for _ in range(2):
                        with pytest.raises(aio.AioRpcError):
                            await aio_unary(channel, timeout=10)

            asyncio.run(main())
        assert not server.errors
    assert len(gaps) == 2, gaps
    first, second = gaps
    assert FIRST_TIME - 0.05 <= first <= FIRST_TIME + 0.25, gaps
    assert 2 * FIRST_TIME - 0.05 <= second <= 2 * FIRST_TIME + 0.25, gaps
    warnings = [record.getMessage() for record in caplog.records
                if record.name == "minigrpc.channel" and "too_many_pings" in record.getMessage()]
    assert len(warnings) == 2, warnings
    assert "from 0.3 s to 0.6 s" in warnings[0] and "from 0.6 s to 1.2 s" in warnings[1]


IDLE_CHANNELS = 200
#: Every channel keeps pinging while the others are made.  By grpcio's default
#: (``max_pings_without_data`` 2), a channel made over a second before the blackhole would
#: have sent its two PINGs without data by then and wait a minute for the next: on a slow
#: interpreter (PyPy takes seconds to make 200 channels) the blackhole would go unnoticed.
IDLE_UNTHROTTLED_OPTIONS = [*IDLE_OPTIONS, ("grpc.http2.max_pings_without_data", 0)]


def test_idle_blocking_channels_share_one_timer_thread_and_still_find_a_silent_server() -> None:
    """200 idle blocking channels that ping without calls: their keepalive timers add at most
    a couple of threads (one shared timer thread, not one sleeping thread per connection), and
    every one of them still gives up its connection once the server goes silent."""
    # The server lets idle clients ping this often: none is sent away before the blackhole.
    server = BehaviourServer("minigrpc", options=(
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 100),
    ))
    proxy = BlackholeProxy(("127.0.0.1", server.port))
    channels: List[Any] = []
    try:
        with minigrpc.insecure_channel(proxy.target) as warm:
            unary(warm, timeout=10)  # the server's handler thread, the proxy's first link
        before = threading.active_count() - 2 * proxy.accepted  # the proxy: two per link
        for _ in range(IDLE_CHANNELS):
            channel = minigrpc.insecure_channel(proxy.target, options=IDLE_UNTHROTTLED_OPTIONS)
            channels.append(channel)
            unary(channel, timeout=10)
        # Every connection's keepalive timer is armed now (permit_without_calls).
        added = threading.active_count() - 2 * proxy.accepted - before
        assert added <= 3, added
        assert not any(link.client_gone.is_set() for link in proxy.links[1:])
        proxy.blackhole()
        started = time.monotonic()
        for link in proxy.links[1:]:
            assert link.client_gone.wait(10)
        elapsed = time.monotonic() - started
        assert TIME - 0.05 <= elapsed <= TIME + TIMEOUT + 2 * SLACK, elapsed
    finally:
        for channel in channels:
            channel.close()
        proxy.close()
        server.stop()
