"""``minigrpc call`` against every peer: the four call shapes, JSON in and out, metadata, status.

Each test runs the tool as a child process (``python -m minigrpc``) against minigrpc's blocking
and asyncio servers, grpcio's and grpc-go's (tests/cli/conftest.py), all serving the interop
TestService with reflection.  What the tool prints is compared with protobuf's own
``json_format.MessageToJson`` of the message the server is known to answer (the interop
service's rules, gRPC's doc/interop-test-descriptions.md), so the output is checked against
protobuf, not against the tool's own code.
"""

from __future__ import annotations

import base64
from typing import Any, List

import pytest
from google.protobuf import json_format

from tests.cli.conftest import Peer
from tests.cli.support import assert_no_traceback, run_tool
from tests.interop import empty_pb2, messages_pb2

pytestmark = pytest.mark.timeout(120)

UNARY = "grpc.testing.TestService/UnaryCall"


def expected_json(*messages: Any, emit_defaults: bool = False) -> str:
    """What protobuf prints for ``messages``, one after another."""
    texts = []
    for message in messages:
        if not emit_defaults:
            texts.append(json_format.MessageToJson(message))
            continue
        try:
            texts.append(json_format.MessageToJson(message,
                                                   always_print_fields_with_no_presence=True))
        except TypeError:  # protobuf before 5.26
            texts.append(json_format.MessageToJson(message, including_default_value_fields=True))
    return "".join(text + "\n" for text in texts)


def body(size: int) -> messages_pb2.Payload:
    return messages_pb2.Payload(body=b"\0" * size)


def streamed(*sizes: int) -> List[messages_pb2.StreamingOutputCallResponse]:
    return [messages_pb2.StreamingOutputCallResponse(payload=body(size)) for size in sizes]


def test_unary_call_prints_the_response_as_json_format_does(peer: Peer) -> None:
    run = run_tool("call", peer.unix, UNARY, "-d", '{"responseSize": 3, "payload": {"body": '
                   f'"{base64.b64encode(b"abcd").decode()}"}}}}')
    assert_no_traceback(run)
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(messages_pb2.SimpleResponse(payload=body(3)))
    assert run.stderr == "status: OK\n"


def test_unary_call_over_tcp_with_plaintext(peer: Peer) -> None:
    run = run_tool("call", "--plaintext", peer.tcp, "grpc.testing.TestService.EmptyCall")
    assert (run.code, run.stdout) == (0, expected_json(empty_pb2.Empty())), run.stderr


def test_no_data_sends_an_empty_request(peer: Peer) -> None:
    run = run_tool("call", peer.unix, UNARY)
    expected = expected_json(messages_pb2.SimpleResponse(payload=body(0)))
    assert (run.code, run.stdout) == (0, expected), run.stderr


def test_emit_defaults_follows_json_format(peer: Peer) -> None:
    run = run_tool("call", peer.unix, UNARY, "-d", '{"responseSize": 1}', "--emit-defaults")
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(messages_pb2.SimpleResponse(payload=body(1)),
                                       emit_defaults=True)
    assert run.stdout != expected_json(messages_pb2.SimpleResponse(payload=body(1)))


def test_server_stream_prints_one_json_per_response(peer: Peer) -> None:
    run = run_tool("call", peer.unix, "grpc.testing.TestService/StreamingOutputCall", "-d",
                   '{"responseParameters": [{"size": 2}, {"size": 1}, {"size": 4}]}')
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(*streamed(2, 1, 4))
    assert run.stderr == "status: OK\n"


def test_client_stream_takes_each_d_and_concatenated_objects(peer: Peer) -> None:
    run = run_tool("call", peer.unix, "grpc.testing.TestService/StreamingInputCall",
                   "-d", '{"payload": {"body": "AAAA"}}{"payload": {"body": "AA=="}}',
                   "-d", '\n{"payload": {"body": "AAAAAA=="}}\n\n{"payload": {}}\n')
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(
        messages_pb2.StreamingInputCallResponse(aggregated_payload_size=3 + 1 + 4))


