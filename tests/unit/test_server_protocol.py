"""The sans-IO server state machine (minigrpc.protocol.server_protocol) against a real h2 client,
in memory.

No sockets and no threads: bytes move between an h2 client connection and a
:class:`ServerGrpcConnection` by hand, so every frame the server sends is checked exactly
(the rules of gRPC's PROTOCOL-HTTP2.md and RFC 9113, and grpc-go's behaviour).
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import h2.utilities
import hpack
import hyperframe.frame
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minigrpc.protocol import wire
from minigrpc.protocol.enums import StatusCode
from minigrpc.protocol.server_protocol import (
    DRAIN_PING_PAYLOAD,
    CallStarted,
    CallTerminated,
    RequestEnded,
    RequestMessage,
    RequestReady,
    ServerGrpcConnection,
    ServerSettings,
)
from tests.support.strategies import APPLICATION_METADATA


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pair:
    """An h2 client and a ServerGrpcConnection wired back to back."""

    def __init__(
        self,
        settings: Optional[ServerSettings] = None,
        window: int = 65535,
        shape_from_handler: bool = False,
    ) -> None:
        self.clock = FakeClock()
        self.server = ServerGrpcConnection(
            settings, clock=self.clock, shape_from_handler=shape_from_handler
        )
        self.server.initiate()
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.client.initiate_connection()
        if window != 65535:
            self.client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.client_events: List[Any] = []
        self.auto_ack = True
        self.raw_from_server = bytearray()
        self.settle()

    def to_server(self) -> List[Any]:
        data = self.client.data_to_send()
        return self.server.receive_data(data) if data else []

    def to_client(self) -> List[Any]:
        data = self.server.data_to_send()
        self.raw_from_server += data
        events = self.client.receive_data(data) if data else []
        for event in events:
            if isinstance(event, h2.events.DataReceived) and self.auto_ack:
                # Ack as data arrives, like a real client, so windows reopen (RFC 9113 §6.9).
                self.client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        self.client_events.extend(events)
        return events

    def settle(self) -> List[Any]:
        """Exchange bytes until both sides are quiet; return the server's call events."""
        server_events: List[Any] = []
        for _ in range(50):
            got = self.to_server()
            server_events.extend(got)
            client = self.to_client()
            if not got and not client and not self.client.data_to_send(0):
                break
        return server_events

    def request(
        self,
        path: str = "/svc/Method",
        body: Optional[bytes] = wire.encode_message(b"hello"),
        extra: List[Tuple[bytes, bytes]] = (),  # type: ignore[assignment]
        method: bytes = b"POST",
        content_type: Optional[bytes] = b"application/grpc",
        end: bool = True,
    ) -> int:
        stream_id = self.client.get_next_available_stream_id()
        headers = [
            (b":method", method),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"localhost"),
        ]
        if content_type is not None:
            headers.append((b"content-type", content_type))
        headers.extend(extra)
        self.client.send_headers(stream_id, headers, end_stream=body is None and end)
        if body is not None:
            self.client.send_data(stream_id, body, end_stream=end)
        return stream_id

    def response(self, stream_id: int) -> Dict[str, Any]:
        """Headers, trailers, body, end and reset seen by the client for one stream."""
        out: Dict[str, Any] = {
            "headers": [],
            "trailers": [],
            "body": b"",
            "ended": False,
            "reset": None,
        }
        for event in self.client_events:
            if getattr(event, "stream_id", None) != stream_id:
                continue
            if isinstance(event, h2.events.ResponseReceived):
                out["headers"] = dict(event.headers)
            elif isinstance(event, h2.events.TrailersReceived):
                out["trailers"] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                out["body"] += event.data
            elif isinstance(event, h2.events.StreamEnded):
                out["ended"] = True
            elif isinstance(event, h2.events.StreamReset):
                out["reset"] = event.error_code
        return out

    def frames_from_server(self) -> List[Any]:
        """Parse every frame the server wrote (preface-free), with hyperframe."""
        return _parse(bytes(self.raw_from_server))


def status_of(response: Dict[str, Any]) -> Tuple[int, str]:
    fields = response["trailers"] or response["headers"]
    return int(fields[b"grpc-status"]), wire.percent_decode(fields.get(b"grpc-message", b""))


# -- connection setup ----------------------------------------------------------------------------


def test_settings_advertise_limits_and_large_windows() -> None:
    """SETTINGS: MAX_CONCURRENT_STREAMS 100, MAX_HEADER_LIST_SIZE 16 KiB, 4 MiB windows
    (RFC 9113 §6.5.2)."""
    pair = Pair()
    remote = pair.client.remote_settings
    assert remote.max_concurrent_streams == 100
    assert remote.max_header_list_size == 16384
    assert remote.initial_window_size == 4 * 1024 * 1024
    assert remote.max_frame_size == 1024 * 1024
    assert pair.client.outbound_flow_control_window >= 16 * 1024 * 1024


def test_ping_is_answered() -> None:
    pair = Pair()
    pair.client.ping(b"12345678")
    pair.settle()
    assert any(
        isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"12345678"
        for e in pair.client_events
    )


def test_garbage_preface_closes_the_connection() -> None:
    server = ServerGrpcConnection()
    server.initiate()
    events = server.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert events == [] and server.closed


# -- a normal call -------------------------------------------------------------------------------


def test_unary_call_round_trip() -> None:
    pair = Pair()
    stream_id = pair.request(
        extra=[(b"x-custom", b"v"), (b"grpc-timeout", b"1S"), (b"te", b"trailers")]
    )
    events = pair.settle()
    started, ready = events
    assert isinstance(started, CallStarted) and isinstance(ready, RequestReady)
    assert started.method == "/svc/Method"
    assert ("x-custom", "v") in started.metadata
    assert started.deadline == pytest.approx(1001.0)
    assert ready.message == b"hello" and ready.encoding is None
    assert pair.server.finish_call(
        stream_id, StatusCode.OK, message=b"world", trailing_metadata=[(b"x-t", b"1")]
    )
    pair.settle()
    response = pair.response(stream_id)
    assert response["headers"][b":status"] == b"200"
    assert response["headers"][b"content-type"] == b"application/grpc"
    assert response["headers"][b"grpc-accept-encoding"] == b"identity,deflate,gzip"
    assert response["body"] == wire.encode_message(b"world")
    assert response["trailers"] == {b"grpc-status": b"0", b"grpc-message": b"", b"x-t": b"1"}
    assert response["ended"] and response["reset"] is None
    assert pair.server.active_calls == 0


def test_missing_te_is_accepted() -> None:
    pair = Pair()
    pair.request()  # no te header at all
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]


def test_message_split_across_frames_and_prefix() -> None:
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(
        stream_id,
        [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/a/b"),
            (b":authority", b"x"),
            (b"content-type", b"application/grpc+proto"),
        ],
    )
    framed = wire.encode_message(b"x" * 1000)
    for piece in (framed[:2], framed[2:7], framed[7:500], framed[500:]):
        pair.client.send_data(stream_id, piece)
    pair.client.end_stream(stream_id)
    events = pair.settle()
    assert isinstance(events[-1], RequestReady) and events[-1].message == b"x" * 1000


def test_trailers_only_reject_for_unknown_method_resets_open_request() -> None:
    """Early server closure: trailers-only, then RST_STREAM(NO_ERROR) while still sending
    (RFC 9113 §8.1)."""
    pair = Pair()
    stream_id = pair.request(end=False)
    events = pair.settle()
    assert [type(e) for e in events] == [CallStarted]
    pair.server.reject_call(stream_id, StatusCode.UNIMPLEMENTED, "Method not found!")
    pair.settle()
    response = pair.response(stream_id)
    assert status_of(response) == (12, "Method not found!")
    assert response["headers"][b":status"] == b"200" and not response["trailers"]
    assert response["reset"] == h2.errors.ErrorCodes.NO_ERROR
    assert pair.server.active_calls == 0


