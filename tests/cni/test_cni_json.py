"""The network config decoder's small path against its :mod:`json` path.

:func:`cni_client.go_compat.decode_json_document` first tries a small strict decoder that loads
neither :mod:`json` nor :mod:`re` (cold start) and hands everything it is unsure of to
:mod:`json`.  The contract checked here: whatever the small decoder accepts, the :mod:`json` path
accepts too and returns the very same values (types included: pair lists for objects, 0 and 0.0
for numbers); every error goes to :mod:`json`, so the plugin's error texts are json's; and
ordinary network configs take the small path.
"""

from __future__ import annotations

import json
from typing import Any, List

import pytest

from cni_client import go_compat

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def shape(value: object) -> Any:
    """``value`` with every type spelt out, so that 0 == 0.0 == False cannot hide a difference."""
    if isinstance(value, go_compat._JsonObject):
        return ("object", [(type(key).__name__, key, shape(item)) for key, item in value])
    if isinstance(value, list):
        return ("array", [shape(item) for item in value])
    return (type(value).__name__, value)


def strings(value: object) -> str:
    """Every key and string in ``value``, joined."""
    if isinstance(value, dict):
        return "".join(key + strings(item) for key, item in value.items())
    if isinstance(value, list):
        return "".join(strings(item) for item in value)
    return value if isinstance(value, str) else ""


def plain(text: str) -> object:
    return go_compat._decode_plain_document(text)


def with_json(text: str) -> object:
    return go_compat._decode_with_json(text)


ACCEPTED = [
    '{"cniVersion": "1.0.0", "ipam": {"type": "host-local"}, "name": "antrea", "type": "antrea"}',
    '{"cniVersion":"0.3.1","name":"antrea","plugins":[{"type":"antrea","ipam":{"type":'
    '"host-local"}},{"type":"portmap","capabilities":{"portMappings":true}},{"type":"bandwidth",'
    '"capabilities":{"bandwidth":true}}]}',
    ' \t\r\n{"name" : "a" , "x" : [ ] , "y" : { } }\n\n',
    '{"name":"ok","name":null,"NAME":"x"}',
    '{"n\\u0061me":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u4e2d","x":"\u00e9\u4e2d\U0001f600\x7f"}',
    '{"n":[0,-0,1,-12,0.5,-0.25,1e5,1E+5,1e-5,2.5e10,-0.0e0]}',
    '{"big":1' + "0" * 400 + ',"f":1' + "0" * 400 + '.5}',
    '[true,false,null,"",[],{},[[[]]]]',
    '"a string"', "12", "-3.5", "true", "null",
    '{"x":"\ufffd"}',
    '{"deep":' + "[" * 99 + "]" * 99 + "}",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_plain_documents_take_the_small_path_with_json_s_values(text: str) -> None:
    assert shape(plain(text)) == shape(with_json(text))


REFUSED = [
    "", " ", "{", "}", "[", "]", "{,}", "[,]", "[1,]", '{"a":1,}', '{"a" 1}', '{"a":}', "{1:2}",
    "{'a':1}", '{"a":1}x', '{"a":1}{}', "01", "-", "-01", "1.", ".5", "1e", "1e+", "+1", "1.e5",
    "NaN", "Infinity", "-Infinity", "nul", "truex", "True", '"abc', '"a\\x"', '"a\\u12"',
    '"a\\u12g4"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00"', '"tab\there"', '"nl\nhere"',
    '"\x00"', "\ufeff{}", '{"a":1}\x00', "[1 2]", '{"a":1 "b":2}',
    '{"deep":' + "[" * 100 + "]" * 100 + "}",
    "\u0661", '{"a":\u0661}', "[1\u00a0]",
]


@pytest.mark.parametrize("text", REFUSED)
def test_errors_and_unusual_input_go_to_json(text: str) -> None:
    with pytest.raises(go_compat._NotPlain):
        plain(text)


def test_json_path_still_answers_what_the_small_path_refuses() -> None:
    """The refused rows that are valid JSON decode through json, surrogates as json keeps them."""
    assert shape(go_compat.decode_json_document(b'"\\ud83d\\ude00"')) == ("str", "\U0001f600")
    assert shape(go_compat.decode_json_document(b'"\\ud800"')) == ("str", "\ud800")
    with pytest.raises(go_compat.JsonInputError, match="Extra data"):
        go_compat.decode_json_document(b'{"a":1}x')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans(), st.sampled_from([None, 0, 2]))
def test_what_json_writes_decodes_alike(value: object, ascii_only: bool, indent: Any) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    try:
        decoded = plain(text)
    except go_compat._NotPlain:
        # Only a \\u escape of a surrogate: json writes a character outside the BMP so
        assert ascii_only and any(ord(ch) > 0xFFFF for ch in strings(value))
        return
    assert shape(decoded) == shape(with_json(text))


@settings(max_examples=400, deadline=None)
@given(json_values, st.data())
def test_mutated_documents_are_never_accepted_differently(value: object, data: Any) -> None:
    """Edit what json writes at random: the small path either refuses or agrees with json."""
    text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
    chars: List[str] = list(text)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        where = data.draw(st.integers(min_value=0, max_value=len(chars)))
        edit = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        char = data.draw(st.sampled_from(list('{}[]:,"\\ .-+eE0123456789tfnulx\t\n\x01\u00e9')))
        if edit == "insert":
            chars.insert(where, char)
        elif where < len(chars):
            if edit == "delete":
                del chars[where]
            else:
                chars[where] = char
    mutated = "".join(chars)
    try:
        decoded = plain(mutated)
    except go_compat._NotPlain:
        return
    assert shape(decoded) == shape(with_json(mutated))
