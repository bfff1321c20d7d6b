"""Hypothesis fuzzing of every byte path a peer controls.

* The client's response path: generated and mutated HTTP/2 byte streams fed, in arbitrary
  chunks, to :class:`minigrpc.client_protocol.ClientConnectionProtocol` (sans-IO), and through a
  real socket from :class:`tests.support.scripted_peer.ScriptedServer` to a real channel.
* The server's request path: the same for :class:`minigrpc.server_protocol.ServerConnection`,
  and raw sockets against a running ``minigrpc.server()``.
* Every codec of :mod:`minigrpc.wire` (and the status/HTTP/2 helpers): on any input they return
  or raise only their documented exceptions.

The invariants are the issue's: nothing raises an undocumented exception, every call ends with
a StatusCode once the input ends, an OK call has exactly one message, and a server keeps serving.

Budget: ``make test`` runs a fixed, derandomized sample (well under 60 s on two cores);
``HYPOTHESIS_PROFILE=long`` multiplies the examples by 20 and randomizes them (the tox env).
"""

from __future__ import annotations

import concurrent.futures
import gzip
import os
import struct
from typing import Any, Iterator, List, Sequence, Tuple

import hpack
import pytest
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    ExtensionFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from minigrpc import errors, headers, http2, status, wire  # noqa: E402
from minigrpc.status import StatusCode  # noqa: E402
from tests.support.scripted_peer import (  # noqa: E402
    CLIENT_PREFACE,
    HostileClient,
    RawConn,
    ScriptedServer,
    StreamRecord,
    rpc_script,
)

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"


def fuzz(examples: int) -> Any:
    """Settings for one fuzz test: ``examples`` in ``make test``, 20x under the long profile."""
    return settings(
        max_examples=examples * 20 if LONG else examples,
        deadline=None,
        derandomize=not LONG,
        database=None if not LONG else settings.default.database,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


# ============================================================================ frame generation

_STREAM_IDS = st.sampled_from([0, 1, 1, 1, 3, 2, 5, 2**31 - 1])
_ERROR_CODES = st.one_of(st.integers(0, 13), st.integers(0, 2**32 - 1))
_SMALL_BYTES = st.binary(max_size=64)


def _header_value(choices: Sequence[bytes]) -> Any:
    return st.one_of(st.sampled_from(list(choices)), _SMALL_BYTES)


RESPONSE_HEADER = st.one_of(
    st.tuples(st.just(b":status"), _header_value([b"200", b"404", b"503", b"100", b"abc", b""])),
    st.tuples(
        st.just(b"content-type"),
        _header_value([b"application/grpc", b"application/grpc+proto", b"text/html"]),
    ),
    st.tuples(st.just(b"grpc-status"), _header_value([b"0", b"2", b"13", b"17", b"-1", b"x"])),
    st.tuples(st.just(b"grpc-message"), _header_value([b"%zz", b"%FF%FE", b"ok"])),
    st.tuples(st.just(b"grpc-encoding"), _header_value([b"gzip", b"deflate", b"identity", b"x"])),
    st.tuples(st.just(b"grpc-status-details-bin"), _header_value([b"CAISA2JhZA", b"!!"])),
    st.tuples(st.just(b"x-md-bin"), _header_value([b"AAE", b"AAE=", b"a,b"])),
    st.tuples(st.sampled_from([b"x-md", b"te", b"connection", b"Upper", b""]), _SMALL_BYTES),
)

REQUEST_HEADER = st.one_of(
    st.tuples(st.just(b":method"), _header_value([b"POST", b"GET"])),
    st.tuples(st.just(b":scheme"), _header_value([b"http", b"https"])),
    st.tuples(st.just(b":path"), _header_value([b"/f.S/M", b"/f.S/Unknown", b"", b"*"])),
    st.tuples(st.just(b":authority"), _header_value([b"localhost"])),
    st.tuples(
        st.just(b"content-type"), _header_value([b"application/grpc", b"text/plain"])
    ),
    st.tuples(st.just(b"te"), _header_value([b"trailers"])),
    st.tuples(st.just(b"grpc-timeout"), _header_value([b"1S", b"100m", b"0n", b"99999999H"])),
    st.tuples(st.just(b"grpc-encoding"), _header_value([b"gzip", b"identity", b"snappy"])),
    st.tuples(st.sampled_from([b"x-md-bin", b"x-md", b"user-agent", b":bogus"]), _SMALL_BYTES),
)


def _message_payload() -> Any:
    body = st.binary(max_size=200)
    return st.one_of(
        body.map(lambda b: wire.encode_message(b)),
        st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1), body).map(
            lambda t: struct.pack(">BI", t[0], t[1]) + t[2]
        ),
        body.map(lambda b: wire.encode_message(gzip.compress(b), compressed=True)),
        st.binary(max_size=100),
    )


