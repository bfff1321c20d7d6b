"""The CNI plugin shell: environment, stdin, version gating, output and exit codes.

This is a byte-for-byte re-implementation of containernetworking/cni ``pkg/skel`` v1.3 as the Go
``antrea-cni`` uses it (docs/cni-plugin-behaviour.md; its "Python parity pitfalls" are handled
here).  The runtime only looks at stdout and the exit status, so every byte written here is part of
the contract.

The shell knows nothing about Antrea or gRPC: the plugin hands :func:`plugin_main` one callable
per command (:class:`CniFuncs`).  A callable returns the bytes to print on success or raises
:class:`CniError`; anything else it raises becomes code 999 (docs/cni-plugin-behaviour.md, "Output
bytes").  Only the standard library modules that the interpreter has already loaded at start-up are
used here: :mod:`posix` rather than :mod:`os`, which a bare ``python -I -S`` does not load and which
costs a cold start about 2 ms on CPython 3.6 to 3.10 (os, stat, posixpath, _collections_abc).
"""

import posix
import sys

from cni_client.go_compat import (
    GoParseError,
    JsonInputError,
    decode_json_document,
    go_atoi,
    go_json_string,
    go_quote,
    go_string_field,
)

# typing costs ~5 ms of import time (it pulls in re and enum); annotations are strings here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    CmdFunc = Callable[["CmdArgs"], bytes]

# CNI error codes used by the shell (CNI SPEC.md "Error"; docs/cni-plugin-behaviour.md).
ERR_INCOMPATIBLE_CNI_VERSION = 1
ERR_UNKNOWN_CONTAINER = 3  # "missing containerID": unreachable: empty means missing
ERR_INVALID_ENVIRONMENT_VARIABLES = 4
ERR_IO_FAILURE = 5
ERR_DECODING_FAILURE = 6
ERR_INVALID_NETWORK_CONFIG = 7
ERR_INTERNAL = 999

#: Versions the plugin accepts, in the order Go prints them (``pkg/version``).
SUPPORTED_VERSIONS: "Tuple[str, ...]" = (
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

#: VERSION reply: compact JSON with the trailing newline of Go's json.Encoder.
VERSION_OUTPUT = (
    b'{"cniVersion":"1.1.0","supportedVersions":'
    + b"[" + b",".join(b'"' + v.encode() + b'"' for v in SUPPORTED_VERSIONS) + b"]}\n"
)

# Go's anonymous decode targets, as reflect prints them in json.UnmarshalTypeError.
_NAME_STRUCT = 'struct { Name string "json:\\"name\\"" }'
_VERSION_STRUCT = 'struct { CNIVersion string "json:\\"cniVersion\\"" }'


class CniError(Exception):
    """A CNI error result: printed as ``{code, msg, details}`` on stdout with exit status 1."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(code, msg, details)
        self.code = code
        self.msg = msg
        self.details = details

    def __str__(self) -> str:
        return f"{self.msg}; {self.details}" if self.details else self.msg

    def to_json(self) -> bytes:
        """The error JSON exactly as Go's ``types.Error.Print`` writes it."""
        return encode_error_json(self.code, self.msg, self.details)


class CmdArgs:
    """What one invocation carries (skel.CmdArgs).  Env values are str with undecodable bytes
    surrogate-escaped, so they round-trip and can be reported the way Go reports them."""

    __slots__ = ("args", "container_id", "ifname", "netns", "netns_override", "path",
                 "stdin_data")

    def __init__(self, container_id: str = "", netns: str = "", ifname: str = "",
                 args: str = "", path: str = "", netns_override: str = "",
                 stdin_data: bytes = b"") -> None:
        self.container_id = container_id
        self.netns = netns
        self.ifname = ifname
        self.args = args
        self.path = path
        self.netns_override = netns_override
        self.stdin_data = stdin_data

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"CmdArgs({fields})"


class CniFuncs:
    """One callable per command (skel.CNIFuncs).  Each returns the bytes for stdout or raises
    :class:`CniError`."""

    __slots__ = ("add", "check", "delete", "gc", "status")

    def __init__(self, add: "CmdFunc", check: "CmdFunc", delete: "CmdFunc", status: "CmdFunc",
                 gc: "CmdFunc") -> None:
        self.add = add
        self.check = check
        self.delete = delete
        self.status = status
        self.gc = gc


def encode_error_json(code: int, msg: str, details: str = "") -> bytes:
    """``json.MarshalIndent(types.Error, "", "    ")``: key order code/msg/details, ``details``
    omitted when empty (omitempty), ``msg`` always present, no trailing newline.
    ``code`` is a Go ``uint``, so negative values wrap as they would there."""
    lines = [
        "{",
        f'    "code": {code & 0xFFFFFFFFFFFFFFFF},',
        f'    "msg": {go_json_string(msg)}' + ("," if details else ""),
    ]
    if details:
        lines.append(f'    "details": {go_json_string(details)}')
    lines.append("}")
    return "\n".join(lines).encode("utf-8")


def parse_version(version: str) -> "Tuple[int, int, int]":
    """``version.ParseVersion`` from containernetworking/cni (docs/cni-plugin-behaviour.md,
    "Versions")."""
    if version == "":
        return (0, 1, 0)
    parts = version.split(".")
    if len(parts) >= 4:
        raise GoParseError(f"invalid version {go_quote(version)}: too many parts")
    numbers = [0, 0, 0]
    for index, part in enumerate(parts):
        try:
            numbers[index] = go_atoi(part)
        except GoParseError as exc:
            label = ("major", "minor", "micro")[index]
            raise GoParseError(
                f"failed to convert {label} version part {go_quote(part)}: {exc}") from None
    return (numbers[0], numbers[1], numbers[2])


def version_at_least(version: str, other: str) -> bool:
    """``version.GreaterThanOrEqualTo``; raises :class:`GoParseError` like Go returns err."""
    return parse_version(version) >= parse_version(other)


# --------------------------------------------------------------------------------------------
# Validators (containernetworking/cni pkg/utils; docs/cni-plugin-behaviour.md).

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_TAIL = _ALNUM | frozenset("_.-")
# unicode.IsSpace: Latin-1 spaces plus the White_Space property; not U+001C-U+001F.
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                      + "".join(chr(c) for c in range(0x2000, 0x200B)))
_MAX_IFNAME_BYTES = 15


