"""What the tests know about each built-in domain, in one table: how to write its right answer and wrong ones, how
the environment writes one of its items, and (for a benchmark-family domain) the hand-written files in the
benchmark's official format that its suite loads. tests/domains/test_domain_contract.py checks every domain against the
contract (`genenv_cli.domains.checks`, the code `genenv domains check` runs) with its row here; a domain without a
row is checked with the answers it declares itself (`gold_answer`, `wrong_answer`, `render_task`), as a plugin
is."""

from __future__ import annotations

import csv
import functools
import json
from typing import Any

from genenv_cli.domains.checks import DomainCase, Payload, SuiteData, seed_context  # noqa: F401 - the tests' names
from paths import FIXTURES

FIX = FIXTURES


# ---------------------------------------------------------------- answers, by domain

def tool_call_block(_name: str, **args: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": _name, "arguments": args})}\n</tool_call>'


def _tool_call_gold(p: Payload) -> str:
    return "".join(tool_call_block(c["name"], **c["arguments"]) for c in p["calls"]) or "No tool fits that."


def _bfcl_gold(p: Payload) -> str:
    from genenv_cli.domains.bfcl import gold_answer

    return gold_answer(p)


def _bfcl_wrong(p: Payload) -> str:
    if not p["ground_truth"]:  # irrelevance: any call is wrong
        return f"[{p['function'][0]['name']}()]" if p["function"] else "[no_such_function()]"
    return "I cannot help with that."


def _bfcl_answers(p: Payload) -> list[str]:
    gold = _bfcl_gold(p)
    outs = [gold, "I can't do that.", "[unknown_function(x=1)]", gold.replace("[", "").replace("]", ""),
            '<tool_call>{"name": "x", "arguments": {}}</tool_call>']
    if p["ground_truth"]:
        name = next(iter(p["ground_truth"][0]))
        outs += [f"[{name}()]", gold + ", " + gold, gold.replace("'", '"').upper()]
    return outs


def _bfcl_stricter(p: Payload, out: str) -> str | None:
    """On an irrelevance item, "no call" earns the reward only as a plain-text answer (docs/domains.md)."""
    from genenv_cli.plaintext import plain_answer_problem

    return None if p["ground_truth"] else plain_answer_problem(out)


def _api_bank_gold(p: Payload) -> str:
    from genenv_cli.domains.api_bank import gold_answer

    return gold_answer(p)


def _api_call(p: Payload) -> dict[str, Any]:
    return [t for t in p["dialogue"] if t["role"] == "API"][p["k"]]


def _api_bank_wrong(p: Payload) -> str:
    call = _api_call(p)  # another API with the same arguments (a mangled value may pass a lenient per-API rule)
    return "[{}Other({})]".format(call["api_name"], ", ".join(f"{k}='{v}'" for k, v in call["param_dict"].items()))


def _api_bank_answers(p: Payload) -> list[str]:
    call = _api_call(p)
    name, args = call["api_name"], call["param_dict"]
    gold = _api_bank_gold(p)
    outs = ["No call needed.", f"[{name}()]", gold + gold,
            "[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in args.items())),
            "[{}({})]".format(name, ", ".join(f"{k}='{str(v).upper()}'" for k, v in args.items()))]
    if args:
        first = next(iter(args))
        outs.append("[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in args.items() if k != first)))
    return outs


def _api_bank_pair(dom: Any, sample: Any) -> Payload:
    """API-Bank's items are whole dialogues read by `read_seeds` (one per evaluation point, named as the suite
    names its samples)."""
    return _api_bank_items(dom)[sample.id]


@functools.cache
def _api_bank_items(dom: Any) -> dict[str, Payload]:
    return {t.id: t.payload for t in dom.read_seeds(FIX / "api_bank")}


def _bamboogle_answers(p: Payload) -> list[str]:
    gold = p["answer"][0]
    return [f"The answer is {gold}", gold.upper(), f"<answer>{gold} and more</answer>", "<answer>no idea</answer>",
            f"<think>{gold}</think> wrong", f"<answer>the {gold}.</answer>"]


def _alfworld_wrong(p: Payload) -> str:
    return "ACTION: " + next(c for c in p["admissible_commands"] if c != p["action"])


@functools.cache
def travel_gold_plans() -> dict[str, Any]:
    """The fixture's gold plans by query (gold_plans.json is keyed by the record's 1-based index)."""
    with open(FIX / "travelplanner" / "validation.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    plans = json.loads((FIX / "travelplanner" / "gold_plans.json").read_text())
    return {rows[int(i) - 1]["query"]: plan for i, plan in plans.items()}


def _travel_gold(p: Payload) -> str | None:
    plan = travel_gold_plans().get(p["query"])
    return None if plan is None else "The plan:\n```json\n" + json.dumps(plan) + "\n```"


def _travel_answers(p: Payload) -> list[str]:
    plan = travel_gold_plans().get(p["query"])
    if plan is None:
        return []
    short = "The plan:\n```json\n" + json.dumps(plan[:-1]) + "\n```"  # a day missing
    return [short, "```json\n[]\n```"]


def _seed_from_sample(dom: Any, sample: Any) -> Payload:
    return dom.seed_from_sample(sample).payload


def _family_text(dom: Any, p: Payload) -> str:
    return "Here is a new item:\n```json\n" + dom.render_item(p) + "\n```"


BAMBOOGLE = FIX / "bamboogle"
BFCL_CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
                   "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "simple_javascript",
                   "simple_java"]

CASES: dict[str, DomainCase] = {
    "arith": DomainCase(
        gold=lambda p: f"Answer: {p['answer']}", wrong=lambda p: f"Answer: {p['answer'] + 1}",
        env_text=lambda d, p: f"Sure!\nEXERCISE: {p['expression']} = ?"),
    "tool_call": DomainCase(
        gold=_tool_call_gold, wrong=lambda p: tool_call_block("send_fax", to="nobody"),  # a tool never offered
        env_text=lambda d, p: d.render_task(p)),
    "bfcl": DomainCase(
        gold=_bfcl_gold, wrong=_bfcl_wrong, env_text=_family_text, answers=_bfcl_answers,
        suite_data=(SuiteData(FIX / "bfcl", ",".join(BFCL_CATEGORIES)),), pair=_seed_from_sample,
        stricter=_bfcl_stricter),
    "api-bank": DomainCase(
        gold=_api_bank_gold, wrong=_api_bank_wrong, env_text=_family_text, answers=_api_bank_answers,
        suite_data=(SuiteData(FIX / "api_bank"),), pair=_api_bank_pair),
    "bamboogle": DomainCase(
        gold=lambda p: f"<answer> {p['answer'][0]} </answer>", wrong=lambda p: "<answer>certainly not this</answer>",
        env_text=_family_text, answers=_bamboogle_answers,
        suite_data=tuple(SuiteData(BAMBOOGLE / n) for n in ("bamboogle.csv", "bamboogle.json", "test.jsonl")),
        pair=_seed_from_sample),
    "alfworld": DomainCase(
        gold=lambda p: f"ACTION: {p['action']}", wrong=_alfworld_wrong, env_text=_family_text,
        answers=lambda p: [f"> {p['action'].upper()}.", "I am not sure what to do."],
        suite_data=(SuiteData(FIX / "alfworld"),), pair=_seed_from_sample),
    "travelplanner": DomainCase(
        gold=_travel_gold, wrong=lambda p: "No plan.", env_text=_family_text, answers=_travel_answers,
        suite_data=(SuiteData(FIX / "travelplanner"),), pair=_seed_from_sample),
}
