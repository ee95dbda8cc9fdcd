"""Scoring one answer, as BFCL's `eval_checker/eval_runner.py` picks the checker for each category.

The answer is decoded by `decode.decode_answer` (BFCL's prompting decoder, with genenv's
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` format accepted too). AST categories (simple_python,
simple_java, simple_javascript, multiple, parallel, parallel_multiple, live_simple, live_multiple,
live_parallel, live_parallel_multiple) are judged by `ast_checker.check_calls`; `irrelevance` and
`live_irrelevance` pass when no call can be decoded (or the decoded list is empty); `live_relevance` passes
when at least one call is decoded. The paper protocol's turns are scored in multi_turn.py.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.families.bfcl.ast_checker import check_calls
from genenv_cli.families.bfcl.calls import DecodeError
from genenv_cli.families.bfcl.categories import PAPER_CATEGORY, checker_kind, language_of
from genenv_cli.families.bfcl.decode import decode_answer
from genenv_cli.families.bfcl.multi_turn import _score_turn


def score(sample: EvalSample, output: str) -> Verdict:
    """The verdict on one raw answer to one sample, whatever its category."""
    if sample.category == PAPER_CATEGORY:
        return _score_turn(sample, output)
    if "relevance" in sample.category:
        return score_relevance(sample.category, output)
    return score_ast(sample, output)


def score_relevance(category: str, output: str) -> Verdict:
    """irrelevance / live_irrelevance: right when no call is decoded; live_relevance: right when one is."""
    try:
        calls, _ = decode_answer(output, "python")
        parsed: Any = [c.to_json() for c in calls]
        has_call = bool(calls)
        why = "the answer decodes to an empty list of calls" if not calls else ""
    except DecodeError as exc:
        parsed, has_call, why = None, False, str(exc)
    if "irrelevance" in category:
        return Verdict(not has_call, parsed, "" if not has_call else
                       "[irrelevance_error:decoder_success] Valid syntax. Successfully decoded a "
                       "function call when it should not.", {"accuracy": float(not has_call)})
    return Verdict(has_call, parsed, "" if has_call else
                   f"[relevance_error:decoder_failed] No function call decoded: {why}",
                   {"accuracy": float(has_call)})


def score_ast(sample: EvalSample, output: str) -> Verdict:
    """An AST category: the decoded calls judged by BFCL's AST checker rules against the possible answers."""
    language = sample.meta.get("language", language_of(sample.category))
    try:
        calls, _ = decode_answer(output, language)
    except DecodeError as exc:
        return Verdict(False, None, f"[ast_decoder:decoder_failed] Invalid syntax. Failed to decode AST. "
                                    f"{exc}", {"accuracy": 0.0})
    ok, reason = check_calls(sample.meta["functions"], calls, sample.gold["possible_answer"], language,
                             checker_kind(sample.category))
    return Verdict(ok, [c.to_json() for c in calls], reason, {"accuracy": float(ok)})
