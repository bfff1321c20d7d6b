"""Every citation in the repository points at something a reader can open.

A reader of this repository has the repository, the public specifications (gRPC's
``doc/PROTOCOL-HTTP2.md`` and its other docs, RFC 9113, RFC 7541, the CNI ``SPEC.md``) and the
public source of the peers; nothing else.  So a comment or doc may cite:

* an RFC section ("RFC 9113 \u00a76.8"; a run of sections after one RFC number counts),
* a gRPC doc by name and PROTOCOL-HTTP2.md by one of its real section names,
* a file of this repository, by a path that exists, and a section of one of its Markdown docs by
  a heading (or a bold lead-in) that exists,

and nothing else: no private notes, no bare section numbers, no issue numbers (the reason goes
in place of "issue N").  The checker is a plain function over text, so the tests at the bottom
plant each kind of bad citation in a small string and watch it fail.
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Iterable, List, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

#: Paths left out of the scan (none: every tracked text file must cite what a reader can open).
SCOPE_EXCLUDES: tuple[str, ...] = ()

#: This file plants bad citations on purpose, to test the checker; it is never scanned.
SELF = "tests/docs/test_citations.py"

#: What counts as a text file worth checking.
_SUFFIXES = (".py", ".md", ".proto", ".cfg", ".toml", ".ini", ".txt")
_NAMES = ("Makefile", ".ci/run")

_SECTION = "\u00a7"
#: The word the checker looks for before a number, spelled so this file does not cite one.
_ISSUE = "iss" + "ue"

#: The two notes the old citations pointed to. Spelled in pieces so this file does not cite them.
_PRIVATE_NOTES = ("grpc" + "-wire", "cni" + "-plugin")

#: Public documents that are not in this repository and may be cited by name.
PUBLIC_DOCS = frozenset(
    {
        # grpc/grpc doc/
        "PROTOCOL-HTTP2.md",
        "statuscodes.md",
        "compression.md",
        "connection-backoff.md",
        "interop-test-descriptions.md",
        "naming.md",
        "keepalive.md",
        "http-grpc-status-mapping.md",
        "connectivity-semantics-and-api.md",
        "service_config.md",
        "load-balancing.md",
        "negative-http2-interop-test-descriptions.md",
        "health-checking.md",
        "server-reflection.md",
        # containernetworking/cni
        "SPEC.md",
        "CONVENTIONS.md",
    }
)

#: The section headings of gRPC's doc/PROTOCOL-HTTP2.md, the names it may be cited by.
PROTOCOL_HTTP2_SECTIONS = frozenset(
    {
        "Introduction",
        "Protocol",
        "Outline",
        "Requests",
        "Responses",
        "Example",
        "User Agents",
        "Idempotency and Retries",
        "HTTP2 Transport Mapping",
        "Stream Identification",
        "Data Frames",
        "Early Server Closure",
        "Errors",
        "Client Cancellation",
        "Security",
        "Connection Management",
        "GOAWAY Frame",
        "PING Frame",
        "Connection failure",
        "Appendix A - GRPC for Protobuf",
    }
)
#: The grammar rules PROTOCOL-HTTP2.md defines in bold, which may be cited like its sections.
PROTOCOL_HTTP2_RULES = frozenset(
    """Request Request-Headers Call-Definition Method Scheme Path Service-Name Authority TE
    Timeout TimeoutValue TimeoutUnit Content-Type Content-Coding Message-Encoding
    Message-Accept-Encoding User-Agent Message-Type Custom-Metadata Binary-Header ASCII-Header
    Header-Name ASCII-Value Length-Prefixed-Message Compressed-Flag Message-Length Message EOS
    Response Response-Headers Trailers-Only Trailers HTTP-Status Status Status-Message
    Percent-Encoded""".split()
)

_NOTES_RE = re.compile(r"\b(?:" + "|".join(map(re.escape, _PRIVATE_NOTES)) + r")\.md\b")
_ISSUE_RE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
_SECTION_RE = re.compile(_SECTION + r"\s*(\d+)")
#: What may stand before a section sign: an RFC number or a named document.
_SECTION_OWNER_RE = re.compile(r"\bRFC\s*\d{3,5}\b|[\w./-]+\.md\b")
#: How far before a section sign its RFC or document may stand ("within a few words").
_SECTION_WINDOW = 60
_MD_NAME_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
_LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
_TOP = r"(?:docs|tools|tests|bench|minigrpc|cni_client|proto)/"
_BACKTICK_PATH_RE = re.compile(r"`+(" + _TOP + r"[^`\s]*)`+")
_PLAIN_PATH_RE = re.compile(r"(?<![\w/.`-])(" + _TOP + r"[\w./-]*\w\.(?:md|py|sh|proto|png))\b")
#: "<doc>.md, "Section"" (also "<doc>.md, \"Section\"" inside Python strings).
_DOC_SECTION_RE = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md),\s+\\?\"([^\"\\]+)\\?\"")
#: "PROTOCOL-HTTP2.md, Section" (quoted or not); the section name is what follows.
_PROTOCOL_SECTION_RE = re.compile(r"PROTOCOL-HTTP2\.md,\s+\\?\"?(?=[A-Z])")
_HEADING_RE = re.compile(r"^#+\s+(.*?)\s*$|\*\*([^*\n]+?)\*\*", re.MULTILINE)


def _flatten(text: str) -> str:
    """Join wrapped lines: a line break and the next line's indent or comment marker become one
    space, so a citation wrapped across lines of a docstring or a comment reads as one."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#:?[ \t]*)?", " ", text)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@lru_cache(maxsize=None)
