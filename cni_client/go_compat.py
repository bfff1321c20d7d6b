"""What the Go plugin's libraries do with text, byte for byte: encoding/json and strconv.

The Go antrea-cni plugin reads its configuration with Go's ``encoding/json`` and prints results
and errors with it; its messages quote values with ``strconv.Quote`` and parse versions with
``strconv.Atoi``.  A runtime compares what the plugin prints, so the Python plugin reproduces
each of these exactly, including where Go differs from Python's ``json``: HTML escaping on
output, U+FFFD for bytes that are not UTF-8, case-insensitive field matching with the last
match winning, numbers never converted, a nesting limit of 10000, and Go's error texts.
Everything here is pure and loads nothing beyond the standard library (``json`` and ``re``
only for a document that the small decoder leaves to them), because every plugin run pays for
its imports.
"""

import codecs

# typing costs ~5 ms of import time; annotations are strings here, as in skel.py.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple

__all__ = [
    "GO_MAX_NESTING_DEPTH",
    "GoParseError",
    "JsonInputError",
    "decode_json_document",
    "go_atoi",
    "go_json_indent",
    "go_json_string",
    "go_quote",
    "go_string_field",
]


# --------------------------------------------------------------------------------------------
# encoding/json output: quoted strings with escapeHTML on, and MarshalIndent




def go_json_string(text: str) -> str:
    """Quote ``text`` as Go's ``encoding/json`` does (escapeHTML on; docs/cni-plugin-behaviour.md,
    "Output bytes").

    ``<``, ``>``, ``&``, U+2028 and U+2029 are escaped; \\b \\f \\n \\r \\t use short forms; other
    C0 controls become lowercase ``\\u00xx``; everything else stays raw.  Surrogates (our
    stand-ins for bytes that were not UTF-8) become the literal escape ``\\ufffd`` like Go's
    encoder writes for invalid UTF-8.
    """
    out: List[str] = ['"']
    for ch in text:
        code = ord(ch)
        if code >= 0x80:
            if 0xD800 <= code <= 0xDFFF:
                out.append("\\ufffd")
            elif code == 0x2028 or code == 0x2029:
                out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        elif ch in _ASCII_ESCAPES:
            out.append(_ASCII_ESCAPES[ch])
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_ASCII_ESCAPES: "Dict[str, str]" = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
}


