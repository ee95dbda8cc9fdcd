"""Evaluation suites, registered by name; users add theirs under the `genenv.benchmarks` entry-point group
(the object registered is a `Benchmark` subclass)."""

from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.plugin_guard import LOAD_LIMIT_S, guard
from genenv_cli.core.plugin_suite import StageSuite
from genenv_cli.core.registry import Registry

BENCHMARKS = Registry("benchmark", "genenv.benchmarks", {
    "bfcl": "genenv_cli.families.bfcl:BFCL",
    "api-bank": "genenv_cli.families.api_bank:APIBank",
    "bamboogle": "genenv_cli.families.bamboogle:Bamboogle",
    "travelplanner": "genenv_cli.families.travelplanner:TravelPlanner",
    "alfworld": "genenv_cli.families.alfworld:ALFWorld",
    "heldout": "genenv_cli.evals.heldout:HeldOut",
})


def get_benchmark(name: str):
    """An instance of the benchmark registered as `name`."""
    return BENCHMARKS.get(name)()


def suite_owner(name: str) -> str:
    """How a plugin suite's failure is attributed: by its entry point, or as registered at run time."""
    if BENCHMARKS.origin(name) == "added":
        return f"plugin `{name}` (benchmark suite registered at run time as {BENCHMARKS.rows[name].target})"
    return f"plugin `{name}` (benchmark suite, entry point in {BENCHMARKS.group})"


def stage_benchmark(name: str, limit: float = ITEM_TIMEOUT_S):
    """The suite `name` as `evaluate` and `eval-agent` call it: a built-in one as it is (genenv's own code); a
    plugin's (an entry point or a row registered at run time) imported and constructed under the plugin guard
    (within LOAD_LIMIT_S) and wrapped in it (`plugin_suite.StageSuite`: each call limited, its failure or exit
    named as the plugin's, its values checked). An unknown name is the registry's own error."""
    if BENCHMARKS.origin(name) == "built in" or (name not in BENCHMARKS.rows and name not in BENCHMARKS.names()):
        return get_benchmark(name)
    owner = suite_owner(name)
    bench = guard(owner, "loading (import and construction)", lambda: get_benchmark(name), max(limit, LOAD_LIMIT_S))
    return StageSuite(bench, owner, float(limit))


def list_benchmarks() -> list[dict]:
    """Every suite's name and facts, as `genenv evaluate --list` prints them (a plugin's read under the guard)."""
    out = []
    for name in BENCHMARKS.names():
        b = stage_benchmark(name)
        out.append({"name": name, "description": b.description, "categories": list(b.categories),
                    "splits": list(b.splits), "versions": list(b.versions), "sources": list(b.sources),
                    "interactive": b.interactive})
    return out
