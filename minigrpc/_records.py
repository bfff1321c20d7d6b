"""Records: immutable tuples with named, typed fields, made without :mod:`typing`.

``class CallStatus(Record)`` with annotated fields reads, type-checks and behaves as
``class CallStatus(typing.NamedTuple)`` does: a type checker is shown ``typing.NamedTuple``
itself (the modules import ``Record`` under ``TYPE_CHECKING`` from :mod:`typing`), and at run time
:class:`Record` makes the same kind of class: a ``tuple`` subclass with empty ``__slots__``, a
read-only attribute per field, the defaults, ``_fields``, ``_field_defaults``, ``_make``,
``_replace``, ``_asdict``, ``__getnewargs__`` (so it pickles and copies) and
``namedtuple``'s ``repr``; the class body's own methods, properties and docstring stay.

Why not ``typing.NamedTuple``: the modules a one-shot call imports (the CNI plugin, ``python -m
minigrpc health``) would then import :mod:`typing`, and on CPython 3.6 that and its
``collections.namedtuple``, which compiles each class from a page of source text, cost more than
the interpreter's whole start.  Only ``__new__`` is compiled here, from one line, as
``namedtuple`` does on 3.7 and later, so that making a record costs what making a namedtuple does.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable, Dict, Iterable, Tuple

__all__ = ["Record"]


def _field_property(index: int, doc: str) -> "Any":
    from operator import itemgetter

    return property(itemgetter(index), doc=doc)


try:  # CPython 3.8+: the C descriptor namedtuple's fields use, faster than a property
    from _collections import _tuplegetter  # type: ignore[import-not-found]
except ImportError:  # CPython 3.6/3.7, PyPy
    _field_getter: "Callable[[int, str], Any]" = _field_property
else:
    _field_getter = _tuplegetter

#: What ``_replace`` raises for a name that is not a field: ``namedtuple``'s own error, which
#: became a TypeError in CPython 3.13 (a ValueError before it).
_UNKNOWN_FIELD_ERROR = TypeError if sys.version_info >= (3, 13) else ValueError

#: What a record class's namespace may not redefine (it would break the tuple underneath).
_RESERVED = frozenset(("__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                       "_field_defaults", "_make", "_replace", "_asdict"))


def _make(cls: "Any", iterable: "Iterable[Any]") -> "Any":
    values = tuple.__new__(cls, iterable)
    if len(values) != len(cls._fields):
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(values)}")
    return values


def _replace(self: "Any", **changes: "Any") -> "Any":
    values = self._make(map(changes.pop, self._fields, self))
    if changes:
        raise _UNKNOWN_FIELD_ERROR(f"Got unexpected field names: {list(changes)!r}")
    return values


def _asdict(self: "Any") -> "Dict[str, Any]":
    return dict(zip(self._fields, self))


def _getnewargs(self: "Tuple[Any, ...]") -> "Tuple[Any, ...]":
    return tuple(self)


def _repr(self: "Any") -> str:
    fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"{type(self).__name__}({fields})"


class _RecordMeta(type):
    """Turns ``class X(Record)`` into a tuple class (``typing.NamedTuple``'s way: the result
    is not a subclass of :class:`Record`)."""

    def __new__(mcls, name: str, bases: "Tuple[type, ...]", namespace: "Dict[str, Any]") -> "Any":
        if namespace.get("_root", False):
            return super().__new__(mcls, name, bases, namespace)
        if bases != (Record,):
            raise TypeError("a record class derives from Record alone")
        fields = tuple(namespace.get("__annotations__", {}))
        defaults: Dict[str, Any] = {}
        for field in fields:
            if field.startswith("_"):
                raise ValueError(f"field names cannot start with an underscore: {field!r}")
            if field in namespace:
                defaults[field] = namespace[field]
            elif defaults:
                raise TypeError(f"non-default field {field!r} follows a default field")
        arguments = ", ".join(fields)
        source = (f"def __new__(_cls, {arguments}): return _tuple_new(_cls, ({arguments}"
                  f"{',' if len(fields) == 1 else ''}))")
        scope: Dict[str, Any] = {"_tuple_new": tuple.__new__}
        exec(source, scope)
        new = scope["__new__"]
        new.__defaults__ = tuple(defaults.values()) or None
        new.__qualname__ = f"{name}.__new__"
        body: Dict[str, Any] = {
            "__doc__": f"{name}({arguments})",
            "__slots__": (),
            "__new__": new,
            "__getnewargs__": _getnewargs,
            "__repr__": _repr,
            "_fields": fields,
            "_field_defaults": defaults,
            "_make": classmethod(_make),
            "_replace": _replace,
            "_asdict": _asdict,
        }
        for index, field in enumerate(fields):
            body[field] = _field_getter(index, f"Alias for field number {index}")
        for key, value in namespace.items():
            if key in _RESERVED:
                raise AttributeError(f"cannot overwrite record attribute {key}")
            if key not in defaults and key != "__annotations__":
                body[key] = value
        body["__annotations__"] = dict(namespace.get("__annotations__", {}))
        return type.__new__(type, name, (tuple,), body)


class Record(metaclass=_RecordMeta):
    """Derive a record class from it, with annotated fields (see the module's docstring)."""

    _root = True
