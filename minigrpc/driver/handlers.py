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

from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional

from ..protocol.status import Metadata
from . import interfaces
from .interfaces import GenericRpcHandler, ServiceRpcHandler

__all__ = [
    "DictionaryGenericHandler",
    "GenericRpcHandler",
    "HandlerCallDetails",
    "RpcMethodHandler",
    "ServiceRpcHandler",
    "method_handlers_generic_handler",
    "stream_stream_rpc_method_handler",
    "stream_unary_rpc_method_handler",
    "unary_stream_rpc_method_handler",
    "unary_unary_rpc_method_handler",
]

Deserializer = Optional[Callable[[bytes], Any]]
Serializer = Optional[Callable[[Any], bytes]]
#: A streaming method's behaviour, on either server: the blocking one's takes a request iterator
#: and returns an iterator; a ``grpc.aio`` server's takes an async iterator and is an async
#: generator, or a coroutine (that writes with ``context.write()`` and returns None).
StreamBehavior = Callable[[Any, Any], Any]


class HandlerCallDetails(
    NamedTuple("HandlerCallDetails", [("method", str), ("invocation_metadata", Metadata)]),
    interfaces.HandlerCallDetails,
):
    """What the server tells a generic handler about an incoming call: a named tuple that is a
    ``grpc.HandlerCallDetails`` (grpcio's own is one too)."""


class RpcMethodHandler(
    NamedTuple(
        "RpcMethodHandler",
        [
            ("request_streaming", bool),
            ("response_streaming", bool),
            ("request_deserializer", Deserializer),
            ("response_serializer", Serializer),
            ("unary_unary", Optional[Callable[[Any, Any], Any]]),
            ("unary_stream", Optional[Callable[..., Any]]),
            ("stream_unary", Optional[Callable[..., Any]]),
            ("stream_stream", Optional[Callable[..., Any]]),
        ],
    ),
    interfaces.RpcMethodHandler,
):
    r"""The handler the four ``*_rpc_method_handler`` functions build: a named tuple of the
    eight fields, in grpcio's order, that is a ``grpc.RpcMethodHandler`` (grpcio's is the
    same, which ``grpc.experimental.wrap_server_method_handler`` relies on: it ``_replace``\ s
    the behaviour).  Servers take any ``grpc.RpcMethodHandler``, not only this one."""


class DictionaryGenericHandler(ServiceRpcHandler):
    """The handlers of one service, looked up by ``/<service>/<method>`` (case-sensitive);
    what :func:`method_handlers_generic_handler` returns."""

    def __init__(
        self, service: str, method_handlers: Mapping[str, interfaces.RpcMethodHandler]
    ) -> None:
        self._name = service
        self._method_handlers: Dict[str, interfaces.RpcMethodHandler] = {}
        for method, handler in method_handlers.items():
            path = f"/{service}/{method}"
            check_handler(path, handler)
            self._method_handlers[path] = handler

    def service_name(self) -> str:
        return self._name

    def service(
        self, handler_call_details: interfaces.HandlerCallDetails
    ) -> Optional[interfaces.RpcMethodHandler]:
        return self._method_handlers.get(handler_call_details.method)

    def method_paths(self) -> Dict[str, interfaces.RpcMethodHandler]:
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
    behavior: StreamBehavior,
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request, context) -> iterator of responses`` (a server stream)."""
    return RpcMethodHandler(
        False, True, request_deserializer, response_serializer, None, behavior, None, None
    )


def stream_unary_rpc_method_handler(
    behavior: StreamBehavior,
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request_iterator, context) -> response`` (a client stream)."""
    return RpcMethodHandler(
        True, False, request_deserializer, response_serializer, None, None, behavior, None
    )


def stream_stream_rpc_method_handler(
    behavior: StreamBehavior,
    request_deserializer: Deserializer = None,
    response_serializer: Serializer = None,
) -> RpcMethodHandler:
    """Wrap ``behavior(request_iterator, context) -> iterator of responses`` (both stream)."""
    return RpcMethodHandler(
        True, True, request_deserializer, response_serializer, None, None, None, behavior
    )


def handler_shape(handler: interfaces.RpcMethodHandler) -> str:
    """``unary_unary``, ``unary_stream``, ``stream_unary`` or ``stream_stream``."""
    requests = "stream" if handler.request_streaming else "unary"
    responses = "stream" if handler.response_streaming else "unary"
    return f"{requests}_{responses}"


def handler_behavior(handler: interfaces.RpcMethodHandler) -> Optional[Callable[..., Any]]:
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
    service: str, method_handlers: Mapping[str, interfaces.RpcMethodHandler]
) -> DictionaryGenericHandler:
    """Bundle a service's method handlers into one generic handler (grpcio's function)."""
    return DictionaryGenericHandler(service, method_handlers)
