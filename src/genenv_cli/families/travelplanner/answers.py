"""The `travelplanner` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what
they are). Its items carry no plan, so the right answers are the gold plans kept beside the data files."""

from __future__ import annotations

import csv
import functools
import json
from pathlib import Path
from typing import Any

from genenv_cli.domains.answers import Payload, PromiseCase, family_item_text, seed_of_sample
from genenv_cli.domains.checks import DomainCase, SuiteData


@functools.cache
def gold_plans(data: Path) -> dict[str, Any]:
    """The gold plans in `data` by query (gold_plans.json is keyed by the record's 1-based index in
    validation.csv)."""
    with open(data / "validation.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    plans = json.loads((data / "gold_plans.json").read_text())
    return {rows[int(i) - 1]["query"]: plan for i, plan in plans.items()}


def contract_answers(data: Path) -> DomainCase:
    """`data`: the release's validation.csv and database/, and gold_plans.json (a plan per record, by its 1-based
    index)."""

    def gold(p: Payload) -> str | None:
        plan = gold_plans(data).get(p["query"])
        return None if plan is None else "The plan:\n```json\n" + json.dumps(plan) + "\n```"

    def answers(p: Payload) -> list[str]:
        plan = gold_plans(data).get(p["query"])
        if plan is None:
            return []
        short = "The plan:\n```json\n" + json.dumps(plan[:-1]) + "\n```"  # a day missing
        return [short, "```json\n[]\n```"]

    return DomainCase(gold=gold, wrong=lambda p: "No plan.", env_text=family_item_text, answers=answers,
                      suite_data=(SuiteData(data),), pair=seed_of_sample)


def promise_case(data: Path) -> PromiseCase:
    """`data`: the training split the domain trains on (train.csv, or the official repository's release folder);
    a folder holding train.csv is read through that file, for seeds and suite alike."""
    source = data / "train.csv" if (data / "train.csv").is_file() else data
    return PromiseCase([source], source, "official")
