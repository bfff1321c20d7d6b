"""Parse gRPC target strings into socket addresses (gRPC ``doc/naming.md``).

The same strings serve as client targets (``insecure_channel``) and as server addresses
(``add_insecure_port``):

==============================  ==========================================  ================
target                          socket address                              ``:authority``
==============================  ==========================================  ================
``unix:relative/or/abs.sock``   AF_UNIX path, as given                       ``localhost``
``unix:///abs/path.sock``       AF_UNIX ``/abs/path.sock``                   ``localhost``
``unix-abstract:name``          AF_UNIX ``"\\0name"`` (Linux abstract)       ``localhost``
``host:port``, ``[v6]:port``    AF_INET / AF_INET6 (resolved at connect)    ``host:port``
``host``                        the same, on port 443                        ``host``
``dns:///host:port``            same as ``host:port``; the authority part    ``host:port``
                                of ``dns://auth/host`` is ignored
==============================  ==========================================  ================

Over unix sockets grpc-go sends ``:authority: localhost``; we do the same
(docs/wire-rules.md, "Request headers").
"""

import _socket  # the constants only: the socket module costs a cold start its enums
from typing import NamedTuple, Tuple, Union

#: Port used when a ``dns:`` or bare host target has none: 443 (``https``), as grpcio (gRPC
#: core's DNS resolver) and grpc-go use for every channel, plaintext or TLS, so that a target
#: written for grpcio reaches the same server here. The ``:authority`` of such a target is the
#: host alone, as theirs is (gRPC ``doc/naming.md``: the authority comes from the target).
DEFAULT_PORT = 443

SocketAddress = Union[str, bytes, Tuple[str, int]]


class Target(NamedTuple):
    """A parsed target: what to pass to ``socket.socket()`` and ``connect()``/``bind()``."""

    family: int
    address: SocketAddress
    authority: str
    #: The target as people write it, for messages: ``unix:/run/x.sock``, ``127.0.0.1:50051``.
    display: str

    @property
    def is_unix(self) -> bool:
        return self.family == _socket.AF_UNIX

    @property
    def is_abstract(self) -> bool:
        return isinstance(self.address, bytes) and self.address.startswith(b"\0")

    @property
    def dial_text(self) -> str:
        """grpc-go's wording for the address, used in connection-error details: ``unix /x.sock``."""
        if self.is_abstract:
            assert isinstance(self.address, bytes)
            return "unix @" + self.address[1:].decode("utf-8", "replace")
        if isinstance(self.address, str):
            return f"unix {self.address}"
        assert isinstance(self.address, tuple)
        host, port = self.address
        return f"tcp {_join_host_port(host, port)}"


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split_host_port(text: str, default_port: int) -> Tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"invalid target {text!r}: missing ']'")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"invalid target {text!r}")
        port_text = rest[1:] if rest else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        # A bare IPv6 address without brackets and without a port.
        host, port_text = text, ""
    else:
        host, port_text = text, ""
    if not host:
        host = "localhost"
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"invalid port in target {text!r}")
    return host, int(port_text)


def parse_target(target: str, default_port: int = DEFAULT_PORT) -> Target:
    """Parse a target string; raises ValueError with a readable message when it is malformed."""
    if not isinstance(target, str) or not target:
        raise ValueError(f"invalid target {target!r}")
    if target.startswith("unix-abstract:"):
        name = target[len("unix-abstract:") :]
        return Target(_socket.AF_UNIX, b"\0" + name.encode("utf-8"), "localhost", target)
    if target.startswith("unix:"):
        path = target[len("unix:") :]
        if path.startswith("//"):
            # unix://authority/abs/path: only an empty authority is meaningful (naming.md).
            rest = path[2:]
            slash = rest.find("/")
            if slash < 0:
                raise ValueError(f"invalid target {target!r}: unix:// needs an absolute path")
            path = rest[slash:]
        if not path:
            raise ValueError(f"invalid target {target!r}: empty socket path")
        return Target(_socket.AF_UNIX, path, "localhost", target)
    text = target
    if text.startswith("dns:"):
        text = text[len("dns:") :]
        if text.startswith("//"):
            slash = text.find("/", 2)
            if slash < 0:
                raise ValueError(f"invalid target {target!r}")
            text = text[slash + 1 :]
    elif text.startswith("ipv4:") or text.startswith("ipv6:"):
        text = text[5:]
    host, port = _split_host_port(text, default_port)
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    if family == _socket.AF_INET and not _looks_like_ipv4(host):
        family = _socket.AF_UNSPEC  # a name: resolve at connect time
    display = _join_host_port(host, port)
    authority = display if _has_port(text) else (f"[{host}]" if ":" in host else host)
    return Target(family, (host, port), authority, display)


def _has_port(text: str) -> bool:
    """``text`` (a target's host part) names a port: ``h:1``, ``[v6]:1``; not ``h``, ``v6``."""
    if text.startswith("["):
        return "]:" in text
    return text.count(":") == 1


def _looks_like_ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)
