"""``list``, ``describe`` and ``call``: the commands that need protobuf.

Each runs in a :class:`Session`, which dials only when something must be asked of the server
(a reflection lookup or the call) and uses one connection for all of it, as grpcurl does.  What
a call prints: each response as protobuf's JSON on stdout, as it arrives; then the status on
stderr (``status: OK``, or ``status: NOT_FOUND (5): ...``); the exit code is the status code.
"""

import sys
from typing import Any, Iterator, List, Optional, Tuple

from . import known_protos, render
from .arguments import Options
from .connect import Deadline, open_channel, wait_for_connection, with_call_defaults
from .exits import MISSING_DEPENDENCY, NOT_FOUND, OK, ToolError, UsageError, status_line
from .jsoncodec import DataError, Requests, any_type_names, to_json
from .schema import KINDS, KnownSchema, ReflectionSchema, Schema, local_schema

#: A response the tool cannot read as the method's response type: what a channel reports when
#: its deserializer fails (gRPC's doc/statuscodes.md lists this under INTERNAL).
_INTERNAL = 13


def run(options: Options) -> int:
    _require_protobuf(options.command)
    session = Session(options)
    try:
        if options.command == "list":
            return run_list(session)
        if options.command == "describe":
            return run_describe(session)
        return run_call(session)
    finally:
        session.close()


def _require_protobuf(command: str) -> None:
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise ToolError(f"'{command}' needs protobuf, which this Python lacks (pip install "
                        "protobuf); 'health' does not", MISSING_DEPENDENCY) from None


class Session:
    """One command's options, deadline and (once needed) channel."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.deadline = Deadline(options.max_time)
        self._channel: Any = None
        self._connected = False
        #: The connection never came: the channel's own dial still holds it, and closing it
        #: would wait for that dial, which may never end (a TLS handshake nobody answers).
        self._abandoned = False

    def channel(self) -> Any:
        """The channel, connected (or failed to connect) before the first call on it."""
        if self._channel is None:
            self._channel = open_channel(self.options)
        if not self._connected:
            try:
                wait_for_connection(self._channel, self.options, self.deadline)
            except ToolError:
                self._abandoned = True
                raise
            self._connected = True
        return self._channel

    def schema(self, symbol: Optional[str]) -> Schema:
        """Where ``symbol``'s descriptors come from: the files given, the tool's own protos,
        else the server's reflection (``symbol`` None: a listing, which asks the server)."""
        options = self.options
        if options.protosets or options.proto_modules:
            return local_schema(options.protosets, options.proto_modules)
        if symbol is not None and known_protos.knows(symbol):
            return KnownSchema()
        channel = with_call_defaults(self.channel(), options, self.deadline)
        return ReflectionSchema(channel, options.target)

    def close(self) -> None:
        if self._channel is not None and not self._abandoned:
            self._channel.close()


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_list(session: Session) -> int:
    schema = session.schema(None)
    service_name = session.options.name
    if service_name:
        service = schema.find_service(service_name.lstrip("."))
        names = [f"{service.full_name}.{method.name}" for method in service.methods]
    else:
        names = schema.service_names()
    for name in names or ["(none)"]:
        _out(name)
    return OK


def run_describe(session: Session) -> int:
    symbol = (session.options.name or "").lstrip(".")
    schema = session.schema(symbol or None)
    if symbol:
        kind, descriptor = schema.find_symbol(symbol)
        _out(render.describe(kind, KINDS[kind], descriptor))
        return OK
    texts = []
    for name in schema.service_names():  # every service; one the server cannot describe
        try:                              # (a service without a proto) is named on stderr
            kind, descriptor = schema.find_symbol(name)
        except ToolError as exc:
            if exc.exit_code != NOT_FOUND:
                raise
            sys.stderr.write(f"minigrpc: {name} is listed, but {exc.message}\n")
            continue
        texts.append(render.describe(kind, KINDS[kind], descriptor))
    _out("\n\n".join(texts) if texts else "(no services)")
    return OK


