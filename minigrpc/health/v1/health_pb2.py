"""The ``grpc.health.v1`` messages, as grpcio-health-checking's ``health_pb2`` names them.

They are that package's own classes where it is installed (one descriptor pool holds one
definition of each name: see :mod:`minigrpc._pb`), else minigrpc's copy.  The List method and
its two messages are newer than some releases of that package; with one of those they are None
and the servicer serves Check and Watch only.
"""

from typing import Any

from ... import _pb

_messages = _pb.messages("grpc_health.v1.health_pb2", "minigrpc._pb.health_pb2")

DESCRIPTOR: Any = _messages.DESCRIPTOR
HealthCheckRequest: Any = _messages.HealthCheckRequest
HealthCheckResponse: Any = _messages.HealthCheckResponse
HealthListRequest: Any = getattr(_messages, "HealthListRequest", None)
HealthListResponse: Any = getattr(_messages, "HealthListResponse", None)

#: The ``grpc.health.v1.Health`` service descriptor.
HEALTH_SERVICE: Any = DESCRIPTOR.services_by_name["Health"]
