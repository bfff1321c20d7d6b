"""minigrpc.aio: grpcio's asyncio API (``grpc.aio``) on minigrpc's sans-IO core.

The asyncio side drives the same protocol state machines as the blocking side
(:mod:`minigrpc.client_protocol`, :mod:`minigrpc.server_protocol`); only the I/O differs.  Names
load on first use, as in :mod:`minigrpc`, so importing this package costs nothing until a name
is used; as there, type checkers see a written-out ``__all__`` and the imports of every name, and
not the module ``__getattr__`` (which would make any misspelt ``aio.<name>`` type-check as Any).
"""

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

#: Each public name and the module of this package that defines it.
_EXPORTS: Dict[str, str] = {
    # errors and markers
    "AioRpcError": "_errors",
    "BaseError": "_errors",
    "UsageError": "_errors",
    "AbortError": "_errors",
    "InternalError": "_errors",
    "EOF": "_errors",
    "init_grpc_aio": "_errors",
    "shutdown_grpc_aio": "_errors",
    # metadata
    "Metadata": "_metadata",
    # the client
    "Channel": "_interfaces",
    "insecure_channel": "_channel",
    "secure_channel": "_channel",
    "UnaryUnaryMultiCallable": "_interfaces",
    "UnaryStreamMultiCallable": "_interfaces",
    "StreamUnaryMultiCallable": "_interfaces",
    "StreamStreamMultiCallable": "_interfaces",
    "Call": "_interfaces",
    "RpcContext": "_interfaces",
    "UnaryUnaryCall": "_interfaces",
    "UnaryStreamCall": "_interfaces",
    "StreamUnaryCall": "_interfaces",
    "StreamStreamCall": "_interfaces",
    "ClientCallDetails": "_interceptors",
    "ClientInterceptor": "_interceptors",
    "InterceptedCall": "_interceptors",
    "InterceptedUnaryUnaryCall": "_interceptors",
    "UnaryUnaryClientInterceptor": "_interceptors",
    "UnaryStreamClientInterceptor": "_interceptors",
    "StreamUnaryClientInterceptor": "_interceptors",
    "StreamStreamClientInterceptor": "_interceptors",
    # the server
    "Server": "_interfaces",
    "ServerInterceptor": "_server",
    "server": "_server",
    "ServicerContext": "_interfaces",
}

#: Written out, not computed, so that type checkers see it (``mypy --strict`` does not let a
#: name through that ``__all__`` lacks); a test checks it against ``_EXPORTS``.
__all__ = [
    "EOF",
    "AbortError",
    "AioRpcError",
    "BaseError",
    "Call",
    "Channel",
    "ClientCallDetails",
    "ClientInterceptor",
    "InterceptedCall",
    "InterceptedUnaryUnaryCall",
    "InternalError",
    "Metadata",
    "RpcContext",
    "Server",
    "ServerInterceptor",
    "ServicerContext",
    "StreamStreamCall",
    "StreamStreamClientInterceptor",
    "StreamStreamMultiCallable",
    "StreamUnaryCall",
    "StreamUnaryClientInterceptor",
    "StreamUnaryMultiCallable",
    "UnaryStreamCall",
    "UnaryStreamClientInterceptor",
    "UnaryStreamMultiCallable",
    "UnaryUnaryCall",
    "UnaryUnaryClientInterceptor",
    "UnaryUnaryMultiCallable",
    "UsageError",
    "init_grpc_aio",
    "insecure_channel",
    "secure_channel",
    "server",
    "shutdown_grpc_aio",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ._channel import insecure_channel, secure_channel
    from ._errors import (
        EOF,
        AbortError,
        AioRpcError,
        BaseError,
        InternalError,
        UsageError,
        init_grpc_aio,
        shutdown_grpc_aio,
    )
    from ._interceptors import (
        ClientCallDetails,
        ClientInterceptor,
        InterceptedCall,
        InterceptedUnaryUnaryCall,
        StreamStreamClientInterceptor,
        StreamUnaryClientInterceptor,
        UnaryStreamClientInterceptor,
        UnaryUnaryClientInterceptor,
    )
    from ._interfaces import (
        Call,
        Channel,
        RpcContext,
        Server,
        ServicerContext,
        StreamStreamCall,
        StreamStreamMultiCallable,
        StreamUnaryCall,
        StreamUnaryMultiCallable,
        UnaryStreamCall,
        UnaryStreamMultiCallable,
        UnaryUnaryCall,
        UnaryUnaryMultiCallable,
    )
    from ._metadata import Metadata
    from ._server import ServerInterceptor, server


# Hidden from type checkers: the ``TYPE_CHECKING`` imports above declare the names.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module_name = _EXPORTS.get(name)
        if module_name is None:
            raise AttributeError(f"module 'minigrpc.aio' has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module_name}", __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> List[str]:
        return sorted(set(globals()) | set(_EXPORTS))
