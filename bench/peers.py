"""Benchmark servers, each in its own process, and the harness side that starts and stops them.

Why separate processes: a client and a server that share an interpreter share its GIL, and the
numbers would say more about the GIL than about either library.  The harness therefore starts
every server as a child (``python -m bench.peers --impl NAME --socket PATH``), waits for its
readiness line and talks to it from another child (:mod:`bench.workloads`).  All of them belong
to one process tree, so a run never leaves anything behind.

Every server offers the same method, ``/bench.Echo/Echo``, that returns the request bytes as
the response.  Serializers are the identity on every side (grpcio and minigrpc: no
(de)serializer; grpclib: :class:`RawCodec`), so no library pays for protobuf and the payload is
exactly the same bytes for all of them.  The raw socket server is the floor: the same echo with
a 4-byte length prefix and no HTTP/2 at all.

A child server prints ``READY <target>`` once it listens, then serves until its stdin reaches
EOF (the harness closes it; if the harness dies, the pipe closes too) or it gets SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any, Dict, Optional, Sequence, Tuple

#: The echo method every benchmark server implements.
ECHO_SERVICE = "bench.Echo"
ECHO_METHOD = "Echo"
ECHO_PATH = f"/{ECHO_SERVICE}/{ECHO_METHOD}"
#: The server-streaming method: the request is ``b"<count> <size>"`` (ASCII); the answer is
#: ``count`` messages of ``size`` bytes each.
STREAM_METHOD = "Stream"
STREAM_PATH = f"/{ECHO_SERVICE}/{STREAM_METHOD}"

#: minigrpc's server with ``minigrpc.unary_handlers_on_io_thread``: its unary handlers run on the
#: I/O thread, as grpclib's run on its event loop (the streaming handler still on the pool).
IO_THREAD_SERVER_IMPL = "minigrpc-io-thread"
IO_THREAD_OPTIONS = (("minigrpc.unary_handlers_on_io_thread", 1),)
#: The asyncio servers (``grpc.aio.server()``): minigrpc's and grpcio's, ``async def`` handlers
#: on one event loop, as grpclib's.
AIO_SERVER_IMPLS = ("minigrpc-aio", "grpcio-aio")
#: Server implementations this module can start.
SERVER_IMPLS = (
    "grpcio",
    "minigrpc",
    "grpclib",
    "raw",
    "cni-agent-grpcio",
    IO_THREAD_SERVER_IMPL,
    *AIO_SERVER_IMPLS,
)

#: Thread pool size of the thread-per-call servers (grpcio, minigrpc): one per client thread of
#: the throughput workload, so neither server queues calls behind a too small pool.
SERVER_WORKERS = 8

#: grpcio-style channel/server options lifting the 4 MiB default message limits (64 MiB tests).
UNLIMITED_MESSAGE_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
)

#: Raw echo framing: 4-byte big-endian payload length.
RAW_HEADER = 4

READY_PREFIX = "READY "


# ---------------------------------------------------------------------------------------------
# Child side: the servers.


def _echo(request: bytes, context: Any) -> bytes:
    return request


def stream_request(count: int, size: int) -> bytes:
    return f"{count} {size}".encode("ascii")


def _parse_stream_request(request: bytes) -> tuple[int, bytes]:
    count, size = (int(part) for part in bytes(request).split())
    return count, bytes(size)


def _stream(request: bytes, context: Any) -> Any:
    count, message = _parse_stream_request(request)
    for _ in range(count):
        yield message


def _serve_grpc_api(
    module: Any, address: str, workers: int, options: Sequence[Tuple[str, Any]] = ()
) -> Tuple[Any, int]:
    """grpcio and minigrpc share the server API (``server``, generic handlers, ports).

    ``address`` is a port address (``unix:PATH`` or ``127.0.0.1:0``); returns the server and
    the port it bound (0 for a unix socket)."""
    from concurrent import futures

    handler = module.method_handlers_generic_handler(
        ECHO_SERVICE,
        {
            ECHO_METHOD: module.unary_unary_rpc_method_handler(_echo),
            STREAM_METHOD: module.unary_stream_rpc_method_handler(_stream),
        },
    )
    server = module.server(
        futures.ThreadPoolExecutor(max_workers=workers),
        options=list(UNLIMITED_MESSAGE_OPTIONS) + list(options),
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(address)
    server.start()
    return server, port


async def _echo_async(request: bytes, context: Any) -> bytes:
    return request


async def _stream_async(request: bytes, context: Any) -> Any:
    count, message = _parse_stream_request(request)
    for _ in range(count):
        yield message


def _serve_aio(impl: str, socket_path: str, stop_requested: threading.Event) -> None:
    """``grpc.aio.server()`` of minigrpc or grpcio on this thread's event loop until
    ``stop_requested``; the handlers are coroutines, as an asyncio application writes them."""
    import asyncio

    module: Any = importlib.import_module("minigrpc" if impl == "minigrpc-aio" else "grpc")
    aio: Any = importlib.import_module(f"{module.__name__}.aio")

    async def run() -> None:
        handler = module.method_handlers_generic_handler(
            ECHO_SERVICE,
            {
                ECHO_METHOD: module.unary_unary_rpc_method_handler(_echo_async),
                STREAM_METHOD: module.unary_stream_rpc_method_handler(_stream_async),
            },
        )
        server = aio.server(options=list(UNLIMITED_MESSAGE_OPTIONS))
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port("unix:" + socket_path)
        await server.start()
        _announce("unix:" + socket_path)
        await _stop_requested_on_loop(stop_requested)
        await server.stop(None)

    asyncio.run(run())


def _serve_cni_agent_grpcio(socket_path: str, workers: int) -> Any:
    """A stand-in antrea-agent on grpcio, used only while ``cni_client.agent`` does not exist.

    ADD answers with a fixed 0.3.0 result; CHECK and DEL with an empty result
    (docs/cni-plugin-behaviour.md, "The agent side")."""
    from concurrent import futures

    import grpc

    from cni_client import cni_pb2

    result = (
        b'{"cniVersion":"0.3.0","interfaces":[{"name":"bench-veth","mac":"6e:2f:8a:11:04:c3"},'
        b'{"name":"eth0","mac":"8a:31:5c:02:9d:e4","sandbox":"/host/var/run/netns/bench"}],'
        b'"ips":[{"version":"4","interface":1,"address":"10.10.1.5/24","gateway":"10.10.1.1"}],'
        b'"routes":[{"dst":"0.0.0.0/0","gw":"10.10.1.1"}],"dns":{}}'
    )

    def add(request: Any, context: Any) -> Any:
        return cni_pb2.CniCmdResponse(cni_result=result)

    def empty(request: Any, context: Any) -> Any:
        return cni_pb2.CniCmdResponse()

    def handler(behavior: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=cni_pb2.CniCmdRequest.FromString,
            response_serializer=cni_pb2.CniCmdResponse.SerializeToString,
        )

    generic = grpc.method_handlers_generic_handler(
        "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni",
        {"CmdAdd": handler(add), "CmdCheck": handler(empty), "CmdDel": handler(empty)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers((generic,))
    server.add_insecure_port("unix:" + socket_path)
    server.start()
    return server


class RawCodec:
    """grpclib codec that passes bytes through, so grpclib does the same work as the others.

    The content subtype is ``proto`` because grpclib's server accepts a plain
    ``application/grpc`` (what grpcio and minigrpc send) only as the proto subtype."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