def tracked_files() -> Tuple[str, ...]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return tuple(name for name in out.split("\0") if name)


def checked_files() -> List[str]:
    return [
        name
        for name in tracked_files()
        if (name.endswith(_SUFFIXES) or name in _NAMES or Path(name).name == "Makefile")
        and not name.startswith(SCOPE_EXCLUDES)
        and name != SELF
        and (ROOT / name).is_file()
    ]


@lru_cache(maxsize=None)
def _existing() -> Set[str]:
    """Tracked files and the directories that hold them."""
    paths = set(tracked_files())
    for name in list(paths):
        parts = name.split("/")
        for i in range(1, len(parts)):
            paths.add("/".join(parts[:i]))
    return paths


def _exists(path: str) -> bool:
    path = path.rstrip("/")
    return path in _existing() or (ROOT / path).exists()


@lru_cache(maxsize=None)
def _md_basenames() -> Set[str]:
    return {Path(name).name for name in tracked_files() if name.endswith(".md")}


def _resolve_doc(name: str, source: str) -> Optional[str]:
    """The repository path a Markdown document name refers to from ``source``, if any."""
    candidates = [name, str(Path(source).parent / name), "docs/" + name]
    for candidate in candidates:
        normal = str(Path(candidate))
        if normal in _existing():
            return normal
    return None


@lru_cache(maxsize=None)
def _anchors(doc: str) -> Tuple[str, ...]:
    """Headings and bold lead-ins of a repository Markdown document, as a reader sees them."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = []
    for match in _HEADING_RE.finditer(text):
        title = match.group(1) or match.group(2)
        title = re.sub(r"^\d+\.\s+", "", title).replace("`", "").strip().rstrip(".:")
        found.append(title)
    return tuple(found)


def _has_numbered_section(doc: str, number: str) -> bool:
    """True if a heading of ``doc`` starts with ``number`` (as in "## 3. The request HEADERS")."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.search(r"^#+\s+" + re.escape(number) + r"\b", text, re.MULTILINE) is not None


def _section_exists(doc: str, section: str) -> bool:
    wanted = " ".join(section.split()).rstrip(".:").replace("`", "")
    return any(
        anchor == wanted or anchor.startswith(wanted) or wanted.startswith(anchor + " (")
        for anchor in _anchors(doc)
    )


def find_bad_citations(text: str, source: str = "docs/example.md") -> List[str]:
    """Every citation in ``text`` (the contents of ``source``) that a reader could not follow,
    as ``line: why`` strings."""
    problems: List[str] = []
    flat = _flatten(text)

    def report(pos: int, why: str, in_flat: bool = False) -> None:
        line = _line_of(text, pos) if not in_flat else _line_of(text, _unflatten(pos))
        problems.append(f"{source}:{line}: {why}")

    # Map a position in the flattened text back to the original, for line numbers.
    offsets = _flat_offsets(text)

    def _unflatten(pos: int) -> int:
        return offsets[min(pos, len(offsets) - 1)]

    for match in _NOTES_RE.finditer(text):
        report(match.start(), f"cites a note that is not in the repository: {match.group(0)}")
    for match in _ISSUE_RE.finditer(text):
        report(match.start(), f"cites an issue number instead of the reason: {match.group(0)!r}")

    for match in _SECTION_RE.finditer(flat):
        window = flat[max(0, match.start() - _SECTION_WINDOW) : match.start()]
        owners = list(_SECTION_OWNER_RE.finditer(window))
        if not owners:
            snippet = flat[max(0, match.start() - 30) : match.end() + 10]
            why = f"bare section number without an RFC or document: {snippet!r}"
            report(match.start(), why, True)
            continue
        owner = owners[-1].group(0)
        if owner.endswith(".md") and not _cites_known_doc(owner, source):
            report(match.start(), f"section of a document not in the repository: {owner}", True)
        elif owner.endswith(".md") and _resolve_doc(owner, source) is not None:
            number = match.group(1)
            if not _has_numbered_section(_resolve_doc(owner, source) or "", number):
                report(match.start(), f"{owner} has no section numbered {number}", True)

    for match in _MD_NAME_RE.finditer(text):
        name = match.group(1)
        if not _cites_known_doc(name, source):
            report(match.start(), f"cites a Markdown file that does not exist: {name}")

    for match in _LINK_RE.finditer(text):
        target = match.group(1).split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or not source.endswith(".md"):
            continue
        resolved = str(Path(source).parent / target)
        if not _exists(str(Path(resolved))):
            report(match.start(), f"relative link to a missing file: {match.group(1)}")

    for regex in (_BACKTICK_PATH_RE, _PLAIN_PATH_RE):
        for match in regex.finditer(text):
            # A profile's "path.py:123(function)" names the file before the colon.
            path = re.split(r"[:(]", match.group(1))[0].rstrip(".,;)")
            if re.search(r"[*?<>{}\[\]$]", path):
                continue  # a pattern or a placeholder, not a path
            if not _exists(path):
                report(match.start(), f"path that does not exist in the repository: {path}")

    for match in _DOC_SECTION_RE.finditer(flat):
        name, section = match.group(1), match.group(2)
        doc = _resolve_doc(name, source)
        if doc is not None and not _section_exists(doc, section):
            report(match.start(), f"{name} has no section {section!r}", True)

    known = PROTOCOL_HTTP2_SECTIONS | PROTOCOL_HTTP2_RULES
    for match in _PROTOCOL_SECTION_RE.finditer(flat):
        rest = flat[match.end() :]
        if not any(re.match(re.escape(name) + r"(?![\w-])", rest) for name in known):
            cited = re.split(r"[^\w -]", rest, maxsplit=1)[0].strip()
            report(match.start(), f"PROTOCOL-HTTP2.md has no section {cited!r}", True)
    return problems


