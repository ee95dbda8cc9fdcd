"""No source file of the house (src/genenv_cli/, benchmarks/, experiments/, lab/) is over 600 lines: a file that
long holds several jobs, and is split by job. The one exception is a port of a benchmark's official checker, kept
in one file so it can be read side by side with the original; such a file names what it ports in a comment line
`# port of the official checker: <repository and path>`."""

from __future__ import annotations

import re

import pytest

from paths import ROOT

FOLDERS = ["src/genenv_cli", "benchmarks", "experiments", "lab"]
LIMIT = 600
PORT = re.compile(r"^# port of the official checker: \S.*$", re.M)


def too_long(name: str, text: str) -> str | None:
    """Why the file `name` is too long, or None."""
    lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    if lines <= LIMIT or PORT.search(text):
        return None
    return f"{name}: {lines} lines (at most {LIMIT}, unless a port of an official checker names its source)"


def test_no_source_file_is_over_the_limit():
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 150  # the scan covers the house
    found = [why for p in files if (why := too_long(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")))]
    assert found == []


@pytest.mark.parametrize("text, long", [
    ("x = 1\n" * 601, True),
    ("x = 1\n" * 600, False),
    ("# port of the official checker: gorilla bfcl_eval/eval_checker/ast_eval/ast_checker.py\n" + "x = 1\n" * 700,
     False),
    ("# port of the official checker:\n" + "x = 1\n" * 700, True),
])
def test_the_rule_can_fail(text, long):
    assert (too_long("example.py", text) is not None) == long
