"""What users read names only what they can see: no file of the project (README, docs, code, benchmarks,
experiments, their recorded results, the shell stages, the noxfile) speaks of the work tracker the project was
built with (numbered issues, "the issue's target"), of working sessions, or of notes outside the repository.

The patterns are narrow on purpose: "issue a warning", "a known issue with NFS", `nox -s tests` sessions and "a
yoga session" in the seed data are ordinary English and stay allowed (the cases below check both ways). Words that
must not be spelled even here, such as the name of the tooling that drew the project, are kept as digests."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from paths import ROOT

SCANNED = ["README.md", "noxfile.py", "pyproject.toml", "docs", "src", "benchmarks", "experiments", "pipelines",
           "examples"]

FORBIDDEN = {
    # the builder's machine's own folders (relative paths are resolved against their file: `_leaves_repository`)
    "a path outside the repository": re.compile(r"(?<!\w)/work/\w"),
    "a numbered issue": re.compile(r"\bissues?[\s_-]*#?\d+", re.I),
    # `(?<=\w)_issues?` is `\w+_issues?` without its backtracking over every run of letters (the same matches)
    "an identifier named after an issue": re.compile(r"\bissue_\w+|(?<=\w)_issues?\b", re.I),
    "the issue as a document": re.compile(
        r"\bissue(?:'s)?\s+(?:target|text|brief|tracker|number|asks|says|wants|requires|filed)\b"
        r"|\b(?:the|this|that|our)\s+issue's\b", re.I),
    "a working session": re.compile(
        r"\b(?:this|earlier|previous|other|another|parallel|helper|coordinator)\s+sessions?\b", re.I),
}

# Words looked up by the sha256 of their lower-cased spelling, not matched by a pattern: a pattern would spell the
# name in this file, which is a file of the project too. Each word of a line (letters and digits, or several such
# runs joined by hyphens, and every run of those parts) is hashed and looked up in its kind's set.
TOOLING = "the tooling that drew the project"
DIGESTS: dict[str, frozenset[str]] = {
    TOOLING: frozenset({"fbb8037df8cc90503026c4dfd1faae09d040aeb3ecceab2df6411ae608e5e394"}),
}
WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _digest(word: str) -> str:
    return hashlib.sha256(word.encode()).hexdigest()


def _words(text: str) -> set[str]:
    """The lower-cased words of `text`, and every run of the parts of a hyphenated one ("a-b-c": a, b, c, a-b,
    b-c, a-b-c)."""
    out = set(WORD.findall(text.lower()))
    for word in [w for w in out if "-" in w]:
        parts = word.split("-")
        out.update("-".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1))
    return out


RELATIVE = re.compile(r"(?<![\w./])(?:\.\./)+[\w-]+")


def _hits(text: str, where: Path = ROOT / "README.md") -> list[str]:
    """The kinds of tracker words in `text`, read as a line of the file `where` (relative paths start there)."""
    found = [name for name, pattern in FORBIDDEN.items() if pattern.search(text)]
    words = {_digest(w) for w in _words(text)}
    found += [name for name, digests in DIGESTS.items() if words & digests]
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


# a made-up tool name: the digest check must flag it, in every spelling, once its digest is in the set
MADE_UP = "quillmoss-atelier"


@pytest.mark.parametrize("text", [
    "drawn with quillmoss-atelier", "Built by Quillmoss-Atelier.", "the QUILLMOSS-ATELIER tooling",
    "see quillmoss-atelier-v2's notes", "(quillmoss-atelier)", "x_quillmoss-atelier_y",
])
def test_the_digest_check_catches_a_word_whose_digest_is_stored(text, monkeypatch):
    assert TOOLING not in _hits(text)
    monkeypatch.setitem(DIGESTS, TOOLING, DIGESTS[TOOLING] | {_digest(MADE_UP)})
    assert TOOLING in _hits(text), text


@pytest.mark.parametrize("text", [
    "quillmoss and atelier apart", "a quillmoss_atelier", "quillmoss-ateliers", "the quillmoss atelier",
    "an atelier-quillmoss", "quillmoss--atelier",
])
def test_the_digest_check_leaves_other_words_alone(text, monkeypatch):
    monkeypatch.setitem(DIGESTS, TOOLING, DIGESTS[TOOLING] | {_digest(MADE_UP)})
    assert TOOLING not in _hits(text), text


def test_the_stored_digests_are_sha256_digests():
    assert DIGESTS[TOOLING] and all(re.fullmatch(r"[0-9a-f]{64}", d) for d in DIGESTS[TOOLING])


def test_relative_paths_are_read_from_their_file():
    assert not _hits("[the suite](../src/genenv_cli/families/bfcl/)", ROOT / "docs" / "benchmarks.md")
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
        if not _hits(text, path):  # no line can hit when the whole file does not (its words are the lines' words)
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{lineno}: {name}: {line.strip()[:120]}" for name in _hits(line, path)]
    assert not found, "\n".join(found)
