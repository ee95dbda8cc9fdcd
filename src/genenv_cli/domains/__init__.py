"""Task families, registered by name; users add theirs under the `genenv.domains` entry-point group (the
object registered is a `Domain` subclass)."""

import functools

from genenv_cli.registry import Registry

DOMAINS = Registry("domain", "genenv.domains", {
    "tool_call": "genenv_cli.domains.tool_call:ToolCallDomain",
    "arith": "genenv_cli.domains.arith:ArithDomain",
    "bfcl": "genenv_cli.domains.bfcl:BFCLDomain",
    "api-bank": "genenv_cli.domains.api_bank:APIBankDomain",
    "bamboogle": "genenv_cli.domains.bamboogle:BamboogleDomain",
    "travelplanner": "genenv_cli.domains.travelplanner:TravelPlannerDomain",
    "alfworld": "genenv_cli.domains.alfworld:ALFWorldDomain",
})


@functools.cache
def get_domain(name: str):
    """The instance of the domain registered as `name` (one per process: domains cache their data)."""
    return DOMAINS.get(name)()


def run_domains(cfg) -> dict:
    """The run's domains by name, in name order: one for a single-domain run, every key of run.domains for a
    mixed one (their scorers and agent prompts; a run's imported seeds are `seedfiles.domains_for_run`'s)."""
    return {name: get_domain(name) for name in cfg.run.shares()}


def domain_data(domains: dict) -> str:
    """What a manifest records of the domains' data: the domain's fingerprint, or `name:fingerprint` of each."""
    if len(domains) == 1:
        return next(iter(domains.values())).data_fingerprint()
    return ",".join(f"{name}:{d.data_fingerprint()}" for name, d in domains.items())
