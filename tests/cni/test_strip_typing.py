"""tools/strip_typing.py on small modules: what it rewrites, what it refuses, and that the result
runs without typing."""

from __future__ import annotations

import ast
import builtins
import collections
import importlib.util
import os
from typing import Any, Dict, List, Optional
from unittest import mock

import pytest

from tests.support.cni import REPO_ROOT

_SPEC = importlib.util.spec_from_file_location(
    "strip_typing", os.path.join(REPO_ROOT, "tools", "strip_typing.py"))
assert _SPEC is not None and _SPEC.loader is not None
strip_typing: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(strip_typing)


def run_stripped(source: str, imported: Optional[List[str]] = None) -> Dict[str, Any]:
    """Execute the stripped module with an ``__import__`` that refuses typing; the names it
    imports are appended to ``imported``.  The hook is the builtins module's own for the
    duration (PyPy's import statement ignores an ``__import__`` in the module's
    ``__builtins__``), and counts only the imports made from the module's namespace."""
    tree = strip_typing.strip_typing(ast.parse(source))
    real_import = builtins.__import__
    namespace: Dict[str, Any] = {"__name__": "probe"}

    def no_typing(name: str, globals: Any = None, *args: Any, **kwargs: Any) -> Any:
        if globals is namespace:
            assert name != "typing", "the stripped module imported typing"
            if imported is not None:
                imported.append(name)
        return real_import(name, globals, *args, **kwargs)

    with mock.patch("builtins.__import__", no_typing):
        exec(compile(tree, "probe", "exec"), namespace)
    return namespace


def test_annotations_aliases_and_type_checking_blocks_go() -> None:
    namespace = run_stripped(
        "from typing import TYPE_CHECKING, Dict, Optional, Tuple\n"
        "if TYPE_CHECKING:\n"
        "    from os import PathLike\n"
        "else:\n"
        "    PathLike = str\n"
        "Pair = Tuple[bytes, bytes]\n"
        "TABLE: Dict[str, int] = {'a': 1}\n"
        "def twice(x: 'PathLike', *rest: int, flag: Optional[bool] = None, **more: str) -> str:\n"
        "    local: int = 2\n"
        "    return x * local\n"
        "class Empty:\n"
        "    only: int\n"
        "def nothing() -> None:\n"
        "    if TYPE_CHECKING:\n"
        "        import os\n")
    assert namespace["TYPE_CHECKING"] is False
    assert namespace["PathLike"] is str
    assert namespace["Pair"] is None
    assert namespace["TABLE"] == {"a": 1}
    assert namespace["twice"]("ab") == "abab"
    assert namespace["twice"].__annotations__ == {}
    assert "only" not in vars(namespace["Empty"])
    assert namespace["nothing"]() is None


def test_named_tuple_becomes_a_tuple_class_that_behaves_as_namedtuple() -> None:
    imported: List[str] = []
    point = run_stripped(
        "from typing import NamedTuple, Optional\n"
        "class Point(NamedTuple):\n"
        "    x: int\n"
        "    y: int = 0\n"
        "    label: Optional[str] = None\n", imported)["Point"]
    reference = collections.namedtuple("Point", "x y label", defaults=(0, None))
    assert "collections" not in imported
    assert point.__bases__ == (tuple,)
    assert point.__doc__ == reference.__doc__ == "Point(x, y, label)"
    assert point._fields == reference._fields
    for arguments, keywords in (((3,), {}), ((3, -4, "a"), {}), ((1,), {"label": "b"})):
        made, expected = point(*arguments, **keywords), reference(*arguments, **keywords)
        assert made == expected and repr(made) == repr(expected)
        assert (made.x, made.y, made.label) == (expected.x, expected.y, expected.label)
        assert made._asdict() == dict(expected._asdict())
        assert made._replace(y=9) == expected._replace(y=9)
        assert type(made._replace(y=9)) is point
        assert made.__getnewargs__() == expected.__getnewargs__()
    assert point._make([1, 2, 3]) == reference._make([1, 2, 3])
    with pytest.raises(TypeError):
        point._make([1, 2])
    with pytest.raises(Exception) as expected_error:
        reference(1)._replace(z=2)
    with pytest.raises(expected_error.type, match="unexpected field names"):
        point(1)._replace(z=2)
    with pytest.raises(AttributeError):
        point(1).x = 2
    with pytest.raises(TypeError):
        point()


def test_named_tuple_keeps_its_docstring_and_methods() -> None:
    namespace = run_stripped(
        "from typing import NamedTuple, Optional\n"
        "class Point(NamedTuple):\n"
        "    '''A point.'''\n"
        "    x: int\n"
        "    y: int = 0\n"
        "    label: Optional[str] = None\n"
        "    @property\n"
        "    def norm(self) -> int:\n"
        "        return abs(self.x) + abs(self.y)\n")
    point = namespace["Point"]
    assert point._fields == ("x", "y", "label")
    assert point(3) == (3, 0, None) and point(3, -4).norm == 7
    assert repr(point(1, label="a")) == "Point(x=1, y=0, label='a')"
    assert point(1)._replace(y=2) == point(1, 2)
    assert point.__doc__ == "A point."
    assert not hasattr(point(1), "__dict__")


def test_a_named_tuple_under_its_run_time_name_is_written_out_and_its_stand_in_goes() -> None:
    """The one-shot path's modules write ``class X(Record)``, ``Record`` being typing's
    NamedTuple to a type checker and minigrpc._records.Record at run time; the bundle writes
    the class out and imports neither."""
    imported: List[str] = []
    namespace = run_stripped(
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n"
        "    from typing import NamedTuple as Record\n"
        "    from typing import Optional\n"
        "else:\n"
        "    from minigrpc._records import Record\n"
        "    from os import sep\n"
        "class Point(Record):\n"
        "    x: int\n"
        "    label: 'Optional[str]' = None\n", imported)
    point = namespace["Point"]
    assert point.__bases__ == (tuple,) and point(1) == (1, None)
    assert repr(point(2, "a")) == "Point(x=2, label='a')"
    assert "Record" not in namespace and "sep" in namespace
    assert imported == ["os"], imported


@pytest.mark.parametrize("source", [
    "from typing import cast\nx = cast(int, 1)\n",
    "from typing import Generic, TypeVar\nT = TypeVar('T')\nclass Box(Generic[T]):\n    pass\n",
    "from typing import NamedTuple\nP = NamedTuple('P', [('x', int)])\n",
    "from typing import NamedTuple\nclass P(NamedTuple):\n    x: int = 0\n    y: int\n",
    "import typing\nx: typing.Any = 1\n",
    "from typing import Dict\nclass A:\n    Alias = Dict[str, int]\n",
])
def test_runtime_uses_of_typing_are_refused(source: str) -> None:
    with pytest.raises(strip_typing.Unsupported):
        strip_typing.strip_typing(ast.parse(source))
