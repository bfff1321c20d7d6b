"""minigrpc.reflection against grpcio-reflection, both ways, over real sockets.

* grpcio-reflection's own client (``ProtoReflectionDescriptorDatabase`` behind a protobuf
  ``DescriptorPool``) on a grpcio channel, against a minigrpc server with minigrpc's reflection:
  it lists the services and rebuilds their types from what it is sent.
* minigrpc's v1alpha stub on a minigrpc channel against a grpcio server running
  grpcio-reflection's servicer.
* The same requests to grpcio-reflection's servicer and to minigrpc's, over one pool with
  proto2 extensions: the same files and numbers come back.
* v1 (which grpcio-reflection does not ship), from a grpcio channel: one stream, several
  requests, imported files sent once, errors answered in-stream.
"""

from __future__ import annotations

import importlib
from concurrent import futures
from typing import Any, Iterator, List

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool

import minigrpc
from minigrpc import descriptors
from minigrpc.health.v1 import health, health_pb2_grpc
from minigrpc.reflection.v1 import reflection as v1
from minigrpc.reflection.v1alpha import reflection as v1alpha
from tests.interop import test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import listen_address

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

TEST_SERVICE = "grpc.testing.TestService"
HEALTH_SERVICE = "grpc.health.v1.Health"
#: google/api/annotations.proto's ``google.api.http`` extension of MethodOptions.
HTTP_EXTENSION = 72295728


def _addon(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # absent, or refuses this protobuf (the ``oldest`` env)
        pytest.skip(f"{name} is unavailable here: {exc}")


def _start(server: Any) -> str:
    address = listen_address("unix-abstract", None)
    server.add_insecure_port(address)
    server.start()
    return address


@pytest.fixture(scope="module")
def minigrpc_target() -> Iterator[str]:
    """A minigrpc server with the interop TestService, health, and reflection (both versions)."""
    _addon("google.api.annotations_pb2")  # registers an extension of MethodOptions
    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=4))
    descriptors.add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer())
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    v1alpha.enable_server_reflection(
        (TEST_SERVICE, HEALTH_SERVICE, v1alpha.SERVICE_NAME), server
    )
    address = _start(server)
    yield address
    server.stop(None).wait(30)


def test_grpcio_reflection_client_rebuilds_the_types(minigrpc_target: str) -> None:
    database_module = _addon("grpc_reflection.v1alpha.proto_reflection_descriptor_database")
    with grpc.insecure_channel(minigrpc_target) as channel:
        database = database_module.ProtoReflectionDescriptorDatabase(channel)
        assert sorted(database.get_services()) == sorted(
            [TEST_SERVICE, HEALTH_SERVICE, v1alpha.SERVICE_NAME, v1.SERVICE_NAME]
        )
        pool = descriptor_pool.DescriptorPool(database)
        service = pool.FindServiceByName(TEST_SERVICE)
        unary = service.methods_by_name["UnaryCall"]
        assert unary.input_type.full_name == "grpc.testing.SimpleRequest"
        assert "response_size" in unary.input_type.fields_by_name
        # A method is found through its service (protobuf's pools do not index methods).
        method_file = database.FindFileContainingSymbol(f"{TEST_SERVICE}.UnaryCall")
        assert method_file.name == "grpc/testing/test.proto"
        assert pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
        assert HTTP_EXTENSION in database.FindAllExtensionNumbers(
            "google.protobuf.MethodOptions"
        )
        # Its FindFileContainingExtension answers from protobuf's DescriptorDatabase, which
        # does not index extensions on every protobuf; ask through its stub instead.
        messages = database_module.ServerReflectionRequest
        extension = database_module.ExtensionRequest(
            containing_type="google.protobuf.MethodOptions", extension_number=HTTP_EXTENSION
        )
        (answer,) = database._stub.ServerReflectionInfo(
            iter([messages(file_containing_extension=extension)]), timeout=10
        )
        files = answer.file_descriptor_response.file_descriptor_proto
        assert _file_name(files[0]) == "google/api/annotations.proto"
        with pytest.raises(KeyError):
            database.FindFileContainingSymbol("grpc.testing.NoSuchThing")
        with pytest.raises(KeyError):
            database.FindFileByName("no/such.proto")


def test_minigrpc_client_against_grpcio_reflection() -> None:
    grpcio_reflection = _addon("grpc_reflection.v1alpha.reflection")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    descriptors.add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer(grpc_module=grpc))
    grpcio_reflection.enable_server_reflection(
        (TEST_SERVICE, grpcio_reflection.SERVICE_NAME), server
    )
    address = _start(server)
    messages = v1alpha.reflection_pb2
    try:
        with minigrpc.insecure_channel(address) as channel:
            stub = v1alpha.reflection_pb2_grpc.ServerReflectionStub(channel)
            requests = [
                messages.ServerReflectionRequest(list_services=""),
                messages.ServerReflectionRequest(file_containing_symbol=TEST_SERVICE),
            ]
            listed, files = stub.ServerReflectionInfo(iter(requests), timeout=10)
    finally:
        server.stop(None).wait(30)
    assert [s.name for s in listed.list_services_response.service] == sorted(
        [TEST_SERVICE, v1alpha.SERVICE_NAME]
    )
    names = [_file_name(data) for data in files.file_descriptor_response.file_descriptor_proto]
    assert names[0] == "grpc/testing/test.proto"
    assert "grpc/testing/messages.proto" in names


