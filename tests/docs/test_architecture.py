"""The layout rules of docs/architecture.md, enforced on the real imports (tools/architecture.py).

A package imports only the packages below it that its row allows (the HTTP/2 package nothing
else of minigrpc, the sans-IO packages no transport, the blocking and asyncio stacks not each
other), no modules import each other in a circle, nothing in minigrpc imports cni_client, and
every module has a declared concern.  Imports inside functions and under ``TYPE_CHECKING``
count.  The picture and table in docs/architecture.md are rendered from the same data, and
tests/docs/test_docs.py fails when they are stale.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import architecture  # noqa: E402


def test_the_layout_holds() -> None:
    assert architecture.violations() == []


def test_the_rules_catch_an_upward_import(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A package that imported one it may not would be reported (the check itself can fail)."""
    packages = dict(architecture.PACKAGES)
    packages["protocol"] = packages["protocol"]._replace(may_import=())
    monkeypatch.setattr(architecture, "PACKAGES", packages)
    found = architecture.violations()
    assert any("(protocol) imports" in v and "(http2)" in v for v in found), found


def test_the_rules_catch_a_cycle() -> None:
    """A circle of imports is found, however long, and a chain is not one."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert architecture.cycles(graph) == [("a", "b", "c")]
    assert architecture.cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_and_for_type_checkers_count() -> None:
    """A late import or an annotation-only one ties two modules as much as any other: the
    enum is loaded late by status, and the reader's errors are named for annotations only in
    places; both show in the graph."""
    inside, _ = architecture.imports_of("protocol.status")
    assert "protocol.enums" in inside


def test_the_http2_package_imports_nothing_else_of_minigrpc() -> None:
    for module in architecture.MODULES:
        if architecture.package_of(module) != "http2":
            continue
        inside, _ = architecture.imports_of(module)
        assert {architecture.package_of(m) for m in inside} <= {"http2"}, module


def test_sans_io_packages_do_no_io() -> None:
    """The packages below the transports open no socket and run no event loop.  (A target's
    address family is one of ``_socket``'s constants, which :mod:`minigrpc.protocol.targets`
    reads without the socket module.)"""
    for module in architecture.MODULES:
        if architecture.package_of(module) not in ("http2", "protocol", "driver"):
            continue
        _, outside = architecture.imports_of(module)
        assert not {"socket", "selectors", "ssl", "asyncio"} & outside, module


def test_each_package_says_what_it_may_import() -> None:
    """Each package's docstring ends with "It may import:" and names exactly the packages its
    row of tools/architecture.py allows (the root package as :mod:`minigrpc`), so a reader of
    the package alone learns its place, and the text cannot drift from the rule."""
    import ast
    import re

    for name in architecture.PACKAGES:
        if name == "root" or not (architecture.PACKAGE / name).is_dir():
            continue  # the root's docstring is the public API's; a lone module has no package
        path = architecture.PACKAGE / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "It may import:" in doc, f"minigrpc/{name}/__init__.py: no \"It may import:\""
        said = doc[doc.index("It may import:"):]
        named = {match or "root" for match in re.findall(r":mod:`minigrpc(?:\.(\w+))?`", said)}
        allowed = set(architecture.PACKAGES[name].may_import)
        assert named == allowed, (name, sorted(named), sorted(allowed))
