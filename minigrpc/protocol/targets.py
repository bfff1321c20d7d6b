"""Parse gRPC target strings into socket addresses (gRPC ``doc/naming.md``).

The same strings serve as client targets (``insecure_channel``) and as server addresses
(``add_insecure_port``):

=====================================  ======================================  =================
target                                 socket addresses                        ``:authority``
=====================================  ======================================  =================
``unix:relative/or/abs.sock``          AF_UNIX path, as given                  ``localhost``
``unix:///abs/path.sock``              AF_UNIX ``/abs/path.sock``              ``localhost``
``unix-abstract:name``                 AF_UNIX ``"\\0name"`` (Linux abstract)   ``localhost``
``host:port``, ``[v6]:port``           every A/AAAA record of ``host``, or     ``host:port``
                                       the literal address
``host``                               the same, on port 443                   ``host``
``dns:///host:port``                   same as ``host:port``; the authority    ``host:port``
                                       part of ``dns://auth/host`` is ignored
``ipv4:1.2.3.4:5,1.2.3.5:6``           each IPv4 address of the list (port     the list as
                                       443 where one has none)                 written
``ipv6:[::1]:5,[::2]:6``               each IPv6 address of the list, in       the list as
                                       brackets when a port follows            written
=====================================  ======================================  =================

:func:`parse_target_addresses` reads every form: its :class:`TargetAddresses` holds the socket
addresses, or, for a DNS name, the name and port that a resolver step turns into addresses
(:meth:`TargetAddresses.resolved`); resolving is I/O and happens elsewhere.
:func:`parse_target` is the single-address view of the one-shot call and the server's ports:
it raises for a list of more than one address.  A channel keeps every address
(:mod:`minigrpc.driver.subchannel`).

A target that does not parse is a :class:`ValueError` naming it: a list of addresses with a
malformed entry is never looked up in DNS as one long name (which is what grpcio does with
``dns:`` and bare targets that hold a comma; minigrpc refuses those outright).

Over unix sockets grpc-go sends ``:authority: localhost``; we do the same
(docs/wire-rules.md, "Request headers").  For ``ipv4:`` and ``ipv6:`` targets the
``:authority`` is the text after the scheme, the list as written, which is what grpcio sends.
"""

import _socket  # the constants only: the socket module costs a cold start its enums

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Iterable, Tuple, Union
    from typing import NamedTuple as Record
else:
    from .._records import Record

__all__ = [
    "DEFAULT_PORT",
    "SocketAddress",
    "Target",
    "TargetAddresses",
    "parse_target",
    "parse_target_addresses",
]

#: Port used when a ``dns:`` or bare host target has none: 443 (``https``), as grpcio (gRPC
#: core's DNS resolver) and grpc-go use for every channel, plaintext or TLS, so that a target
#: written for grpcio reaches the same server here. The ``:authority`` of such a target is the
#: host alone, as theirs is (gRPC ``doc/naming.md``: the authority comes from the target).
#: ``doc/naming.md`` gives the same default to the entries of ``ipv4:`` and ``ipv6:`` lists
#: (grpcio 1.85 refuses such an entry without a port; minigrpc follows the naming doc).
DEFAULT_PORT = 443

if TYPE_CHECKING:  # pragma: no cover
    SocketAddress = Union[str, bytes, Tuple[str, int]]
else:  # an alias at run time: only a name for other modules' annotations
    SocketAddress = object

#: The schemes of the address lists, each with its address family.
_LIST_FAMILIES = {"ipv4": _socket.AF_INET, "ipv6": _socket.AF_INET6}


class Target(Record):
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


class TargetAddresses(Record):
    """Everything a target names: its socket addresses, or the DNS name they come from.

    ``addresses`` are in the order the target gives them (the load-balancing policy decides how
    to use them: :mod:`minigrpc.driver.balancing`).  A ``dns:`` or bare target whose host is a
    name has none until a resolver fills them in with :meth:`resolved`; one whose host is an
    IP address has that address already.
    """

    #: ``unix``, ``unix-abstract``, ``ipv4``, ``ipv6`` or ``dns`` (also for bare targets).
    scheme: str
    addresses: "Tuple[Target, ...]"
    #: The ``:authority`` every call on the channel sends (unless the channel overrides it).
    authority: str
    #: The target as written, for messages.
    display: str
    #: The name to resolve (``dns`` only; "" otherwise).
    host: str = ""
    #: The port of every address the name resolves to (``dns`` only).
    port: int = 0

    @property
    def needs_resolution(self) -> bool:
        """True for a DNS name whose addresses are not known yet."""
        return not self.addresses

    def resolved(self, records: "Iterable[Tuple[int, str]]") -> "TargetAddresses":
        """This target with the addresses a resolver found for its name: ``(family, ip)`` pairs
        (``AF_INET`` or ``AF_INET6``), every A and AAAA record, in the resolver's order."""
        addresses = tuple(
            Target(family, (ip, self.port), self.authority, _join_host_port(ip, self.port))
            for family, ip in records
        )
        return self._replace(addresses=addresses)


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split_host_port(text: str, default_port: int) -> "Tuple[str, int]":
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
    return host, _port(port_text, text)


