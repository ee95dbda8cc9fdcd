"""Decoding a model's answer into calls, as BFCL's prompting decoder does (`decode_answer`).

Rules from ShishirPatil/gorilla, `berkeley-function-call-leaderboard/bfcl_eval/` (the copy in the `bfcl-eval`
2026.3.23 wheel): `model_handler/utils.py` (`default_decode_ast_prompting`, `ast_parse`,
`resolve_ast_by_type`). Nothing from BFCL is imported or evaluated: model text is parsed as data (`ast.parse`
with literal-only conversion; Java and JavaScript by the tokenizer in `decode_java_js.py`).

Decoding a prompt-mode answer (`[func(a=1, b="x"), g(c=[1, 2])]`), as BFCL does it:
  text after the last `</think>` (what reasoning handlers keep) -> if it holds `<tool_call>` blocks or is, as a
  whole, a JSON call object/list, genenv's own format (`callparse.parse_tool_calls`; JSON values are taken as
  they are, as BFCL's function-calling mode does) -> else BFCL's prompting decoder: strip backticks, newlines
  and spaces at both ends, add the missing `[`/`]`, then
  * Python: `ast.parse`; a name stands for its own text (`unit=celsius` -> "celsius"); `-x` of a constant is
    its negation; a call with keyword arguments nested in a value becomes `{name: {args}}`, one without them
    its source text; `a[i]` its source text; arithmetic on literals (`2*3`) is folded (BFCL evaluates it with
    `eval`; genenv folds numbers and strings only, with size limits); positional arguments are ignored;
    anything else (attributes, lambdas, comprehensions ...) makes the answer undecodable.
  * Java / JavaScript: one call `Name.method(param=<source text>, ...)` (`decode_java_js.py` gives the rules).
  As in BFCL, an answer inside a ```python fence, or with prose around the calls, is not decodable; a
  `<tool_call>` answer counts as a call (irrelevance fails on it).
"""

from __future__ import annotations

import ast
from typing import Any

from genenv_cli.core.callparse import (
    MAX_ANSWER_SOURCE,
    CallParseError,
    check_bounds,
    parse_literal_source,
    parse_tool_calls,
)
from genenv_cli.families.bfcl.calls import BCall, DecodeError
from genenv_cli.families.bfcl.decode_java_js import decode_java, decode_javascript

_MAX_FOLD = 10_000  # largest string / exponent that literal folding will build


