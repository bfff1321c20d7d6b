"""minigrpc: gRPC over HTTP/2 in pure Python, on its own HTTP/2 and protobuf only.

The public API is a drop-in subset of grpcio's, so ``import minigrpc as grpc`` works for unary
code::

    import minigrpc as grpc

    with grpc.insecure_channel("unix:///var/run/app.sock") as channel:
        say = channel.unary_unary("/pkg.Service/Method",
                                  request_serializer=Req.SerializeToString,
                                  response_deserializer=Resp.FromString)
        reply = say(Req(name="x"), timeout=5)

Names are imported lazily (PEP 562): ``import minigrpc`` loads nothing but this file, so a
one-shot client such as the CNI plugin pays only for the modules it uses.
"""

import sys

from ._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List

_EXPORTS: "Dict[str, str]" = {
    # client
    "insecure_channel": "blocking.channel",
    "Channel": "driver.interfaces",
    "Call": "driver.interfaces",
    "Future": "driver.interfaces",
    "CallFuture": "blocking.call",
    "StreamingCall": "blocking.call",
    "FutureTimeoutError": "protocol.status",
    "FutureCancelledError": "protocol.status",
    "UnaryUnaryMultiCallable": "driver.interfaces",
    "UnaryStreamMultiCallable": "driver.interfaces",
    "StreamUnaryMultiCallable": "driver.interfaces",
    "StreamStreamMultiCallable": "driver.interfaces",
    # server
    "server": "blocking.server_api",
    "Server": "driver.interfaces",
    "ServicerContext": "driver.interfaces",
    # handlers
    "unary_unary_rpc_method_handler": "driver.handlers",
    "ClientCallDetails": "driver.interfaces",
    "ServerInterceptor": "driver.interfaces",
    "StreamStreamClientInterceptor": "driver.interfaces",
    "StreamUnaryClientInterceptor": "driver.interfaces",
    "UnaryStreamClientInterceptor": "driver.interfaces",
    "UnaryUnaryClientInterceptor": "driver.interfaces",
    "intercept_channel": "blocking.interceptors",
    "ChannelCredentials": "net.tls",
    "ServerCredentials": "net.tls",
    "CallCredentials": "net.tls",
    "ssl_channel_credentials": "net.tls",
    "ssl_server_credentials": "net.tls",
    "metadata_call_credentials": "net.tls",
    "access_token_call_credentials": "net.tls",
    "composite_call_credentials": "net.tls",
    "composite_channel_credentials": "net.tls",
    "LocalConnectionType": "net.tls",
    "local_channel_credentials": "net.tls",
    "local_server_credentials": "net.tls",
    "insecure_server_credentials": "net.tls",
    "ServerCertificateConfiguration": "net.tls",
    "ssl_server_certificate_configuration": "net.tls",
    "dynamic_ssl_server_credentials": "net.tls",
    "secure_channel": "blocking.channel",
    "ChannelConnectivity": "driver.connectivity",
    "channel_ready_future": "blocking.connectivity",
    "unary_stream_rpc_method_handler": "driver.handlers",
    "stream_unary_rpc_method_handler": "driver.handlers",
    "stream_stream_rpc_method_handler": "driver.handlers",
    "method_handlers_generic_handler": "driver.handlers",
    "ServiceRpcHandler": "driver.interfaces",
    "RpcMethodHandler": "driver.interfaces",
    "GenericRpcHandler": "driver.interfaces",
    "HandlerCallDetails": "driver.interfaces",
    # status
    "StatusCode": "protocol.enums",
    "Status": "protocol.status",
    "RpcError": "protocol.status",
    # codecs
    "Compression": "protocol.enums",
    # descriptors
    "stub": "descriptors",
    "add_servicer": "descriptors",
    "protos": "descriptors",
    "services": "descriptors",
    "protos_and_services": "descriptors",
    # `import grpc` without grpcio
    "install_as_grpc": "grpc_alias",
    # grpcio's abstract interfaces, for code that subclasses them
    "RpcContext": "driver.interfaces",
    "AuthMetadataContext": "driver.interfaces",
    "AuthMetadataPlugin": "driver.interfaces",
    "AuthMetadataPluginCallback": "driver.interfaces",
}

