"""Unit tests of the sans-IO client (minigrpc.protocol.client_protocol) against a real h2 server, in
memory.

Every test drives a real server-side ``H2Connection``
(:class:`tests.support.scripted_peer.MemoryServer`): the bytes the client produces are what h2
parses, and the server's frames are real frames.
"""

from __future__ import annotations

import base64
import zlib

import h2.errors
import pytest

from minigrpc.http2.frames import MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE
from minigrpc.protocol import codes, wire
from minigrpc.protocol.client_protocol import (
    CallFinished,
    ClientGrpcConnection,
    ConnectionFailed,
    GoAwayReceived,
)
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.headers import header_list_size, is_grpc_content_type, request_headers
from tests.support.h2_peer import reopen_after_goaway
from tests.support.scripted_peer import (
    GRPC_RESPONSE_HEADERS,
    INITIAL_WINDOW_SIZE,
    MemoryServer,
    make_call,
)

pytestmark = pytest.mark.timeout(30)


# -- request -------------------------------------------------------------------------------


def test_request_headers_follow_grpc_go_order() -> None:
    headers = request_headers(
        path="/pkg.Svc/M",
        authority="localhost",
        user_agent="grpc-python-minigrpc/1",
        timeout=0.1,
        encoding="gzip",
        metadata=[(b"x-a", b"1"), (b"x-b-bin", b"AAE")],
    )
    assert [name for name, _ in headers] == [
        b":method",
        b":scheme",
        b":path",
        b":authority",
        b"content-type",
        b"user-agent",
        b"te",
        b"grpc-encoding",
        b"grpc-accept-encoding",
        b"grpc-timeout",
        b"x-a",
        b"x-b-bin",
    ]
    values = dict(headers)
    assert values[b":method"] == b"POST"
    assert values[b":scheme"] == b"http"
    assert values[b"te"] == b"trailers"
    assert values[b"content-type"] == b"application/grpc"
    assert values[b"grpc-timeout"] == b"100000u"
    assert values[b"grpc-accept-encoding"] == b"identity,deflate,gzip"


def test_request_without_timeout_or_encoding_omits_those_headers() -> None:
    names = [n for n, _ in request_headers(path="/a/b", authority="h:1", user_agent="ua")]
    assert b"grpc-timeout" not in names
    assert b"grpc-encoding" not in names


def test_server_receives_headers_and_one_data_frame_with_end_stream() -> None:
    peer = MemoryServer()
    call = make_call(b"\x08\x01", metadata=[(b"x-custom", b"v")])
    sid = peer.start(call)
    assert sid == 1
    assert peer.requests[sid][:4] == [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/test.Service/Method"),
        (b":authority", b"localhost"),
    ]
    assert (b"x-custom", b"v") in peer.requests[sid]
    assert peer.bodies[sid] == b"\x00\x00\x00\x00\x02\x08\x01"
    assert sid in peer.ended
    assert call.request_complete


def test_empty_message_is_five_zero_bytes() -> None:
    peer = MemoryServer()
    sid = peer.start(make_call(b""))
    assert peer.bodies[sid] == b"\x00\x00\x00\x00\x00"


def test_initial_settings_raise_windows_and_frame_size() -> None:
    peer = MemoryServer()
    # After the handshake the server may send 4 MiB on a stream and 16 MiB on the connection.
    assert peer.conn.remote_settings.initial_window_size == 4 * 1024 * 1024
    assert peer.conn.remote_settings.max_frame_size == 1024 * 1024
    assert peer.conn.remote_settings.enable_push == 0
    assert peer.conn.outbound_flow_control_window == 16 * 1024 * 1024


def test_large_request_is_chunked_by_peer_frame_size_and_window() -> None:
    peer = MemoryServer(handshake=False)
    # Server still at the defaults: 16 KiB frames, 65,535-byte windows.
    call = make_call(b"x" * 200_000)
    peer.client.start_call(call)
    assert not call.request_complete  # blocked on the 65,535-byte window
    assert not peer.client.window_available(call)
    for _ in range(20):
        peer.pump()
        if peer.client.window_available(call):
            peer.client.write_request(call)
        if call.request_complete:
            break
    peer.pump()
    assert call.request_complete
    assert peer.bodies[call.stream_id] == wire.encode_message(b"x" * 200_000)


# -- responses -----------------------------------------------------------------------------


