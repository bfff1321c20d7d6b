"""minigrpc's layout as data: its packages (the layers), each module's concern, and the imports.

docs/architecture.md shows this as a picture (a Mermaid graph of the packages and the real
imports between them, which GitHub and most Markdown viewers draw) and as a table of modules;
``tools/render_docs.py`` renders both from here, and ``tests/docs/test_architecture.py`` enforces
the rules:

* a package imports only the packages :data:`PACKAGES` lets it (so the HTTP/2 package imports
  nothing else of minigrpc, the sans-IO packages never import a transport, and the blocking and
  asyncio stacks never import each other);
* no import cycle, between modules or between packages;
* nothing in minigrpc imports cni_client;
* every module in ``minigrpc/`` is listed in :data:`MODULES` with its one concern, so a new file
  must be given one before the tests pass.

Every import counts: those made inside functions (imported late, for a cold start) and those
under ``if TYPE_CHECKING:`` (annotations only) as much as those at the top of a module.  A late
import still ties two modules together; it only moves the cost.
"""

import ast
from pathlib import Path
from typing import Dict, List, NamedTuple, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minigrpc"


class Package(NamedTuple):
    """One layer of the tree: a package of minigrpc (or the public modules at its root)."""

    layer: int
    purpose: str
    #: The packages its modules may import (besides its own).
    may_import: Tuple[str, ...]


#: The units the rules speak of, bottom first.  A module belongs to the package it sits in;
#: the modules directly in ``minigrpc/`` are the public entry points (``root``), but for
#: ``_version`` and ``_records``, which sit below the layers.
PACKAGES: Dict[str, Package] = {
    "_version": Package(0, "the version, written once", ()),
    "_pb": Package(0, "the add-ons' protobuf messages (generated)", ()),
    "_records": Package(0, "typed named tuples that cost no typing import at run time", ()),
    "http2": Package(1, "HTTP/2 and HPACK, sans-IO; knows nothing of gRPC", ()),
    "protocol": Package(
        2,
        "gRPC over HTTP/2, sans-IO: messages, header blocks, status, the call protocols",
        ("http2", "_version", "_records"),
    ),
    "driver": Package(
        3,
        "what both APIs share without I/O: decisions, options, grpcio's API shapes",
        ("protocol", "http2"),
    ),
    "net": Package(
        4,
        "the network both transports share: sockets, TLS, read sizes, the frame trace",
        ("driver", "protocol", "http2"),
    ),
    "blocking": Package(
        5,
        "the blocking API and its transport: sockets and threads",
        ("net", "driver", "protocol", "http2"),
    ),
    "aio": Package(
        5,
        "the asyncio API and its transport: the event loop",
        ("net", "driver", "protocol", "http2"),
    ),
    "root": Package(
        6,
        "the public entry points: the grpc namespace, the one-shot call, the alias, add-on helpers",
        ("blocking", "aio", "net", "driver", "protocol", "http2", "_pb", "_version"),
    ),
    "health": Package(
        7,
        "gRPC's health service (grpcio-health-checking's layout)",
        ("root", "aio", "protocol", "_pb"),
    ),
    "reflection": Package(
        7,
        "gRPC's server reflection (grpcio-reflection's layout)",
        ("root", "aio", "protocol", "_pb"),
    ),
    "cli": Package(
        8,
        "python -m minigrpc: grpcurl and a health probe on the public client API",
        ("root", "reflection", "health", "_pb"),
    ),
}

