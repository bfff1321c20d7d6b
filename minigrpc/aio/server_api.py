"""grpcio's asyncio server API: ``minigrpc.aio.server()``, :class:`Server` and
:class:`ServerInterceptor`.

Servicers written for ``grpc.aio`` run unchanged::

    from minigrpc import aio

    async def main() -> None:
        server = aio.server()
        add_GreeterServicer_to_server(Greeter(), server)   # async def methods
        server.add_insecure_port("[::]:50051")
        await server.start()
        await server.wait_for_termination()

The I/O is :mod:`minigrpc.aio.server_loop`; the handler's context is
:mod:`minigrpc.aio.servicer_context`; options, ports, handler registration and every per-call
decision are the blocking server's (:mod:`minigrpc.driver.server_options`,
:func:`minigrpc.blocking.server_api.bind_listeners`, :mod:`minigrpc.driver.server_dispatch`).
"""

import abc
import asyncio
import inspect
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..blocking.server_api import bind_listeners, secure_port_checks
from ..driver.server_options import ServerOptions
from ..protocol import wire
from ..protocol.enums import Compression
from . import interfaces as _interfaces
from .server_loop import NEW, STARTED, AioServerLoop

__all__ = ["Server", "ServerInterceptor", "server"]


class ServerInterceptor(abc.ABC):
    """grpcio's ``grpc.aio.ServerInterceptor``: sees every call before its handler is found.

    ``await continuation(handler_call_details)`` runs the next interceptor (or the lookup) and
    returns the handler; an interceptor may return another one, or None (UNIMPLEMENTED).
    """

    @abc.abstractmethod
    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        """The handler for the call ``handler_call_details`` describes, or None."""


class Server(AioServerLoop, _interfaces.Server):
    """A gRPC server on asyncio with grpcio's ``grpc.aio.Server`` API (the abstract one is
    :class:`minigrpc.aio.interfaces.Server`); see :func:`server`."""

    # -- registration -----------------------------------------------------------------------

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Add objects with a ``service(handler_call_details)`` method (grpcio's API)."""
        self._handler_table.add_generic(generic_rpc_handlers)

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, Any]
    ) -> None:
        """Register ``{method: RpcMethodHandler}`` for a service (grpcio >= 1.62 generated code)."""
        self._handler_table.add_registered(service_name, method_handlers)

    # -- ports ------------------------------------------------------------------------------

    def add_insecure_port(self, address: str) -> int:
        """Listen for plaintext HTTP/2 on ``unix:path``, ``unix-abstract:name`` or
        ``host:port``; returns the TCP port (the one chosen for port 0), 1 for a unix socket."""
        return self._add_port(address, None)

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen for HTTP/2 over TLS (``ssl_server_credentials()``,
        ``dynamic_ssl_server_credentials()``), or in plaintext with local or insecure
        credentials, as :meth:`minigrpc.Server.add_secure_port`."""
        tls, check = secure_port_checks(address, server_credentials)
        return self._add_port(address, tls, check)

    def _add_port(self, address: str, tls: Any, check: Any = None) -> int:
        if self._state != NEW:
            raise RuntimeError("ports must be added before start()")
        listeners, port = bind_listeners(address, self._options, tls, check)
        self._listeners.extend(listeners)
        return port

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start serving on the running event loop (only once)."""
        if self._state != NEW:
            raise RuntimeError("the server has already been started")
        self._state = STARTED
        self._terminated_event()
        await self._serve()

    async def stop(self, grace: Optional[float]) -> None:
        """Stop serving; return once every connection is closed and every handler has ended.

        New connections are refused at once.  With a ``grace`` (seconds) the connections
        drain: GOAWAY(2^31-1) + PING, then GOAWAY(last stream); calls in flight may finish and
        what still runs when the grace ends is cancelled.  ``stop(None)`` cancels everything
        now.  A later call may shorten the grace, never lengthen it (grpcio's rule).
        """
        await self._stop(grace)

    async def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Wait until the server has stopped; True if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._terminated_event().wait(), timeout)
        except asyncio.TimeoutError:
            return True
        return False


def server(
    migration_thread_pool: Optional[Executor] = None,
    handlers: Optional[Sequence[Any]] = None,
    interceptors: Optional[Sequence[Any]] = None,
    options: Optional[Iterable[Tuple[str, Any]]] = None,
    maximum_concurrent_rpcs: Optional[int] = None,
    compression: Optional[Union[int, Compression]] = None,
) -> Server:
    """Create an asyncio server, as ``grpc.aio.server()``.

    ``migration_thread_pool`` runs the handlers that are plain functions (the event loop's
    default executor when None); ``async def`` handlers and async generators run on the loop.
    ``interceptors`` are :class:`ServerInterceptor` objects (their ``intercept_service`` is a
    coroutine), the first one outermost.  ``options`` are :mod:`minigrpc.driver.server_options`'.
    ``maximum_concurrent_rpcs`` bounds the calls in progress; more get RESOURCE_EXHAUSTED.
    """
    invalid = [
        interceptor
        for interceptor in interceptors or ()
        if not inspect.iscoroutinefunction(getattr(interceptor, "intercept_service", None))
    ]
    if invalid:
        raise ValueError(
            f"Interceptor must be ServerInterceptor, the following are invalid: {invalid}"
        )
    if maximum_concurrent_rpcs is not None and maximum_concurrent_rpcs < 1:
        raise ValueError("maximum_concurrent_rpcs must be at least 1")
    created = Server(
        migration_thread_pool,
        ServerOptions(options),
        maximum_concurrent_rpcs,
        None if compression is None else wire.compression_number(compression),
    )
    created._handler_table.interceptors = tuple(interceptors or ())
    if handlers:
        created.add_generic_rpc_handlers(handlers)
    return created
