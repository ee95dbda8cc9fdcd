"""The `tool_call` domain's test answers (its registry row's `test_answers`; answers/__init__.py says what they
are)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.domains.answers import Payload
from genenv_cli.domains.checks import DomainCase


def tool_call_block(_name: str, **args: Any) -> str:
    """One call written as the agent writes it."""
    return f'<tool_call>\n{json.dumps({"name": _name, "arguments": args})}\n</tool_call>'


def _gold(p: Payload) -> str:
    return "".join(tool_call_block(c["name"], **c["arguments"]) for c in p["calls"]) or "No tool fits that."


def contract_answers(data: Path) -> DomainCase:
    """`data` is not read: tool_call reads no benchmark files."""
    return DomainCase(
        gold=_gold, wrong=lambda p: tool_call_block("send_fax", to="nobody"),  # a tool never offered
        env_text=lambda d, p: d.render_task(p))
