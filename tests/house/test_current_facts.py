"""The READMEs, the docs and the package's docstrings state current facts: no commit hash labels a figure or a run,
no table compares a "before" with a "now", and no sentence tells what the code used to do or what changed (those
dated stories live in dev/LOG.md, and a benchmark's records name their commit). Every README.md of the repository
is read (the benchmark families', tests/README.md and the examples' included), every page of docs/, and every
docstring of src/genenv_cli (its modules', classes' and functions').

A hash is a run of 7 to 40 hexadecimal characters with a digit and a letter, outside fenced code blocks (the output
of a command shows fingerprints); a pinned revision of another project's repository (`owner/name at HASH`) says
where third-party data came from and stays allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_doc_references import MODULES, PAGES, PKG, docstrings
from test_doc_references import prose_lines as prose

from paths import ROOT

HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
OTHER_REPO = re.compile(r"\b[\w.-]+/[\w.-]+ at (?:commit )?([0-9a-f]{7,40})\b")
BEFORE_AFTER = re.compile(r"\|\s*(?:before|now|after)\s*[:(|]|\"before\"|\bbefore \(", re.I)
# history told in prose: what the code used to do, what it does "now" in contrast, why something changed. Narrow on
# purpose: "is used to compute", "the old policy" (GRPO's), "no longer matches" and "as the rows are now" are
# current facts and stay allowed (the cases below check both ways)
HISTORY = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bwas )(?<!\bwere )(?<!\bbeing )(?<!\bget )(?<!\bgets )"
    r"\bused to (?:be|compute|take|run|have|write|read|keep|use|give|say|hold|count|load|send)\b"
    r"|\b(?:is|are) now \w|\bplan now\b"
    r"|\bnow (?:turns|names|name|uses|use|takes|keeps|gives|runs|sets|set|reads|writes|checks|refuses|has|have|does"
    r"|do|the)\b"
    r"|\bthe old (?:shapes|seeds|code|version|behaviou?r|way|layout)\b|\bfound and changed\b|\bwhy \S+ changed\b",
    re.I)


def findings(text: str) -> list[str]:
    found = []
    for n, line in prose(text):
        allowed = set(OTHER_REPO.findall(line))
        found += [f"{n}: commit {h}" for h in HASH.findall(line) if h not in allowed]
        found += [f"{n}: {m.group(0)!r}" for m in BEFORE_AFTER.finditer(line)]
        found += [f"{n}: history {m.group(0)!r}" for m in HISTORY.finditer(line)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_state_current_facts(page: Path):
    assert findings(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_docstrings_state_current_facts(module: Path):
    assert [f"{line}+{bad}" for line, doc in docstrings(module) for bad in findings(doc)] == []


@pytest.mark.parametrize("text, bad", [
    ("measured at 7a1d052 on one H200", True),
    ("| benchmark | before (0b3479f) | now |", True),
    ("| update | before: peak | now: peak |", True),
    ("the data from AlibabaResearch/DAMO-ConvAI at 483554e", False),
    ("the games from LeapLabTHU/ExpeL at commit e9fa78bde2633e43d09ec9328157e60c4de7607f", False),
    ("`run/` was made by genenv at commit 397d5bc", True),
    ("```\n  ok   fingerprints: code d4e712344cbab4b1\n```", False),
    ("before the first optimizer step, 2026-11-26, 100 decades", False),
    ("every rank used to compute every row", True),
    ("the stat fields used to skip rehashing; a mask is used to compute it", False),
    ("the default is now auto", True),
    ("genenv now names the prompt first", True),
    ("| update | plan for the logits | plan now (head in the loss) |", True),
    ("**Why `arith` changed.** The old shapes lumped the frontier", True),
    ("the old policy's logprobs, as the rows are now; a copy that no longer matches", False),
])
def test_the_check_can_fail(text, bad):
    assert bool(findings(text)) is bad
