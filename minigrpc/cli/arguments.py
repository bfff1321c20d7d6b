"""The command line of ``python -m minigrpc``: ``COMMAND [options] TARGET [NAME]``.

Option names are grpcurl's with two dashes (``--plaintext``, ``--max-time``, ``--cacert``...),
and ``-H`` and ``-d`` keep their one letter, so a grpcurl command line reads the same here.
Options may come before, between or after the positional arguments; ``--name=value`` and
``-dVALUE`` work too, and ``--`` ends the options.  Each command accepts only the options that
mean something to it; a wrong command line raises :class:`~minigrpc.cli.exits.UsageError`
before anything is dialled.

Transport security follows grpcurl: a TCP target (``host:port``, ``dns:///host:port``) is dialled
with TLS unless ``--plaintext`` is given; a unix target (``unix:``, ``unix-abstract:``) is
plaintext, as a local socket's permissions are its protection (gRPC's doc/naming.md lists both
kinds).  The TLS options are refused where they would be ignored, so that a typo never turns
into a silently insecure call.

Why not argparse: a health probe's cold start is its cost (docs/benchmarks.md), and argparse
brings gettext, locale and re, and, from its first ``add_argument``, shutil with bz2 and lzma:
about 7 ms of a 15 ms interpreter start on CPython 3.13.  The grammar here is small enough to
parse in a page.  For the same reason the annotations evaluated at import time (module level,
signatures) are strings here and in the other modules ``health`` loads: without postponed
evaluation (Python 3.6) each ``typing`` subscription is built when the module loads, about a
millisecond in all on 3.6.
"""

from .exits import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

#: The commands, in the order the help lists them.
COMMANDS = ("list", "describe", "call", "health")

_SUMMARIES = {
    "list": "list the services a server exposes, or one service's methods (server reflection)",
    "describe": "describe a service, method, message or enum (server reflection)",
    "call": "call a method with JSON requests; print the responses as JSON",
    "health": "check grpc.health.v1 health, with grpc_health_probe's exit codes",
}

#: Each command's positional arguments: (name, help, required).
_POSITIONALS: "Dict[str, Tuple[Tuple[str, str, bool], ...]]" = {
    "list": (("SERVICE", "list this service's methods instead of the services", False),),
    "describe": (("SYMBOL", "pkg.Service, pkg.Service.Method, pkg.Message or pkg.Enum "
                            "(default: every service)", False),),
    "call": (("METHOD", "pkg.Service/Method (or pkg.Service.Method)", True),),
    "health": (("SERVICE", "the service to check (default: the server as a whole)", False),),
}
_TARGET_HELP = "unix:PATH, unix-abstract:NAME, HOST:PORT or dns:///HOST:PORT"

#: ``--connect-timeout`` unless given: grpcurl's 10 s; for ``health`` grpc_health_probe's 1 s.
CONNECT_TIMEOUT = 10.0
HEALTH_CONNECT_TIMEOUT = 1.0
#: ``health``'s ``--max-time`` unless given: grpc_health_probe's RPC timeout, 1 s.
HEALTH_MAX_TIME = 1.0

if TYPE_CHECKING:
    MetadataValue = Union[str, bytes]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise UsageError(f"{text!r}: the time must be above zero")
    return value


def header(text: str) -> "Tuple[str, MetadataValue]":
    """``-H 'name: value'`` as a metadata pair: the name in lower case (gRPC metadata keys are,
    PROTOCOL-HTTP2.md "Custom-Metadata"), the value without the blanks around it, and the value
    of a ``-bin`` key decoded from base64 (standard or URL-safe alphabet, padding optional),
    which is how a binary value can be written on a command line."""
    name, colon, value = text.partition(":")
    name = name.strip().lower()
    if not colon or not name:
        raise UsageError(f"-H {text!r} is not 'name: value'")
    value = value.strip()
    if not name.endswith("-bin"):
        return name, value
    import base64  # only a -bin header needs it
    import binascii

    padded = value + "=" * (-len(value) % 4)
    try:
        return name, base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise UsageError(f"-H {name}: the value of a -bin header is base64") from None


