"""Remove ``typing`` from a module's syntax tree, for the plugin bundle's bytecode.

The plugin's modules carry type hints throughout, and Python evaluates a function's annotations
when it defines the function.  The modules of the one-shot path already import :mod:`typing` for
type checkers only (``TYPE_CHECKING``) and quote the annotations Python evaluates, since typing
with :mod:`re` costs a cold start on 3.11 about 5 ms of the 10 ms a bare interpreter needs to
start at all; but each quoted annotation is still a constant to load, and the rest of the tree
imports typing as usual.  Type hints do nothing at run time, so tools/build_dist.py compiles the
bundle's own modules from a tree with them removed (the sources and everything that imports them
from the repository keep them):

* annotations of arguments and returns go; ``x: T = v`` becomes ``x = v`` and a bare ``x: T``
  goes (outside a ``NamedTuple``);
* ``from typing import ...`` goes, ``TYPE_CHECKING`` from it becomes ``TYPE_CHECKING = False``, and
  ``if TYPE_CHECKING:`` blocks keep only their ``else``;
* a module-level name bound to an expression of typing names (a type alias such as
  ``Header = Tuple[bytes, bytes]``) is bound to None, so that other modules still import it;
* ``class X(NamedTuple)`` (also under another name, as the one-shot path's
  ``minigrpc._records.Record`` is to a type checker) becomes a plain ``tuple`` subclass written
  out in full: empty ``__slots__``, ``_fields``, ``__new__`` with the defaults, a read-only
  property per field, ``__repr__``, ``_make``, ``_replace``, ``_asdict`` and
  ``__getnewargs__``, then the class's own
  body (without a docstring, ``namedtuple``'s ``"X(field, ...)"``): the same fields, tuple, repr
  and methods as ``collections.namedtuple`` gives.  Not ``namedtuple`` itself:
  :mod:`collections` (with heapq, operator, keyword and reprlib) costs a cold start about 2 ms on
  CPython 3.6 to 3.10, and on 3.6 ``namedtuple`` compiles each class from source text when it is
  made, several hundred microseconds a class.

Anything else that uses a typing name at run time (``cast``, ``TypeVar``, ``Generic``,
``overload``, ...) is not rewritten: :func:`strip_typing` raises :class:`Unsupported` and the
builder compiles that module as written (it then imports :mod:`typing` itself, correct but
slower).

The builder runs this with every interpreter it compiles for (CPython 3.6 to 3.13, PyPy), so it is
written for all of them: it touches only nodes that every version's :mod:`ast` has, and builds new
nodes by parsing source text with the running interpreter.
"""

import ast
from typing import Any, Dict, List, Optional, Union

__all__ = ["Unsupported", "strip_typing"]


class Unsupported(Exception):
    """The module uses typing in a way this transform does not rewrite."""


def _parse_statement(text: str, like: ast.AST) -> Any:
    statement = ast.parse(text).body[0]
    return ast.copy_location(statement, like)


def _typing_imports(tree: ast.AST) -> Dict[str, str]:
    """The names bound by ``from typing import ...`` and ``import typing`` anywhere in
    ``tree``, each with what it stands for in typing."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "typing" and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "typing" or alias.name.startswith("typing."):
                    raise Unsupported(f"line {node.lineno}: import typing")
    return names


def _is_type_expression(node: ast.AST, names: Dict[str, str]) -> bool:
    """``Tuple[bytes, bytes]``, ``Optional[int]`` or a bare typing name: what a type alias binds
    (a call such as ``cast(...)`` is not one)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id in names


