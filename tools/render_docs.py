"""Render the code's own mapping tables into the docs, so they are never retyped.

Every Markdown file under ``docs/`` (and README.md) may hold generated regions::

    <!-- generated:http-to-grpc -->
    ...replaced by this script...
    <!-- /generated:http-to-grpc -->

``python tools/render_docs.py`` rewrites them from the tables in :mod:`minigrpc.protocol.status`,
:mod:`minigrpc.grpc_alias`, :mod:`minigrpc.driver.channel_args` and :mod:`cni_client.client`, and
the module graph and table from
``tools/architecture.py``; ``--check`` exits 1 (and prints the first difference) when a file is
stale, which ``tests/docs/test_docs.py`` runs.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import architecture  # noqa: E402  (tools/architecture.py, beside this script)

from cni_client import client as cni_client_module  # noqa: E402
from minigrpc import grpc_alias  # noqa: E402
from minigrpc.driver import channel_args  # noqa: E402
from minigrpc.http2 import frames  # noqa: E402
from minigrpc.protocol import codes  # noqa: E402

_REGION = re.compile(
    r"(<!-- generated:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)",
    re.S,
)


def _table(header: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def http_to_grpc() -> str:
    rows = [
        [str(code), f"{codes.CODE_NAMES[grpc]} ({grpc})"]
        for code, grpc in sorted(codes.HTTP_TO_GRPC.items())
    ]
    unknown = codes.Code.UNKNOWN
    rows.append(["anything else, 200 included", f"{codes.CODE_NAMES[unknown]} ({unknown})"])
    note = (
        "Used only when a response is not gRPC (its `content-type` is not `application/grpc*`)"
        " and so carries no usable `grpc-status`.\n\n"
        "Source: `minigrpc.protocol.codes.HTTP_TO_GRPC`.\n\n"
    )
    return note + _table(["HTTP `:status`", "gRPC status"], rows)


def rst_stream_to_grpc() -> str:
    rows = []
    for code, grpc in sorted(codes.RST_STREAM_TO_GRPC.items()):
        rows.append([f"{code} {frames.http2_error_name(code)}",
                     f"{codes.CODE_NAMES[grpc]} ({grpc})"])
    internal = codes.Code.INTERNAL
    rows.append(["any other", f"{codes.CODE_NAMES[internal]} ({internal})"])
    note = (
        "Applied when a stream is reset before its trailers arrived. A CANCEL that arrives after"
        " the call's deadline is reported as DEADLINE_EXCEEDED. Source:"
        " `minigrpc.protocol.codes.RST_STREAM_TO_GRPC`.\n\n"
    )
    return note + _table(["RST_STREAM error code", "gRPC status"], rows)


def grpc_to_cni() -> str:
    rows = []
    table = cni_client_module.RPC_FAILURE_TO_CNI
    for name, (code, msg, details) in table.items():
        label = "any other non-OK status" if name is None else f"{name}"
        rows.append(
            [label, str(code), f"`{msg}`", f"`{details}`" if details else "(none)"]
        )
    note = (
        "`{error}` is the grpc-go style error text, `rpc error: code = <Name> desc = <message>`."
        " A call that succeeds but carries `CniCmdResponse.error` yields that error's code and"
        " message. Source: `cni_client.client.RPC_FAILURE_TO_CNI`.\n\n"
    )
    return note + _table(["gRPC status", "CNI code", "msg", "details"], rows)


def grpcio_unit_tests() -> str:
    """The summary of the last run of grpcio's unit tests, a line per suite
    (docs/grpcio-unit-tests.md)."""
    doc = ROOT / "docs" / "grpcio-unit-tests.md"
    found = re.search(r"<!-- summary -->\n(.*?)\n<!-- /summary -->", doc.read_text("utf-8"), re.S)
    lines = found.group(1).strip().splitlines() if found else ["(no run recorded yet)"]
    # One line per suite (the blocking API's, grpc.aio's).
    return "".join(f"- {line}\n" for line in lines) + (
        "\nPer module and per test: [docs/grpcio-unit-tests.md](docs/grpcio-unit-tests.md); "
        "rerun with `make grpcio-unit`.\n"
    )


def channel_arguments() -> str:
    """Every channel and server argument and what minigrpc does with it
    (docs/long-lived-channels.md), read from ``channel_args.ARGUMENTS`` as it stands: a status
    changed there changes this table, never the other way round."""
    statuses = (channel_args.IMPLEMENTED, channel_args.DECIDED, channel_args.UNSUPPORTED,
                channel_args.INERT)
    counts = {status: sum(1 for argument in channel_args.ARGUMENTS if argument.status == status)
              for status in statuses}
    rows = []
    for argument in channel_args.ARGUMENTS:
        modules = ", ".join(f"`minigrpc.{module.strip()}`"
                            for module in argument.module.split(",") if module.strip())
        note = argument.note.replace("|", "\\|")
        if argument.fine_values:
            fine = ", ".join(f"`{value!r}`" for value in argument.fine_values)
            note += f" (no warning for {fine})"
        rows.append([f"`{argument.name}`", argument.side, argument.status, note, modules])
    summary = ", ".join(f"{counts[status]} {status}" for status in statuses)
    note = (
        f"{len(channel_args.ARGUMENTS)} entries ({summary}); an argument that means something "
        "different to a client and to a server has an entry for each. Source: "
        "`minigrpc.driver.channel_args.ARGUMENTS`.\n\n"
    )
    return note + _table(["argument", "end", "status", "what it does, or why not", "read by"],
                         rows)


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -").replace(" ", "-")


def grpc_features() -> str:
    """The README's rows for grpcio's long-lived channel features: each verdict comes from the
    statuses of the arguments the feature rests on (``channel_args.FEATURES``)."""
    doc = "docs/long-lived-channels.md"
    rows = []
    for feature in channel_args.FEATURES:
        parts = [feature.note] if feature.note else []
        if feature.verdict() != "yes":
            by_status: Dict[str, List[str]] = {}
            for name, status in feature.statuses():
                by_status.setdefault(status, []).append(f"`{name}`")
            parts += [f"{status}: {', '.join(names)}" for status, names in by_status.items()]
        parts.append(f"see [{doc}]({doc}#{_anchor(feature.section)})")
        rows.append([feature.name, feature.verdict(), "; ".join(parts)])
    note = (
        "grpcio's features for long-lived channels, which no single name stands for. A "
        "verdict is \"yes\" only when every argument the feature rests on is carried out, as "
        "the argument table of docs/long-lived-channels.md has it; otherwise the notes give "
        "each one's status. Source: `minigrpc.driver.channel_args.FEATURES`.\n\n"
    )
    return note + _table(["feature", "on minigrpc", "notes"], rows)


RENDERERS: Dict[str, Callable[[], str]] = {
    "grpc-features": grpc_features,
    "channel-arguments": channel_arguments,
    "grpc-compatibility": grpc_alias.compatibility_markdown,
    "grpcio-unit-tests": grpcio_unit_tests,
    "http-to-grpc": http_to_grpc,
    "rst-stream-to-grpc": rst_stream_to_grpc,
    "grpc-to-cni": grpc_to_cni,
    "module-graph": architecture.mermaid,
    "module-table": architecture.table,
}


def render(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in RENDERERS:
            return match.group(0)
        return match.group(1) + RENDERERS[name]() + match.group(4)

    return _REGION.sub(replace, text)


def doc_files() -> List[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a doc is stale")
    args = parser.parse_args(argv)
    stale = 0
    for path in doc_files():
        if not path.exists():
            continue
        old = path.read_text(encoding="utf-8")
        new = render(old)
        if new == old:
            continue
        if args.check:
            stale += 1
            rel = path.relative_to(ROOT)
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), str(rel), "rendered",
                                        lineterm="")
            print("\n".join(list(diff)[:40]))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rendered {path.relative_to(ROOT)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