def _text(value: str) -> str:
    return value


class _Option:
    """One option: its names, where its value goes, and which commands take it."""

    def __init__(self, names: "Tuple[str, ...]", dest: str, help_text: str,
                 convert: "Optional[Callable[[str], object]]" = None, metavar: str = "",
                 repeat: bool = False, commands: "Sequence[str]" = COMMANDS) -> None:
        self.names = names
        self.dest = dest
        self.help = help_text
        #: None for a flag (no value).
        self.convert = convert
        self.metavar = metavar
        self.repeat = repeat
        self.commands = tuple(commands)


_SCHEMA_COMMANDS = ("list", "describe", "call")

_OPTIONS = (
    _Option(("-d",), "data", "the request as JSON, '@' to read stdin; for a client stream each "
            "-d is one message, or several one after another", _text, "JSON", True, ("call",)),
    _Option(("--emit-defaults",), "emit_defaults", "print fields that hold their default value "
            "too (protobuf's json_format)", commands=("call",)),
    _Option(("-H",), "headers", "metadata to send; repeat for more (a -bin value is base64)",
            header, "'NAME: VALUE'", True),
    _Option(("--max-time",), "max_time", "the deadline of the whole operation (default: none; "
            "health: 1)", _seconds, "SECONDS"),
    _Option(("--connect-timeout",), "connect_timeout", "how long to wait for the connection "
            "(default 10; health: 1)", _seconds, "SECONDS"),
    _Option(("--plaintext",), "plaintext", "no TLS on a TCP target (unix targets are always "
            "plaintext)"),
    _Option(("--cacert",), "cacert", "PEM certificates that sign the server's (default: the "
            "system's)", _text, "FILE"),
    _Option(("--cert",), "cert", "PEM client certificate chain, for mutual TLS (with --key)",
            _text, "FILE"),
    _Option(("--key",), "key", "PEM private key of --cert", _text, "FILE"),
    _Option(("--authority",), "authority", "the :authority to send, and the name the TLS "
            "certificate must carry", _text, "NAME"),
    _Option(("--trace",), "trace", "print every HTTP/2 frame sent and received on stderr"),
    _Option(("--protoset",), "protosets", "a FileDescriptorSet (protoc --descriptor_set_out "
            "--include_imports) to use instead of server reflection; repeatable", _text, "FILE",
            True, _SCHEMA_COMMANDS),
    _Option(("--proto-module",), "proto_modules", "an importable *_pb2 module to use instead "
            "of server reflection; repeatable", _text, "NAME", True, _SCHEMA_COMMANDS),
    _Option(("-h", "--help"), "help", "show this help"),
)


class HelpRequested(Exception):
    """``-h``/``--help``: :mod:`minigrpc.cli.main` prints :func:`help_text` and exits 0."""


class Options:
    """What the command line asked for, checked."""

    def __init__(self, command: str) -> None:
        health = command == "health"
        self.command = command
        self.target = ""
        #: The second positional: a service (list, health), a symbol (describe), a method (call).
        self.name: Optional[str] = None
        self.headers: List[Tuple[str, MetadataValue]] = []
        self.data: List[str] = []
        self.max_time: Optional[float] = HEALTH_MAX_TIME if health else None
        self.connect_timeout = HEALTH_CONNECT_TIMEOUT if health else CONNECT_TIMEOUT
        self.plaintext = False
        self.cacert: Optional[str] = None
        self.cert: Optional[str] = None
        self.key: Optional[str] = None
        self.authority: Optional[str] = None
        self.emit_defaults = False
        self.protosets: List[str] = []
        self.proto_modules: List[str] = []
        self.trace = False
        self.help = False

    @property
    def unix(self) -> bool:
        """A unix socket target (path or abstract name): always plaintext."""
        return self.target.startswith(("unix:", "unix-abstract:"))

    @property
    def tls(self) -> bool:
        """Whether the connection uses TLS: a TCP target without ``--plaintext``."""
        return not self.unix and not self.plaintext