class _Stripper(ast.NodeTransformer):
    def __init__(self, typing_names: Dict[str, str]) -> None:
        self.typing_names = typing_names
        self.depth = 0  # 0: module level

    # -- imports and TYPE_CHECKING blocks
    def visit_ImportFrom(self, node: ast.ImportFrom) -> Optional[ast.AST]:
        if node.module != "typing" or node.level:
            return node
        if any(alias.name == "TYPE_CHECKING" for alias in node.names):
            name = next(alias.asname or alias.name for alias in node.names
                        if alias.name == "TYPE_CHECKING")
            return _parse_statement(f"{name} = False", node)
        return None

    def visit_If(self, node: ast.If) -> Union[ast.AST, List[ast.AST]]:
        test = node.test
        if isinstance(test, ast.Name) and (
                test.id == "TYPE_CHECKING" or self.typing_names.get(test.id) == "TYPE_CHECKING"):
            kept: List[ast.AST] = []
            for statement in node.orelse:
                if isinstance(statement, ast.ImportFrom):
                    # The run-time stand-in of a typing name (minigrpc._records.Record for
                    # NamedTuple) has no use once the classes are written out.
                    statement.names = [alias for alias in statement.names
                                       if (alias.asname or alias.name) not in self.typing_names]
                    if not statement.names:
                        continue
                result = self.visit(statement)
                if isinstance(result, list):
                    kept.extend(result)
                elif result is not None:
                    kept.append(result)
            return kept
        return self.generic_visit(node)

    # -- annotations
    def _strip_arguments(self, arguments: ast.arguments) -> None:
        for field in ("posonlyargs", "args", "kwonlyargs"):
            for argument in getattr(arguments, field, None) or ():
                argument.annotation = None
        for field in ("vararg", "kwarg"):
            argument = getattr(arguments, field, None)
            if argument is not None:
                argument.annotation = None

    def visit_FunctionDef(self, node: Any) -> ast.AST:
        node.returns = None
        self._strip_arguments(node.args)
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Optional[ast.AST]:
        if node.value is None:
            return None
        assign = ast.Assign(targets=[node.target], value=node.value)
        return self.visit(ast.copy_location(assign, node))

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if self.depth == 0 and _is_type_expression(node.value, self.typing_names):
            # A type alias: keep the name (other modules import it), drop what it stands for.
            node.value = ast.copy_location(ast.parse("None", mode="eval").body, node.value)
            return node
        return self.generic_visit(node)

    # -- classes
    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        named_tuple = [base for base in node.bases
                       if isinstance(base, ast.Name)
                       and self.typing_names.get(base.id) == "NamedTuple"]
        if named_tuple:
            if len(node.bases) != 1 or node.keywords:
                raise Unsupported(f"line {node.lineno}: NamedTuple {node.name} with other"
                                  " bases")
            return self._named_tuple(node)
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    def _named_tuple(self, node: ast.ClassDef) -> ast.AST:
        fields: List[str] = []
        defaults: List[ast.expr] = []
        body: List[ast.stmt] = []
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                fields.append(statement.target.id)
                if statement.value is not None:
                    defaults.append(self.visit(statement.value))
                elif defaults:
                    raise Unsupported(f"line {statement.lineno}: a field without a default"
                                      " after one with")
            else:
                body.append(statement)
        if "_cls" in fields or any(name.startswith("__") for name in fields):
            raise Unsupported(f"line {node.lineno}: NamedTuple {node.name} field names")
        generated = ast.parse(_named_tuple_source(fields)).body
        new = generated[0]
        assert isinstance(new, ast.FunctionDef)
        new.args.defaults = defaults
        if ast.get_docstring(node, clean=False) is not None:
            docstring, body = body[:1], body[1:]
        else:  # namedtuple's own: "Name(field, ...)"
            docstring = [_parse_statement(repr(f"{node.name}({', '.join(fields)})"), node)]
        node.bases = [ast.copy_location(ast.Name(id="tuple", ctx=ast.Load()), node)]
        node.body = [*docstring, *(ast.copy_location(statement, node) for statement in generated),
                     *body]
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1


def _named_tuple_source(fields: List[str]) -> str:
    """What ``collections.namedtuple(name, fields)`` defines, as the statements of a class body
    (``__new__`` first: its defaults are filled in from the fields' values)."""
    listed = "".join(f"{field}, " for field in fields)
    shown = ", ".join(f"{field}=%r" for field in fields)
    lines = [
        f"def __new__(_cls, {listed}):",
        f"    return tuple.__new__(_cls, ({listed}))",
        "__slots__ = ()",
        f"_fields = {tuple(fields)!r}",
        "@classmethod",
        "def _make(cls, iterable):",
        "    made = tuple.__new__(cls, iterable)",
        f"    if len(made) != {len(fields)}:",
        f"        raise TypeError('Expected {len(fields)} arguments, got %d' % len(made))",
        "    return made",
        "def _replace(self, **changes):",
        "    made = self._make(map(changes.pop, self._fields, self))",
        "    if changes:",
        # namedtuple's error for a name that is no field: a TypeError from CPython 3.13 on,
        # a ValueError before (the bundle runs on both).
        "        import sys",
        "        error = TypeError if sys.version_info >= (3, 13) else ValueError",
        "        raise error('Got unexpected field names: %r' % list(changes))",
        "    return made",
        "def __repr__(self):",
        f"    return type(self).__name__ + '({shown})' % tuple(self)",
        "def _asdict(self):",
        "    return dict(zip(self._fields, self))",
        "def __getnewargs__(self):",
        "    return tuple(self)",
    ]
    lines.extend(f"{field} = property(lambda self: self[{index}])"
                 for index, field in enumerate(fields))
    return "\n".join(lines) + "\n"


_BLOCKS = ("body", "orelse", "finalbody")


def _fill_empty_blocks(tree: ast.AST) -> None:
    """A block whose every statement went (an ``if TYPE_CHECKING:`` body, say) gets ``pass``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module):
            continue
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if isinstance(block, list) and not block and (
                    field == "body" or (isinstance(node, ast.Try) and field == "finalbody"
                                        and not node.handlers)):
                block.append(_parse_statement("pass", node))


def strip_typing(tree: ast.Module) -> ast.Module:
    """``tree`` (an :class:`ast.Module`) without type hints and without importing typing; raises
    :class:`Unsupported` where a typing name would still be needed at run time."""
    typing_names = _typing_imports(tree)
    tree = _Stripper(typing_names).visit(tree)
    _fill_empty_blocks(tree)
    ast.fix_missing_locations(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in typing_names and node.id != "TYPE_CHECKING":
            raise Unsupported(f"line {node.lineno}: {node.id} is used at run time")
    return tree
