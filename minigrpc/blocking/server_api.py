"""grpcio's server API: ``minigrpc.server()`` and :class:`Server`.

Handlers written for grpcio run unchanged::

    import minigrpc as grpc

    server = grpc.server(futures.ThreadPoolExecutor(8))
    add_GreeterServicer_to_server(Greeter(), server)   # grpcio-generated code works
    server.add_insecure_port("unix:///run/app/app.sock")
    server.start()
    server.wait_for_termination()

The parts: the options (:mod:`minigrpc.driver.server_options`), the driver that decides what
happens to calls and connections (:mod:`minigrpc.driver.server_driver`, shared with the asyncio
server), the I/O thread that carries it out (:mod:`minigrpc.blocking.server_loop`), the handlers
on the executor (:mod:`minigrpc.blocking.server_handlers`), the handler's context
(:mod:`minigrpc.blocking.servicer_context`), the sans-IO protocol
(:mod:`minigrpc.protocol.server_protocol`) and the listeners shared with the asyncio server
(:mod:`minigrpc.net.server_listeners`).  No module is named ``server``: ``minigrpc.server`` is
grpcio's ``server()`` function.
"""

import concurrent.futures
import threading
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..driver import interfaces
from ..driver.server_options import ServerOptions
from ..net.server_listeners import add_port, secure_port_checks
from ..protocol import wire
from ..protocol.enums import Compression
from .server_loop import ServerLoop

__all__ = ["Server", "server"]


class Server(interfaces.Server):
    """A gRPC server with grpcio's ``grpc.Server`` API; create it with :func:`server`.

    It holds its I/O loop (:class:`~minigrpc.blocking.server_loop.ServerLoop`) and the driver
    that loop carries out (:class:`~minigrpc.driver.server_driver.ServerDriver`).
    """

    def __init__(self, loop: ServerLoop, handlers: Optional[Sequence[Any]] = None) -> None:
        self._loop = loop
        self._driver = loop.driver
        if handlers:
            self.add_generic_rpc_handlers(handlers)

    # -- registration ----------------------------------------------------------------------------

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Add objects with a ``service(handler_call_details)`` method (grpcio's API: any such
        object, a ``grpc.GenericRpcHandler`` or not).  All are checked before any is added."""
        self._driver.handlers.add_generic(generic_rpc_handlers)

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, Any]
    ) -> None:
        """Register ``{method: RpcMethodHandler}`` for a service (grpcio >= 1.62 generated code)."""
        self._driver.handlers.add_registered(service_name, method_handlers)

    # -- ports -----------------------------------------------------------------------------------

    def add_insecure_port(self, address: str) -> int:
        """Listen for plaintext HTTP/2 on ``unix:path``, ``unix:///abs``, ``unix-abstract:name``
        or ``host:port``.

        Returns the TCP port (the one chosen, for port 0); for a unix socket it returns 1, as
        grpcio does.  Failures raise RuntimeError with the reason.
        """
        return add_port(self._loop, address, None)

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen for HTTP/2 over TLS on ``address`` (``minigrpc.ssl_server_credentials()``,
        ``dynamic_ssl_server_credentials()``), or in plaintext with local credentials (on a
        local address only) or ``insecure_server_credentials()``."""
        tls, check = secure_port_checks(address, server_credentials)
        return add_port(self._loop, address, tls, check)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start serving; the listening sockets are already bound by add_insecure_port()."""
        self._loop.start()

    def stop(self, grace: Optional[float]) -> threading.Event:
        """Stop serving; returns an Event set once every connection is closed.

        New connections are refused at once.  With a ``grace`` (seconds) the connections drain:
        GOAWAY(2^31-1) + PING, then GOAWAY(last stream), calls in flight may finish, new
        streams get REFUSED_STREAM (clients retry them), and what is still running when the
        grace ends is cancelled.  ``stop(None)`` or ``stop(0)`` cancels everything now.
        A later call may shorten the grace, never lengthen it (grpcio's rule).
        """
        return self._loop.stop(grace)

    def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Block until the server has stopped; returns True if ``timeout`` passed first."""
        return not self._loop.terminated.wait(timeout)


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
    parsed = ServerOptions(
        options,
        None if compression is None else wire.compression_number(compression),
        maximum_concurrent_rpcs,
        interceptors or (),
    )
    return Server(ServerLoop(thread_pool, parsed), handlers)
