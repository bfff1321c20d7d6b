"""Client workloads, each run in a fresh child process that prints one JSON object.

Why a child per measurement: importing grpcio starts its own threads and grpclib its event loop;
running each client alone keeps one library's background work out of another's numbers, and
keeps the harness (which forks the cold-start runs) small.  The harness runs::

    python -m bench.workloads latency    --client minigrpc --socket PATH --calls N --size 200
    python -m bench.workloads large      --client grpcio   --socket PATH --sizes 4194304 --reps 5
    python -m bench.workloads throughput --client grpcio   --socket PATH --threads 8 --calls 1000
    python -m bench.workloads stream     --client grpclib  --socket PATH --count 10000 --size 16
    python -m bench.workloads paired-latency --client minigrpc --target T --b-option NAME=VALUE
    python -m bench.workloads paired-throughput --client minigrpc --target T --b-option ...

and reads the JSON from stdout.  The grpcio-API clients (``grpcio``, ``minigrpc`` and the
asyncio ones) also take ``--target`` (any target, such as an ``ipv4:`` address list, in place of
the socket) and ``--option NAME=VALUE`` (a channel option; repeatable), which the long-lived
channel rows use (:mod:`bench.channels`).

Every client calls ``/bench.Echo/Echo`` (:mod:`bench.peers`) with identity serializers and
checks that the echo came back unchanged, so a broken library fails its row instead of producing
a fast but meaningless number.

Clients: ``grpcio``, ``minigrpc`` (same synchronous API), ``grpclib`` (asyncio), ``raw`` (the
length-prefixed socket floor, only against the raw server); for the latency workload also
``minigrpc-aio`` and ``grpcio-aio`` (grpc.aio's API, asyncio), which also run the throughput
workload (as many tasks as threads, on one channel).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from bench.peers import (
    ECHO_PATH,
    RAW_HEADER,
    STREAM_PATH,
    UNLIMITED_MESSAGE_OPTIONS,
    RawCodec,
    recv_exactly,
    stream_request,
)

CLIENT_IMPLS = ("grpcio", "minigrpc", "grpclib", "raw", "minigrpc-aio", "grpcio-aio")
#: Clients on grpc.aio's API, from minigrpc (``minigrpc.aio``) or grpcio (``grpc.aio``): the
#: same coroutine measures both (the latency workload only).
AIO_CLIENTS = ("minigrpc-aio", "grpcio-aio")

#: The A/B workloads: two channels in one process, taking turns (:class:`Pair`).
PAIRED_WORKLOADS = ("paired-latency", "paired-throughput")

#: Calls made before timing starts: connection set-up, HPACK tables, windows, thread pools.
DEFAULT_WARMUP = 200

EchoCall = Callable[[bytes], bytes]
#: Channel options, as grpcio takes them.
Options = Sequence[Tuple[str, Any]]


def make_payload(size: int) -> bytes:
    """``size`` bytes of a fixed, non-repeating-per-byte pattern (the same for every client)."""
    pattern = bytes(range(256))
    return (pattern * (size // 256 + 1))[:size]


class EchoMismatch(RuntimeError):
    """The server's reply was not the request: the row is reported as failed."""


def _check_echo(sent: bytes, received: Any) -> None:
    if len(received) != len(sent) or bytes(received) != sent:
        raise EchoMismatch(f"echo mismatch: sent {len(sent)} bytes, got {len(received)}")


# ---------------------------------------------------------------------------------------------
# Synchronous clients (grpcio, minigrpc, raw).


def _grpc_api_module(client: str) -> Any:
    if client == "grpcio":
        import grpc

        return grpc
    import minigrpc

    return minigrpc


