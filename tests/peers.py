"""Real grpcio servers for minigrpc's tests: the peer that tells us whether we speak gRPC.

minigrpc's client is tested against grpcio's server (grpc-core's HTTP/2 stack), never a mock.
:class:`GrpcioServer` serves one or more services through
:func:`minigrpc.descriptors.add_servicer` on one of the address kinds of grpc-wire.md §0:

* ``unix``: a path socket in a fresh short temporary directory (``unix:<path>``);
* ``unix-abstract``: a Linux abstract socket with a unique name (``unix-abstract:<name>``);
* ``tcp``: ``127.0.0.1`` on a port the kernel picks.

A server keeps its address across :meth:`GrpcioServer.stop` / :meth:`GrpcioServer.start`, so a
reconnect test can stop it, see calls fail UNAVAILABLE, and start it again on the same target.
grpcio is imported lazily: this module loads even where only protobuf is installed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from concurrent import futures
from typing import Any, Iterable, List, Optional, Sequence, Tuple

ADDRESS_KINDS: Tuple[str, ...] = ("unix", "unix-abstract", "tcp")

# Enough workers for concurrency tests (10+ calls in flight, some of them waiting).
DEFAULT_MAX_WORKERS = 16

# Seconds to wait for a stopped grpcio server to finish shutting down.
STOP_TIMEOUT = 10.0


def short_temp_dir() -> str:
    """A new private directory with a short path (unix socket paths are limited to 107 bytes)."""
    return tempfile.mkdtemp(prefix="mg-")


def listen_address(kind: str, directory: Optional[str] = None) -> str:
    """A fresh grpcio listen address of ``kind`` (one of :data:`ADDRESS_KINDS`).

    ``directory`` is where a ``unix`` socket file goes; it is required for that kind.
    """
    if kind == "unix":
        if directory is None:
            raise ValueError("a unix socket address needs a directory")
        return "unix:" + os.path.join(directory, "grpc.sock")
    if kind == "unix-abstract":
        return f"unix-abstract:minigrpc-test-{os.getpid()}-{uuid.uuid4().hex[:16]}"
    if kind == "tcp":
        return "127.0.0.1:0"
    raise ValueError(f"unknown address kind {kind!r}; expected one of {ADDRESS_KINDS}")


def default_services() -> List[Tuple[Any, Any]]:
    """``[(TestService descriptor, TestServiceServicer())]``: the interop service alone."""
    import grpc

    from tests.interop import test_pb2
    from tests.interop.servicer import TestServiceServicer

    return [(test_pb2.TEST_SERVICE, TestServiceServicer(grpc_module=grpc))]


class GrpcioServer:
    """A ``grpc.server`` with a ThreadPoolExecutor, serving ``services`` on one fixed address.

    ``services`` is a sequence of ``(service_descriptor, servicer)`` pairs registered with
    :func:`minigrpc.descriptors.add_servicer`; by default the interop TestService.
    ``options`` are grpcio channel arguments, e.g. ``(("grpc.max_concurrent_streams", 1),)``.
    """

    def __init__(
        self,
        address: str,
        services: Optional[Sequence[Tuple[Any, Any]]] = None,
        *,
        max_workers: int = DEFAULT_MAX_WORKERS,
        options: Iterable[Tuple[str, Any]] = (),
    ) -> None:
        self._address = address
        self.services: List[Tuple[Any, Any]] = (
            list(services) if services is not None else default_services()
        )
        self._max_workers = max_workers
        self._options = tuple(options)
        self._server: Any = None
        self._executor: Optional[futures.ThreadPoolExecutor] = None

    @property
    def servicer(self) -> Any:
        """The servicer of the first service (the TestServiceServicer by default)."""
        return self.services[0][1]

    @property
    def target(self) -> str:
        """The client target string for this server (TCP: ``127.0.0.1:<port>``)."""
        if self._address.endswith(":0") and not self._address.startswith("unix"):
            raise RuntimeError("start the server first: its TCP port is not chosen yet")
        return self._address

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Bind and start serving; return the target.  Starting a running server is a no-op."""
        if self._server is not None:
            return self.target
        import grpc

        from minigrpc.descriptors import add_servicer

        executor = futures.ThreadPoolExecutor(
            max_workers=self._max_workers, thread_name_prefix="grpcio-peer"
        )
        server = grpc.server(executor, options=self._options)
        for descriptor, servicer in self.services:
            add_servicer(server, descriptor, servicer)
        try:
            port = server.add_insecure_port(self._address)
        except RuntimeError as error:
            executor.shutdown(wait=False)
            raise RuntimeError(f"grpcio could not listen on {self._address}: {error}") from error
        if not self._address.startswith("unix"):
            if port == 0:
                executor.shutdown(wait=False)
                raise RuntimeError(f"grpcio could not listen on {self._address}")
            host = self._address.rpartition(":")[0]
            self._address = f"{host}:{port}"  # keep this port for restarts
        server.start()
        self._server, self._executor = server, executor
        return self.target

    def stop(self, grace: Optional[float] = None) -> None:
        """Stop serving and wait until grpcio has shut down (``grace`` as in grpcio)."""
        server, executor = self._server, self._executor
        self._server = self._executor = None
        if server is None:
            return
        for _descriptor, servicer in self.services:
            release = getattr(servicer, "release_sleepers", None)
            if release is not None:
                release()
        server.stop(grace).wait(STOP_TIMEOUT)
        if executor is not None:
            executor.shutdown(wait=True)

    def restart(self) -> str:
        """Stop, then start again on the same address; return the (unchanged) target."""
        self.stop()
        return self.start()

    def __enter__(self) -> GrpcioServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class GrpcioServerPool:
    """Creates :class:`GrpcioServer` instances and cleans all of them (and their dirs) up."""

    def __init__(self) -> None:
        self._servers: List[GrpcioServer] = []
        self._dirs: List[str] = []

    def create(
        self,
        kind: str,
        services: Optional[Sequence[Tuple[Any, Any]]] = None,
        *,
        start: bool = True,
        **server_kwargs: Any,
    ) -> GrpcioServer:
        directory = None
        if kind == "unix":
            directory = short_temp_dir()
            self._dirs.append(directory)
        server = GrpcioServer(listen_address(kind, directory), services, **server_kwargs)
        self._servers.append(server)
        if start:
            server.start()
        return server

    def close(self) -> None:
        for server in self._servers:
            server.stop()
        self._servers.clear()
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.clear()
