"""grpcio's server API: ``minigrpc.server()`` and :class:`Server`.

Handlers written for grpcio run unchanged::

    import minigrpc as grpc

    server = grpc.server(futures.ThreadPoolExecutor(8))
    add_GreeterServicer_to_server(Greeter(), server)   # grpcio-generated code works
    server.add_insecure_port("unix:///run/app/app.sock")
    server.start()
    server.wait_for_termination()

The parts: the options (:mod:`minigrpc.driver.server_options`), the I/O loop and the calls
(:mod:`minigrpc.blocking.server_loop`), the handler's context
(:mod:`minigrpc.blocking.servicer_context`), the sans-IO protocol
(:mod:`minigrpc.protocol.server_protocol`) and socket binding shared with the client
(:mod:`minigrpc.net.sockets`).  No module is named ``server``: ``minigrpc.server`` is grpcio's
``server()`` function.
"""

import concurrent.futures
import selectors
import threading
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..driver import interfaces
from ..driver.server_options import ServerOptions
from ..net.sockets import Listener, bind_tcp, bind_unix
from ..protocol import targets as _targets
from ..protocol import wire
from ..protocol.enums import Compression
from .server_loop import _NEW, _STARTED, _STOPPED, _STOPPING, ServerLoop

__all__ = ["Server", "server"]


