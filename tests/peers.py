"""Real grpcio servers for minigrpc's tests: the peer that tells us whether we speak gRPC.

minigrpc's client is tested against grpcio's server (grpc-core's HTTP/2 stack), never a mock.
:class:`GrpcioServer` serves one or more services through
:func:`minigrpc.descriptors.add_servicer` on one of the address kinds of gRPC's doc/naming.md:

* ``unix``: a path socket in a fresh short temporary directory (``unix:<path>``);
* ``unix-abstract``: a Linux abstract socket with a unique name (``unix-abstract:<name>``);
* ``tcp``: ``127.0.0.1`` on a port the kernel picks.

A server keeps its address across :meth:`GrpcioServer.stop` / :meth:`GrpcioServer.start`, so a
reconnect test can stop it, see calls fail UNAVAILABLE, and start it again on the same target.
grpcio is imported lazily: this module loads even where only protobuf is installed.

grpcio runs only on CPython.  Where the tests run on another interpreter (PyPy), the
environment variable ``MINIGRPC_TEST_GRPCIO_PYTHON`` names a CPython that has grpcio, and the
peers run there as child processes, driven over their stdin and stdout by one JSON line per
request: :class:`ChildGrpcioServer` serves the interop TestService as :class:`GrpcioServer`
does (its servicer's record included), and :func:`grpcio_client_module` gives a stand-in for
the ``grpc`` module whose channels make their unary calls from a child.  Both are the real
grpcio on the other end of the socket; only the test's view of it crosses a pipe.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import types
import uuid
from concurrent import futures
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

ADDRESS_KINDS: Tuple[str, ...] = ("unix", "unix-abstract", "tcp")

# Enough workers for concurrency tests (10+ calls in flight, some of them waiting).
DEFAULT_MAX_WORKERS = 16

# Seconds to wait for a stopped grpcio server to finish shutting down.
STOP_TIMEOUT = 10.0

#: Names a CPython with grpcio, used when this interpreter cannot import grpcio (PyPy).
GRPCIO_PYTHON_ENV = "MINIGRPC_TEST_GRPCIO_PYTHON"

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def grpcio_in_process() -> bool:
    # An import hook may refuse grpc outright (tests/support/block_grpcio.py): that is a no.
    try:
        return importlib.util.find_spec("grpc") is not None
    except ImportError:
        return False


#: The grpcio release whose answers the tables of grpcio's verdicts record (channel arguments,
#: service configs, address lists).  Older releases word their errors otherwise and lack the
#: newer arguments (the last grpcio for Python 3.7 is 1.62), so those comparisons need it.
REFERENCE_GRPCIO = (1, 85)


def reference_grpcio_unavailable() -> Optional[str]:
    """Why the tables of grpcio's verdicts cannot be checked here (a skip reason), or None."""
    if not grpcio_in_process():
        return "needs grpcio in this process"
    import grpc

    installed = tuple(int(part) for part in grpc.__version__.split(".")[:2])
    if installed < REFERENCE_GRPCIO:
        wanted = ".".join(map(str, REFERENCE_GRPCIO))
        return f"the tables record grpcio {wanted}'s answers; this is grpcio {grpc.__version__}"
    return None


def grpcio_peer_unavailable() -> Optional[str]:
    """Why no grpcio peer can run here (a skip reason), or None when one can."""
    if grpcio_in_process():
        return None
    child_python = os.environ.get(GRPCIO_PYTHON_ENV)
    if child_python:
        if os.access(child_python, os.X_OK):
            return None
        return f"{GRPCIO_PYTHON_ENV} names {child_python}, which is not an executable"
    if platform.python_implementation() != "CPython":
        return (f"grpcio runs only on CPython; set {GRPCIO_PYTHON_ENV} to a CPython that has"
                " it to run the grpcio peers as child processes")
    return "grpcio (a test dependency) is not installed"


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
        self._servers: List[Any] = []
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
        server: Any
        if grpcio_in_process():
            server = GrpcioServer(listen_address(kind, directory), services, **server_kwargs)
        else:
            if services is not None:
                import pytest

                pytest.skip("this test's servicer must run in a grpcio server in this process,"
                            " and grpcio runs only on CPython")
            server = ChildGrpcioServer(listen_address(kind, directory), **server_kwargs)
        self._servers.append(server)
        if start:
            server.start()
        return server

    def close(self) -> None:
        for server in self._servers:
            server.stop()
            if isinstance(server, ChildGrpcioServer):
                server.close()
        self._servers.clear()
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.clear()


# -- grpcio in a CPython child process, for interpreters without grpcio --------------------------


def _encode_metadata(metadata: Optional[Iterable[Tuple[str, Any]]]) -> List[List[Any]]:
    """Metadata as JSON: ``[key, "s", text]`` or ``[key, "b", base64 of bytes]``."""
    encoded: List[List[Any]] = []
    for key, value in metadata or ():
        if isinstance(value, bytes):
            encoded.append([key, "b", base64.b64encode(value).decode()])
        else:
            encoded.append([key, "s", value])
    return encoded


