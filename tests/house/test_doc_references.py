"""What the docs name exists: every module path and dotted name in docs/*.md, in every README.md of the repository
(the benchmark families', tests/README.md and the examples' included) and in every docstring of src/genenv_cli
resolves to a file, a folder, a module or a name defined at a module's top level, read with `ast` (nothing is
imported).

What counts as a reference, outside fenced code blocks (a command's output names what it names):
- a path ending in `.py` or `/` whose first part is a folder of the repository or of the package
  (`src/genenv_cli/rundir/contract.py`, `catalogue/stages.py`, `engines/shared_prefix.py`, `families/bfcl/`): it
  must be a file or folder under the repository's root, src/genenv_cli/, or the folder of the page, or end a path
  of the package (a docstring's `engines/hf.py` is `machinery/engines/hf.py`);
- a dotted name starting at the package (`genenv_cli.rundir.metrics.gather`) or at one of its floors
  (`machinery.episodes.play`), or `module.name` where `module` names one module of the package and no settings
  section (`contract.checkpoint_usable`, `metrics.gather`; `rollout.group_size` is a setting): its longest prefix
  that is a module must be one, and the next part a name that module defines or imports at its top level.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from paths import ROOT, SRC

PKG = SRC / "genenv_cli"
SKIP_PARTS = {".git", "__pycache__", ".nox", ".venv", "build", "dist", "node_modules"}


def _readmes() -> list[Path]:
    return sorted(p for p in ROOT.rglob("README.md") if not SKIP_PARTS & set(p.relative_to(ROOT).parts))


PAGES = [*sorted((ROOT / "docs").glob("*.md")), *_readmes()]
MODULES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)

FLOORS = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
TOP = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))
FOLDERS = sorted({p.name for p in PKG.rglob("*") if p.is_dir() and "__pycache__" not in p.parts})
PATH = re.compile(r"(?<![\w./:-])((?:[A-Za-z_][\w-]*/)+(?:[A-Za-z_]\w*\.py)?)(?![\w/-])")
DOTTED = re.compile(r"(?<![\w./:-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(-]|\.\w)")


def _sections() -> set[str]:
    from genenv_cli.catalogue.config import SECTIONS

    return set(SECTIONS)


@cache
def _module_file(dotted: str) -> Path | None:
    """The file of module `genenv_cli.a.b` (dotted without the package), or None."""
    base = PKG.joinpath(*dotted.split(".")) if dotted else PKG
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _defines(path: Path) -> frozenset[str]:
    """The names a module binds at its top level (definitions, assignments, imports), and its submodules' names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)  # self.x = ...: an attribute its objects have
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    if path.name == "__init__.py":
        names |= {p.stem for p in path.parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    return frozenset(names)


@cache
def _by_basename() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in MODULES:
        rel = path.relative_to(PKG).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts:
            out.setdefault(parts[-1], []).append(".".join(parts))
    return out


def _resolves(dotted: str) -> bool:
    """Whether `dotted` (relative to the package) is a module, or a module and then names it defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is not None:
            rest = parts[cut:]
            return not rest or rest[0] in _defines(module)
    return False


def _dotted_problem(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] == "genenv_cli":
        return None if len(parts) == 1 or _resolves(".".join(parts[1:])) else name
    if parts[0] in FLOORS:
        return None if _resolves(name) else name
    if parts[0] in _sections():
        return None
    modules = _by_basename().get(parts[0], [])
    if len(modules) != 1:
        return None  # no module of the package, or several: not a reference this test can read
    return None if _resolves(".".join([modules[0], *parts[1:]])) else name


@cache
def _package_paths() -> frozenset[str]:
    out = set()
    for path in PKG.rglob("*"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PKG).as_posix() + ("/" if path.is_dir() else "")
        parts = rel.rstrip("/").split("/")
        out |= {"/".join(parts[i:]) + ("/" if path.is_dir() else "") for i in range(len(parts))}
    return frozenset(out)


# other projects' paths that begin like one of ours, named where their code is followed (alfworld/alfworld,
# qiancheng0/ToolRL, AgentBench)
OTHER_PROJECTS = ("alfworld/agents/", "benchmarks/API-Bank/", "benchmarks/Bamboogle/", "src/server/")
FILE_SUFFIXES = ("py", "md", "toml", "json", "jsonl", "parquet", "sh", "txt", "yaml", "yml", "html", "ipynb", "csv",
                 "tsv", "zip", "gz", "tar", "log", "lock", "pt", "bin", "safetensors", "whl", "cfg", "ini")


def _path_problem(path: str, where: Path) -> str | None:
    first = path.split("/")[0]
    if first not in TOP and first not in FOLDERS and first != "genenv_cli" or path.startswith(OTHER_PROJECTS):
        return None  # another project's path (trl/trainer/...), a run's file (epochs/...): not the package's
    for base in (ROOT, PKG, where, SRC):
        if (base / path).exists():
            return None
    return None if path in _package_paths() else path


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((n, line))
    return out


def broken(text: str, where: Path) -> list[str]:
    """The references in `text` (a page or a docstring in folder `where`) that resolve to nothing."""
    found = []
    for n, line in prose_lines(text):
        for m in PATH.finditer(line):
            if (bad := _path_problem(m.group(1), where)) is not None:
                found.append(f"{n}: {bad}")
        for m in DOTTED.finditer(line):
            if m.group(1).rsplit(".", 1)[1] in FILE_SUFFIXES:
                continue  # a file's name
            if (bad := _dotted_problem(m.group(1))) is not None:
                found.append(f"{n}: {bad}")
    return found


def docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring of a module: its own, its classes' and its functions'."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_name_what_exists(page: Path):
    assert broken(page.read_text(encoding="utf-8"), page.parent) == []


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_docstrings_name_what_exists(module: Path):
    found = [f"{line}+{bad}" for line, doc in docstrings(module) for bad in broken(doc, module.parent)]
    assert found == []


@pytest.mark.parametrize("text, bad", [
    ("the contract (`src/genenv_cli/rundir/contract.py`)", False),
    ("see `src/genenv_cli/rundir/no_such_module.py`", True),
    ("`catalogue/stages.py` lists them; `engines/shared_prefix.py` computes it", False),
    ("`catalogue/engines_old.py`", True),
    ("`genenv_cli.rundir.metrics.gather` and `metrics.gather`", False),
    ("`evals.run.recover_results`", True),
    ("`genenv_cli.rundir.metrics.no_such_name`", True),
    ("`contract.no_such_function`", True),
    ("`rollout.group_size` and `run.engine` are settings", False),
    ("TRL's `trl/trainer/grpo_trainer.py`", False),
    ("```\ngenenv_cli.nowhere.at_all\n```", False),
])
def test_the_check_can_fail(text, bad):
    assert bool(broken(text, ROOT / "docs")) is bad
