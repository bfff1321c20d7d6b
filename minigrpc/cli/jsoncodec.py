"""Requests from JSON, responses to JSON: protobuf's JSON mapping (its ``json_format``).

Requests: each ``-d`` holds one JSON value per message, or several one after another (``{..}
{..}``, with or without blanks or newlines between them), which is how a client stream's
messages are written; ``-d @`` reads them from stdin, as they come, so that a bidirectional
stream can be fed by hand.  A value is turned into the request message by
``json_format.ParseDict``, which refuses a field the message does not have.

Responses: ``json_format.MessageToJson``, exactly as protobuf prints them (two-space indent,
lowerCamelCase names), one per message; ``--emit-defaults`` sets the json_format option that
prints fields holding their default value (``including_default_value_fields`` until protobuf
5.26, ``always_print_fields_with_no_presence`` since).

JSON that does not parse, a duplicate key, or a value that does not fit the message is a
:class:`DataError`, with where it was (``-d #2``, ``stdin``) and the line and column.
"""

import json
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .exits import DATA, ToolError

_BLANKS = " \t\r\n"
_READ_SIZE = 65536


class DataError(ToolError):
    """Request data that cannot become the request message (exit 65, EX_DATAERR)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, DATA)


def _object_without_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """protobuf's JSON parser refuses a key given twice; json.loads would keep the last."""
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} is given twice")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_object_without_duplicates)


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line} column {column}"


def split_values(text: str, where: str) -> List[Any]:
    """The JSON values in ``text``, one after another; :class:`DataError` at the first bad one."""
    values: List[Any] = []
    index = 0
    while True:
        while index < len(text) and text[index] in _BLANKS:
            index += 1
        if index == len(text):
            return values
        try:
            value, index = _DECODER.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: invalid JSON at {_position(text, exc.pos)}: "
                            f"{exc.msg}") from None
        except ValueError as exc:  # a duplicate key
            raise DataError(f"{where}: {exc}") from None
        values.append(value)


def stdin_values(stream: IO[bytes]) -> Iterator[Any]:
    """The JSON values of ``stream``, each as soon as it is complete.

    A value that does not parse yet may only be cut short: more is read, and the error stands
    only when the input ends, or when it lies before the end of what has been read (json's
    error position is then inside the text, not at its end)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    # read1: what is there (a line from a terminal), not a full buffer's worth
    read = getattr(stream, "read1", stream.read)
    buffer = ""
    consumed = ""  # what the values so far took, for line numbers
    ended = False
    while True:
        start = 0
        while start < len(buffer) and buffer[start] in _BLANKS:
            start += 1
        if start == len(buffer):
            consumed += buffer
            buffer = ""
            if ended:
                return
        else:
            try:
                value, end = _DECODER.raw_decode(buffer, start)
            except json.JSONDecodeError as exc:
                cut_short = (exc.msg.startswith("Unterminated string")
                             or exc.pos >= len(buffer.rstrip(_BLANKS)))
                if ended or not cut_short:
                    raise DataError(f"stdin: invalid JSON at "
                                    f"{_position(consumed + buffer, len(consumed) + exc.pos)}: "
                                    f"{exc.msg}") from None
            except ValueError as exc:
                raise DataError(f"stdin: {exc}") from None
            else:
                # A number or a literal at the very end may go on in the next read.
                if ended or end < len(buffer) or isinstance(value, (dict, list, str)):
                    consumed += buffer[:end]
                    buffer = buffer[end:]
                    yield value
                    continue
        if ended:
            continue
        try:
            chunk = read(_READ_SIZE)
        except OSError as exc:
            raise DataError(f"stdin: {exc}") from None
        try:
            buffer += decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            raise DataError(f"stdin: not UTF-8: {exc.reason}") from None
        ended = not chunk


class Requests:
    """The request messages of a call, from its ``-d`` arguments, in order."""

    def __init__(self, data: Sequence[str], stdin: Optional[IO[bytes]]) -> None:
        #: ``(where, values)`` per ``-d``; None in place of the values of ``-d @`` (stdin).
        self._parts: List[Tuple[str, Optional[List[Any]]]] = []
        for number, text in enumerate(data, 1):
            where = f"-d #{number}" if len(data) > 1 else "-d"
            if text.strip() == "@":
                self._parts.append(("stdin", None))
            else:
                self._parts.append((where, split_values(text, where)))
        self._stdin = stdin
        self.given = bool(data)

    def values(self) -> Iterator[Tuple[str, Any]]:
        """``(where, JSON value)`` of each message, stdin read as the iteration gets there."""
        for where, values in self._parts:
            if values is None:
                if self._stdin is None:
                    raise DataError("stdin: no standard input to read")
                for value in stdin_values(self._stdin):
                    yield where, value
            else:
                for value in values:
                    yield where, value

    def messages(self, message_class: Any, pool: Any) -> Iterator[Any]:
        """The values as ``message_class`` instances (``json_format.ParseDict``)."""
        from google.protobuf import json_format

        for index, (where, value) in enumerate(self.values(), 1):
            message = message_class()
            try:
                json_format.ParseDict(value, message, descriptor_pool=pool)
            except json_format.ParseError as exc:
                name = message.DESCRIPTOR.full_name
                raise DataError(f"{where}: request {index} is not a valid {name}: "
                                f"{_indent_rest(str(exc))}") from None
            yield message


def _indent_rest(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n  ".join(lines)


def to_json(message: Any, emit_defaults: bool, pool: Any) -> str:
    """``json_format.MessageToJson(message)``, with the default-value option when asked."""
    from google.protobuf import json_format

    if not emit_defaults:
        return json_format.MessageToJson(message, descriptor_pool=pool)
    try:
        return json_format.MessageToJson(message, descriptor_pool=pool,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf before 5.26 names the option differently
        return json_format.MessageToJson(message, descriptor_pool=pool,
                                         including_default_value_fields=True)


def any_type_names(message: Any) -> Set[str]:
    """The full names of the types packed in ``google.protobuf.Any`` fields anywhere in
    ``message``: json_format prints an Any as its unpacked type, so it needs that type."""
    found: Set[str] = set()
    _collect_any(message, found)
    return found


def _repeated(field: Any) -> bool:
    """``is_repeated`` from protobuf 5.28 on, which then dropped ``label`` (7.x)."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _collect_any(message: Any, found: Set[str]) -> None:
    descriptor = message.DESCRIPTOR
    if descriptor.full_name == "google.protobuf.Any":
        type_url = message.type_url
        if type_url:
            found.add(type_url.rpartition("/")[2])
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for item in value.values():
                    _collect_any(item, found)
        elif _repeated(field):
            for item in value:
                _collect_any(item, found)
        else:
            _collect_any(value, found)