def open_sync_client(
    client: str, socket_path: str, *, unlimited: bool = False, separate_connection: bool = False,
    target: Optional[str] = None, options: Options = ()
) -> Tuple[EchoCall, Callable[[], None]]:
    """Returns ``(echo, close)`` for a synchronous client of ``client``.

    ``unlimited`` lifts the 4 MiB message limits; ``separate_connection`` asks grpcio for a
    channel that does not share its connection with other channels of this process (grpcio
    pools subchannels globally; minigrpc channels never share).  ``target`` replaces the
    socket's and ``options`` are added to the channel's (not for ``raw``)."""
    if client == "raw":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        lock = threading.Lock()

        def raw_echo(payload: bytes) -> bytes:
            with lock:
                sock.sendall(len(payload).to_bytes(RAW_HEADER, "big") + payload)
                header = recv_exactly(sock, RAW_HEADER)
                if header is None:
                    raise ConnectionError("raw echo server closed the connection")
                body = recv_exactly(sock, int.from_bytes(header, "big"))
                if body is None:
                    raise ConnectionError("raw echo server closed the connection")
                return bytes(body)

        return raw_echo, sock.close

    module = _grpc_api_module(client)
    channel_options: List[Tuple[str, Any]] = list(UNLIMITED_MESSAGE_OPTIONS) if unlimited else []
    if separate_connection and client == "grpcio":
        channel_options.append(("grpc.use_local_subchannel_pool", 1))
    channel_options += options
    channel = module.insecure_channel(target or "unix:" + socket_path,
                                      options=channel_options or None)
    multicallable = channel.unary_unary(ECHO_PATH)
    return multicallable, channel.close


# ---------------------------------------------------------------------------------------------
# Workloads.


def latency(client: str, socket_path: str, size: int, calls: int, warmup: int,
            target: Optional[str] = None, options: Options = ()) -> Dict[str, Any]:
    """Per-call round trip in microseconds, one call at a time on one warm connection, and
    the client process's CPU time per call (all its threads: grpcio's pollers count too)."""
    payload = make_payload(size)
    if client == "grpclib" or client in AIO_CLIENTS:
        measure = _aio_latency(client, target or "unix:" + socket_path, options) if (
            client in AIO_CLIENTS) else _grpclib_latency(socket_path)
        samples, cpu_seconds = _grpclib_run(measure(payload, calls, warmup))
        return {"samples_us": samples, "cpu_us_per_call": cpu_seconds / calls * 1e6}
    echo, close = open_sync_client(client, socket_path, target=target, options=options)
    samples_ns: List[int] = []
    try:
        for _ in range(warmup):
            _check_echo(payload, echo(payload))
        cpu_seconds = _timed_sync_calls(echo, payload, calls, samples_ns)
    finally:
        close()
    return {"samples_us": [value / 1000.0 for value in samples_ns],
            "cpu_us_per_call": cpu_seconds / calls * 1e6}


def _timed_sync_calls(echo: EchoCall, payload: bytes, calls: int, samples_ns: List[int]
                      ) -> float:
    """``calls`` timed calls, one at a time: appends each round trip (ns) to ``samples_ns`` and
    returns the process's CPU seconds over them."""
    clock = time.perf_counter_ns
    append = samples_ns.append
    reply = b""
    cpu_started = time.process_time()
    for _ in range(calls):
        started = clock()
        reply = echo(payload)
        append(clock() - started)
    cpu_seconds = time.process_time() - cpu_started
    _check_echo(payload, reply)
    return cpu_seconds