def _port(text: str, where: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise ValueError(f"invalid port in target {where!r}")
    return int(text)


def _scheme(target: str) -> "Tuple[str, str]":
    """(the scheme in lower case, what follows its colon), or ("", target) for a bare target.
    Only the schemes this module reads count: ``localhost:50051`` is a host and a port."""
    colon = target.find(":")
    if colon > 0:
        scheme = target[:colon].lower()
        if scheme in ("unix", "unix-abstract", "dns", "ipv4", "ipv6"):
            return scheme, target[colon + 1 :]
    return "", target


def _unix(scheme: str, rest: str, target: str) -> Target:
    if scheme == "unix-abstract":
        return Target(_socket.AF_UNIX, b"\0" + rest.encode("utf-8"), "localhost", target)
    path = rest
    if path.startswith("//"):
        # unix://authority/abs/path: only an empty authority is meaningful (naming.md).
        after = path[2:]
        slash = after.find("/")
        if slash < 0:
            raise ValueError(f"invalid target {target!r}: unix:// needs an absolute path")
        path = after[slash:]
    if not path:
        raise ValueError(f"invalid target {target!r}: empty socket path")
    return Target(_socket.AF_UNIX, path, "localhost", target)


def _without_authority(rest: str, target: str) -> str:
    """The path of ``scheme://authority/path``: an ``ipv4:``/``ipv6:`` list takes no authority."""
    if not rest.startswith("//"):
        return rest
    slash = rest.find("/", 2)
    if slash != 2:
        raise ValueError(f"invalid target {target!r}: an address list takes no authority")
    return rest[3:]


def _list_entry(family: int, text: str, target: str) -> Target:
    """One ``address[:port]`` of an ``ipv4:`` or ``ipv6:`` list."""
    if family == _socket.AF_INET:
        host, _, port_text = text.partition(":")
    elif text.startswith("["):
        end = text.find("]")
        rest = text[end + 1 :] if end > 0 else "?"
        if rest and not rest.startswith(":"):
            raise ValueError(f"invalid target {target!r}: {text!r} is not [address]:port")
        host, port_text = text[1:end], rest[1:]
        if rest and not port_text:
            raise ValueError(f"invalid target {target!r}: {text!r} has an empty port")
    else:
        host, port_text = text, ""
    if family == _socket.AF_INET and ":" in text and not port_text:
        raise ValueError(f"invalid target {target!r}: {text!r} has an empty port")
    # A zone written the URI way (``fe80::1%25eth0``) is the socket module's ``fe80::1%eth0``.
    host = host.replace("%25", "%")
    try:
        _socket.inet_pton(family, host.partition("%")[0])
    except OSError:
        kind = "IPv4" if family == _socket.AF_INET else "IPv6"
        raise ValueError(f"invalid target {target!r}: {host!r} is not an {kind} address") from None
    port = _port(port_text, target) if port_text else DEFAULT_PORT
    return Target(family, (host, port), "", _join_host_port(host, port))


def _address_list(scheme: str, rest: str, target: str) -> TargetAddresses:
    path = _without_authority(rest, target)
    family = _LIST_FAMILIES[scheme]
    # grpcio skips empty entries ("a,,b", "a,"); so do we, but a list must name an address.
    entries = [_list_entry(family, text, target) for text in path.split(",") if text]
    if not entries:
        raise ValueError(f"invalid target {target!r}: no address in the list")
    addresses = tuple(entry._replace(authority=path) for entry in entries)
    return TargetAddresses(scheme, addresses, path, target)


def _dns(rest: str, target: str, default_port: int) -> TargetAddresses:
    text = rest
    if text.startswith("//"):
        slash = text.find("/", 2)
        if slash < 0:
            raise ValueError(f"invalid target {target!r}")
        text = text[slash + 1 :]
    if "," in text:
        raise ValueError(
            f"invalid target {target!r}: a host name has no ','; "
            "list addresses with the ipv4: or ipv6: scheme"
        )
    host, port = _split_host_port(text, default_port)
    display = _join_host_port(host, port)
    authority = display if _has_port(text) else (f"[{host}]" if ":" in host else host)
    if ":" in host:
        family = _socket.AF_INET6
    elif _looks_like_ipv4(host):
        family = _socket.AF_INET
    else:
        return TargetAddresses("dns", (), authority, display, host, port)
    return TargetAddresses("dns", (Target(family, (host, port), authority, display),),
                           authority, display, host, port)


def parse_target_addresses(target: str, default_port: int = DEFAULT_PORT) -> TargetAddresses:
    """Parse any target (see the module docstring); raises ValueError naming it when it is
    malformed."""
    if not isinstance(target, str) or not target:
        raise ValueError(f"invalid target {target!r}")
    scheme, rest = _scheme(target)
    if scheme in ("unix", "unix-abstract"):
        unix = _unix(scheme, rest, target)
        return TargetAddresses(scheme, (unix,), unix.authority, target)
    if scheme in _LIST_FAMILIES:
        return _address_list(scheme, rest, target)
    return _dns(rest, target, default_port)


def parse_target(target: str, default_port: int = DEFAULT_PORT) -> Target:
    """Parse a target of one address; raises ValueError with a readable message when it is
    malformed or lists several addresses (those take :func:`parse_target_addresses`).

    A DNS name comes back as one :class:`Target` of family ``AF_UNSPEC`` holding the name and
    port, which the transports resolve when they dial.
    """
    # The plugin's one target takes no detour.
    if isinstance(target, str) and target.startswith("unix:"):
        return _unix("unix", target[5:], target)
    if isinstance(target, str) and target.startswith("unix-abstract:"):
        return _unix("unix-abstract", target[14:], target)
    parsed = parse_target_addresses(target, default_port)
    if len(parsed.addresses) > 1:
        raise ValueError(
            f"invalid target {target!r}: it lists {len(parsed.addresses)} addresses, and this "
            "channel dials one"
        )
    if parsed.addresses:
        return parsed.addresses[0]
    return Target(_socket.AF_UNSPEC, (parsed.host, parsed.port), parsed.authority, parsed.display)


def _has_port(text: str) -> bool:
    """``text`` (a target's host part) names a port: ``h:1``, ``[v6]:1``; not ``h``, ``v6``."""
    if text.startswith("["):
        return "]:" in text
    return text.count(":") == 1


def _looks_like_ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)