def split_method(text: str) -> Tuple[str, str]:
    """``pkg.Service/Method``, ``/pkg.Service/Method`` or ``pkg.Service.Method`` (grpcurl takes
    the first and the last) as (service, method)."""
    name = text.strip().lstrip("/")
    if "/" in name:
        service, _, method = name.rpartition("/")
    else:
        service, _, method = name.rpartition(".")
    if not service or not method or "/" in service:
        raise UsageError(f"{text!r} is not a method: write pkg.Service/Method")
    return service.lstrip("."), method


class _Sender:
    """A client stream's requests, serialized as minigrpc's request thread asks for them; the
    first bad one is kept, so that the tool reports it rather than the status it causes
    (UNKNOWN, "Exception iterating requests!")."""

    def __init__(self, messages: Iterator[Any]) -> None:
        self._messages = messages
        self.error: Optional[DataError] = None

    def __iter__(self) -> Iterator[bytes]:
        try:
            for message in self._messages:
                yield message.SerializeToString()
        except DataError as exc:
            self.error = exc
            raise


class _Printer:
    """Prints each response as JSON; an ``Any``'s type is fetched first (json_format prints
    the packed message)."""

    def __init__(self, message_class: Any, schema: Schema, emit_defaults: bool) -> None:
        self._class = message_class
        self._schema = schema
        self._emit_defaults = emit_defaults
        self._loaded: set = set()
        self.count = 0

    def show(self, payload: bytes) -> None:
        from google.protobuf.message import DecodeError

        self.count += 1
        name = self._class.DESCRIPTOR.full_name
        try:
            message = self._class.FromString(payload)
        except DecodeError as exc:
            raise ToolError(f"response {self.count} is not a valid {name}: {exc}",
                            _INTERNAL) from None
        for type_name in any_type_names(message) - self._loaded:
            self._loaded.add(type_name)
            self._schema.load_message_type(type_name)
        try:
            text = to_json(message, self._emit_defaults, self._schema.pool)
        except (TypeError, KeyError, ValueError) as exc:
            raise ToolError(f"response {self.count} ({name}) cannot be printed as JSON: {exc}",
                            _INTERNAL) from None
        _out(text)


def run_call(session: Session) -> int:
    import minigrpc
    from minigrpc.descriptors import message_class, method_path

    options = session.options
    service_name, method_name = split_method(options.name or "")
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    requests = Requests(options.data, stdin)  # JSON syntax is checked before anything is dialled
    schema = session.schema(f"{service_name}.{method_name}")
    method = schema.find_method(service_name, method_name)
    declared = render.declaration("method", method)
    client_streaming, server_streaming = declared.client_streaming, declared.server_streaming
    request_class = message_class(method.input_type)
    messages = requests.messages(request_class, schema.pool)
    path = method_path(method)
    request: Any
    sender: Optional[_Sender] = None
    if client_streaming:
        sender = _Sender(messages)
        request = iter(sender)
    else:
        given: List[Any] = list(messages)
        if len(given) > 1:
            raise DataError(f"{path} takes one request message; -d gave {len(given)}")
        request = (given[0] if given else request_class()).SerializeToString()
    printer = _Printer(message_class(method.output_type), schema, options.emit_defaults)
    channel = session.channel()
    shape = ("stream_" if client_streaming else "unary_") + ("stream" if server_streaming
                                                             else "unary")
    invoke = getattr(channel, shape)(path)
    arguments = {"timeout": session.deadline.remaining(), "metadata": options.headers or None}
    call: Any = None
    try:
        if server_streaming:
            call = invoke(request, **arguments)
            for payload in call:
                printer.show(payload)
        else:
            payload, call = invoke.with_call(request, **arguments)
            printer.show(payload)
        code, details = call.code(), call.details()
    except minigrpc.RpcError as exc:
        if sender is not None and sender.error is not None:
            raise sender.error from None
        code, details = exc.code(), exc.details()
    except ToolError:
        if call is not None:
            call.cancel()
        raise
    except ValueError as exc:  # metadata the channel refuses
        raise UsageError(f"-H: {exc}") from None
    number: int = code.value[0]
    sys.stderr.write(status_line(code.name, number, details or "") + "\n")
    return number
