"""minigrpc.aio: grpcio's asyncio API (``grpc.aio``) on minigrpc's sans-IO core.

The asyncio side drives the same protocol state machines as the blocking side
(:mod:`minigrpc.protocol.client_protocol`, :mod:`minigrpc.protocol.server_protocol`); only the I/O
differs.  Names load on first use, as in :mod:`minigrpc`, so importing this package costs nothing
until a name is used; as there, type checkers see a written-out ``__all__`` and the imports of
every name, and not the module ``__getattr__`` (which would make any misspelt ``aio.<name>``
type-check as Any).

It may import: :mod:`minigrpc.net`, :mod:`minigrpc.driver`, :mod:`minigrpc.protocol` and
:mod:`minigrpc.http2` (never the blocking package: the two APIs stand side by side).
"""

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

#: Each public name and the module of this package that defines it.
_EXPORTS: Dict[str, str] = {
    # errors and markers
    "AioRpcError": "errors",
    "BaseError": "errors",
    "UsageError": "errors",
    "AbortError": "errors",
    "InternalError": "errors",
    "EOF": "errors",
    "init_grpc_aio": "errors",
    "shutdown_grpc_aio": "errors",
    # metadata
    "Metadata": "metadata",
    # the client
    "Channel": "interfaces",
    "insecure_channel": "channel",
    "secure_channel": "channel",
    "UnaryUnaryMultiCallable": "interfaces",
    "UnaryStreamMultiCallable": "interfaces",
    "StreamUnaryMultiCallable": "interfaces",
    "StreamStreamMultiCallable": "interfaces",
    "Call": "interfaces",
    "RpcContext": "interfaces",
    "UnaryUnaryCall": "interfaces",
    "UnaryStreamCall": "interfaces",
    "StreamUnaryCall": "interfaces",
    "StreamStreamCall": "interfaces",
    "ClientCallDetails": "interceptors",
    "ClientInterceptor": "interceptors",
    "InterceptedCall": "interceptors",
    "InterceptedUnaryUnaryCall": "interceptors",
    "UnaryUnaryClientInterceptor": "interceptors",
    "UnaryStreamClientInterceptor": "interceptors",
    "StreamUnaryClientInterceptor": "interceptors",
    "StreamStreamClientInterceptor": "interceptors",
    # the server
    "Server": "interfaces",
    "ServerInterceptor": "server_api",
    "server": "server_api",
    "ServicerContext": "interfaces",
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
    from .channel import insecure_channel, secure_channel
    from .errors import (
        EOF,
        AbortError,
        AioRpcError,
        BaseError,
        InternalError,
        UsageError,
        init_grpc_aio,
        shutdown_grpc_aio,
    )
    from .interceptors import (
        ClientCallDetails,
        ClientInterceptor,
        InterceptedCall,
        InterceptedUnaryUnaryCall,
        StreamStreamClientInterceptor,
        StreamUnaryClientInterceptor,
        UnaryStreamClientInterceptor,
        UnaryUnaryClientInterceptor,
    )
    from .interfaces import (
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
    from .metadata import Metadata
    from .server_api import ServerInterceptor, server


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