def _file_name(serialized: bytes) -> str:
    return str(descriptor_pb2.FileDescriptorProto.FromString(serialized).name)


def _extension_pool() -> Any:
    """A pool of its own with a proto2 message, two extensions of it, and a dependency."""
    pool = descriptor_pool.DescriptorPool()
    base = descriptor_pb2.FileDescriptorProto(name="reftest/base.proto", package="reftest")
    base.message_type.add(name="Base").extension_range.add(start=100, end=200)
    pool.AddSerializedFile(base.SerializeToString())
    extra = descriptor_pb2.FileDescriptorProto(
        name="reftest/extra.proto", package="reftest", dependency=["reftest/base.proto"]
    )
    for name, number in (("note", 150), ("tag", 120)):
        extra.extension.add(
            name=name,
            number=number,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            extendee=".reftest.Base",
        )
    pool.AddSerializedFile(extra.SerializeToString())
    return pool


def _ask(stub: Any, requests: List[Any]) -> List[Any]:
    return list(stub.ServerReflectionInfo(iter(requests), timeout=10))


def test_same_answers_as_grpcio_reflection_over_one_pool() -> None:
    grpcio_reflection = _addon("grpc_reflection.v1alpha.reflection")
    pool = _extension_pool()
    services = ("reftest.Nothing",)
    grpcio_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    grpcio_reflection.enable_server_reflection(services, grpcio_server, pool=pool)
    ours = minigrpc.server(futures.ThreadPoolExecutor(max_workers=2))
    v1alpha.enable_server_reflection(services, ours, pool=pool)
    messages = v1alpha.reflection_pb2
    request = messages.ServerReflectionRequest
    requests = [
        request(list_services=""),
        request(file_by_filename="reftest/extra.proto"),
        request(file_containing_symbol="reftest.Base"),
        request(file_containing_symbol="reftest.note"),
        request(
            file_containing_extension=messages.ExtensionRequest(
                containing_type="reftest.Base", extension_number=120
            )
        ),
        request(all_extension_numbers_of_type="reftest.Base"),
        request(file_by_filename="no/such.proto"),
        request(file_containing_symbol="reftest.Missing"),
        request(all_extension_numbers_of_type="reftest.Missing"),
    ]
    answers = []
    try:
        for server in (grpcio_server, ours):
            address = _start(server)
            with minigrpc.insecure_channel(address) as channel:
                stub = v1alpha.reflection_pb2_grpc.ServerReflectionStub(channel)
                # One stream per request, as grpcio's client does: nothing is left out as sent.
                answers.append([_ask(stub, [r])[0] for r in requests])
    finally:
        grpcio_server.stop(None).wait(30)
        ours.stop(None).wait(30)
    theirs, mine = answers
    for asked, their, my in zip(requests, theirs, mine):
        assert my.original_request == asked
        assert my.WhichOneof("message_response") == their.WhichOneof("message_response")
        if their.HasField("error_response"):
            assert my.error_response.error_code == their.error_response.error_code == 5
        elif their.HasField("file_descriptor_response"):
            mine_files = my.file_descriptor_response.file_descriptor_proto
            their_files = their.file_descriptor_response.file_descriptor_proto
            assert [_file_name(f) for f in mine_files] == [_file_name(f) for f in their_files]
            assert sorted(mine_files) == sorted(their_files)
        else:
            assert my == their or _same_but_host(my, their)
    assert list(mine[5].all_extension_numbers_response.extension_number) == [120, 150]


def _same_but_host(mine: Any, theirs: Any) -> bool:
    """Equal but for what grpcio-reflection's releases echo differently: the host, and (before
    grpcio 1.63, as on Python 3.7) no original_request on a list_services answer."""
    copy = type(mine)()
    copy.CopyFrom(mine)
    copy.valid_host = theirs.valid_host
    if not theirs.HasField("original_request"):
        copy.ClearField("original_request")
    return bool(copy == theirs)


