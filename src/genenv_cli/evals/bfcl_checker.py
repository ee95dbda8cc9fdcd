"""BFCL's AST checker rules, reimplemented: decoding a model's answer and judging it against a possible answer.

Written for genenv from the rules of the official checker in ShishirPatil/gorilla,
`berkeley-function-call-leaderboard/bfcl_eval/` (the copy in the `bfcl-eval` 2026.3.23 wheel; the rules are
unchanged since BFCL v3):

- `eval_checker/ast_eval/ast_checker.py` -- the verdict rules (`check_calls` here);
- `eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py` -- how a Java/JavaScript value, which
  the model writes as source text, becomes a Python value before it is judged (`java_value`, `js_value`);
- `model_handler/utils.py` (`default_decode_ast_prompting`, `ast_parse`, `resolve_ast_by_type`) and
  `model_handler/parser/{java,js}_parser.py` -- how a prompt-mode answer is decoded (`decode_answer`);
- `utils.py` (`is_empty_output`) -- when an answer "holds no call" (irrelevance, relevance).

Nothing from BFCL is imported or evaluated: model text is parsed as data (`ast.parse` with literal-only
conversion; a small tokenizer for Java/JavaScript).

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
  * Java / JavaScript: one call `Name.method(param=<source text>, ...)`; each value is kept as text, as BFCL's
    tree-sitter parsers return it: a string literal loses its quotes; JavaScript keeps the value's source
    text; Java re-joins the value's tokens without spaces, except that `new` keeps its space, a method
    invocation keeps its original text, and an object creation `new T(a, b)` is written with ", " between
    its arguments and loses any `{{ ... }}` class body (so `new HashMap<>() {{ put(..); }}` reads as
    `new HashMap<>()`, an empty map -- a BFCL quirk kept for identical verdicts).
    A value tree-sitter would flag as a syntax error makes the answer undecodable; genenv approximates that
    check (two operands side by side as in `LED TV` or `[1, 2]3`, an operator at a value's edge, a `:`
    without `?` outside braces or inside a Java array initializer `new T[]{a:b}`, a `;` outside braces;
    JavaScript regex literals are recognised).
  As in BFCL, an answer inside a ```python fence, or with prose around the calls, is not decodable; a
  `<tool_call>` answer counts as a call (irrelevance fails on it).
  Checked once against BFCL's own decoder, parsers and checker (tree-sitter 0.21) on the v3 and v4 data:
  the same verdicts on ~65,000 gold and mutated answers.

Verdict rules (`check_calls`), per category kind:
  simple: exactly one call; multiple: as many calls as possible answers (one), judged against the function
  the possible answer names; parallel / parallel_multiple: the same number of calls, each possible answer
  matched greedily to the first still-unmatched call that passes (any order).
  One call passes when: the name equals the function's name; every required parameter is present; every
  given parameter is both documented and in the possible answer; Java/JavaScript values are strings,
  converted by BFCL's type converters; the Python type matches (`int` accepted for `float`; a value whose
  type equals the possible answer's type is accepted as a "variable" and compared without normalisation;
  list elements are type-checked one level deep); strings are compared after `standardize_string`, lists
  element-wise after it, dicts key by key (a possible-answer value list holding "" makes that key optional),
  lists of dicts position by position; other values must be in the allowed list; a possible-answer parameter
  that is not given must list "" among its allowed values.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from genenv_cli.callparse import (
    MAX_ANSWER_SOURCE,
    CallParseError,
    check_bounds,
    parse_literal_source,
    parse_tool_calls,
    standardize_string,  # BFCL's string normalisation; the tool_call domain compares strings with it too
)


class DecodeError(ValueError):
    """The answer cannot be read as function calls (BFCL: "Failed to decode AST")."""


class CheckError(ValueError):
    """The data asks for a rule BFCL does not define (an unknown type): the item fails with this reason."""


@dataclass
class BCall:
    """One decoded call. `positional` holds positional argument nodes (Python syntax only): BFCL's AST
    checker ignores them; the multi-turn decomposition maps them to parameter names."""

    name: str
    args: dict[Any, Any]
    positional: list[ast.AST] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": json_safe(self.args)}


def json_safe(value: Any) -> Any:
    """The parsed form of a value as JSON can hold it (tuples -> lists, odd constants -> their repr)."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else json.dumps(json_safe(k))): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)


