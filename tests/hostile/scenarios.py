"""The hostile servers the client and the plugin meet: one script of the scripted peer each.

:func:`client_scenarios` is the table that tests/hostile/test_hostile_client.py (minigrpc's
channel) and tests/hostile/test_hostile_plugin.py (the CNI plugin as a subprocess) replay,
each scenario on a :class:`tests.support.scripted_peer.ScriptedServer`; docs/robustness.md is
generated from the same table and the observations of :func:`record_observation`.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from hyperframe.frame import DataFrame, PingFrame, SettingsFrame

from minigrpc.http2.frames import HEADER_TABLE_SIZE, PUSH_PROMISE
from tests.support.scripted_peer import (
    DEFAULT_MAX_FRAME,
    DEFAULT_WINDOW,
    GRPC_OK_HEADERS,
    INITIAL_WINDOW_SIZE,
    MAX_FRAME_SIZE,
    Fault,
    HeaderLike,
    RawConn,
    Script,
    StreamRecord,
    connection_script,
    echo_response,
    grpc_message,
    reply_payload,
    rpc_script,
    serve_well,
)

# ==================================================================== client-side scenarios
#
# The catalogue of hostile servers, shared by test_hostile_client.py (minigrpc's channel)
# and test_hostile_plugin.py (the CNI plugin as a subprocess). ``expected`` is a StatusCode
# name chosen from gRPC's docs or RFC 9113 (cited in ``reference``); "OK" means the call must
# succeed. ``deadline_only`` scenarios end only by the caller's deadline (the plugin has none,
# so there the runtime's SIGKILL is the only way out).

RST_CODES: Dict[int, str] = {
    0x0: "INTERNAL",
    0x1: "INTERNAL",
    0x2: "INTERNAL",
    0x3: "RESOURCE_EXHAUSTED",
    0x4: "INTERNAL",
    0x5: "INTERNAL",
    0x6: "INTERNAL",
    0x7: "UNAVAILABLE",
    0x8: "CANCELLED",
    0x9: "INTERNAL",
    0xA: "INTERNAL",
    0xB: "RESOURCE_EXHAUSTED",
    0xC: "PERMISSION_DENIED",
    0xD: "INTERNAL",
    0x2A: "INTERNAL",
}


@dataclass(frozen=True)
class ClientScenario:
    name: str
    group: str
    description: str
    script: Script
    expected: str
    reference: str
    deadline: float = 10.0
    deadline_only: bool = False
    request_size: int = 16
    #: Exact ``details()`` expected, when the scenario is about the message text.
    details: Optional[str] = None
    #: Most requests a retrying client may make before giving up (REFUSED_STREAM, GOAWAY).
    max_requests: Optional[int] = None
    #: A well-behaved reply after :meth:`ScriptedServer.behave` needs a new connection.
    new_connection_after: bool = False


def _respond_raw(
    conn: RawConn,
    sid: int,
    headers: Sequence[HeaderLike],
    body: Optional[bytes],
    trailers: Optional[Sequence[HeaderLike]],
) -> None:
    """HEADERS, then DATA (if any), then trailers (if any); END_STREAM on the last of them."""
    conn.send_headers(sid, headers, end_stream=body is None and trailers is None)
    if body is not None:
        conn.send_data(sid, body, end_stream=trailers is None)
    if trailers is not None:
        conn.send_headers(sid, trailers, end_stream=True)


def _shaped(
    headers: Sequence[HeaderLike] = GRPC_OK_HEADERS,
    body: Optional[bytes] = b"\x00\x00\x00\x00\x02hi",
    trailers: Optional[Sequence[HeaderLike]] = ((b"grpc-status", b"0"),),
) -> Script:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        _respond_raw(conn, request.stream_id, headers, body, trailers)
        return None

    return rpc_script(fault)


def _close_before_preface(conn: RawConn) -> None:
    """Read the whole request, then close without a preface. Closing at once would race with the
    client's write: bytes the peer never read make the kernel answer with a reset, so the
    client's error would read "EOF" in one run and "connection reset by peer" in the next."""
    conn.wait_for(lambda: any(record.ended for record in conn.streams.values()))
    conn.close(join=False)


