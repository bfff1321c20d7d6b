"""A server's listening sockets: the ports it binds, with what credentials, and its accepts.

Shared by the blocking and the asyncio server, so that both bind the same addresses the same way
and refuse the same ports: ``unix:path``, ``unix:///abs``, ``unix-abstract:name`` or
``host:port`` (gRPC's ``doc/naming.md``), in plaintext, over TLS, or with local credentials on a
local address only.  Accepting takes at most
:data:`~minigrpc.driver.server_accept.ACCEPTS_PER_WAKEUP` connections per readiness event, so
that a connection storm cannot starve the connections already being served; what an
``accept()`` failure means is :mod:`minigrpc.driver.server_accept`'s to decide.
"""

import socket
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..driver.server_accept import ACCEPTS_PER_WAKEUP
from ..driver.server_options import ServerOptions
from ..protocol import targets as _targets
from .sockets import Listener, bind_tcp, bind_unix

if TYPE_CHECKING:  # pragma: no cover
    from typing import Protocol

    class ListeningServer(Protocol):
        """A server's I/O, as ports are added to it (either server's loop)."""

        options: ServerOptions

        def check_not_started(self) -> None: ...

        def add_listeners(self, listeners: List[Listener]) -> None: ...


__all__ = ["accept_batch", "add_port", "bind_listeners", "secure_port_checks"]


def secure_port_checks(
    address: str, server_credentials: Any
) -> Tuple[Any, Optional[Callable[[_targets.Target], None]]]:
    """What ``add_secure_port(address, server_credentials)`` listens with: the TLS context (None
    for local or insecure credentials) and the check a local-credentials port must pass."""
    from .tls import ServerCredentials, local_target_error

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


def add_port(
    server: "ListeningServer",
    address: str,
    tls: Any,
    check: Optional[Callable[[_targets.Target], None]] = None,
) -> int:
    """``add_insecure_port`` / ``add_secure_port`` (after :func:`secure_port_checks`) of either
    server: bind ``address`` (:func:`bind_listeners`) before ``start()``, RuntimeError after;
    the port, as :func:`bind_listeners` returns it."""
    server.check_not_started()
    listeners, port = bind_listeners(address, server.options, tls, check)
    server.add_listeners(listeners)
    return port


def accept_batch(listener: Listener) -> Tuple[List[socket.socket], Optional[OSError]]:
    """The connections ``listener`` has waiting, at most
    :data:`~minigrpc.driver.server_accept.ACCEPTS_PER_WAKEUP`, non-blocking and (over TCP)
    without Nagle's delay; and the error that stopped the accepting, if one did."""
    accepted: List[socket.socket] = []
    for _ in range(ACCEPTS_PER_WAKEUP):
        try:
            sock, _address = listener.sock.accept()
        except (BlockingIOError, InterruptedError):
            break
        except OSError as exc:
            return accepted, exc
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        accepted.append(sock)
    return accepted, None