def _flat_offsets(text: str) -> List[int]:
    """For each character of ``_flatten(text)``, its position in ``text``."""
    offsets: List[int] = []
    pos = 0
    for match in re.finditer(r"[ \t]*\n[ \t]*(?:#:?[ \t]*)?", text):
        offsets.extend(range(pos, match.start()))
        offsets.append(match.start())
        pos = match.end()
    offsets.extend(range(pos, len(text) + 1))
    return offsets


def _cites_known_doc(name: str, source: str) -> bool:
    base = Path(name).name
    if "/" not in name and (base in PUBLIC_DOCS or base in _md_basenames()):
        return True
    if name.startswith("doc/") and base in PUBLIC_DOCS:
        return True  # gRPC's doc/ directory, not this repository's docs/
    return _resolve_doc(name, source) is not None


def _all_problems(files: Iterable[str]) -> List[str]:
    problems: List[str] = []
    for name in files:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems.extend(find_bad_citations(text, name))
    return problems


def test_every_citation_can_be_followed() -> None:
    files = checked_files()
    assert "README.md" in files and "minigrpc/protocol/wire.py" in files
    problems = _all_problems(files)
    assert not problems, "citations a reader cannot follow:\n" + "\n".join(problems)


# The checker itself, on planted citations.

_NOTE = _PRIVATE_NOTES[0] + ".md"
_S = _SECTION


@pytest.mark.parametrize(
    "text, why",
    [
        (f"Acknowledge padding too ({_NOTE} {_S}6).", "not in the repository"),
        (f"See {_PRIVATE_NOTES[1]}.md for the rules.", "not in the repository"),
        (f"Bounded buffering ({_ISSUE} 3).", "issue number"),
        (f"As {_ISSUE} #12 asked, ...", "issue number"),
        (f"The h2 pitfall ({_S}7, Pitfall 4).", "bare section number"),
        (f"Flow control\n    # is acked (see {_S}6).", "bare section number"),
        (f"Lowered windows (notes.md {_S}6).", "not in the repository"),
        ("Regenerate with `tools/no_such_tool.py`.", "does not exist"),
        ("The rules are in docs/no-such-doc.md.", "does not exist"),
        ("Read [the notes](missing-notes.md).", "missing file"),
        ('See wire-rules.md, "No Such Section".', "has no section"),
        (f"See wire-rules.md {_S}3.", "has no section numbered 3"),
        ("Cited as (PROTOCOL-HTTP2.md, Trailer Frames).", "PROTOCOL-HTTP2.md has no section"),
    ],
)
def test_checker_rejects_planted_citation(text: str, why: str) -> None:
    problems = find_bad_citations(text, "docs/example.md")
    assert problems and any(why in p for p in problems), problems


@pytest.mark.parametrize(
    "text",
    [
        f"GOAWAY (RFC 9113 {_S}6.8).",
        f"Frame sizes (RFC 9113 {_S}4.2; a connection error even on DATA, {_S}5.4.1).",
        f"Preface (RFC 9113\n    # {_S}3.4).",
        f"HPACK (RFC 7541 {_S}2.2).",
        "Trailers (PROTOCOL-HTTP2.md, Responses), cancel (PROTOCOL-HTTP2.md, Client Cancellation).",
        'Compression (`doc/compression.md`); see wire-rules.md, "Messages and compression".',
        'Which h2 bug (docs/wire-rules.md, "GOAWAY and PING"; python-hyper/h2#1181).',
        "Read [the wire rules](wire-rules.md) and `docs/mapping.md`; regenerate with"
        " `tools/render_docs.py`.",
        "CNI SPEC.md, \"Parameters\": the six variables.",
        f"The request headers (protocol.md {_S}3).",
        "A glob such as `tests/generated_stubs/v*` is not a path.",
    ],
)
def test_checker_accepts_good_citation(text: str) -> None:
    assert find_bad_citations(text, "docs/example.md") == []
