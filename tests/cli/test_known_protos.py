"""The protos the command line carries are the ones their owners define.

minigrpc never imports cni_client (docs/architecture.md), so the tool holds a copy of the CNI
file; this test is what keeps the copy equal to ``cni_client.cni_pb2``, which proto/generate.py
writes from proto/cni.proto.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2

from cni_client import cni_pb2
from minigrpc.cli import known_protos


def _file(serialized: bytes) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(serialized)


def test_the_cni_file_is_cni_clients() -> None:
    assert _file(known_protos.CNI_FILE) == _file(cni_pb2.DESCRIPTOR.serialized_pb)


def test_every_carried_package_is_known_and_every_known_package_is_carried() -> None:
    packages = {_file(serialized).package for serialized in known_protos.serialized_files()}
    assert packages - {"google.protobuf"} == set(known_protos.PACKAGES)
    for package in known_protos.PACKAGES:
        assert known_protos.knows(f"{package}.Anything")
    assert not known_protos.knows("grpc.testing.TestService")
    assert not known_protos.knows("grpc.health.v1alpha.Health")


def test_the_carried_services_build() -> None:
    pool = known_protos.pool()
    cni = pool.FindServiceByName("antrea_io.antrea.pkg.apis.cni.v1beta1.Cni")
    assert [method.name for method in cni.methods] == ["CmdAdd", "CmdCheck", "CmdDel"]
    assert pool.FindServiceByName("grpc.health.v1.Health").methods_by_name["Check"]
    for version in ("v1", "v1alpha"):
        assert pool.FindServiceByName(f"grpc.reflection.{version}.ServerReflection")