def test_ok_response_with_metadata() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid, [(b"x-initial", b"a"), (b"grpc-accept-encoding", b"identity,gzip")])
    peer.message(sid, b"reply")
    peer.trailers(sid, 0, "", [(b"x-trail-bin", base64.b64encode(b"\xab\xab\xab").rstrip(b"="))])
    events = peer.to_client()
    assert [type(e) for e in events if isinstance(e, CallFinished)] == [CallFinished]
    assert call.status is not None
    assert call.status.code is StatusCode.OK
    assert call.messages == [(False, b"reply")]
    assert call.initial_metadata == (("x-initial", "a"),)
    assert call.trailing_metadata == (("x-trail-bin", b"\xab\xab\xab"),)
    assert peer.client.peer_accept_encodings == frozenset({"identity", "gzip"})
    assert peer.client.idle


def test_repeated_response_blocks_read_as_they_did_and_changed_ones_are_read_anew() -> None:
    """The client reuses what it read from the previous response headers and trailers when
    the next ones are the same (a server's answers usually are): identical blocks give
    identical calls, and any change, a malformed block or one over the limit included, is
    checked in full again."""
    peer = MemoryServer()
    outcomes = []
    for extra, trailing in [
        ([(b"x-initial", b"a")], [(b"x-t", b"1")]),
        ([(b"x-initial", b"a")], [(b"x-t", b"1")]),
        ([(b"x-initial", b"b"), (b"grpc-encoding", b"gzip")], [(b"x-t", b"2")]),
        ([(b"x-initial", b"a")], [(b"x-t", b"1")]),
    ]:
        call = make_call()
        sid = peer.start(call)
        peer.headers(sid, extra)
        peer.message(sid, b"m")
        peer.trailers(sid, 0, "", trailing)
        peer.to_client()
        assert call.status is not None and call.status.code is StatusCode.OK
        outcomes.append((call.initial_metadata, call.trailing_metadata, call.response_encoding))
    assert outcomes == [
        ((("x-initial", "a"),), (("x-t", "1"),), None),
        ((("x-initial", "a"),), (("x-t", "1"),), None),
        ((("x-initial", "b"),), (("x-t", "2"),), "gzip"),
        ((("x-initial", "a"),), (("x-t", "1"),), None),
    ]
    # After the same good blocks again: trailers over the per-call limit, then malformed ones
    # (a NUL in a value), fail the call each time they come.
    for bad in ([(b"x-big", b"v" * 17_000)], [(b"x-t", b"a\x00b")], [(b"x-t", b"a\x00b")]):
        call = make_call()
        sid = peer.start(call)
        peer.headers(sid, [(b"x-initial", b"a")])
        peer.message(sid, b"m")
        peer.trailers(sid, 0, "", bad)
        peer.to_client()
        assert call.status is not None and call.status.code is StatusCode.INTERNAL
        assert peer.client.failure is None  # only the call fails, not the connection


def test_trailers_only_response() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.trailers_only(sid, 3, "\t\nbad ☺ 100%\r\n", [(b"x-t-bin", b"AAE")])
    assert call.status is not None
    assert call.status.code is StatusCode.INVALID_ARGUMENT
    assert call.status.details == "\t\nbad ☺ 100%\r\n"
    assert call.status.initial_metadata == ()
    assert call.status.trailing_metadata == (("x-t-bin", b"\x00\x01"),)


def test_message_split_across_frames_even_inside_the_prefix() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    framed = wire.encode_message(b"0123456789")
    peer.headers(sid)
    peer.to_client()
    for piece in (framed[:2], framed[2:7], framed[7:]):
        peer.conn.send_data(sid, piece)
        peer.to_client()
        assert not call.done
    peer.trailers(sid)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.OK
    assert call.messages == [(False, b"0123456789")]


def test_two_messages_in_one_frame_is_a_cardinality_violation() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.conn.send_data(sid, wire.encode_message(b"a") + wire.encode_message(b"b"))
    peer.to_client()
    assert call.status is not None
    assert call.status.code is StatusCode.INTERNAL
    assert "cardinality" in call.status.details
    peer.to_server()
    assert peer.resets[sid] == h2.errors.ErrorCodes.CANCEL


def test_ok_without_a_message_is_internal() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.trailers(sid, 0)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.INTERNAL


