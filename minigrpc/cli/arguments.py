"""The command line of ``python -m minigrpc``: ``COMMAND [options] TARGET [NAME]``.

Option names are grpcurl's with two dashes (``--plaintext``, ``--max-time``, ``--cacert``...),
and ``-H`` and ``-d`` keep their one letter, so a grpcurl command line reads the same here.
Each command has a parser of its own that knows only the options that mean something to it; a
wrong command line raises :class:`~minigrpc.cli.exits.UsageError` before anything is dialled.

Transport security follows grpcurl: a TCP target (``host:port``, ``dns:///host:port``) is dialled
with TLS unless ``--plaintext`` is given; a unix target (``unix:``, ``unix-abstract:``) is
plaintext, as a local socket's permissions are its protection (gRPC's doc/naming.md lists both
kinds).  The TLS options are refused where they would be ignored, so that a typo never turns
into a silently insecure call.
"""

import argparse
import base64
import binascii
from typing import List, NoReturn, Optional, Sequence, Tuple, Union

from .exits import UsageError

#: The commands, in the order the help lists them.
COMMANDS = ("list", "describe", "call", "health")

_SUMMARIES = {
    "list": "list the services a server exposes, or one service's methods (server reflection)",
    "describe": "describe a service, method, message or enum (server reflection)",
    "call": "call a method with JSON requests; print the responses as JSON",
    "health": "check grpc.health.v1 health, with grpc_health_probe's exit codes",
}

#: ``--connect-timeout`` unless given: grpcurl's 10 s; for ``health`` grpc_health_probe's 1 s.
CONNECT_TIMEOUT = 10.0
HEALTH_CONNECT_TIMEOUT = 1.0
#: ``health``'s ``--max-time`` unless given: grpc_health_probe's RPC timeout, 1 s.
HEALTH_MAX_TIME = 1.0

MetadataValue = Union[str, bytes]


class Options:
    """What the command line asked for, checked."""

    def __init__(self, command: str, namespace: argparse.Namespace) -> None:
        self.command = command
        self.target: str = namespace.target
        #: The second positional: a service (list, health), a symbol (describe), a method (call).
        self.name: Optional[str] = getattr(namespace, "name", None)
        self.headers: List[Tuple[str, MetadataValue]] = list(namespace.headers or ())
        self.data: List[str] = list(getattr(namespace, "data", None) or ())
        self.max_time: Optional[float] = namespace.max_time
        self.connect_timeout: float = namespace.connect_timeout
        self.plaintext: bool = namespace.plaintext
        self.cacert: Optional[str] = namespace.cacert
        self.cert: Optional[str] = namespace.cert
        self.key: Optional[str] = namespace.key
        self.authority: Optional[str] = namespace.authority
        self.emit_defaults: bool = getattr(namespace, "emit_defaults", False)
        self.protosets: List[str] = list(getattr(namespace, "protoset", None) or ())
        self.proto_modules: List[str] = list(getattr(namespace, "proto_module", None) or ())
        self.trace: bool = namespace.trace

    @property
    def unix(self) -> bool:
        """A unix socket target (path or abstract name): always plaintext."""
        return self.target.startswith(("unix:", "unix-abstract:"))

    @property
    def tls(self) -> bool:
        """Whether the connection uses TLS: a TCP target without ``--plaintext``."""
        return not self.unix and not self.plaintext


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`UsageError` instead of exiting with 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: the time must be above zero")
    return value


def header(text: str) -> Tuple[str, MetadataValue]:
    """``-H 'name: value'`` as a metadata pair: the name in lower case (gRPC metadata keys are,
    PROTOCOL-HTTP2.md "Custom-Metadata"), the value without the blanks around it, and the value of
    a ``-bin`` key decoded from base64 (standard or URL-safe alphabet, padding optional), which
    is how a binary value can be written on a command line."""
    name, colon, value = text.partition(":")
    name = name.strip().lower()
    if not colon or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'name: value'")
    value = value.strip()
    if not name.endswith("-bin"):
        return name, value
    padded = value + "=" * (-len(value) % 4)
    try:
        return name, base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise argparse.ArgumentTypeError(
            f"the value of {name} must be base64 (a -bin header carries bytes)") from None


