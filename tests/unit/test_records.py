"""minigrpc._records.Record against typing.NamedTuple: the same class, made without typing.

The modules of the one-shot path declare their named tuples with :class:`Record` so that they
need not import :mod:`typing` at run time (docs/benchmarks.md, the health probe's cold start);
everything else in minigrpc, and any code that received one of them, expects what
``typing.NamedTuple`` makes.  Each check here runs on both and compares.
"""

import copy
import pickle
from typing import Any, Dict, NamedTuple, Optional, Tuple

import pytest

from minigrpc._records import Record
from minigrpc.protocol.status import CallStatus
from minigrpc.protocol.targets import Target

#: One class body, made once with each base.
BODY = '''
class Made(Base):
    """A record."""

    number: int
    text: "Optional[str]" = None
    extra: "Tuple[int, ...]" = ()

    @property
    def twice(self) -> int:
        return self.number * 2

    def label(self) -> str:
        return f"{self.number}:{self.text}"
'''


def made_with(base: Any, name: str) -> Any:
    namespace: Dict[str, Any] = {"Base": base, "Optional": Optional, "Tuple": Tuple}
    exec(BODY.replace("Made", name), namespace)
    return namespace[name]


ByRecord = made_with(Record, "ByRecord")
ByNamedTuple = made_with(NamedTuple, "ByNamedTuple")

BOTH = pytest.mark.parametrize("cls", [ByRecord, ByNamedTuple], ids=["Record", "NamedTuple"])


def named(value: object) -> str:
    return repr(value).replace("ByRecord", "X").replace("ByNamedTuple", "X")


def test_fields_defaults_and_construction_match() -> None:
    for args, kwargs in [((1,), {}), ((1, "a"), {}), ((1, "a", (2,)), {}), ((), {"number": 3}),
                         ((4,), {"extra": (5, 6)})]:
        made = ByRecord(*args, **kwargs)
        expected = ByNamedTuple(*args, **kwargs)
        assert made == expected and hash(made) == hash(expected)
        assert named(made) == named(expected)
        assert made.twice == expected.twice and made.label() == expected.label()
    assert ByRecord._fields == ByNamedTuple._fields == ("number", "text", "extra")
    assert dict(ByRecord._field_defaults) == dict(ByNamedTuple._field_defaults)
    assert ByRecord.__doc__ == ByNamedTuple.__doc__ == "A record."


@BOTH
def test_tuple_behaviour(cls: type) -> None:
    value = cls(1, "a", (2,))
    number, text, extra = value
    assert (number, text, extra) == (1, "a", (2,)) and value[1] == "a" and len(value) == 3
    assert isinstance(value, tuple) and not hasattr(value, "__dict__")
    assert value._replace(text="b") == cls(1, "b", (2,))
    assert value._asdict() == {"number": 1, "text": "a", "extra": (2,)}
    assert cls._make([7, "x", ()]) == cls(7, "x", ())
    assert copy.copy(value) == value == copy.deepcopy(value)
    with pytest.raises(AttributeError):
        value.number = 2


@pytest.mark.parametrize("make", [
    lambda cls: cls(),
    lambda cls: cls(1, "a", (), 4),
    lambda cls: cls(1, unknown=2),
    lambda cls: cls(1)._replace(unknown=2),
    lambda cls: cls._make([1]),
], ids=["missing", "too many", "unknown keyword", "replace unknown", "make short"])
def test_same_errors(make: object) -> None:
    errors = []
    for cls in (ByRecord, ByNamedTuple):
        with pytest.raises(Exception) as caught:
            make(cls)  # type: ignore[operator]
        errors.append(type(caught.value))
    assert errors[0] is errors[1]


def test_a_default_before_a_field_without_one_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default field 'later' follows a default field"):
        class Wrong(Record):
            first: int = 1
            later: int


def test_the_one_shot_records_pickle_and_compare() -> None:
    status = CallStatus(14, "unavailable", (("k", "v"),))
    assert pickle.loads(pickle.dumps(status)) == status
    assert status._replace(details="x").details == "x" and status.code_name == "UNAVAILABLE"
    target = Target(1, "/run/x.sock", "localhost", "unix:/run/x.sock")
    assert pickle.loads(pickle.dumps(target)) == target and target.is_unix
    assert repr(status).startswith("CallStatus(code_number=14, details='unavailable'")
