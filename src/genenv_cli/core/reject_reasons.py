"""The reasons generate-tasks refused the environment's generations, grouped and counted.

Each rejected generation goes to `tasks.rejects.jsonl` with its own reason; many reasons differ only in the
quoted text or the task they name (`parse: unexpected character 'x'`, `duplicate of e0001-b0003-v1`). Grouped,
the few that matter show: the stage's summary line, its manifest (`counts.reject_reasons`) and `genenv status`
name the most common ones.

>>> top_reasons([{"reason": "parse: no EXERCISE: line"}] * 3 + [{"reason": "duplicate of e0001-b0002-v0"},
...              {"reason": "near duplicate of a17"}, {"reason": "surplus: the batch is already full"}])
[['parse: no EXERCISE: line', 3], ['duplicate of an earlier task', 1], ['near duplicate of an earlier task', 1]]
>>> reason_group("parse: the model's text doesn't name a tool 'get_weather'")
"parse: the model's text doesn't name a tool '…'"
>>> describe([["parse: no EXERCISE: line", 3], ["duplicate of an earlier task", 1]], 5)
'parse: no EXERCISE: line (3 of 5), duplicate of an earlier task (1 of 5)'
"""

from __future__ import annotations

import re
from typing import Any

TOP = 3
# a quoted span starts and ends at a word's edge: the apostrophes of "the model's text doesn't" quote nothing
_QUOTED = re.compile(r"(?<!\w)'[^']{0,200}'(?!\w)|(?<!\w)\"[^\"]{0,200}\"(?!\w)")
_DUPLICATE = re.compile(r"\b(duplicate of) \S+")
MAX_CHARS = 80


def reason_group(reason: str) -> str:
    """A reason with what varies between generations taken out: quoted text and the task a duplicate copies."""
    text = _DUPLICATE.sub(r"\1 an earlier task", reason)
    text = _QUOTED.sub("'…'", text)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def top_reasons(rejects: list[dict[str, Any]], n: int = TOP) -> list[list[Any]]:
    """[[reason, count], ...]: the `n` most common reason groups, most common first (ties in first-seen order).
    A batch's surplus (a valid generation past its n variations) is no refusal and is left out; a mixed run's
    reasons name their domain."""
    counts: dict[str, int] = {}
    domains = {r.get("domain") for r in rejects}
    for r in rejects:
        reason = str(r.get("reason", ""))
        if reason.startswith("surplus"):
            continue
        group = reason_group(reason)
        if len(domains) > 1:
            group = f"{r.get('domain')}: {group}"
        counts[group] = counts.get(group, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: ties keep their first-seen order
    return [[reason, count] for reason, count in ranked[:n]]


def describe(top: Any, refused: int) -> str:
    """`reason (k of N), ...` for a summary line; "" when there is nothing (or a hand-edited manifest's odd
    value) to say."""
    if not isinstance(top, list):
        return ""
    parts = [f"{r[0]} ({r[1]} of {refused})" for r in top if isinstance(r, list | tuple) and len(r) == 2]
    return ", ".join(parts)
