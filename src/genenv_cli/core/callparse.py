"""Parsing tool calls out of model text: as data, never by evaluating it.

Two surface forms are understood:

1. **genenv's tool-call format** (the `tool_call` domain's agent format, the Hermes/Qwen convention):
   one `<tool_call>...</tool_call>` block per call, holding a JSON object
   `{"name": "get_weather", "arguments": {"city": "Paris"}}` (a JSON list of such objects inside one block
   is accepted too). A completion that is, as a whole, such an object or list (optionally inside a
   ```json fence) is read the same way. Text with no call in it is "no call".
2. **Python-call syntax** as BFCL's prompting format and API-Bank write it:
   `[get_weather(city="Paris"), math.factorial(n=5)]` or `ApiName(key='value')`. The text is parsed with
   `ast.parse` and only literal nodes are converted (numbers, strings, booleans, None, lists, tuples,
   dicts, negative numbers); anything else is an error. Nothing is ever evaluated. The same literal reader
   (`literal_value`, `parse_literal`) is the code base's only one: TravelPlanner's plans and CSV cells and
   API-Bank's argument values and apis/*.py descriptions are read with it.

Degenerate model output (a thousand `[`, a run of minus signs, a 5,000-digit number, megabytes of text) is a
wrong answer, never a crash: every reader here either returns calls or raises `CallParseError`, and each
checks the text against `MAX_DEPTH` / `MAX_DIGITS` / `MAX_SOURCE` before handing it to `json` or `ast`, whose
recursion and int-string limits would otherwise raise RecursionError or ValueError.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any


class CallParseError(ValueError):
    """The text claims to hold calls but they cannot be read."""


MAX_DEPTH = 100        # brackets nested, or unary signs in a row: real calls stay far below
MAX_DIGITS = 1000      # digits in one number (Python refuses to convert more than 4,300)
MAX_SOURCE = 100_000   # characters of Python-call syntax handed to ast.parse at once
# ... when it is a model's answer: CPython's parser takes about a second on 100,000 characters of `a, a, a, ...`
# on a busy machine, and no answer of calls comes near this (BFCL's and API-Bank's longest are a few hundred
# characters; 20,000 are over 5,000 tokens, past the default generation limits of 256 and 512)
MAX_ANSWER_SOURCE = 20_000

_BRACKETS = re.compile(r"[][(){}]")
# Both scans are linear: signs in a row are looked for in the text without its whitespace, and only where a run of
# signs (or of digits) starts, so a megabyte is read once, not once per sign or digit in a run.
_SIGNS = re.compile(rf"(?<![-+~])[-+~]{{{MAX_DEPTH + 1}}}")
_LONG_NUMBER = re.compile(rf"(?<!\d)\d{{{MAX_DIGITS + 1}}}")


def _many_signs(text: str) -> bool:
    """More than MAX_DEPTH of `-`, `+`, `~` in a row, whitespace between them allowed (as `-  - -1`)."""
    if text.count("-") + text.count("+") + text.count("~") <= MAX_DEPTH:
        return False  # the common case, decided by three C scans
    return _SIGNS.search("".join(text.split())) is not None


def check_bounds(text: str, what: str = "output") -> None:
    """Raise CallParseError when `text` nests brackets or signs deeper than MAX_DEPTH or holds a number of more
    than MAX_DIGITS digits. Brackets inside strings count too: the check is a cheap, conservative scan (no
    parser has run yet), so a string argument holding a hundred `[` makes the answer unreadable, as it should."""
    depth = deepest = 0
    for ch in _BRACKETS.findall(text):
        if ch in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    raise CallParseError(f"{what} nests brackets more than {MAX_DEPTH} deep")
        elif depth:
            depth -= 1
    if _many_signs(text):
        raise CallParseError(f"{what} has more than {MAX_DEPTH} signs in a row")
    if _LONG_NUMBER.search(text):
        raise CallParseError(f"{what} has a number of more than {MAX_DIGITS} digits")


def load_json(text: str, what: str = "output") -> Any:
    """json.loads for model text: CallParseError (never RecursionError or the int-string ValueError) when it is
    not JSON or is too deep or too long to be a real answer."""
    check_bounds(text, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CallParseError(f"{what} is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # belt and braces: the bounds above should prevent both
        raise CallParseError(f"{what} cannot be read as JSON ({type(exc).__name__})") from None


def parse_literal_source(src: str, what: str = "output", limit: int = MAX_SOURCE) -> ast.expr:
    """ast.parse(src, mode="eval").body for model text, bounded: CallParseError on anything unreadable or longer
    than `limit` characters (MAX_ANSWER_SOURCE for a model's answer)."""
    if len(src) > limit:
        raise CallParseError(f"{what} is longer than {limit:,} characters")
    check_bounds(src, what)
    try:
        return ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        raise CallParseError(f"not Python call syntax ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise CallParseError(f"{what} cannot be read as Python call syntax ({type(exc).__name__})") from None


@dataclass
class Call:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


# one <tool_call> block (an unclosed one runs to the end: a truncated answer); API-Bank's ToolRL reading uses it too
TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def unfence(text: str, languages: tuple[str, ...] = ("json",)) -> str | None:
    """The inside of a completion that is, as a whole, one code fence (```json ... ```; the language tag is
    optional and one of `languages`, tried in order), stripped; None when `text` is not fenced. `text` is
    already stripped. Written as slicing rather than the regex `^```(?:json)?\\s*(.*?)\\s*```$`, which reads
    the same answers but backtracks cubically over whitespace (33 s on a fence and 2,000 spaces); this is one
    pass."""
    if len(text) < 6 or not text.startswith("```") or not text.endswith("```"):
        return None
    inner = text[3:-3]
    for lang in languages:
        if inner.startswith(lang):
            inner = inner[len(lang):]
            break
    return inner.strip()


def _calls_from_json(obj: Any, where: str) -> list[Call]:
    items = obj if isinstance(obj, list) else [obj]
    calls = []
    for item in items:
        if not isinstance(item, dict):
            raise CallParseError(f"{where}: expected an object with name and arguments, got {type(item).__name__}")
        name = item.get("name")
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):  # OpenAI-style arguments as a JSON string
            args = load_json(args, f"{where}: arguments string")
        if not isinstance(name, str) or not name:
            raise CallParseError(f"{where}: call without a string name")
        if not isinstance(args, dict):
            raise CallParseError(f"{where}: arguments of {name} must be an object")
        extra = set(item) - {"name", "arguments", "parameters", "id", "type"}
        if extra:
            raise CallParseError(f"{where}: unexpected keys {sorted(extra)} in call {name}")
        calls.append(Call(name, args))
    return calls


def parse_tool_calls(text: str) -> list[Call]:
    """genenv's format. Returns [] when the text holds no call; raises CallParseError when it holds a
    malformed or truncated one."""
    blocks = TOOL_CALL_BLOCK.findall(text)
    if blocks:
        calls: list[Call] = []
        for i, raw in enumerate(blocks):
            raw = raw.strip()
            if not raw:
                raise CallParseError(f"tool_call block {i + 1} is empty")
            obj = load_json(raw, f"tool_call block {i + 1}")
            calls.extend(_calls_from_json(obj, f"tool_call block {i + 1}"))
        return calls
    stripped = text.strip()
    inner = unfence(stripped)
    if inner is not None:
        stripped = inner
    if stripped[:1] in "[{":
        try:
            obj = load_json(stripped, "JSON completion")
        except CallParseError:
            return []  # prose or code that merely starts with a bracket (or a degenerate run of them): no call
        if (isinstance(obj, dict) and "name" in obj) or (
                isinstance(obj, list) and obj and all(isinstance(o, dict) and "name" in o for o in obj)):
            return _calls_from_json(obj, "JSON completion")
    return []


# ---------------------------------------------------------------- python literals

_SCALAR = (str, int, float, bool, type(None))
_NAMES = {"true": True, "false": False, "null": None}  # JSON's spellings, as models write them in Python


def literal_value(node: ast.AST, *, concat: bool = False) -> Any:
    """The JSON-able value of a literal node: strings, numbers (with a sign), booleans, None (also spelled
    true / false / null), lists, tuples and sets (as lists), dicts with scalar keys. `concat=True` also joins
    strings written `"a" + "b"` (API-Bank's apis/*.py spell long descriptions so). Anything else raises
    CallParseError: nothing is evaluated. Callers bound the depth first (`parse_literal_source`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, _SCALAR):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        val = literal_value(node.operand, concat=concat)
        if isinstance(val, int | float) and not isinstance(val, bool):
            return -val if isinstance(node.op, ast.USub) else val
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [literal_value(e, concat=concat) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise CallParseError("dict unpacking (**) is not a literal")
            key = literal_value(k, concat=concat)
            if not isinstance(key, _SCALAR):
                raise CallParseError(f"dict keys must be strings, numbers, booleans or None: {_show(k)}")
            out[key] = literal_value(v, concat=concat)
        return out
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if concat and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal_value(node.left, concat=True), literal_value(node.right, concat=True)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    raise CallParseError(f"not a literal value: {_show(node)}")


def parse_literal(text: str, what: str = "value", limit: int = MAX_SOURCE) -> Any:
    """Python-literal text (`{'a': [1, -2.5, None]}`, as datasets store dicts in CSV cells and models write
    them) -> data, bounded as `parse_literal_source`; CallParseError (a ValueError) otherwise."""
    return literal_value(parse_literal_source(text.strip(), what, limit))


# ---------------------------------------------------------------- python-call syntax

def _show(node: ast.AST) -> str:
    """A short rendering of a node for an error message (ast.unparse of a deep tree would recurse too far)."""
    try:
        return repr(ast.unparse(node)[:60])
    except (RecursionError, ValueError):
        return type(node).__name__


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise CallParseError(f"not a function name: {_show(node)}")


def _call(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call):
        raise CallParseError(f"expected a function call, got {_show(node)}")
    if node.args:
        raise CallParseError(f"{_dotted(node.func)}: positional arguments are not allowed; use name=value")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise CallParseError(f"{_dotted(node.func)}: **kwargs is not allowed")
        args[kw.arg] = literal_value(kw.value)
    return Call(_dotted(node.func), args)


def parse_python_calls(text: str) -> list[Call]:
    """`[f(a=1), g(b="x")]`, `f(a=1)` or `f(a=1), g(b=2)` -> calls. Raises CallParseError otherwise."""
    src = text.strip()
    inner = unfence(src, ("python", "py"))
    if inner is not None:
        src = inner
    if not src:
        raise CallParseError("empty output")
    body = parse_literal_source(src, limit=MAX_ANSWER_SOURCE)
    try:
        if isinstance(body, ast.List | ast.Tuple):
            return [_call(e) for e in body.elts]
        return [_call(body)]
    except (RecursionError, ValueError) as exc:
        if isinstance(exc, CallParseError):
            raise
        raise CallParseError(f"output cannot be read as literal calls ({type(exc).__name__})") from None


_STD = re.compile(r"[ ,./\-_*^]")


def standardize_string(text: str) -> str:
    """BFCL's string normalisation before comparing strings: drop spaces and `,./-_*^`, lower-case, single
    quotes as double ("April 1, 2024" == "april 1 2024"). The BFCL checker and the tool_call domain use it.

    >>> standardize_string("New York, NY") == standardize_string("new-york ny")
    True
    """
    return _STD.sub("", text).lower().replace("'", '"')