def _options_of(command: str) -> "Dict[str, _Option]":
    return {name: option for option in _OPTIONS if command in option.commands
            for name in option.names}


def parse(command: str, argv: "Sequence[str]") -> Options:
    """The options of ``command`` from its arguments; :class:`UsageError` when they are wrong,
    :class:`HelpRequested` for ``--help``."""
    known = _options_of(command)
    options = Options(command)
    positionals: List[str] = []
    arguments = list(argv)
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        index += 1
        if argument == "--":
            positionals.extend(arguments[index:])
            break
        if not argument.startswith("-") or argument == "-":
            positionals.append(argument)
            continue
        if argument.startswith("--"):
            name, equals, value = argument.partition("=")
            has_value = bool(equals)
        else:  # -d{...}: a short option's value may follow without a blank
            name, value = argument[:2], argument[2:]
            has_value = bool(value)
        option = known.get(name)
        if option is None:
            raise UsageError(f"{name} is not an option of '{command}'")
        if option.convert is None:
            if has_value:
                raise UsageError(f"{name} takes no value")
            setattr(options, option.dest, True)
            continue
        if not has_value:
            if index == len(arguments):
                raise UsageError(f"{name} needs a value ({option.metavar})")
            value = arguments[index]
            index += 1
        converted = option.convert(value)
        if option.repeat:
            getattr(options, option.dest).append(converted)
        else:
            setattr(options, option.dest, converted)
    if options.help:
        raise HelpRequested()
    _take_positionals(command, options, positionals)
    check(options)
    return options


def _take_positionals(command: str, options: Options, positionals: "List[str]") -> None:
    expected = _POSITIONALS[command]
    if not positionals:
        raise UsageError("the target is missing")
    options.target = positionals.pop(0)
    for name, _, required in expected:
        if positionals:
            options.name = positionals.pop(0)
        elif required:
            raise UsageError(f"{name} is missing")
    if positionals:
        raise UsageError(f"too many arguments: {' '.join(positionals)}")
    if command == "health" and options.name is None:
        options.name = ""


def check(options: Options) -> None:
    """The rules between options (grpcurl refuses the same)."""
    if not options.target:
        raise UsageError("the target is empty")
    tls_options = [flag for flag, value in (("--cacert", options.cacert), ("--cert", options.cert),
                                            ("--key", options.key)) if value]
    if tls_options and options.unix:
        raise UsageError(f"{', '.join(tls_options)}: {options.target} is a unix target, "
                         "which is always plaintext")
    if tls_options and options.plaintext:
        raise UsageError(f"{', '.join(tls_options)} cannot be used with --plaintext")
    if bool(options.cert) != bool(options.key):
        raise UsageError("--cert and --key go together")


def usage_line(command: str) -> str:
    names = " ".join(f"{name}" if required else f"[{name}]"
                     for name, _, required in _POSITIONALS[command])
    return f"usage: minigrpc {command} [options] TARGET {names}\n"


def help_text(command: str) -> str:
    """``minigrpc COMMAND --help``."""
    rows = [("TARGET", _TARGET_HELP)] + [(name, text) for name, text, _ in _POSITIONALS[command]]
    lines = [usage_line(command).rstrip(), "", _SUMMARIES[command], "", "arguments:"]
    lines += [_help_row(name, text) for name, text in rows]
    lines += ["", "options:"]
    lines += [_help_row(", ".join(option.names) + (f" {option.metavar}" if option.metavar else ""),
                        option.help)
              for option in _OPTIONS if command in option.commands]
    return "\n".join(lines) + "\n"


def _help_row(names: str, text: str) -> str:
    import textwrap  # --help only

    indent = " " * 24
    first = f"  {names:<22}" if len(names) < 22 else f"  {names}\n{indent}"
    return first + textwrap.fill(text, width=96, initial_indent=indent,
                                 subsequent_indent=indent)[len(indent):]


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
