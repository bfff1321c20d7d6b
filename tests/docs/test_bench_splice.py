"""``python -m bench --only nodes`` replaces its own part of docs/benchmarks.md and the README.

The per-interpreter cold start (bench/node_cold.py) takes a couple of minutes, the whole
benchmark run over twenty: measuring it alone must leave every other figure of the report as its
last full run wrote it.  Pure text handling; no benchmark runs here.
"""

from __future__ import annotations

from bench import node_cold


def test_only_nodes_replaces_its_own_section() -> None:
    """``--only nodes`` splices: the section between its markers is replaced, everything else is
    kept; a report without the markers gets the section in front of section 1."""
    block = [node_cold.DOC_BEGIN, "new table", node_cold.DOC_END]
    old = "\n".join(["# Benchmarks", "", node_cold.DOC_BEGIN, "old table", node_cold.DOC_END,
                     "", "## 1. Cold plugin invocation", "kept"])
    spliced = node_cold.splice(old, node_cold.DOC_BEGIN, node_cold.DOC_END, block, "## 1. ")
    assert spliced == old.replace("old table", "new table")
    without = "# Benchmarks\n\n## 1. Cold plugin invocation\nkept"
    assert node_cold.splice(without, node_cold.DOC_BEGIN, node_cold.DOC_END, block,
                            "## 1. ") == "\n".join(["# Benchmarks", "", *block, "",
                                                    "## 1. Cold plugin invocation", "kept"])
