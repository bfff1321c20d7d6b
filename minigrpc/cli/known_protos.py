"""The protos the tool carries, so that their services can be called without server reflection.

antrea-agent serves Antrea's CNI service on ``/var/run/antrea/cni.sock`` without reflection, like
many servers on a node; the health and reflection services are gRPC's own.  For a method of
these services ``call`` and ``describe`` take the descriptors from here and ask the server
nothing else (``list`` always asks the server: it is about what the server exposes).

The CNI file is a copy of the descriptor cni_client is generated from (proto/cni.proto, Antrea's
pkg/apis/cni/v1beta1/cni.proto): minigrpc never imports cni_client (docs/architecture.md), and
tests/cli/test_known_protos.py fails if the two ever differ.  The health and reflection files
are minigrpc's own modules'.  All of them go into a descriptor pool of the tool's own, so
nothing here can clash with a program's default pool.
"""

from typing import Any, List, Optional

#: ``proto/cni.proto`` as a serialized FileDescriptorProto (package
#: ``antrea_io.antrea.pkg.apis.cni.v1beta1``), the bytes of ``cni_client.cni_pb2``.
CNI_FILE = (
    b"\x0a\x09cni.proto\x12%antrea_io.antrea.pkg.apis.cni.v1beta1\x1a\x19google/protobuf/any.p"
    b"roto\x22|\x0a\x0aCniCmdArgs\x12\x14\x0a\x0ccontainer_id\x18\x01 \x01(\x09\x12\x0d\x0a"
    b"\x05netns\x18\x02 \x01(\x09\x12\x0e\x0a\x06ifname\x18\x03 \x01(\x09\x12\x0c\x0a\x04args"
    b"\x18\x04 \x01(\x09\x12\x0c\x0a\x04path\x18\x05 \x01(\x09\x12\x1d\x0a\x15network_configur"
    b"ation\x18\x06 \x01(\x0c\x22T\x0a\x0dCniCmdRequest\x12C\x0a\x08cni_args\x18\x01 \x01(\x0b"
    b"21.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdArgs\x22\x7f\x0a\x05Error\x12>\x0a\x04cod"
    b"e\x18\x01 \x01(\x0e20.antrea_io.antrea.pkg.apis.cni.v1beta1.ErrorCode\x12\x0f\x0a\x07mes"
    b"sage\x18\x02 \x01(\x09\x12%\x0a\x07details\x18\x03 \x03(\x0b2\x14.google.protobuf.Any"
    b"\x22a\x0a\x0eCniCmdResponse\x12\x12\x0a\x0acni_result\x18\x01 \x01(\x0c\x12;\x0a\x05erro"
    b"r\x18\x02 \x01(\x0b2,.antrea_io.antrea.pkg.apis.cni.v1beta1.Error*\xe2\x02\x0a\x09ErrorC"
    b"ode\x12\x0b\x0a\x07UNKNOWN\x10\x00\x12\x1c\x0a\x18INCOMPATIBLE_CNI_VERSION\x10\x01\x12"
    b"\x15\x0a\x11UNSUPPORTED_FIELD\x10\x02\x12\x15\x0a\x11UNKNOWN_CONTAINER\x10\x03\x12!\x0a"
    b"\x1dINVALID_ENVIRONMENT_VARIABLES\x10\x04\x12\x0e\x0a\x0aIO_FAILURE\x10\x05\x12\x14\x0a"
    b"\x10DECODING_FAILURE\x10\x06\x12\x1a\x0a\x16INVALID_NETWORK_CONFIG\x10\x07\x12\x13\x0a"
    b"\x0fTRY_AGAIN_LATER\x10\x0b\x12\x10\x0a\x0cIPAM_FAILURE\x10e\x12\x1c\x0a\x18CONFIG_INTER"
    b"FACE_FAILURE\x10f\x12\x1b\x0a\x17CHECK_INTERFACE_FAILURE\x10g\x12\x16\x0a\x11UNKNOWN_RPC"
    b"_ERROR\x10\xc9\x01\x12\x1d\x0a\x18INCOMPATIBLE_API_VERSION\x10\xca\x012\xec\x02\x0a\x03C"
    b"ni\x12u\x0a\x06CmdAdd\x124.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdRequest\x1a5.antr"
    b"ea_io.antrea.pkg.apis.cni.v1beta1.CniCmdResponse\x12w\x0a\x08CmdCheck\x124.antrea_io.ant"
    b"rea.pkg.apis.cni.v1beta1.CniCmdRequest\x1a5.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmd"
    b"Response\x12u\x0a\x06CmdDel\x124.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdRequest\x1a"
    b"5.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdResponseB\x09Z\x07v1beta1b\x06proto3"
)

#: The packages of the carried files, the well-known types' aside.
PACKAGES = (
    "antrea_io.antrea.pkg.apis.cni.v1beta1",
    "grpc.health.v1",
    "grpc.reflection.v1",
    "grpc.reflection.v1alpha",
)

_pool: Optional[Any] = None
_packages: List[str] = []


def knows(symbol: str) -> bool:
    """Whether ``symbol`` (a full name) belongs to one of the files carried here."""
    pool()
    return any(symbol.startswith(package + ".") for package in _packages)


def serialized_files() -> List[bytes]:
    """The carried files, each after the files it imports.

    minigrpc's health and reflection modules need Python 3.7 (they are generated with
    postponed annotations); on 3.6, where the tool runs with protobuf 3.19, only the CNI file
    is carried, which is the file a node needs."""
    from google.protobuf import any_pb2

    files = [any_pb2.DESCRIPTOR.serialized_pb, CNI_FILE]
    try:
        from minigrpc.health.v1 import health_pb2
        from minigrpc.reflection.v1 import reflection_pb2 as reflection_v1
        from minigrpc.reflection.v1alpha import reflection_pb2 as reflection_v1alpha
    except (ImportError, SyntaxError):  # pragma: no cover - Python 3.6
        return files
    return [*files, health_pb2.DESCRIPTOR.serialized_pb, reflection_v1.DESCRIPTOR.serialized_pb,
            reflection_v1alpha.DESCRIPTOR.serialized_pb]


def pool() -> Any:
    """A descriptor pool holding the carried files (made once)."""
    global _pool
    if _pool is None:
        from google.protobuf import descriptor_pb2, descriptor_pool

        made = descriptor_pool.DescriptorPool()
        for serialized in serialized_files():
            made.AddSerializedFile(serialized)
            package = descriptor_pb2.FileDescriptorProto.FromString(serialized).package
            if package in PACKAGES:
                _packages.append(package)
        _pool = made
    return _pool