def test_error_status_message_is_percent_encoded() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    text = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
    pair.server.finish_call(stream_id, StatusCode.UNKNOWN, text)
    pair.settle()
    response = pair.response(stream_id)
    assert response["headers"][b"grpc-message"] == (
        b"%09%0Atest with whitespace%0D%0Aand Unicode BMP %E2%98%BA and non-BMP %F0%9F%98%88%09%0A"
    )
    assert status_of(response) == (2, text)


def test_initial_metadata_then_error_status_uses_trailers() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    assert pair.server.send_initial_metadata(stream_id, [(b"x-initial", b"1")])
    assert not pair.server.send_initial_metadata(stream_id, [])  # only once
    pair.server.finish_call(stream_id, StatusCode.NOT_FOUND, "nope")
    pair.settle()
    response = pair.response(stream_id)
    assert response["headers"][b"x-initial"] == b"1"
    assert status_of(response) == (5, "nope") and response["trailers"]


# -- request validation (as grpc-go's server does it)
# --------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "http_status", "grpc_status", "message_part"),
    [
        ({"method": b"GET", "body": None}, 405, 13, ':method "GET" which should be POST'),
        ({"content_type": b"text/plain"}, 415, 3, 'content-type "text/plain"'),
        ({"content_type": None}, 415, 3, "content-type"),
        ({"content_type": b"application/grpcfoo"}, 415, 3, "content-type"),
        ({"extra": [(b"grpc-timeout", b"1x")]}, 400, 13, "malformed grpc-timeout"),
        ({"extra": [(b"x-md-bin", b"!!not base64!!")]}, 400, 13,
         'malformed binary metadata "!!not base64!!" in header "x-md-bin"'),
        ({"extra": [(b"x-md-bin", b"AAEC,%%")], "end": False}, 400, 13, "malformed binary"),
        ({"extra": [(b"grpc-timeout", b"0n")]}, 200, 4, "Deadline Exceeded"),
        ({"extra": [(b"grpc-encoding", b"snappy")]}, 200, 12, 'grpc-encoding "snappy"'),
    ],
)
def test_rejected_requests(
    kwargs: Dict[str, Any], http_status: int, grpc_status: int, message_part: str
) -> None:
    pair = Pair()
    stream_id = pair.request(**kwargs)
    assert pair.settle() == []
    response = pair.response(stream_id)
    assert response["headers"][b":status"] == str(http_status).encode()
    assert response["headers"][b"content-type"] == b"application/grpc"
    code, message = status_of(response)
    assert code == grpc_status and message_part in message
    if grpc_status == 12:
        assert response["headers"][b"grpc-accept-encoding"] == b"identity,deflate,gzip"
    # The connection survives every rejection.
    again = pair.request()
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]
    assert again > stream_id


def test_open_request_that_is_not_grpc_is_answered_at_its_end() -> None:
    """A request that is not gRPC (415) and still open gets no answer until its END_STREAM: its
    DATA is acknowledged and dropped, it counts as an open stream, and the answer then is the
    Trailers-Only rejection without a reset (the request is complete)."""
    pair = Pair(ServerSettings(max_concurrent_streams=1))
    stream_id = pair.request(content_type=b"text/plain", body=b"x" * 70_000, end=False)
    assert pair.settle() == []
    assert pair.response(stream_id) == {
        "headers": [], "trailers": [], "body": b"", "ended": False, "reset": None
    }
    # Its 70,000 bytes were acknowledged: more than one initial window went through.
    assert pair.client.outbound_flow_control_window >= 65_535
    # It holds the only stream slot: another request is refused.
    pair.client.remote_settings.acknowledge()
    pair.client.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 100
    pair.client.remote_settings.acknowledge()
    refused = pair.request()
    assert pair.settle() == []
    assert pair.response(refused)["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM
    pair.client.send_data(stream_id, b"", end_stream=True)
    assert pair.settle() == []
    response = pair.response(stream_id)
    assert response["headers"][b":status"] == b"415" and response["ended"]
    assert status_of(response)[0] == 3 and response["reset"] is None
    # The slot is free again.
    pair.request()
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]


@pytest.mark.parametrize("split", [False, True])
def test_fault_in_an_open_request_that_is_not_grpc_is_answered_as_the_fault(split: bool) -> None:
    """A second HEADERS without END_STREAM (RFC 9113 §8.1) after a request that is not gRPC is
    a PROTOCOL_ERROR whether or not both arrive in one read: no early answer hides it."""
    pair = Pair()
    stream_id = pair.request(method=b"GET", body=None, end=False)
    if split:
        assert pair.settle() == []
        assert pair.response(stream_id)["headers"] == []
    # h2 will not send a second HEADERS without END_STREAM itself: write the frame by hand.
    block = pair.client.encoder.encode([(b"x-late", b"1")])
    frame = hyperframe.frame.HeadersFrame(stream_id, data=block, flags=["END_HEADERS"])
    pair.server.receive_data(pair.client.data_to_send() + frame.serialize())
    codes = {
        type(f).__name__: getattr(f, "error_code", None)
        for f in _parse(pair.server.data_to_send())
    }
    protocol_error = h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert protocol_error in (codes.get("RstStreamFrame"), codes.get("GoAwayFrame")), codes
    assert "HeadersFrame" not in codes, codes


def test_malformed_bin_metadata_is_one_headers_then_rst_no_error() -> None:
    """As grpc-go's server does: 400 + INTERNAL in one HEADERS with END_STREAM, then
    RST_STREAM(NO_ERROR)
    because the request is still open; no call reaches the socket layer."""
    pair = Pair()
    stream_id = pair.request(extra=[(b"x-trace-bin", b"not*base64")], end=False)
    assert pair.settle() == []
    response = pair.response(stream_id)
    assert response["headers"][b":status"] == b"400" and response["ended"]
    assert status_of(response)[0] == StatusCode.INTERNAL.number
    assert response["reset"] == h2.errors.ErrorCodes.NO_ERROR
    frames = pair.frames_from_server()
    kinds = [type(f).__name__ for f in frames if getattr(f, "stream_id", 0) == stream_id]
    assert kinds == ["HeadersFrame", "RstStreamFrame"]


def test_valid_bin_metadata_padded_unpadded_and_joined() -> None:
    pair = Pair()
    pair.request(extra=[(b"x-a-bin", b"AAEC"), (b"x-b-bin", b"AQ=="), (b"x-c-bin", b"AQ,Ag")])
    started = pair.settle()[0]
    assert isinstance(started, CallStarted)
    assert started.metadata == (
        ("x-a-bin", b"\x00\x01\x02"),
        ("x-b-bin", b"\x01"),
        ("x-c-bin", b"\x01"),
        ("x-c-bin", b"\x02"),
    )


def test_oversized_headers_fail_the_call_not_the_connection() -> None:
    pair = Pair()
    stream_id = pair.request(extra=[(b"x-big", b"v" * 20000)])
    assert pair.settle() == []
    response = pair.response(stream_id)
    assert response["headers"][b":status"] == b"431"
    assert status_of(response)[0] == StatusCode.RESOURCE_EXHAUSTED.number
    pair.request()
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]


