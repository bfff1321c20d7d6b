"""Sockets for both sides: connecting a client, binding a server, naming a peer.

A client's connection also gets its frame tracer here (:func:`client_tracer`), for both clients
that dial: the channel's transports (blocking and asyncio) and the one-shot call.

The client connects to a :class:`minigrpc.protocol.targets.Target` (unix path, Linux abstract name,
or a TCP host that may resolve to several addresses); the server binds the same kinds of target.
Both report failures in grpc-go's words, because the CNI plugin must read like the Go plugin.
"""

import _socket  # the client's names; the socket module (its enums) only where needed
import sys
import time

from ..protocol.targets import Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, Callable, Hashable, List, Optional, Set, Tuple

try:
    from posix import strerror  # os.strerror itself: os costs a cold start about 2 ms (3.6-3.10)
except ImportError:  # pragma: no cover - not POSIX
    from os import strerror

#: Pending connections the kernel queues; as large as the system allows, like grpc-core.
LISTEN_BACKLOG = _socket.SOMAXCONN
_UNIX_DIR_MODE = 0o755


#: getaddrinfo() codes for a name that does not exist (EAI_NODATA is not everywhere).
_NO_SUCH_HOST = frozenset(
    code for code in (getattr(_socket, "EAI_NONAME", None), getattr(_socket, "EAI_NODATA", None))
    if code is not None
)


def os_error_text(error: BaseException) -> str:
    """An OS error the way Go prints it: the lower-case C strerror (``connection refused``).

    Both sides report socket failures in grpc-go's words, because the CNI plugin's messages must
    read like the Go plugin's.
    """
    if isinstance(error, _socket.gaierror):
        # A resolver's code, not an errno (os.strerror(-2) is "Unknown error -2"). Go says
        # "no such host" for a name that does not exist.
        if error.errno in _NO_SUCH_HOST:
            return "no such host"
        if error.args:
            return str(error.args[-1]).lower()
    if isinstance(error, OSError) and error.errno:
        text = strerror(error.errno)
        return text[:1].lower() + text[1:]
    return str(error) or type(error).__name__


# ------------------------------------------------------------------------------------------------
# Client
# ------------------------------------------------------------------------------------------------


class ConnectFailed(Exception):
    """The connection could not be established; ``details`` reads like grpc-go's."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self.details = details


class DeadlineReached(Exception):
    """The call's deadline passed before a connection was ready."""


def dial_error(target: Target, error: BaseException, op: str = "connect") -> ConnectFailed:
    """grpc-go's wording: ``connection error: desc = "transport: Error while dialing: …"``."""
    return ConnectFailed(
        'connection error: desc = "transport: Error while dialing: '
        f'dial {target.dial_text}: {op}: {os_error_text(error)}"'
    )


def lookup_error(host: str, error: BaseException) -> ConnectFailed:
    """grpc-go's wording for a host name that did not resolve: ``dial tcp: lookup h: …``."""
    return ConnectFailed(
        'connection error: desc = "transport: Error while dialing: '
        f'dial tcp: lookup {host}: {os_error_text(error)}"'
    )


def dial_timeout_error(target: Target) -> ConnectFailed:
    """grpc-go's wording for a connection attempt that did not finish in time."""
    return ConnectFailed(
        'connection error: desc = "transport: Error while dialing: '
        f'dial {target.dial_text}: i/o timeout"'
    )


def resolve_name(host: str, port: int) -> "List[Tuple[int, str]]":
    """Every A and AAAA record of ``host``, as ``(family, ip)`` pairs in the resolver's order
    (duplicates left out); raises ConnectFailed in grpc-go's words when it does not resolve.

    gRPC's DNS resolver takes every address of a name (``doc/naming.md``); which of them a call
    goes to is the load-balancing policy's choice (:mod:`minigrpc.driver.balancing`).
    """
    try:
        infos = _socket.getaddrinfo(host, port, _socket.AF_UNSPEC, _socket.SOCK_STREAM)
    except (_socket.gaierror, UnicodeError) as exc:
        raise lookup_error(host, exc) from None
    return address_records(infos)


def address_records(infos: "Any") -> "List[Tuple[int, str]]":
    """``getaddrinfo()``'s answer (the socket module's or the event loop's) as ``(family, ip)``
    pairs: IPv4 and IPv6 only, each once, in its order."""
    records: List[Tuple[int, str]] = []
    for family, _type, _proto, _name, address in infos:
        if family in (_socket.AF_INET, _socket.AF_INET6):
            record = (int(family), str(address[0]))
            if record not in records:
                records.append(record)
    return records


