"""Client stubs and server registration derived from protobuf service descriptors.

Why no protoc plugin: grpcio's ``*_pb2_grpc.py`` files (written by the grpc_tools plugin) hold
nothing that is not already in the ``ServiceDescriptor`` of the ordinary ``*_pb2.py`` module:
the service's full name, each method's name (together they form the HTTP/2 ``:path``
``/<package>.<Service>/<Method>``, PROTOCOL-HTTP2.md, Requests), its request and response
message types, and whether either side streams.  Reading those at run time means

* no second generated file per ``.proto`` that must be kept in sync with the first;
* no dependency on ``grpc_tools`` or on the grpcio version that generated the code; and
* the same helpers work with a minigrpc channel/server *and* with a grpcio one, because they
  only use the API the two share (the channel's four multi-callable factories and
  ``server.add_generic_rpc_handlers``), which the test suite relies on.

Each method maps to the multi-callable and handler of its shape, as in grpcio's generated code:
``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``.
"""

import threading
from typing import Any, Callable, Dict, Optional

from google.protobuf import message_factory as _message_factory
from google.protobuf import symbol_database as _symbol_database

__all__ = [
    "add_servicer",
    "message_class",
    "method_path",
    "protos",
    "protos_and_services",
    "services",
    "streaming_flags",
    "stub",
]

_factories_lock = threading.Lock()
_factories: Dict[int, Any] = {}


def message_class(descriptor: Any) -> Any:
    """Return the Python class for a message ``Descriptor``, the same class every time.

    protobuf changed this API twice: ``message_factory.GetMessageClass`` exists only from
    protobuf 4.22 on, and ``MessageFactory.GetPrototype`` is gone in 5.x.  On protobuf 3.20's
    cpp backend a fresh ``MessageFactory`` even builds a *second* class for a descriptor that
    a generated module already has, so the symbol database (where generated modules register
    their classes) is asked first, and any factory we create is kept per pool.
    """
    get_message_class = getattr(_message_factory, "GetMessageClass", None)
    if get_message_class is not None:
        return get_message_class(descriptor)
    try:
        known = _symbol_database.Default().GetSymbol(descriptor.full_name)
    except KeyError:
        known = None
    if known is not None and known.DESCRIPTOR is descriptor:
        return known
    pool = descriptor.file.pool
    with _factories_lock:
        factory = _factories.get(id(pool))
        if factory is None:
            factory = _message_factory.MessageFactory(pool)
            _factories[id(pool)] = factory
    return factory.GetPrototype(descriptor)


def method_path(method_descriptor: Any) -> str:
    """The HTTP/2 ``:path`` of a method: ``/<full service name>/<method name>``.

    PROTOCOL-HTTP2.md, Requests: ``Path → ":path" "/" Service-Name "/" {method name}``.

    Both parts keep their case; servers match the path exactly.
    """
    return f"/{method_descriptor.containing_service.full_name}/{method_descriptor.name}"


def streaming_flags(method_descriptor: Any) -> "tuple[bool, bool]":
    """``(client_streaming, server_streaming)`` of a method.

    protobuf 4.21's upb ``MethodDescriptor`` lacks both attributes (added in 4.22), so when they
    are missing the method is copied into a ``MethodDescriptorProto``, which every version has.
    """
    client = getattr(method_descriptor, "client_streaming", None)
    server = getattr(method_descriptor, "server_streaming", None)
    if client is None or server is None:
        from google.protobuf import descriptor_pb2

        method_proto = descriptor_pb2.MethodDescriptorProto()
        method_descriptor.CopyToProto(method_proto)
        client, server = method_proto.client_streaming, method_proto.server_streaming
    return bool(client), bool(server)


def _shape(method_descriptor: Any) -> str:
    """``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``: the name of the
    channel's multi-callable factory and (with ``_rpc_method_handler``) of the handler."""
    client, server = streaming_flags(method_descriptor)
    return f"{'stream' if client else 'unary'}_{'stream' if server else 'unary'}"