# ----------------------------------------------------------------------------- string normalisation

def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


# ----------------------------------------------------------------------------- decoding: Python syntax

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


# ----------------------------------------------------------------------------- decoding: Java / JavaScript

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.)*')
  | (?P<tpl>`(?:[^`\\]|\\.)*`)
  | (?P<num>(?:0[xX][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)[lLfFdDn]?)
  | (?P<ident>[A-Za-z_$][\w$]*)
  | (?P<op>->|=>|::|\.\.\.|===|!==|==|!=|<=|>=|&&|\|\||\?\?|\?\.|\+\+|--|[-+*/%=<>!&|^~?:;.,()\[\]{}])
""", re.VERBOSE | re.DOTALL)

_OPEN = {"(": ")", "[": "]", "{": "}"}


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    end: int


_REGEX = re.compile(r"/(?![*/])(?:[^/\\\n\[]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/[a-z]*")
MAX_REGEX = 1000  # characters a JavaScript regex literal may span (each try reads at most this far)


class _Toks(list):
    """The tokens of one answer, with the bracket and type-argument matches found once (`_close`, `_generic_end`):
    found by a scan from each bracket, as written first, a thousand nested or unclosed brackets made decoding
    quadratic."""

    closes: dict[int, int]
    generics: dict[int, int | None] | None


def _tokenize(src: str, language: str) -> _Toks:
    toks = _Toks()
    toks.closes, toks.generics = {}, None
    pos = 0
    comment_end = -2  # where the next `*/` starts (-1: none; -2: not looked for yet), found once for all `/*`
    while pos < len(src):
        if src.startswith("/*", pos):
            # a block comment, found by str.find rather than a lazy `/\*.*?\*/` in the token regex, which
            # rescans the rest of the answer from every `/*` that is never closed
            if comment_end == -2 or 0 <= comment_end < pos + 2:
                comment_end = src.find("*/", pos + 2)
            if comment_end >= 0:
                pos = comment_end + 2
                continue
        if language == "javascript" and src[pos] == "/" and (
                not toks or (toks[-1].kind == "op" and toks[-1].text not in (")", "]", "}"))
                or toks[-1].text in _KEYWORD_OPS["javascript"]):
            r = _REGEX.match(src, pos, pos + MAX_REGEX)
            if r:  # a regular-expression literal where an operand is expected
                toks.append(_Tok("regex", r.group(), r.start(), r.end()))
                pos = r.end()
                continue
        m = _TOKEN.match(src, pos)
        if not m:
            raise DecodeError(f"unexpected character {src[pos]!r} in {language} call")
        kind = m.lastgroup or ""
        if kind == "tpl" and language != "javascript":
            raise DecodeError("backquoted text is not Java")
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    return toks


def _close(toks: list[_Tok], i: int) -> int:
    """Index of the bracket closing the one at toks[i]. Every bracket closed on the way is remembered in
    `toks.closes` (its own scan would find the same), so nested brackets are scanned once, not once per level."""
    closes = getattr(toks, "closes", {})
    if i in closes:
        return closes[i]
    stack: list[tuple[str, int]] = []
    for j in range(i, len(toks)):
        t = toks[j].text
        if toks[j].kind == "op" and t in _OPEN:
            stack.append((_OPEN[t], j))
        elif toks[j].kind == "op" and t in (")", "]", "}"):
            if not stack or stack[-1][0] != t:
                raise DecodeError(f"unbalanced {t!r}")
            closes[stack.pop()[1]] = j
            if not stack:
                return j
    raise DecodeError(f"unclosed {toks[i].text!r}")


def _split_commas(toks: list[_Tok], lo: int, hi: int, generic_aware: bool) -> list[tuple[int, int]]:
    """Top-level comma-separated spans of toks[lo:hi]."""
    spans, start, j = [], lo, lo
    while j < hi:
        t = toks[j]
        if t.kind == "op" and t.text in _OPEN:
            j = _close(toks, j) + 1
            continue
        if generic_aware and t.text == "<":
            end = _generic_end(toks, j)
            if end is not None:
                j = end + 1
                continue
        if t.kind == "op" and t.text in (")", "]", "}"):
            raise DecodeError(f"unbalanced {t.text!r}")
        if t.kind == "op" and t.text == ",":
            spans.append((start, j))
            start = j + 1
        j += 1
    spans.append((start, hi))
    return spans