def test_error_status_keeps_details_bin_and_wire_number() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    details = b"\x08\x05\x12\x03abc"
    peer.trailers_only(
        sid, 5, "nf", [(b"grpc-status-details-bin", base64.b64encode(details).rstrip(b"="))]
    )
    assert call.status is not None
    assert call.status.code is StatusCode.NOT_FOUND
    assert call.status.details_bin == details
    assert ("grpc-status-details-bin", details) in call.status.trailing_metadata

    call2 = make_call()
    sid2 = peer.start(call2)
    peer.trailers_only(sid2, 42)
    assert call2.status is not None
    assert call2.status.code is StatusCode.UNKNOWN
    assert call2.status.number == 42
    assert str(call2.status).startswith("rpc error: code = Code(42)")


@pytest.mark.parametrize("raw", [b"%", b"%zz", b"100%25%", b"%FF%FE", b"%20spaced%09"])
def test_percent_decoding_never_fails_or_strips(raw: bytes) -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.conn.send_headers(
        sid,
        [*GRPC_RESPONSE_HEADERS, (b"grpc-status", b"2"), (b"grpc-message", raw)],
        end_stream=True,
    )
    peer.to_client()
    assert call.status is not None
    assert call.status.code is StatusCode.UNKNOWN
    assert call.status.details == wire.percent_decode(raw)
    if raw == b"%20spaced%09":
        assert call.status.details == " spaced\t"


def test_missing_grpc_status_is_unknown() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.message(sid, b"x")
    peer.conn.end_stream(sid)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.UNKNOWN


@pytest.mark.parametrize(
    ("http_status", "content_type", "expected"),
    [
        (404, b"text/html", StatusCode.UNIMPLEMENTED),
        (503, None, StatusCode.UNAVAILABLE),
        (401, b"text/plain", StatusCode.UNAUTHENTICATED),
        (403, b"text/plain", StatusCode.PERMISSION_DENIED),
        (429, b"text/plain", StatusCode.UNAVAILABLE),
        (400, b"text/plain", StatusCode.INTERNAL),
        (502, b"text/plain", StatusCode.UNAVAILABLE),
        (200, b"text/html", StatusCode.UNKNOWN),
        (500, b"text/plain", StatusCode.UNKNOWN),
    ],
)
def test_non_grpc_responses_map_the_http_status(http_status, content_type, expected) -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    block = [(b":status", str(http_status).encode())]
    if content_type is not None:
        block.append((b"content-type", content_type))
    peer.conn.send_headers(sid, block)
    peer.conn.send_data(sid, b"<html>not grpc</html>")
    peer.to_client()
    assert call.status is not None
    assert call.status.code is expected
    assert call.status.code_number == codes.status_from_http(http_status)
    assert f"unexpected HTTP status code received from server: {http_status}" in call.status.details
    # The client stops the stream at once (RST_STREAM CANCEL), like grpc-go.
    peer.to_server()
    assert peer.resets[sid] == h2.errors.ErrorCodes.CANCEL


