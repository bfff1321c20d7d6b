"""minigrpc's layout as data: each module's layer and concern, and the imports between them.

docs/architecture.md shows this as a picture (a Mermaid graph of the real imports, which GitHub
and most Markdown viewers draw) and as a table; ``tools/render_docs.py`` renders both from here,
and ``tests/docs/test_architecture.py`` enforces the rules:

* a module imports only modules of its own layer or of a lower one (so the sans-IO protocols
  never import a transport, and no codec imports a protocol);
* nothing in minigrpc imports cni_client;
* every module in ``minigrpc/`` is listed below, so a new file must be given a layer and a
  concern before the tests pass.

Imports inside ``if TYPE_CHECKING:`` blocks are annotations only and do not count.
"""

import ast
from pathlib import Path
from typing import Dict, List, NamedTuple, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minigrpc"


class Layer(NamedTuple):
    number: int
    name: str
    rule: str


LAYERS = (
    Layer(1, "codecs", "pure functions and small classes on bytes; no connection state, no I/O"),
    Layer(2, "protocols", "sans-IO state machines over HTTP/2: bytes in, call events out"),
    Layer(3, "transports", "sockets, threads and clocks; move bytes to and from the protocols"),
    Layer(4, "API", "grpcio's names and semantics"),
)


class Module(NamedTuple):
    layer: int
    concern: str