def _fold(node: ast.AST) -> Any:
    """Arithmetic on literals, which BFCL hands to `eval`; here only numbers and strings are folded."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex, bool, str):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        val = _fold(node.operand)
        if isinstance(val, int | float | complex):
            return -val if isinstance(node.op, ast.USub) else +val
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left), _fold(node.right)
        num = (int, float, complex)
        try:
            if isinstance(node.op, ast.Add):
                if (isinstance(left, num) and isinstance(right, num)) or (
                        isinstance(left, str) and isinstance(right, str)):
                    return left + right
            elif isinstance(node.op, ast.Mult):
                if isinstance(left, num) and isinstance(right, num):
                    return left * right
                if isinstance(left, str) and type(right) is int and len(left) * max(right, 0) <= _MAX_FOLD:
                    return left * right
                if isinstance(right, str) and type(left) is int and len(right) * max(left, 0) <= _MAX_FOLD:
                    return left * right
            elif isinstance(left, num) and isinstance(right, num):
                if isinstance(node.op, ast.Sub):
                    return left - right
                if isinstance(node.op, ast.Div):
                    return left / right
                if isinstance(node.op, ast.FloorDiv):
                    return left // right
                if isinstance(node.op, ast.Mod):
                    return left % right
                if isinstance(node.op, ast.Pow):
                    if abs(right) <= 64 or (isinstance(left, int | float) and abs(left) <= 1):
                        return left ** right
                    if isinstance(left, int) and abs(right) <= _MAX_FOLD and abs(left) < 2 ** 16:
                        return left ** right
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise DecodeError(f"cannot compute {ast.unparse(node)[:60]!r}: {exc}") from None
    raise DecodeError(f"unsupported expression {ast.unparse(node)[:60]!r}")


def _py_value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # BFCL negates the operand's constant whatever the operator is.
        inner = node.operand
        if isinstance(inner, ast.Constant) and type(inner.value) in (int, float, complex, bool):
            return -inner.value
        raise DecodeError(f"unsupported unary expression {ast.unparse(node)[:60]!r}")
    if isinstance(node, ast.List):
        return [_py_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_py_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise DecodeError("dict unpacking (**) is not a value")
            key = _py_value(k)
            try:
                out[key] = _py_value(v)
            except TypeError:
                raise DecodeError(f"unhashable dict key {ast.unparse(k)[:60]!r}") from None
        return out
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.BinOp):
        return _fold(node)
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)
        call = _py_call(node)
        return {call.name: call.args}
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise DecodeError(f"unsupported value {ast.unparse(node)[:60]!r} ({type(node).__name__})")


def _py_call(node: ast.Call) -> BCall:
    parts = []
    func = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    args: dict[Any, Any] = {}
    for kw in node.keywords:
        args["**" if kw.arg is None else kw.arg] = _py_value(kw.value)
    return BCall(".".join(reversed(parts)), args, list(node.args))


def decode_python(text: str) -> list[BCall]:
    """BFCL's Python decoder on already bracketed text (`[f(a=1), g(b=2)]`)."""
    cleaned = text.strip().strip("'")
    try:  # bounded: a model's thousand brackets, signs or digits are a decoding failure, never a crash
        body = parse_literal_source(cleaned, limit=MAX_ANSWER_SOURCE)
    except CallParseError as exc:
        raise DecodeError(str(exc)) from None
    try:
        if isinstance(body, ast.Call):
            return [_py_call(body)]
        if isinstance(body, ast.List | ast.Tuple | ast.Set):
            calls = []
            for elem in body.elts:
                if not isinstance(elem, ast.Call):
                    raise DecodeError(f"{ast.unparse(elem)[:60]!r} is not a function call")
                calls.append(_py_call(elem))
            return calls
    except (RecursionError, OverflowError, MemoryError) as exc:
        raise DecodeError(f"value cannot be decoded ({type(exc).__name__})") from None
    except ValueError as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"value cannot be decoded ({exc})") from None
    raise DecodeError("not a list of function calls")


def positional_value(node: ast.AST) -> Any:
    """A positional argument's value (the multi-turn decomposition maps these to parameter names)."""
    return _py_value(node)


def strip_reasoning(text: str) -> str:
    """Keep what follows the last `</think>` (reasoning models' handlers in BFCL do the same)."""
    return text.rsplit("</think>", 1)[1] if "</think>" in text else text


def decode_answer(text: str, language: str = "python") -> tuple[list[BCall], str]:
    """Decode a raw answer -> (calls, form) with form "tool_call" or "prompt". Raises DecodeError."""
    text = strip_reasoning(text)
    try:
        tool_calls = parse_tool_calls(text)
    except CallParseError as exc:
        raise DecodeError(str(exc)) from None
    if tool_calls:
        return [BCall(c.name, dict(c.arguments)) for c in tool_calls], "tool_call"
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    if language in ("java", "javascript"):
        if len(body) > MAX_ANSWER_SOURCE:
            raise DecodeError(f"answer is longer than {MAX_ANSWER_SOURCE:,} characters")
        try:
            check_bounds(body, "answer")
        except CallParseError as exc:
            raise DecodeError(str(exc)) from None
    if language == "java":
        return decode_java(body[1:-1]), "prompt"
    if language == "javascript":
        return decode_javascript(body[1:-1]), "prompt"
    return decode_python(body), "prompt"