def is_valid_name(text: str) -> bool:
    """Full match of ``^[a-zA-Z0-9][a-zA-Z0-9_.\\-]*$`` (container IDs, network names)."""
    return bool(text) and text[0] in _ALNUM and all(ch in _NAME_TAIL for ch in text[1:])


def validate_container_id(container_id: str, raw: bytes) -> None:
    if not is_valid_name(container_id):
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID",
                       container_id)


def validate_ifname(ifname: str, raw: bytes) -> None:
    """``utils.ValidateInterfaceName``: the length is counted in bytes, as the kernel does."""
    if len(raw) > _MAX_IFNAME_BYTES:
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is too long",
                       f"interface name should be less than {_MAX_IFNAME_BYTES + 1} characters")
    if ifname in (".", ".."):
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is . or ..")
    if any(ch in "/:" or ch in _GO_SPACE for ch in ifname):
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES,
                       "interface name contains / or : or whitespace characters")


_ADD_CHECK_DEL = frozenset(("ADD", "CHECK", "DEL"))
_ADD_CHECK = frozenset(("ADD", "CHECK"))
_NEEDS_PATH = frozenset(("ADD", "CHECK", "DEL", "GC", "STATUS"))
_NEVER: "frozenset[str]" = frozenset()

# (variable, commands that require it, validator), in skel's processing order.
_ENV_VARS: "Sequence[Tuple[str, frozenset[str], Optional[Callable[[str, bytes], None]]]]" = (
    ("CNI_COMMAND", _NEVER, None),
    ("CNI_CONTAINERID", _ADD_CHECK_DEL, validate_container_id),
    ("CNI_NETNS", _ADD_CHECK, None),
    ("CNI_IFNAME", _ADD_CHECK_DEL, validate_ifname),
    ("CNI_ARGS", _NEVER, None),
    ("CNI_PATH", _NEEDS_PATH, None),
    ("CNI_NETNS_OVERRIDE", _NEVER, None),
)