class Server(ServerLoop, interfaces.Server):
    """A gRPC server with grpcio's ``grpc.Server`` API; create it with :func:`server`."""

    def __init__(
        self,
        thread_pool: Optional[concurrent.futures.Executor],
        handlers: Optional[Sequence[Any]],
        options: ServerOptions,
        maximum_concurrent_rpcs: Optional[int],
        compression: Optional[int],
    ) -> None:
        super().__init__(thread_pool, options, maximum_concurrent_rpcs, compression)
        if handlers:
            self.add_generic_rpc_handlers(handlers)

    # -- registration ----------------------------------------------------------------------------

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Add objects with a ``service(handler_call_details)`` method (grpcio's API: any such
        object, a ``grpc.GenericRpcHandler`` or not).  All are checked before any is added."""
        self._handler_table.add_generic(generic_rpc_handlers)

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, Any]
    ) -> None:
        """Register ``{method: RpcMethodHandler}`` for a service (grpcio >= 1.62 generated code)."""
        self._handler_table.add_registered(service_name, method_handlers)

    # -- ports -----------------------------------------------------------------------------------

    def add_insecure_port(self, address: str) -> int:
        """Listen for plaintext HTTP/2 on ``address``; see :meth:`_add_port`."""
        return self._add_port(address, None)

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen for HTTP/2 over TLS on ``address`` (``minigrpc.ssl_server_credentials()``,
        ``dynamic_ssl_server_credentials()``), or in plaintext with local credentials (on a
        local address only) or ``insecure_server_credentials()``."""
        tls, check = secure_port_checks(address, server_credentials)
        return self._add_port(address, tls, check)

    def _add_port(
        self,
        address: str,
        tls: Any,
        check: Optional[Callable[[_targets.Target], None]] = None,
    ) -> int:
        """Listen on ``unix:path``, ``unix:///abs``, ``unix-abstract:name`` or ``host:port``.

        Returns the TCP port (the one chosen, for port 0); for a unix socket it returns 1, as
        grpcio does.  Failures raise RuntimeError with the reason.
        """
        with self._state_lock:
            if self._state != _NEW:
                raise RuntimeError("ports must be added before start()")
        listeners, port = bind_listeners(address, self._options, tls, check)
        self._listeners.extend(listeners)
        return port

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start serving; the listening sockets are already bound by add_insecure_port()."""
        with self._state_lock:
            if self._state != _NEW:
                raise RuntimeError("the server has already been started")
            self._state = _STARTED
        selector = selectors.DefaultSelector()
        self._commands.open(selector)
        for listener in self._listeners:
            selector.register(listener.sock, selectors.EVENT_READ, listener)
        self._selector = selector
        self._loop_thread = threading.Thread(
            target=self._run_loop, name="minigrpc-server-io", daemon=True
        )
        self._loop_thread.start()

    def stop(self, grace: Optional[float]) -> threading.Event:
        """Stop serving; returns an Event set once every connection is closed.

        New connections are refused at once.  With a ``grace`` (seconds) the connections drain:
        GOAWAY(2^31-1) + PING, then GOAWAY(last stream), calls in flight may finish, new
        streams get REFUSED_STREAM (clients retry them), and what is still running when the
        grace ends is cancelled.  ``stop(None)`` or ``stop(0)`` cancels everything now.
        A later call may shorten the grace, never lengthen it (grpcio's rule).
        """
        with self._state_lock:
            state = self._state
            if state == _NEW:
                self._state = _STOPPED
            elif state in (_STARTED, _STOPPING):
                self._state = _STOPPING
        if state == _NEW:
            for listener in self._listeners:
                listener.close()
            self._listeners = []
            self._shutdown_executor()
            self._terminated.set()
            return self._terminated
        if state == _STOPPED:
            return self._terminated
        self._post(self._begin_stop, grace)
        return self._terminated

    def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Block until the server has stopped; returns True if ``timeout`` passed first."""
        return not self._terminated.wait(timeout)


def secure_port_checks(
    address: str, server_credentials: Any
) -> Tuple[Any, Optional[Callable[[_targets.Target], None]]]:
    """What ``add_secure_port(address, server_credentials)`` listens with: the TLS context (None
    for local or insecure credentials) and the check a local-credentials port must pass.

    Shared by the blocking and the asyncio server, so both refuse the same ports.
    """
    from ..net.tls import ServerCredentials, local_target_error

    if not isinstance(server_credentials, ServerCredentials):
        raise TypeError(
            "add_secure_port() needs minigrpc.ssl_server_credentials(...), not "
            f"{type(server_credentials).__name__}"
        )
    local = server_credentials.local

    def check(target: _targets.Target) -> None:
        if local is not None:
            host = str(target.address[0]) if isinstance(target.address, tuple) else None
            refusal = local_target_error(local, target.is_unix, host)
            if refusal:
                raise RuntimeError(f"cannot listen on {address!r}: {refusal}")

    return server_credentials.context, check


def bind_listeners(
    address: str,
    options: ServerOptions,
    tls: Any,
    check: Optional[Callable[[_targets.Target], None]] = None,
) -> Tuple[List[Listener], int]:
    """Listen on ``unix:path``, ``unix:///abs``, ``unix-abstract:name`` or ``host:port``.

    Returns the listening sockets and the TCP port (the one chosen, for port 0); for a unix
    socket the port is 1, as grpcio returns.  Failures raise RuntimeError with the reason.
    Shared by the blocking and the asyncio server.
    """
    try:
        target = _targets.parse_target(address, default_port=0)
    except ValueError as exc:
        raise RuntimeError(f"cannot listen on {address!r}: {exc}") from None
    if check is not None:
        check(target)
    if target.is_unix:
        try:
            listener = bind_unix(target, options.unix_socket_mode)
        except OSError as exc:
            raise RuntimeError(f"failed to bind to address {address}: {exc}") from None
        listener.tls = tls
        return [listener], 1
    try:
        listeners = bind_tcp(target, options.reuse_port)
    except OSError as exc:
        raise RuntimeError(f"failed to bind to address {address}: {exc}") from None
    for listener in listeners:
        listener.tls = tls
    return listeners, int(listeners[0].sock.getsockname()[1])


def server(
    thread_pool: Optional[concurrent.futures.Executor] = None,
    handlers: Optional[Sequence[Any]] = None,
    interceptors: Optional[Sequence[Any]] = None,
    options: Optional[Iterable[Tuple[str, Any]]] = None,
    maximum_concurrent_rpcs: Optional[int] = None,
    compression: Optional[Union[int, Compression]] = None,
    xds: bool = False,
) -> Server:
    """Create a server, as ``grpc.server()``.

    ``thread_pool`` runs the handlers (an executor of up to 32 threads is created when None);
    with the ``minigrpc.unary_handlers_on_io_thread`` option, unary-unary handlers run on the
    server's I/O thread instead.  ``options`` are listed in :mod:`minigrpc.driver.server_options`.
    ``interceptors`` (``ServerInterceptor`` objects) wrap the handler lookup of every call, the
    first one outermost (:mod:`minigrpc.blocking.interceptors`).  ``xds`` is not supported and is
    rejected rather than ignored.
    ``maximum_concurrent_rpcs`` bounds the calls in progress; more get RESOURCE_EXHAUSTED.
    ``compression`` compresses every response the client accepts compressed.
    """
    for interceptor in interceptors or ():
        if not callable(getattr(interceptor, "intercept_service", None)):
            raise TypeError(
                f"{interceptor!r} is not a server interceptor: it has no intercept_service()"
            )
    if xds:
        raise ValueError("minigrpc.server() does not support xDS")
    if maximum_concurrent_rpcs is not None and maximum_concurrent_rpcs < 1:
        raise ValueError("maximum_concurrent_rpcs must be at least 1")
    parsed = ServerOptions(options)
    created = Server(
        thread_pool,
        handlers,
        parsed,
        maximum_concurrent_rpcs,
        None if compression is None else wire.compression_number(compression),
    )
    created._handler_table.interceptors = tuple(interceptors or ())
    return created