class Pair(NamedTuple):
    """An A/B of the paired workloads: two channels to one target, ``a`` with the common
    options and ``a_options``, ``b`` with the common options and ``b_options``, taking turns in
    ``blocks`` blocks each (A B B A A B ..., or B first).  Runs in separate processes differ by
    more than a few percent on a busy machine; blocks a fraction of a second apart see the same
    machine, which is what a target of a few percent needs."""

    target: str
    options: Options
    a_options: Options
    b_options: Options
    blocks: int
    b_first: bool

    def channel_options(self) -> Dict[str, List[Tuple[str, Any]]]:
        return {"a": [*self.options, *self.a_options], "b": [*self.options, *self.b_options]}

    def turns(self) -> List[str]:
        """``a`` and ``b`` in the order their blocks run."""
        order = ["b", "a"] if self.b_first else ["a", "b"]
        return [key for block in range(max(1, self.blocks))
                for key in (order if block % 2 == 0 else order[::-1])]

    def per_block(self, calls: int) -> int:
        return max(1, calls // max(1, self.blocks))


def paired_latency(client: str, pair: Pair, size: int, calls: int, warmup: int
                   ) -> Dict[str, Any]:
    """The latency workload as an A/B in one process (:class:`Pair`): ``{"a": ..., "b":
    ...}``, each as :func:`latency` returns it."""
    payload = make_payload(size)
    ends = {key: open_sync_client(client, "", target=pair.target, options=options)
            for key, options in pair.channel_options().items()}
    samples_ns: Dict[str, List[int]] = {"a": [], "b": []}
    cpu_seconds = {"a": 0.0, "b": 0.0}
    try:
        for echo, _ in ends.values():
            for _ in range(warmup):
                _check_echo(payload, echo(payload))
        for key in pair.turns():
            cpu_seconds[key] += _timed_sync_calls(ends[key][0], payload, pair.per_block(calls),
                                                  samples_ns[key])
    finally:
        for _, close in ends.values():
            close()
    return {key: {"samples_us": [value / 1000.0 for value in samples_ns[key]],
                  "cpu_us_per_call": cpu_seconds[key] / len(samples_ns[key]) * 1e6}
            for key in ends}


def paired_throughput(client: str, pair: Pair, size: int, threads: int, calls: int
                      ) -> Dict[str, Any]:
    """The throughput workload as an A/B in one process (:class:`Pair`): each block is
    ``threads`` threads (tasks for the asyncio clients) × a block's share of ``calls``, on one
    channel.  ``{"a": ..., "b": ...}``, each as :func:`throughput` returns it."""
    payload = make_payload(size)
    per_block = pair.per_block(calls)
    spent = {"a": [0.0, 0.0], "b": [0.0, 0.0]}  # wall and CPU seconds
    if client in AIO_CLIENTS:
        _grpclib_run(_aio_paired_throughput(client, pair, payload, threads, per_block, spent))
    else:
        ends = {key: open_sync_client(client, "", target=pair.target, options=options)
                for key, options in pair.channel_options().items()}
        try:
            for echo, _ in ends.values():
                for _ in range(20):
                    _check_echo(payload, echo(payload))
            for key in pair.turns():
                elapsed, cpu_seconds = _threaded_calls([ends[key][0]], payload, threads,
                                                       per_block)
                spent[key][0] += elapsed
                spent[key][1] += cpu_seconds
        finally:
            for _, close in ends.values():
                close()
    total = threads * per_block * max(1, pair.blocks)
    return {key: _rate(total, wall, cpu) for key, (wall, cpu) in spent.items()}


async def _aio_paired_throughput(client: str, pair: Pair, payload: bytes, tasks: int,
                                 per_block: int, spent: Dict[str, List[float]]) -> None:
    aio = _aio_module(client)
    channels = {key: aio.insecure_channel(pair.target, options=options or None)
                for key, options in pair.channel_options().items()}
    try:
        echoes = {key: channel.unary_unary(ECHO_PATH) for key, channel in channels.items()}
        for echo in echoes.values():
            for _ in range(20):
                _check_echo(payload, await echo(payload))
        for key in pair.turns():
            elapsed, cpu_seconds = await _task_calls(echoes[key], payload, tasks, per_block)
            spent[key][0] += elapsed
            spent[key][1] += cpu_seconds
    finally:
        for channel in channels.values():
            await channel.close()


def large(client: str, socket_path: str, sizes: Sequence[int], reps: Sequence[int]
          ) -> Dict[str, Any]:
    """Echo throughput in MB/s (10**6 bytes of message per second of round trip) per size.

    Each size is warmed by one untimed call (windows and buffers grow), then timed ``reps``
    times; every reply is compared with the request."""
    if client == "grpclib":
        return {"mb_per_s": _grpclib_run(_grpclib_large(socket_path, sizes, reps))}
    echo, close = open_sync_client(client, socket_path, unlimited=True)
    results: Dict[str, List[float]] = {}
    try:
        for size, count in zip(sizes, reps):
            payload = make_payload(size)
            _check_echo(payload, echo(payload))
            rates = []
            for _ in range(count):
                started = time.perf_counter()
                reply = echo(payload)
                elapsed = time.perf_counter() - started
                _check_echo(payload, reply)
                del reply
                rates.append(size / 1e6 / elapsed)
            results[str(size)] = rates
    finally:
        close()
    return {"mb_per_s": results}


def throughput(
    client: str, socket_path: str, size: int, threads: int, calls: int, connections: str,
    target: Optional[str] = None, options: Options = ()
) -> Dict[str, Any]:
    """``threads`` threads × ``calls`` calls each, all released together by a barrier.

    ``connections``: ``shared`` (one channel for all threads, the usual way to use grpcio) or
    ``per-thread`` (one channel, hence one HTTP/2 connection, per thread).  The asyncio
    clients run as many tasks on one channel."""
    payload = make_payload(size)
    if client == "grpclib":
        result: Dict[str, Any] = _grpclib_run(
            _grpclib_throughput(socket_path, payload, threads, calls))
        return result
    if client in AIO_CLIENTS:
        result = _grpclib_run(_aio_throughput(client, target or "unix:" + socket_path, options,
                                              payload, threads, calls))
        return result
    per_thread = connections == "per-thread"
    clients = [
        open_sync_client(client, socket_path, separate_connection=per_thread, target=target,
                         options=options)
        for _ in range(threads if per_thread else 1)
    ]
    try:
        for echo, _ in clients:
            for _ in range(20):
                _check_echo(payload, echo(payload))
        elapsed, cpu_seconds = _threaded_calls([echo for echo, _ in clients], payload, threads,
                                               calls)
    finally:
        for _, close in clients:
            close()
    return _rate(threads * calls, elapsed, cpu_seconds)


def _threaded_calls(echoes: Sequence[EchoCall], payload: bytes, threads: int, calls: int
                    ) -> Tuple[float, float]:
    """``threads`` threads (thread i calls ``echoes[i % len(echoes)]``) × ``calls`` calls
    each, released together by a barrier: (wall seconds, the process's CPU seconds)."""
    barrier = threading.Barrier(threads + 1)
    errors: List[str] = []

    def worker(echo: EchoCall) -> None:
        barrier.wait()
        try:
            reply = b""
            for _ in range(calls):
                reply = echo(payload)
            _check_echo(payload, reply)
        except Exception as exc:  # reported in the row, the harness carries on
            errors.append(f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=worker, args=(echoes[index % len(echoes)],))
               for index in range(threads)]
    for thread in workers:
        thread.start()
    barrier.wait()
    started, cpu_started = time.perf_counter(), time.process_time()
    for thread in workers:
        thread.join()
    elapsed, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    if errors:
        raise RuntimeError(f"{len(errors)} client threads failed; first: {errors[0]}")
    return elapsed, cpu_seconds