#: Every module of the package: its layer and its one concern.
MODULES: Dict[str, Module] = {
    "wire": Module(1, "length-prefixed messages, grpc-timeout, metadata, percent-encoding, "
                      "compression"),
    "status": Module(1, "status codes as numbers, RpcError, grpcio's Status, the mapping tables"),
    "enums": Module(1, "grpcio's StatusCode and Compression enums, made from the tables of "
                       "status and wire"),
    "errors": Module(1, "failures that carry their own status code"),
    "logs": Module(1, "minigrpc's loggers, silent (a NullHandler) until the application "
                      "configures logging"),
    "headers": Module(1, "every header block of both sides, built, checked and read"),
    "http2": Module(1, "our SETTINGS values, read sizes and buffers, frame-level errors, the "
                       "one-shot client's frame-header checks"),
    "frames": Module(1, "HTTP/2 frames to and from bytes, for both ends"),
    "hpack_codec": Module(1, "HPACK header blocks to and from fields, for both ends"),
    "handlers": Module(1, "grpcio's handler types, shared by registration and the servers"),
    "targets": Module(1, "target strings to socket addresses and :authority"),
    "client_outcome": Module(1, "what the server's frames mean for a client call, for both "
                                "clients"),
    "protocol": Module(2, "what both sides share: outbound and inbound messages, flow control"),
    "frame_budget": Module(2, "the allowance of frames that do no work: flood limits"),
    "memory_budget": Module(2, "what the server may buffer, in all and per connection, at its "
                               "real cost"),
    "connection_core": Module(2, "what both ends of an HTTP/2 connection keep alike, on "
                                 "minigrpc's frame and HPACK codecs"),
    "connection_events": Module(2, "what an HTTP/2 connection reports, one class per event"),
    "client_http2": Module(2, "the client's end of an HTTP/2 connection, on connection_core"),
    "client_protocol": Module(2, "the client's calls as a state machine"),
    "oneshot_protocol": Module(2, "one unary call on its own connection, on minigrpc's own "
                                  "frame and HPACK codecs, without connection_core"),
    "attempts": Module(2, "transparent retry and wait-for-ready backoff, for both transports"),
    "server_protocol": Module(2, "the server's calls as a state machine"),
    "server_settings": Module(2, "a server connection's limits and sizes, checked once"),
    "server_requests": Module(2, "how a server connection takes requests: each request's "
                                 "frames checked, refused or turned into call events"),
    "server_events": Module(2, "the call events the server protocol hands its socket layer"),
    "server_http2": Module(2, "the server's end of an HTTP/2 connection, on connection_core"),
    "server_responses": Module(2, "how a server connection writes responses: headers, "
                                  "messages at the pace of windows and output room, trailers"),
    "server_timers": Module(2, "the timed decisions both servers make: idle connections, stalled "
                               "requests, a stop's grace, drain and linger timeouts"),
    "server_accept": Module(2, "when both servers' listeners accept and when they rest: the "
                               "backoff on running out of descriptors, logged once an episode"),
    "server_dispatch": Module(2, "what every server decides per call: handler lookup, "
                                 "(de)serialisation, the status that ends it"),
    "trace": Module(3, "the frame trace of the bytes a socket carries"),
    "sockets": Module(3, "dialling and binding, shared by client and server"),
    "tls": Module(3, "TLS in memory (ssl.MemoryBIO) and grpcio's credentials"),
    "connectivity": Module(3, "channel connectivity states and channel_ready_future"),
    "oneshot": Module(3, "one blocking unary call on a fresh connection, for one-call "
                         "processes"),
    "client_connection": Module(3, "one blocking client connection: the reader and writer "
                                   "roles, waits and wake-ups"),
    "transport": Module(3, "the channel's connections: lazy connect, reconnects, "
                           "wait-for-ready, transparent retry"),
    "interceptors": Module(3, "grpcio's client and server interceptors"),
    "server_call": Module(3, "bounded hand-over of a stream between I/O and handler threads"),
    "servicer_context": Module(3, "the handler's context: grpcio's ServicerContext"),
    "server_options": Module(3, "the server's options, parsed once"),
    "server_handlers": Module(3, "the blocking server's calls: handlers on the executor, their "
                                 "requests, responses and outcomes"),
    "server_loop": Module(3, "the server's I/O thread: connections, reads, writes, timers, stop"),
    "server_commands": Module(3, "work handed to the server's I/O thread, and its wake-up "
                                 "socket pair"),
    "calls": Module(4, "call objects: futures, the streaming rendezvous, request senders"),
    "multicallables": Module(4, "grpcio's four multi-callables"),
    "channel": Module(4, "insecure_channel and secure_channel"),
    "server_api": Module(4, "grpcio's Server and server()"),
    "descriptors": Module(4, "stubs and servicer registration from protobuf descriptors"),
    "interfaces": Module(1, "grpcio's abstract classes: what code subclasses and checks "
                            "isinstance against"),
    "experimental": Module(4, "grpc.experimental's channel-less calls, for generated code"),
    "grpc_alias": Module(4, "makes `import grpc` resolve to minigrpc, for generated code"),
    "__init__": Module(4, "the package: grpcio's names, loaded on first use"),
    # The asyncio API (grpc.aio): its transports sit beside the blocking ones, its API above.
    "aio": Module(4, "the asyncio package: grpc.aio's names, loaded on first use"),
    # grpc.aio's exceptions and Metadata are plain classes, like status.py's: both asyncio
    # servers' layers use them.
    "aio._errors": Module(1, "grpc.aio's exceptions and its EOF marker"),
    "aio._metadata": Module(1, "grpc.aio.Metadata, the ordered multi-map of call metadata"),
    "aio._interfaces": Module(1, "grpc.aio's abstract classes: calls, channel, "
                                 "multi-callables, server, context"),
    "aio._transport": Module(3, "the asyncio client connection: event-loop I/O and waits"),
    "aio._call": Module(4, "minigrpc's grpc.aio calls: awaitable, async-iterable, writable"),
    "aio._channel": Module(4, "minigrpc's grpc.aio channel and its four multi-callables"),
    "aio._interceptors": Module(4, "grpc.aio's client interceptors and ClientCallDetails"),
    # grpcio's add-on packages (health, reflection, rich status), on protobuf alone.
    "_pb": Module(1, "the add-ons' messages: the installed add-on's, else minigrpc's copy"),
    "_pb.health_pb2": Module(1, "grpc.health.v1 messages (generated by proto/generate.py)"),
    "_pb.reflection_v1_pb2": Module(1, "grpc.reflection.v1 messages (generated)"),
    "_pb.reflection_v1alpha_pb2": Module(1, "grpc.reflection.v1alpha messages (generated)"),
    "_pb.status_pb2": Module(1, "google.rpc.Status (generated)"),
    "rpc_status": Module(4, "grpcio-status's to_status / from_call over google.rpc.Status"),
    "health": Module(4, "the health add-on package: grpcio-health-checking's layout"),
    "health.v1": Module(4, "grpc.health.v1: the health service"),
    "health.v1.health_pb2": Module(4, "the health messages, under grpcio's module name"),
    "health.v1.health_pb2_grpc": Module(4, "the health stub, servicer base and registration"),
    "health.v1._async": Module(4, "the health servicer for asyncio servers (health.aio)"),
    "health.v1.health": Module(4, "grpcio-health-checking's HealthServicer: Check, List, "
                                  "Watch, set, graceful shutdown"),
    "aio._servicer_context": Module(3, "the asyncio handler's context: minigrpc's "
                                       "grpc.aio.ServicerContext"),
    "aio._server_handlers": Module(3, "the asyncio server's calls: a task per call, its "
                                      "requests, responses and outcome"),
    "aio._server_loop": Module(3, "the asyncio server's I/O: connections, their timers, stop"),
    "aio._server": Module(4, "minigrpc's grpc.aio Server, server() and ServerInterceptor"),
    "reflection": Module(4, "the server reflection add-on package, v1 and v1alpha"),
    "reflection.servicer": Module(4, "server reflection answered from a descriptor pool, "
                                     "once for both versions"),
    "reflection.descriptor_database": Module(4, "the client side: a descriptor database "
                                                "filled by a server's reflection"),
    "reflection.v1": Module(4, "grpc.reflection.v1"),
    "reflection.v1.reflection_pb2": Module(4, "the v1 messages, under grpcio's module name"),
    "reflection.v1.reflection_pb2_grpc": Module(4, "the v1 stub, servicer base, registration"),
    "reflection.v1.reflection": Module(4, "v1 SERVICE_NAME, ReflectionServicer, "
                                          "enable_server_reflection"),
    "reflection.v1alpha": Module(4, "grpc.reflection.v1alpha, grpcio-reflection's layout"),
    "reflection.v1alpha.reflection_pb2": Module(4, "the v1alpha messages"),
    "reflection.v1alpha.reflection_pb2_grpc": Module(4, "the v1alpha stub, servicer base, "
                                                        "registration"),
    "reflection.v1alpha.reflection": Module(4, "grpcio-reflection's reflection module"),
}