def go_json_indent(value: "Any", level: int = 0) -> str:
    """Go's ``MarshalIndent`` with a 4-space indent: HTML-escaped strings, ``{}``/``[]`` for
    empty containers, keys in the order given (dicts keep insertion order)."""
    pad, inner = "    " * level, "    " * (level + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{go_json_string(key)}: {go_json_indent(item, level + 1)}"
                 for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [inner + go_json_indent(item, level + 1) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    if isinstance(value, str):
        return go_json_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if value is None:
        return "null"
    raise TypeError(f"cannot encode {type(value).__name__}")


# --------------------------------------------------------------------------------------------
# strconv: %q quoting and Atoi




def go_quote(text: str) -> str:
    """``strconv.Quote`` / ``%q``: Go escapes for quotes, backslash and non-printable runes.

    Go's ``IsPrint`` (letters, marks, numbers, punctuation, symbols, ASCII space) is the same
    set as Python's ``str.isprintable``.  Surrogates stand for undecodable bytes: ``\\xNN``."""
    out: List[str] = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_QUOTE_SHORT:
            out.append(_GO_QUOTE_SHORT[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_QUOTE_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                   "\v": "\\v"}


class GoParseError(ValueError):
    """A parse failure carrying Go's error text."""


def go_atoi(text: str) -> int:
    """``strconv.Atoi`` on a 64-bit platform: optional sign then ASCII digits only.

    A syntax error is reported at the first non-digit, a range error as soon as the value
    stops fitting in uint64 (even if junk follows), then the int64 bounds are checked:
    exactly the order of Go's ParseUint/ParseInt."""
    body, negative = text, False
    if body[:1] in ("+", "-"):
        negative = body[0] == "-"
        body = body[1:]
    syntax = GoParseError(f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax")
    out_of_range = GoParseError(f"strconv.Atoi: parsing {go_quote(text)}: value out of range")
    if not body:
        raise syntax
    value = 0
    for ch in body:
        if not "0" <= ch <= "9":
            raise syntax
        value = value * 10 + (ord(ch) - 48)
        if value > 0xFFFFFFFFFFFFFFFF:
            raise out_of_range
    if value > (1 << 63) - (0 if negative else 1):
        raise out_of_range
    return -value if negative else value


# --------------------------------------------------------------------------------------------
# encoding/json input: what json.Unmarshal accepts, and how it fills a string field




def _go_replace_invalid_utf8(exc: UnicodeError) -> "Tuple[str, int]":
    """One U+FFFD per undecodable byte, as Go's ``utf8.DecodeRune`` yields (width 1)."""
    assert isinstance(exc, UnicodeDecodeError)
    return ("\ufffd", exc.start + 1)


codecs.register_error("cni-go-replace", _go_replace_invalid_utf8)


class _JsonObject(list):  # type: ignore[type-arg,unused-ignore]
    """A decoded JSON object as its key/value pairs, in order, duplicates kept (Go sees all)."""


class JsonInputError(ValueError):
    """JSON that Go's ``json.Unmarshal`` would reject; str() is the description."""


def _reject_constant(name: str) -> object:
    raise JsonInputError(f"invalid character {name[0]!r} looking for beginning of value"
                          f" ({name} is not JSON)")


def decode_json_document(data: bytes) -> object:
    """Parse ``data`` as strict JSON the way Go accepts it.

    Differences from ``json.loads(bytes)`` that matter (docs/cni-plugin-behaviour.md, "Python parity
    pitfalls"): UTF-8 only (no BOM stripping, no UTF-16 detection), bytes that are not UTF-8 become
    U+FFFD (so they are fine inside strings and a syntax error elsewhere), NaN/Infinity are
    rejected, numbers are never converted (no int digit limit), and objects keep every key in order.
    """
    text = data.decode("utf-8", "cni-go-replace")
    if not text.strip(" \t\r\n"):
        raise JsonInputError("unexpected end of JSON input")
    try:
        return _decode_plain_document(text)
    except _NotPlain:
        pass  # an error, or input the small decoder leaves to json: the same answer, slower
    return _decode_with_json(text)


def _decode_with_json(text: str) -> object:
    """:func:`decode_json_document` by :mod:`json`, whose error texts the plugin reports."""
    import json  # not needed by VERSION, env errors or a plain network config

    decoder = json.JSONDecoder(
        object_pairs_hook=_JsonObject,
        parse_constant=_reject_constant,
        parse_int=lambda _text: 0,
        parse_float=lambda _text: 0.0,
    )
    try:
        return decoder.decode(text)
    except RecursionError:
        pass  # nested deeper than Python's recursion allows, but Go accepts up to 10000
    except ValueError as exc:  # json.JSONDecodeError and JsonInputError
        raise JsonInputError(str(exc)) from None
    return _decode_deep_document(text)


class _NotPlain(Exception):
    """Raised by :func:`_decode_plain_document` for input it leaves to :mod:`json`."""


#: What :func:`_decode_plain_document` accepts between tokens, as :mod:`json` and RFC 8259 §2 do.
_JSON_SPACE = " \t\n\r"
_JSON_DIGITS = "0123456789"
_JSON_HEX = frozenset("0123456789abcdefABCDEF")
#: RFC 8259 §7: characters that must be escaped inside a string.
_JSON_CONTROL = frozenset(chr(code) for code in range(0x20))
_JSON_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
                       "r": "\r", "t": "\t"}
_JSON_LITERALS = (("true", True), ("false", False), ("null", None))
#: Deeper documents go to json (and, past its recursion limit, to the iterative parser).
_PLAIN_MAX_DEPTH = 100


def _decode_plain_document(text: str) -> object:
    """Parse a network config without importing :mod:`json` and :mod:`re` (about 10 ms of a
    cold start, with the enum module json's regular expressions load).

    It accepts a subset of strict JSON (RFC 8259): whatever it returns is exactly what
    :func:`decode_json_document`'s :mod:`json` path returns for the same text (objects as pair
    lists, integers as 0, other numbers as 0.0).  Anything it is unsure of (every error, a
    ``\\u`` escape of a surrogate, nesting past :data:`_PLAIN_MAX_DEPTH`) raises
    :class:`_NotPlain`, and the caller hands the text to :mod:`json`, so error texts stay
    :mod:`json`'s."""
    value, position = _plain_value(text, _plain_space(text, 0), 0)
    if _plain_space(text, position) != len(text):
        raise _NotPlain
    return value


def _plain_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_SPACE:
        position += 1
    return position


def _plain_value(text: str, position: int, depth: int) -> "Tuple[object, int]":
    """The value starting at ``position`` and where it ends (RFC 8259 §3)."""
    char = text[position:position + 1]
    if char == '"':
        return _plain_string(text, position + 1)
    if char == "{" or char == "[":
        if depth >= _PLAIN_MAX_DEPTH:
            raise _NotPlain
        return _plain_container(text, position, depth + 1)
    for word, literal in _JSON_LITERALS:
        if text.startswith(word, position):
            return literal, position + len(word)
    return _plain_number(text, position)


def _plain_container(text: str, position: int, depth: int) -> "Tuple[object, int]":
    """An object (RFC 8259 §4) or an array (§5) opening at ``position``."""
    is_object = text[position] == "{"
    close = "}" if is_object else "]"
    container: List[Any] = _JsonObject() if is_object else []
    position = _plain_space(text, position + 1)
    if text.startswith(close, position):
        return container, position + 1
    while True:
        if is_object:
            if not text.startswith('"', position):
                raise _NotPlain
            key, position = _plain_string(text, position + 1)
            position = _plain_space(text, position)
            if not text.startswith(":", position):
                raise _NotPlain
            item, position = _plain_value(text, _plain_space(text, position + 1), depth)
            container.append((key, item))
        else:
            item, position = _plain_value(text, position, depth)
            container.append(item)
        position = _plain_space(text, position)
        if text.startswith(",", position):
            position = _plain_space(text, position + 1)
        elif text.startswith(close, position):
            return container, position + 1
        else:
            raise _NotPlain


def _plain_string(text: str, position: int) -> "Tuple[str, int]":
    """The string whose opening quote is just before ``position`` (RFC 8259 §7)."""
    parts: List[str] = []
    while True:
        quote = text.find('"', position)
        if quote < 0:
            raise _NotPlain
        backslash = text.find("\\", position, quote)
        raw = text[position:quote if backslash < 0 else backslash]
        if not _JSON_CONTROL.isdisjoint(raw):
            raise _NotPlain
        parts.append(raw)
        if backslash < 0:
            return "".join(parts), quote + 1
        escape = text[backslash + 1:backslash + 2]
        if escape == "u":
            digits = text[backslash + 2:backslash + 6]
            if len(digits) != 4 or not _JSON_HEX.issuperset(digits):
                raise _NotPlain
            code = int(digits, 16)
            if 0xD800 <= code <= 0xDFFF:  # pairs and lone halves: json's rules
                raise _NotPlain
            parts.append(chr(code))
            position = backslash + 6
        elif escape in _JSON_SHORT_ESCAPES:
            parts.append(_JSON_SHORT_ESCAPES[escape])
            position = backslash + 2
        else:
            raise _NotPlain


def _plain_number(text: str, position: int) -> "Tuple[object, int]":
    """A number (RFC 8259 §6) as the decoder's hooks make it: 0 for an integer, 0.0 otherwise
    (a fraction or an exponent)."""
    if text.startswith("-", position):
        position += 1
    start = position
    position = _plain_digits(text, position)
    if text[start] == "0" and position - start > 1:
        raise _NotPlain  # a leading zero
    fraction = text.startswith(".", position)
    if fraction:
        position = _plain_digits(text, position + 1)
    exponent = text.startswith(("e", "E"), position)
    if exponent:
        position += 1
        if text.startswith(("+", "-"), position):
            position += 1
        position = _plain_digits(text, position)
    return (0.0 if fraction or exponent else 0), position


def _plain_digits(text: str, position: int) -> int:
    """Where the run of at least one digit starting at ``position`` ends."""
    start = position
    while position < len(text) and text[position] in _JSON_DIGITS:
        position += 1
    if position == start:
        raise _NotPlain
    return position


#: encoding/json's scanner limit (``maxNestingDepth``): deeper input is a syntax error.
GO_MAX_NESTING_DEPTH = 10000


def _decode_deep_document(text: str) -> object:
    """An iterative JSON parser for documents too deep for the recursive ``json`` decoder.

    Same results as :func:`decode_json_document` (objects as pair lists, numbers as 0, strings
    decoded by ``json``) and Go's nesting limit; only reached for absurdly nested input."""
    import json
    import re

    token = re.compile(
        r'[ \t\n\r]*(?:("(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")'
        r"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)|(true|false|null)|([{}\[\]:,]))")
    literals = {"true": True, "false": False, "null": None}
    stack: List[Tuple[object, List[str]]] = []  # (container, [pending object key])
    state = "value"  # value | value_or_close | key | key_or_close | colon | after | end
    root: object = None
    position = 0

    def fail(what: str) -> JsonInputError:
        return JsonInputError(f"{what} at offset {position}")

    def add(value: object) -> str:
        nonlocal root
        if not stack:
            root = value
            return "end"
        container, key = stack[-1]
        if isinstance(container, _JsonObject):
            container.append((key[0], value))
        else:
            assert isinstance(container, list)
            container.append(value)
        return "after"

    while state != "end":
        match = token.match(text, position)
        if match is None:
            raise fail("invalid character" if text[position:].strip(" \t\r\n")
                       else "unexpected end of JSON input")
        position = match.end()
        string, number, literal, punct = match.groups()
        if state in ("value", "value_or_close"):
            if punct in ("{", "["):
                if len(stack) >= GO_MAX_NESTING_DEPTH:
                    raise fail("exceeded max depth")
                stack.append((_JsonObject() if punct == "{" else [], [""]))
                state = "key_or_close" if punct == "{" else "value_or_close"
            elif punct == "]" and state == "value_or_close":
                state = add(stack.pop()[0])
            elif string is not None:
                state = add(json.loads(string))
            elif number is not None:
                state = add(0)
            elif literal is not None:
                state = add(literals[literal])
            else:
                raise fail("invalid character looking for beginning of value")
        elif state in ("key", "key_or_close"):
            if string is not None:
                stack[-1][1][0] = json.loads(string)
                state = "colon"
            elif punct == "}" and state == "key_or_close":
                state = add(stack.pop()[0])
            else:
                raise fail("invalid character looking for beginning of object key string")
        elif state == "colon":
            if punct != ":":
                raise fail("invalid character after object key")
            state = "value"
        else:  # after a value inside a container
            is_object = isinstance(stack[-1][0], _JsonObject)
            if punct == ",":
                state = "key" if is_object else "value"
            elif punct == ("}" if is_object else "]"):
                state = add(stack.pop()[0])
            else:
                raise fail("invalid character after value")
    if text[position:].strip(" \t\r\n"):
        raise fail("invalid character after top-level value")
    return root


def _go_json_kind(value: object) -> str:
    if isinstance(value, _JsonObject):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


# bytes.EqualFold maps these two non-ASCII runes onto ASCII letters; nothing else can fold onto
# an ASCII key such as "name" or "cniVersion".
_GO_FOLD_SPECIAL = {"\u017f": "S", "\u212a": "K"}


def _go_fold(key: str) -> str:
    return "".join(ch.upper() if ch < "\x80" else _GO_FOLD_SPECIAL.get(ch, ch) for ch in key)


def _without_lone_surrogates(text: str) -> str:
    """Go's decoder turns a lone ``\\udXXX`` escape into U+FFFD; Python keeps the surrogate."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def go_string_field(document: object, field: str, struct_desc: str) -> str:
    """Unmarshal ``document`` into ``struct { X string `json:"<field>"` }`` and return X.

    Keys match case-insensitively and the last match wins; ``null`` leaves the value alone;
    a non-string value is an error but decoding goes on and the first error is reported,
    all as Go's ``encoding/json`` does."""
    if document is None:
        return ""
    if not isinstance(document, _JsonObject):
        raise JsonInputError(f"json: cannot unmarshal {_go_json_kind(document)}"
                              f" into Go value of type {struct_desc}")
    folded_field = _go_fold(field)
    value = ""
    first_error = ""
    for key, item in document:
        if _go_fold(key) != folded_field or item is None:
            continue
        if isinstance(item, str):
            value = _without_lone_surrogates(item)
        elif not first_error:
            first_error = (f"json: cannot unmarshal {_go_json_kind(item)}"
                           f" into Go struct field .{field} of type string")
    if first_error:
        raise JsonInputError(first_error)
    return value
