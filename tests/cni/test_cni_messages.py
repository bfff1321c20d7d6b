"""cni_client.messages against protobuf itself: the generated ``cni_pb2`` is the oracle.

The codec must produce the bytes protobuf produces for a ``CniCmdRequest`` and must accept,
reject and read a ``CniCmdResponse`` exactly as protobuf's upb backend does
(protobuf.dev/programming-guides/encoding; proto/cni.proto). Hypothesis drives valid messages,
arbitrary bytes and structured malformations through both.

The suite also runs on the pure-Python backend (tox ``purepb``) and on protobuf 3.20's C++
backend (tox ``oldest``), which disagree with upb on some malformed input (the module docstring
of cni_client.messages lists how). There the oracle is still the installed backend; an input
on which they disagree must contain one of that backend's documented quirks, found by
:func:`wire_features`, and the literal table below pins upb's answer for those inputs.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, List, Optional, Set, Tuple, Union

import pytest

hypothesis = pytest.importorskip("hypothesis")
import google.protobuf  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402
from google.protobuf.message import DecodeError as ProtobufDecodeError  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cni_client import cni_pb2, messages  # noqa: E402
from cni_client.messages import CniCmdResponse, DecodeError, decode_response  # noqa: E402

BACKEND = api_implementation.Type()  # "upb", "python" or "cpp"
PROTOBUF_MAJOR = int(google.protobuf.__version__.split(".")[0])
LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"

pytestmark = pytest.mark.timeout(1200 if LONG else 120)
REPO_ROOT = Path(__file__).resolve().parents[2]

#: An outcome: "error", or (cni_result, None when error is absent else (code, message)).
Outcome = Union[str, Tuple[bytes, Optional[Tuple[int, str]]]]


def fuzz(examples: int) -> Any:
    """Deterministic hypothesis settings (``examples`` normally, 20x under the long profile)."""
    return settings(
        max_examples=examples * 20 if LONG else examples,
        deadline=None,
        derandomize=not LONG,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ====================================================================== the two decoders


def protobuf_outcome(data: bytes) -> Outcome:
    """What the installed protobuf makes of ``data``.

    The pure-Python backend raises ``UnicodeDecodeError`` instead of ``DecodeError`` for a string
    that is not UTF-8; that still counts as rejecting the message. protobuf 3.20's C++ backend
    warns (RuntimeWarning) where it stops reading early; that is its documented quirk.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            message = cni_pb2.CniCmdResponse.FromString(data)
    except (ProtobufDecodeError, UnicodeDecodeError):
        return "error"
    error = (message.error.code, message.error.message) if message.HasField("error") else None
    return bytes(message.cni_result), error


def codec_outcome(data: bytes) -> Outcome:
    try:
        response = decode_response(data)
    except DecodeError:
        return "error"
    assert isinstance(response.cni_result, bytes)
    if response.error is None:
        return response.cni_result, None
    assert isinstance(response.error.code, int) and isinstance(response.error.message, str)
    return response.cni_result, (response.error.code, response.error.message)


# ============================================================ where the backends disagree


def _minimal_varint_length(value: int) -> int:
    length = 1
    while value >= 0x80:
        value >>= 7
        length += 1
    return length