#: Every module of the package and its one concern, by dotted name below ``minigrpc``.
MODULES: Dict[str, str] = {
    "_version": "minigrpc's version, read by the package, setup.cfg and the user-agent",
    "_records": "Record: typing.NamedTuple's classes for the one-shot path, without typing",
    # HTTP/2
    "http2": "the HTTP/2 package: what it holds, in reading order",
    "http2.frames": "the wire: error codes, frames to and from bytes, the frame reader, header "
                    "blocks",
    "http2.hpack_codec": "HPACK header blocks to and from fields, for both ends",
    "http2.streams": "stream states as a table, flow-control windows, SETTINGS ours and the "
                     "peer's",
    "http2.events": "what an HTTP/2 connection reports, one class per event",
    "http2.connection": "an HTTP/2 connection, either end: one handler per frame type",
    "http2.client": "the client's end: its stream ids, preface and response blocks",
    "http2.server": "the server's end: its preface and request blocks",
    "http2.flood": "the allowance of frames that do no work: flood limits",
    # gRPC, sans-IO
    "protocol": "the gRPC sans-IO package: what it holds, in reading order",
    "protocol.codes": "status codes as numbers and every table that maps something to one",
    "protocol.status": "CallStatus, RpcError, grpcio's Status, the grpc-status value, and the "
                       "failures that carry their own status code",
    "protocol.enums": "grpcio's StatusCode and Compression enums, made from the tables",
    "protocol.wire": "length-prefixed messages, grpc-timeout, metadata, percent-encoding, "
                     "compression",
    "protocol.headers": "every header block of a call, both sides, built, checked and read",
    "protocol.targets": "target strings to socket addresses and :authority",
    "protocol.grpc_connection": "what both sides share: outbound and inbound messages, flow "
                                "control, memory",
    "protocol.client_outcome": "what the server's frames mean for a client call",
    "protocol.client_protocol": "the client's calls as a state machine",
    "protocol.oneshot_protocol": "one unary call on its own connection",
    "protocol.server_protocol": "the server's calls as a state machine",
    "protocol.server_settings": "a server connection's limits and sizes, checked once",
    "protocol.server_requests": "how a server connection takes requests",
    "protocol.server_responses": "how a server connection writes responses",
    "protocol.server_events": "the call events the server protocol hands its transport",
    "protocol.memory_budget": "what the server may buffer, in all and per connection",
    # shared, without I/O
    "driver": "the shared package without I/O: what it holds",
    "driver.attempts": "one call's retry budget, deadline and backoff: the client's verdicts "
                       "after each attempt",
    "driver.subchannel": "a channel's connections, one per address, and its state: which a "
                         "call goes to, when to dial or resolve",
    "driver.call_steps": "the client's reconnect and retry loop as steps both transports carry "
                         "out",
    "driver.channel_core": "a channel's target, options, credentials and compression, parsed "
                           "once for both APIs",
    "driver.invocation": "a client call's start-up and its responses' decoding, for both APIs",
    "driver.server_dispatch": "what every server decides per call: handler lookup, "
                              "(de)serialisation, the status that ends it",
    "driver.server_timers": "the timed decisions both servers make",
    "driver.server_accept": "when a listener rests: running out of descriptors, once per "
                            "episode",
    "driver.server_options": "the server's options, parsed once",
    "driver.server_call_state": "one call on a server: grpcio's context accessors that never "
                                "touch the wire, and where the call stands",
    "driver.server_driver": "the server's calls and connections, decided once for both servers: "
                            "events in, I/O primitives out",
    "driver.handlers": "grpcio's handler types, shared by registration and the servers",
    "driver.interfaces": "grpcio's abstract classes: what code subclasses and checks "
                         "isinstance against",
    "driver.connectivity": "grpcio's channel connectivity states",
    "driver.logs": "minigrpc's loggers, silent until the application configures logging",
    "driver.service_config": "grpc.service_config read and validated as grpcio does, and the "
                             "lookup of a method's config",
    "driver.backoff": "exponential backoff with jitter, for retries and reconnections",
    "driver.retries": "when a call is tried again: retry policy, transparent retries, throttling, "
                      "the retry buffer",
    "driver.hedging": "hedged calls: several attempts in flight, the first answer wins",
    "driver.hedged_steps": "a hedged call's attempts as steps both transports carry out",
    "driver.keepalive": "keepalive PINGs, dead connections, and the server's limits on a "
                        "client's PINGs",
    "driver.client_keepalive": "client keepalive per connection, carried out alike by both "
                               "client transports: PING, dead connection, too_many_pings",
    "driver.balancing": "pick_first and round_robin: which address a call goes to, and the "
                        "channel's state",
    "driver.channel_args": "every channel and server argument, what minigrpc does with it, and "
                           "which to warn about",
    # the network
    "net": "the network package: what it holds",
    "net.sockets": "dialling, binding and reading, shared by client and server",
    "net.server_listeners": "a server's ports: binding, credentials, accepting",
    "net.tls": "TLS in memory (ssl.MemoryBIO) and grpcio's credentials",
    "net.trace": "the frame trace of the bytes a socket carries",
    # blocking
    "blocking": "the blocking package: what it holds",
    "blocking.channel": "grpcio's Channel: insecure_channel and secure_channel",
    "blocking.multicallables": "grpcio's four multi-callables",
    "blocking.call": "call objects: futures, the streaming rendezvous, request senders",
    "blocking.hedge": "a hedged call's attempts carried out on threads",
    "blocking.interceptors": "grpcio's client and server interceptors",
    "blocking.connectivity": "Channel.subscribe's callbacks and channel_ready_future",
    "blocking.transport": "a call's steps carried out with sockets and threads: dial, wait, "
                          "start, back off",
    "blocking.client_connection": "one client connection: the reader and writer roles, waits "
                                  "and wake-ups",
    "blocking.timers": "a heap of timers, and the one thread that serves the client's (keepalive, "
                       "backoff)",
    "blocking.server_api": "grpcio's Server and server()",
    "blocking.server_loop": "the server's I/O thread: connections, reads, writes, timers; the "
                            "driver's primitives",
    "blocking.server_commands": "work handed to the server's I/O thread, and its wake-up",
    "blocking.server_handlers": "the server's calls as threads wait for them: handlers on the "
                                "executor, their requests, responses and callbacks",
    "blocking.server_call": "bounded hand-over of a stream between I/O and handler threads",
    "blocking.servicer_context": "the handler's context: grpcio's ServicerContext",
    # asyncio
    "aio": "the asyncio package: grpc.aio's names, loaded on first use",
    "aio.errors": "grpc.aio's exceptions and its EOF marker",
    "aio.metadata": "grpc.aio.Metadata, the ordered multi-map of call metadata",
    "aio.interfaces": "grpc.aio's abstract classes: calls, channel, multi-callables, server, "
                      "context",
    "aio.transport": "a call's steps carried out on the event loop: dial, wait, start, back off",
    "aio.client_connection": "one asyncio client connection: event-loop I/O and waits",
    "aio.call": "grpc.aio calls: awaitable, async-iterable, writable",
    "aio.hedge": "a hedged call's attempts carried out as tasks",
    "aio.channel": "grpc.aio's Channel: insecure_channel and secure_channel",
    "aio.multicallables": "grpc.aio's four multi-callables",
    "aio.interceptors": "grpc.aio's client interceptors and ClientCallDetails",
    "aio.server_api": "grpc.aio's Server, server() and ServerInterceptor",
    "aio.server_loop": "the asyncio server's I/O: connections on the event loop, timers, stop; "
                       "the driver's primitives",
    "aio.server_handlers": "the asyncio server's calls as tasks wait for them: a task per call, "
                           "its request, responses and outcome",
    "aio.servicer_context": "the asyncio handler's context: grpc.aio.ServicerContext",
    # the public entry points
    "__init__": "the package: grpcio's names, loaded on first use",
    "oneshot": "one blocking unary call on a fresh connection, for one-call processes",
    "descriptors": "stubs and servicer registration from protobuf descriptors",
    "experimental": "grpc.experimental's channel-less calls, for generated code",
    "grpc_alias": "makes `import grpc` resolve to minigrpc, for generated code",
    "rpc_status": "grpcio-status's to_status / from_call over google.rpc.Status",
    # add-on messages and services
    "_pb": "the add-ons' messages: the installed add-on's, else minigrpc's copy",
    "_pb.health_pb2": "grpc.health.v1 messages (generated by proto/generate.py)",
    "_pb.reflection_v1_pb2": "grpc.reflection.v1 messages (generated)",
    "_pb.reflection_v1alpha_pb2": "grpc.reflection.v1alpha messages (generated)",
    "_pb.status_pb2": "google.rpc.Status (generated)",
    "health": "the health add-on package: grpcio-health-checking's layout",
    "health.v1": "grpc.health.v1: the health service",
    "health.v1.health_pb2": "the health messages, under grpcio's module name",
    "health.v1.health_pb2_grpc": "the health stub, servicer base and registration",
    "health.v1._async": "the health servicer for asyncio servers (health.aio)",
    "health.v1.health": "grpcio-health-checking's HealthServicer: Check, List, Watch, set, "
                        "graceful shutdown",
    "reflection": "the server reflection add-on package, v1 and v1alpha",
    "reflection.servicer": "server reflection answered from a descriptor pool, once for both "
                           "versions",
    "reflection.descriptor_database": "the client side: a descriptor database filled by a "
                                      "server's reflection",
    "reflection.v1": "grpc.reflection.v1",
    "reflection.v1.reflection_pb2": "the v1 messages, under grpcio's module name",
    "reflection.v1.reflection_pb2_grpc": "the v1 stub, servicer base, registration",
    "reflection.v1.reflection": "v1 SERVICE_NAME, ReflectionServicer, enable_server_reflection",
    "reflection.v1alpha": "grpc.reflection.v1alpha, grpcio-reflection's layout",
    "reflection.v1alpha.reflection_pb2": "the v1alpha messages",
    "reflection.v1alpha.reflection_pb2_grpc": "the v1alpha stub, servicer base, registration",
    "reflection.v1alpha.reflection": "grpcio-reflection's reflection module",
    # the command line
    "__main__": "python -m minigrpc: hands over to the command line",
    "cli": "the command line: list, describe, call and health",
    "cli.main": "the command line's entry: a command picked and run, every failure an exit code",
    "cli.arguments": "the command line's options, grpcurl's names, checked",
    "cli.exits": "the command line's exit codes and its error",
    "cli.connect": "the command line's channel: TLS, authority, connect timeout, trace",
    "cli.probe": "the health probe: grpc_health_probe's exit codes, without protobuf",
    "cli.schema": "descriptors from server reflection, protosets, *_pb2 modules or the known "
                  "protos",
    "cli.known_protos": "the protos the command line carries: CNI, health, reflection",
    "cli.render": "descriptors as .proto text, for describe",
    "cli.jsoncodec": "requests from JSON and responses to JSON (protobuf's json_format)",
    "cli.commands": "list, describe and call",
}

