"""The v1alpha reflection service's client stub, servicer base class and registration function,
under the names grpcio-tools generates, built from the service descriptor
(:mod:`minigrpc.descriptors`) so they work on minigrpc's channels and servers and on grpcio's.
"""

from typing import Any, Iterator

from minigrpc import descriptors
from minigrpc.reflection.v1alpha import reflection_pb2
from minigrpc.status import StatusCode

__all__ = [
    "ServerReflectionServicer",
    "ServerReflectionStub",
    "add_ServerReflectionServicer_to_server",
]


class ServerReflectionStub(descriptors.ServiceStub):
    """A client of ``grpc.reflection.v1alpha.ServerReflection``: ``ServerReflectionInfo``, a
    stream-stream multi-callable of the channel."""

    def __init__(self, channel: Any) -> None:
        super().__init__(reflection_pb2.SERVER_REFLECTION_SERVICE, channel)


class ServerReflectionServicer:
    """The base class generated code gives: UNIMPLEMENTED until a subclass overrides it."""

    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: Any) -> Any:
        context.set_code(StatusCode.UNIMPLEMENTED)
        context.set_details("ServerReflectionInfo is not implemented")
        raise NotImplementedError("ServerReflectionInfo is not implemented")


def add_ServerReflectionServicer_to_server(servicer: Any, server: Any) -> None:
    """Serve ``servicer``'s ``ServerReflectionInfo`` on ``server``."""
    descriptors.add_servicer(server, reflection_pb2.SERVER_REFLECTION_SERVICE, servicer)