def test_grpc_content_type_uses_grpc_status_whatever_the_http_status() -> None:
    # grpc-go's own 415/405 rejections carry application/grpc and a grpc-status (PROTOCOL-HTTP2.md,
    # "Responses").
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.conn.send_headers(
        sid,
        [
            (b":status", b"415"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", b"3"),
            (b"grpc-message", b"invalid gRPC request content-type"),
        ],
        end_stream=True,
    )
    peer.to_client()
    assert call.status is not None
    assert call.status.code is StatusCode.INVALID_ARGUMENT


def test_is_grpc_content_type() -> None:
    assert is_grpc_content_type(b"application/grpc")
    assert is_grpc_content_type(b"application/grpc+proto")
    assert is_grpc_content_type(b"application/grpc; charset=utf-8")
    assert not is_grpc_content_type(b"application/grpcx")
    assert not is_grpc_content_type(b"text/html")
    assert not is_grpc_content_type(None)


# -- RST_STREAM ------------------------------------------------------------------------------


@pytest.mark.parametrize("error_code", [*sorted(codes.RST_STREAM_TO_GRPC), 42])
def test_rst_stream_mapping_follows_the_status_table(error_code: int) -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.message(sid, b"complete message")  # even with the message in hand, RST fails the call
    peer.conn.reset_stream(sid, error_code)
    peer.to_client()
    assert call.status is not None
    assert call.status.code_number == codes.status_from_rst_stream(error_code, False)
    assert call.retryable == (error_code == h2.errors.ErrorCodes.REFUSED_STREAM)


def test_cancel_after_the_deadline_is_deadline_exceeded() -> None:
    now = [100.0]
    peer = MemoryServer(ClientGrpcConnection(clock=lambda: now[0]))
    call = make_call(deadline=100.5)
    sid = peer.start(call)
    now[0] = 101.0
    peer.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.DEADLINE_EXCEEDED


def test_rst_no_error_after_trailers_is_ignored() -> None:
    peer = MemoryServer()
    call = make_call(b"y" * 100_000)  # larger than the server's 65,535 window: still sending
    sid = peer.start(call)
    assert not call.request_complete
    peer.trailers_only(sid, 12, "unknown method")
    assert call.status is not None and call.status.code is StatusCode.UNIMPLEMENTED
    # Early closure (PROTOCOL-HTTP2.md, "Responses"): the client stops sending and resets with
    # NO_ERROR.
    peer.to_server()
    assert peer.resets[sid] == h2.errors.ErrorCodes.NO_ERROR
    assert peer.client.write_request(call)  # nothing more is sent for a finished call


def test_local_deadline_sends_cancel_and_wins_over_arrived_data() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.message(sid, b"arrived")
    peer.to_client()
    peer.client.expire(call)
    assert call.status is not None and call.status.code is StatusCode.DEADLINE_EXCEEDED
    peer.to_server()
    assert peer.resets[sid] == h2.errors.ErrorCodes.CANCEL


# -- flow control --------------------------------------------------------------------------


def test_padded_data_is_acked_including_padding() -> None:
    # data_frame_padding (negative-http2-interop-test-descriptions.md): 5-byte frames with 255
    # bytes of padding cost 261 bytes
    # of window each. With 65,535-byte windows the server can only finish if every frame is
    # acknowledged in full, padding included.
    small = ClientGrpcConnection(stream_window=65535, connection_window=65535)
    peer = MemoryServer(small)
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    framed = wire.encode_message(b"p" * 4000)  # 801 frames: 209,061 bytes of window
    offset = 0
    while offset < len(framed):
        if (
            min(peer.conn.local_flow_control_window(sid), peer.conn.outbound_flow_control_window)
            < 261
        ):
            peer.to_client()
            assert peer.to_server(), "the client stopped acknowledging: window leaked"
            continue
        peer.conn.send_data(sid, framed[offset : offset + 5], pad_length=255)
        offset += 5
    peer.trailers(sid)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.OK
    assert call.messages == [(False, b"p" * 4000)]


def test_messages_before_one_over_the_limit_in_the_same_data_frame_are_delivered() -> None:
    # grpcio's client reads every message under the limit, then fails RESOURCE_EXHAUSTED; a
    # server often writes both in one DATA frame, which must not lose the first.
    client = ClientGrpcConnection(max_receive_message_length=1000)
    peer = MemoryServer(client)
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    peer.conn.send_data(sid, wire.encode_message(b"a" * 500) + wire.encode_message(b"b" * 2000))
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.RESOURCE_EXHAUSTED
    assert client.take_message(call) == (False, b"a" * 500)
    assert client.take_message(call) is None


def test_receive_limit_is_checked_on_the_prefix_and_data_keeps_being_acked() -> None:
    client = ClientGrpcConnection(
        max_receive_message_length=1000, stream_window=65535, connection_window=65535
    )
    peer = MemoryServer(client)
    call = make_call()
    sid = peer.start(call)
    peer.headers(sid)
    framed = wire.encode_message(b"z" * 50_000)
    start = peer.conn.outbound_flow_control_window
    peer.conn.send_data(sid, framed[:5])  # the prefix alone decides
    peer.to_client()
    assert call.status is not None
    assert call.status.code is StatusCode.RESOURCE_EXHAUSTED
    assert call.status.details == "grpc: received message larger than max (50000 vs. 1000)"
    assert call.response is not None and call.response.decoder.buffered == 0
    # The server sends the rest before it sees the RST: that data is still credited back.
    peer.conn.send_data(sid, framed[5:40_000])
    peer.to_client()
    peer.to_server()
    assert peer.resets[sid] == h2.errors.ErrorCodes.CANCEL
    assert peer.conn.outbound_flow_control_window == start


def test_window_negative_after_settings_then_recovers() -> None:
    peer = MemoryServer()
    call = make_call(b"w" * 1_000_000)
    peer.client.start_call(call)
    peer.to_server()
    sid = call.stream_id
    # The server had already received ~ its 65,535 default window... lower the window now.
    queued_before = call.request.queued_bytes
    assert not call.request_complete
    peer.conn.update_settings({INITIAL_WINDOW_SIZE: 0})
    peer.to_client()
    peer.to_server()
    assert peer.client.conn.local_flow_control_window(sid) <= 0
    assert not peer.client.window_available(call)
    assert not peer.client.write_request(call)
    assert call.request.queued_bytes == queued_before
    # Raising the window again moves every stream's window without a WindowUpdated event.
    peer.conn.update_settings({INITIAL_WINDOW_SIZE: 8 * 1024 * 1024})
    peer.to_client()
    for _ in range(100):
        if peer.client.window_available(call):
            peer.client.write_request(call)
        peer.pump()
        if call.request_complete:
            break
    assert call.request_complete
    assert len(peer.bodies[sid]) == 1_000_005


# -- connection ------------------------------------------------------------------------------


def test_stream_limit_is_100_until_settings_then_the_peers_value() -> None:
    peer = MemoryServer(settings={MAX_CONCURRENT_STREAMS: 1}, handshake=False)
    client = peer.client
    assert client.stream_limit == 100
    peer.pump()
    assert client.settings_received
    assert client.stream_limit == 1
    first = make_call()
    assert client.can_start_call()
    sid = peer.start(first)
    assert not client.can_start_call()  # the second call must wait
    peer.respond(sid, b"r")
    peer.to_server()
    assert client.can_start_call()


def test_goaway_lets_calls_below_finish_and_fails_those_above_as_retryable() -> None:
    peer = MemoryServer()
    below, above = make_call(), make_call()
    sid_below = peer.start(below)
    sid_above = peer.start(above)
    assert (sid_below, sid_above) == (1, 3)
    peer.conn.close_connection(last_stream_id=sid_below)
    reopen_after_goaway(peer.conn)  # the server may still answer stream 1
    peer.conn.ping(b"\x01\x06\x01\x08\x00\x03\x03\x09")  # GOAWAY + PING in one chunk
    events = peer.to_client()
    assert any(isinstance(e, GoAwayReceived) and e.last_stream_id == 1 for e in events)
    assert above.status is not None and above.status.code is StatusCode.UNAVAILABLE
    assert above.retryable
    assert not below.done
    assert not peer.client.can_start_call()
    assert peer.client.draining
    # The PING after the GOAWAY was not lost: its ACK is queued.
    assert b"\x01\x06\x01\x08\x00\x03\x03\x09" in peer.client.data_to_send()
    peer.respond(sid_below, b"done")
    assert below.status is not None and below.status.code is StatusCode.OK
    assert not below.retryable


def test_graceful_two_step_goaway() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    peer.conn.close_connection(last_stream_id=2**31 - 1)
    reopen_after_goaway(peer.conn)
    peer.to_client()
    assert peer.client.goaway_last_stream_id == 2**31 - 1
    peer.conn.close_connection(last_stream_id=sid)
    reopen_after_goaway(peer.conn)
    peer.to_client()
    assert peer.client.goaway_last_stream_id == sid
    assert not call.done
    peer.respond(sid, b"ok")
    assert call.status is not None and call.status.code is StatusCode.OK


def test_header_list_larger_than_the_peer_allows_fails_before_sending() -> None:
    peer = MemoryServer(settings={MAX_HEADER_LIST_SIZE: 300})
    big = make_call(metadata=[(b"x-big", b"v" * 400)])
    assert header_list_size(big.headers) > 300
    events = peer.client.start_call(big)
    assert [type(e) for e in events] == [CallFinished]
    assert big.status is not None and big.status.code is StatusCode.INTERNAL
    assert "header list size" in big.status.details
    assert big.stream_id == 0
    assert peer.to_server() == []


def test_pings_are_answered() -> None:
    peer = MemoryServer()
    peer.conn.ping(b"12345678")
    peer.to_client()
    events = peer.to_server()
    assert any(type(e).__name__ == "PingAckReceived" for e in events)


def test_connection_lost_fails_every_call_unavailable() -> None:
    peer = MemoryServer()
    calls = [make_call(), make_call()]
    for call in calls:
        peer.start(call)
    events = peer.client.connection_lost("connection closed before the response was complete")
    assert isinstance(events[-1], ConnectionFailed)
    for call in calls:
        assert call.status is not None
        assert call.status.code is StatusCode.UNAVAILABLE
        assert not call.retryable
    assert not peer.client.can_start_call()


@pytest.mark.parametrize(
    "garbage",
    [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\x00\x00\x00\x01\x04\x00\x00\x00\x01"],
)
def test_garbage_from_the_server_fails_the_connection(garbage: bytes) -> None:
    client = ClientGrpcConnection()
    client.initiate()
    call = make_call()
    client.start_call(call)
    events = client.receive_data(garbage)
    assert any(isinstance(e, ConnectionFailed) for e in events)
    assert call.status is not None and call.status.code is StatusCode.UNAVAILABLE
    assert "error reading server preface" in call.status.details


def test_compressed_response_is_kept_compressed_for_the_channel() -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    body = zlib.compress(b"q" * 1000)
    peer.headers(sid, [(b"grpc-encoding", b"deflate")])
    peer.message(sid, body, compressed=True)
    peer.trailers(sid)
    peer.to_client()
    assert call.status is not None and call.status.code is StatusCode.OK
    assert call.response_encoding == "deflate"
    assert call.messages == [(True, body)]


def test_a_frame_longer_than_our_max_frame_size_fails_at_its_header() -> None:
    peer = MemoryServer()
    call = make_call()
    peer.start(call)
    # Only the 9-byte header of a 2 MiB DATA frame: h2 would wait for the whole body.
    header = (2 << 20).to_bytes(3, "big") + b"\x00\x00" + call.stream_id.to_bytes(4, "big")
    events = peer.to_client(header)
    assert any(isinstance(e, ConnectionFailed) for e in events)
    assert call.status is not None and call.status.code is StatusCode.UNAVAILABLE
    assert "frame too large" in call.status.details
    assert b"\x00\x00\x08\x07" in peer.client.data_to_send()[:4]  # a GOAWAY goes out


@pytest.mark.parametrize("where", ["headers", "trailers", "trailers-only"])
def test_response_headers_over_the_per_call_limit_are_internal(where: str) -> None:
    peer = MemoryServer()
    call = make_call()
    sid = peer.start(call)
    big = [(b"x-big", b"v" * 17_000)]
    if where == "headers":
        peer.headers(sid, big)
    elif where == "trailers":
        peer.headers(sid)
        peer.message(sid, b"m")
        peer.trailers(sid, 0, None, big)
    else:
        peer.trailers_only(sid, 0, None, big)
    peer.to_client()
    assert call.status is not None
    assert call.status.code is StatusCode.INTERNAL
    assert "peer header list size exceeded limit" in call.status.details
    assert peer.client.failure is None  # only the call fails, not the connection


def test_per_call_header_limit_can_be_lifted() -> None:
    peer = MemoryServer(ClientGrpcConnection(max_header_list_size=None))
    call = make_call()
    sid = peer.start(call)
    peer.trailers_only(sid, 5, None, [(b"x-big", b"v" * 30_000)])
    assert call.status is not None and call.status.code is StatusCode.NOT_FOUND


def test_loss_before_the_server_preface_marks_calls_never_started() -> None:
    client = ClientGrpcConnection()
    client.initiate()
    call = make_call()
    client.start_call(call)
    client.connection_lost('connection error: desc = "error reading server preface: EOF"')
    assert call.status is not None and call.status.code is StatusCode.UNAVAILABLE
    assert call.retryable  # grpc-go would not have sent it before the handshake


def test_loss_after_the_server_preface_is_not_retryable() -> None:
    peer = MemoryServer()
    call = make_call()
    peer.start(call)
    peer.client.connection_lost("connection closed before the response was complete")
    assert call.status is not None and not call.retryable


def test_a_non_http2_answer_is_not_retryable() -> None:
    client = ClientGrpcConnection()
    client.initiate()
    call = make_call()
    client.start_call(call)
    client.receive_data(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    assert call.status is not None and not call.retryable


def test_exhausted_stream_ids_end_the_call_retryable_and_drain_the_connection() -> None:
    """RFC 9113 §5.1.1: a client that runs out of stream identifiers opens a new connection;
    the call never started here, so it may be retried there."""
    peer = MemoryServer()
    assert peer.start(make_call(b"a")) == 1
    peer.client.conn.next_stream_id = 2**31 + 1  # as after 2^30 calls
    call = make_call(b"b")
    events = peer.client.start_call(call)
    assert [type(event) for event in events] == [CallFinished]
    assert call.status is not None and call.status.code == StatusCode.UNAVAILABLE
    assert call.retryable and call.stream_id == 0
    assert peer.client.draining and not peer.client.can_start_call()
    assert peer.client.data_to_send() == b""