def _generic_end(toks: list[_Tok], i: int) -> int | None:
    """If toks[i] is `<` opening Java type arguments (after a type name), the index of its `>`: the `>` where the
    count of `<` minus `>` from toks[i] on first returns to zero, with nothing but names, `,.?[]&` between."""
    if i == 0 or toks[i - 1].kind != "ident":
        return None
    ends = getattr(toks, "generics", None)
    if ends is None:
        ends = _generic_ends(toks)
        if isinstance(toks, _Toks):
            toks.generics = ends
    return ends.get(i)


def _generic_ends(toks: list[_Tok]) -> dict[int, int | None]:
    """The match of every `<` at once, with a stack (a scan from each `<` of `a<a<a<...` was quadratic)."""
    ends: dict[int, int | None] = {}
    stack: list[int] = []
    for j, t in enumerate(toks):
        if t.text == "<":
            stack.append(j)
        elif t.text == ">":
            if stack:
                ends[stack.pop()] = j
        elif not (t.kind == "ident" or t.text in (",", ".", "?", "[", "]", "&")):
            stack.clear()  # the type ends here: every `<` still open has no `>`
    return ends


_KEYWORD_OPS = {
    "java": {"new", "instanceof", "return", "final", "throw", "case", "default", "assert", "else"},
    "javascript": {"new", "typeof", "instanceof", "in", "of", "void", "delete", "await", "function", "return",
                   "async", "yield", "var", "let", "const", "class", "extends", "else", "throw"},
}
_UNARY = {"-", "+", "!", "~", "++", "--"}
_OPERAND = ("ident", "num", "str", "chr", "tpl", "regex")


def _check_value_syntax(toks: list[_Tok], lo: int, hi: int, language: str) -> None:
    """Reject values that tree-sitter would mark as errors in the common ways: empty, starting or ending
    with a binary operator, two operands side by side (`LED TV`, `[1, 2]3`), a `:` outside braces with no
    `?`, a `;` outside braces, a binary operator right after `(`, `[`, `{` or `,` or right before `)`, `]`,
    `}` or `,`."""
    if hi <= lo:
        raise DecodeError("argument without a value")
    first, last = toks[lo], toks[hi - 1]
    if first.kind == "op" and first.text not in _UNARY and first.text not in _OPEN:
        raise DecodeError(f"value starts with {first.text!r}")
    if last.kind == "op" and last.text not in (")", "]", "}", "++", "--"):
        raise DecodeError(f"value ends with {last.text!r}")
    keywords = _KEYWORD_OPS[language]
    stack: list[tuple[str, int]] = []  # open brackets: (text, index)
    questions = [0]  # unmatched `?` per nesting level
    init = [False]   # per nesting level: inside a Java array initializer (`new T[]{...}`, nested `{...}`)
    for j in range(lo, hi):
        t = toks[j]
        if t.kind == "op" and t.text in _OPEN:
            prev_text = toks[j - 1].text if j > lo else ""
            init.append(language == "java" and t.text == "{" and (
                prev_text == "]" or (init[-1] and prev_text in ("{", ","))))
            stack.append((t.text, j))
            questions.append(0)
        elif t.kind == "op" and t.text in (")", "]", "}"):
            if stack:
                stack.pop()
                questions.pop()
                init.pop()
        elif t.text == "?":
            questions[-1] += 1
        elif t.text in (":", ";"):
            # an array initializer's elements are expressions: a `:` there needs its `?` as outside braces
            in_braces = bool(stack) and stack[-1][0] == "{" and not init[-1]
            if t.text == ":" and not in_braces:
                if not questions[-1]:
                    raise DecodeError("':' without '?' outside braces or in an array initializer")
                questions[-1] -= 1
            elif t.text == ";" and not in_braces:
                raise DecodeError("';' inside a value")
        if j == lo:
            continue
        prev = toks[j - 1]
        if t.kind == "op" and prev.kind == "op":
            binary = t.text not in _UNARY and t.text not in _OPEN and t.text not in (")", "]", "}")
            if prev.text in ("(", "[", "{", ",") and binary and t.text != ";":
                raise DecodeError(f"{prev.text!r} followed by {t.text!r}")
            if t.text in (")", "]", "}", ",") and prev.text not in _OPEN and prev.text not in (
                    ")", "]", "}", "++", "--", ";", ","):
                raise DecodeError(f"{prev.text!r} followed by {t.text!r}")
        if t.kind not in _OPERAND or t.text in keywords or prev.text in keywords:
            continue
        if prev.kind in _OPERAND or prev.text in ("]", "}"):
            raise DecodeError(f"{prev.text!r} followed by {t.text!r}")
        if prev.text == ")" and not (language == "java" and _is_cast(toks, lo, j - 1)):
            raise DecodeError(f"')' followed by {t.text!r}")