def test_client_stream_with_no_data_sends_no_message(peer: Peer) -> None:
    run = run_tool("call", peer.unix, "grpc.testing.TestService/StreamingInputCall")
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(messages_pb2.StreamingInputCallResponse())


def test_bidirectional_stream_from_stdin(peer: Peer) -> None:
    requests = b'{"responseParameters": [{"size": 1}]}\n{"responseParameters": [{"size": 3}]}'
    run = run_tool("call", peer.unix, "grpc.testing.TestService/FullDuplexCall", "-d", "@",
                   stdin=requests)
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(*streamed(1, 3))


def header_lines(trace: str, arrow: str) -> List[str]:
    """The decoded header lines of the frames that went one way (``-->`` sent, ``<--``
    received): the indented lines under a frame line (minigrpc.net.trace's format)."""
    lines: List[str] = []
    direction = ""
    for line in trace.splitlines():
        if line.startswith("client "):
            direction = line.split()[1]
        elif line.startswith(" ") and direction == arrow:
            lines.append(line.strip())
    return lines


def test_headers_reach_the_server_and_the_trace_shows_them(peer: Peer) -> None:
    """The interop server echoes two request headers, one in its response headers and one (a
    -bin key, given in base64) in its trailers; the reflection lookup carries them too."""
    run = run_tool("call", peer.unix, "grpc.testing.TestService/EmptyCall", "--trace",
                   "-H", "X-GRPC-Test-Echo-Initial: hello there",
                   "-H", "x-grpc-test-echo-trailing-bin: AAEC")
    assert run.code == 0, run.stderr
    assert run.stdout == expected_json(empty_pb2.Empty())
    sent, received = header_lines(run.stderr, "-->"), header_lines(run.stderr, "<--")
    assert sent.count(":path: /grpc.testing.TestService/EmptyCall") == 1
    assert any(line.startswith(":path: /grpc.reflection.") for line in sent)
    requests = sent.count(":method: POST")
    assert requests >= 2  # reflection, then the call
    assert sent.count("x-grpc-test-echo-initial: hello there") == requests
    assert sent.count("x-grpc-test-echo-trailing-bin: AAEC") == requests
    assert received.count("x-grpc-test-echo-initial: hello there") == 1
    assert received.count("x-grpc-test-echo-trailing-bin: AAEC") == 1
    assert "status: OK\n" in run.stderr


def test_a_non_ok_status_is_the_exit_code(peer: Peer) -> None:
    run = run_tool("call", peer.unix, UNARY,
                   "-d", '{"responseStatus": {"code": 7, "message": "no entry"}}')
    assert_no_traceback(run)
    assert (run.code, run.stdout) == (7, "")
    assert run.stderr == "status: PERMISSION_DENIED (7): no entry\n"


def test_an_unimplemented_method_is_twelve(peer: Peer) -> None:
    run = run_tool("call", peer.unix, "grpc.testing.TestService/UnimplementedCall")
    assert_no_traceback(run)
    assert run.code == 12
    assert run.stderr.startswith("status: UNIMPLEMENTED (12)")


def test_max_time_is_the_deadline(peer: Peer) -> None:
    """The server waits as long as x-test-sleep-ms asks, or until the call ends: the deadline
    ends it."""
    run = run_tool("call", peer.unix, UNARY, "--max-time", "1", "-H", "x-test-sleep-ms: 30000")
    assert_no_traceback(run)
    assert run.code == 4, run.stderr
    assert run.stderr.startswith("status: DEADLINE_EXCEEDED (4)")
    assert 1.0 <= run.seconds < 20.0


def test_tls_against_a_plaintext_server_fails_unavailable(peer: Peer) -> None:
    """A TCP target is dialled with TLS unless --plaintext, as grpcurl does."""
    run = run_tool("call", peer.tcp, "grpc.testing.TestService/EmptyCall",
                   "--connect-timeout", "5")
    assert_no_traceback(run)
    assert run.code == 14, run.stderr
