"""The `api-bank` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they
are)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.domains.answers import Payload, PromiseCase, family_item_text
from genenv_cli.domains.checks import DomainCase, SuiteData
from genenv_cli.families.api_bank.domain import gold_answer


def _api_call(p: Payload) -> dict[str, Any]:
    return [t for t in p["dialogue"] if t["role"] == "API"][p["k"]]


def _wrong(p: Payload) -> str:
    call = _api_call(p)  # another API with the same arguments (a mangled value may pass a lenient per-API rule)
    return "[{}Other({})]".format(call["api_name"], ", ".join(f"{k}='{v}'" for k, v in call["param_dict"].items()))


def _answers(p: Payload) -> list[str]:
    call = _api_call(p)
    name, args = call["api_name"], call["param_dict"]
    gold = gold_answer(p)
    outs = ["No call needed.", f"[{name}()]", gold + gold,
            "[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in args.items())),
            "[{}({})]".format(name, ", ".join(f"{k}='{str(v).upper()}'" for k, v in args.items()))]
    if args:
        first = next(iter(args))
        outs.append("[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in args.items() if k != first)))
    return outs


def contract_answers(data: Path) -> DomainCase:
    """`data`: API-Bank's release layout (apis/, lv1-lv2-samples/, test-data/)."""
    items: dict[str, Payload] = {}

    def pair(dom: Any, sample: Any) -> Payload:
        """API-Bank's items are whole dialogues read by `read_seeds` (one per evaluation point, named as the suite
        names its samples), read once."""
        if not items:
            items.update({t.id: t.payload for t in dom.read_seeds(data)})
        return items[sample.id]

    return DomainCase(
        gold=gold_answer, wrong=_wrong, env_text=family_item_text, answers=_answers,
        suite_data=(SuiteData(data),), pair=pair)


def promise_case(data: Path) -> PromiseCase:
    """`data`: the api-bank release folder (or one level folder or dialogue file), for seeds and suite alike."""
    return PromiseCase([data], data, "official")