def _rate(total: int, elapsed: float, cpu_seconds: float) -> Dict[str, Any]:
    """A throughput run's result: calls/s, and the client process's CPU per call (all its
    threads), which another process's load hardly moves."""
    return {"calls": total, "seconds": elapsed, "calls_per_s": total / elapsed,
            "cpu_us_per_call": cpu_seconds / total * 1e6}


# ---------------------------------------------------------------------------------------------
# grpclib (asyncio) versions of the same loops.


def stream(client: str, socket_path: str, count: int, size: int, reps: int) -> Dict[str, Any]:
    """Messages per second of a server stream of ``count`` messages of ``size`` bytes.

    One untimed stream first (connection, windows), then ``reps`` timed ones; every stream
    must deliver exactly ``count`` messages of ``size`` bytes."""
    request = stream_request(count, size)
    if client == "grpclib":
        return {"messages_per_s": _grpclib_run(_grpclib_stream(socket_path, request, count,
                                                                size, reps))}
    module = _grpc_api_module(client)
    channel = module.insecure_channel("unix:" + socket_path)
    call = channel.unary_stream(STREAM_PATH)
    rates: List[float] = []
    try:
        for rep in range(reps + 1):
            started = time.perf_counter()
            received = 0
            for message in call(request):
                if len(message) != size:
                    raise EchoMismatch(f"stream message of {len(message)} bytes, not {size}")
                received += 1
            elapsed = time.perf_counter() - started
            if received != count:
                raise EchoMismatch(f"stream of {received} messages, not {count}")
            if rep:
                rates.append(count / elapsed)
    finally:
        channel.close()
    return {"messages_per_s": rates}


async def _grpclib_stream(socket_path: str, request: bytes, count: int, size: int, reps: int
                          ) -> List[float]:
    from grpclib.client import Channel, UnaryStreamMethod

    channel = Channel(path=socket_path, codec=RawCodec())  # type: ignore[arg-type]
    method = UnaryStreamMethod(channel, STREAM_PATH, bytes, bytes)
    rates: List[float] = []
    try:
        for rep in range(reps + 1):
            started = time.perf_counter()
            received = 0
            async with method.open() as call:
                await call.send_message(request, end=True)
                async for message in call:
                    if len(message) != size:
                        raise EchoMismatch(f"stream message of {len(message)} bytes")
                    received += 1
            elapsed = time.perf_counter() - started
            if received != count:
                raise EchoMismatch(f"stream of {received} messages, not {count}")
            if rep:
                rates.append(count / elapsed)
    finally:
        channel.close()
    return rates