#: At most this many modules sit directly in ``minigrpc/``: the public entry points.
MAX_ROOT_MODULES = 15

#: Package dependencies and module cycles that the layering does not want and that are still
#: there, each with what removes it.  The test fails on any other, and on any listed here that
#: is gone (so the list only shrinks).
KNOWN_CROSSINGS: Dict[Tuple[str, str], str] = {}
KNOWN_CYCLES: List[Tuple[str, ...]] = []


def package_of(module: str) -> str:
    """The unit of :data:`PACKAGES` a module belongs to."""
    if module in ("_version", "_pb", "_records"):
        return module
    if module == "__main__":
        return "cli"  # python -m minigrpc is the command line
    if "." in module or (PACKAGE / module).is_dir():
        return module.split(".")[0]
    return "root"


def module_names() -> List[str]:
    """The modules that exist in ``minigrpc/``, subpackages included (``aio.channel``).

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
    """The file of a module, relative to ``minigrpc/`` (``aio/channel.py``)."""
    return module_path(module).relative_to(PACKAGE).as_posix()


def _package_parts(module: str) -> List[str]:
    """The package a module's relative imports start from, as name parts below minigrpc."""
    if module == "__init__":
        return []
    parts = module.split(".")
    return parts if module_path(module).name == "__init__.py" else parts[:-1]