def test_receive_limit_is_checked_on_the_prefix() -> None:
    """RESOURCE_EXHAUSTED as soon as the 5-byte prefix announces too much (doc/statuscodes.md,
    RESOURCE_EXHAUSTED)."""
    pair = Pair(ServerSettings(max_receive_message_length=1000))
    stream_id = pair.request(body=struct.pack(">BI", 0, 1001), end=False)
    events = pair.settle()
    assert [type(e) for e in events] == [CallStarted, CallTerminated]
    assert events[1].code is StatusCode.RESOURCE_EXHAUSTED
    response = pair.response(stream_id)
    assert status_of(response) == (8, "grpc: received message larger than max (1001 vs. 1000)")
    assert response["reset"] == h2.errors.ErrorCodes.NO_ERROR


@pytest.mark.parametrize(
    ("body", "extra", "code", "part"),
    [
        (b"", [], 13, "exactly one message, got 0 messages"),
        (wire.encode_message(b"a") + wire.encode_message(b"b"), [], 13, "more than one"),
        (wire.encode_message(b"abc")[:6], [], 13, "partial message"),
        (b"\x02\x00\x00\x00\x00", [], 13, "flag must be 0 or 1"),
        (wire.encode_message(b"abc", compressed=True), [], 13, "compressed flag set"),
        (
            wire.encode_message(b"not gzip", compressed=True),
            [(b"grpc-encoding", b"gzip")],
            13,
            "decompress",
        ),
        (
            wire.encode_message(wire.compress("gzip", bytes(5000)), compressed=True),
            [(b"grpc-encoding", b"gzip")],
            8,
            "larger than max",
        ),
    ],
)
def test_bad_request_bodies(
    body: bytes, extra: List[Tuple[bytes, bytes]], code: int, part: str
) -> None:
    pair = Pair(ServerSettings(max_receive_message_length=4096))
    stream_id = pair.request(body=body, extra=extra)
    events = pair.settle()
    assert isinstance(events[0], CallStarted)
    assert isinstance(events[-1], CallTerminated)
    got_code, message = status_of(pair.response(stream_id))
    assert got_code == code and part in message


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_request_is_decompressed(encoding: str) -> None:
    pair = Pair()
    payload = b"compress me " * 100
    pair.request(
        body=wire.encode_message(wire.compress(encoding, payload), compressed=True),
        extra=[(b"grpc-encoding", encoding.encode())],
    )
    ready = pair.settle()[-1]
    assert isinstance(ready, RequestReady)
    assert ready.message == payload and ready.encoding == encoding


def test_identity_encoding_with_plain_message() -> None:
    pair = Pair()
    pair.request(extra=[(b"grpc-encoding", b"identity")])
    ready = pair.settle()[-1]
    assert isinstance(ready, RequestReady) and ready.encoding is None


@pytest.mark.parametrize(("accept", "compressed"), [(b"identity,gzip", True), (b"identity", False)])
def test_response_compressed_only_if_client_accepts(accept: bytes, compressed: bool) -> None:
    pair = Pair()
    stream_id = pair.request(extra=[(b"grpc-accept-encoding", accept)])
    pair.settle()
    pair.server.finish_call(stream_id, StatusCode.OK, message=bytes(1000), encoding="gzip")
    pair.settle()
    response = pair.response(stream_id)
    flag, payload = wire.MessageDecoder(None).feed(response["body"])[0]
    assert flag is compressed
    if compressed:
        assert response["headers"][b"grpc-encoding"] == b"gzip"
        assert wire.decompress("gzip", payload, None) == bytes(1000)
    else:
        assert b"grpc-encoding" not in response["headers"] and payload == bytes(1000)


def test_send_limit_turns_into_resource_exhausted() -> None:
    pair = Pair(ServerSettings(max_send_message_length=10))
    stream_id = pair.request()
    pair.settle()
    pair.server.finish_call(stream_id, StatusCode.OK, message=bytes(11))
    pair.settle()
    assert status_of(pair.response(stream_id)) == (
        8,
        "grpc: trying to send message larger than max (11 vs. 10)",
    )


# -- streams and flow control ----------------------------------------------------------------------


def test_excess_streams_are_refused_not_fatal() -> None:
    """RFC 9113 §5.1.2: REFUSED_STREAM for the stream over the limit; the connection lives on."""
    pair = Pair(ServerSettings(max_concurrent_streams=2))
    first = pair.request()
    second = pair.request()
    pair.settle()
    # The client has learned the limit of 2; make it believe there is none, as a racing client.
    pair.client.remote_settings.acknowledge()
    pair.client.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 100
    pair.client.remote_settings.acknowledge()
    third = pair.request()
    assert pair.settle() == []
    assert pair.response(third)["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM
    pair.server.finish_call(first, StatusCode.OK, message=b"")
    pair.server.finish_call(second, StatusCode.OK, message=b"")
    pair.settle()
    pair.request()
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]


def test_large_response_waits_for_window_and_resumes() -> None:
    """A response larger than the client's window is sent as WINDOW_UPDATEs arrive
    (RFC 9113 §6.9)."""
    pair = Pair(window=65535)
    stream_id = pair.request()
    pair.settle()
    payload = bytes(range(256)) * 1200  # 307,200 bytes, well over 65,535
    pair.auto_ack = False
    pair.server.finish_call(stream_id, StatusCode.OK, message=payload)
    pair.settle()
    assert not pair.response(stream_id)["ended"]  # stuck on the 65,535-byte window
    received = sum(
        e.flow_controlled_length
        for e in pair.client_events
        if isinstance(e, h2.events.DataReceived)
    )
    assert received == 65535
    pair.auto_ack = True
    pair.client.acknowledge_received_data(received, stream_id)
    pair.settle()
    body = b"".join(
        frame.data
        for frame in pair.frames_from_server()
        if isinstance(frame, hyperframe.frame.DataFrame) and frame.stream_id == stream_id
    )
    assert body == wire.encode_message(payload)
    assert pair.response(stream_id)["trailers"][b"grpc-status"] == b"0"


def test_output_room_bounds_buffered_data() -> None:
    """With no output room, no DATA is handed to h2; more room resumes the response."""
    pair = Pair(window=4 * 1024 * 1024)
    stream_id = pair.request()
    pair.settle()
    pair.server.set_output_room(1000)
    pair.server.finish_call(stream_id, StatusCode.OK, message=bytes(100_000))
    pair.to_client()
    data_bytes = sum(
        len(f.data) for f in pair.frames_from_server() if isinstance(f, hyperframe.frame.DataFrame)
    )
    assert data_bytes == 1000 and pair.server.starved
    pair.server.set_output_room(None)
    pair.settle()
    assert pair.response(stream_id)["body"] == wire.encode_message(bytes(100_000))
    assert not pair.server.starved


def test_large_request_is_acknowledged_as_it_arrives() -> None:
    """A request bigger than the default 64 KiB window does not deadlock (grpclib #14)."""
    pair = Pair()
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(
        stream_id,
        [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/a/b"),
            (b":authority", b"x"),
            (b"content-type", b"application/grpc"),
        ],
    )
    framed = wire.encode_message(bytes(3 * 1024 * 1024))
    offset = 0
    events: List[Any] = []
    while offset < len(framed):
        size = min(
            pair.client.local_flow_control_window(stream_id),
            pair.client.max_outbound_frame_size,
            len(framed) - offset,
        )
        assert size > 0, "the server stopped acknowledging data"
        pair.client.send_data(stream_id, framed[offset : offset + size])
        offset += size
        events += pair.settle()
    pair.client.end_stream(stream_id)
    events += pair.settle()
    assert isinstance(events[-1], RequestReady) and len(events[-1].message) == 3 * 1024 * 1024


# -- cancellation, deadlines, shutdown -------------------------------------------------------------


