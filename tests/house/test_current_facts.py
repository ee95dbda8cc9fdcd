"""The READMEs and docs state current facts: no commit hash labels a figure or a run, and no table compares a
"before" with a "now" (those dated stories live in dev/LOG.md, and a benchmark's records name their commit).

A hash is a run of 7 to 40 hexadecimal characters with a digit and a letter, outside fenced code blocks (the output
of a command shows fingerprints); a pinned revision of another project's repository (`owner/name at HASH`) says
where third-party data came from and stays allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("benchmarks/*/README.md")),
         ROOT / "experiments" / "README.md"]
HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
OTHER_REPO = re.compile(r"\b[\w.-]+/[\w.-]+ at ([0-9a-f]{7,40})\b")
BEFORE_AFTER = re.compile(r"\|\s*(?:before|now|after)\s*[:(|]|\"before\"|\bbefore \(", re.I)


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of a Markdown page outside its fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((n, line))
    return out


def findings(text: str) -> list[str]:
    found = []
    for n, line in prose(text):
        allowed = set(OTHER_REPO.findall(line))
        found += [f"{n}: commit {h}" for h in HASH.findall(line) if h not in allowed]
        found += [f"{n}: {m.group(0)!r}" for m in BEFORE_AFTER.finditer(line)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_state_current_facts(page: Path):
    assert findings(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text, bad", [
    ("measured at 7a1d052 on one H200", True),
    ("| benchmark | before (0b3479f) | now |", True),
    ("| update | before: peak | now: peak |", True),
    ("the data from AlibabaResearch/DAMO-ConvAI at 483554e", False),
    ("```\n  ok   fingerprints: code d4e712344cbab4b1\n```", False),
    ("before the first optimizer step, 2026-11-26, 100 decades", False),
])
def test_the_check_can_fail(text, bad):
    assert bool(findings(text)) is bad
