"""Every built-in suite has one shape (docs/benchmarks.md): its own folder, under evals/ or, for a benchmark family
(the suite with its training domain and test answers), under families/, with a README holding the
four sections, an __init__ that exports only the class the registry names, and, for Table 1's suites, a column
in the paper's order."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from genenv_cli.catalogue.suites import BENCHMARKS
from genenv_cli.evals.base import Benchmark
from genenv_cli.views.paper_table import columns
from paths import SRC

EVALS = SRC / "genenv_cli" / "evals"  # the READMEs are not installed
SECTIONS = ["## Data", "## Protocol", "## Official source followed", "## Modules and tests"]


@pytest.mark.parametrize("name", sorted(BENCHMARKS.builtins))
def test_suite_folder_readme_and_exports(name):
    module, attr = BENCHMARKS.builtins[name].target.split(":")
    package = importlib.import_module(module)
    folder = SRC.joinpath(*module.split("."))
    assert module.split(".")[1] in ("evals", "families") and module.count(".") == 2, module
    assert Path(package.__file__).name == "__init__.py", f"{name} is not a folder under evals/ or families/"
    assert (folder / "__init__.py").is_file()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# `{name}`"), f"{folder}/README.md should open with the suite's name"
    positions = [readme.find(s + "\n") for s in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), f"{folder}/README.md: sections {SECTIONS}"
    assert package.__all__ == [attr]
    public = [n for n in vars(package) if not n.startswith("_") and not isinstance(vars(package)[n], type(package))]
    assert public == [attr], f"{module} exports {public}; the registry needs only {attr}"
    cls = BENCHMARKS.get(name)
    assert issubclass(cls, Benchmark) and cls.name == name


def test_no_suite_module_left_flat():
    flat = sorted(p.stem for p in EVALS.glob("*.py"))
    assert flat == ["__init__", "base", "datasource", "toolrl"], flat


def test_table_columns_come_from_the_registry_in_the_papers_order():
    assert [(title, bench) for title, bench, _ in columns()] == [
        ("ALFWorld", "alfworld"), ("BFCL", "bfcl"), ("API-Bank", "api-bank"), ("Bamboogle", "bamboogle"),
        ("TravelPlanner", "travelplanner")]
    refs = {bench: ref for _, bench, ref in columns()}
    assert refs["bfcl"] == {"GenEnv 7B": 41.8, "Qwen2.5-7B-Instruct": 7.0}
    assert BENCHMARKS.get("heldout").paper_column is None