def _grpclib_echo_service() -> Any:
    from grpclib.const import Cardinality, Handler

    class EchoService:
        async def echo(self, stream: Any) -> None:
            request = await stream.recv_message()
            await stream.send_message(request)

        async def stream(self, stream: Any) -> None:
            count, message = _parse_stream_request(await stream.recv_message())
            for _ in range(count):
                await stream.send_message(message)

        def __mapping__(self) -> Dict[str, Any]:
            return {
                ECHO_PATH: Handler(self.echo, Cardinality.UNARY_UNARY, bytes, bytes),
                STREAM_PATH: Handler(self.stream, Cardinality.UNARY_STREAM, bytes, bytes),
            }

    return EchoService()


async def _stop_requested_on_loop(stop_requested: threading.Event) -> None:
    """Wait on the running event loop until ``stop_requested`` is set (from any thread)."""
    import asyncio

    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    threading.Thread(
        target=lambda: (stop_requested.wait(), loop.call_soon_threadsafe(stopped.set)),
        daemon=True,
    ).start()
    await stopped.wait()


def _serve_grpclib(socket_path: str, stop_requested: threading.Event) -> None:
    """grpclib's server is asyncio: run it on this thread until ``stop_requested``."""
    import asyncio

    from grpclib.server import Server

    async def run() -> None:
        server = Server([_grpclib_echo_service()], codec=RawCodec())  # type: ignore[arg-type]
        await server.start(path=socket_path)
        _announce("unix:" + socket_path)
        await _stop_requested_on_loop(stop_requested)
        server.close()
        await server.wait_closed()

    asyncio.run(run())


