"""docs/protocol.md shows what the code really sends.

The walkthrough (tools/protocol_walkthrough.py) runs real calls: the reference agent's servicer
on minigrpc's server, the plugin's RPC code as the client, over a unix socket, with the
``minigrpc.protocol.wire`` trace captured.  These tests run it as a subprocess, so its logging setup
cannot leak into other tests, and fail when the doc's listings are stale.  The normalisation
helpers are tested directly, on trace lines shaped like minigrpc.net.trace's.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "protocol_walkthrough.py"
DOC = ROOT / "docs" / "protocol.md"

_NEEDED = (
    "minigrpc.blocking.channel",
    "minigrpc.blocking.server_api",
    "minigrpc.net.trace",
    "cni_client.agent",
    "cni_client.client",
)
_MISSING = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
needs_live_parts = pytest.mark.skipif(
    bool(_MISSING), reason=f"the walkthrough needs modules not written yet: {_MISSING}"
)


def _load_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("protocol_walkthrough", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


@needs_live_parts
@pytest.mark.timeout(90)
def test_protocol_doc_matches_a_live_run() -> None:
    result = _run("--check")
    assert result.returncode == 0, (
        "docs/protocol.md does not match what the code sends; run "
        "`python tools/protocol_walkthrough.py` and review the diff\n"
        + result.stdout[-6000:]
        + result.stderr[-3000:]
    )


@needs_live_parts
@pytest.mark.timeout(90)
def test_check_reports_a_stale_listing_with_a_diff(tmp_path: Path) -> None:
    """Change one frame in a copy of the doc: --check must fail and show that line."""
    text = DOC.read_text(encoding="utf-8")
    stale_line = "client <-- unix:<socket>    PING           stream=0    len=8"
    assert stale_line in text
    stale = tmp_path / "protocol.md"
    stale.write_text(
        text.replace(stale_line, stale_line.replace("len=8", "len=9"), 1), encoding="utf-8"
    )
    result = _run("--check", "--doc", str(stale))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "-" + stale_line.replace("len=8", "len=9") in result.stdout
    assert "+" + stale_line in result.stdout
    assert "is stale" in result.stderr


def test_doc_has_every_region_and_names_no_local_path() -> None:
    text = DOC.read_text(encoding="utf-8")
    names = re.findall(r"<!-- trace:([a-z0-9-]+) -->", text)
    closing = re.findall(r"<!-- /trace:([a-z0-9-]+) -->", text)
    assert names == closing
    for expected in (
        "add",
        "add-settings",
        "add-request-message",
        "add-response-message",
        "unimplemented",
        "deadline",
        "goaway",
    ):
        assert expected in names
    for generated in ("http-to-grpc", "rst-stream-to-grpc", "grpc-to-cni"):
        assert f"<!-- generated:{generated} -->" in text
    assert not re.search(r"(?<![\w.])/(tmp|work|root|home)/", text)


def test_prose_quotes_the_bytes_of_the_listing() -> None:
    """The varint the prose decodes by hand must be the one in the generated dump."""
    text = DOC.read_text(encoding="utf-8")
    region = text.split("<!-- trace:add-request-message -->", 1)[1].split("<!-- /trace:", 1)[0]
    assert "\n0a f6 01 " in region
    assert "`f6 01` is 0x76 + (0x01 << 7) = 246" in text
    assert "cni_args (CniCmdArgs), length-delimited, 246 bytes" in region


# -- the normalisation, on lines shaped like minigrpc.net.trace's --------------------------------


def _record(role: str, arrow: str, peer: str, rest: str, extra: List[str] = ()) -> str:
    prefix = f"{role} {arrow} {peer.ljust(15)}  "
    return prefix + rest + "".join(f"\n{' ' * (len(prefix) + 2)}{line}" for line in extra)


def test_normalisation_replaces_only_what_varies() -> None:
    tool = _load_tool()
    peer = "unix:/some/where/cni.sock"
    headers = _record(
        "client",
        "-->",
        peer,
        "HEADERS        stream=1    len=131     END_HEADERS             request headers",
        [
            ":path: /pkg.Svc/Do",
            "user-agent: grpc-python-minigrpc/9.8.7",
            "grpc-timeout: 499871u  (0.499871 s)",
        ],
    )
    data = _record(
        "client",
        "-->",
        peer,
        "DATA           stream=1    len=15      END_STREAM"
        "              grpc-message flag=0 length=10 [0a 08]",
    )
    entries = tool.normalise_entries(tool.parse_records([headers, data], "client"), 0.5)
    text = tool.render_entries(entries)
    assert "/some/where" not in text and "unix:<socket>" in text
    assert "grpc-python-minigrpc/<version>" in text and "9.8.7" not in text
    assert "grpc-timeout: <n>u  (what is left of the 0.5 s timeout)" in text
    assert "len=<n>" in text and "len=131" not in text
    assert "len=15 " in text  # frames without varying values keep their length
    assert ":path: /pkg.Svc/Do" in text


def test_acks_are_listed_after_the_frame_they_answer() -> None:
    tool = _load_tool()
    peer = "unix:x"

    def line(arrow: str, rest: str) -> str:
        return _record("client", arrow, peer, rest)

    settings = "SETTINGS       stream=0    len=6       -                       MAX_FRAME_SIZE=16384"
    ack = "SETTINGS       stream=0    len=0       ACK                     (acknowledges)"
    ping = "PING           stream=0    len=8       -                       payload=01"
    pong = "PING           stream=0    len=8       ACK                     payload=01 (reply)"
    window = "WINDOW_UPDATE  stream=0    len=4       -                       increment=1"
    # As one run saw it: both SETTINGS read at once, our ACK went out after a later frame.
    messages = [
        line("<--", settings),
        line("<--", settings),
        line("<--", window),
        line("-->", ack),
        line("-->", ack),
        line("<--", ping),
        line("<--", ack),
        line("-->", pong),
    ]
    ordered = tool.canonical_order(tool.parse_records(messages, "client"))
    got = [(e.arrow, e.frame_type, e.is_ack) for e in ordered]
    assert got == [
        ("<--", "SETTINGS", False),
        ("-->", "SETTINGS", True),
        ("<--", "SETTINGS", False),
        ("-->", "SETTINGS", True),
        ("<--", "WINDOW_UPDATE", False),
        ("<--", "PING", False),
        ("-->", "PING", True),
        ("<--", "SETTINGS", True),
    ]


def test_annotated_message_names_the_protobuf_fields() -> None:
    tool = _load_tool()
    from cni_client import cni_pb2
    from minigrpc.protocol import wire

    request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id="c1", ifname="eth0"))
    dump = tool.annotate_message(
        wire.encode_message(request.SerializeToString()), cni_pb2.CniCmdRequest.DESCRIPTOR
    )
    lines = dump.splitlines()
    assert lines[0].startswith("00 ") and "compressed flag = 0" in lines[0]
    assert lines[1].startswith("00 00 00 0c ") and "message length = 12" in lines[1]
    assert "field 1 cni_args (CniCmdArgs), length-delimited, 10 bytes:" in lines[2]
    assert "field 1 container_id" in dump and '"c1"' in dump
    assert "field 3 ifname" in dump and '"eth0"' in dump


_CODE_NAME = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")


def _top_level_names() -> dict:
    """The names a doc may start a dotted name with: every module of minigrpc and cni_client by
    its path below the package (``protocol.grpc_connection``, ``aio.channel``), by its own name
    where no other module has it (``grpc_connection``), and the top-level names of the modules
    directly in each package (``RpcError``)."""
    import collections
    import importlib
    import pkgutil

    names: dict = {}
    by_last = collections.defaultdict(list)
    for package_name in ("minigrpc", "cni_client"):
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            short = info.name[len(package_name) + 1 :]
            if short.split(".")[-1] == "__main__":
                continue
            if short.startswith("_pb."):
                # The add-ons' own message copies: loaded only where the add-on packages that
                # define the same names are not (minigrpc._pb.messages), never imported here.
                continue
            module = importlib.import_module(info.name)
            names[info.name] = module
            names.setdefault(short, module)
            by_last[short.split(".")[-1]].append(module)
            if "." in short:
                continue
            for name, value in vars(module).items():
                names.setdefault(name, value)
    for last, modules in by_last.items():
        if len(modules) == 1:
            names.setdefault(last, modules[0])
    return names


@needs_live_parts
@pytest.mark.parametrize("doc", ["protocol.md", "architecture.md"])
def test_docs_name_only_code_that_exists(doc: str) -> None:
    """`module.function` or `Class.method` in the prose must still exist in the code."""
    names = _top_level_names()
    missing = []
    for dotted in sorted(set(_CODE_NAME.findall((ROOT / "docs" / doc).read_text("utf-8")))):
        parts = dotted.split(".")
        # The longest start that names a module of ours (``protocol.grpc_connection``), else a
        # top-level name.
        for length in range(len(parts), 0, -1):
            if ".".join(parts[:length]) in names:
                break
        else:
            continue  # not a name of ours (a file name, an h2 attribute, a local variable)
        if dotted.endswith((".py", ".md")):
            continue
        obj = names[".".join(parts[:length])]
        rest = parts[length:]
        for attr in rest:
            fields = getattr(getattr(obj, "DESCRIPTOR", None), "fields_by_name", {})
            if attr in fields:  # a protobuf field: not a class attribute on every backend
                break
            if not hasattr(obj, attr):
                missing.append(dotted)
                break
            obj = getattr(obj, attr)
    assert not missing, f"{doc} names code that no longer exists: {missing}"
