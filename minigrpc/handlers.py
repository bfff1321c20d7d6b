"""Server-side handler registration types, with grpcio's names and shapes.

A server finds the code for a call by asking each registered *generic handler* for the method
path; the answer is an :class:`RpcMethodHandler` (or None). grpcio-generated
``add_*Servicer_to_server`` functions build exactly these objects, so keeping the same names
and fields lets them, and handlers written for grpcio, run unchanged on :func:`minigrpc.server`.

The four ``*_rpc_method_handler`` functions build the handler of each call shape; the shape
decides how the server calls ``behavior``:

=================  ==========================================  ============================
shape              behavior(...)                               returns
=================  ==========================================  ============================
unary_unary        ``(request, context)``                      the response
unary_stream       ``(request, context)``                      an iterator of responses
stream_unary       ``(request_iterator, context)``             the response
stream_stream      ``(request_iterator, context)``             an iterator of responses
=================  ==========================================  ============================
"""

from typing import Any, Callable, Dict, Iterator, Mapping, NamedTuple, Optional

from .status import Metadata

Deserializer = Optional[Callable[[bytes], Any]]
Serializer = Optional[Callable[[Any], bytes]]


class HandlerCallDetails(NamedTuple):
    """What a generic handler is told about an incoming call (grpcio's ``HandlerCallDetails``)."""

    method: str
    invocation_metadata: Metadata


class RpcMethodHandler(NamedTuple):
    """How to run one method (grpcio's ``RpcMethodHandler`` fields, in grpcio's order)."""

    request_streaming: bool
    response_streaming: bool
    request_deserializer: Deserializer
    response_serializer: Serializer
    unary_unary: Optional[Callable[[Any, Any], Any]]
    unary_stream: Optional[Callable[..., Any]]
    stream_unary: Optional[Callable[..., Any]]
    stream_stream: Optional[Callable[..., Any]]


class GenericRpcHandler:
    """Base class for objects that map a method path to a handler (grpcio's abstract class)."""

    def service(self, handler_call_details: HandlerCallDetails) -> Optional[RpcMethodHandler]:
        raise NotImplementedError


class ServiceRpcHandler(GenericRpcHandler):
    """The handlers of one service, looked up by ``/<service>/<method>`` (case-sensitive)."""

    def __init__(self, service: str, method_handlers: Mapping[str, RpcMethodHandler]) -> None:
        self._name = service
        self._method_handlers: Dict[str, RpcMethodHandler] = {}
        for method, handler in method_handlers.items():
            path = f"/{service}/{method}"
            check_handler(path, handler)
            self._method_handlers[path] = handler

    def service_name(self) -> str:
        return self._name

    def service(self, handler_call_details: HandlerCallDetails) -> Optional[RpcMethodHandler]:
        return self._method_handlers.get(handler_call_details.method)

    def method_paths(self) -> Dict[str, RpcMethodHandler]:
        """Full paths to handlers, so a server can index them without calling :meth:`service`."""
        return dict(self._method_handlers)


def unary_unary_rpc_method_handler(
    behavior: Callable[[Any, Any], Any],
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request, context) -> response`` as a unary-unary handler."""
    return RpcMethodHandler(
        False, False, request_deserializer, response_serializer, behavior, None, None, None
    )


def unary_stream_rpc_method_handler(
    behavior: Callable[[Any, Any], Iterator[Any]],
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request, context) -> iterator of responses`` (a server stream)."""
    return RpcMethodHandler(
        False, True, request_deserializer, response_serializer, None, behavior, None, None
    )


def stream_unary_rpc_method_handler(
    behavior: Callable[[Iterator[Any], Any], Any],
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request_iterator, context) -> response`` (a client stream)."""
    return RpcMethodHandler(
        True, False, request_deserializer, response_serializer, None, None, behavior, None
    )


def stream_stream_rpc_method_handler(
    behavior: Callable[[Iterator[Any], Any], Iterator[Any]],
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request_iterator, context) -> iterator of responses`` (both stream)."""
    return RpcMethodHandler(
        True, True, request_deserializer, response_serializer, None, None, None, behavior
    )


def handler_shape(handler: RpcMethodHandler) -> str:
    """``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``."""
    requests = "stream" if handler.request_streaming else "unary"
    responses = "stream" if handler.response_streaming else "unary"
    return f"{requests}_{responses}"


def handler_behavior(handler: RpcMethodHandler) -> Optional[Callable[..., Any]]:
    """The callable of the handler's own shape (``unary_unary`` for a unary handler, ...)."""
    behavior: Optional[Callable[..., Any]] = getattr(handler, handler_shape(handler), None)
    return behavior


def check_handler(path: str, handler: Any) -> None:
    """Refuse, at registration, a handler the server could not run; the error names the gap."""
    for field in ("request_streaming", "response_streaming"):
        if not hasattr(handler, field):
            raise TypeError(
                f"the handler for {path} is not an RpcMethodHandler: it has no {field!r} field"
            )
    if not callable(handler_behavior(handler)):
        raise TypeError(
            f"the handler for {path} is {handler_shape(handler)} but its "
            f"{handler_shape(handler)!r} callable is missing"
        )


def method_handlers_generic_handler(
    service: str, method_handlers: Mapping[str, RpcMethodHandler]
) -> ServiceRpcHandler:
    """Bundle a service's method handlers into one generic handler (grpcio's function)."""
    return ServiceRpcHandler(service, method_handlers)