def test_client_reset_terminates_the_call() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    pair.client.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
    events = pair.settle()
    assert len(events) == 1 and isinstance(events[0], CallTerminated)
    assert events[0].code is StatusCode.CANCELLED
    assert not pair.server.finish_call(stream_id, StatusCode.OK, message=b"late")


def test_expire_sends_deadline_exceeded() -> None:
    pair = Pair()
    stream_id = pair.request(extra=[(b"grpc-timeout", b"100m")])
    pair.settle()
    events = pair.server.expire_call(stream_id)
    assert [e.code for e in events] == [StatusCode.DEADLINE_EXCEEDED]
    pair.settle()
    assert status_of(pair.response(stream_id)) == (4, "Deadline Exceeded")
    assert pair.server.expire_call(stream_id) == []


def test_cancel_call_resets_with_cancel() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    assert [e.code for e in pair.server.cancel_call(stream_id)] == [StatusCode.CANCELLED]
    pair.settle()
    assert pair.response(stream_id)["reset"] == h2.errors.ErrorCodes.CANCEL


def test_request_progress_tracks_an_incomplete_request() -> None:
    """What the socket layer's stalled-request timeout reads (slowloris)."""
    pair = Pair()
    stream_id = pair.request(body=wire.encode_message(b"x" * 100)[:20], end=False)
    pair.settle()
    assert pair.server.request_progress(stream_id) == 1000.0
    pair.clock.now = 1007.0
    pair.client.send_data(stream_id, b"y" * 10)
    pair.settle()
    assert pair.server.request_progress(stream_id) == 1007.0
    pair.clock.now = 1040.0
    events = pair.server.cancel_call(stream_id, "the request made no progress for 30 s")
    assert [(e.code, e.details) for e in events] == [
        (StatusCode.CANCELLED, "the request made no progress for 30 s")
    ]
    pair.settle()
    assert pair.response(stream_id)["reset"] == h2.errors.ErrorCodes.CANCEL
    assert pair.server.request_progress(stream_id) is None


def test_request_progress_is_none_once_the_request_is_complete() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    assert pair.server.request_progress(stream_id) is None
    assert pair.server.request_progress(999) is None


def test_frame_above_max_frame_size_is_a_connection_error_at_its_header() -> None:
    """RFC 9113 §4.2: GOAWAY(FRAME_SIZE_ERROR) from the 9-byte header, before any body byte."""
    pair = Pair()
    stream_id = pair.request(end=False)
    pair.settle()
    header = struct.pack(">I", 2 * 1024 * 1024)[1:] + b"\x00\x00" + struct.pack(">I", stream_id)
    events = pair.server.receive_data(header)
    assert [(type(e), e.code) for e in events] == [(CallTerminated, StatusCode.CANCELLED)]
    assert pair.server.closed and "frame too large" in pair.server.close_reason
    goaway = [
        f for f in _parse(pair.server.data_to_send()) if isinstance(f, hyperframe.frame.GoAwayFrame)
    ]
    assert goaway and goaway[0].error_code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
    assert pair.server.receive_data(b"\0" * 100) == []  # nothing more is read


def test_frame_at_max_frame_size_is_accepted() -> None:
    pair = Pair(ServerSettings(max_frame_size=16384))
    pair.client.max_outbound_frame_size = 16384
    stream_id = pair.request(body=wire.encode_message(b"z" * (16384 - 5)))
    events = pair.settle()
    assert [type(e) for e in events] == [CallStarted, RequestReady]
    assert not pair.server.closed and stream_id == 1


def test_client_goaway_then_more_frames_in_one_read_keeps_earlier_events() -> None:
    """The input is cut after a client's GOAWAY (h2 stops there): the call before it is seen, then
    ended."""
    pair = Pair()
    pair.request()
    pair.client.close_connection()
    data = pair.client.data_to_send()
    data += hyperframe.frame.PingFrame(0, opaque_data=b"12345678").serialize()
    events = pair.server.receive_data(data)
    assert [type(e) for e in events] == [CallStarted, RequestReady, CallTerminated]
    assert pair.server.closed and pair.server.close_reason == "the client sent GOAWAY"


def test_graceful_drain_two_goaways_then_refuse() -> None:
    """Graceful shutdown (PROTOCOL-HTTP2.md, "GOAWAY Frame"): GOAWAY(2^31-1)+PING, on the ACK
    GOAWAY(last id); in-flight calls still finish."""
    pair = Pair()
    in_flight = pair.request()
    pair.settle()
    pair.server.start_drain()
    data = pair.server.data_to_send()
    frames = []
    rest = data
    while rest:
        frame, length = hyperframe.frame.Frame.parse_frame_header(rest[:9])
        frame.parse_body(memoryview(rest[9 : 9 + length]))
        frames.append(frame)
        rest = rest[9 + length :]
    assert isinstance(frames[0], hyperframe.frame.GoAwayFrame)
    assert frames[0].last_stream_id == 2**31 - 1 and frames[0].error_code == 0
    assert (
        isinstance(frames[1], hyperframe.frame.PingFrame)
        and frames[1].opaque_data == DRAIN_PING_PAYLOAD
    )
    # h2 as a client goes CLOSED on GOAWAY; acknowledge the ping with a hand-made frame instead.
    ack = hyperframe.frame.PingFrame(0, opaque_data=DRAIN_PING_PAYLOAD, flags=["ACK"])
    assert pair.server.receive_data(ack.serialize()) == []
    final = pair.server.data_to_send()
    goaway, length = hyperframe.frame.Frame.parse_frame_header(final[:9])
    goaway.parse_body(memoryview(final[9 : 9 + length]))
    assert isinstance(goaway, hyperframe.frame.GoAwayFrame) and goaway.last_stream_id == in_flight
    assert not pair.server.drained
    # The in-flight call still completes on the still-open h2 connection.
    assert pair.server.finish_call(in_flight, StatusCode.OK, message=b"done")
    assert pair.server.drained
    tail = pair.server.data_to_send()
    assert b"done" in tail


def test_streams_after_final_goaway_are_refused() -> None:
    pair = Pair()
    pair.request()
    pair.settle()
    pair.server.start_drain()
    pair.server.send_final_goaway()
    pair.server.data_to_send()
    # The client (which ignores our raw GOAWAY frames here) opens one more stream.
    late = pair.request()
    data = pair.client.data_to_send()
    assert pair.server.receive_data(data) == []
    out = pair.server.data_to_send()
    frame, length = hyperframe.frame.Frame.parse_frame_header(out[:9])
    frame.parse_body(memoryview(out[9 : 9 + length]))
    assert isinstance(frame, hyperframe.frame.RstStreamFrame)
    assert frame.stream_id == late and frame.error_code == h2.errors.ErrorCodes.REFUSED_STREAM


def test_abort_all_cancels_every_call() -> None:
    pair = Pair()
    first = pair.request()
    second = pair.request()
    pair.settle()
    events = pair.server.abort_all()
    assert sorted(e.stream_id for e in events) == [first, second]
    assert all(e.code is StatusCode.CANCELLED for e in events)  # what the handlers see
    assert pair.server.closed
    pair.to_client()
    # The clients get grpc-core's answer: UNAVAILABLE, which they may retry elsewhere.
    for stream_id in (first, second):
        headers = pair.response(stream_id)["headers"]  # Trailers-Only
        assert headers[b"grpc-status"] == b"14", headers
        assert headers[b"grpc-message"] == b"Cancelling all calls", headers


def test_connection_lost_cancels_calls() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    events = pair.server.connection_lost()
    assert [(e.stream_id, e.code) for e in events] == [(stream_id, StatusCode.CANCELLED)]