def _garbage_then(close: bool) -> Script:
    def fault(conn: RawConn) -> None:
        conn.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        if close:
            conn.shutdown()
        else:
            assert conn.owner is not None
            conn.owner.hang(conn)

    return connection_script(fault)


def _silent(conn: RawConn) -> None:
    """Accept, read, never write a byte (not even SETTINGS)."""
    assert conn.owner is not None
    conn.owner.hang(conn)


def _zero_window(opens: bool) -> Script:
    def script(conn: RawConn) -> None:
        owner = conn.owner
        assert owner is not None
        if not owner.misbehaving:
            serve_well(conn)
            return
        conn.send_settings({INITIAL_WINDOW_SIZE: 0})
        # The client may have sent up to 65,535 bytes before our SETTINGS arrived (RFC 9113
        # §6.9.2); the 100 kB request then stalls, its window negative, until we open it.
        conn.wait_for(lambda: any(r.headers for r in conn.streams.values()) or conn.eof)
        if not opens:
            owner.hang(conn)
            return
        conn.send_settings({INITIAL_WINDOW_SIZE: DEFAULT_WINDOW})
        while True:
            request = conn.next_request(timeout=None)
            if request is None:
                return
            if request.reset_code is None:
                echo_response(conn, request)

    return script


def _max_frame_script(conn: RawConn) -> None:
    def fault(c: RawConn, request: StreamRecord) -> Optional[str]:
        assert c.max_data_frame <= DEFAULT_MAX_FRAME, (
            f"client sent a {c.max_data_frame}-byte DATA frame; our MAX_FRAME_SIZE is 16384"
        )
        echo_response(c, request)
        return None

    rpc_script(fault, settings={MAX_FRAME_SIZE: DEFAULT_MAX_FRAME})(conn)


def _illegal_settings(settings: Dict[int, int]) -> Script:
    def fault(conn: RawConn) -> None:
        conn.send_settings(settings)
        assert conn.owner is not None
        conn.owner.hang(conn)

    return connection_script(fault)


def _reset_with(code: int, stage: str = "immediately") -> Script:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        if stage in ("after_headers", "during_data", "after_data"):
            conn.send_headers(sid, GRPC_OK_HEADERS)
        if stage == "during_data":
            conn.send_data(sid, grpc_message(b"x" * 100)[:50])
        if stage == "after_data":
            conn.send_data(sid, grpc_message(b"x" * 100))
        conn.send_rst(sid, code)
        return None

    return rpc_script(fault)