def _add_connection_options(parser: argparse.ArgumentParser, command: str) -> None:
    health = command == "health"
    parser.add_argument("-H", dest="headers", action="append", type=header,
                        metavar="'NAME: VALUE'",
                        help="metadata to send; repeat for more (a -bin value is base64)")
    parser.add_argument("--max-time", type=_seconds, metavar="SECONDS",
                        default=HEALTH_MAX_TIME if health else None,
                        help="the deadline of the whole operation"
                             + (f" (default {HEALTH_MAX_TIME:g})" if health else
                                " (default: none)"))
    parser.add_argument("--connect-timeout", type=_seconds, metavar="SECONDS",
                        default=HEALTH_CONNECT_TIMEOUT if health else CONNECT_TIMEOUT,
                        help="how long to wait for the connection (default "
                             f"{HEALTH_CONNECT_TIMEOUT if health else CONNECT_TIMEOUT:g})")
    parser.add_argument("--plaintext", action="store_true",
                        help="no TLS on a TCP target (unix targets are always plaintext)")
    parser.add_argument("--cacert", metavar="FILE",
                        help="PEM certificates that sign the server's (default: the system's)")
    parser.add_argument("--cert", metavar="FILE",
                        help="PEM client certificate chain, for mutual TLS (with --key)")
    parser.add_argument("--key", metavar="FILE", help="PEM private key of --cert")
    parser.add_argument("--authority", metavar="NAME",
                        help="the :authority to send, and the name the TLS certificate must "
                             "carry")
    parser.add_argument("--trace", action="store_true",
                        help="print every HTTP/2 frame sent and received on stderr")


def _add_schema_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--protoset", action="append", metavar="FILE",
                        help="a FileDescriptorSet (protoc --descriptor_set_out "
                             "--include_imports) to use instead of server reflection; "
                             "repeatable")
    parser.add_argument("--proto-module", action="append", metavar="NAME",
                        help="an importable *_pb2 module to use instead of server "
                             "reflection; repeatable")


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one command."""
    parser = _Parser(prog=f"minigrpc {command}", description=_SUMMARIES[command],
                     allow_abbrev=False)
    parser.add_argument("target", metavar="TARGET",
                        help="unix:PATH, unix-abstract:NAME, HOST:PORT or dns:///HOST:PORT")
    if command == "list":
        parser.add_argument("name", metavar="SERVICE", nargs="?",
                            help="list this service's methods instead of the services")
    elif command == "describe":
        parser.add_argument("name", metavar="SYMBOL", nargs="?",
                            help="pkg.Service, pkg.Service.Method, pkg.Message or pkg.Enum "
                                 "(default: every service)")
    elif command == "call":
        parser.add_argument("name", metavar="METHOD",
                            help="pkg.Service/Method (or pkg.Service.Method)")
        parser.add_argument("-d", dest="data", action="append", metavar="JSON",
                            help="the request as JSON, '@' to read stdin; for a client stream "
                                 "each -d is one message, or several one after another")
        parser.add_argument("--emit-defaults", action="store_true",
                            help="print fields that hold their default value too (protobuf's "
                                 "json_format)")
    else:
        parser.add_argument("name", metavar="SERVICE", nargs="?", default="",
                            help="the service to check (default: the server as a whole)")
    _add_connection_options(parser, command)
    if command != "health":
        _add_schema_options(parser)
    return parser


def usage() -> str:
    """The help of ``minigrpc`` without a command."""
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: minigrpc COMMAND [options] TARGET [NAME]", "",
             "A gRPC command line on minigrpc: server reflection, calls in JSON, health checks.",
             "", "commands:"]
    lines += [f"  {name:<{width}}  {_SUMMARIES[name]}" for name in COMMANDS]
    lines += ["", "'minigrpc COMMAND --help' lists the options of a command.",
              "Exit codes: 0 OK; 1-16 the gRPC status a call ended with; 64 usage; 65 request "
              "data; 69 protobuf missing (health: grpc_health_probe's 0-4)."]
    return "\n".join(lines) + "\n"


def parse(command: str, argv: Sequence[str]) -> Options:
    """The options of ``command`` from its arguments; :class:`UsageError` when they are wrong."""
    options = Options(command, build_parser(command).parse_args(list(argv)))
    check(options)
    return options


def check(options: Options) -> None:
    """The rules between options, which argparse cannot say (grpcurl refuses the same)."""
    tls_options = [flag for flag, value in (("--cacert", options.cacert), ("--cert", options.cert),
                                            ("--key", options.key)) if value]
    if tls_options and options.unix:
        raise UsageError(f"{', '.join(tls_options)}: {options.target} is a unix target, "
                         "which is always plaintext")
    if tls_options and options.plaintext:
        raise UsageError(f"{', '.join(tls_options)} cannot be used with --plaintext")
    if bool(options.cert) != bool(options.key):
        raise UsageError("--cert and --key go together")
    if not options.target:
        raise UsageError("the target is empty")
