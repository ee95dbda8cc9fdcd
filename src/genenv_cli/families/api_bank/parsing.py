"""Reading the model's answer. Official: `<think>...</think>` blocks are dropped. genenv's `<tool_call>{"name",
"arguments"}</tool_call>` form is read first (`parse_tool_calls`); otherwise the first `[Name(...)]` span
that parses as Python call syntax (`parse_python_calls`, literals only) — the span `get_api_call`'s regex
`\\[(\\w+)\\((.*)\\)\\]` finds. Exactly one call is expected: none -> "no_call", several -> "extra_call" (the
official regex would merge them into one call with unknown parameters, which fails).
Paper protocol: ToolRL's reading (`parse_paper`).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from genenv_cli.core.callparse import (
    MAX_ANSWER_SOURCE,
    TOOL_CALL_BLOCK,
    Call,
    CallParseError,
    load_json,
    parse_python_calls,
    parse_tool_calls,
)

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_BRACKET_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


def _strip_think(text: str) -> str:
    return _THINK.sub("", text)


def _bracket_calls(text: str) -> list[Call]:
    """The first `[Name(...)]` span of the text that parses as Python call syntax ([] when none is present)."""
    starts = [m.start() for m in _BRACKET_START.finditer(text)]
    if not starts:
        return []
    budget = 4 * MAX_ANSWER_SOURCE  # characters handed to the parser in all: degenerate text costs bounded time
    for s in starts[:20]:
        ends, hi = [], len(text)  # the last 50 `]` after s, found by rfind (not a Python loop over the text)
        while len(ends) < 50 and (e := text.rfind("]", s + 1, hi)) >= 0:
            ends.append(e)
            hi = e
        for e in ends:
            budget -= e + 1 - s
            if budget < 0:
                break
            try:
                return parse_python_calls(text[s:e + 1])
            except CallParseError:
                continue
    raise CallParseError("an [ApiName(...)] call was found but could not be read as key=value literals")


def parse_official(output: str) -> list[Call]:
    """Calls in genenv's <tool_call> form, else the official [ApiName(key='value')] form."""
    text = _strip_think(output)
    calls = parse_tool_calls(text)
    if calls:
        return calls
    return _bracket_calls(text)


_TAG_BLOCK = TOOL_CALL_BLOCK  # the blocks genenv's own format reads


MAX_JSON_LINES = 1000  # blocks and lines read as JSON in all: an answer holds a few calls, not a thousand


def parse_paper(output: str) -> list[dict[str, Any]]:
    """ToolRL's reading: JSON objects, one per line, inside <tool_call> (the whole text when no tag); each
    becomes {"name", "parameters"} or, lacking those keys, {"bare": obj} (ToolRL scores a bare object as the
    gold API's parameters). Falls back to the [Name(...)] form."""
    text = _strip_think(output)
    blocks = _TAG_BLOCK.findall(text) or [text]
    objs: list[Any] = []
    tries = MAX_JSON_LINES
    for block in blocks:
        block = block.strip()
        tries -= 1
        if tries < 0:
            break
        try:
            obj = load_json(block)
            objs.extend(obj if isinstance(obj, list) else [obj])
            continue
        except CallParseError:
            pass
        for line in block.splitlines():
            line = line.strip()
            if line[:1] not in ("{", "[") or line == block:  # only these read as objects or lists; a one-line
                continue                                       # block was just tried whole
            tries -= 1
            if tries < 0:
                break
            try:
                obj = load_json(line)
            except CallParseError:
                continue
            objs.extend(obj if isinstance(obj, list) else [obj])
    calls: list[dict[str, Any]] = []
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        params = obj.get("parameters", obj.get("arguments"))
        if isinstance(params, str):
            with contextlib.suppress(CallParseError):
                params = load_json(params)
        if isinstance(obj.get("name"), str) and isinstance(params, dict):
            calls.append({"name": obj["name"], "parameters": params})
        else:
            calls.append({"bare": obj})
    if not any("name" in c for c in calls):
        with contextlib.suppress(CallParseError):
            calls.extend({"name": c.name, "parameters": c.arguments} for c in _bracket_calls(text))
    return calls