def _is_cast(toks: list[_Tok], lo: int, close: int) -> bool:
    """toks[close] == ')' ends a Java cast `(Type)`: a type-like group not following a name or a bracket."""
    depth, j = 0, close
    while j >= lo:
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    if j < lo or j == close - 1:
        return False
    if j > lo and (toks[j - 1].kind in _OPERAND or toks[j - 1].text in (")", "]")):
        return False
    return all(t.kind == "ident" or t.text in (".", "<", ">", "[", "]", ",", "?") for t in toks[j + 1:close])


def _call_head(toks: list[_Tok], language: str) -> tuple[str, int, int]:
    """The function name and the indices of the argument list's brackets of the single top-level call."""
    if not toks:
        raise DecodeError(f"empty {language} answer")
    j = 0
    while j < len(toks) and (toks[j].kind == "ident" or toks[j].text == "."):
        j += 1
    if j == 0 or toks[j - 1].kind != "ident" or j >= len(toks) or toks[j].text != "(":
        raise DecodeError(f"no {language} function call found")
    name = "".join(t.text for t in toks[:j])
    close = _close(toks, j)
    rest = [t.text for t in toks[close + 1:]]
    if rest and rest != [";"]:
        raise DecodeError(f"unexpected text after the {language} call: {' '.join(rest)[:60]!r}")
    return name, j, close


def _java_join(src: str, toks: list[_Tok], lo: int, hi: int, nested: bool) -> str:
    """A Java value's text as BFCL's tree-sitter traversal rebuilds it (see the module docstring)."""
    if not nested and hi - lo == 1 and toks[lo].kind in ("str", "chr"):
        return toks[lo].text[1:-1]
    out: list[str] = []
    j = lo
    while j < hi:
        t = toks[j]
        if t.kind == "ident" and t.text == "new":
            text, j = _java_creation(src, toks, j, hi)
            j = _java_postfix(src, toks, t.start, j, hi, text, out)
            continue
        if t.kind in ("ident", "str", "chr", "num") or (t.kind == "op" and t.text == "("):
            # a primary: literal, name chain, or parenthesised expression, and its postfix chain
            start = t.start
            if t.text == "(":
                end = _close(toks, j)
                if end >= hi:
                    raise DecodeError("unbalanced '('")
                text = "(" + _java_join(src, toks, j + 1, end, True) + ")"
                j = end + 1
            else:
                text = t.text
                j += 1
            j = _java_postfix(src, toks, start, j, hi, text, out)
            continue
        if t.kind == "op" and t.text in ("{", "["):
            end = _close(toks, j)
            if end >= hi:
                raise DecodeError(f"unbalanced {t.text!r}")
            out.append(t.text + _java_join(src, toks, j + 1, end, True) + toks[end].text)
            j = end + 1
            continue
        if t.kind == "op" and t.text in (")", "]", "}"):
            raise DecodeError(f"unbalanced {t.text!r}")
        if t.kind == "tpl":
            raise DecodeError("backquoted text is not Java")
        out.append(t.text)
        j += 1
    return "".join(out)


def _java_postfix(src: str, toks: list[_Tok], start: int, j: int, hi: int, head: str, out: list[str]) -> int:
    """Consume `.name`, `(args)`, `[index]`, `::name` after a primary. A chain ending in a call is a method
    invocation: BFCL keeps its original text."""
    pieces = [head]
    last_call_end = None  # source offset where the last call's `)` ends
    after_call: list[str] = []
    while j < hi:
        t = toks[j]
        if t.kind == "op" and t.text in (".", "::") and j + 1 < hi and toks[j + 1].kind == "ident":
            pieces.append(t.text + toks[j + 1].text)
            after_call.append(t.text + toks[j + 1].text)
            j += 2
            continue
        if t.kind == "op" and t.text == "(" and toks[j - 1].kind == "ident":
            end = _close(toks, j)
            if end >= hi:
                raise DecodeError("unbalanced '('")
            last_call_end = toks[end].end
            after_call = []
            j = end + 1
            continue
        if t.kind == "op" and t.text == "[":
            end = _close(toks, j)
            if end >= hi:
                raise DecodeError("unbalanced '['")
            piece = "[" + _java_join(src, toks, j + 1, end, True) + "]"
            pieces.append(piece)
            after_call.append(piece)
            j = end + 1
            continue
        break
    if last_call_end is not None:
        out.append(src[start:last_call_end] + "".join(after_call))
    else:
        out.append("".join(pieces))
    return j