def handshake_error(target: Target, why: object) -> ConnectFailed:
    """grpc-go's wording for a failed TLS handshake, naming the target (grpc-go leaves it out,
    which leaves a user with several channels guessing which server's certificate failed)."""
    return ConnectFailed(
        'connection error: desc = "transport: authentication handshake failed: '
        f'{target.display}: {why}"'
    )


def client_tracer(peer: str) -> "Any":
    """The frame tracer (:mod:`minigrpc.net.trace`) for a new client connection, or None.

    Cheap when tracing is off: :mod:`minigrpc.net.trace` is imported only when ``MINIGRPC_TRACE``
    is set or the ``minigrpc.protocol.wire`` logger is enabled for DEBUG, and :mod:`logging` not at
    all by a process that has not loaded it (nothing can have enabled that logger then; the CNI
    plugin would pay about 7 ms of a cold start on 3.11 for it).
    """
    logging = sys.modules.get("logging")
    if not _environment_flag("MINIGRPC_TRACE") and (
            logging is None
            or not logging.getLogger("minigrpc.protocol.wire").isEnabledFor(logging.DEBUG)):
        return None
    from . import trace

    return trace.tracer_for("client", peer)


def _environment_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set and not empty, without importing :mod:`os`
    where nothing has: that costs a cold start about 2 ms on CPython 3.6 to 3.10 (os, stat,
    posixpath, _collections_abc).  Until :mod:`os` is imported nothing can have changed the
    environment from Python, so ``posix.environ``, os.environ's source, still holds it."""
    os: Any = sys.modules.get("os")
    if os is None:
        try:
            import posix
        except ImportError:  # pragma: no cover - not POSIX: os is the only way
            import os
        else:
            return bool(posix.environ.get(name.encode()))
    return bool(os.environ.get(name))


def open_socket(target: Target, deadline: "Optional[float]",
                new_socket: "Optional[Callable[[int, int], Any]]" = None) -> "socket.socket":
    """Connect to ``target``; raise ConnectFailed (UNAVAILABLE) or DeadlineReached.

    TCP targets may name a host: every address it resolves to is tried in order. The socket is
    left blocking (writes are bounded by flow control; reads wait in ``poll()`` with the call's
    deadline) and TCP_NODELAY is set, since gRPC writes whole frames and waits for answers.

    ``new_socket(family, type)`` makes the socket: :class:`socket.socket` unless given.  The
    one-shot call passes ``_socket.socket``, which has every method it uses, and so spares a cold
    start the :mod:`socket` module (its enums, selectors and more: about 4 ms on 3.11).
    """
    if new_socket is None:
        import socket

        new_socket = socket.socket
    candidates: List[Tuple[int, Any]]
    if target.family == _socket.AF_UNIX:
        candidates = [(_socket.AF_UNIX, target.address)]
    else:
        assert isinstance(target.address, tuple)
        host, port = target.address
        try:
            infos = _socket.getaddrinfo(host, port, target.family, _socket.SOCK_STREAM)
        except (_socket.gaierror, UnicodeError) as exc:
            raise lookup_error(host, exc) from None
        candidates = [(info[0], info[4]) for info in infos]
    last_error: Optional[BaseException] = None
    for family, address in candidates:
        timeout = None
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise DeadlineReached()
        sock = new_socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.settimeout(None)
        except _socket.timeout:
            sock.close()
            raise DeadlineReached() from None
        except OSError as exc:
            sock.close()
            last_error = exc
            continue
        if family != _socket.AF_UNIX:
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        return sock
    assert last_error is not None
    raise dial_error(target, last_error)


class Waker:
    """Lets one thread end another's wait for a socket: the waiting thread polls :attr:`fd`
    beside its socket, and :meth:`wake` makes it readable.

    A thread blocked in ``poll()``/``recv()`` on a connection wakes only for bytes from the
    peer; when what it waits for is decided on our side (another thread cancelled its call and
    queued the RST_STREAM, which the peer never answers, RFC 9113 §6.4) nothing else would wake
    it.  A byte written before the waiter reaches ``poll()`` stays pending, so a wake-up is
    never lost to that race; a stale one costs one spurious return.
    """

    __slots__ = ("_receiver", "_sender", "fd")

    def __init__(self) -> None:
        import socket

        self._receiver, self._sender = socket.socketpair()
        self._receiver.setblocking(False)
        self._sender.setblocking(False)
        #: The descriptor to poll for reading.
        self.fd = self._receiver.fileno()

    def wake(self) -> None:
        try:
            self._sender.send(b"\0")
        except OSError:  # full: a wake-up is pending anyway; closed: nobody waits
            pass

    def clear(self) -> None:
        """Take the pending wake-ups (the waiter, once ``poll()`` reported :attr:`fd`)."""
        try:
            while self._receiver.recv(64):
                pass
        except OSError:  # BlockingIOError: nothing more pending
            pass

    def close(self) -> None:
        self._receiver.close()
        self._sender.close()


