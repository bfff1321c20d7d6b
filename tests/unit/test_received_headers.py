"""minigrpc's checks of received header blocks make the decisions h2's inbound validation makes.

minigrpc checks received blocks itself (:func:`minigrpc.protocol.headers.malformed_request` and its
siblings), so that a malformed block costs one stream instead of the connection (RFC 9113
§8.1.1). h2's inbound validation is an independent implementation of the same rules, and no
block that it refuses may get through, so these tests generate blocks around valid ones,
mutated in every way RFC 9113 §8.2-8.3 forbids, and compare the verdicts with h2's own
``validate_headers``.

One difference is deliberate: a value with whitespace around it is accepted, as grpcio's and
grpc-go's servers accept it (grpcio's client sends such metadata). h2 is therefore asked about
the block with that whitespace removed.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import h2.exceptions
import h2.utilities
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minigrpc.protocol import headers

Header = Tuple[bytes, bytes]

REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/pkg.Svc/Method"),
           (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
           (b"te", b"trailers"), (b"x-app", b"value")]
RESPONSE = [(b":status", b"200"), (b"content-type", b"application/grpc"), (b"x-app", b"value")]
TRAILERS = [(b"grpc-status", b"0"), (b"grpc-message", b""), (b"x-app", b"value")]

NAMES = [b":method", b":scheme", b":path", b":authority", b":status", b":protocol", b":custom",
         b"", b"X-Upper", b"x-app", b"name:colon", b"sp ace", b"caf\xc3\xa9", b"del\x7f", b"te",
         b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade",
         b"host", b"cookie", b"grpc-timeout"]
# CONNECT is left out: h2 releases differ on its rules (see test_connect_requests).
VALUES = [b"", b"POST", b"GET", b"http", b"/", b"/pkg.Svc/Method", b"localhost", b"other", b" ",
          b" padded ", b"\ttab", b"trailers", b"TRAILERS", b" trailers", b"gzip", b"a\x00b",
          b"a\rb", b"a\nb", b"200", b"value"]


def h2_refuses(block: Sequence[Header], *, response: bool = False, trailer: bool = False) -> bool:
    """h2's verdict on ``block`` as received, whitespace around values removed first."""
    flags = h2.utilities.HeaderValidationFlags(
        is_client=response or trailer, is_trailer=trailer, is_response_header=response,
        is_push_promise=False)
    stripped = [(name, value.strip(b" \t")) for name, value in block]
    try:
        list(h2.utilities.validate_headers(stripped, flags))
    except h2.exceptions.ProtocolError:
        return True
    return False


def _h2_checks_characters() -> bool:
    return h2_refuses([*RESPONSE, (b"x-bad", b"a\nb")], response=True)


needs_character_checks = pytest.mark.skipif(
    not _h2_checks_characters(),
    reason="this h2 does not check field characters (RFC 9113 §8.2.1), which the "
           "comparison needs; h2 4.3 and later do")


@st.composite
def mutated(draw: st.DrawFn, base: List[Header]) -> List[Header]:
    """``base`` with fields dropped, moved, and foreign fields inserted."""
    block = [field for field in base if draw(st.sampled_from([True, True, True, False]))]
    if draw(st.booleans()):
        block = draw(st.permutations(block))
    for _ in range(draw(st.integers(0, 3))):
        field = (draw(st.sampled_from(NAMES)), draw(st.sampled_from(VALUES)))
        block.insert(draw(st.integers(0, len(block))), field)
    return block


CASES: List[Tuple[str, List[Header], Callable[[Sequence[Header]], str], dict]] = [
    ("request", REQUEST, headers.malformed_request, {}),
    ("response", RESPONSE, headers.malformed_response, {"response": True}),
    ("trailers", TRAILERS, headers.malformed_trailers, {"trailer": True}),
]


@needs_character_checks
@pytest.mark.parametrize("kind, base, check, flags", CASES, ids=[case[0] for case in CASES])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_same_verdict_as_h2(kind: str, base: List[Header],
                            check: Callable[[Sequence[Header]], str], flags: dict,
                            data: st.DataObject) -> None:
    block = data.draw(mutated(base))
    problem = check(block)
    assert bool(problem) == h2_refuses(block, **flags), (block, problem)


@pytest.mark.parametrize("kind, base, check, flags", CASES, ids=[case[0] for case in CASES])
def test_valid_blocks_pass(kind: str, base: List[Header],
                           check: Callable[[Sequence[Header]], str], flags: dict) -> None:
    assert check(base) == ""
    assert not h2_refuses(base, **flags)


@pytest.mark.parametrize("field, expected", [
    ((b"X-Upper", b"v"), "not lower-case"),
    ((b"connection", b"close"), "connection-specific"),
    ((b"te", b"gzip"), "te other than trailers"),
    ((b"x-app", b"a\r\nb"), "NUL, CR or LF"),
    ((b":custom", b"v"), "not allowed here"),
    ((b":status", b"200"), "not allowed here"),
    ((b":path", b"/again"), "twice"),
])
def test_each_problem_is_named(field: Header, expected: str) -> None:
    # Pseudo-headers go first, where they are allowed (RFC 9113 §8.3).
    block = [field, *REQUEST] if field[0].startswith(b":") else [*REQUEST, field]
    assert expected in headers.malformed_request(block)


def test_pseudo_header_after_a_regular_field() -> None:
    assert "after a regular field" in headers.malformed_request(REQUEST[1:] + REQUEST[:1])


def test_whitespace_around_values_is_accepted() -> None:
    block = [*REQUEST, (b"x-padded", b" 2 "), (b"x-tab", b"\tz")]
    assert headers.malformed_request(block) == ""


@pytest.mark.parametrize("block, valid", [
    # Extended CONNECT (RFC 8441 §4) carries the usual pseudo-headers and :protocol.
    ([(b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"http"),
      (b":path", b"/"), (b":authority", b"h")], True),
    # An ordinary CONNECT (RFC 9113 §8.5) has neither :scheme nor :path.
    ([(b":method", b"CONNECT"), (b":authority", b"h:443")], True),
    ([(b":method", b"CONNECT"), (b":scheme", b"http"), (b":authority", b"h:443")], False),
    ([(b":method", b"POST"), (b":protocol", b"websocket"), (b":scheme", b"http"),
      (b":path", b"/"), (b":authority", b"h")], False),
])
def test_connect_requests(block: List[Header], valid: bool) -> None:
    assert (headers.malformed_request(block) == "") is valid