def read_environment(environ: "Mapping[bytes, bytes]") -> "Tuple[str, Dict[str, str]]":
    """skel's ``getCmdArgsFromEnv`` up to stdin: collect, validate, list what is missing.

    A validator failure is returned at once (it beats "missing"); an empty value counts as
    unset.  Raises :class:`CniError` code 4.  Returns the command and every variable."""
    command = environ.get(b"CNI_COMMAND", b"").decode("utf-8", "surrogateescape")
    values: Dict[str, str] = {}
    missing: List[str] = []
    for name, required_for, validator in _ENV_VARS:
        raw = environ.get(name.encode(), b"")
        value = raw.decode("utf-8", "surrogateescape")
        values[name] = value
        required = name == "CNI_COMMAND" or command in required_for
        if not raw:
            if required:
                missing.append(name)
        elif required and validator is not None:
            validator(value, raw)
    if missing:
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES,
                       f"required env variables [{','.join(missing)}] missing")
    return command, values


def read_stdin(stdin_fd: int) -> bytes:
    """``io.ReadAll(os.Stdin)``; a read error is code 5 with Go's wording."""
    chunks: List[bytes] = []
    try:
        while True:
            try:
                chunk = posix.read(stdin_fd, 65536)
            except BlockingIOError:  # an inherited non-blocking pipe: wait as Go's poller does
                import select

                select.select([stdin_fd], [], [])
                continue
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except OSError as exc:
        reason = posix.strerror(exc.errno) if exc.errno else str(exc)
        reason = reason[:1].lower() + reason[1:]
        raise CniError(ERR_IO_FAILURE,
                       f"error reading from stdin: read /dev/stdin: {reason}") from None


def validate_network_config(document: object) -> None:
    """skel's ``validateConfig`` after parsing: name present and well-formed."""
    try:
        name = go_string_field(document, "name", _NAME_STRUCT)
    except JsonInputError as exc:
        raise CniError(ERR_DECODING_FAILURE, f"error unmarshall network config: {exc}") from None
    if not name:
        raise CniError(ERR_INVALID_NETWORK_CONFIG, "missing network name")
    if not is_valid_name(name):
        raise CniError(ERR_INVALID_NETWORK_CONFIG, "invalid characters found in network name",
                       name)


def config_version(document: object) -> str:
    """``version.ConfigDecoder.Decode``: cniVersion as a string, absent or empty = 0.1.0."""
    try:
        version = go_string_field(document, "cniVersion", _VERSION_STRUCT)
    except JsonInputError as exc:
        raise CniError(ERR_DECODING_FAILURE,
                       f"decoding version from network config: {exc}") from None
    return version or "0.1.0"


def _check_membership(version: str) -> None:
    """``version.Reconciler.Check``: exact string membership."""
    if version not in SUPPORTED_VERSIONS:
        supported = " ".join(go_quote(v) for v in SUPPORTED_VERSIONS)
        raise CniError(ERR_INCOMPATIBLE_CNI_VERSION, "incompatible CNI versions",
                       f"config is {go_quote(version)}, plugin supports [{supported}]")


def _check_version_gate(version: str, minimum: str, command: str) -> None:
    """CHECK/GC/STATUS gating in skel's order: parse, config below minimum, no plugin
    version at or above the config, then membership."""
    try:
        if not version_at_least(version, minimum):
            raise CniError(ERR_INCOMPATIBLE_CNI_VERSION,
                           f"config version does not allow {command}")
        if not any(version_at_least(v, version) for v in SUPPORTED_VERSIONS):
            raise CniError(ERR_INCOMPATIBLE_CNI_VERSION,
                           f"plugin version does not allow {command}")
    except GoParseError as exc:
        raise CniError(ERR_DECODING_FAILURE, str(exc)) from None
    _check_membership(version)


_GATE_MINIMUM = {"CHECK": "0.4.0", "GC": "1.1.0", "STATUS": "1.1.0"}