def test_client_goaway_ends_the_connection() -> None:
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    pair.client.close_connection()
    events = pair.to_server()
    assert [(e.stream_id, e.code) for e in events] == [(stream_id, StatusCode.CANCELLED)]
    assert pair.server.closed


def _client_header_limit(pair: Pair, limit: int) -> None:
    pair.client.update_settings({h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: limit})
    pair.settle()


def test_trailers_over_the_client_limit_become_internal() -> None:
    """h2 never checks the peer's MAX_HEADER_LIST_SIZE when sending; we do (RFC 9113 §6.5.2)."""
    pair = Pair()
    _client_header_limit(pair, 1024)
    stream_id = pair.request()
    pair.settle()
    pair.server.finish_call(
        stream_id, StatusCode.OK, message=b"x", trailing_metadata=[(b"x-big", b"v" * 2000)]
    )
    pair.settle()
    code, message = status_of(pair.response(stream_id))
    assert code == StatusCode.INTERNAL.number and "exceeds the client's limit of 1024" in message


def test_initial_metadata_over_the_client_limit_fails_the_call() -> None:
    pair = Pair()
    _client_header_limit(pair, 1024)
    stream_id = pair.request()
    pair.settle()
    pair.server.send_initial_metadata(stream_id, [(b"x-big", b"v" * 2000)])
    pair.server.finish_call(stream_id, StatusCode.OK, message=b"x")
    pair.settle()
    response = pair.response(stream_id)
    assert b"x-big" not in response["headers"]
    assert status_of(response)[0] == StatusCode.INTERNAL.number


def test_reserved_grpc_keys_are_not_call_metadata() -> None:
    pair = Pair()
    pair.request(
        extra=[(b"grpc-previous-rpc-attempts", b"1"), (b"user-agent", b"ua/1"), (b"x-a", b"b")]
    )
    started = pair.settle()[0]
    assert started.metadata == (("user-agent", "ua/1"), ("x-a", "b"))


def test_a_repeated_request_block_reads_as_it_did_and_a_changed_one_is_read_anew() -> None:
    """The server reuses what it read from the previous request block when the next one is the
    same (a client's calls usually are): identical blocks give identical calls, rejections stay
    rejections, and any change, a malformed block included, is checked in full again."""
    pair = Pair()
    extra = [(b"user-agent", b"ua/1"), (b"x-a", b"b")]
    first, second = pair.request(extra=extra), pair.request(extra=extra)
    started = [event for event in pair.settle() if isinstance(event, CallStarted)]
    assert [(e.stream_id, e.method, e.metadata, e.deadline, e.authority) for e in started] == [
        (stream_id, "/svc/Method", (("user-agent", "ua/1"), ("x-a", "b")), None, "localhost")
        for stream_id in (first, second)]
    changed = pair.request(extra=[(b"user-agent", b"ua/1"), (b"x-a", b"c")])
    assert [e.metadata for e in pair.settle() if isinstance(e, CallStarted)] == [
        (("user-agent", "ua/1"), ("x-a", "c"))]
    assert changed > second
    for _ in range(2):  # a rejected block is rejected every time it comes
        rejected = pair.request(extra=[(b"grpc-timeout", b"0n")])
        assert pair.settle() == []
        assert status_of(pair.response(rejected))[0] == StatusCode.DEADLINE_EXCEEDED.number
    # The same block again, but malformed (an upper-case name): reset, not served.
    pair.request(extra=extra)
    assert [type(e) for e in pair.settle()] == [CallStarted, RequestReady]
    pair.client.config.normalize_outbound_headers = False  # it would lower-case the name
    pair.client.config.validate_outbound_headers = False
    malformed = pair.request(extra=[(b"user-agent", b"ua/1"), (b"X-A", b"b")])
    assert pair.settle() == []
    assert pair.response(malformed)["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR


def test_a_block_that_differs_only_in_its_timeout_reads_with_its_own_timeout() -> None:
    """A client with deadlines sends the same block but for ``grpc-timeout``: each call gets
    its own deadline, and a timeout that is malformed, over or of another length is read (and
    rejected or accepted) as the rules say, however the previous block read."""
    pair = Pair()
    block = [(b"user-agent", b"ua/1"), (b"grpc-timeout", b"250m"), (b"x-a", b"b")]

    def with_timeout(value: bytes) -> List[Tuple[bytes, bytes]]:
        return [(name, value if name == b"grpc-timeout" else other) for name, other in block]

    pair.request(extra=block)
    for value in (b"125m", b"9999u", b"3S"):
        pair.request(extra=with_timeout(value))
    started = [event for event in pair.settle() if isinstance(event, CallStarted)]
    assert [e.deadline - pair.clock.now for e in started] == pytest.approx(
        [0.25, 0.125, 0.009999, 3.0])
    assert {e.metadata for e in started} == {(("user-agent", "ua/1"), ("x-a", "b"))}
    pair.request(extra=block)
    pair.settle()
    malformed = pair.request(extra=with_timeout(b"12x4"))
    assert pair.settle() == []
    assert status_of(pair.response(malformed)) == (
        StatusCode.INTERNAL.number, "malformed grpc-timeout: '12x4'")
    pair.request(extra=block)
    pair.settle()
    over = pair.request(extra=with_timeout(b"000n"))
    assert pair.settle() == []
    assert status_of(pair.response(over))[0] == StatusCode.DEADLINE_EXCEEDED.number


def test_repeated_response_blocks_decode_as_sent_across_table_changes() -> None:
    """The server sends a header list it sent before as the same bytes while its HPACK table is
    unchanged; every block must still decode to exactly what was sent, whatever came between:
    new fields evicting old ones, never-indexed fields, the client shrinking and growing the
    table (RFC 7541 §4.2, §6.3), and the same list after each of those."""
    pair = Pair()
    sizes = {7: 64, 15: 0, 23: 4096}
    for index in range(30):
        if index in sizes:
            pair.client.update_settings(
                {h2.settings.SettingCodes.HEADER_TABLE_SIZE: sizes[index]})
            pair.settle()
        stream_id = pair.request()
        pair.settle()
        code = StatusCode.OK if index % 3 else StatusCode.NOT_FOUND
        metadata = [(b"x-n", str(index % 4).encode())] if index % 5 == 0 else []
        if index % 7 == 3:
            metadata.append((b"authorization", b"secret"))  # sent never-indexed
        assert pair.server.finish_call(
            stream_id, code, "nope" if code is StatusCode.NOT_FOUND else "",
            message=b"m" if code is StatusCode.OK else None, trailing_metadata=metadata)
        pair.settle()
        response = pair.response(stream_id)
        expected = {b"grpc-status": str(code.number).encode(),
                    b"grpc-message": b"nope" if code is StatusCode.NOT_FOUND else b"",
                    **dict(metadata)}
        fields = response["trailers"] if code is StatusCode.OK else response["headers"]
        assert {k: v for k, v in fields.items()
                if k not in (b":status", b"content-type")} == expected, index
        if code is StatusCode.OK:
            assert response["headers"] == {
                b":status": b"200", b"content-type": b"application/grpc",
                b"grpc-accept-encoding": b"identity,deflate,gzip"}
        assert response["ended"], index
    # Coded without the dynamic table, the same answer is the same HEADERS bytes call after call.
    streams = []
    for _ in range(3):
        stream_id = pair.request()
        pair.settle()
        pair.server.finish_call(stream_id, StatusCode.OK, message=b"m")
        pair.settle()
        streams.append(stream_id)
    blocks = [[frame.data for frame in pair.frames_from_server()
               if isinstance(frame, hyperframe.frame.HeadersFrame) and frame.stream_id == sid]
              for sid in streams]
    assert len(blocks[2]) == 2
    assert blocks[0] == blocks[1] == blocks[2]


def test_continuation_flood_fails_fast_without_buffering() -> None:
    """CVE-2024-27316: a header block that never ends is cut off by size, not buffered whole."""
    pair = Pair()
    headers = hyperframe.frame.HeadersFrame(1, data=b"\x82", flags=["END_STREAM"])
    chunk = headers.serialize()
    continuation = hyperframe.frame.ContinuationFrame(1, data=b"\x00" * 16384).serialize()
    assert pair.server.receive_data(chunk) == []
    for _ in range(4):
        assert pair.server.receive_data(continuation) == []
        assert not pair.server.closed
    for _ in range(10):
        pair.server.receive_data(continuation)
    assert pair.server.closed and "CONTINUATION" in pair.server.close_reason
    goaway = [
        f for f in _parse(pair.server.data_to_send()) if isinstance(f, hyperframe.frame.GoAwayFrame)
    ]
    assert goaway and goaway[0].error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM


def _parse(data: bytes) -> List[Any]:
    """Every frame in ``data`` (preface-free), parsed with hyperframe."""
    frames = []
    while data:
        frame, length = hyperframe.frame.Frame.parse_frame_header(data[:9])
        frame.parse_body(memoryview(data[9 : 9 + length]))
        frames.append(frame)
        data = data[9 + length :]
    return frames


# -- fuzzing: whatever a client sends, receive_data() returns events or closes; it never raises ----

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SETTINGS = hyperframe.frame.SettingsFrame(0).serialize()


def _frame_bytes(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big")
        + bytes((kind, flags))
        + stream_id.to_bytes(4, "big")
        + payload
    )


_frames = st.builds(
    _frame_bytes,
    st.sampled_from([0, 1, 2, 3, 4, 6, 7, 8, 9, 0x20]),
    st.integers(0, 255),
    st.sampled_from([0, 1, 3, 5, 2**31 - 1]),
    st.binary(max_size=64),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_frames, max_size=8), st.integers(1, 64))
