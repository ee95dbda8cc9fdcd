"""Evaluation suites, registered by name; users add theirs under the `genenv.benchmarks` entry-point group
(the object registered is a `Benchmark` subclass)."""

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