def _rst_after_trailers(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.respond(request.stream_id, reply_payload(conn, request))
    conn.send_rst(request.stream_id, 0)
    return None


def _goaway_below(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_goaway(request.stream_id - 2 if request.stream_id > 2 else 0)
    return "stop"


def _goaway_above(graceful: bool) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        if graceful:
            conn.send_goaway(2**31 - 1)
            conn.send_ping(bytes([1, 6, 1, 8, 0, 3, 3, 9]))
        conn.send_goaway(request.stream_id)
        conn.respond(request.stream_id, reply_payload(conn, request))
        return "stop"

    return fault


def _goaway_then_close(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_goaway(request.stream_id)
    conn.send_headers(request.stream_id, GRPC_OK_HEADERS)
    conn.send_data(request.stream_id, grpc_message(b"y" * 1000)[:500])
    return "close"


def _ping_flood(conn: RawConn, request: StreamRecord) -> Optional[str]:
    burst = b"".join(
        PingFrame(0, opaque_data=i.to_bytes(8, "big")).serialize() for i in range(1000)
    )
    for _ in range(10):
        if not conn.send(burst):
            return "close"
    echo_response(conn, request)
    return None


def _never_answers(conn: RawConn, request: StreamRecord) -> Optional[str]:
    return None


def _byte_at_a_time(pace: Optional[float]) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        response = (
            conn.header_frames(sid, GRPC_OK_HEADERS)
            + DataFrame(sid, grpc_message(reply_payload(conn, request))).serialize()
            + conn.header_frames(sid, [(b"grpc-status", b"0")], end_stream=True)
        )
        owner = conn.owner
        assert owner is not None
        with conn.exclusive():
            for i in range(len(response)):
                if not conn.send(response[i : i + 1]):
                    return "close"
                if pace is not None and owner.stop_event.wait(pace):
                    return "close"
        return None

    return fault


def _padded(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    payload = reply_payload(conn, request)
    conn.send_headers(sid, GRPC_OK_HEADERS)
    # 5-byte frames + 255 bytes of padding: ~17,000 frames cost ~4.4 MB of window, more than
    # the client's 4 MiB stream window, so a client acking len(data) instead of
    # flow_controlled_length stalls (RFC 9113 §6.9, data_frame_padding).
    body = grpc_message(payload)
    if not conn.send_data(sid, body, frame_size=256 + 5, pad_length=255, timeout=20):
        return "close"
    conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
    return None


def _continuation(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    big = b"v" * 6000
    conn.send_headers(sid, [*GRPC_OK_HEADERS, (b"x-big", big)], fragment=700)
    conn.send_data(sid, grpc_message(reply_payload(conn, request)))
    conn.send_headers(sid, [(b"grpc-status", b"0"), (b"x-big-trailer", big)], end_stream=True,
                      fragment=500)
    return None


def _oversized_headers(size: int) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        headers = [*GRPC_OK_HEADERS]
        # Many distinct fields (incompressible values) so the decoded list really is ``size``.
        for i in range(size // 1000 + 1):
            headers.append((f"x-filler-{i}".encode(), os.urandom(480).hex().encode()))
        conn.send_headers(sid, headers, fragment=16_000)
        conn.send_data(sid, grpc_message(reply_payload(conn, request)))
        conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
        return None

    return fault


def _oversized_message(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    conn.send_headers(sid, GRPC_OK_HEADERS)
    size = 4 * 1024 * 1024 + 1
    conn.send_data(sid, grpc_message(b"\x00" * size), timeout=5)
    conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
    return None


def _truncated_then_eof(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_headers(request.stream_id, GRPC_OK_HEADERS)
    conn.send_data(request.stream_id, grpc_message(b"z" * 10, length=100))
    return "close"


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


def _gzip_bomb() -> bytes:
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(b"\x00" * (8 * 1024 * 1024)) + compressor.flush()


def _push_promise(conn: RawConn, request: StreamRecord) -> Optional[str]:
    """PUSH_PROMISE although the client said ENABLE_PUSH=0 (RFC 9113 §8.4: connection error)."""
    block = conn.encode_headers([(b":method", b"GET"), (b":scheme", b"http"),
                                 (b":path", b"/pushed"), (b":authority", b"localhost")])
    promised = struct.pack(">I", 2)
    body = promised + block
    header = struct.pack(">I", len(body))[1:] + bytes([PUSH_PROMISE, 0x4])
    conn.send(header + struct.pack(">I", request.stream_id) + body)
    return "stop"


def _headers_on_unopened_stream(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_headers(request.stream_id + 2, GRPC_OK_HEADERS)
    return "stop"


def _window_overflow(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_window_update(0, 2**31 - 1)
    conn.send_window_update(0, 2**31 - 1)
    return "stop"


def _settings_flood(conn: RawConn, request: StreamRecord) -> Optional[str]:
    burst = SettingsFrame(0, settings={HEADER_TABLE_SIZE: 4096}).serialize() * 1000
    for _ in range(10):
        if not conn.send(burst):
            return "close"
    echo_response(conn, request)
    return None


def client_scenarios() -> List[ClientScenario]:
    """Every client-side scenario (a fresh list: scripts hold no state)."""
    ok_trailers = ((b"grpc-status", b"0"),)
    grpc_headers = GRPC_OK_HEADERS
    one = grpc_message(b"hi")
    scenarios = [
        ClientScenario(
            "close_before_preface", "connection",
            "the peer reads the request, then closes before its preface",
            connection_script(_close_before_preface), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure",
        ),
        ClientScenario(
            "garbage_preface_then_close", "connection",
            "an HTTP/1.1 answer instead of the preface, then close",
            _garbage_then(close=True), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §3.4",
        ),
        ClientScenario(
            "garbage_preface_then_hang", "connection",
            "an HTTP/1.1 answer instead of the preface, connection kept open",
            _garbage_then(close=False), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §3.4",
        ),
        ClientScenario(
            "silent_peer", "connection", "accepts, never sends SETTINGS",
            connection_script(_silent), "DEADLINE_EXCEEDED", "statuscodes.md DEADLINE_EXCEEDED",
            deadline=0.5, deadline_only=True,
        ),
        ClientScenario(
            "zero_window_opens_later", "settings",
            "SETTINGS INITIAL_WINDOW_SIZE=0, opened by a second SETTINGS after the HEADERS",
            _zero_window(opens=True), "OK", "RFC 9113 §6.9 flow control", request_size=100_000,
        ),
        ClientScenario(
            "zero_window_never_opens", "settings", "SETTINGS INITIAL_WINDOW_SIZE=0 forever",
            _zero_window(opens=False), "DEADLINE_EXCEEDED", "statuscodes.md DEADLINE_EXCEEDED",
            deadline=0.5, deadline_only=True, request_size=100_000,
        ),
        ClientScenario(
            "min_max_frame_size", "settings",
            "MAX_FRAME_SIZE=16384 (the minimum); a 100 kB request must use frames <= 16384",
            _max_frame_script, "OK", "RFC 9113 §6.9 flow control", request_size=100_000,
        ),
        ClientScenario(
            "illegal_max_frame_size", "settings",
            "MAX_FRAME_SIZE=1024 (below the RFC minimum): a connection error",
            _illegal_settings({MAX_FRAME_SIZE: 1024}), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §6.5.2",
        ),
        ClientScenario(
            "http_200_no_content_type", "http-status", ":status 200 without content-type",
            _shaped(headers=[(b":status", b"200")]), "UNKNOWN",
            "PROTOCOL-HTTP2.md Responses; http-grpc-status-mapping.md",
        ),
        ClientScenario(
            "http_200_text_html", "http-status", ":status 200, content-type text/html",
            _shaped(headers=[(b":status", b"200"), (b"content-type", b"text/html")],
                    body=b"<html>hello</html>", trailers=None),
            "UNKNOWN", "PROTOCOL-HTTP2.md Responses; http-grpc-status-mapping.md",
        ),
        # A malformed block is a stream error (RFC 9113 §8.1.1): INTERNAL for this call only,
        # as grpc-go's client reports it.
        ClientScenario(
            "upper_case_response_field", "header-block", "a response field name in upper case",
            _shaped(headers=[*grpc_headers, (b"X-Upper", b"v")]), "INTERNAL",
            "RFC 9113 §8.2.1, §8.1.1",
        ),
        ClientScenario(
            "connection_field_in_response", "header-block", "connection: close in a response",
            _shaped(headers=[*grpc_headers, (b"connection", b"close")]), "INTERNAL",
            "RFC 9113 §8.2.2, §8.1.1",
        ),
        ClientScenario(
            "response_without_status", "header-block", "response headers without :status",
            _shaped(headers=[(b"content-type", b"application/grpc")]), "INTERNAL",
            "RFC 9113 §8.3.2, §8.1.1",
        ),
        ClientScenario(
            "nul_in_response_value", "header-block", "a NUL byte in a response metadata value",
            _shaped(headers=[*grpc_headers, (b"x-md", b"a\x00b")]), "INTERNAL",
            "RFC 9113 §8.2.1, §8.1.1",
        ),
        ClientScenario(
            "pseudo_header_in_trailers", "header-block", "trailers carrying :status",
            _shaped(trailers=[(b":status", b"200"), (b"grpc-status", b"0")]), "INTERNAL",
            "RFC 9113 §8.1, §8.1.1",
        ),
        ClientScenario(
            "padded_response_metadata", "header-block",
            "a metadata value with spaces around it, which grpc-go and grpcio accept",
            rpc_script(lambda conn, request: conn.respond(
                request.stream_id, reply_payload(conn, request),
                headers=[*GRPC_OK_HEADERS, (b"x-md", b" padded ")]) and None),
            "OK",
            "RFC 9113 §8.2.1 (a sender's rule); interoperability",
        ),
    ]
    for status, code in (
        (400, "INTERNAL"), (401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"),
        (404, "UNIMPLEMENTED"), (429, "UNAVAILABLE"), (502, "UNAVAILABLE"),
        (503, "UNAVAILABLE"), (504, "UNAVAILABLE"), (418, "UNKNOWN"),
    ):
        scenarios.append(ClientScenario(
            f"http_{status}_text_html", "http-status", f":status {status}, text/html body",
            _shaped(headers=[(b":status", str(status).encode()), (b"content-type", b"text/html")],
                    body=b"<html>nope</html>", trailers=None),
            code, "http-grpc-status-mapping.md",
        ))
    scenarios.append(ClientScenario(
        "http_503_headers_only", "http-status", ":status 503 and END_STREAM, nothing else",
        _shaped(headers=[(b":status", b"503")], body=None, trailers=None),
        "UNAVAILABLE", "http-grpc-status-mapping.md",
    ))
    scenarios += [
        ClientScenario(
            "no_grpc_status", "grpc-status", "trailers without grpc-status",
            _shaped(trailers=[(b"grpc-message", b"where is my status")]), "UNKNOWN",
            "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "trailers_only_no_grpc_status", "grpc-status",
            "Trailers-Only (200, application/grpc, END_STREAM) without grpc-status",
            _shaped(body=None, trailers=None), "UNKNOWN", "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "grpc_status_non_numeric", "grpc-status", "grpc-status: abc",
            _shaped(trailers=[(b"grpc-status", b"abc")]), "UNKNOWN", "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "grpc_status_negative", "grpc-status", "grpc-status: -1",
            _shaped(trailers=[(b"grpc-status", b"-1")]), "UNKNOWN", "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "grpc_status_out_of_range", "grpc-status", "grpc-status: 17",
            _shaped(trailers=[(b"grpc-status", b"17")]), "UNKNOWN", "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "grpc_status_huge", "grpc-status", "grpc-status: 4294967296",
            _shaped(trailers=[(b"grpc-status", b"4294967296")]), "UNKNOWN",
            "PROTOCOL-HTTP2.md Responses",
        ),
        ClientScenario(
            "grpc_message_bad_percent", "grpc-message",
            "grpc-message with malformed %-escapes: kept as they are",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"%zz%4 100% %%"),
            ]),
            "FAILED_PRECONDITION", "PROTOCOL-HTTP2.md Responses (Status-Message)",
            details="%zz%4 100% %%",
        ),
        ClientScenario(
            "grpc_message_bad_utf8", "grpc-message",
            "grpc-message that percent-decodes to invalid UTF-8: U+FFFD",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"%FF%FEok%C3"),
            ]),
            "FAILED_PRECONDITION", "PROTOCOL-HTTP2.md Responses (Status-Message)",
            details="\ufffd\ufffdok\ufffd",
        ),
        ClientScenario(
            "grpc_message_raw_bytes", "grpc-message",
            "grpc-message with raw non-ASCII bytes (not percent-encoded)",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"caf\xc3\xa9 \xff"),
            ]),
            "FAILED_PRECONDITION", "PROTOCOL-HTTP2.md Responses (Status-Message)",
            details="caf\u00e9 \ufffd",
        ),
        ClientScenario(
            "two_response_messages", "cardinality", "two messages for a unary call",
            _shaped(body=one + one, trailers=ok_trailers), "INTERNAL",
            "statuscodes.md (cardinality violation)",
        ),
        ClientScenario(
            "zero_response_messages", "cardinality", "no message, then grpc-status 0",
            _shaped(body=None, trailers=ok_trailers), "INTERNAL",
            "statuscodes.md (cardinality violation)",
        ),
        ClientScenario(
            "length_prefix_4gib", "length-prefix", "a length prefix claiming 4 GiB",
            _shaped(body=b"\x00\xff\xff\xff\xff" + b"a" * 100, trailers=ok_trailers),
            "RESOURCE_EXHAUSTED", "statuscodes.md RESOURCE_EXHAUSTED (message size)",
        ),
        ClientScenario(
            "message_over_limit", "length-prefix", "a real 4 MiB + 1 message",
            rpc_script(_oversized_message), "RESOURCE_EXHAUSTED",
            "statuscodes.md RESOURCE_EXHAUSTED (message size)",
        ),
        ClientScenario(
            "length_prefix_cut_then_trailers", "length-prefix",
            "prefix says 100 bytes, 10 arrive, then grpc-status 0",
            _shaped(body=grpc_message(b"z" * 10, length=100), trailers=ok_trailers),
            "INTERNAL", "statuscodes.md INTERNAL",
        ),
        ClientScenario(
            "length_prefix_cut_then_eof", "length-prefix",
            "prefix says 100 bytes, 10 arrive, then the connection closes",
            rpc_script(_truncated_then_eof), "UNAVAILABLE", "PROTOCOL-HTTP2.md Connection failure",
        ),
        ClientScenario(
            "length_prefix_cut_in_prefix", "length-prefix",
            "3 bytes of a prefix, then grpc-status 0",
            _shaped(body=b"\x00\x00\x00", trailers=ok_trailers), "INTERNAL",
            "statuscodes.md INTERNAL",
        ),
        ClientScenario(
            "flag_byte_2", "compression", "a message flag byte of 2",
            _shaped(body=grpc_message(b"hi", flag=2), trailers=ok_trailers), "INTERNAL",
            "compression.md",
        ),
        ClientScenario(
            "compressed_flag_without_encoding", "compression",
            "flag 1 and no grpc-encoding header",
            _shaped(body=grpc_message(_gzip(b"hi"), flag=1), trailers=ok_trailers), "INTERNAL",
            "compression.md",
        ),
        ClientScenario(
            "compressed_flag_identity", "compression", "flag 1 with grpc-encoding: identity",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"identity")],
                    body=grpc_message(b"hi", flag=1), trailers=ok_trailers), "INTERNAL",
            "compression.md",
        ),
        ClientScenario(
            "unknown_encoding", "compression", "flag 1 with grpc-encoding: snappy",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"snappy")],
                    body=grpc_message(b"\x02\x04hi", flag=1), trailers=ok_trailers), "INTERNAL",
            "compression.md",
        ),
        ClientScenario(
            "corrupt_gzip", "compression", "grpc-encoding gzip with a corrupt body",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(b"\x1f\x8b\x08\x00garbage-not-deflate", flag=1),
                    trailers=ok_trailers), "INTERNAL", "compression.md",
        ),
        ClientScenario(
            "truncated_gzip", "compression", "grpc-encoding gzip with a truncated body",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(_gzip(b"hello" * 100)[:-12], flag=1),
                    trailers=ok_trailers), "INTERNAL", "compression.md",
        ),
        ClientScenario(
            "gzip_bomb", "compression", "8 MiB of zeros gzipped into a few kB",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(_gzip_bomb(), flag=1), trailers=ok_trailers),
            "RESOURCE_EXHAUSTED", "statuscodes.md RESOURCE_EXHAUSTED (message size)",
        ),
    ]
    for code, expected in RST_CODES.items():
        scenarios.append(ClientScenario(
            f"rst_stream_{code:#04x}", "rst-stream",
            f"RST_STREAM({code:#x}) right after the request",
            _reset_with(code), expected, "PROTOCOL-HTTP2.md Errors",
            max_requests=5 if code == 0x7 else None,
        ))
    for stage in ("after_headers", "during_data", "after_data"):
        scenarios.append(ClientScenario(
            f"rst_no_error_{stage}", "rst-stream",
            f"RST_STREAM(NO_ERROR) {stage.replace('_', ' ')}",
            _reset_with(0, stage), "INTERNAL",
            "PROTOCOL-HTTP2.md Errors; negative-http2-interop-test-descriptions.md rst_after_*",
        ))
    scenarios += [
        ClientScenario(
            "rst_no_error_after_trailers", "rst-stream",
            "trailers (OK), then RST_STREAM(NO_ERROR): normal",
            rpc_script(_rst_after_trailers), "OK",
            "RFC 9113 §8.1 (RST_STREAM NO_ERROR after a complete response)",
        ),
        ClientScenario(
            "goaway_below_stream", "goaway", "GOAWAY(last_stream_id below the call)",
            rpc_script(_goaway_below), "UNAVAILABLE", "PROTOCOL-HTTP2.md GOAWAY Frame",
            max_requests=5,
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_above_stream", "goaway",
            "GOAWAY(last_stream_id = the call), then a full response",
            rpc_script(_goaway_above(graceful=False)), "OK", "PROTOCOL-HTTP2.md GOAWAY Frame",
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_graceful", "goaway",
            "GOAWAY(2^31-1) + PING, GOAWAY(the call), then a full response",
            rpc_script(_goaway_above(graceful=True)), "OK",
            "PROTOCOL-HTTP2.md GOAWAY Frame (graceful shutdown)",
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_then_close_mid_response", "goaway",
            "GOAWAY(the call), HEADERS, half a message, close",
            rpc_script(_goaway_then_close), "UNAVAILABLE", "PROTOCOL-HTTP2.md Connection failure",
        ),
        ClientScenario(
            "ping_flood", "ping", "10,000 PINGs before the response",
            rpc_script(_ping_flood), "OK", "PROTOCOL-HTTP2.md PING Frame",
        ),
        ClientScenario(
            "settings_flood", "ping", "10,000 SETTINGS frames before the response",
            rpc_script(_settings_flood), "OK", "RFC 9113 §6.5",
        ),
        ClientScenario(
            "push_promise", "frames", "PUSH_PROMISE although ENABLE_PUSH=0",
            rpc_script(_push_promise), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §8.4",
        ),
        ClientScenario(
            "headers_on_unopened_stream", "frames",
            "response HEADERS on a stream the client never opened",
            rpc_script(_headers_on_unopened_stream), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §5.1",
        ),
        ClientScenario(
            "window_update_overflow", "frames",
            "WINDOW_UPDATEs pushing the connection window past 2^31-1",
            rpc_script(_window_overflow), "UNAVAILABLE",
            "PROTOCOL-HTTP2.md Connection failure; RFC 9113 §6.9.1",
        ),
        ClientScenario(
            "never_answers", "slow", "reads the request, never answers",
            rpc_script(_never_answers), "DEADLINE_EXCEEDED",
            "statuscodes.md DEADLINE_EXCEEDED; PROTOCOL-HTTP2.md Errors (CANCEL)",
            deadline=0.5, deadline_only=True,
        ),
        ClientScenario(
            "one_byte_at_a_time", "slow", "the whole response written one byte per send()",
            rpc_script(_byte_at_a_time(None)), "OK",
            "PROTOCOL-HTTP2.md Data Frames (frame boundaries mean nothing)",
        ),
        ClientScenario(
            "one_byte_at_a_time_past_deadline", "slow",
            "one byte every 50 ms: the deadline still holds",
            rpc_script(_byte_at_a_time(0.05)), "DEADLINE_EXCEEDED",
            "statuscodes.md DEADLINE_EXCEEDED",
            deadline=1.0, deadline_only=True,
        ),
        ClientScenario(
            "padded_data", "frames",
            "5-byte DATA frames with 255 bytes of padding (~4.4 MB of window)",
            rpc_script(_padded), "OK",
            "RFC 9113 §6.1; negative-http2-interop-test-descriptions.md data_frame_padding",
            deadline=30.0, request_size=17_000 * 5,
        ),
        ClientScenario(
            "continuation_frames", "frames",
            "headers and trailers split over HEADERS + CONTINUATION frames",
            rpc_script(_continuation), "OK", "RFC 9113 §6.10",
        ),
        ClientScenario(
            "header_block_over_call_limit", "frames",
            "a 20 kB response header block (over the 16 KiB per-call limit)",
            rpc_script(_oversized_headers(20_000)), "INTERNAL",
            "RFC 9113 §6.5.2 SETTINGS_MAX_HEADER_LIST_SIZE",
        ),
        ClientScenario(
            "header_block_over_connection_limit", "frames",
            "a 100 kB response header block (over the advertised MAX_HEADER_LIST_SIZE)",
            rpc_script(_oversized_headers(100_000)), "UNAVAILABLE",
            "RFC 9113 §6.5.2 (over the decoder's limit: a connection error); "
            "PROTOCOL-HTTP2.md Connection failure",
        ),
    ]
    return scenarios


# -------------------------------------------------------------------- observations for the report

#: Environment variable naming a JSON-lines file; tools/robustness_report.py sets it.
RECORD_ENV = "ROBUSTNESS_RECORD"


def record_observation(nodeid: str, **fields: Any) -> None:
    """Append one observation (scenario, expected, observed, ...) for docs/robustness.md.

    A no-op unless ``$ROBUSTNESS_RECORD`` is set, so ordinary test runs write nothing.
    """
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    import json

    line = json.dumps({"nodeid": nodeid, **fields}, sort_keys=True, default=str)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(line + "\n")
