"""The `alfworld-game` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they
are)."""

from __future__ import annotations

import json
from pathlib import Path

from genenv_cli.domains.checks import DomainCase


def contract_answers(data: Path) -> DomainCase:
    """`data` is not read: the built-in seeds are scripted games. No single answer wins a game, so there is no right
    answer to grade (the episodes' test plays the expert plans instead); `inventory` never wins one."""
    return DomainCase(gold=lambda p: None, wrong=lambda p: "ACTION: inventory",
                      env_text=lambda d, p: "Here is a new game:\n" + json.dumps(p["game"]))
