"""Server-side handler registration types, with grpcio's names and shapes.

A server finds the code for a call by asking each registered *generic handler* for the method
path; the answer is an :class:`RpcMethodHandler` (or None). grpcio-generated
``add_*Servicer_to_server`` functions build exactly these objects, so keeping the same names
and fields lets them, and handlers written for grpcio, run unchanged on :func:`minigrpc.server`.

minigrpc serves unary-unary methods only; the streaming fields exist so that the tuple has the
shape grpcio code expects, and the server answers a streaming method with UNIMPLEMENTED.
"""

from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional

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
        self._method_handlers: Dict[str, RpcMethodHandler] = {
            f"/{service}/{method}": handler for method, handler in method_handlers.items()
        }

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


def method_handlers_generic_handler(
    service: str, method_handlers: Mapping[str, RpcMethodHandler]
) -> ServiceRpcHandler:
    """Bundle a service's method handlers into one generic handler (grpcio's function)."""
    return ServiceRpcHandler(service, method_handlers)