def recv_exactly(sock: socket.socket, count: int) -> Optional[bytearray]:
    """Read exactly ``count`` bytes, or None at EOF before that."""
    buffer = bytearray(count)
    view = memoryview(buffer)
    received = 0
    while received < count:
        chunk = sock.recv_into(view[received:], count - received)
        if chunk == 0:
            return None
        received += chunk
    return buffer


def _serve_raw(socket_path: str) -> Any:
    """The floor: length-prefixed echo on a plain unix socket, one thread per connection."""
    import socketserver

    class EchoHandler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            while True:
                header = recv_exactly(sock, RAW_HEADER)
                if header is None:
                    return
                body = recv_exactly(sock, int.from_bytes(header, "big"))
                if body is None:
                    return
                sock.sendall(bytes(header) + body)

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = Server(socket_path, EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _announce(target: str) -> None:
    sys.stdout.write(READY_PREFIX + target + "\n")
    sys.stdout.flush()


def _wait_for_stop(stop_requested: threading.Event) -> None:
    """Set ``stop_requested`` when stdin reaches EOF (the harness closed it or died)."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            stop_requested.set()

    threading.Thread(target=watch, daemon=True).start()


#: The servers that can listen on loopback TCP instead of a unix socket (``--tcp``).
TCP_SERVER_IMPLS = ("grpcio", "minigrpc")


def serve(impl: str, socket_path: str, workers: int, profile_path: Optional[str] = None,
          tcp: bool = False) -> int:
    """Run one server until stdin closes; returns the exit status.

    With ``profile_path``, every thread of the server is profiled (cProfile) from just before
    the server starts until it stops, and the merged stats are dumped there.  With ``tcp``
    (:data:`TCP_SERVER_IMPLS` only), it listens on a free port of 127.0.0.1 instead of
    ``socket_path``, and its readiness line names it (``READY ipv4:127.0.0.1:PORT``): an
    address list of several such servers is how the benchmarks reach more than one."""
    if tcp and impl not in TCP_SERVER_IMPLS:
        raise SystemExit(f"--tcp: {impl!r} serves unix sockets only")
    address = "127.0.0.1:0" if tcp else "unix:" + socket_path
    stop_requested = threading.Event()
    _wait_for_stop(stop_requested)
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.set())
    profiler = None
    if profile_path is not None:
        from bench.profiles import ThreadProfiler

        profiler = ThreadProfiler()
    if impl == "grpclib":
        _serve_grpclib(socket_path, stop_requested)
        return 0
    if impl in AIO_SERVER_IMPLS:
        if profiler is not None:
            importlib.import_module("minigrpc.aio" if impl == "minigrpc-aio" else "grpc.aio")
            profiler.start()  # the event loop's thread is this one
        _serve_aio(impl, socket_path, stop_requested)
        _dump_profile(profiler, profile_path)
        return 0
    port = 0  # the port bound, with tcp
    if impl == "grpcio":
        import grpc

        server, port = _serve_grpc_api(grpc, address, workers)
    elif impl in ("minigrpc", IO_THREAD_SERVER_IMPL):
        import minigrpc

        importlib.import_module("minigrpc.blocking.server_api")  # loaded before profiling starts
        if profiler is not None:
            profiler.start()
        options = IO_THREAD_OPTIONS if impl == IO_THREAD_SERVER_IMPL else ()
        server, port = _serve_grpc_api(minigrpc, address, workers, options)
    elif impl == "raw":
        server = _serve_raw(socket_path)
    elif impl == "cni-agent-grpcio":
        server = _serve_cni_agent_grpcio(socket_path, workers)
    else:
        raise SystemExit(f"unknown server implementation {impl!r}")
    _announce(f"ipv4:127.0.0.1:{port}" if tcp else "unix:" + socket_path)
    stop_requested.wait()
    if impl == "raw":
        server.shutdown()
        server.server_close()
    else:
        server.stop(None).wait(15)
    _dump_profile(profiler, profile_path)
    return 0


def _dump_profile(profiler: Any, profile_path: Optional[str]) -> None:
    if profiler is not None and profile_path is not None:
        stats = profiler.stats()
        if stats is not None:
            stats.dump_stats(profile_path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    parser.add_argument("--impl", choices=SERVER_IMPLS, required=True)
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--tcp", action="store_true",
                        help="listen on a free port of 127.0.0.1 instead (servers: "
                        f"{', '.join(TCP_SERVER_IMPLS)})")
    parser.add_argument("--workers", type=int, default=SERVER_WORKERS)
    parser.add_argument("--profile", help="minigrpc and the asyncio servers: dump a cProfile of "
                        "all threads here")
    options = parser.parse_args(argv)
    return serve(options.impl, options.socket, options.workers, options.profile, options.tcp)


# ---------------------------------------------------------------------------------------------
# Harness side.


class PeerError(RuntimeError):
    """A peer did not start: the message carries its stderr tail."""


class PeerProcess:
    """A child server: started with a command, ready once it printed a line, stopped on exit.

    ``ready_prefix`` is the start of the readiness line (None: any line will do, e.g. the
    reference agent, whose exact wording is its own business).  Waiting uses ``select`` on
    the child's stdout with a deadline: no sleeping, no polling loop on the socket file."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        ready_prefix: Optional[str] = READY_PREFIX,
        ready_timeout: float = 60.0,
        stops_on_stdin_eof: bool = True,
    ) -> None:
        self.name = name
        self._command = list(command)
        self._cwd = cwd
        self._env = env
        self._ready_prefix = ready_prefix
        self._ready_timeout = ready_timeout
        self._stops_on_stdin_eof = stops_on_stdin_eof
        self._stderr: Optional[IO[bytes]] = None
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.ready_line = ""

    def start(self) -> PeerProcess:
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=self._cwd,
            env=self._env,
        )
        try:
            self.ready_line = self._read_ready_line()
        except BaseException:
            self.stop()
            raise
        return self

    def _read_ready_line(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        deadline = time.monotonic() + self._ready_timeout
        pending = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerError(f"{self.name}: no readiness line within "
                                f"{self._ready_timeout:.0f} s{self._stderr_tail()}")
            readable, _, _ = select.select([stdout], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                status = self.process.wait()
                raise PeerError(f"{self.name}: exited with status {status} before it was "
                                f"ready{self._stderr_tail()}")
            pending += chunk
            while b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                text = line.decode("utf-8", "replace").strip()
                if self._ready_prefix is None or text.startswith(self._ready_prefix):
                    return text

    @property
    def target(self) -> str:
        """The target its readiness line names (``unix:PATH``, ``ipv4:127.0.0.1:PORT``)."""
        return self.ready_line[len(READY_PREFIX):] if self._ready_prefix == READY_PREFIX else ""

    def cpu_seconds(self) -> Optional[float]:
        """User + system CPU time the child has used so far, all threads (Linux /proc), or
        None where that cannot be read.  CPU per call is steadier than wall time on a busy
        machine: another process's load delays a call but does not make it cost more CPU."""
        if self.process is None:
            return None
        try:
            with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            return None
        # After the command name: state is field 3, utime and stime are fields 14 and 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace").strip()
        return (": " + text[-1500:]) if text else ""

    def stop(self, timeout: float = 15.0) -> None:
        """Close stdin (our peers' polite stop), then SIGTERM, then SIGKILL, each with a
        deadline.  A peer that does not watch its stdin gets SIGTERM at once."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        steps = (None, process.terminate, process.kill) if self._stops_on_stdin_eof else (
            process.terminate, process.kill)
        for escalate in steps:
            if escalate is not None:
                escalate()
            try:
                process.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        if process.stdout is not None:
            process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> PeerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


#: The Go echo server: tests/go/interop_server, run by its binary rather than by this module.
GO_SERVER_IMPL = "grpc-go"


def bench_server(impl: str, socket_path: str, repo_root: str,
                 env: Optional[Dict[str, str]] = None,
                 profile_path: Optional[str] = None, tcp: bool = False) -> PeerProcess:
    """A (not yet started) echo server of ``impl`` listening on ``socket_path``, or with
    ``tcp`` on a free loopback port that its :attr:`PeerProcess.target` names once started.

    ``grpc-go`` is the Go interop server with grpc-go's default options (``-plain``), built
    on first use by tests/go_peers.py; :class:`tests.go_peers.GoUnavailable` when it cannot be.
    """
    if impl == GO_SERVER_IMPL:
        from tests.go_peers import build_go_peers

        binary = build_go_peers().binary("interop_server")
        return PeerProcess("grpc-go server", [binary, "-plain", "-stop-on-stdin-eof",
                                              "-listen", "unix:" + socket_path],
                           cwd=repo_root, env=env)
    command = [sys.executable, "-m", "bench.peers", "--impl", impl, "--socket", socket_path]
    if tcp:
        command.append("--tcp")
    if profile_path is not None:
        command += ["--profile", profile_path]
    return PeerProcess(f"{impl} server", command, cwd=repo_root, env=env)


if __name__ == "__main__":
    sys.exit(main())
