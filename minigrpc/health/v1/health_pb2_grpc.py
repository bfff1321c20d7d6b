"""The health service's client stub, servicer base class and registration function, under the
names grpcio-tools generates for it (``HealthStub``, ``HealthServicer``,
``add_HealthServicer_to_server``), built from the service descriptor (:mod:`minigrpc.descriptors`)
so they work on minigrpc's channels and servers and on grpcio's alike.
"""

from typing import Any

from ... import descriptors
from ...protocol.enums import StatusCode, code_for_context
from . import health_pb2

__all__ = ["HealthServicer", "HealthStub", "add_HealthServicer_to_server"]


class HealthStub(descriptors.ServiceStub):
    """A client of ``grpc.health.v1.Health``: ``Check``, ``Watch`` (and ``List``, when the
    messages in use define it) as multi-callables of the channel."""

    def __init__(self, channel: Any) -> None:
        super().__init__(health_pb2.HEALTH_SERVICE, channel)


def _unimplemented(context: Any, method: str) -> None:
    context.set_code(code_for_context(context, StatusCode.UNIMPLEMENTED))
    context.set_details(f"{method} is not implemented")
    raise NotImplementedError(f"{method} is not implemented")


class HealthServicer:
    """The base class generated code gives: every method answers UNIMPLEMENTED until a subclass
    overrides it (:class:`minigrpc.health.v1.health.HealthServicer` overrides them all)."""

    def Check(self, request: Any, context: Any) -> Any:
        _unimplemented(context, "Check")

    def List(self, request: Any, context: Any) -> Any:
        _unimplemented(context, "List")

    def Watch(self, request: Any, context: Any) -> Any:
        _unimplemented(context, "Watch")


def add_HealthServicer_to_server(servicer: Any, server: Any) -> None:
    """Serve ``servicer``'s methods of ``grpc.health.v1.Health`` on ``server``."""
    descriptors.add_servicer(server, health_pb2.HEALTH_SERVICE, servicer)