def _known(parts: List[str]) -> str:
    """The module name for ``parts`` below minigrpc (the package itself is ``__init__``)."""
    return ".".join(parts) if parts else "__init__"


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
    """(minigrpc modules, other top-level packages) that ``module`` imports, anywhere in it."""
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    package = _package_parts(module)
    inside: Set[str] = set()
    outside: Set[str] = set()
    for node in ast.walk(tree):
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
                if top == "minigrpc":
                    inside.add(rest or "__init__")
                else:
                    outside.add(top)
    # Importing a subpackage's module loads the (empty) package __init__ first; that adds no
    # dependency.  The root package's __init__ is not empty: importing a name from it counts.
    ancestors = {_known(package[:depth]) for depth in range(1, len(package) + 1)}
    inside = {name for name in inside if name in MODULES and name != module} - ancestors
    return inside, outside


def import_graph() -> Dict[str, Set[str]]:
    return {module: imports_of(module)[0] for module in module_names() if module in MODULES}


def package_graph() -> Dict[str, Set[str]]:
    """Which packages import which (an arrow per pair, whatever the number of imports)."""
    graph: Dict[str, Set[str]] = {name: set() for name in PACKAGES}
    for module, imported in import_graph().items():
        source = package_of(module)
        for target in imported:
            if package_of(target) != source:
                graph[source].add(package_of(target))
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[Tuple[str, ...]]:
    """The strongly connected parts of ``graph`` with more than one member, each sorted
    (Tarjan's algorithm, iteratively)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[Tuple[str, ...]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(tuple(sorted(members)))
    return sorted(found)


def violations() -> List[str]:
    """Every broken rule, as a sentence; empty when the layout holds."""
    found = []
    names = module_names()
    for module in names:
        if module not in MODULES:
            found.append(
                f"minigrpc/{module_file(module)} is not listed in tools/architecture.py MODULES"
            )
        elif package_of(module) not in PACKAGES:
            found.append(f"{module} is in no package of tools/architecture.py PACKAGES")
    for module in MODULES:
        if module not in names:
            found.append(f"tools/architecture.py lists {module}, which minigrpc/ does not have")
    root = [name for name in names if package_of(name) == "root"]
    if len(root) > MAX_ROOT_MODULES:
        found.append(f"{len(root)} modules sit directly in minigrpc/ (at most "
                     f"{MAX_ROOT_MODULES}, the public entry points): {', '.join(root)}")
    crossings = set()
    for module in names:
        if module not in MODULES or package_of(module) not in PACKAGES:
            continue
        inside, outside = imports_of(module)
        if "cni_client" in outside:
            found.append(f"minigrpc/{module_file(module)} imports cni_client")
        source = package_of(module)
        allowed = PACKAGES[source].may_import
        for imported in sorted(inside):
            target = package_of(imported)
            if target == source or target in allowed:
                continue
            crossings.add((source, target))
            if (source, target) not in KNOWN_CROSSINGS:
                found.append(f"{module} ({source}) imports {imported} ({target}): {source} may "
                             f"import {', '.join(allowed) or 'nothing else of minigrpc'}")
    for pair in sorted(set(KNOWN_CROSSINGS) - crossings):
        found.append(f"{pair[0]} no longer imports {pair[1]}: take it off KNOWN_CROSSINGS")
    module_cycles = cycles(import_graph())
    for cycle in module_cycles:
        if cycle not in KNOWN_CYCLES:
            found.append(f"import cycle: {' <-> '.join(cycle)}")
    for cycle in KNOWN_CYCLES:
        if cycle not in module_cycles:
            found.append(f"the cycle {' <-> '.join(cycle)} is gone: take it off KNOWN_CYCLES")
    package_cycles = [cycle for cycle in cycles(package_graph()) if not any(
        (a, b) in KNOWN_CROSSINGS for a in cycle for b in cycle)]
    for cycle in package_cycles:
        found.append(f"package cycle: {' <-> '.join(cycle)}")
    return found


def mermaid() -> str:
    """The package graph as a Mermaid flowchart, the top layer first, with each package's
    modules listed in its box."""
    graph = package_graph()
    imports = import_graph()  # parses every module: once, not once per module
    modules = sorted(name for name in MODULES if name in imports)
    lines = ["```mermaid", "flowchart TB"]
    for name, info in sorted(PACKAGES.items(), key=lambda item: (-item[1].layer, item[0])):
        members = [m for m in modules if package_of(m) == name]
        shown = [m.split(".")[-1] if m != name else "__init__" for m in members]
        title = f"minigrpc.{name}" if name != "root" else "minigrpc (root)"
        label = f"<b>{title}</b><br/>{info.layer}. {info.purpose}<br/><i>{', '.join(shown)}</i>"
        lines.append(f'  {_node(name)}["{label}"]')
    for source in sorted(graph):
        for target in sorted(graph[source]):
            lines.append(f"  {_node(source)} --> {_node(target)}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def _node(name: str) -> str:
    return "pkg_" + name.strip("_")


def table() -> str:
    """package | file | its one concern | what it imports (from minigrpc)."""
    graph = import_graph()
    rows = ["| package | file | its one concern | imports (minigrpc) |", "|---|---|---|---|"]
    for name, _ in sorted(PACKAGES.items(), key=lambda item: (item[1].layer, item[0])):
        for module in sorted(m for m in MODULES if package_of(m) == name and m in graph):
            imported = ", ".join(f"`{m}`" for m in sorted(graph[module])) or "none"
            rows.append(f"| {name} | `{module_file(module)}` | {MODULES[module]} | {imported} |")
    rules = "\n".join(
        f"{info.layer}. **{name}**: {info.purpose}; may import "
        f"{', '.join(info.may_import) or 'nothing else of minigrpc'}."
        for name, info in sorted(PACKAGES.items(), key=lambda item: (item[1].layer, item[0]))
    )
    return (
        rules
        + "\n\nA package imports only what its row allows, no two modules import each other "
        "in a circle (imports inside functions and under `TYPE_CHECKING` count), and nothing "
        "in minigrpc imports cni_client (`tests/docs/test_architecture.py`).\n\n"
        + "\n".join(rows)
        + "\n"
    )
