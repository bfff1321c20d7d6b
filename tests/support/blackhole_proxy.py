"""A TCP proxy on 127.0.0.1 that can go silent: the network failure keepalive exists for.

:class:`BlackholeProxy` forwards each connection it accepts to an upstream server, one thread per
direction.  :meth:`BlackholeProxy.blackhole` makes the connections open at that moment stop
forwarding either way, without FIN or RST: what each side sends is read and dropped, so neither
side's writes block and neither hears anything more, as when a NAT or a firewall on the path
forgets the flow.  Connections accepted afterwards forward normally, so a client that gives the
dead connection up and dials again reaches the server.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable, List, Tuple


class _Link:
    """One proxied connection: the client's socket and the upstream one."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.silent = threading.Event()
        #: Set when the client closed or reset its socket (its side of the link ended).
        self.client_gone = threading.Event()

    def pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            if self.silent.is_set():
                continue  # read and dropped: the sender never blocks, the other side hears nothing
            try:
                sink.sendall(data)
            except OSError:
                break
        if source is self.client:
            self.client_gone.set()
        if not self.silent.is_set():
            try:
                sink.shutdown(socket.SHUT_WR)  # pass the EOF on, as a real path would
            except OSError:
                pass

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class BlackholeProxy:
    """Listens on a port of 127.0.0.1 and forwards to ``upstream`` (host, port)."""

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.links: List[_Link] = []
        self._closed = False
        self._threads: List[threading.Thread] = []
        self._start(self._accept_loop, "blackhole-proxy-accept")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        """How many connections the proxy accepted so far."""
        with self._lock:
            return len(self.links)

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, upstream)
            with self._lock:
                if self._closed:
                    link.close()
                    return
                self.links.append(link)
            self._start(link.pump, "blackhole-proxy-up", client, upstream)
            self._start(link.pump, "blackhole-proxy-down", upstream, client)

    def blackhole(self) -> None:
        """Every connection open now stops forwarding, both ways, and stays open."""
        with self._lock:
            for link in self.links:
                link.silent.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links = list(self.links)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self._listener.close()
        for link in links:
            link.close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> BlackholeProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