def module_names() -> List[str]:
    """The modules that exist in ``minigrpc/``, subpackages included (``aio._channel``).

    A subpackage's ``__init__.py`` is named after the subpackage (``aio``); the package's own
    ``__init__.py`` is ``__init__``.
    """
    names = []
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        names.append(".".join(parts))
    return sorted(names)


def module_path(module: str) -> Path:
    """The file of a module name as :func:`module_names` spells it."""
    if module == "__init__":
        return PACKAGE / "__init__.py"
    parts = module.split(".")
    package = PACKAGE.joinpath(*parts)
    if package.is_dir():
        return package / "__init__.py"
    return PACKAGE.joinpath(*parts[:-1]) / f"{parts[-1]}.py"


def module_file(module: str) -> str:
    """The file of a module, relative to ``minigrpc/`` (``aio/_channel.py``)."""
    return module_path(module).relative_to(PACKAGE).as_posix()


def _package_of(module: str) -> List[str]:
    """The package a module's relative imports start from, as name parts below minigrpc."""
    if module == "__init__":
        return []
    parts = module.split(".")
    return parts if module_path(module).name == "__init__.py" else parts[:-1]


def _known(parts: List[str]) -> str:
    """The module name for ``parts`` below minigrpc (the package itself is ``__init__``)."""
    return ".".join(parts) if parts else "__init__"


def _type_checking_lines(tree: ast.Module) -> Set[int]:
    lines: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name == "TYPE_CHECKING":
                for child in node.body:
                    for inner in ast.walk(child):
                        if hasattr(inner, "lineno"):
                            lines.add(inner.lineno)
    return lines