#: Written out, not computed, so that type checkers see it: ``from minigrpc import *`` (and a
#: one-line ``grpc`` stub re-exporting it, README "Type checking") gives exactly these names.
#: A test checks it against ``_EXPORTS``.
__all__ = [
    "AuthMetadataContext",
    "AuthMetadataPlugin",
    "AuthMetadataPluginCallback",
    "Call",
    "CallCredentials",
    "CallFuture",
    "Channel",
    "ChannelConnectivity",
    "ChannelCredentials",
    "ClientCallDetails",
    "Compression",
    "Future",
    "FutureCancelledError",
    "FutureTimeoutError",
    "GenericRpcHandler",
    "HandlerCallDetails",
    "LocalConnectionType",
    "RpcContext",
    "RpcError",
    "RpcMethodHandler",
    "Server",
    "ServerCertificateConfiguration",
    "ServerCredentials",
    "ServerInterceptor",
    "ServiceRpcHandler",
    "ServicerContext",
    "Status",
    "StatusCode",
    "StreamStreamClientInterceptor",
    "StreamStreamMultiCallable",
    "StreamUnaryClientInterceptor",
    "StreamUnaryMultiCallable",
    "StreamingCall",
    "UnaryStreamClientInterceptor",
    "UnaryStreamMultiCallable",
    "UnaryUnaryClientInterceptor",
    "UnaryUnaryMultiCallable",
    "access_token_call_credentials",
    "add_servicer",
    "channel_ready_future",
    "composite_call_credentials",
    "composite_channel_credentials",
    "dynamic_ssl_server_credentials",
    "insecure_channel",
    "insecure_server_credentials",
    "install_as_grpc",
    "intercept_channel",
    "local_channel_credentials",
    "local_server_credentials",
    "metadata_call_credentials",
    "method_handlers_generic_handler",
    "protos",
    "protos_and_services",
    "secure_channel",
    "server",
    "services",
    "ssl_channel_credentials",
    "ssl_server_certificate_configuration",
    "ssl_server_credentials",
    "stream_stream_rpc_method_handler",
    "stream_unary_rpc_method_handler",
    "stub",
    "unary_stream_rpc_method_handler",
    "unary_unary_rpc_method_handler",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import experimental
    from .blocking.call import CallFuture, StreamingCall
    from .blocking.channel import insecure_channel, secure_channel
    from .blocking.connectivity import channel_ready_future
    from .blocking.interceptors import intercept_channel
    from .blocking.server_api import server
    from .descriptors import add_servicer, protos, protos_and_services, services, stub
    from .driver.connectivity import ChannelConnectivity
    from .driver.handlers import (
        method_handlers_generic_handler,
        stream_stream_rpc_method_handler,
        stream_unary_rpc_method_handler,
        unary_stream_rpc_method_handler,
        unary_unary_rpc_method_handler,
    )
    from .driver.interfaces import (
        AuthMetadataContext,
        AuthMetadataPlugin,
        AuthMetadataPluginCallback,
        Call,
        Channel,
        ClientCallDetails,
        Future,
        GenericRpcHandler,
        HandlerCallDetails,
        RpcContext,
        RpcMethodHandler,
        Server,
        ServerInterceptor,
        ServicerContext,
        ServiceRpcHandler,
        StreamStreamClientInterceptor,
        StreamStreamMultiCallable,
        StreamUnaryClientInterceptor,
        StreamUnaryMultiCallable,
        UnaryStreamClientInterceptor,
        UnaryStreamMultiCallable,
        UnaryUnaryClientInterceptor,
        UnaryUnaryMultiCallable,
    )
    from .grpc_alias import install_as_grpc
    from .net.tls import (
        CallCredentials,
        ChannelCredentials,
        LocalConnectionType,
        ServerCertificateConfiguration,
        ServerCredentials,
        access_token_call_credentials,
        composite_call_credentials,
        composite_channel_credentials,
        dynamic_ssl_server_credentials,
        insecure_server_credentials,
        local_channel_credentials,
        local_server_credentials,
        metadata_call_credentials,
        ssl_channel_credentials,
        ssl_server_certificate_configuration,
        ssl_server_credentials,
    )
    from .protocol.enums import Compression, StatusCode
    from .protocol.status import FutureCancelledError, FutureTimeoutError, RpcError, Status


# Hidden from type checkers: a module-level ``__getattr__`` would make every misspelt
# ``minigrpc.<name>`` type-check as Any; the ``TYPE_CHECKING`` imports above declare the names.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> "Any":
        module_name = "experimental" if name == "experimental" else _EXPORTS.get(name)
        if module_name is None:
            # Also what ``from minigrpc import oneshot`` asks before it imports the submodule.
            raise AttributeError(f"module 'minigrpc' has no attribute {name!r}")
        import importlib  # here: a one-shot client such as the CNI plugin never needs it

        if name == "experimental":  # a submodule, as grpc.experimental is grpcio's
            return importlib.import_module(".experimental", __name__)
        value = getattr(importlib.import_module(f".{module_name}", __name__), name)
        globals()[name] = value
        return value


    def __dir__() -> "List[str]":
        return sorted(set(globals()) | set(_EXPORTS))


if sys.version_info < (3, 7):  # noqa: UP036  # pragma: no cover - PEP 562 arrived in 3.7

    class _LazyExports(type(sys)):  # types.ModuleType, without importing types (a cold start)
        """Python 3.6 ignores a module-level ``__getattr__``; a module subclass does the same."""

        def __getattr__(self, name: str) -> "Any":
            return __getattr__(name)

    sys.modules[__name__].__class__ = _LazyExports