def _grpclib_run(coroutine: Any) -> Any:
    import asyncio

    return asyncio.run(coroutine)


def _grpclib_method(socket_path: str) -> Tuple[Any, Any]:
    from grpclib.client import Channel, UnaryUnaryMethod

    channel = Channel(path=socket_path, codec=RawCodec())  # type: ignore[arg-type]
    return channel, UnaryUnaryMethod(channel, ECHO_PATH, bytes, bytes)


AsyncEcho = Callable[[bytes], Awaitable[bytes]]
LatencyRun = Callable[[bytes, int, int], Awaitable[Tuple[List[float], float]]]


def _grpclib_latency(socket_path: str) -> LatencyRun:
    async def measure(payload: bytes, calls: int, warmup: int) -> Tuple[List[float], float]:
        channel, method = _grpclib_method(socket_path)
        try:
            return await _timed_calls(method, payload, calls, warmup)
        finally:
            channel.close()

    return measure


def _aio_module(client: str) -> Any:
    """grpc.aio's API: ``minigrpc.aio`` or grpcio's ``grpc.aio``."""
    if client == "grpcio-aio":
        from grpc import aio
    else:
        from minigrpc import aio
    return aio


def _aio_latency(client: str, target: str, options: Options) -> LatencyRun:
    """The latency loop on grpc.aio's API."""
    aio = _aio_module(client)

    async def measure(payload: bytes, calls: int, warmup: int) -> Tuple[List[float], float]:
        async with aio.insecure_channel(target, options=list(options) or None) as channel:
            return await _timed_calls(channel.unary_unary(ECHO_PATH), payload, calls, warmup)

    return measure


async def _aio_throughput(client: str, target: str, options: Options, payload: bytes,
                          tasks: int, calls: int) -> Dict[str, Any]:
    """The throughput workload on grpc.aio's API: ``tasks`` tasks on one channel."""
    aio = _aio_module(client)
    async with aio.insecure_channel(target, options=list(options) or None) as channel:
        return await _tasks_throughput(channel.unary_unary(ECHO_PATH), payload, tasks, calls)


async def _timed_calls(echo: AsyncEcho, payload: bytes, calls: int, warmup: int
                       ) -> Tuple[List[float], float]:
    """``warmup`` untimed calls, then ``calls`` timed ones: (µs per call, CPU seconds)."""
    for _ in range(warmup):
        _check_echo(payload, await echo(payload))
    clock = time.perf_counter_ns
    samples_ns: List[int] = []
    reply = b""
    cpu_started = time.process_time()
    for _ in range(calls):
        started = clock()
        reply = await echo(payload)
        samples_ns.append(clock() - started)
    cpu_seconds = time.process_time() - cpu_started
    _check_echo(payload, reply)
    return [value / 1000.0 for value in samples_ns], cpu_seconds


async def _grpclib_large(
    socket_path: str, sizes: Sequence[int], reps: Sequence[int]
) -> Dict[str, List[float]]:
    channel, method = _grpclib_method(socket_path)
    results: Dict[str, List[float]] = {}
    try:
        for size, count in zip(sizes, reps):
            payload = make_payload(size)
            _check_echo(payload, await method(payload))
            rates = []
            for _ in range(count):
                started = time.perf_counter()
                reply = await method(payload)
                elapsed = time.perf_counter() - started
                _check_echo(payload, reply)
                del reply
                rates.append(size / 1e6 / elapsed)
            results[str(size)] = rates
    finally:
        channel.close()
    return results


async def _grpclib_throughput(
    socket_path: str, payload: bytes, tasks: int, calls: int
) -> Dict[str, Any]:
    """grpclib is single-threaded: ``tasks`` coroutines stand in for the client threads."""
    channel, method = _grpclib_method(socket_path)
    try:
        return await _tasks_throughput(method, payload, tasks, calls)
    finally:
        channel.close()


