"""Decoding a Java or JavaScript answer as BFCL's tree-sitter parsers do (`decode_java`, `decode_javascript`).

Rules from `bfcl_eval/model_handler/parser/{java,js}_parser.py` (ShishirPatil/gorilla; the `bfcl-eval`
2026.3.23 wheel). One call `Name.method(param=<source text>, ...)`; each value is kept as text, as BFCL's
tree-sitter parsers return it: a string literal loses its quotes; JavaScript keeps the value's source
text; Java re-joins the value's tokens without spaces, except that `new` keeps its space, a method
invocation keeps its original text, and an object creation `new T(a, b)` is written with ", " between
its arguments and loses any `{{ ... }}` class body (so `new HashMap<>() {{ put(..); }}` reads as
`new HashMap<>()`, an empty map -- a BFCL quirk kept for identical verdicts).
A value tree-sitter would flag as a syntax error makes the answer undecodable; genenv approximates that
check (two operands side by side as in `LED TV` or `[1, 2]3`, an operator at a value's edge, a `:`
without `?` outside braces or inside a Java array initializer `new T[]{a:b}`, a `;` outside braces;
JavaScript regex literals are recognised). tree-sitter is not a dependency: a small tokenizer (below) reads
the text as data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from genenv_cli.families.bfcl.calls import BCall, DecodeError

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
