"""The `bamboogle` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they
are)."""

from __future__ import annotations

from pathlib import Path

from genenv_cli.domains.answers import Payload, PromiseCase, family_item_text, seed_of_sample
from genenv_cli.domains.checks import DomainCase, SuiteData

# the release's three formats of the same records, each loaded by the suite
FILES = ("bamboogle.csv", "bamboogle.json", "test.jsonl")


def _answers(p: Payload) -> list[str]:
    gold = p["answer"][0]
    return [f"The answer is {gold}", gold.upper(), f"<answer>{gold} and more</answer>", "<answer>no idea</answer>",
            f"<think>{gold}</think> wrong", f"<answer>the {gold}.</answer>"]


def contract_answers(data: Path) -> DomainCase:
    """`data`: a folder holding the records as bamboogle.csv, bamboogle.json and test.jsonl."""
    return DomainCase(
        gold=lambda p: f"<answer> {p['answer'][0]} </answer>", wrong=lambda p: "<answer>certainly not this</answer>",
        env_text=family_item_text, answers=_answers, suite_data=tuple(SuiteData(data / n) for n in FILES),
        pair=seed_of_sample)


def promise_case(data: Path) -> PromiseCase:
    """`data`: a records file, or a folder; a folder holding bamboogle.json is read through that file (the
    hand-written folder holds the same records in three formats)."""
    source = data / "bamboogle.json" if (data / "bamboogle.json").is_file() else data
    return PromiseCase([source], source, "official")