async def _tasks_throughput(echo: AsyncEcho, payload: bytes, tasks: int, calls: int
                            ) -> Dict[str, Any]:
    """20 untimed calls, then ``tasks`` coroutines × ``calls`` calls, started together."""
    for _ in range(20):
        _check_echo(payload, await echo(payload))
    return _rate(tasks * calls, *await _task_calls(echo, payload, tasks, calls))


async def _task_calls(echo: AsyncEcho, payload: bytes, tasks: int, calls: int
                      ) -> Tuple[float, float]:
    """``tasks`` coroutines × ``calls`` calls, started together: (wall seconds, the process's
    CPU seconds)."""
    import asyncio

    async def worker() -> None:
        reply = b""
        for _ in range(calls):
            reply = await echo(payload)
        _check_echo(payload, reply)

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return time.perf_counter() - started, time.process_time() - cpu_started


# ---------------------------------------------------------------------------------------------
# Command line.


def _int_list(text: str) -> List[int]:
    return [int(part) for part in text.split(",") if part]


def _option(text: str) -> Tuple[str, Any]:
    """``NAME=VALUE`` as a channel option: the value an int where it reads as one (as gRPC
    core's integer arguments are), else the string (a service config's JSON)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--option takes NAME=VALUE, not {text!r}")
    try:
        return name, int(value)
    except ValueError:
        return name, value


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workloads")
    parser.add_argument("workload", choices=("latency", "large", "throughput", "stream",
                                             *PAIRED_WORKLOADS))
    parser.add_argument("--client", choices=CLIENT_IMPLS, required=True)
    parser.add_argument("--socket", default="", help="the server's unix socket")
    parser.add_argument("--size", type=int, default=200, help="payload bytes (latency, throughput)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    parser.add_argument("--sizes", type=_int_list, default=[4 << 20])
    parser.add_argument("--reps", type=_int_list, default=[5])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--connections", choices=("shared", "per-thread"), default="shared")
    parser.add_argument("--count", type=int, default=10000, help="messages per stream (stream)")
    parser.add_argument("--profile", help="dump a cProfile of the workload (not its imports)")
    parser.add_argument("--target", help="the channel's target, in place of the socket's "
                        "(latency, throughput; the grpcio-API clients)")
    parser.add_argument("--option", type=_option, action="append", default=[],
                        metavar="NAME=VALUE", help="a channel option (repeatable)")
    for side in ("a", "b"):
        parser.add_argument(f"--{side}-option", type=_option, action="append", default=[],
                            metavar="NAME=VALUE", help=f"paired-*: a channel option of the "
                            f"{side.upper()} channel only (repeatable)")
    parser.add_argument("--blocks", type=int, default=10,
                        help="paired-*: blocks of calls per channel, taking turns")
    parser.add_argument("--b-first", action="store_true",
                        help="paired-*: the B channel's block first")
    options = parser.parse_args(argv)
    if not options.socket and not (options.target and options.workload in (
            "latency", "throughput", *PAIRED_WORKLOADS)):
        parser.error("--socket is required (--target may replace it for latency, throughput "
                     "and the paired workloads)")
    if options.workload in PAIRED_WORKLOADS and not options.target:
        parser.error(f"{options.workload} takes --target")
    pair = Pair(options.target or "", options.option, options.a_option, options.b_option,
                options.blocks, options.b_first)
    profiler = None
    if options.profile:
        import cProfile

        if options.client in ("grpcio", "minigrpc"):
            module = _grpc_api_module(options.client)
            module.insecure_channel  # noqa: B018 - load the client modules before profiling
        profiler = cProfile.Profile()
        profiler.enable()
    try:
        if options.workload == "latency":
            result = latency(options.client, options.socket, options.size, options.calls,
                             options.warmup, options.target, options.option)
        elif options.workload == "paired-latency":
            result = paired_latency(options.client, pair, options.size, options.calls,
                                    options.warmup)
        elif options.workload == "paired-throughput":
            result = paired_throughput(options.client, pair, options.size, options.threads,
                                       options.calls)
        elif options.workload == "large":
            result = large(options.client, options.socket, options.sizes, options.reps)
        elif options.workload == "stream":
            result = stream(options.client, options.socket, options.count, options.size,
                            options.reps[0])
        else:
            result = throughput(options.client, options.socket, options.size, options.threads,
                                options.calls, options.connections, options.target,
                                options.option)
    except Exception as exc:  # one line for the report, never a traceback on the console
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(options.profile)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
