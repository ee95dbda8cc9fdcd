"""The `alfworld` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they
are)."""

from __future__ import annotations

from pathlib import Path

from genenv_cli.domains.answers import Payload, PromiseCase, family_item_text, seed_of_sample
from genenv_cli.domains.checks import DomainCase, SuiteData


def _wrong(p: Payload) -> str:
    return "ACTION: " + next(c for c in p["admissible_commands"] if c != p["action"])


def contract_answers(data: Path) -> DomainCase:
    """`data`: ALFWorld's game files in the release layout (json_2.1.1/<split>/<task>/<trial>/)."""
    return DomainCase(
        gold=lambda p: f"ACTION: {p['action']}", wrong=_wrong, env_text=family_item_text,
        answers=lambda p: [f"> {p['action'].upper()}.", "I am not sure what to do."],
        suite_data=(SuiteData(data),), pair=seed_of_sample)


def promise_case(data: Path) -> PromiseCase:
    """`data`: ALFWorld's games (a folder: one `--seeds` per game file, the release's game.tw-pddl files, else the
    scripted ones), scored under the paper's step-level protocol, which the domain trains on."""
    seeds = [data]
    if data.is_dir():
        seeds = sorted(data.rglob("game.tw-pddl")) or sorted(data.rglob("game.scripted.json"))
    return PromiseCase(seeds, data, "paper")
