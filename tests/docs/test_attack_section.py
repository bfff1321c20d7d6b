"""docs/robustness.md has two authors: the suites' report and the measured attack section.

tools/robustness_report.py rewrites the document from a test run; the attack section
(tools/attack_report.py, minutes of measurements) must survive that, and a new measurement
must replace the old one in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tools"))

from robustness_report import (
    ATTACK_BEGIN,
    ATTACK_END,
    attack_section,
    with_attack_section,
)

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "robustness.md"


def _section(body: str) -> str:
    return f"{ATTACK_BEGIN}\n{body}\n{ATTACK_END}\n"


def test_a_new_section_goes_before_the_first_heading_then_is_replaced_in_place() -> None:
    document = "# Robustness\n\nIntro.\n\n## Client\n\n| a |\n"
    first = with_attack_section(document, _section("run 1"))
    assert first == "# Robustness\n\nIntro.\n\n" + _section("run 1") + "\n## Client\n\n| a |\n"
    second = with_attack_section(first, _section("run 2"))
    assert attack_section(second) == _section("run 2")
    assert second.replace(_section("run 2"), "") == first.replace(_section("run 1"), "")


def test_a_rewrite_without_a_section_keeps_the_old_one() -> None:
    kept = attack_section(with_attack_section("# R\n\n## S\n", _section("measured")))
    rewritten = with_attack_section("# R\n\nNew intro.\n\n## S\n", kept)
    assert attack_section(rewritten) == _section("measured")
    assert with_attack_section("# R\n", "") == "# R\n"


def test_the_committed_document_has_one_attack_section() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(ATTACK_BEGIN) == 1 and text.count(ATTACK_END) == 1
    assert "| rapid_reset | minigrpc |" in attack_section(text)