def wire_features(data: bytes) -> Set[str]:
    """The wire features of ``data`` on which protobuf's backends are known to disagree.

    A deliberately plain walk over the keys (it does not decode values), descending into the
    ``error`` field and its ``details`` like the schema does, until the first malformation:

    * ``long-key``: a key over 5 bytes or over 32 bits (upb rejects it);
    * ``padded-key``: a key written with redundant bytes (upb reads it as the same key);
    * ``top-key-0`` / ``top-end-group``: a key of 0, or an end-group key, at the top level and
      outside any group (protobuf 3.20's C++ backend silently stops reading there);
    * ``long-length``: a length prefix over 5 bytes (upb 7 and cpp reject it; pure-Python and
      upb 6 read up to 10, like any varint);
    * ``group-field-0``: field number 0 inside a group (upb 7 skips it, upb 6 rejects it);
    * ``unclosed-group``: a group still open where its message ends;
    * ``deep-groups``: 99 or more groups nested in one message;
    * ``encoded-surrogate``: a length-delimited value holding a UTF-8-encoded surrogate (PyPy's
      ``str(data, "utf-8")``, which the pure-Python backend uses, accepts it).
    """
    features: Set[str] = set()

    def varint(pos: int, end: int) -> Tuple[int, int]:
        value = 0
        for index in range(10):
            if pos + index >= end:
                raise IndexError
            byte = data[pos + index]
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                return value & ((1 << 64) - 1), pos + index + 1
        raise IndexError

    def walk(pos: int, end: int, level: str) -> None:
        groups: List[int] = []
        while pos < end:
            start = pos
            key, pos = varint(pos, end)
            field_number, wire_type = key >> 3, key & 7
            if pos - start > 5 or key >= 1 << 32:
                features.add("long-key")
            elif pos - start > _minimal_varint_length(key):
                features.add("padded-key")
            if level == "top" and not groups and (key == 0 or wire_type == 4):
                features.add("top-key-0" if key == 0 else "top-end-group")
            if groups and field_number == 0:
                features.add("group-field-0")
            if wire_type == 0:
                pos = varint(pos, end)[1]
            elif wire_type in (1, 5):
                pos += 8 if wire_type == 1 else 4
            elif wire_type == 2:
                length_start = pos
                length, pos = varint(pos, end)
                if pos - length_start > 5:
                    features.add("long-length")
                if pos + length > end:
                    raise IndexError
                if re.search(b"\xed[\xa0-\xbf]", data[pos:pos + length]):
                    features.add("encoded-surrogate")
                inner = {("top", 2): "error", ("error", 3): "any"}.get((level, field_number))
                if inner and not groups:
                    walk(pos, pos + length, inner)
                pos += length
            elif wire_type == 3:
                groups.append(field_number)
                if len(groups) >= 99:
                    features.add("deep-groups")
            elif wire_type == 4 and groups and groups[-1] == field_number:
                groups.pop()
            else:
                raise IndexError
            if pos > end:
                raise IndexError
        if groups:
            features.add("unclosed-group")

    try:
        walk(0, len(data), "top")
    except IndexError:
        pass
    return features


#: Per backend, the features that make it disagree with upb 7 (found by differential fuzzing of
#: protobuf 7.36 upb/python, 6.33 upb and 3.20.3 cpp; the codec's docstring describes each).
BACKEND_QUIRKS = {
    "upb": frozenset(),
    "python": frozenset(
        {"long-key", "padded-key", "long-length", "unclosed-group", "deep-groups"}
    ),
    "cpp": frozenset({"long-key", "padded-key", "top-key-0", "top-end-group", "group-field-0"}),
}
#: upb before protobuf 7 (6.33 is the newest on Python 3.9) rejects field 0 inside a group and
#: reads length prefixes of up to 10 bytes.
QUIRKS = BACKEND_QUIRKS.get(BACKEND, frozenset()) | (
    {"group-field-0", "long-length"} if BACKEND == "upb" and PROTOBUF_MAJOR < 7 else set()
) | ({"encoded-surrogate"} if platform.python_implementation() == "PyPy" else set())


def assert_agrees_with_protobuf(data: bytes) -> None:
    """The codec and the installed protobuf agree on ``data``, or the backend has a documented
    quirk that ``data`` exhibits (never on upb)."""
    expected = protobuf_outcome(data)
    actual = codec_outcome(data)
    if actual == expected:
        return
    quirks = wire_features(data) & QUIRKS
    assert quirks, f"{data.hex()}: codec {actual!r}, protobuf ({BACKEND}) {expected!r}"
    hypothesis.event(f"{BACKEND} {PROTOBUF_MAJOR}.x quirk: {', '.join(sorted(quirks))}")


# ====================================================================== literal cases


