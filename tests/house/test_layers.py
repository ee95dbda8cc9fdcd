"""The house's floors: every module of `genenv_cli`, of the benchmarks, of the experiments and of what those two
share (`lab/`) sits on one, imports only from its own floor or below, and no import circle exists anywhere.

Imports are read with `ast` from the source of every module under src/genenv_cli/, benchmarks/, experiments/ and
lab/ (subpackages included), at any depth: top-level imports, imports inside functions (the lazy ones that keep torch off the CLI's path) and imports
under `if TYPE_CHECKING:` all count as arrows, since each is a dependency a reader has to follow. What is not an
arrow: a registry naming a module by string and importing it when asked (`catalogue.stages.STAGES`,
`catalogue.domains.DOMAINS`, `catalogue.suites.BENCHMARKS`, via `importlib`); that is how a low floor lists plugins
that live higher up, as entry points do.

An import of `genenv_cli.a.b` that names a module is an arrow to that module; `from genenv_cli.a import name`
is an arrow to `genenv_cli.a.name` when that is a module, else to `genenv_cli.a` (the package's `__init__`); the
same for the other packages. The benchmarks and the experiments share one floor and never import each other: what
both need is in `lab/`.
A module's floor is its folder's: the floors are the folders, in docs/design.md's "Floors" table, lowest first; a
folder the table does not list, or a file loose at the package's root, fails the test. There is no table of
modules and no special case.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from paths import ROOT

SRC = ROOT / "src"
PKG = "genenv_cli"
# every package of the house, by the folder its top sits in
PACKAGES = {PKG: SRC, "lab": ROOT, "benchmarks": ROOT, "experiments": ROOT}

def floors() -> list[tuple[str, list[str]]]:
    """docs/design.md's "Floors" table, lowest first: each floor's name and its folders (`core`: src/genenv_cli/core/;
    `genenv_cli`: the files at the package's root; `lab`, `benchmarks`, `experiments`: the repository's folders)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("### Floors", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| floor")]
    return [(r.split("|")[1].strip(), [p.strip().strip("`").rstrip("/") for p in r.split("|")[2].split(",")])
            for r in rows]


FLOORS = floors()


def modules() -> dict[str, Path]:
    found = {}
    for package, top in PACKAGES.items():
        for path in sorted((top / package).rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def folder_of(module: str) -> str:
    """The folder a module sits in: its first name below the package (`genenv_cli.rundir.atomic`: `rundir`), the
    package itself for a file at its root (`genenv_cli.cli`: `genenv_cli`), or its top package (`lab.record`: `lab`)."""
    parts = module.split(".")
    if parts[0] != PKG:
        return parts[0]
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (SRC / PKG / parts[1]).is_dir()) else PKG


def floor_of(module: str) -> int | None:
    folder = folder_of(module)
    return next((i for i, (_, folders) in enumerate(FLOORS) if folder in folders), None)


def imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """{imported module of the house: line of the first import} for one module, at every depth of its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def owner(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    out: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [owner(a.name) for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] not in PACKAGES:
                continue
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else owner(source) for a in node.names]
        for t in targets:
            if t and t != module:
                out.setdefault(t, node.lineno)
    return out


@functools.cache
def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_every_module_has_a_floor():
    assert [m for m in modules() if floor_of(m) is None] == []


def test_no_import_runs_up_a_floor():
    upward = []
    for module, targets in graph().items():
        here = floor_of(module)
        for target, line in targets.items():
            there = floor_of(target)
            if here is not None and there is not None and there > here:
                upward.append(f"{module}:{line} -> {target} ({FLOORS[here][0]} -> {FLOORS[there][0]})")
    assert upward == []


def test_benchmarks_and_experiments_do_not_import_each_other():
    crossing = [f"{m}:{line} -> {t}" for m, targets in graph().items() for t, line in targets.items()
                if {m.split(".")[0], t.split(".")[0]} == {"benchmarks", "experiments"}]
    assert crossing == []


def test_the_graph_covers_the_measurements():
    """The scan reads the benchmarks and the experiments, and follows their imports of genenv_cli."""
    known = graph()
    assert "benchmarks.speed.common" in known and "experiments.curriculum" in known
    assert any(t.startswith(PKG + ".") for t in known["experiments.curriculum"])


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, {}))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circles():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_circle():
    """The check above can fail: a circle of three and a self-contained pair are both found."""
    edges = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"e": 1}, "e": {"d": 1}, "f": {"a": 1}}
    assert sorted(cycles(edges)) == [["a", "b", "c"], ["d", "e"]]


@pytest.mark.parametrize("module, floor", [("genenv_cli.catalogue.suites", "catalogue"),
                                           ("genenv_cli.families.bfcl.domain", "benchmark families"),
                                           ("genenv_cli.views.report.read", "views"), ("genenv_cli", "command line"),
                                           ("genenv_cli.cli", "command line"),
                                           ("benchmarks.speed.common", "measurements"),
                                           ("lab.record", "shared by the measurements")])
def test_a_module_is_on_its_folders_floor(module, floor):
    assert FLOORS[floor_of(module)][0] == floor


def test_the_floors_are_the_folders():
    """Every folder of the package is a floor (the table lists exactly the folders there are), and nothing sits
    loose at the package's root but the command line's entry, `__main__` and `__init__`."""
    package = SRC / PKG
    folders = {p.name for p in package.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    listed = {f for _, fs in FLOORS for f in fs} - {PKG, "lab", "benchmarks", "experiments"}
    assert folders == listed
    assert sorted(p.name for p in package.glob("*.py")) == ["__init__.py", "__main__.py", "cli.py"]
