"""The contract every registered domain keeps, one parametrised test per clause over `DOMAINS`. The clauses are
`genenv_cli.domains.checks`, the code `genenv domains check NAME` runs; here each built-in domain is checked
with the test answers its registry row names (more answers, and the benchmarks' hand-written files; read by
tests/domain_cases.py), a domain whose row names none (a plugin) with the answers it declares itself:

- its built-in seeds are self-consistent: both splits present, unique ids, known shapes, each passing the
  domain's own check;
- the right answer to every item scores 1 (valid) and a wrong one 0, one by one and in `score_many`;
- an item written as the environment writes it reads back as a well-formed item; text with no item is
  rejected as a parse failure;
- its prompts are chat messages, the environment's for the first epoch's context and a later one's;
- where the domain is built on a benchmark's `evaluate` suite: for every item of the benchmark's hand-written
  files in the official format (and every built-in seed), the agent's prompt is the suite's prompt and the
  domain's reward on right, wrong, empty and malformed answers is the suite's verdict.

And `genenv domains check` passes every built-in domain with only what the domain declares.

The domain-specific rules (each broken item rejected for its own reason, the seed-file readers, the shape
names) stay in tests/domains/test_<domain>_domain.py."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from domain_cases import CASES, DomainCase, Payload
from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.cli import app
from genenv_cli.domains.checks import (
    ContractFailure,
    all_seeds,
    check_answers,
    check_env_output,
    check_fingerprints,
    check_prompts,
    check_seeds,
    check_suite,
    declared_case,
    run_contract,
    suite_pairs,
)
from genenv_cli.domains.family import FamilyDomain

NAMES = sorted(DOMAINS.names())
FAMILY = [n for n in NAMES if isinstance(get_domain(n), FamilyDomain)]


def case(name: str) -> DomainCase:
    """The test answers the domain's registry row names, else the ones it declares (a plugin's: `genenv domains
    check` uses the same)."""
    return CASES.get(name) or declared_case(get_domain(name))


def test_every_built_in_domain_has_a_row_and_the_family_ones_their_files():
    assert set(CASES) <= set(NAMES), "test answers for domains that are not registered"
    built_in = set(DOMAINS.builtins)
    missing = sorted(built_in - set(CASES))
    assert not missing, f"the registry rows of the built-in domain(s) {missing} name no test answers (`test_answers`)"
    for name in FAMILY:
        if name in built_in:
            assert CASES[name].suite_data and CASES[name].pair, f"{name}: its benchmark's files are the contract's data"
            assert all(d.data.exists() for d in CASES[name].suite_data), name


@pytest.mark.parametrize("name", sorted(DOMAINS.builtins))
def test_the_registry_row_says_what_the_domain_is(name):
    """A row's `family` fact is what its class is, and its `lengths` name settings that exist."""
    facts = DOMAINS.facts(name)
    assert bool(facts.get("family")) == isinstance(get_domain(name), FamilyDomain), name
    for key, value in facts.get("lengths", {}).items():
        section, field = key.split(".")
        assert isinstance(getattr(getattr(Config(), section), field), int) and value > 0, key


@functools.cache
def _suite_pairs(name: str) -> list[tuple[Payload, Any]]:
    return suite_pairs(get_domain(name), case(name)) if case(name).suite_data else []


def _items(name: str) -> list[Payload]:
    """Every item the contract is checked on: the built-in seeds, and the benchmark files' items."""
    return [s.payload for s in all_seeds(get_domain(name))] + [p for p, _ in _suite_pairs(name)]


@pytest.mark.parametrize("name", NAMES)
def test_builtin_seeds_are_self_consistent(name):
    check_seeds(get_domain(name))


@pytest.mark.parametrize("name", NAMES)
def test_the_right_answer_scores_one_and_a_wrong_one_zero(name):
    if name == "alfworld-game":  # a game is won by a plan of actions, never by one answer (test_alfworld_game_domain)
        pytest.skip("alfworld-game has no single right answer; its tests play the expert plans")
    check_answers(get_domain(name), case(name), _items(name))


@pytest.mark.parametrize("name", NAMES)
def test_what_the_environment_writes_reads_back_and_no_item_is_a_parse_failure(name):
    check_env_output(get_domain(name), case(name))


@pytest.mark.parametrize("name", NAMES)
def test_prompts_are_chat_messages(name):
    check_prompts(get_domain(name))


@pytest.mark.parametrize("name", NAMES)
def test_what_shapes_the_output_is_fingerprinted(name):
    check_fingerprints(get_domain(name))


@pytest.mark.parametrize("name", FAMILY)
def test_score_equals_the_suites_verdict_item_for_item(name):
    check_suite(get_domain(name), case(name), _suite_pairs(name))


@pytest.mark.parametrize("name", NAMES)
def test_domains_check_passes_every_domain_with_what_it_declares(name):
    """`genenv domains check NAME`: the same clauses with only the domain's own answers; a clause it cannot
    check (travelplanner's items carry no plan to write) is shown as skipped, never passed silently."""
    result = CliRunner().invoke(app, ["domains", "check", name, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["checks"]
    assert [r["name"] for r in rows][:5] == ["seeds", "answers", "environment output", "prompts", "fingerprints"]
    assert all(r["status"] in ("ok", "skip") for r in rows), rows
    skipped = {r["name"] for r in rows if r["status"] == "skip"}
    assert skipped <= {"benchmark suite"} | ({"answers"} if name in ("travelplanner", "alfworld-game") else set()), rows


def test_a_broken_domain_fails_the_clause_it_breaks_naming_the_item():
    """The contract can fail: a scorer that accepts anything, a parser that accepts prose, a seed of an unknown
    shape, and a method a plugin forgot are each one failed line, the rest still checked."""
    from genenv_cli.domains.arith import ArithDomain
    from genenv_cli.domains.base import Domain, TaskVerdict

    class Lenient(ArithDomain):
        def score(self, payload, completion):
            return TaskVerdict(1.0, 1.0, True, None)

    results = {r.name: r for r in run_contract(Lenient())}
    assert results["answers"].status == "fail" and "the wrong answer 'Answer: " in results["answers"].detail
    assert results["environment output"].status == results["prompts"].status == "ok"

    class Forgetful(ArithDomain):
        render_task = Domain.render_task  # the base's: not declared

    results = {r.name: r for r in run_contract(Forgetful())}
    assert results["environment output"].status == "fail"
    assert "does not declare render_task" in results["environment output"].detail

    class OddShape(ArithDomain):
        shapes = ("add-1d",)

    with pytest.raises(ContractFailure, match="shapes the domain does not name"):
        check_seeds(OddShape())
    assert [r.name for r in run_contract(OddShape())] == ["seeds"]  # the rest works on the seeds: not run