class ServiceStub:
    """A client for one service: one attribute per RPC, named exactly like the proto method.

    Each attribute is whatever the channel's factory for the method's shape returns (for a
    unary method ``channel.unary_unary(...)``, a multi-callable taking ``request, timeout=None,
    metadata=None, ...``), already set up to serialize the requests and parse the responses
    with the method's message classes.
    """

    def __init__(self, service_descriptor: Any, channel: Any) -> None:
        self._service_name: str = service_descriptor.full_name
        for method in service_descriptor.methods:
            factory = getattr(channel, _shape(method))
            multicallable = factory(
                method_path(method),
                request_serializer=message_class(method.input_type).SerializeToString,
                response_deserializer=message_class(method.output_type).FromString,
            )
            setattr(self, method.name, multicallable)

    def __repr__(self) -> str:
        return f"<ServiceStub {self._service_name}>"


def stub(service_descriptor: Any, channel: Any) -> Any:
    """Build a client stub for ``service_descriptor`` on ``channel`` (minigrpc or grpcio).

    Example: ``stub(cni_pb2.DESCRIPTOR.services_by_name["Cni"], channel).CmdAdd(request,
    timeout=5)``.  The result is typed ``Any`` because its attributes come from the descriptor.
    """
    return ServiceStub(service_descriptor, channel)


def add_servicer(server: Any, service_descriptor: Any, servicer: Any) -> "list[str]":
    """Register ``servicer``'s methods for ``service_descriptor`` on ``server``.

    A method is served when ``servicer`` has a callable attribute named like the RPC (e.g.
    ``CmdAdd``) with the signature of its shape, as with grpcio (see
    :mod:`minigrpc.driver.handlers`). Methods it lacks stay unregistered, so calls to them end with
    UNIMPLEMENTED.  Works with any server offering ``add_generic_rpc_handlers`` (minigrpc's and
    grpcio's): the handler objects come from ``minigrpc.driver.handlers``, whose API is grpcio's.

    Returns the names of the registered methods.
    """
    from .driver import handlers

    method_handlers: Dict[str, Any] = {}
    for method in service_descriptor.methods:
        behaviour: Optional[Callable[..., Any]] = getattr(servicer, method.name, None)
        if not callable(behaviour):
            continue
        make_handler = getattr(handlers, f"{_shape(method)}_rpc_method_handler")
        method_handlers[method.name] = make_handler(
            behaviour,
            request_deserializer=message_class(method.input_type).FromString,
            response_serializer=message_class(method.output_type).SerializeToString,
        )
    if method_handlers:
        server.add_generic_rpc_handlers(
            (
                handlers.method_handlers_generic_handler(
                    service_descriptor.full_name, method_handlers
                ),
            )
        )
    return list(method_handlers)


# -- grpcio's run-time .proto loading ------------------------------------------------------------

_NO_GRPC_TOOLS = (
    "grpc.{} loads .proto files with grpcio-tools' compiler (the grpc_tools package), which is "
    "not installed; install grpcio-tools (1.32 or newer), or generate the modules ahead of time"
)


def _grpc_tools_protoc(function: str) -> Any:
    """grpcio-tools' ``protoc`` module, which holds the compiler that runs in-process; its
    ``_protos``/``_services`` loaders are what grpcio's functions of the same names call too."""
    try:
        from grpc_tools import protoc  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as exc:
        if exc.name not in ("grpc_tools", "grpc_tools.protoc"):
            raise  # grpc_tools is there but broken: say what is missing
        raise NotImplementedError(_NO_GRPC_TOOLS.format(function)) from None
    return protoc


def protos(protobuf_path: str) -> Any:
    """The ``_pb2`` module of a ``.proto`` file, compiled at run time (grpcio's ``grpc.protos``).

    ``protobuf_path`` is found relative to ``sys.path``, like a module; it needs grpcio-tools
    (not grpcio), else NotImplementedError says so.
    """
    return _grpc_tools_protoc("protos")._protos(protobuf_path)


def services(protobuf_path: str) -> Any:
    """The ``_pb2_grpc`` module of a ``.proto`` file (grpcio's ``grpc.services``).

    The generated module says ``import grpc``: call :func:`minigrpc.install_as_grpc` first
    where grpcio is not installed, or use :func:`stub` / :func:`add_servicer` with the
    ``_pb2`` module's service descriptor instead.
    """
    return _grpc_tools_protoc("services")._services(protobuf_path)


def protos_and_services(protobuf_path: str) -> Any:
    """``(protos(protobuf_path), services(protobuf_path))`` (grpcio's function)."""
    return (protos(protobuf_path), services(protobuf_path))
