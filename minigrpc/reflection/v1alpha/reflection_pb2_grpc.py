"""The v1alpha reflection service's client stub, servicer base class and registration function,
under the names grpcio-tools generates; they work on minigrpc's channels and servers and on
grpcio's (:mod:`minigrpc.reflection.servicer` has them once for both versions).
"""

from typing import Any

from .. import servicer as _shared
from . import reflection_pb2

__all__ = [
    "ServerReflectionServicer",
    "ServerReflectionStub",
    "add_ServerReflectionServicer_to_server",
]


class ServerReflectionStub(_shared.ServerReflectionStub):
    """A client of ``grpc.reflection.v1alpha.ServerReflection``."""

    messages = reflection_pb2


class ServerReflectionServicer(_shared.ServerReflectionServicer):
    """The base class of a ``grpc.reflection.v1alpha.ServerReflection`` servicer."""


def add_ServerReflectionServicer_to_server(servicer: Any, server: Any) -> None:
    """Serve ``servicer``'s ``ServerReflectionInfo`` on ``server``."""
    _shared.add_to_server(reflection_pb2, servicer, server)