def _decode_metadata(encoded: Iterable[List[Any]]) -> Tuple[Tuple[str, Any], ...]:
    return tuple((key, base64.b64decode(value) if kind == "b" else value)
                 for key, kind, value in encoded)


class _Child:
    """One CPython child running :func:`child_main`; :meth:`request` is one round trip."""

    def __init__(self) -> None:
        python = os.environ.get(GRPCIO_PYTHON_ENV)
        if not python:
            raise RuntimeError(f"{GRPCIO_PYTHON_ENV} names no CPython with grpcio")
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("GRPC_VERBOSITY", "ERROR")
        self._lock = threading.Lock()
        self._process = subprocess.Popen([python, "-m", "tests.peers"], cwd=REPO_ROOT, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def request(self, **message: Any) -> Dict[str, Any]:
        line = (json.dumps(message) + "\n").encode()
        with self._lock:
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(line)
            self._process.stdin.flush()
            reply = self._process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the grpcio child exited ({self._process.poll()})")
        answer: Dict[str, Any] = json.loads(reply)
        if "exception" in answer:
            raise RuntimeError("in the grpcio child: " + answer["exception"])
        return answer

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()  # the child's loop ends at EOF
            try:
                self._process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


class RecordedCallView:
    """A :class:`tests.interop.servicer.RecordedCall` as the child reported it."""

    def __init__(self, method: str, metadata: Tuple[Tuple[str, Any], ...],
                 time_remaining: Optional[float], peer: str) -> None:
        self.method = method
        self.metadata = metadata
        self.time_remaining = time_remaining
        self.peer = peer


class _ChildServicer:
    """What tests use of a :class:`TestServiceServicer` that lives in the child."""

    def __init__(self, child: _Child) -> None:
        self._child = child

    @property
    def calls(self) -> List[RecordedCallView]:
        return [RecordedCallView(method, _decode_metadata(metadata), remaining, peer)
                for method, metadata, remaining, peer in self._child.request(op="calls")["calls"]]

    def wait_for_no_sleepers(self, timeout: float) -> bool:
        return bool(self._child.request(op="wait_for_no_sleepers", timeout=timeout)["result"])

    def release_sleepers(self) -> None:
        self._child.request(op="release_sleepers")


class ChildGrpcioServer:
    """:class:`GrpcioServer` with the interop TestService, run by a CPython child.

    The child lives as long as this object (:meth:`close`), so the servicer and its record
    survive :meth:`stop` and :meth:`start`, as they do in process."""

    def __init__(self, address: str, *, max_workers: int = DEFAULT_MAX_WORKERS,
                 options: Iterable[Tuple[str, Any]] = ()) -> None:
        self._address = address
        self._max_workers = max_workers
        self._options = [list(option) for option in options]
        self._child = _Child()
        self.servicer = _ChildServicer(self._child)
        self._running = False

    @property
    def target(self) -> str:
        if self._address.endswith(":0") and not self._address.startswith("unix"):
            raise RuntimeError("start the server first: its TCP port is not chosen yet")
        return self._address

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> str:
        if not self._running:
            self._address = self._child.request(op="start", address=self._address,
                                                max_workers=self._max_workers,
                                                options=self._options)["target"]
            self._running = True
        return self.target

    def stop(self, grace: Optional[float] = None) -> None:
        if self._running:
            self._running = False
            self._child.request(op="stop", grace=grace)

    def restart(self) -> str:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self._child.close()

    def __enter__(self) -> ChildGrpcioServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ChildRpcError(Exception):
    """grpcio's RpcError as the child saw it: code (a name), details, both metadata."""

    def __init__(self, code: Any, details: str, initial: Tuple[Tuple[str, Any], ...],
                 trailing: Tuple[Tuple[str, Any], ...]) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details
        self._initial = initial
        self._trailing = trailing

    def code(self) -> Any:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        return self._initial

    def trailing_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        return self._trailing


class _ChildCall:
    def __init__(self, initial: Tuple[Tuple[str, Any], ...],
                 trailing: Tuple[Tuple[str, Any], ...]) -> None:
        self._initial = initial
        self._trailing = trailing

    def initial_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        return self._initial

    def trailing_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        return self._trailing


class _ChildUnaryUnary:
    def __init__(self, channel: ChildGrpcioChannel, path: str, serializer: Any,
                 deserializer: Any) -> None:
        self._channel = channel
        self._path = path
        self._serializer = serializer
        self._deserializer = deserializer

    def with_call(self, request: Any, timeout: Optional[float] = None, metadata: Any = None,
                  compression: Any = None) -> Tuple[Any, _ChildCall]:
        from minigrpc import StatusCode

        payload = self._serializer(request) if self._serializer else request
        answer = _client_child().request(
            op="call", target=self._channel.target, options=self._channel.options,
            path=self._path, request=base64.b64encode(payload).decode(), timeout=timeout,
            metadata=_encode_metadata(metadata),
            compression=None if compression is None else compression.name)
        initial = _decode_metadata(answer["initial"])
        trailing = _decode_metadata(answer["trailing"])
        if "code" in answer:
            raise ChildRpcError(StatusCode[answer["code"]], answer["details"], initial, trailing)
        response = base64.b64decode(answer["response"])
        if self._deserializer:
            response = self._deserializer(response)
        return response, _ChildCall(initial, trailing)

    def __call__(self, request: Any, timeout: Optional[float] = None, metadata: Any = None,
                 compression: Any = None) -> Any:
        return self.with_call(request, timeout, metadata, compression)[0]


class ChildGrpcioChannel:
    """The part of ``grpc.Channel`` the server interop tests use, calling from the child."""

    def __init__(self, target: str, options: Iterable[Tuple[str, Any]] = ()) -> None:
        self.target = target
        self.options = [list(option) for option in options]

    def unary_unary(self, path: str, request_serializer: Any = None,
                    response_deserializer: Any = None) -> _ChildUnaryUnary:
        return _ChildUnaryUnary(self, path, request_serializer, response_deserializer)

    def close(self) -> None:
        _client_child().request(op="close_channel", target=self.target, options=self.options)

    def __enter__(self) -> ChildGrpcioChannel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_CLIENT_CHILD: List[_Child] = []
_CLIENT_CHILD_LOCK = threading.Lock()


def _client_child() -> _Child:
    """The one child that makes every grpcio client call of the run (started on first use)."""
    with _CLIENT_CHILD_LOCK:
        if not _CLIENT_CHILD:
            import atexit

            _CLIENT_CHILD.append(_Child())
            atexit.register(_CLIENT_CHILD[0].close)
        return _CLIENT_CHILD[0]


def grpcio_client_module() -> Any:
    """``grpc`` itself, or where it cannot load, a stand-in whose channels call from a CPython
    child (``RpcError``, ``StatusCode`` and ``Compression`` with grpcio's names).  Skips the
    calling test module when neither is possible."""
    if grpcio_in_process():
        import grpc

        return grpc
    reason = grpcio_peer_unavailable()
    if reason is not None:
        import pytest

        pytest.skip(reason, allow_module_level=True)
    from minigrpc import Compression, StatusCode

    return types.SimpleNamespace(insecure_channel=ChildGrpcioChannel, RpcError=ChildRpcError,
                                 StatusCode=StatusCode, Compression=Compression)


def child_main() -> int:
    """The child's loop: one JSON request per stdin line, one JSON answer per stdout line."""
    import grpc

    server: Optional[GrpcioServer] = None
    channels: Dict[str, Any] = {}
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the answer stream
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        try:
            answer: Dict[str, Any] = {}
            if op == "start":
                if server is None:
                    options = [tuple(option) for option in request["options"]]
                    server = GrpcioServer(request["address"], max_workers=request["max_workers"],
                                          options=options)
                answer["target"] = server.start()
            elif op == "stop":
                assert server is not None
                server.stop(request["grace"])
            elif op == "calls":
                assert server is not None
                answer["calls"] = [[call.method, _encode_metadata(call.metadata),
                                    call.time_remaining, call.peer]
                                   for call in server.servicer.calls]
            elif op == "wait_for_no_sleepers":
                assert server is not None
                answer["result"] = server.servicer.wait_for_no_sleepers(request["timeout"])
            elif op == "release_sleepers":
                assert server is not None
                server.servicer.release_sleepers()
            elif op in ("call", "close_channel"):
                key = json.dumps([request["target"], request["options"]])
                if op == "close_channel":
                    channel = channels.pop(key, None)
                    if channel is not None:
                        channel.close()
                else:
                    answer = _child_call(grpc, channels, key, request)
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as exc:  # the parent raises it; the child carries on
            answer = {"exception": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    if server is not None:
        server.stop()
    for channel in channels.values():
        channel.close()
    return 0


def _child_call(grpc: Any, channels: Dict[str, Any], key: str,
                request: Dict[str, Any]) -> Dict[str, Any]:
    channel = channels.get(key)
    if channel is None:
        options = [tuple(option) for option in request["options"]]
        channel = channels[key] = grpc.insecure_channel(request["target"], options=options)
    call = channel.unary_unary(request["path"])
    compression = request["compression"]
    try:
        response, outcome = call.with_call(
            base64.b64decode(request["request"]), timeout=request["timeout"],
            metadata=_decode_metadata(request["metadata"]) or None,
            compression=None if compression is None else grpc.Compression[compression])
    except grpc.RpcError as error:
        return {"code": error.code().name, "details": error.details() or "",
                "initial": _encode_metadata(error.initial_metadata()),
                "trailing": _encode_metadata(error.trailing_metadata())}
    return {"response": base64.b64encode(response).decode(),
            "initial": _encode_metadata(outcome.initial_metadata()),
            "trailing": _encode_metadata(outcome.trailing_metadata())}


if __name__ == "__main__":
    sys.exit(child_main())
