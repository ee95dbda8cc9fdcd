"""The `bfcl` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they are)."""

from __future__ import annotations

import re
from pathlib import Path

from genenv_cli.core.plaintext import plain_answer_problem
from genenv_cli.domains.answers import Payload, PromiseCase, family_item_text, seed_of_sample
from genenv_cli.domains.checks import DomainCase, SuiteData
from genenv_cli.families.bfcl.domain import gold_answer

# the categories of BFCL's files the contract loads (the multi-turn and relevance files are not the domain's)
CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "simple_javascript",
              "simple_java"]
# the question files a folder's seeds are taken from, by the category their name holds
SEED_FILE = re.compile(r"_(simple|multiple|parallel|irrelevance|live_simple|live_multiple|live_parallel)")


def _wrong(p: Payload) -> str:
    if not p["ground_truth"]:  # irrelevance: any call is wrong
        return f"[{p['function'][0]['name']}()]" if p["function"] else "[no_such_function()]"
    return "I cannot help with that."


def _answers(p: Payload) -> list[str]:
    gold = gold_answer(p)
    outs = [gold, "I can't do that.", "[unknown_function(x=1)]", gold.replace("[", "").replace("]", ""),
            '<tool_call>{"name": "x", "arguments": {}}</tool_call>']
    if p["ground_truth"]:
        name = next(iter(p["ground_truth"][0]))
        outs += [f"[{name}()]", gold + ", " + gold, gold.replace("'", '"').upper()]
    return outs


def _stricter(p: Payload, out: str) -> str | None:
    """On an irrelevance item, "no call" earns the reward only as a plain-text answer (docs/domains.md)."""
    return None if p["ground_truth"] else plain_answer_problem(out)


def contract_answers(data: Path) -> DomainCase:
    """`data`: BFCL's files in its layout (BFCL_v4_<category>.json, possible_answer/)."""
    return DomainCase(
        gold=gold_answer, wrong=_wrong, env_text=family_item_text, answers=_answers,
        suite_data=(SuiteData(data, ",".join(CATEGORIES)),), pair=seed_of_sample, stricter=_stricter)


def promise_case(data: Path) -> PromiseCase:
    """`data`: one question file, or a folder of them taken file by file: those of the single-turn AST and
    irrelevance categories the domain trains on (neither multi-turn nor live_relevance)."""
    seeds = [data]
    if data.is_dir():
        seeds = [f for f in sorted(data.glob("BFCL_v*_*.json")) if SEED_FILE.search(f.name)
                 and "live_relevance" not in f.name]
    return PromiseCase(seeds, data, "official")
