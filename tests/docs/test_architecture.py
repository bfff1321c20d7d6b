"""The layout rules of docs/architecture.md, enforced on the real imports (tools/architecture.py).

A module imports only its own layer and the layers below (the sans-IO protocols never import a
transport), nothing in minigrpc imports cni_client, and every module has a declared layer and
concern.  The picture and table in docs/architecture.md are rendered from the same data, and
tests/docs/test_docs.py fails when they are stale.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import architecture  # noqa: E402


def test_the_layout_holds() -> None:
    assert architecture.violations() == []


def test_the_rules_catch_an_upward_import() -> None:
    """A codec that imported a transport would be reported (the check itself can fail)."""
    graph_before = architecture.imports_of("wire")
    assert "transport" not in graph_before[0]
    fake = dict(architecture.MODULES)
    fake["wire"] = architecture.Module(3, "pretend")
    fake["transport"] = architecture.Module(4, "pretend")
    fake["client_protocol"] = architecture.Module(1, "pretend")
    original = architecture.MODULES
    try:
        architecture.MODULES = fake
        found = architecture.violations()
    finally:
        architecture.MODULES = original
    assert any(v.startswith("client_protocol (layer 1) imports") for v in found)


def test_protocols_import_no_transport_and_no_socket() -> None:
    for module in (
        "protocol",
        "client_protocol",
        "server_protocol",
        "server_requests",
        "server_settings",
        "server_responses",
        "server_events",
        "server_http2",
        "connection_core",
    ):
        inside, outside = architecture.imports_of(module)
        assert not {"transport", "client_connection", "server_loop", "sockets", "tls"} & inside, (
            module
        )
        assert not {"socket", "selectors", "threading", "ssl"} & outside, module