def _java_creation(src: str, toks: list[_Tok], j: int, hi: int) -> tuple[str, int]:
    """`new T[]{...}` or `new T(args)` starting at toks[j] == 'new'; returns (text, next index)."""
    k = j + 1
    type_parts: list[str] = []
    while k < hi:
        t = toks[k]
        if t.kind == "ident" or (t.text == "." and type_parts):
            type_parts.append(t.text)
            k += 1
        elif t.text == "<":
            end = _generic_end(toks, k)
            if end is None or end >= hi:
                raise DecodeError("malformed type arguments after 'new'")
            type_parts.extend(x.text for x in toks[k:end + 1])
            k = end + 1
        else:
            break
    if not type_parts:
        raise DecodeError("'new' without a type")
    type_text = "".join(type_parts)
    if k < hi and toks[k].text == "[":
        while k < hi and toks[k].text == "[":
            k = _close(toks, k) + 1
        if k >= hi or toks[k].text != "{":
            raise DecodeError("array creation without an initializer")
        end = _close(toks, k)
        if end >= hi:
            raise DecodeError("unbalanced '{'")
        return f"new {type_text}[]{{{_java_join(src, toks, k + 1, end, True)}}}", end + 1
    if k < hi and toks[k].text == "(":
        end = _close(toks, k)
        if end >= hi:
            raise DecodeError("unbalanced '('")
        args = [_java_join(src, toks, a, b, True) for a, b in _split_commas(toks, k + 1, end, True) if b > a]
        k = end + 1
        if k < hi and toks[k].text == "{":  # anonymous class body: dropped, as BFCL's parser does
            k = _close(toks, k) + 1
        return f"new {type_text}({', '.join(args)})", k
    raise DecodeError("'new' without arguments or array initializer")


def decode_java(text: str) -> list[BCall]:
    """BFCL's Java decoder on the text inside the outer brackets: one `name(param=value, ...)` call."""
    toks = _tokenize(text, "java")
    name, open_i, close_i = _call_head(toks, "java")
    args: dict[Any, Any] = {}
    for a, b in _split_commas(toks, open_i + 1, close_i, True):
        if b == a:
            if (a, b) == (open_i + 1, close_i):
                break
            raise DecodeError("empty argument in java call")
        if b - a >= 3 and toks[a].kind == "ident" and toks[a + 1].text == "=":
            key = toks[a].text
            if key in args:
                raise DecodeError("Multiple arguments with the same name are not supported.")
            _check_value_syntax(toks, a + 2, b, "java")
            args[key] = _java_join(text, toks, a + 2, b, False)
        elif b - a == 1 and toks[a].kind == "ident":
            args["<positional>"] = toks[a].text  # BFCL keys it None: an unexpected parameter
        elif toks[a].text == "=" or (b - a >= 2 and toks[a + 1].text == "=" and b - a < 3):
            raise DecodeError("argument without a value")
    return [BCall(name, args)]


def decode_javascript(text: str) -> list[BCall]:
    """BFCL's JavaScript decoder: one `name(param=value, ...)` call, each value its source text (a value
    that starts and ends with the same quote loses those quotes)."""
    toks = _tokenize(text, "javascript")
    name, open_i, close_i = _call_head(toks, "javascript")
    args: dict[Any, Any] = {}
    for a, b in _split_commas(toks, open_i + 1, close_i, False):
        if b == a:
            if (a, b) == (open_i + 1, close_i):
                break
            raise DecodeError("empty argument in javascript call")
        if b - a >= 3 and toks[a].kind == "ident" and toks[a + 1].text == "=":
            key = toks[a].text
            _check_value_syntax(toks, a + 2, b, "javascript")
            value = text[toks[a + 2].start:toks[b - 1].end]
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            elif value in ('"', "'"):
                value = ""
            if key in args:
                raise DecodeError("Multiple arguments with the same name are not supported.")
            args[key] = value
        elif b - a == 1 and toks[a].kind == "ident":
            args["<positional>"] = toks[a].text
        elif b - a < 3 and any(t.text == "=" for t in toks[a:b]):
            raise DecodeError("argument without a value")
    return [BCall(name, args)]


