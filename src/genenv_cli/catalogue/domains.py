"""Task families, registered by name; users add theirs under the `genenv.domains` entry-point group (the
object registered is a `Domain` subclass)."""


from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.plugin_guard import LOAD_LIMIT_S, StageDomain, guard
from genenv_cli.core.registry import Registry, Row

# A row's facts, read without importing the domain:
# - `family`: a benchmark-family domain (its tasks are a suite's items; docs/domains.md), whose promise (training
#   reward = the suite's verdict, item by item) tests/domains/test_domain_promise.py checks;
# - `lengths`: defaults for the output lengths its items and answers need, in tokens, replacing the generic default
#   of a setting the user did not set (neither in genenv.toml nor with --set; a preset's value counts as set); a
#   mixed run takes the largest over its domains. A benchmark's real items are much longer than the toy domains'
#   (a BFCL live_multiple item, written as the environment must write it, has a median of ~950 SmolLM2 tokens), so
#   the generic 256 would cut the environment off before its JSON closes. They are the 99th percentile over the
#   release files, rounded up to the next multiple of 256, measured with `benchmarks/speed/output_lengths.py`
#   (docs/domains.md has the figures and the command);
# - `test_answers`: "module:function" of the answers the project's contract and promise tests check the domain with
#   (`domains/answers/`, which says what they are; never imported by genenv itself).
DOMAINS = Registry("domain", "genenv.domains", {
    "tool_call": Row("genenv_cli.domains.tool_call:ToolCallDomain",
                     {"test_answers": "genenv_cli.domains.answers.tool_call:contract_answers"}),
    "arith": Row("genenv_cli.domains.arith:ArithDomain",
                 {"test_answers": "genenv_cli.domains.answers.arith:contract_answers"}),
    "calc": Row("genenv_cli.domains.calc:CalcDomain",
                {"test_answers": "genenv_cli.domains.answers.calc:contract_answers"}),
    # 99th percentile over BFCL's 12 AST/irrelevance files (bfcl-eval 2026.3.23): items 2,415 tokens, answers 156
    "bfcl": Row("genenv_cli.families.bfcl.domain:BFCLDomain",
                {"family": True, "lengths": {"generate.max_new_tokens": 2560},
                 "test_answers": "genenv_cli.families.bfcl.answers:contract_answers"}),
    # 99th percentile over API-Bank's level-1/2 dialogues: items 1,474 tokens, answers 110
    "api-bank": Row("genenv_cli.families.api_bank.domain:APIBankDomain",
                    {"family": True, "lengths": {"generate.max_new_tokens": 1536},
                     "test_answers": "genenv_cli.families.api_bank.answers:contract_answers"}),
    "bamboogle": Row("genenv_cli.families.bamboogle.domain:BamboogleDomain",
                     {"family": True, "test_answers": "genenv_cli.families.bamboogle.answers:contract_answers"}),
    "travelplanner": Row("genenv_cli.families.travelplanner.domain:TravelPlannerDomain",
                         {"family": True, "test_answers": "genenv_cli.families.travelplanner.answers:contract_answers"}),
    "alfworld": Row("genenv_cli.families.alfworld.domain:ALFWorldDomain",
                    {"family": True, "test_answers": "genenv_cli.families.alfworld.answers:contract_answers"}),
    "alfworld-game": Row("genenv_cli.families.alfworld.game_domain:ALFWorldGameDomain",
                         {"test_answers": "genenv_cli.families.alfworld.game_answers:contract_answers"}),
})


def domain_default(key: str, domains: list[str]) -> int | None:
    """The largest default the run's domains' rows give `key` ("generate.max_new_tokens"), or None."""
    values = [DOMAINS.facts(d).get("lengths", {}).get(key) for d in domains]
    return max((v for v in values if v is not None), default=None)


def get_domain(name: str):
    """The instance of the domain registered as `name` (one per process: domains cache their data; forgotten when
    the name is registered again or unregistered)."""
    return DOMAINS.instance(name)


def plugin_owner(name: str) -> str:
    """How a plugin domain's failure is attributed: by its entry point, or as registered at run time."""
    if DOMAINS.origin(name) == "added":
        return f"plugin `{name}` (domain registered at run time as {DOMAINS.rows[name].target})"
    return f"plugin `{name}` (entry point in {DOMAINS.group})"


_GUARDED: dict[tuple[str, float], tuple[object, StageDomain]] = {}


def stage_domain(name: str, limit: float = ITEM_TIMEOUT_S):
    """The domain `name` as a stage calls it: a built-in one as it is (genenv's own code); a plugin (an entry point
    or a row registered at run time) loaded under the plugin guard (import and construction within LOAD_LIMIT_S)
    and wrapped in it (`plugin_guard.StageDomain`: every call limited to `limit` seconds, reading its seeds to
    LOAD_LIMIT_S, its failure or exit named as the plugin's, its values checked). One
    wrapper per instance, so caches keyed on the object stay warm."""
    if DOMAINS.origin(name) == "built in":
        return get_domain(name)
    if name not in DOMAINS.rows and name not in DOMAINS.names():
        return get_domain(name)  # unknown: the registry's own error, with its suggestion
    owner = plugin_owner(name)
    dom = guard(owner, "loading (import and construction)", lambda: get_domain(name), max(limit, LOAD_LIMIT_S))
    if isinstance(dom, StageDomain):
        return dom
    held = _GUARDED.get((name, float(limit)))
    if held is None or held[0] is not dom:
        held = (dom, StageDomain(dom, owner, float(limit)))
        _GUARDED[(name, float(limit))] = held
    return held[1]


def run_domains(cfg) -> dict:
    """The run's domains by name, in name order: one for a single-domain run, every key of run.domains for a
    mixed one (their scorers and agent prompts; a run's imported seeds are `seedfiles.domains_for_run`'s). A
    plugin's is guarded (`stage_domain`) with the run's per-item limit."""
    limit = float(cfg.score.item_timeout_s)
    return {name: stage_domain(name, limit) for name in cfg.run.shares()}



def domain_data(domains: dict) -> str:
    """What a manifest records of the domains' data: the domain's fingerprint, or `name:fingerprint` of each."""
    if len(domains) == 1:
        return next(iter(domains.values())).data_fingerprint()
    return ",".join(f"{name}:{d.data_fingerprint()}" for name, d in domains.items())
