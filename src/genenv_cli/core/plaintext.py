"""What counts as a plain-text answer, the right answer of a training task whose gold is "no call".

The call parsers say "no call" for any text they cannot read a call from, and so does a benchmark's
irrelevance rule. Reading that as *correct* would reward an empty completion, a thousand `[` or a run of NUL
bytes as well as the refusal the task wants. So a training domain gives reward 1 for "no call" only when the
completion is a plain-text answer:

* it holds at least one letter or digit (an empty or whitespace-only completion, or pure punctuation, is not
  an answer);
* it holds no control character other than tab, newline and carriage return (NUL bytes, escape sequences),
  and no lone surrogate;
* it is not broken call syntax: no `<tool_call` tag, and when it starts with `[`, `{` or `(` (after a code
  fence, if any) its brackets balance, nested at most MAX_NESTING deep.

Every check is one linear pass over the text (no backtracking regex), so any completion is judged in
milliseconds.
"""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_WORD = re.compile(r"[^\W_]")
_NOT_BRACKET = re.compile(r"[^][(){}]+")
_INNER_PAIR = re.compile(r"\(\)|\[\]|\{\}")
MAX_NESTING = 100  # brackets nested deeper than this are not prose (the call parsers refuse them too)
_DEEP = re.compile(rf"[([{{]{{{MAX_NESTING + 1}}}")


def _balanced(text: str) -> bool:
    """Whether the brackets of `text` close in order, nested at most MAX_NESTING deep. Each pass deletes the
    innermost pairs in C (re.subn), so prose takes a pass or two; a Python loop per character took seconds
    on a megabyte of brackets."""
    brackets = _NOT_BRACKET.sub("", text)
    if any(brackets.count(o) != brackets.count(c) for o, c in ("()", "[]", "{}")) or _DEEP.search(brackets):
        return False  # the cheap tests first: unequal counts cannot balance, a long run of openers nests too deep
    for _ in range(MAX_NESTING + 1):
        brackets, n = _INNER_PAIR.subn("", brackets)
        if not brackets or n == 0:
            break
    return not brackets


def plain_answer_problem(text: str) -> str | None:
    """None when `text` is a plain-text answer (see the module's rules), else why it is not one."""
    bad = _CONTROL.search(text)
    if bad:
        name = unicodedata.name(bad.group(), f"U+{ord(bad.group()):04X}")
        return f"not a plain-text answer: holds the control character {name} at {bad.start()}"
    if not _WORD.search(text):
        return "not a plain-text answer: " + ("empty" if not text.strip() else "no letter or digit in it")
    if "<tool_call" in text:
        return "not a plain-text answer: a tool_call tag that holds no readable call"
    body = text.strip()
    if body.startswith("```"):
        body = body[3:].lstrip("`").strip()
        body = body[body.find("\n") + 1:] if body[:1].isalpha() and "\n" in body else body
    if body[:1] in ("[", "{", "(") and not _balanced(body):
        return "not a plain-text answer: unbalanced call syntax (brackets that do not close)"
    return None
