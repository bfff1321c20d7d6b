"""The ``grpc.reflection.v1alpha`` messages, under grpcio-reflection's module name.

They are grpcio-reflection's own classes where it is installed and defines them (one descriptor
pool holds one definition of each name: see :mod:`minigrpc._pb`), else minigrpc's copy.
"""

from typing import Any

from ... import _pb

_messages = _pb.messages(
    "grpc_reflection.v1alpha.reflection_pb2", "minigrpc._pb.reflection_v1alpha_pb2"
)

DESCRIPTOR: Any = _messages.DESCRIPTOR
ServerReflectionRequest: Any = _messages.ServerReflectionRequest
ExtensionRequest: Any = _messages.ExtensionRequest
ServerReflectionResponse: Any = _messages.ServerReflectionResponse
FileDescriptorResponse: Any = _messages.FileDescriptorResponse
ExtensionNumberResponse: Any = _messages.ExtensionNumberResponse
ListServiceResponse: Any = _messages.ListServiceResponse
ServiceResponse: Any = _messages.ServiceResponse
ErrorResponse: Any = _messages.ErrorResponse

#: The ``grpc.reflection.v1alpha.ServerReflection`` service descriptor.
SERVER_REFLECTION_SERVICE: Any = DESCRIPTOR.services_by_name["ServerReflection"]
