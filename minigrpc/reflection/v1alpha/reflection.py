"""grpcio-reflection's ``reflection`` module for ``grpc.reflection.v1alpha``: ``SERVICE_NAME``,
``ReflectionServicer``, ``aio.ReflectionServicer`` (for asyncio servers) and
``enable_server_reflection`` (which serves v1 and v1alpha both, on either kind of server; see
:mod:`minigrpc.reflection`).
"""

import types

from .. import servicer as _servicer
from ..servicer import enable_server_reflection
from . import reflection_pb2, reflection_pb2_grpc

__all__ = ["SERVICE_NAME", "ReflectionServicer", "aio", "enable_server_reflection"]

#: ``grpc.reflection.v1alpha.ServerReflection``: add it to the names given to
#: :func:`enable_server_reflection` to have the reflection service listed too.
SERVICE_NAME: str = reflection_pb2.SERVER_REFLECTION_SERVICE.full_name


class ReflectionServicer(
    _servicer.ReflectionServicer, reflection_pb2_grpc.ServerReflectionServicer
):
    """The v1alpha reflection service: ``ReflectionServicer(service_names, pool=None)``, over
    protobuf's default descriptor pool unless ``pool`` is given."""

    messages = reflection_pb2


class _AsyncReflectionServicer(
    _servicer.AsyncReflectionServicer, reflection_pb2_grpc.ServerReflectionServicer
):
    """The v1alpha reflection service for asyncio servers (``grpc.aio``)."""

    messages = reflection_pb2


#: ``reflection.aio.ReflectionServicer``, as grpcio-reflection names it.
aio = types.SimpleNamespace(ReflectionServicer=_AsyncReflectionServicer)
