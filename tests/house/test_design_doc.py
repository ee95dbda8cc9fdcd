"""docs/design.md's module table names every module under src/genenv_cli/ (subpackages included), and nothing
that is not there: a module added, moved or removed without its row fails here."""

from __future__ import annotations

import re

from paths import ROOT

SRC = ROOT / "src" / "genenv_cli"


def modules() -> set[str]:
    """Paths relative to src/genenv_cli/; a package's __init__.py is named by its folder (`rundir/`), the top
    package's own as `__init__.py`."""
    out = set()
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        out.add(rel[: -len("__init__.py")] if rel.endswith("/__init__.py") else rel)
    return out


def table_names() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text.split("| module (`src/genenv_cli/`) | holds |", 1)[1].split("\n\n", 1)[0]
    names: set[str] = set()
    for row in table.splitlines()[1:]:
        names.update(re.findall(r"`([^`]+)`", row.split("|")[1]))
    return names


def test_the_module_table_names_every_module():
    listed = table_names()
    assert sorted(modules() - listed) == [], "modules missing from docs/design.md's table"
    assert sorted(listed - modules()) == [], "rows of docs/design.md's table naming no module"


def test_the_check_reads_the_rows():
    """The table is found and read: a few known rows are among its names."""
    assert {"cli.py", "rundir/layout.py", "rundir/", "evals/heldout/benchmark.py", "__init__.py"} <= table_names()