def dispatch(funcs: CniFuncs, environ: "Mapping[bytes, bytes]", stdin_fd: int) -> bytes:
    """skel's ``pluginMain`` for everything but the about text: returns stdout bytes or raises
    :class:`CniError`."""
    command, env = read_environment(environ)
    if command == "VERSION":
        return VERSION_OUTPUT
    stdin_data = read_stdin(stdin_fd)
    try:
        document = decode_json_document(stdin_data)
    except JsonInputError as exc:
        raise CniError(ERR_DECODING_FAILURE, f"error unmarshall network config: {exc}") from None
    validate_network_config(document)

    handlers = {"ADD": funcs.add, "DEL": funcs.delete, "CHECK": funcs.check,
                "GC": funcs.gc, "STATUS": funcs.status}
    if command not in handlers:
        raise CniError(ERR_INVALID_ENVIRONMENT_VARIABLES, f"unknown CNI_COMMAND: {command}")
    version = config_version(document)
    if command in _GATE_MINIMUM:
        _check_version_gate(version, _GATE_MINIMUM[command], command)
    else:
        _check_membership(version)
    args = CmdArgs(
        container_id=env["CNI_CONTAINERID"],
        netns=env["CNI_NETNS"],
        ifname=env["CNI_IFNAME"],
        args=env["CNI_ARGS"],
        path=env["CNI_PATH"],
        netns_override=env["CNI_NETNS_OVERRIDE"],
        stdin_data=stdin_data,
    )
    return handlers[command](args)


def process_environ() -> "Mapping[bytes, bytes]":
    """The process environment, bytes to bytes: ``os.environb`` once :mod:`os` is loaded, else
    ``posix.environ``, what ``os.environb`` is made from.  Until os is imported nothing in Python
    can have changed the environment, so the two agree (see the module docstring for why not os).
    """
    os = sys.modules.get("os")
    return posix.environ if os is None else os.environb


def environment_text(name: str) -> "Optional[str]":
    """``os.environ.get(name)``: a variable decoded as :mod:`os` decodes it (``os.fsdecode``)."""
    raw = process_environ().get(name.encode(sys.getfilesystemencoding(), "surrogateescape"))
    if raw is None:
        return None
    return raw.decode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def _about_lines(about: str) -> bytes:
    return (f"{about}\nCNI protocol versions supported: {', '.join(SUPPORTED_VERSIONS)}\n"
            .encode("utf-8", "surrogateescape"))


def _write_all(stream: "IO[bytes]", data: bytes) -> None:
    stream.write(data)
    stream.flush()


def plugin_main(funcs: CniFuncs, about: str, environ: "Optional[Mapping[bytes, bytes]]" = None,
                stdin_fd: int = 0, stdout: "Optional[IO[bytes]]" = None,
                stderr: "Optional[IO[bytes]]" = None) -> int:
    """Run one invocation; returns the exit status (0 success, 1 error; libcni
    looks only at whether it is zero).

    stdout receives either the success bytes or exactly one error JSON, never both and
    never a traceback.  An unexpected exception is code 999 with a one-line note on
    stderr.  A failure to write stdout itself can only be reported on stderr."""
    if environ is None:
        environ = process_environ()
    out = stdout if stdout is not None else _std_stream(1)
    err = stderr if stderr is not None else _std_stream(2)
    if not environ.get(b"CNI_COMMAND"):
        _safe_write(err, _about_lines(about))
        return 0
    try:
        output = dispatch(funcs, environ, stdin_fd)
    except CniError as exc:
        _safe_write(out, exc.to_json(), err)
        return 1
    except KeyboardInterrupt:  # SIGINT: like Go's default handler, die without output
        return 130
    except Exception as exc:  # a bug or an unforeseen environment: still one error JSON
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        _safe_write(err, f"antrea-cni: internal error: {text}\n".encode("utf-8", "replace"))
        _safe_write(out, encode_error_json(ERR_INTERNAL, f"internal error: {text}"), err)
        return 1
    return 0 if _safe_write(out, output, err) else 1


def _std_stream(fd: int) -> "IO[bytes]":
    """The binary stdout/stderr.  If the fd is not even open, a sink that swallows the bytes:
    the exit status is then all the runtime can get."""
    stream = sys.stdout if fd == 1 else sys.stderr
    if stream is not None and hasattr(stream, "buffer"):
        return stream.buffer
    try:
        return open(fd, "wb", buffering=0, closefd=False)
    except OSError:
        import io

        return io.BytesIO()


def _safe_write(stream: "IO[bytes]", data: bytes, stderr: "Optional[IO[bytes]]" = None) -> bool:
    try:
        _write_all(stream, data)
        return True
    except (OSError, ValueError) as exc:
        if stderr is not None:
            _safe_write(stderr, f"antrea-cni: error writing to stdout: {exc}\n".encode())
        return False
