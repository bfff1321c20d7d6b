"""``python -m bench --only SECTION``: replace one section of an existing report.

A whole benchmark run takes over twenty minutes on two cores; the plugin's cold start, which
moves with every import the plugin gains or loses, takes a few.  ``--only`` measures one section
and replaces, in the existing docs/benchmarks.md, that section's text (between its markers) and
its rows of the targets table; every other figure, and the chart, stays as the last full run
wrote it.  ``nodes`` (:mod:`bench.node_cold`) and ``tool`` (:mod:`bench.tool_cold`) also
replace their README tables; ``aio`` is the asyncio clients' latency
(:mod:`bench.aio_clients`), ``aio-server`` the asyncio servers' calls/s and server-stream
messages/s (:mod:`bench.aio_servers`), ``channels`` the long-lived channel rows
(:mod:`bench.channels`).

A report written before a section had markers still gets it: ``nodes`` goes in front of section
1; ``cold`` replaces the text from its heading to section 2's.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from bench import aio_clients, aio_servers, channels, node_cold, tool_cold
from bench.node_cold import markdown_table
from bench.report import (
    COLD_BEGIN,
    COLD_END,
    TARGETS_HEADER,
    Target,
    aio_targets,
    cold_block,
    node_targets,
    render_markdown,
    target_rows,
    targets,
)


class Spliced(NamedTuple):
    """How one section is found and rendered in a report."""

    #: The targets table's ``area`` of the section's rows.
    area: str
    render: Callable[[Dict[str, Any]], List[str]]
    begin: str
    end: str
    #: Without markers: the text from the line starting with ``old_start`` up to the one
    #: starting with ``old_end`` is the section's (``old_start`` None: there is none yet).
    old_start: Optional[str]
    #: Where the section goes when there is none: in front of the line starting with this.
    before: str
    rows: Callable[[Dict[str, Any]], List[Target]]


def _cold_targets(results: Dict[str, Any]) -> List[Target]:
    return [target for target in targets(results) if target.area == "cold"]


SECTIONS: Dict[str, Spliced] = {
    "nodes": Spliced("node", node_cold.render_section, node_cold.DOC_BEGIN, node_cold.DOC_END,
                     None, "## 1. ", node_targets),
    "tool": Spliced("tool", tool_cold.render_section, tool_cold.DOC_BEGIN, tool_cold.DOC_END,
                    None, "## 1. ", tool_cold.targets),
    "cold": Spliced("cold", cold_block, COLD_BEGIN, COLD_END, "## 1. Cold plugin invocation",
                    "## 2. ", _cold_targets),
    "aio": Spliced("aio", aio_clients.render_section, aio_clients.DOC_BEGIN, aio_clients.DOC_END,
                   None, "## 3. ", aio_targets),
    "aio-server": Spliced("aio server", aio_servers.render_section, aio_servers.DOC_BEGIN,
                          aio_servers.DOC_END, None, "## 5. ", aio_servers.targets),
    "channels": Spliced("channel", channels.render_section, channels.DOC_BEGIN, channels.DOC_END,
                        None, "## Where minigrpc's time goes", channels.targets),
}


def splice(text: str, begin: str, end: str, block: Sequence[str], before: str,
           old_start: Optional[str] = None) -> str:
    """``text`` with the lines from ``begin`` to ``end`` replaced by ``block``.  Without those
    markers: the lines from the one starting with ``old_start`` up to the one starting with
    ``before`` are replaced, or else ``block`` goes in front of the line starting with
    ``before`` (at the end when there is none)."""
    lines = text.split("\n")
    if begin in lines and end in lines:
        start, stop = lines.index(begin), lines.index(end)
        return "\n".join([*lines[:start], *block, *lines[stop + 1:]])
    starts = [index for index, line in enumerate(lines) if line.startswith(before)]
    if old_start is not None:
        olds = [index for index, line in enumerate(lines) if line.startswith(old_start)]
        if olds:
            stop = next((index for index in starts if index > olds[0]), len(lines))
            return "\n".join([*lines[:olds[0]], *block, "", *lines[stop:]])
    if starts:
        return "\n".join([*lines[:starts[0]], *block, "", *lines[starts[0]:]])
    return "\n".join([*lines, *block, ""])


def splice_target_rows(text: str, area: str, found: Sequence[Target]) -> str:
    """The targets table of ``text`` with its ``area`` rows replaced by ``found``'s, where the
    old ones were (right under the header when there were none)."""
    header = markdown_table(TARGETS_HEADER, [])
    rows = markdown_table(TARGETS_HEADER, target_rows(found))[2:]
    lines = text.split("\n")
    old = [index for index, line in enumerate(lines) if line.startswith(f"| {area} |")]
    if old:
        return "\n".join([*lines[:old[0]], *rows,
                          *(line for line in lines[old[0]:] if not line.startswith(f"| {area} |"))])
    for index in range(len(lines) - 1):
        if lines[index:index + 2] == header:
            return "\n".join([*lines[:index + 2], *rows, *lines[index + 2:]])
    return text


def splice_report(results: Dict[str, Any], output_dir: str, section: str) -> str:
    """Replace ``section``'s part of ``output_dir``/benchmarks.md with ``results``'; returns
    the markdown path."""
    spliced = SECTIONS[section]
    markdown_path = os.path.join(output_dir, "benchmarks.md")
    try:
        with open(markdown_path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = render_markdown({"meta": results.get("meta", {})}, None)
    text = splice(text, spliced.begin, spliced.end, spliced.render(results), spliced.before,
                  spliced.old_start)
    text = splice_target_rows(text, spliced.area, spliced.rows(results))
    os.makedirs(output_dir, exist_ok=True)
    with open(markdown_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return markdown_path


def splice_readme(results: Dict[str, Any], readme: str) -> None:
    """Replace the README's per-interpreter cold-start tables with ``results``' (the plugin's
    for ``nodes``, the health probe's for ``tool``)."""
    with open(readme, encoding="utf-8") as handle:
        text = handle.read()
    if "nodes" in results:
        text = splice(text, node_cold.README_BEGIN, node_cold.README_END,
                      node_cold.render_readme_table(results), "Flatcar, Bottlerocket")
    if "tool" in results:
        text = splice(text, tool_cold.README_BEGIN, tool_cold.README_END,
                      tool_cold.render_readme_table(results), "The tool is tested as")
    with open(readme, "w", encoding="utf-8") as handle:
        handle.write(text)
