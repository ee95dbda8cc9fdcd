"""The reasons generate-tasks refused the environment's generations, grouped and counted.

Each rejected generation goes to `tasks.rejects.jsonl` with its own reason; many reasons differ only in the
quoted text or the task they name (`parse: unexpected character 'x'`, `duplicate of e0001-b0003-v1`). Grouped,
the few that matter show: the stage's summary line, its manifest (`counts.reject_reasons`) and `genenv status`
name the most common ones.

>>> top_reasons([{"reason": "parse: no EXERCISE: line"}] * 3 + [{"reason": "duplicate of e0001-b0002-v0"},
...              {"reason": "near duplicate of a17"}, {"reason": "surplus: the batch is already full"}])
[['parse: no EXERCISE: line', 3], ['duplicate of an earlier task', 1], ['near duplicate of an earlier task', 1]]

A quoted span that every generation of a group has alike (the format the domain asked for) is kept; only what
varies between them is taken out, and a long reason is shortened at its end, never inside a quote:

>>> top_reasons([{"reason": "parse: no 'ANSWER:' line after 'x'"}, {"reason": "parse: no 'ANSWER:' line after 'y'"}])
[["parse: no 'ANSWER:' line after '…'", 2]]
>>> shorten("parse: expected 'EXERCISE: <a> <op> <b>' then 'ANSWER: <n>'", 50)
"parse: expected 'EXERCISE: <a> <op> <b>' then …"
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
MAX_CHARS = 160


def shorten(text: str, limit: int = MAX_CHARS) -> str:
    """`text` cut to at most `limit` characters at its end, before a quote it would split, marked with "…"."""
    if len(text) <= limit:
        return text
    cut = limit - 2
    for m in _QUOTED.finditer(text):
        if m.start() < cut < m.end():
            cut = m.start()
            break
    return text[:cut].rstrip() + " …"


def reason_group(reason: str) -> str:
    """A reason with what may vary between generations taken out: quoted text and the task a duplicate copies
    (the key reasons are grouped by)."""
    text = _DUPLICATE.sub(r"\1 an earlier task", reason)
    return _QUOTED.sub("'…'", text)


def _shown(reasons: list[str]) -> str:
    """A group's reason as said: its quoted spans that are alike in every member kept, the others '…'."""
    texts = [_DUPLICATE.sub(r"\1 an earlier task", r) for r in reasons]
    spans = [[m.group(0) for m in _QUOTED.finditer(t)] for t in texts]
    keep = [all(len(s) > i and s[i] == spans[0][i] for s in spans) for i in range(len(spans[0]))]
    place = iter(range(len(keep)))

    def one(m: re.Match[str]) -> str:
        i = next(place)
        return m.group(0) if keep[i] else "'…'"

    return _QUOTED.sub(one, texts[0])


def top_reasons(rejects: list[dict[str, Any]], n: int = TOP) -> list[list[Any]]:
    """[[reason, count], ...]: the `n` most common reason groups, most common first (ties in first-seen order).
    A batch's surplus (a valid generation past its n variations) is no refusal and is left out; a mixed run's
    reasons name their domain."""
    members: dict[tuple[Any, str], list[str]] = {}
    domains = {r.get("domain") for r in rejects}
    for r in rejects:
        reason = str(r.get("reason", ""))
        if reason.startswith("surplus"):
            continue
        members.setdefault((r.get("domain"), reason_group(reason)), []).append(reason)
    ranked = sorted(members.items(), key=lambda kv: -len(kv[1]))  # stable: ties keep their first-seen order
    return [[shorten((f"{domain}: " if len(domains) > 1 else "") + _shown(reasons)), len(reasons)]
            for (domain, _), reasons in ranked[:n]]


def describe(top: Any, refused: int) -> str:
    """`reason (k of N), ...` for a summary line; "" when there is nothing (or a hand-edited manifest's odd
    value) to say."""
    if not isinstance(top, list):
        return ""
    parts = [f"{r[0]} ({r[1]} of {refused})" for r in top if isinstance(r, list | tuple) and len(r) == 2]
    return ", ".join(parts)
