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

The I/O is :mod:`minigrpc.aio.server_loop`, the calls' tasks
:mod:`minigrpc.aio.server_handlers`, the handler's context
:mod:`minigrpc.aio.servicer_context`; options, ports, handler registration and every decision
about calls and connections are shared with the blocking server
(:mod:`minigrpc.driver.server_options`, :mod:`minigrpc.net.server_listeners`,
:mod:`minigrpc.driver.server_dispatch`, :mod:`minigrpc.driver.server_driver`).
"""

import abc
import asyncio
import inspect
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..driver.server_options import ServerOptions
from ..net.server_listeners import add_port, secure_port_checks
from ..protocol import wire
from ..protocol.enums import Compression
from . import interfaces as _interfaces
from .server_loop import AsyncServerLoop

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


class Server(_interfaces.Server):
    """A gRPC server on asyncio with grpcio's ``grpc.aio.Server`` API (the abstract one is
    :class:`minigrpc.aio.interfaces.Server`); see :func:`server`.

    It holds its event-loop I/O (:class:`~minigrpc.aio.server_loop.AsyncServerLoop`) and the
    driver that carries out (:class:`~minigrpc.driver.server_driver.ServerDriver`).
    """

    def __init__(self, loop: AsyncServerLoop) -> None:
        self._loop = loop
        self._driver = loop.driver

    # -- registration -----------------------------------------------------------------------

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Add objects with a ``service(handler_call_details)`` method (grpcio's API)."""
        self._driver.handlers.add_generic(generic_rpc_handlers)

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, Any]
    ) -> None:
        """Register ``{method: RpcMethodHandler}`` for a service (grpcio >= 1.62 generated code)."""
        self._driver.handlers.add_registered(service_name, method_handlers)

    # -- ports ------------------------------------------------------------------------------

    def add_insecure_port(self, address: str) -> int:
        """Listen for plaintext HTTP/2 on ``unix:path``, ``unix-abstract:name`` or
        ``host:port``; returns the TCP port (the one chosen for port 0), 1 for a unix socket."""
        return add_port(self._loop, address, None)

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        """Listen for HTTP/2 over TLS (``ssl_server_credentials()``,
        ``dynamic_ssl_server_credentials()``), or in plaintext with local or insecure
        credentials, as :meth:`minigrpc.Server.add_secure_port`."""
        tls, check = secure_port_checks(address, server_credentials)
        return add_port(self._loop, address, tls, check)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start serving on the running event loop (only once)."""
        await self._loop.start()

    async def stop(self, grace: Optional[float]) -> None:
        """Stop serving; return once every connection is closed and every handler has ended.

        New connections are refused at once.  With a ``grace`` (seconds) the connections
        drain: GOAWAY(2^31-1) + PING, then GOAWAY(last stream); calls in flight may finish and
        what still runs when the grace ends is cancelled.  ``stop(None)`` cancels everything
        now.  A later call may shorten the grace, never lengthen it (grpcio's rule).
        """
        await self._loop.stop(grace)

    async def wait_for_termination(self, timeout: Optional[float] = None) -> bool:
        """Wait until the server has stopped; True if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._loop.terminated_event().wait(), timeout)
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
    parsed = ServerOptions(
        options,
        None if compression is None else wire.compression_number(compression),
        maximum_concurrent_rpcs,
        interceptors or (),
    )
    created = Server(AsyncServerLoop(migration_thread_pool, parsed))
    if handlers:
        created.add_generic_rpc_handlers(handlers)
    return created
