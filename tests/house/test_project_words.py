"""What users read names only what they can see: no file of the project (README, docs, code, benchmarks,
experiments, their recorded results, the shell stages, the noxfile) speaks of the work tracker the project was
built with (numbered issues, "the issue's target"), of working sessions, or of notes outside the repository.

The patterns are narrow on purpose: "issue a warning", "a known issue with NFS", `nox -s tests` sessions and "a
yoga session" in the seed data are ordinary English and stay allowed (the cases below check both ways)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import ROOT

SCANNED = ["README.md", "noxfile.py", "pyproject.toml", "docs", "src", "benchmarks", "experiments", "stages",
           "examples"]

FORBIDDEN = {
    # the builder's machine's own folders (relative paths are resolved against their file: `_leaves_repository`)
    "a path outside the repository": re.compile(r"(?<!\w)/work/\w"),
    "a numbered issue": re.compile(r"\bissues?[\s_-]*#?\d+", re.I),
    "an identifier named after an issue": re.compile(r"\bissue_\w+|\w+_issues?\b", re.I),
    "the issue as a document": re.compile(
        r"\bissue(?:'s)?\s+(?:target|text|brief|tracker|number|asks|says|wants|requires|filed)\b"
        r"|\b(?:the|this|that|our)\s+issue's\b", re.I),
    "a working session": re.compile(
        r"\b(?:this|earlier|previous|other|another|parallel|helper|coordinator)\s+sessions?\b", re.I),
    "the tooling that drew the project": re.compile(r"\bfarm-studio\b", re.I),
}


RELATIVE = re.compile(r"(?<![\w./])(?:\.\./)+[\w-]+")


def _hits(text: str, where: Path = ROOT / "README.md") -> list[str]:
    """The kinds of tracker words in `text`, read as a line of the file `where` (relative paths start there)."""
    found = [name for name, pattern in FORBIDDEN.items() if pattern.search(text)]
    if any(_leaves_repository(where.parent / m.group(0)) for m in RELATIVE.finditer(text)):
        found.append("a relative path out of the repository")
    return found


def _leaves_repository(path: Path) -> bool:
    return not path.resolve().is_relative_to(ROOT.resolve())


def _files() -> list[Path]:
    out = []
    for entry in SCANNED:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p for p in candidates if "__pycache__" not in p.parts and p.suffix not in (".png", ".pyc")]
    return out


@pytest.mark.parametrize("text", [
    "as the issue's target says", "benchmarks/results/rerun-after-issue-11.md", "the issue-5 scripts",
    'figures["issue_inputs"]', "see ../notes/PLAN.md", "Issue #21 asks for", "done in an earlier session",
    "the issue text", "as /work/notes/plan.md says",
])
def test_the_patterns_catch_tracker_words(text):
    assert _hits(text), text


@pytest.mark.parametrize("text", [
    "warnings.warn is issued once", "issue a warning and go on", "a known issue with NFS locks",
    "nox -s tests runs the test session", "Log a 45 minute yoga session.", "docs/design.md", "session.run(...)",
    "a session-scoped fixture", "the tissue sample",
])
def test_the_patterns_leave_ordinary_english_alone(text):
    assert not _hits(text), text


def test_relative_paths_are_read_from_their_file():
    assert not _hits("[the suite](../src/genenv_cli/evals/bfcl/)", ROOT / "docs" / "benchmarks.md")
    assert not _hits("[README](../README.md)", ROOT / "docs" / "benchmarks.md")
    assert _hits("[notes](../../notes/)", ROOT / "docs" / "benchmarks.md")


def test_no_project_file_speaks_of_the_tracker():
    files = _files()
    assert len(files) > 100 and any(p.name == "README.md" for p in files)  # the scan covers the project
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{lineno}: {name}: {line.strip()[:120]}" for name in _hits(line, path)]
    assert not found, "\n".join(found)