# ------------------------------------------------------------------------------------------------
# Server
# ------------------------------------------------------------------------------------------------


class Listener:
    """A listening socket, plus what is needed to remove its unix socket file on stop.

    ``tls`` is the server's ``ssl.SSLContext`` for a secure port, None for a plaintext one.
    """

    __slots__ = ("display", "sock", "tls", "unix_identity", "unix_path")

    def __init__(
        self,
        sock: "socket.socket",
        display: str,
        unix_path: "Optional[str]" = None,
        unix_identity: "Optional[Tuple[int, int]]" = None,
    ) -> None:
        self.sock = sock
        self.display = display
        self.unix_path = unix_path
        self.unix_identity = unix_identity
        self.tls: Any = None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover - close of a listening socket does not fail
            pass
        if self.unix_path is not None:
            _remove_our_socket(self.unix_path, self.unix_identity)


def peer_name(sock: "socket.socket") -> str:
    """grpcio's peer strings: ``ipv4:h:p``, ``ipv6:[h]:p``, ``unix:<path>`` (grpcio: ``unix:``)."""
    try:
        address = sock.getpeername()
    except OSError:
        address = None
    family = sock.family
    if family == _socket.AF_UNIX:
        if isinstance(address, bytes):
            if address.startswith(b"\0"):
                return "unix-abstract:" + address[1:].decode("utf-8", "replace")
            address = address.decode("utf-8", "replace")
        return "unix:" + (address or "")
    if not isinstance(address, tuple):
        return "unknown"
    host, port = address[0], address[1]
    if family == _socket.AF_INET6:
        if host.startswith("::ffff:") and "." in host:
            return f"ipv4:{host[7:]}:{port}"
        return f"ipv6:[{host}]:{port}"
    return f"ipv4:{host}:{port}"


#: ``struct ucred`` (Linux): pid, uid and gid, three C ints.
_PEER_CREDENTIALS_SIZE = 12


def peer_identity(sock: "socket.socket") -> "Hashable":
    """What tells a client apart from others, for a server's flood records
    (:class:`minigrpc.http2.flood.PeerHistory`): its IP address over TCP (not the port: an
    attacker reconnects from a new one), its process over a unix socket (every unix client has
    the same address, and one process must not count against the others); ``"unix"`` where
    the kernel cannot say (no ``SO_PEERCRED``)."""
    family = sock.family
    if family == _socket.AF_UNIX:
        option = getattr(_socket, "SO_PEERCRED", None)
        if option is None:
            return "unix"
        try:
            credentials = sock.getsockopt(_socket.SOL_SOCKET, option, _PEER_CREDENTIALS_SIZE)
        except OSError:
            return "unix"
        pid, uid, _gid = memoryview(credentials).cast("i")
        return ("unix", uid, pid)
    try:
        address = sock.getpeername()
    except OSError:
        return "unknown"
    return address[0] if isinstance(address, tuple) else "unknown"