def _from_import_targets(base: List[str], module: str, names: List[str]) -> Set[str]:
    """What ``from <base>.<module> import <names>`` loads: the submodule for each imported name
    that is one (``from . import wire``), else the module itself."""
    parts = base + (module.split(".") if module else [])
    found = set()
    for name in names:
        submodule = _known([*parts, name])
        found.add(submodule if module_path(submodule).exists() else _known(parts))
    return found


def imports_of(module: str) -> Tuple[Set[str], Set[str]]:
    """(minigrpc modules, other top-level packages) that ``module`` imports at run time."""
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = _package_of(module)
    inside: Set[str] = set()
    outside: Set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                inside.update(_from_import_targets(base, node.module or "", names))
            elif node.module:
                top, _, rest = node.module.partition(".")
                if top == "minigrpc":
                    inside.update(_from_import_targets([], rest, names))
                else:
                    outside.add(top)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                if top == "minigrpc" and rest:
                    inside.add(rest)
                else:
                    outside.add(top)
    # A package's __init__ is loaded before any of its modules: importing a name from it (such
    # as ``__version__``) adds no dependency worth drawing.
    ancestors = {_known(package[:depth]) for depth in range(len(package) + 1)}
    inside = {name for name in inside if name in MODULES and name != module} - ancestors
    return inside, outside


def import_graph() -> Dict[str, Set[str]]:
    return {module: imports_of(module)[0] for module in module_names() if module in MODULES}


def violations() -> List[str]:
    """Every broken rule, as a sentence; empty when the layout holds."""
    found = []
    for module in module_names():
        if module not in MODULES:
            found.append(
                f"minigrpc/{module_file(module)} is not listed in tools/architecture.py MODULES"
            )
    for module in MODULES:
        if module not in module_names():
            found.append(f"tools/architecture.py lists {module}, which minigrpc/ does not have")
    for module in module_names():
        if module not in MODULES:
            continue
        inside, outside = imports_of(module)
        if "cni_client" in outside:
            found.append(f"minigrpc/{module_file(module)} imports cni_client")
        layer = MODULES[module].layer
        for imported in sorted(inside):
            if MODULES[imported].layer > layer:
                found.append(
                    f"{module} (layer {layer}) imports {imported} "
                    f"(layer {MODULES[imported].layer}): imports go down the layers only"
                )
    return found


def mermaid() -> str:
    """The import graph as a Mermaid flowchart, one box per layer, top layer first."""
    graph = import_graph()
    lines = ["```mermaid", "flowchart TB"]
    for layer in sorted(LAYERS, reverse=True):
        lines.append(f'  subgraph L{layer.number}["{layer.number}. {layer.name}"]')
        members = sorted(name for name, info in MODULES.items() if info.layer == layer.number)
        for name in members:
            if name in graph:
                lines.append(f"    {_node(name)}[{name}]")
        lines.append("  end")
    for module in sorted(graph):
        for imported in sorted(graph[module]):
            lines.append(f"  {_node(module)} --> {_node(imported)}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def _node(name: str) -> str:
    return "pkg_init" if name == "__init__" else name.replace(".", "__")


def table() -> str:
    """file | layer | its one concern | what it may import (from minigrpc)."""
    graph = import_graph()
    rows = ["| file | layer | its one concern | imports (minigrpc) |", "|---|---|---|---|"]
    for layer in LAYERS:
        for name in sorted(n for n, info in MODULES.items() if info.layer == layer.number):
            if name not in graph:
                continue
            imported = ", ".join(f"`{m}`" for m in sorted(graph[name])) or "none"
            rows.append(
                f"| `{module_file(name)}` | {layer.number} {layer.name} | {MODULES[name].concern} "
                f"| {imported} |"
            )
    rules = "\n".join(f"{layer.number}. **{layer.name}**: {layer.rule}." for layer in LAYERS)
    return (
        rules
        + "\n\nA module imports only its own layer and the layers below "
        "(`tests/docs/test_architecture.py`), and nothing in minigrpc imports cni_client.\n\n"
        + "\n".join(rows)
        + "\n"
    )