def frame_specs(header: Any) -> Any:
    """One generated frame description (rendered in order by :func:`render`)."""
    headers = st.lists(header, max_size=8)
    return st.one_of(
        st.tuples(
            st.just("settings"),
            st.dictionaries(st.integers(1, 10), st.integers(0, 2**32 - 1), max_size=3),
            st.booleans(),
        ),
        st.tuples(st.just("headers"), _STREAM_IDS, headers, st.booleans(), st.booleans()),
        st.tuples(st.just("continuation"), _STREAM_IDS, headers, st.booleans()),
        st.tuples(
            st.just("data"), _STREAM_IDS, _message_payload(), st.booleans(),
            st.one_of(st.none(), st.integers(0, 255)),
        ),
        st.tuples(st.just("rst"), _STREAM_IDS, _ERROR_CODES),
        st.tuples(st.just("goaway"), st.integers(0, 2**31 - 1), _ERROR_CODES, _SMALL_BYTES),
        st.tuples(st.just("ping"), st.binary(min_size=8, max_size=8), st.booleans()),
        st.tuples(st.just("window"), _STREAM_IDS, st.integers(0, 2**31 - 1)),
        st.tuples(st.just("priority"), _STREAM_IDS, _STREAM_IDS),
        st.tuples(st.just("unknown"), st.integers(10, 255), _STREAM_IDS, _SMALL_BYTES),
        st.tuples(st.just("raw"), st.binary(max_size=40)),
    )


def _frame(cls: Any, stream_id: int, *args: Any, **kwargs: Any) -> Any:
    """Build a frame on any stream id, legal or not (hyperframe checks only in __init__)."""
    legal = 0 if cls in (SettingsFrame, PingFrame, GoAwayFrame) else 1
    frame = cls(legal, *args, **kwargs)
    frame.stream_id = stream_id
    return frame


def render(specs: Sequence[Tuple[Any, ...]]) -> bytes:
    """Serialize frame descriptions with one hpack encoder (its table state is sequential)."""
    encoder = hpack.Encoder()
    out: List[bytes] = []
    for spec in specs:
        kind = spec[0]
        if kind == "settings":
            frame: Any = (
                SettingsFrame(0, flags=["ACK"]) if spec[2] else SettingsFrame(0, settings=spec[1])
            )
        elif kind == "headers":
            flags = (["END_STREAM"] if spec[3] else []) + (["END_HEADERS"] if spec[4] else [])
            frame = _frame(HeadersFrame, spec[1], encoder.encode(spec[2]), flags=flags)
        elif kind == "continuation":
            flags = ["END_HEADERS"] if spec[3] else []
            frame = _frame(ContinuationFrame, spec[1], encoder.encode(spec[2]), flags=flags)
        elif kind == "data":
            frame = _frame(DataFrame, spec[1], spec[2], flags=["END_STREAM"] if spec[3] else [])
            if spec[4] is not None:
                frame.flags.add("PADDED")
                frame.pad_length = spec[4]
        elif kind == "rst":
            frame = _frame(RstStreamFrame, spec[1], error_code=spec[2])
        elif kind == "goaway":
            frame = GoAwayFrame(0, last_stream_id=spec[1], error_code=spec[2],
                                additional_data=spec[3])
        elif kind == "ping":
            frame = PingFrame(0, opaque_data=spec[1], flags=["ACK"] if spec[2] else [])
        elif kind == "window":
            frame = WindowUpdateFrame(spec[1], window_increment=spec[2])
        elif kind == "priority":
            frame = _frame(PriorityFrame, spec[1], depends_on=spec[2])
        elif kind == "unknown":
            frame = ExtensionFrame(spec[1], spec[2], flag_byte=0, body=spec[3])
        else:
            out.append(spec[1])
            continue
        out.append(frame.serialize())
    return b"".join(out)


