"""Reading a TravelPlanner plan out of a model's answer: the last ```json fence or bracketed span (outside a
`<think>` block) that reads, as JSON or a Python literal, as a list of day objects. Every reader is bounded, so
a degenerate answer costs bounded time and is no plan, never a crash."""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.core.callparse import (
    MAX_ANSWER_SOURCE,
    MAX_DEPTH,
    MAX_SOURCE,
    CallParseError,
    load_json,
    parse_literal,
)

PLAN_KEYS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")

_FAIL = object()


def _decode(text: str) -> Any:
    """JSON, else a Python literal; both readers are bounded (a model's 5,000-digit number or thousand brackets
    is no plan, never a crash)."""
    try:
        return load_json(text, "plan")
    except CallParseError:
        pass
    try:
        return parse_literal(text, "plan", MAX_ANSWER_SOURCE)
    except CallParseError:
        return _FAIL


def _as_plan(obj: Any) -> list[dict[str, Any]] | None:
    if isinstance(obj, dict) and isinstance(obj.get("plan"), list):
        obj = obj["plan"]
    if (isinstance(obj, list) and obj and all(isinstance(d, dict) for d in obj)
            and any(k in d for d in obj for k in PLAN_KEYS)):
        return obj
    return None


_SCAN = re.compile(r"[\"'\[\]{}]")                 # what the bracket scan stops at outside a quoted string
_IN_QUOTE = {q: re.compile(rf"[\\{q}]") for q in "\"'"}  # ... and inside one (the escape or the closing quote)


def _balanced(text: str, start: int, limit: int = MAX_SOURCE) -> str | None:
    """The bracketed span opening at `start`, skipping brackets inside quoted strings; None if unclosed. Also None
    when the span nests deeper than MAX_DEPTH or runs past `limit` characters (MAX_SOURCE): neither reader (both
    bounded by them) could take it, so the scan stops there instead of walking the rest of a degenerate answer (and
    the regexes jump from one bracket or quote to the next in C, not a character at a time in Python)."""
    return _scan(text, start, limit)[0]


def _scan(text: str, start: int, limit: int) -> tuple[str | None, int]:
    """(_balanced's answer, how many characters the scan read)."""
    depth, i, end = 0, start, min(len(text), start + limit)
    while i < end:
        m = _SCAN.search(text, i, end)
        if m is None:
            return None, end - start
        i, ch = m.start(), m.group()
        if ch in "\"'":
            while True:  # to the closing quote, over escapes
                q = _IN_QUOTE[ch].search(text, i + 1, end)
                if q is None:
                    return None, end - start
                i = q.start()
                if q.group() != "\\":
                    break
                i += 1
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return None, i - start
        else:
            depth -= 1
            if depth == 0:
                return text[start:i + 1], i + 1 - start
        i += 1
    return None, end - start


# A reasoning block is dropped as re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL) would drop it, by str.find:
# the regex rescans the rest of the text from every `<think>` that is never closed (50,000 of them: minutes).
def _drop_think(text: str) -> str:
    out, pos = [], 0
    while (i := text.find("<think>", pos)) >= 0 and (j := text.find("</think>", i + 7)) >= 0:
        out.append(text[pos:i])
        pos = j + 8
    out.append(text[pos:])
    return "".join(out)


# possessive runs of blanks: with plain `[ \t]*` on both sides of the optional language an unclosed fence followed by
# blanks backtracks quadratically; a run of blanks is all taken either way, since no language name starts with one
_FENCE = re.compile(r"```[ \t]*+(?:json|JSON|python|py)?[ \t]*+\n?(.*?)```", re.DOTALL)
_OPEN = re.compile(r"\[\s*\{|\{\s*[\"']plan[\"']\s*:")
MAX_CANDIDATES = 64  # fences, then bracketed spans, tried as the plan; a real answer holds a few
PLAN_BUDGET = 2 * MAX_SOURCE  # characters scanned and handed to the readers in all, over the fences and spans tried


def extract_plan(output: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(plan, "") or (None, why not). The answer is the last complete plan in the text: a model that writes a
    draft, then "Corrected plan:" and a second one, answers with the second, as the official pipeline (a model
    converting the whole answer) would read it; a last plan cut off mid-way is no plan, so the one before it
    stands. Candidates are the ```json fences and the balanced `[{...}]` / `{"plan": [...]}` spans; of those that
    read as a plan, the one that ends last wins (a fence ends after the span inside it, so a fenced plan is read
    as its fence)."""
    text = _drop_think(output)
    budget = PLAN_BUDGET  # a degenerate answer of many fences or brackets costs bounded time
    best: list[dict[str, Any]] | None = None
    best_end = -1
    for n, m in enumerate(_FENCE.finditer(text)):
        budget -= m.end() - m.start()
        if n == MAX_CANDIDATES or budget < 0:
            break
        plan = _as_plan(_decode(m.group(1).strip()))
        if plan is not None:
            best, best_end = plan, m.end()
    pos, n = 0, 0
    while budget >= 0 and n < MAX_CANDIDATES and (m := _OPEN.search(text, pos)) is not None:
        n += 1
        span, read = _scan(text, m.start(), min(MAX_SOURCE, budget))
        budget -= read + 1
        pos = m.start() + 1
        if span is None:
            continue
        plan = _as_plan(_decode(span))
        if plan is not None:
            end = m.start() + len(span)
            if end > best_end:
                best, best_end = plan, end
            pos = end  # a plan's own inner brackets are no further candidates
    if best is not None:
        return best, ""
    if not text.strip():
        return None, "empty output"
    return None, "no plan found: expected a JSON list of day objects (days, current_city, transportation, ...)"
