"""Size rules of the house. No source file (src/genenv_cli/, benchmarks/, experiments/, lab/) is over 600 lines, and
in the package (src/genenv_cli/) none is over 450 lines and no function over 60: a file that long holds several
jobs, a function that long several steps, and either is split by job. The one exception to the 600-line rule is a
port of a benchmark's official checker, kept in one file so it can be read side by side with the original; such a
file names what it ports in a comment line `# port of the official checker: <repository and path>`.

A file or function over the tighter limits could be listed below with its size, as a ceiling that may shrink, never
grow, and that leaves the list once it is within the limit; the lists are empty."""

from __future__ import annotations

import ast
import re

import pytest

from paths import ROOT

FOLDERS = ["src/genenv_cli", "benchmarks", "experiments", "lab"]
LIMIT = 600
PORT = re.compile(r"^# port of the official checker: \S.*$", re.M)
PACKAGE = ROOT / "src" / "genenv_cli"
PACKAGE_LIMIT = 450
FUNCTION_LIMIT = 60

# paths relative to src/genenv_cli/ (functions as path:name), with their lines when the limits were set
# (none are left: every file and function of the package is within the limits)
KNOWN_LONG_FILES: dict[str, int] = {}
KNOWN_LONG_FUNCTIONS: dict[str, int] = {}


def line_count(text: str) -> int:
    return text.count("\n") + (not text.endswith("\n") and bool(text))


def too_long(name: str, text: str) -> str | None:
    """Why the file `name` is too long, or None."""
    lines = line_count(text)
    if lines <= LIMIT or PORT.search(text):
        return None
    return f"{name}: {lines} lines (at most {LIMIT}, unless a port of an official checker names its source)"


def long_functions(text: str) -> dict[str, int]:
    """{name: lines} of every function (methods and nested ones included) over FUNCTION_LIMIT lines."""
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > FUNCTION_LIMIT:
                found[node.name] = max(lines, found.get(node.name, 0))
    return found


def over(found: dict[str, int], known: dict[str, int], limit: int) -> list[str]:
    """What breaks the rule: a size over the limit that is not listed, or over its listed ceiling; a listed entry
    that is within the limit or gone (the list must shrink with the code)."""
    bad = [f"{name}: {n} lines (at most {known.get(name, limit)})" for name, n in sorted(found.items())
           if n > known.get(name, limit)]
    bad += [f"{name}: listed as over {limit} lines but no longer is: remove it from the list"
            for name in sorted(set(known) - set(found))]
    return bad


def test_no_source_file_is_over_the_limit():
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 150  # the scan covers the house
    found = [why for p in files if (why := too_long(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")))]
    assert found == []


def test_the_package_keeps_its_files_and_functions_short():
    files, functions = {}, {}
    for p in sorted(PACKAGE.rglob("*.py")):
        rel, text = p.relative_to(PACKAGE).as_posix(), p.read_text(encoding="utf-8")
        if line_count(text) > PACKAGE_LIMIT:
            files[rel] = line_count(text)
        functions.update({f"{rel}:{name}": n for name, n in long_functions(text).items()})
    assert over(files, KNOWN_LONG_FILES, PACKAGE_LIMIT) == []
    assert over(functions, KNOWN_LONG_FUNCTIONS, FUNCTION_LIMIT) == []


@pytest.mark.parametrize("text, long", [
    ("x = 1\n" * 601, True),
    ("x = 1\n" * 600, False),
    ("# port of the official checker: gorilla bfcl_eval/eval_checker/ast_eval/ast_checker.py\n" + "x = 1\n" * 700,
     False),
    ("# port of the official checker:\n" + "x = 1\n" * 700, True),
])
def test_the_rule_can_fail(text, long):
    assert (too_long("example.py", text) is not None) == long


def test_the_function_rule_can_fail():
    body = "def f():\n" + "    x = 1\n" * 60
    assert long_functions(body) == {"f": 61}
    assert long_functions("def g():\n" + "    x = 1\n" * 59) == {}
    assert over({"a.py:f": 61}, {}, 60) == ["a.py:f: 61 lines (at most 60)"]
    assert over({"a.py:f": 61}, {"a.py:f": 61}, 60) == []
    assert over({}, {"a.py:f": 61}, 60) == ["a.py:f: listed as over 60 lines but no longer is: remove it from the list"]
    assert over({"a.py": 470}, {"a.py": 460}, 450) == ["a.py: 470 lines (at most 460)"]
