"""``--protoset`` and ``--proto-module``: the schema from files where the server has no
reflection, and ``describe``'s text for every shape of field the protobuf language has.

The FileDescriptorSets are written here as protoc writes them (``--descriptor_set_out
--include_imports``: the files, each with its imports); the synthetic ones are built field by
field with descriptor_pb2, so the expected ``describe`` text below is the .proto they stand for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, List

import pytest
from google.protobuf import descriptor_pb2, json_format

from tests.cli.conftest import ServerProcess
from tests.cli.support import assert_no_traceback, run_tool
from tests.interop import messages_pb2, test_pb2

pytestmark = pytest.mark.timeout(120)

F = descriptor_pb2.FieldDescriptorProto


def file_set(files: Iterable[Any]) -> bytes:
    return descriptor_pb2.FileDescriptorSet(file=list(files)).SerializeToString()


def interop_files(with_imports: bool = True) -> List[descriptor_pb2.FileDescriptorProto]:
    """test.proto, after the files it imports when ``with_imports``."""
    files: List[descriptor_pb2.FileDescriptorProto] = []

    def add(descriptor: Any) -> None:
        if with_imports:
            for dependency in descriptor.dependencies:
                add(dependency)
        if all(file.name != descriptor.name for file in files):
            files.append(descriptor_pb2.FileDescriptorProto.FromString(descriptor.serialized_pb))

    add(test_pb2.DESCRIPTOR)
    return files


@pytest.fixture
def protoset(tmp_path: Path) -> str:
    path = tmp_path / "interop.protoset"
    path.write_bytes(file_set(interop_files()))
    return str(path)


def test_call_with_a_protoset_where_the_server_has_no_reflection(
        no_reflection_server: ServerProcess, protoset: str) -> None:
    target = no_reflection_server.targets[0]
    run = run_tool("call", target, "grpc.testing.TestService/UnaryCall", "--protoset", protoset,
                   "-d", '{"responseSize": 2}', "--trace")
    assert run.code == 0, run.stderr
    expected = messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=b"\0\0"))
    assert run.stdout == json_format.MessageToJson(expected) + "\n"
    assert "grpc.reflection" not in run.stderr  # the server was asked nothing else


def test_call_with_a_proto_module(no_reflection_server: ServerProcess) -> None:
    run = run_tool("call", no_reflection_server.targets[0],
                   "grpc.testing.TestService/StreamingOutputCall",
                   "--proto-module", "tests.interop.test_pb2",
                   "-d", '{"responseParameters": [{"size": 1}]}')
    assert run.code == 0, run.stderr
    expected = messages_pb2.StreamingOutputCallResponse(payload=messages_pb2.Payload(body=b"\0"))
    assert run.stdout == json_format.MessageToJson(expected) + "\n"


def test_list_and_describe_from_files_ask_no_server(protoset: str) -> None:
    nowhere = "unix:/nonexistent/nobody.sock"
    run = run_tool("list", nowhere, "--protoset", protoset)
    assert (run.code, run.stdout) == (0, "grpc.testing.TestService\n"
                                         "grpc.testing.UnimplementedService\n"), run.stderr
    run = run_tool("list", nowhere, "--proto-module", "tests.interop.test_pb2",
                   "grpc.testing.UnimplementedService")
    assert (run.code, run.stdout) == (
        0, "grpc.testing.UnimplementedService.UnimplementedCall\n"), run.stderr
    run = run_tool("describe", nowhere, "--protoset", protoset, "grpc.testing.Empty")
    assert (run.code, run.stdout) == (0, "grpc.testing.Empty is a message:\n"
                                         "message Empty {\n}\n"), run.stderr
    run = run_tool("describe", nowhere, "--protoset", protoset, "grpc.testing.Nothing")
    assert_no_traceback(run)
    assert run.code == 5
    assert run.stderr == f"minigrpc: --protoset {protoset} knows no symbol 'grpc.testing.Nothing'\n"


def test_a_set_without_its_imports_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "alone.protoset"
    path.write_bytes(file_set(interop_files(with_imports=False)))
    run = run_tool("list", "unix:/x", "--protoset", str(path))
    assert_no_traceback(run)
    assert run.code == 64
    assert run.stderr == ("minigrpc: grpc/testing/test.proto import grpc/testing/empty.proto, "
                          "grpc/testing/messages.proto, which none of the given files holds "
                          "(protoc --include_imports puts the imports in the set)\n")


def test_a_file_that_is_not_a_set_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.protoset"
    path.write_bytes(b"\xff\xff not a descriptor set")
    run = run_tool("list", "unix:/x", "--protoset", str(path))
    assert_no_traceback(run)
    assert run.code == 64
    assert f"--protoset {path}: not a FileDescriptorSet" in run.stderr


def test_descriptors_that_do_not_build_are_a_usage_error(tmp_path: Path) -> None:
    broken = descriptor_pb2.FileDescriptorProto(name="broken.proto", package="broken",
                                                syntax="proto3")
    message = broken.message_type.add(name="Holder")
    message.field.add(name="thing", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                      type_name=".broken.NotDefined")
    path = tmp_path / "broken.protoset"
    path.write_bytes(file_set([broken]))
    run = run_tool("describe", "unix:/x", "--protoset", str(path), "broken.Holder")
    assert_no_traceback(run)
    assert run.code == 64
    assert run.stderr.startswith(f"minigrpc: --protoset {path}: the descriptors do not build: ")


# -- describe's text for every kind of field -----------------------------------------------------


def _field(name: str, number: int, kind: int, label: int = F.LABEL_OPTIONAL,
           type_name: str = "", **more: Any) -> descriptor_pb2.FieldDescriptorProto:
    if type_name:
        more["type_name"] = type_name
    return F(name=name, number=number, type=kind, label=label, **more)


def shapes_file() -> descriptor_pb2.FileDescriptorProto:
    """proto3: a plain field, an optional one, a map, a oneof, a repeated enum, a deprecated
    field, a nested message and enum; and a service with a server stream."""
    shape = descriptor_pb2.DescriptorProto(name="Shape")
    shape.field.extend([
        _field("name", 1, F.TYPE_STRING),
        _field("sides", 2, F.TYPE_INT32, proto3_optional=True, oneof_index=1),
        _field("labels", 3, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".shapes.Shape.LabelsEntry"),
        _field("radius", 4, F.TYPE_DOUBLE, oneof_index=0),
        _field("box", 5, F.TYPE_MESSAGE, type_name=".shapes.Shape.Box", oneof_index=0),
        _field("colors", 6, F.TYPE_ENUM, F.LABEL_REPEATED, ".shapes.Shape.Color"),
        _field("blob", 7, F.TYPE_BYTES, options=descriptor_pb2.FieldOptions(deprecated=True)),
    ])
    shape.oneof_decl.add(name="size")
    shape.oneof_decl.add(name="_sides")
    entry = shape.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.extend([_field("key", 1, F.TYPE_STRING), _field("value", 2, F.TYPE_INT64)])
    box = shape.nested_type.add(name="Box")
    box.field.extend([_field("width", 1, F.TYPE_FLOAT), _field("height", 2, F.TYPE_FLOAT)])
    color = shape.enum_type.add(name="Color")
    color.value.add(name="COLOR_UNSPECIFIED", number=0)
    color.value.add(name="RED", number=1)
    service = descriptor_pb2.ServiceDescriptorProto(name="Drawer")
    service.method.add(name="Draw", input_type=".shapes.Shape", output_type=".shapes.Shape",
                       server_streaming=True)
    return descriptor_pb2.FileDescriptorProto(name="shapes.proto", package="shapes",
                                              syntax="proto3", message_type=[shape],
                                              service=[service])


def legacy_file() -> descriptor_pb2.FileDescriptorProto:
    """proto2: required and optional labels, defaults, packed."""
    old = descriptor_pb2.DescriptorProto(name="Old")
    old.field.extend([
        _field("id", 1, F.TYPE_STRING, F.LABEL_REQUIRED),
        _field("count", 2, F.TYPE_INT32, default_value="7"),
        _field("label", 3, F.TYPE_STRING, default_value='a"b'),
        _field("values", 4, F.TYPE_INT32, F.LABEL_REPEATED,
               options=descriptor_pb2.FieldOptions(packed=True)),
    ])
    return descriptor_pb2.FileDescriptorProto(name="legacy.proto", package="legacy",
                                              message_type=[old])


SHAPE = """\
shapes.Shape is a message:
message Shape {
  string name = 1;
  optional int32 sides = 2;
  map<string, int64> labels = 3;
  oneof size {
    double radius = 4;
    .shapes.Shape.Box box = 5;
  }
  repeated .shapes.Shape.Color colors = 6;
  bytes blob = 7 [deprecated = true];
  message Box {
    float width = 1;
    float height = 2;
  }
  enum Color {
    COLOR_UNSPECIFIED = 0;
    RED = 1;
  }
}
"""

OLD = """\
legacy.Old is a message:
message Old {
  required string id = 1;
  optional int32 count = 2 [default = 7];
  optional string label = 3 [default = "a\\"b"];
  repeated int32 values = 4 [packed = true];
}
"""

DRAWER = """\
shapes.Drawer is a service:
service Drawer {
  rpc Draw(.shapes.Shape) returns (stream .shapes.Shape);
}
"""


@pytest.mark.parametrize("symbol, text", [
    ("shapes.Shape", SHAPE), ("legacy.Old", OLD), ("shapes.Drawer", DRAWER),
    ("shapes.Drawer.Draw", "shapes.Drawer.Draw is a method:\n"
                           "rpc Draw(.shapes.Shape) returns (stream .shapes.Shape);\n"),
    ("shapes.Shape.Color", "shapes.Shape.Color is an enum:\nenum Color {\n"
                           "  COLOR_UNSPECIFIED = 0;\n  RED = 1;\n}\n"),
    ("shapes.Shape.Box", "shapes.Shape.Box is a message:\nmessage Box {\n  float width = 1;\n"
                         "  float height = 2;\n}\n"),
])
def test_describe_writes_the_proto_back(tmp_path: Path, symbol: str, text: str) -> None:
    path = tmp_path / "shapes.protoset"
    path.write_bytes(file_set([shapes_file(), legacy_file()]))
    run = run_tool("describe", "unix:/nonexistent/x.sock", "--protoset", str(path), symbol)
    assert (run.code, run.stdout) == (0, text), run.stderr