def test_v1_from_a_grpcio_channel_on_one_stream(minigrpc_target: str) -> None:
    messages = v1.reflection_pb2
    request = messages.ServerReflectionRequest
    with grpc.insecure_channel(minigrpc_target) as channel:
        stub = v1.reflection_pb2_grpc.ServerReflectionStub(channel)
        listed, test_file, messages_file, method_file, missing, empty, after = _ask(
            stub,
            [
                request(list_services="", host="example"),
                request(file_containing_symbol=TEST_SERVICE),
                request(file_by_filename="grpc/testing/messages.proto"),
                request(file_containing_symbol=f"{TEST_SERVICE}.EmptyCall"),
                request(file_by_filename="no/such.proto"),
                request(),
                request(file_containing_symbol="grpc.testing.SimpleRequest.response_size"),
            ],
        )
    assert [s.name for s in listed.list_services_response.service] == sorted(
        [TEST_SERVICE, HEALTH_SERVICE, v1alpha.SERVICE_NAME, v1.SERVICE_NAME]
    )
    assert listed.valid_host == "example"
    sent = [_file_name(f) for f in test_file.file_descriptor_response.file_descriptor_proto]
    assert sent[0] == "grpc/testing/test.proto"
    assert {"grpc/testing/messages.proto", "grpc/testing/empty.proto"} <= set(sent)
    # Asked for by name, a file comes again; its imports, already sent on this stream, do not.
    again = [_file_name(f) for f in messages_file.file_descriptor_response.file_descriptor_proto]
    assert again == ["grpc/testing/messages.proto"]
    by_method = method_file.file_descriptor_response.file_descriptor_proto
    assert [_file_name(f) for f in by_method] == ["grpc/testing/test.proto"]
    assert missing.error_response.error_code == minigrpc.StatusCode.NOT_FOUND.number
    assert "no/such.proto" in missing.error_response.error_message
    assert empty.error_response.error_code == minigrpc.StatusCode.INVALID_ARGUMENT.number
    field_file = after.file_descriptor_response.file_descriptor_proto
    assert [_file_name(f) for f in field_file] == ["grpc/testing/messages.proto"]


def test_every_file_sent_parses_and_builds_a_pool(minigrpc_target: str) -> None:
    """What v1 sends for a service is complete: a fresh pool accepts it, imports first."""
    messages = v1.reflection_pb2
    with minigrpc.insecure_channel(minigrpc_target) as channel:
        stub = v1.reflection_pb2_grpc.ServerReflectionStub(channel)
        (answer,) = _ask(
            stub, [messages.ServerReflectionRequest(file_containing_symbol=TEST_SERVICE)]
        )
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(f)
        for f in answer.file_descriptor_response.file_descriptor_proto
    ]
    pool = descriptor_pool.DescriptorPool()
    for file in reversed(files):  # breadth first from the asked file: imports come later
        pool.Add(file)
    assert pool.FindServiceByName(TEST_SERVICE).methods_by_name["FullDuplexCall"]


# -- minigrpc's reflection client --------------------------------------------------------------


def _check_database(database: Any) -> None:
    """What a program without the .proto files does: list, then build the types from a pool."""
    assert TEST_SERVICE in database.get_services()
    pool = descriptor_pool.DescriptorPool(database)
    unary = pool.FindServiceByName(TEST_SERVICE).methods_by_name["UnaryCall"]
    assert unary.output_type.full_name == "grpc.testing.SimpleResponse"
    assert "response_size" in unary.input_type.fields_by_name
    method_file = database.FindFileContainingSymbol(f"{TEST_SERVICE}.StreamingOutputCall")
    assert method_file.name == "grpc/testing/test.proto"
    assert database.FindFileByName("grpc/testing/empty.proto").name == "grpc/testing/empty.proto"
    with pytest.raises(KeyError):
        database.FindFileContainingSymbol("grpc.testing.NoSuchThing")
    with pytest.raises(KeyError):
        database.FindFileByName("no/such.proto")


def test_minigrpc_client_database_against_minigrpc_v1(minigrpc_target: str) -> None:
    from minigrpc.reflection.descriptor_database import ProtoReflectionDescriptorDatabase

    with minigrpc.insecure_channel(minigrpc_target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        _check_database(database)
        assert HTTP_EXTENSION in database.FindAllExtensionNumbers("google.protobuf.MethodOptions")
        extension_file = database.FindFileContainingExtension(
            "google.protobuf.MethodOptions", HTTP_EXTENSION
        )
        assert extension_file.name == "google/api/annotations.proto"
        with pytest.raises(KeyError):
            database.FindFileContainingExtension("google.protobuf.MethodOptions", 1)
        assert database._versions[0][0] is v1.reflection_pb2


@pytest.mark.parametrize("client", ["minigrpc", "grpcio"])
def test_minigrpc_client_database_falls_back_to_v1alpha_on_grpcio_reflection(client: str) -> None:
    """grpcio-reflection serves v1alpha only: v1 is UNIMPLEMENTED, and the client moves on."""
    from minigrpc.reflection.descriptor_database import ProtoReflectionDescriptorDatabase

    grpcio_reflection = _addon("grpc_reflection.v1alpha.reflection")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    descriptors.add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer(grpc_module=grpc))
    grpcio_reflection.enable_server_reflection(
        (TEST_SERVICE, grpcio_reflection.SERVICE_NAME), server
    )
    address = _start(server)
    api = minigrpc if client == "minigrpc" else grpc
    try:
        with api.insecure_channel(address) as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            _check_database(database)
            assert [messages for messages, _ in database._versions] == [v1alpha.reflection_pb2]
    finally:
        server.stop(None).wait(30)