def chunked(data: bytes, cuts: Sequence[int]) -> Iterator[bytes]:
    """``data`` cut at the given offsets (as a socket may deliver it)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for start, end in zip(points, points[1:]):
        yield data[start:end]


def mutate(data: bytes, edits: Sequence[Tuple[int, int, int]]) -> bytes:
    """Apply (position, operation, byte) edits: 0 replace, 1 insert, 2 delete."""
    buffer = bytearray(data)
    for position, operation, value in edits:
        if not buffer:
            buffer.append(value)
            continue
        index = position % len(buffer)
        if operation == 0:
            buffer[index] = value
        elif operation == 1:
            buffer.insert(index, value)
        else:
            del buffer[index]
    return bytes(buffer)


EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2), st.integers(0, 255)),
                 max_size=6)
CUTS = st.lists(st.integers(0, 10**6), max_size=8)


def valid_response(payload: bytes = b"\x08\x01") -> bytes:
    encoder = hpack.Encoder()
    return b"".join(
        [
            SettingsFrame(0, settings={4: 65535}).serialize(),
            SettingsFrame(0, flags=["ACK"]).serialize(),
            HeadersFrame(1, encoder.encode([(b":status", b"200"),
                                            (b"content-type", b"application/grpc")]),
                         flags=["END_HEADERS"]).serialize(),
            DataFrame(1, wire.encode_message(payload)).serialize(),
            HeadersFrame(1, encoder.encode([(b"grpc-status", b"0"), (b"grpc-message", b"")]),
                         flags=["END_HEADERS", "END_STREAM"]).serialize(),
        ]
    )


def valid_request(payload: bytes = b"\x08\x01") -> bytes:
    encoder = hpack.Encoder()
    return b"".join(
        [
            CLIENT_PREFACE,
            SettingsFrame(0, settings={2: 0}).serialize(),
            HeadersFrame(1, encoder.encode([
                (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/f.S/M"),
                (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
                (b"te", b"trailers"), (b"grpc-timeout", b"5S"),
            ]), flags=["END_HEADERS"]).serialize(),
            DataFrame(1, wire.encode_message(payload), flags=["END_STREAM"]).serialize(),
        ]
    )


# ============================================================================ client, sans-IO

client_protocol = pytest.importorskip("minigrpc.client_protocol")


def _client_with_call() -> Tuple[Any, Any]:
    proto = client_protocol.ClientConnectionProtocol()
    proto.initiate()
    call = client_protocol.ClientCall(
        request=wire.encode_message(b"\x08\x01"),
        headers=headers.request_headers(
            path="/f.S/M", authority="localhost", user_agent="fuzz/1"
        ),
    )
    proto.start_call(call)
    proto.data_to_send()
    return proto, call


_CLIENT_EVENTS = (
    client_protocol.CallFinished,
    client_protocol.ResponseStarted,
    client_protocol.MessageReceived,
    client_protocol.WindowOpened,
    client_protocol.GoAwayReceived,
    client_protocol.ConnectionFailed,
)


def _drive_client(stream: bytes, cuts: Sequence[int]) -> None:
    proto, call = _client_with_call()
    for chunk in chunked(stream, cuts):
        for event in proto.receive_data(chunk):
            assert isinstance(event, _CLIENT_EVENTS), event
        assert isinstance(proto.data_to_send(), bytes)
    proto.connection_lost("fuzz: end of input")
    final = call.status
    assert final is not None, "the call has no status once the connection is gone"
    assert isinstance(final.code, StatusCode)
    assert isinstance(final.details, str)
    str(final)  # the grpc-go style text never fails
    if final.code is StatusCode.OK:
        assert len(call.messages) == 1


@fuzz(300)
@given(
    specs=st.lists(frame_specs(RESPONSE_HEADER), max_size=12),
    with_settings=st.booleans(),
    cuts=CUTS,
)
def test_client_response_path_generated_frames(
    specs: List[Tuple[Any, ...]], with_settings: bool, cuts: List[int]
) -> None:
    prefix = SettingsFrame(0).serialize() if with_settings else b""
    _drive_client(prefix + render(specs), cuts)


@fuzz(300)
@given(edits=EDITS, cuts=CUTS, payload=st.binary(max_size=100))
def test_client_response_path_mutated_response(
    edits: List[Tuple[int, int, int]], cuts: List[int], payload: bytes
) -> None:
    _drive_client(mutate(valid_response(payload), edits), cuts)


# ============================================================================ server, sans-IO

server_protocol = pytest.importorskip("minigrpc.server_protocol")


def _drive_server(stream: bytes, cuts: Sequence[int]) -> None:
    conn = server_protocol.ServerConnection()
    conn.initiate()
    conn.data_to_send()
    for chunk in chunked(stream, cuts):
        for event in conn.receive_data(chunk):
            if isinstance(event, server_protocol.CallStarted):
                if event.method != "/f.S/M":
                    conn.reject_call(event.stream_id, StatusCode.UNIMPLEMENTED, "fuzz")
            elif isinstance(event, server_protocol.RequestReady):
                conn.finish_call(event.stream_id, StatusCode.OK, message=event.message)
            else:
                assert isinstance(event, server_protocol.CallTerminated), event
                assert isinstance(event.code, StatusCode)
        assert isinstance(conn.data_to_send(), bytes)
    for event in conn.connection_lost("fuzz: end of input"):
        assert isinstance(event, server_protocol.CallTerminated)
    assert conn.active_calls == 0 or conn.closed


@fuzz(300)
@given(
    specs=st.lists(frame_specs(REQUEST_HEADER), max_size=12),
    with_preface=st.booleans(),
    cuts=CUTS,
)
def test_server_request_path_generated_frames(
    specs: List[Tuple[Any, ...]], with_preface: bool, cuts: List[int]
) -> None:
    prefix = CLIENT_PREFACE + SettingsFrame(0).serialize() if with_preface else b""
    _drive_server(prefix + render(specs), cuts)


@fuzz(300)
@given(edits=EDITS, cuts=CUTS, payload=st.binary(max_size=100))
def test_server_request_path_mutated_request(
    edits: List[Tuple[int, int, int]], cuts: List[int], payload: bytes
) -> None:
    _drive_server(mutate(valid_request(payload), edits), cuts)


# ============================================================================ over real sockets


def _channel_module() -> Any:
    try:
        import minigrpc
        import minigrpc.channel  # the client; skip until it lands
    except Exception as exc:
        pytest.skip(f"minigrpc's client is not available: {exc!r}")
    return minigrpc


@pytest.mark.timeout(120)
@fuzz(20)
@given(
    specs=st.lists(frame_specs(RESPONSE_HEADER), max_size=8),
    edits=EDITS,
    close=st.booleans(),
)
def test_client_over_socket(specs: List[Tuple[Any, ...]], edits: List[Any], close: bool) -> None:
    """A real channel against a peer answering with generated bytes: an outcome, never a hang."""
    minigrpc = _channel_module()
    answer = mutate(valid_response()[18:], edits) if edits else render(specs)

    def fault(conn: RawConn, request: StreamRecord) -> Any:
        conn.send(answer)
        return "close" if close else None

    with ScriptedServer(rpc_script(fault)) as server, minigrpc.insecure_channel(
        server.target
    ) as channel:
        call = channel.unary_unary(
            "/f.S/M", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        try:
            call(b"\x08\x01", timeout=0.5)
        except minigrpc.RpcError as exc:
            assert isinstance(exc.code(), StatusCode)


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    try:
        import minigrpc
        import minigrpc.server_api  # the server; skip until it lands
    except Exception as exc:
        pytest.skip(f"minigrpc's server is not available: {exc!r}")
    from tests.support.scripted_peer import short_temp_dir

    directory = short_temp_dir()
    target = "unix:" + os.path.join(directory, "fuzz.sock")
    handler = minigrpc.method_handlers_generic_handler(
        "f.S", {"M": minigrpc.unary_unary_rpc_method_handler(lambda request, context: request)}
    )
    server = minigrpc.server(concurrent.futures.ThreadPoolExecutor(2), handlers=[handler])
    server.add_insecure_port(target)
    server.start()
    yield target
    server.stop(0).wait(10)
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.timeout(120)
@fuzz(40)
@given(specs=st.lists(frame_specs(REQUEST_HEADER), max_size=8), edits=EDITS)
def test_server_over_socket(echo_server: str, specs: List[Any], edits: List[Any]) -> None:
    """Generated bytes on a real connection; a well-formed call on another one still works."""
    stream = mutate(valid_request(), edits) if edits else CLIENT_PREFACE + render(specs)
    with HostileClient(echo_server, record_frames=False) as attacker:
        attacker.send(stream)
    with HostileClient(echo_server) as good:
        good.send_preface()
        record = good.unary("/f.S/M", b"ping")
        assert record.messages == [b"ping"], record
        assert record.trailers and (b"grpc-status", b"0") in record.trailers


# ============================================================================ codecs


@fuzz(400)
@given(data=st.binary(max_size=300), cuts=CUTS, limit=st.one_of(st.none(), st.integers(0, 64)))
def test_message_decoder_any_bytes(data: bytes, cuts: List[int], limit: Any) -> None:
    decoder = wire.MessageDecoder(limit)
    try:
        for chunk in chunked(data, cuts):
            for compressed, payload in decoder.feed(chunk):
                assert isinstance(compressed, bool) and isinstance(payload, bytes)
                assert limit is None or len(payload) <= limit
    except (errors.ProtocolViolation, errors.MessageTooLarge):
        pass
    assert decoder.buffered >= 0


@fuzz(300)
@given(value=st.one_of(st.binary(max_size=12), st.text(max_size=12)))
def test_decode_timeout_any_value(value: Any) -> None:
    try:
        seconds = wire.decode_timeout(value)
    except ValueError:
        return
    assert seconds >= 0


@fuzz(300)
@given(seconds=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_encode_timeout_is_always_decodable(seconds: float) -> None:
    header = wire.encode_timeout(seconds)
    assert len(header) <= 9
    assert wire.decode_timeout(header) >= (seconds if 0 < seconds < 1e12 else 0) - 1e-9 or (
        header.endswith("H")
    )


@fuzz(300)
@given(headers=st.lists(st.tuples(_SMALL_BYTES, _SMALL_BYTES), max_size=10))
def test_decode_metadata_never_raises(headers: List[Tuple[bytes, bytes]]) -> None:
    for key, value in wire.decode_metadata(headers):
        assert isinstance(key, str)
        assert isinstance(value, bytes if key.endswith("-bin") else str)


@fuzz(300)
@given(metadata=st.lists(st.tuples(st.one_of(st.text(max_size=10), _SMALL_BYTES),
                                   st.one_of(st.text(max_size=10), _SMALL_BYTES, st.integers())),
                         max_size=5))
def test_validate_metadata_raises_only_value_error(metadata: List[Any]) -> None:
    try:
        encoded = wire.encode_metadata(metadata)
    except ValueError:
        return
    decoded = wire.decode_metadata(encoded)
    assert len(decoded) == len(encoded)


@fuzz(300)
@given(value=st.one_of(st.binary(max_size=60), st.text(max_size=60)))
def test_percent_decode_never_fails(value: Any) -> None:
    assert isinstance(wire.percent_decode(value), str)


@fuzz(300)
@given(message=st.text(max_size=60))
def test_percent_round_trip(message: str) -> None:
    encoded = wire.percent_encode(message)
    assert encoded.isascii()
    if "\ud800" > message or not any(0xD800 <= ord(c) <= 0xDFFF for c in message):
        assert wire.percent_decode(encoded) == message


@fuzz(300)
@given(
    encoding=st.sampled_from(["gzip", "deflate", "identity", "snappy", ""]),
    data=st.one_of(st.binary(max_size=200), st.binary(max_size=200).map(gzip.compress)),
    edits=EDITS,
    limit=st.one_of(st.none(), st.integers(0, 300)),
)
def test_decompress_any_input(encoding: str, data: bytes, edits: List[Any], limit: Any) -> None:
    try:
        out = wire.decompress(encoding, mutate(data, edits), limit)
    except (errors.DecompressionError, errors.MessageTooLarge, errors.UnsupportedEncoding):
        return
    assert limit is None or len(out) <= limit


def test_decompress_identity_respects_the_limit() -> None:
    """Found by test_decompress_any_input: identity ignored max_length. Fixed in wire.decompress."""
    with pytest.raises(errors.MessageTooLarge):
        wire.decompress("identity", b"\x00\x01", 1)


@fuzz(200)
@given(value=st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=40)))
def test_header_parsers_never_raise(value: Any) -> None:
    assert isinstance(wire.parse_accept_encoding(value), frozenset)
    code, number = status.parse_grpc_status(value)
    assert isinstance(code, StatusCode)
    assert number is None or isinstance(number, int)


@fuzz(200)
@given(number=st.integers(-(2**40), 2**40))
def test_status_tables_total(number: int) -> None:
    assert isinstance(status.status_from_http(number), StatusCode)
    if number >= 0:
        assert isinstance(status.status_from_rst_stream(number, past_deadline=True), StatusCode)
        assert isinstance(status.http2_error_name(number), str)


@fuzz(300)
@given(data=st.binary(max_size=300), cuts=CUTS, preface=st.booleans())
def test_frame_splitter_keeps_every_byte(data: bytes, cuts: List[int], preface: bool) -> None:
    splitter = http2.FrameSplitter(expect_preface=preface)
    stream = (CLIENT_PREFACE if preface else b"") + data
    out = []
    try:
        for chunk in chunked(stream, cuts):
            out.extend(splitter.feed(chunk))
    except http2.PrefaceError:
        return
    # The preface itself is passed on too: h2's server side checks it again.
    assert b"".join(out) == stream


@fuzz(200)
@given(target=st.text(max_size=40))
def test_parse_target_raises_only_value_error(target: str) -> None:
    targets = pytest.importorskip("minigrpc.targets")
    try:
        targets.parse_target(target)
    except ValueError:
        pass