# ----------------------------------------------------------------------------- decoding: whole answers

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


# ----------------------------------------------------------------------------- Java / JavaScript values

_JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set, "HashMap": dict,
    "Hashtable": dict, "Queue": list, "Stack": list, "String": str, "any": str,
}
_JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict,
    "array": list, "any": str,
}
_PY_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str,
}
_NESTED_PY = ("array", "tuple")
_NESTED_CONVERTED = ("Array", "ArrayList", "array")

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")


def _java_scalar_text(text: str) -> Any:
    """A Java literal read without knowing its type (elements of a collection, map values)."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(text[:-1])
    return _number_or_text(text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def java_value(text: str, java_type: str, item_type: str | None = None) -> Any:
    """BFCL's Java type converter: the string a model gave for a parameter of `java_type` -> the value
    compared with the possible answer. Text that does not fit the type stays a string."""
    if java_type not in _JAVA_TYPES:
        raise CheckError(f"unsupported Java type {java_type!r}")
    if java_type in ("byte", "short", "integer"):
        return int(text) if _INT.match(text) else str(text)
    if java_type == "float":
        return float(text[:-1]) if _JAVA_FLOAT.match(text) else str(text)
    if java_type == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else str(text)
    if java_type == "long":
        return int(text[:-1]) if _JAVA_LONG.match(text) else str(text)
    if java_type == "boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if java_type in ("char", "String", "any"):
        return str(text)  # BFCL's char pattern never matches, so a char stays its text
    if java_type == "ArrayList":
        return _java_arraylist(text, item_type)
    if java_type == "Array":
        m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
        if not m:
            return text
        parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
        return [java_value(p, item_type) if item_type else _java_scalar_text(p) for p in parts]
    if java_type == "HashMap":
        m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
        if m:
            entries = {}
            if m.group(1).strip():
                for key, val in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1)):
                    entries[key] = _java_scalar_text(val.strip())
            return entries
        return {} if re.search(r"new\s+HashMap<.*?>\s*\(\)", text) else text
    raise CheckError(f"BFCL does not convert Java {java_type} values")


def _java_arraylist(text: str, item_type: str | None) -> Any:
    def element(raw: str) -> Any:
        raw = raw.strip()
        if item_type in ("char", "String"):
            return raw[1:-1]
        return java_value(raw, item_type) if item_type else _java_scalar_text(raw)

    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if m:
        return [element(p) for p in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if m:
        return [element(p) for p in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _js_scalar_text(text: str) -> Any:
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if len(text) >= 1 and ((text[0] == text[-1] == '"') or (text[0] == text[-1] == "'")):
        return text[1:-1]
    return _number_or_text(text)


def js_value(text: str, js_type: str, item_type: str | None = None) -> Any:
    """BFCL's JavaScript type converter (see `java_value`)."""
    if js_type not in _JS_TYPES:
        raise CheckError(f"unsupported JavaScript type {js_type!r}")
    if js_type == "String":
        quoted = (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
        return text[1:-1] if quoted else str(text)
    if js_type == "integer":
        return int(text) if _INT.match(text) else str(text)
    if js_type == "float":
        return float(text) if re.match(r"^-?\d+(\.\d+)?$", text) else str(text)
    if js_type == "Bigint":
        return int(text[:-1]) if re.match(r"^-?\d+n$", text) else str(text)
    if js_type == "Boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if js_type == "any":
        return str(text)
    return _js_collection(text, js_type, item_type)


def _js_collection(code: str, kind: str, item_type: str | None = None) -> Any:
    code = code.strip()
    if kind == "array":
        try:
            m2 = re.match(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)", code)
            if m2:
                rows = []
                for idx, inner in enumerate(re.findall(r"\[(.*?)\]", m2.group(0))):
                    inner = inner.strip()
                    if idx == 0 and inner.startswith("["):
                        inner = inner[1:]
                    rows.append([_js_scalar_text(e.strip()) for e in inner.split(",")])
                return rows
            m1 = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
            if not m1:
                return code
            body = m1.group(1) if m1.group(1) is not None else m1.group(2)
            body = (body or "").strip()
            parts = body.split(",") if body else []
            if item_type:
                return [js_value(p.strip(), item_type) for p in parts]
            return [_js_scalar_text(p.strip()) for p in parts]
        except (ValueError, CheckError, IndexError):
            return code
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    out: dict[str, Any] = {}
    for key, val in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
        key = key.strip().strip("'\"")
        val = val.strip()
        if val.startswith("[") and val.endswith("]"):
            out[key] = _js_collection(val, "array")
        elif val.startswith("{") and val.endswith("}"):
            out[key] = _js_collection(val, "dict")
        else:
            out[key] = _js_scalar_text(val.strip("'\""))
    return out


# ----------------------------------------------------------------------------- the checker


class _Fail(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def _answer_type(allowed: Any) -> type | None:
    """The type of the first allowed value that is not "" (BFCL: a "variable" has this type)."""
    for item in allowed:
        if item != "":
            return type(item)
    return None


def _type_check(param: str, value: Any, allowed: Any, expected: type, nested: type | None) -> bool:
    """BFCL's type check. Returns is_variable; raises _Fail on a type error."""
    ans_type = _answer_type(allowed)
    is_variable = ans_type is not None and ans_type is not expected
    if type(value) is expected:
        if nested is None:
            return is_variable
        for option in allowed:
            ok = True
            if type(option) is list:
                for element in value:
                    try:
                        _type_check(param, element, option, nested, None)
                    except _Fail:
                        ok = False
                        break
            if ok:
                return is_variable
        raise _Fail("type_error:nested", f"Nested type checking failed for parameter {param!r}. Expected "
                    f"inner type {nested.__name__}. Parameter value: {value!r}.")
    if ans_type is not None and type(value) is ans_type:
        return True
    raise _Fail("type_error:simple", f"Incorrect type for parameter {param!r}. Expected type "
                f"{expected.__name__}, got {type(value).__name__}. Parameter value: {value!r}.")


def _dict_ok(param: str, value: dict, options: Any) -> None:
    failure = _Fail("dict_checker:unclear", f"Invalid value for parameter {param!r}: {value!r}.")
    for option in options:
        if option == "":
            continue
        try:
            for key, val in value.items():
                if key not in option:
                    raise _Fail("value_error:dict_key", f"Unexpected dict key parameter: {key!r}.")
                if _std(val) not in [_std(x) for x in option[key]]:
                    raise _Fail("value_error:dict_value", f"Invalid value for parameter {key!r}: {val!r}. "
                                f"Expected one of {option[key]!r}.")
            for key, allowed in option.items():
                if key not in value and "" not in allowed:
                    raise _Fail("value_error:dict_key", f"Missing dict key parameter: {key!r}.")
            return
        except _Fail as exc:
            failure = exc
    raise failure


def _list_dict_ok(param: str, value: list, options: Any) -> None:
    failure = _Fail("list_dict_checker:unclear", f"Invalid value for parameter {param!r}: {value!r}.")
    for option in options:
        if len(value) != len(option):
            failure = _Fail("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        try:
            for item, expected in zip(value, option, strict=True):
                _dict_ok(param, item, [expected])
            return
        except _Fail as exc:
            failure = exc
    raise failure


def _check_one(doc: dict, call: BCall, answer: dict, language: str) -> None:
    """One call against one possible answer `{func_name: {param: [allowed values]}}`; raises _Fail."""
    allowed_params = next(iter(answer.values()))
    name = doc["name"]
    params = doc.get("parameters") or {}
    props = params.get("properties") or {}
    if call.name != name:
        raise _Fail("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    for req in params.get("required") or []:
        if req not in call.args:
            raise _Fail("simple_function_checker:missing_required", f"Missing required parameter: {req!r}.")
    for param, value in call.args.items():
        if param not in props or param not in allowed_params:
            raise _Fail("simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}.")
        spec = props[param]
        type_name = spec.get("type")
        nested: type | None = None
        if language in ("java", "javascript"):
            table = _JAVA_TYPES if language == "java" else _JS_TYPES
            if type_name not in table:
                raise CheckError(f"unsupported {language} type {type_name!r} for parameter {param!r}")
            expected = table[type_name]
            if type(value) is not str:
                raise _Fail(f"type_error:{'java' if language == 'java' else 'js'}", f"Incorrect type for "
                            f"parameter {param!r}. Expected type String, got {type(value).__name__}. "
                            f"Parameter value: {value!r}.")
            item_type = None
            if type_name in _NESTED_CONVERTED:
                item_type = (spec.get("items") or {}).get("type")
                if item_type not in table:
                    raise CheckError(f"unsupported {language} element type {item_type!r} for {param!r}")
                nested = table[item_type]
            convert = java_value if language == "java" else js_value
            value = convert(value, type_name, item_type)
        else:
            if type_name not in _PY_TYPES:
                raise CheckError(f"unsupported type {type_name!r} for parameter {param!r}")
            expected = _PY_TYPES[type_name]
            if type_name in _NESTED_PY:
                item_type = (spec.get("items") or {}).get("type")
                if item_type is not None:
                    if item_type not in _PY_TYPES:
                        raise CheckError(f"unsupported element type {item_type!r} for parameter {param!r}")
                    nested = _PY_TYPES[item_type]
        if type_name == "tuple" and type(value) is tuple:
            value = list(value)
        if language == "python" and type_name == "float" and type(value) is int:
            value = float(value)
        allowed = allowed_params[param]
        is_variable = _type_check(param, value, allowed, expected, nested)
        if not is_variable:
            if expected is dict:
                _dict_ok(param, value, allowed)
                continue
            if expected is list and nested is dict:
                _list_dict_ok(param, value, allowed)
                continue
            if expected is str:
                if standardize_string(value) not in [standardize_string(x) for x in allowed if type(x) is str]:
                    raise _Fail("value_error:string", f"Invalid value for parameter {param!r}: {value!r}. "
                                f"Expected one of {allowed!r}. Case insensitive.")
                continue
            if expected is list:
                if [_std(x) for x in value] not in [[_std(x) for x in option] for option in allowed]:
                    raise _Fail("value_error:list/tuple", f"Invalid value for parameter {param!r}: "
                                f"{value!r}. Expected one of {allowed!r}.")
                continue
        if value not in allowed:
            raise _Fail("value_error:others", f"Invalid value for parameter {param!r}: {value!r}. "
                        f"Expected one of {allowed!r}.")
    for param, allowed in allowed_params.items():
        if param not in call.args and "" not in allowed:
            raise _Fail("simple_function_checker:missing_optional", f"Optional parameter {param!r} not "
                        f"provided and not marked as optional.")


def _find_doc(docs: list[dict] | dict, name: str) -> dict:
    if isinstance(docs, dict):
        return docs
    for doc in docs:
        if doc.get("name") == name:
            return doc
    raise CheckError(f"the possible answer names {name!r}, which no function document defines")


def check_calls(docs: list[dict], calls: list[BCall], possible: list[dict], language: str,
                kind: str) -> tuple[bool, str]:
    """BFCL's AST verdict for decoded `calls`. `kind` is "simple", "multiple" or "parallel" (parallel and
    parallel_multiple). Returns (valid, "[error_type] message")."""
    try:
        if kind == "parallel":
            if len(calls) != len(possible):
                raise _Fail("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
            used: set[int] = set()
            for i, answer in enumerate(possible):
                doc = _find_doc(docs, next(iter(answer)))
                for idx, call in enumerate(calls):
                    if idx in used:
                        continue
                    try:
                        _check_one(doc, call, answer, language)
                    except _Fail:
                        continue
                    used.add(idx)
                    break
                else:
                    raise _Fail("parallel_function_checker_no_order:cannot_find_match",
                                f"Could not find a matching function among the unmatched model calls for "
                                f"possible answer {i} ({next(iter(answer))}).")
            return True, ""
        if kind == "multiple":
            if len(calls) != len(possible):
                raise _Fail("multiple_function_checker:wrong_count", "Wrong number of functions.")
            _check_one(_find_doc(docs, next(iter(possible[0]))), calls[0], possible[0], language)
            return True, ""
        if len(calls) != 1:
            raise _Fail("simple_function_checker:wrong_count", "Wrong number of functions.")
        _check_one(docs[0], calls[0], possible[0], language)
        return True, ""
    except _Fail as exc:
        return False, f"[{exc.kind}] {exc.message}"
    except CheckError as exc:
        return False, f"[checker:unsupported] {exc}"
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
        # malformed possible answers or values the official checker would crash on
        return False, f"[checker:error] {type(exc).__name__}: {exc}"