def test_fuzz_random_frames_never_raise(frames: List[bytes], chunk: int) -> None:
    server = ServerGrpcConnection()
    server.initiate()
    data = _PREFACE + _SETTINGS + b"".join(frames)
    for start in range(0, len(data), chunk):
        for event in server.receive_data(data[start : start + chunk]):
            assert isinstance(event, (CallStarted, RequestReady, CallTerminated))
    server.data_to_send()


_header_values = st.binary(max_size=20).filter(lambda v: b"\0" not in v)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    b":method",
                    b":path",
                    b":scheme",
                    b":authority",
                    b"content-type",
                    b"te",
                    b"grpc-timeout",
                    b"grpc-encoding",
                    b"grpc-accept-encoding",
                    b"x-a",
                    b"x-b-bin",
                ]
            ),
            _header_values,
        ),
        max_size=10,
    ),
    st.binary(max_size=40),
    st.booleans(),
)
def test_fuzz_requests_never_raise(
    headers: List[Tuple[bytes, bytes]], body: bytes, end_stream: bool
) -> None:
    server = ServerGrpcConnection()
    server.initiate()
    block = hpack.Encoder().encode(headers)
    flags = 0x4 | (0x1 if end_stream and not body else 0)
    data = _PREFACE + _SETTINGS + _frame_bytes(1, flags, 1, block)
    if body:
        data += _frame_bytes(0, 0x1 if end_stream else 0, 1, body)
    events = server.receive_data(data)
    for event in events:
        if isinstance(event, CallStarted):
            server.finish_call(event.stream_id, StatusCode.OK, message=b"reply")
    server.data_to_send()


# -- the blocks the server sends are valid as h2's outbound validation judges them ------------


def _serve_one_call(
    initial: List[Tuple[str, Any]],
    trailing: List[Tuple[str, Any]],
    code: StatusCode,
    details: str,
    with_message: bool,
) -> List[List[Tuple[bytes, bytes]]]:
    """Run one call through a ServerGrpcConnection; return the header blocks it wrote, decoded."""
    pair = Pair()
    stream_id = pair.request()
    pair.settle()
    if initial:
        pair.server.send_initial_metadata(stream_id, wire.encode_metadata(initial))
    pair.server.finish_call(
        stream_id,
        code,
        details,
        message=b"reply" if with_message else None,
        trailing_metadata=wire.encode_metadata(trailing),
    )
    pair.settle()
    decoder = hpack.Decoder()
    blocks: List[List[Tuple[bytes, bytes]]] = []
    fragment = b""
    for frame in pair.frames_from_server():
        if isinstance(frame, (hyperframe.frame.HeadersFrame, hyperframe.frame.ContinuationFrame)):
            fragment += frame.data
            if "END_HEADERS" in frame.flags:
                blocks.append([tuple(field) for field in decoder.decode(fragment, raw=True)])
                fragment = b""
    return blocks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=APPLICATION_METADATA,
    trailing=APPLICATION_METADATA,
    code=st.sampled_from(list(StatusCode)),
    details=st.text(max_size=30),
    with_message=st.booleans(),
)
def test_server_header_blocks_pass_h2_outbound_validation(
    initial: List[Tuple[str, Any]],
    trailing: List[Tuple[str, Any]],
    code: StatusCode,
    details: str,
    with_message: bool,
) -> None:
    """Response headers, Trailers-Only and trailers, with any application metadata the API
    accepts, are valid HTTP/2 response blocks (RFC 9113 §8.1, §8.2, §8.3.2) as an independent
    implementation judges them: h2's outbound validation passes each one through unchanged."""
    blocks = _serve_one_call(initial, trailing, code, details, with_message)
    assert 1 <= len(blocks) <= 2
    for index, block in enumerate(blocks):
        flags = h2.utilities.HeaderValidationFlags(
            is_client=False,
            is_trailer=index == 1,
            is_response_header=index == 0,
            is_push_promise=False,
        )
        validated = [tuple(field) for field in
                     h2.utilities.validate_outbound_headers(block, flags)]
        assert validated == block


# -- streaming calls ------------------------------------------------------------------------


def test_streaming_request_is_pulled_message_by_message() -> None:
    pair = Pair(shape_from_handler=True)
    body = b"".join(wire.encode_message(m) for m in (b"one", b"two", b"three"))
    stream_id = pair.request(body=body)
    events = pair.settle()
    assert [type(e) for e in events] == [CallStarted]  # nothing is judged before accept_call
    accepted = pair.server.accept_call(stream_id, request_streaming=True)
    assert [type(e) for e in accepted] == [RequestMessage, RequestEnded]
    taken = []
    while True:
        message = pair.server.take_request(stream_id)
        if message is None:
            break
        taken.append(message)
    assert taken == [b"one", b"two", b"three"]


def test_unary_shape_applied_at_accept_rejects_two_messages() -> None:
    pair = Pair(shape_from_handler=True)
    body = wire.encode_message(b"a") + wire.encode_message(b"b")
    stream_id = pair.request(body=body)
    pair.settle()
    events = pair.server.accept_call(stream_id, request_streaming=False)
    assert [type(e) for e in events] == [CallTerminated]
    pair.settle()
    assert status_of(pair.response(stream_id))[0] == StatusCode.INTERNAL.value[0]


