"""``minigrpc list`` and ``describe`` through each peer's server reflection.

The peers differ where reflection servers do: grpc-go 1.33 (Debian's) and grpcio-reflection
serve v1alpha only, so the tool's first v1 request is answered UNIMPLEMENTED and it falls back,
as grpcurl does; grpcio's reflection answers NOT_FOUND for a method symbol, so the tool asks for
the service instead.  The expected ``describe`` texts are written out here from
proto/grpc/testing/*.proto, independently of the tool's renderer.
"""

from __future__ import annotations

from typing import List

import pytest

from tests.cli.conftest import Peer
from tests.cli.support import assert_no_traceback, run_tool
from tests.interop import test_pb2

pytestmark = pytest.mark.timeout(120)

TEST_SERVICE = "grpc.testing.TestService"

DESCRIBED_SERVICE = """\
grpc.testing.TestService is a service:
service TestService {
  rpc EmptyCall(.grpc.testing.Empty) returns (.grpc.testing.Empty);
  rpc UnaryCall(.grpc.testing.SimpleRequest) returns (.grpc.testing.SimpleResponse);
  rpc StreamingOutputCall(.grpc.testing.StreamingOutputCallRequest) returns (stream .grpc.testing.StreamingOutputCallResponse);
  rpc StreamingInputCall(stream .grpc.testing.StreamingInputCallRequest) returns (.grpc.testing.StreamingInputCallResponse);
  rpc FullDuplexCall(stream .grpc.testing.StreamingOutputCallRequest) returns (stream .grpc.testing.StreamingOutputCallResponse);
  rpc HalfDuplexCall(stream .grpc.testing.StreamingOutputCallRequest) returns (stream .grpc.testing.StreamingOutputCallResponse);
  rpc UnimplementedCall(.grpc.testing.Empty) returns (.grpc.testing.Empty);
}
"""  # noqa: E501

DESCRIBED_METHOD = """\
grpc.testing.TestService.StreamingInputCall is a method:
rpc StreamingInputCall(stream .grpc.testing.StreamingInputCallRequest) returns (.grpc.testing.StreamingInputCallResponse);
"""  # noqa: E501

DESCRIBED_MESSAGE = """\
grpc.testing.StreamingOutputCallRequest is a message:
message StreamingOutputCallRequest {
  .grpc.testing.PayloadType response_type = 1;
  repeated .grpc.testing.ResponseParameters response_parameters = 2;
  .grpc.testing.Payload payload = 3;
  .grpc.testing.EchoStatus response_status = 7;
}
"""

DESCRIBED_ENUM = """\
grpc.testing.PayloadType is an enum:
enum PayloadType {
  COMPRESSABLE = 0;
}
"""


def reflection_paths(trace: str) -> List[str]:
    return [line.strip()[len(":path: "):] for line in trace.splitlines()
            if line.strip().startswith(":path: /grpc.reflection.")]


def test_list_services(peer: Peer) -> None:
    run = run_tool("list", peer.unix)
    assert_no_traceback(run)
    assert run.code == 0, run.stderr
    names = run.stdout.splitlines()
    assert names == sorted(names)
    assert {TEST_SERVICE, "grpc.health.v1.Health"} <= set(names)
    assert "grpc.reflection.v1alpha.ServerReflection" in names
    assert run.stderr == ""


def test_list_a_services_methods_in_declaration_order(peer: Peer) -> None:
    run = run_tool("list", "--plaintext", peer.tcp, TEST_SERVICE)
    assert run.code == 0, run.stderr
    expected = [f"{TEST_SERVICE}.{method.name}"
                for method in test_pb2.DESCRIPTOR.services_by_name["TestService"].methods]
    assert run.stdout.splitlines() == expected


def test_describe_a_service(peer: Peer) -> None:
    run = run_tool("describe", peer.unix, TEST_SERVICE)
    assert (run.code, run.stdout) == (0, DESCRIBED_SERVICE), run.stderr


def test_describe_a_method_also_where_reflection_does_not_index_methods(peer: Peer) -> None:
    run = run_tool("describe", peer.unix, f"{TEST_SERVICE}.StreamingInputCall", "--trace")
    assert (run.code, run.stdout) == (0, DESCRIBED_METHOD), run.stderr


def test_describe_a_message_and_an_enum(peer: Peer) -> None:
    run = run_tool("describe", peer.unix, ".grpc.testing.StreamingOutputCallRequest")
    assert (run.code, run.stdout) == (0, DESCRIBED_MESSAGE), run.stderr
    run = run_tool("describe", peer.unix, "grpc.testing.PayloadType")
    assert (run.code, run.stdout) == (0, DESCRIBED_ENUM), run.stderr


def test_describe_without_a_symbol_describes_every_service(peer: Peer) -> None:
    run = run_tool("describe", peer.unix)
    assert run.code == 0, run.stderr
    assert DESCRIBED_SERVICE in run.stdout
    assert "grpc.health.v1.Health is a service:\nservice Health {\n" in run.stdout


def test_an_unknown_symbol_is_not_found(peer: Peer) -> None:
    run = run_tool("describe", peer.unix, "no.such.Symbol")
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (5, "")
    assert "knows no symbol 'no.such.Symbol'" in run.stderr


def test_v1_first_then_v1alpha_where_the_server_has_only_v1alpha(peer: Peer) -> None:
    run = run_tool("list", peer.unix, "--trace")
    assert run.code == 0, run.stderr
    paths = reflection_paths(run.stderr)
    assert paths[0] == "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    if peer.name in ("grpcio", "grpc-go"):  # v1alpha only: UNIMPLEMENTED, then v1alpha
        assert paths == [paths[0],
                         "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"]
        assert "grpc-status: 12  (UNIMPLEMENTED)" in run.stderr
    else:
        assert paths == [paths[0]]


def test_grpcio_answers_not_found_for_a_method_and_the_service_is_asked(peer: Peer) -> None:
    if peer.name != "grpcio":
        pytest.skip("grpcio-reflection is the peer that does not index methods")
    run = run_tool("describe", peer.unix, f"{TEST_SERVICE}.UnaryCall", "--trace")
    assert run.code == 0, run.stderr
    assert "grpc.testing.TestService.UnaryCall is a method:" in run.stdout