def _prepare_unix_path(path: str) -> None:
    """Unix socket hygiene before bind, so a stale file or a wrong mode never blocks a restart.

    Missing parent directories are created.  An existing path is replaced only when ``lstat``
    shows a socket (never a symlink, never a regular file) that nobody listens on any more.
    """
    import os  # here and below: a client (the CNI plugin above all) binds nothing
    import socket
    import stat

    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, mode=_UNIX_DIR_MODE, exist_ok=True)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise RuntimeError(f"refusing to bind {path!r}: it is a symbolic link")
    if not stat.S_ISSOCK(info.st_mode):
        raise RuntimeError(f"refusing to bind {path!r}: it exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)  # a stale socket left by a process that is gone
        return
    except OSError as exc:
        raise RuntimeError(f"refusing to bind {path!r}: it may be in use ({exc})") from None
    finally:
        probe.close()
    raise RuntimeError(f"refusing to bind {path!r}: another server is listening on it")


def _remove_our_socket(path: str, identity: "Optional[Tuple[int, int]]") -> None:
    """Remove the socket file on stop, unless something else has replaced it since."""
    import os
    import stat

    try:
        info = os.lstat(path)
        if stat.S_ISSOCK(info.st_mode) and (
            identity is None or (info.st_dev, info.st_ino) == identity
        ):
            os.unlink(path)
    except OSError:
        pass


def bind_unix(target: Target, mode: int) -> Listener:
    import os
    import socket
    import stat

    address = target.address
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if isinstance(address, bytes):  # abstract: no file, no permissions
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
            return Listener(sock, target.display)
        assert isinstance(address, str)
        path = address
        _prepare_unix_path(path)
        sock.bind(path)
        # Nobody can connect before listen(), so setting the mode in between leaves no window.
        info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode):  # pragma: no cover - replaced under our feet
            raise RuntimeError(f"{path!r} changed while binding")
        os.chmod(path, mode)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
        return Listener(sock, target.display, path, (info.st_dev, info.st_ino))
    except BaseException:
        sock.close()
        raise


def bind_tcp(target: Target, reuse_port: bool = False) -> "List[Listener]":
    """Bind every address ``host`` resolves to, on one port (port 0: the first one's).

    ``reuse_port`` sets SO_REUSEPORT (Linux, BSD): other sockets that set it too may bind the
    same port, and the kernel spreads connections over them.
    """
    import socket


    assert isinstance(target.address, tuple)
    host, port = target.address
    if host in ("", "*"):
        host = "::"
    infos = socket.getaddrinfo(
        host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    listeners: List[Listener] = []
    errors: List[str] = []
    seen: Set[Tuple[int, Any]] = set()
    for family, kind, proto, _, address in infos:
        if (family, address[0]) in seen:
            continue
        seen.add((family, address[0]))
        if port == 0 and listeners:
            address = (address[0], listeners[0].sock.getsockname()[1], *address[2:])
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port and hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                # '[::]' serves IPv4 too, as in grpcio; a specific v6 address stays v6.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            errors.append(f"{address[0]}: {exc}")
            continue
        listeners.append(Listener(sock, target.display))
        if family == socket.AF_INET6 and address[0] == "::":
            break  # the dual-stack socket already covers 0.0.0.0
    if not listeners:
        raise RuntimeError(f"failed to bind to address {target.display}: {'; '.join(errors)}")
    return listeners


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------


#: ``recv()`` sizes, client and server (measured in docs/benchmarks.md). CPython allocates the
#: whole size before the kernel fills it, and glibc serves anything above 128 KiB with mmap, then
#: mremap and munmap when the bytes object shrinks and dies: three system calls and a page fault
#: for every read of a 300-byte response, about 35 µs per call. Reads start small; a read that
#: fills ``SMALL_READ`` means the peer is streaming, and the next reads take ``LARGE_READ``, so a
#: large message is still a handful of reads (and fewer partial frames to buffer).
SMALL_READ = 64 * 1024
LARGE_READ = 256 * 1024


def next_read_size(received: int) -> int:
    """The ``recv()`` size after a read that returned ``received`` bytes."""
    return LARGE_READ if received >= SMALL_READ else SMALL_READ



class ReadBuffers:
    """The buffers an ``asyncio.BufferedProtocol`` lends its transport to read into.

    asyncio's own ``data_received`` path reads up to 256 KiB into a new bytes object each
    time, which costs the mmap, mremap and munmap described at :data:`SMALL_READ` on every read
    of a small response.  Reading into a buffer kept for the connection costs none of that;
    only the bytes read are copied out.  The sizes follow :func:`next_read_size`: the large
    buffer exists only while reads fill the small one.
    """

    __slots__ = ("_large", "_lent", "_small")

    def __init__(self) -> None:
        self._small = memoryview(bytearray(SMALL_READ))
        self._large: Optional[memoryview] = None
        self._lent = self._small

    def get_buffer(self) -> memoryview:
        """Where the next read goes."""
        return self._lent

    def take(self, received: int) -> bytes:
        """The ``received`` bytes just read into the lent buffer; sizes the next one."""
        data = bytes(self._lent[:received])
        if next_read_size(received) > SMALL_READ:
            if self._large is None:
                self._large = memoryview(bytearray(LARGE_READ))
            self._lent = self._large
        else:
            self._large = None
            self._lent = self._small
        return data