def test_streamed_responses_share_data_frames() -> None:
    pair = Pair(shape_from_handler=True)
    stream_id = pair.request()
    pair.settle()
    pair.server.accept_call(stream_id, request_streaming=False)
    for text in (b"r1", b"r2", b"r3"):
        assert pair.server.send_message(stream_id, text)
    assert pair.server.finish_call(stream_id, StatusCode.OK)
    pair.settle()
    data_frames = [
        f for f in pair.frames_from_server()
        if isinstance(f, hyperframe.frame.DataFrame) and f.stream_id == stream_id
    ]
    expected = b"".join(wire.encode_message(m) for m in (b"r1", b"r2", b"r3"))
    assert [bytes(f.data) for f in data_frames] == [expected]
    assert status_of(pair.response(stream_id)) == (0, "")


def test_unread_streamed_requests_hold_back_the_stream_window() -> None:
    pair = Pair(ServerSettings(initial_window_size=65535), shape_from_handler=True)
    stream_id = pair.request(body=None, end=False)
    pair.settle()
    pair.server.accept_call(stream_id, request_streaming=True)
    chunk = wire.encode_message(bytes(60000))
    sent = 0
    # Past the buffer limit (1 MiB of unread messages) the server stops returning window.
    while pair.client.local_flow_control_window(stream_id) >= len(chunk) and sent < 200:
        pair.client.send_data(stream_id, chunk)
        sent += 1
        pair.settle()
    assert sent < 200, "the window never closed: unread requests were credited without bound"
    before = pair.client.local_flow_control_window(stream_id)
    while pair.server.take_request(stream_id) is not None:
        pass
    pair.settle()
    assert pair.client.local_flow_control_window(stream_id) > before


def _closing_frames(stream_id: int) -> Dict[str, bytes]:
    """Frames that close or end ``stream_id`` from the client's side."""
    frame = hyperframe.frame
    return {
        "rst_stream": frame.RstStreamFrame(stream_id, error_code=8).serialize(),
        # 65,535 + 2 x 2^30 overflows 2^31-1: h2 resets with FLOW_CONTROL_ERROR (RFC 9113 §6.9.1).
        "window_overflow": frame.WindowUpdateFrame(stream_id, window_increment=1 << 30)
        .serialize()
        * 2,
        "end_stream": frame.DataFrame(stream_id, b"", flags=["END_STREAM"]).serialize(),
    }


def _assert_answered_raw(pair: Pair, live: int) -> None:
    """The live call is answered and nothing ends the connection, read from the server's raw
    output: the h2 client knows nothing of the streams injected under it."""
    pair.raw_from_server.clear()
    pair.server.finish_call(live, StatusCode.OK, message=b"still here")
    pair.raw_from_server += pair.server.data_to_send()
    frames = pair.frames_from_server()
    assert not any(isinstance(f, hyperframe.frame.GoAwayFrame) for f in frames)
    body = b"".join(
        f.data for f in frames if isinstance(f, hyperframe.frame.DataFrame) and f.stream_id == live
    )
    assert body == wire.encode_message(b"still here")
    ends = [f for f in frames if f.stream_id == live and "END_STREAM" in f.flags]
    assert len(ends) == 1 and isinstance(ends[0], hyperframe.frame.HeadersFrame)


@pytest.mark.parametrize("closer", ["rst_stream", "window_overflow", "end_stream"])
@pytest.mark.parametrize(
    "extra", [[(b"grpc-encoding", b"snappy")], [(b"content-type", b"text/plain")]]
)
def test_rejection_of_a_stream_closed_in_the_same_read_spares_the_connection(
    closer: str, extra: List[Tuple[bytes, bytes]]
) -> None:
    """A rejected request and a frame closing its stream in one read: h2 has closed the stream
    before the rejection is sent, which is then dropped; the call on stream 1 goes on
    (RFC 9113 §5.4.2: a stream error)."""
    pair = Pair()
    live = pair.request(end=False)
    pair.settle()
    headers = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/svc/Method"),
        (b":authority", b"localhost"),
        (b"te", b"trailers"),
    ]
    headers += [(b"content-type", b"application/grpc")] if extra[0][0] != b"content-type" else []
    block = hpack.Encoder().encode(headers + extra)
    read = hyperframe.frame.HeadersFrame(3, block, flags=["END_HEADERS"]).serialize()
    read += _closing_frames(3)[closer]
    pair.server.receive_data(read)
    assert not pair.server.closed
    _assert_answered_raw(pair, live)


def test_blocked_response_of_a_stream_reset_in_the_same_read_is_dropped() -> None:
    """A WINDOW_UPDATE then RST_STREAM for a stream whose response waits for window, in one
    read: the response is not written on the closed stream, and stream 1 goes on."""
    pair = Pair()
    live = pair.request(end=False)
    blocked = pair.request()
    pair.settle()
    pair.auto_ack = False
    pair.server.finish_call(blocked, StatusCode.OK, message=b"x" * 200_000)
    pair.settle()
    frame = hyperframe.frame
    read = frame.WindowUpdateFrame(blocked, window_increment=100_000).serialize()
    read += frame.WindowUpdateFrame(0, window_increment=100_000).serialize()
    read += frame.RstStreamFrame(blocked, error_code=8).serialize()
    events = pair.server.receive_data(read)
    assert not pair.server.closed
    assert not any(isinstance(e, CallTerminated) and e.stream_id == live for e in events)
    _assert_answered_raw(pair, live)


@pytest.mark.parametrize(
    ("name", "frame"),
    [
        ("ping", hyperframe.frame.PingFrame(0, opaque_data=b"12345678")),
        ("settings", hyperframe.frame.SettingsFrame(0, settings={4: 65535})),
        ("window_update_0", hyperframe.frame.WindowUpdateFrame(0, window_increment=1)),
        ("priority", hyperframe.frame.PriorityFrame(1, depends_on=0, stream_weight=16)),
        ("rst_stream", None),
    ],
)
def test_floods_of_frames_that_do_no_work_get_enhance_your_calm(
    name: str, frame: Optional[Any]
) -> None:
    """RFC 9113 §10.5: past the allowance (minigrpc.http2.flood.BURST frames at once), the
    client gets GOAWAY(ENHANCE_YOUR_CALM) and the connection closes; its calls end CANCELLED."""
    from minigrpc.http2.flood import BURST, START

    pair = Pair()
    live = pair.request(end=False)
    pair.settle()
    pair.raw_from_server.clear()
    if frame is None:  # rapid reset: HEADERS + RST_STREAM, over and over
        block = hpack.Encoder().encode(
            [
                (b":method", b"POST"),
                (b":scheme", b"http"),
                (b":path", b"/svc/Method"),
                (b":authority", b"localhost"),
                (b"content-type", b"application/grpc"),
            ]
        )
        flood = b"".join(
            hyperframe.frame.HeadersFrame(sid, block, flags=["END_HEADERS"]).serialize()
            + hyperframe.frame.RstStreamFrame(sid, error_code=8).serialize()
            for sid in range(3, 3 + 4 * BURST, 2)
        )
    else:
        flood = frame.serialize() * (BURST + 10)
    events = pair.server.receive_data(flood)
    while pair.server.pending_input:  # a pass's worth at a time (frame_budget.PASS_LIMIT)
        events += pair.server.receive_data(b"")
    assert pair.server.closed
    assert any(isinstance(e, CallTerminated) and e.stream_id == live for e in events)
    if frame is None:
        # Counted as they are read, and the read stops at the first frame past the
        # allowance: of the flood's 2 x BURST streams, no more than the allowance's worth
        # become calls (decoding them is the work the attack is after).
        started = [e for e in events if isinstance(e, CallStarted)]
        assert len(started) <= START, name
    pair.raw_from_server += pair.server.data_to_send()
    goaways = [f for f in pair.frames_from_server() if isinstance(f, hyperframe.frame.GoAwayFrame)]
    assert [g.error_code for g in goaways] == [h2.errors.ErrorCodes.ENHANCE_YOUR_CALM], name