def varint(value: int) -> bytes:
    """A minimal varint, written independently of the codec for the literal cases."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def nested_groups(count: int) -> bytes:
    """``count`` unknown groups (field 3) one inside the other."""
    return b"\x1b" * count + b"\x1c" * count


def length_delimited(key: bytes, body: bytes) -> bytes:
    return key + varint(len(body)) + body


ERR = "error"

#: (bytes, what upb makes of them, why). Each row is checked against the codec everywhere and
#: against protobuf when the installed backend has none of the row's quirks.
LITERAL_CASES: List[Tuple[bytes, Outcome, str]] = [
    (b"", (b"", None), "empty message: every field at its default"),
    (b"\x0a\x03abc", (b"abc", None), "key 0x0a = field 1 (cni_result), wire type 2, length 3"),
    (b"\x0a\x01a\x0a\x01b", (b"b", None), "a repeated scalar: the last one wins"),
    (b"\x12\x00", (b"", (0, "")), "error present but empty"),
    (b"\x12\x02\x08\x05", (b"", (5, "")), "error { code: IO_FAILURE }"),
    (b"\x12\x02\x08\x05\x12\x04\x12\x02hi", (b"", (5, "hi")), "two error parts merge"),
    (b"\x12\x02\x08\x05\x12\x02\x08\x07", (b"", (7, "")), "merged error: last code wins"),
    (b"\x12\x0b\x08" + b"\xff" * 9 + b"\x01", (b"", (-1, "")), "negative enum: 10-byte varint"),
    (b"\x12\x06\x08\x85\x80\x80\x80\x10", (b"", (5, "")), "enum over 32 bits: low 32 bits"),
    (b"\x12\x03\x08\xac\x02", (b"", (300, "")), "an enum number cni.proto does not name"),
    (b"\x12\x0b\x08" + b"\xff" * 9 + b"\x7f", (b"", (-1, "")), "bits beyond 64 are dropped"),
    (b"\x12\x0c\x08" + b"\xff" * 10 + b"\x01", ERR, "an 11-byte varint"),
    (b"\x12\x04\x12\x02\xc3\xa9", (b"", (0, "\u00e9")), "UTF-8 message"),
    (b"\x12\x03\x12\x01\xff", ERR, "message is not UTF-8"),
    (b"\x12\x05\x12\x03\xed\xa0\x80", ERR, "message holds an encoded surrogate"),
    (b"\x12\x04\x12\x02\xc0\x80", ERR, "message holds an overlong encoding"),
    (b"\x12\x05\x1a\x03\x0a\x01\xff", ERR, "details[0].type_url is not UTF-8"),
    (b"\x12\x07\x1a\x05\x12\x03\xff\x00\x01", (b"", (0, "")), "details[0].value is bytes"),
    (b"\x12\x06\x1a\x04\x0b\x0c\x12\x01", ERR, "details[0] is truncated inside"),
    (b"\x12\x02\x1a\x00", (b"", (0, "")), "an empty Any in details"),
    (b"\x08\x05\x0a\x01a", (b"a", None), "field 1 as a varint: wrong wire type, unknown"),
    (b"\x10\x05", (b"", None), "field 2 as a varint: unknown, error stays absent"),
    (b"\x13\x08\x05\x14", (b"", None), "field 2 as a group: unknown"),
    (b"\x12\x03\x0a\x01\x05", (b"", (0, "")), "code as length-delimited: unknown"),
    (b"\x12\x05\x0d\x01\x00\x00\x00", (b"", (0, "")), "code as fixed32: unknown"),
    (b"\x78\x01\x0a\x01a", (b"a", None), "unknown varint field 15"),
    (b"\x81\x01" + bytes(8) + b"\x0a\x01a", (b"a", None), "unknown fixed64 field 16"),
    (b"\x2d\x01\x02\x03\x04", (b"", None), "unknown fixed32 field 5"),
    (b"\x22\x02zz\x0a\x01a", (b"a", None), "unknown length-delimited field 4"),
    (b"\x1b\x08\x01\x22\x00\x1c\x0a\x01a", (b"a", None), "unknown group field 3"),
    (b"\x1b\x23\x24\x1c", (b"", None), "nested unknown groups"),
    (b"\x1b\x14", ERR, "group 3 closed by end-group 2"),
    (b"\x1b\x23\x24", ERR, "group never closed"),
    (b"\x1b\x24\x1c", ERR, "stray end-group inside a group"),
    (b"\x0c", ERR, "end-group key at the top level"),
    (b"\x12\x01\x0c", ERR, "end-group key inside error"),
    (b"\x00\x00", ERR, "field number 0"),
    (b"\x02\x00", ERR, "field number 0, length-delimited"),
    (b"\x12\x02\x00\x00", ERR, "field number 0 inside error"),
    (b"\x1b\x00\x00\x1c", (b"", None), "field number 0 inside a skipped group: upb 7 skips it"),
    (b"\x0e", ERR, "wire type 6"),
    (b"\x0f", ERR, "wire type 7"),
    (b"\x1b\x0e\x1c", ERR, "wire type 6 inside a group"),
    (b"\x8a\x00\x03abc", (b"abc", None), "a key with a redundant byte is the same key"),
    (b"\x8a\x80\x80\x80\x00\x03abc", (b"abc", None), "a 5-byte key"),
    (b"\x8a\x80\x80\x80\x80\x00\x03abc", ERR, "a 6-byte key"),
    (b"\xf8\xff\xff\xff\x0f\x00", (b"", None), "the largest field number, 2**29 - 1"),
    (b"\x80\x80\x80\x80\x10\x00", ERR, "a key over 32 bits"),
    (b"\x1b\x9c\x00", (b"", None), "an end-group key with a redundant byte"),
    (b"\x08", ERR, "truncated key value"),
    (b"\x08\x80", ERR, "truncated varint"),
    (b"\x0a\x05ab", ERR, "length beyond the buffer"),
    (b"\x12\x01\x1b\x1c", ERR, "a group running past the end of error"),
    (b"\x09\x01\x02\x03\x04\x05", ERR, "truncated fixed64"),
    (b"\x0d\x01\x02\x03", ERR, "truncated fixed32"),
    (b"\x0a" + b"\xff" * 9 + b"\x01", ERR, "a huge length"),
    (b"\x0a\x83\x80\x80\x80\x00abc", (b"abc", None), "a 5-byte length prefix"),
    (b"\x0a\x83\x80\x80\x80\x80\x00abc", ERR, "a 6-byte length prefix"),
    (b"\x1a\x83\x80\x80\x80\x80\x00abc", ERR, "a 6-byte length prefix, unknown field"),
    (nested_groups(100), (b"", None), "100 nested groups at the top level"),
    (nested_groups(101), ERR, "101 nested groups at the top level"),
    (length_delimited(b"\x12", nested_groups(99)), (b"", (0, "")), "99 groups in error"),
    (length_delimited(b"\x12", nested_groups(100)), ERR, "100 groups in error"),
    (
        length_delimited(b"\x12", length_delimited(b"\x1a", nested_groups(98))),
        (b"", (0, "")),
        "98 groups in an Any",
    ),
    (
        length_delimited(b"\x12", length_delimited(b"\x1a", nested_groups(99))),
        ERR,
        "99 groups in an Any",
    ),
]


@pytest.mark.parametrize(
    "data, upb_outcome", [case[:2] for case in LITERAL_CASES], ids=[c[2] for c in LITERAL_CASES]
)
def test_literal_cases(data: bytes, upb_outcome: Outcome) -> None:
    assert codec_outcome(data) == upb_outcome
    if not wire_features(data) & QUIRKS:
        assert protobuf_outcome(data) == upb_outcome, f"protobuf ({BACKEND}) disagrees"


def test_literal_quirks_are_flagged() -> None:
    """Every literal row where the installed protobuf differs from upb 7 is one of its
    documented quirks (none on upb 7 itself), so the quirk table excuses nothing undocumented."""
    for data, upb_outcome, why in LITERAL_CASES:
        if protobuf_outcome(data) != upb_outcome:
            assert wire_features(data) & QUIRKS, why


def test_decode_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        decode_response(b"\x12\x03\x12\x01\xff")
    assert issubclass(DecodeError, ValueError)


def test_response_objects() -> None:
    response = CniCmdResponse.FromString(b"\x0a\x02{}\x12\x04\x08\x0b\x12\x00")
    assert response == CniCmdResponse(b"{}", messages.Error(11, ""))
    assert repr(response) == "CniCmdResponse(cni_result=b'{}', error=Error(code=11, message=''))"
    with pytest.raises(AttributeError):
        response.extra = 1  # type: ignore[attr-defined]  # __slots__


# ====================================================================== encoding


def protobuf_request(*fields: Any) -> bytes:
    names = ("container_id", "netns", "ifname", "args", "path", "network_configuration")
    cni_args = cni_pb2.CniCmdArgs(**dict(zip(names, fields)))
    return cni_pb2.CniCmdRequest(cni_args=cni_args).SerializeToString()


def test_encode_literal() -> None:
    """``cni_args`` is written even when empty; empty strings are left out (proto3)."""
    assert messages.encode_request("", "", "", "", "", b"") == b"\x0a\x00"
    assert protobuf_request("", "", "", "", "", b"") == b"\x0a\x00"
    encoded = messages.encode_request("abc", "", "eth0", "", "", b"{}")
    assert encoded == b"\x0a\x0f" + b"\x0a\x03abc" + b"\x1a\x04eth0" + b"\x32\x02{}"
    assert encoded == protobuf_request("abc", "", "eth0", "", "", b"{}")


def test_encode_long_fields_use_multibyte_lengths() -> None:
    fields = ("c" * 200, "/var/run/netns/x", "eth0", "é" * 70, "/opt/cni/bin", b"{" * 20000)
    assert messages.encode_request(*fields) == protobuf_request(*fields)


@fuzz(500)
@given(
    st.text(max_size=80),
    st.text(max_size=40),
    st.text(max_size=20),
    st.text(max_size=80),
    st.text(max_size=40),
    st.binary(max_size=300),
)
def test_encode_matches_protobuf(
    container_id: str, netns: str, ifname: str, args: str, path: str, config: bytes
) -> None:
    fields = (container_id, netns, ifname, args, path, config)
    assert messages.encode_request(*fields) == protobuf_request(*fields)


# ====================================================================== valid responses

_CODES = st.one_of(
    st.sampled_from([0, 1, 3, 7, 11, 101, 103, 201, 202]),
    st.integers(-(2**31), 2**31 - 1),
)

_DETAILS = st.lists(st.tuples(st.text(max_size=30), st.binary(max_size=30)), max_size=3)


@st.composite
def protobuf_responses(draw: Callable[..., Any]) -> Any:
    """An arbitrary valid ``CniCmdResponse`` built with protobuf itself."""
    response = cni_pb2.CniCmdResponse(cni_result=draw(st.binary(max_size=100)))
    if draw(st.booleans()):
        response.error.SetInParent()
        response.error.code = draw(_CODES)
        response.error.message = draw(st.text(max_size=60))
        for type_url, value in draw(_DETAILS):
            detail = response.error.details.add()
            detail.type_url = type_url
            detail.value = value
    return response


@fuzz(500)
@given(protobuf_responses())
def test_decode_valid_responses(response: Any) -> None:
    decoded = decode_response(response.SerializeToString())
    assert decoded.cni_result == response.cni_result
    if response.HasField("error"):
        assert decoded.error is not None
        assert decoded.error.code == response.error.code
        assert decoded.error.message == response.error.message
    else:
        assert decoded.error is None


# ====================================================================== malformed input


@fuzz(2000)
@given(st.binary(max_size=48))
def test_arbitrary_bytes(data: bytes) -> None:
    assert_agrees_with_protobuf(data)


_FIELD_NUMBERS = st.sampled_from([0, 1, 2, 3, 4, 5, 15, 16, 2047, 2**29 - 1])


def key_bytes(field_number: int, wire_type: int, padding: int) -> bytes:
    """A key, sometimes with redundant continuation bytes (``padding`` of them)."""
    encoded = bytearray(varint(field_number << 3 | wire_type))
    if padding:
        encoded[-1] |= 0x80
        encoded += b"\x80" * (padding - 1) + b"\x00"
    return bytes(encoded)


_PADDING = st.sampled_from([0, 0, 0, 0, 0, 0, 1, 4, 5])


@st.composite
def unknown_fields(draw: Callable[..., Any], depth: int = 0) -> bytes:
    """One field of any wire type (0-7), a group holding more of them, or a stray end-group."""
    field_number = draw(_FIELD_NUMBERS)
    wire_type = draw(st.integers(0, 7))
    key = key_bytes(field_number, wire_type, draw(_PADDING))
    if wire_type == 0:
        return key + varint(draw(st.integers(0, 2**64 - 1)))
    if wire_type == 1:
        return key + draw(st.binary(min_size=8, max_size=8))
    if wire_type == 5:
        return key + draw(st.binary(min_size=4, max_size=4))
    if wire_type == 2:
        return length_delimited(key, draw(st.binary(max_size=6)))
    if wire_type == 3 and depth < 3:
        inner = b"".join(draw(_GROUP_CONTENTS[depth + 1]))
        end_number = draw(st.one_of(st.just(field_number), _FIELD_NUMBERS))
        return key + inner + key_bytes(end_number, 4, draw(_PADDING))
    return key  # a bare start/end-group key, or wire type 6 or 7


#: The fields inside a group at each nesting depth (built once: strategies are cached).
_GROUP_CONTENTS = [st.lists(unknown_fields(depth), max_size=3) for depth in range(4)]
_UNKNOWN_FIELD = unknown_fields()

_STRING_BYTES = st.one_of(
    st.text(max_size=12).map(lambda text: text.encode("utf-8")),
    st.binary(max_size=6),
)


#: Field by field bodies of ``Any``, ``Error`` and ``CniCmdResponse``, with unknown, misplaced
#: and malformed fields mixed in (strings may be invalid UTF-8, varints any 64-bit value).
ANY_BODIES = st.lists(
    st.one_of(
        _STRING_BYTES.map(lambda value: length_delimited(b"\x0a", value)),
        st.binary(max_size=6).map(lambda value: length_delimited(b"\x12", value)),
        _UNKNOWN_FIELD,
    ),
    max_size=3,
).map(b"".join)
ERROR_BODIES = st.lists(
    st.one_of(
        st.integers(0, 2**64 - 1).map(lambda code: b"\x08" + varint(code)),
        _STRING_BYTES.map(lambda value: length_delimited(b"\x12", value)),
        ANY_BODIES.map(lambda body: length_delimited(b"\x1a", body)),
        _UNKNOWN_FIELD,
    ),
    max_size=4,
).map(b"".join)
STRUCTURED_RESPONSES = st.lists(
    st.one_of(
        st.binary(max_size=8).map(lambda value: length_delimited(b"\x0a", value)),
        ERROR_BODIES.map(lambda body: length_delimited(b"\x12", body)),
        _UNKNOWN_FIELD,
    ),
    max_size=4,
).map(b"".join)

_INSERTIONS = st.one_of(_UNKNOWN_FIELD, st.binary(max_size=3))
_MUTATIONS = st.sampled_from(["flip", "truncate", "insert", "delete"])


@st.composite
def mutated(draw: Callable[..., Any], encodings: Any) -> bytes:
    """An encoding with a few byte-level accidents: flips, truncation, inserted bytes."""
    data = bytearray(draw(encodings))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(_MUTATIONS)
        position = draw(st.integers(0, len(data)))
        if kind == "flip" and data:
            data[min(position, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[position:]
        elif kind == "insert":
            data[position:position] = draw(_INSERTIONS)
        elif kind == "delete":
            del data[position : position + 1]
    return bytes(data)


@fuzz(2000)
@given(
    st.one_of(
        mutated(protobuf_responses().map(lambda response: response.SerializeToString())),
        mutated(STRUCTURED_RESPONSES),
        STRUCTURED_RESPONSES,
    )
)
def test_mutated_encodings(data: bytes) -> None:
    assert_agrees_with_protobuf(data)


# ====================================================================== import cost


def test_import_loads_no_protobuf() -> None:
    """The codec's point is a plugin start without protobuf: importing it must load no
    ``google.*`` module, nor ``re``, ``typing`` or ``dataclasses`` unless Python itself had."""
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import cni_client.messages\n"
        "new = sorted(set(sys.modules) - before)\n"
        "print(' '.join(new))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=str(REPO_ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    new_modules = completed.stdout.split()
    assert "cni_client.messages" in new_modules
    assert not [name for name in new_modules if name == "google" or name.startswith("google.")]
    assert set(new_modules) <= {"__future__", "cni_client", "cni_client.messages"}, new_modules
