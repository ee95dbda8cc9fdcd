"""The `calc` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they are)."""

from __future__ import annotations

from pathlib import Path

from genenv_cli.domains.checks import DomainCase


def contract_answers(data: Path) -> DomainCase:
    """`data` is not read: calc reads no benchmark files (its tasks are arith's)."""
    return DomainCase(
        gold=lambda p: f"Answer: {p['answer']}", wrong=lambda p: f"Answer: {p['answer'] + 1}",
        env_text=lambda d, p: f"Sure!\nEXERCISE: {p['expression']} = ?")