def _goaway_codes(data: bytes) -> List[int]:
    client = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    client.initiate_connection()
    return [
        e.error_code
        for e in client.receive_data(data)
        if isinstance(e, h2.events.ConnectionTerminated)
    ]


def test_a_flood_is_cut_short_and_goes_on_the_peers_record() -> None:
    """A new connection opens with frame_budget.START frames that do no work; past them the
    read is a flood at once, without walking the rest of it; the peer's next connection opens
    with less, and another peer's does not."""
    from minigrpc.http2.flood import START, PeerHistory

    clock = FakeClock()
    history = PeerHistory(clock)
    ping = hyperframe.frame.PingFrame(0, opaque_data=b"flooding").serialize()
    # A frame header announcing 8 MiB: walked to, it would be a FRAME_SIZE_ERROR.
    oversized = b"\x7f\xff\xff\x00\x00\x00\x00\x00\x01"

    def connect(peer: str) -> ServerGrpcConnection:
        server = ServerGrpcConnection(clock=clock)
        server.set_peer(history, peer)
        server.initiate()
        client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        client.initiate_connection()  # preface + SETTINGS: one frame of the allowance
        assert server.receive_data(client.data_to_send()) == []
        server.data_to_send()
        return server

    first = connect("attacker")
    first.receive_data(ping * START + oversized)
    assert first.closed
    assert _goaway_codes(first.data_to_send()) == [h2.errors.ErrorCodes.ENHANCE_YOUR_CALM]

    second = connect("attacker")  # opens with half as much
    second.receive_data(ping * (START // 2 - 1))
    assert not second.closed
    second.receive_data(ping)
    assert second.closed

    other = connect("neighbour")  # the same server, another peer: the full opening
    other.receive_data(ping * (START - 1))
    assert not other.closed


def test_pings_and_window_updates_after_response_data_are_free() -> None:
    """A client busy receiving sends a PING (BDP probe) and a WINDOW_UPDATE after each burst of
    data: as grpc-go forgives ping strikes when it sends data, they never count as a flood."""
    from minigrpc.http2.flood import BURST

    pair = Pair()
    live = pair.request(end=False)
    pair.settle()
    for number in range(BURST + 50):
        assert pair.server.send_message(live, b"x" * 10)
        pair.to_client()
        pair.client.ping(number.to_bytes(8, "big"))
        pair.client.increment_flow_control_window(100)
        pair.to_server()
        assert not pair.server.closed, number


# -- PING and WINDOW_UPDATE on stream 0 (RFC 9113 §6.7, §6.9) -----------------------------------


def _raw_frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + (
        payload
    )


def _goaway_code(pair: Pair) -> Optional[int]:
    goaways = [
        f for f in _parse(pair.server.data_to_send()) if isinstance(f, hyperframe.frame.GoAwayFrame)
    ]
    return goaways[0].error_code if goaways else None


def test_pings_in_one_read_are_each_acknowledged_in_order() -> None:
    """RFC 9113 §6.7: every PING gets an ACK with its opaque data, also when a read holds
    several of them between other frames."""
    pair = Pair()
    pair.raw_from_server.clear()
    payloads = [bytes([n]) * 8 for n in range(1, 4)]
    read = _raw_frame(6, 0, 0, payloads[0]) + _raw_frame(8, 0, 0, b"\x00\x00\x01\x00")
    read += _raw_frame(6, 0, 0, payloads[1]) + _raw_frame(6, 0, 0, payloads[2])
    assert pair.server.receive_data(read) == []
    pair.raw_from_server += pair.server.data_to_send()
    acks = [f for f in pair.frames_from_server() if isinstance(f, hyperframe.frame.PingFrame)]
    assert [(f.opaque_data, "ACK" in f.flags, f.stream_id) for f in acks] == [
        (payload, True, 0) for payload in payloads
    ]
    assert not pair.server.closed


def test_a_ping_split_across_reads_is_acknowledged() -> None:
    pair = Pair()
    ping = _raw_frame(6, 0, 0, b"abcdefgh")
    for piece in (ping[:5], ping[5:12], ping[12:]):
        pair.server.receive_data(piece)
    sent = _parse(pair.server.data_to_send())
    acks = [f for f in sent if isinstance(f, hyperframe.frame.PingFrame)]
    assert [(f.opaque_data, "ACK" in f.flags) for f in acks] == [(b"abcdefgh", True)]


def test_connection_window_update_resumes_a_response_waiting_for_it() -> None:
    """A response held by the connection window alone (the stream's is large) goes on when
    the client raises the connection window with a WINDOW_UPDATE on stream 0 (RFC 9113 §6.9)."""
    pair = Pair(window=4 * 1024 * 1024)
    stream_id = pair.request()
    pair.settle()
    pair.auto_ack = False
    payload = bytes(range(256)) * 1200  # 307,200 bytes, over the 65,535-byte connection window
    pair.server.finish_call(stream_id, StatusCode.OK, message=payload)
    pair.settle()
    assert not pair.response(stream_id)["ended"]
    pair.client.increment_flow_control_window(1 << 20)  # stream 0 only
    pair.settle()
    assert pair.response(stream_id)["body"] == wire.encode_message(payload)
    assert pair.response(stream_id)["trailers"][b"grpc-status"] == b"0"


def test_connection_window_overflow_is_a_flow_control_error() -> None:
    """RFC 9113 §6.9.1: WINDOW_UPDATEs on stream 0 that take the connection window past
    2^31-1 are a connection error FLOW_CONTROL_ERROR; the calls end."""
    pair = Pair()
    live = pair.request(end=False)
    pair.settle()
    pair.to_client()
    increment = (2**31 - 1).to_bytes(4, "big")
    events = pair.server.receive_data(_raw_frame(8, 0, 0, increment))
    assert pair.server.closed
    assert [(type(e), e.stream_id) for e in events] == [(CallTerminated, live)]
    assert _goaway_code(pair) == h2.errors.ErrorCodes.FLOW_CONTROL_ERROR


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        # A zero increment on stream 0 (RFC 9113 §6.9) and a PING that is not 8 bytes (§6.7).
        (_raw_frame(8, 0, 0, bytes(4)), h2.errors.ErrorCodes.PROTOCOL_ERROR),
        (_raw_frame(6, 0, 0, bytes(7)), h2.errors.ErrorCodes.FRAME_SIZE_ERROR),
        (_raw_frame(8, 0, 0, bytes(5)), h2.errors.ErrorCodes.FRAME_SIZE_ERROR),
    ],
)
def test_malformed_connection_frames_are_connection_errors(frame: bytes, code: int) -> None:
    pair = Pair()
    pair.to_client()
    pair.server.receive_data(frame)
    assert pair.server.closed
    assert _goaway_code(pair) == code


def test_ping_inside_a_header_block_is_a_protocol_error() -> None:
    """RFC 9113 §6.10: between a HEADERS frame without END_HEADERS and its last CONTINUATION
    only CONTINUATION frames may come; a PING there is a connection error PROTOCOL_ERROR, even
    though a PING alone would be answered before h2."""
    pair = Pair()
    pair.to_client()
    block = hpack.Encoder().encode(
        [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/svc/Method"),
         (b":authority", b"x"), (b"content-type", b"application/grpc")]
    )
    read = _raw_frame(1, 0, 1, block[:3]) + _raw_frame(6, 0, 0, bytes(8))
    read += _raw_frame(9, 0x4, 1, block[3:])
    pair.server.receive_data(read)
    assert pair.server.closed
    assert _goaway_code(pair) == h2.errors.ErrorCodes.PROTOCOL_ERROR
