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
})


@functools.cache
def get_domain(name: str):
    """The instance of the domain registered as `name` (one per process: domains cache their data)."""
    return DOMAINS.get(name)()
