"""BFCL's summary scores, as the leaderboard computes them (`eval_checker/eval_runner_helper.py`,
`generate_leaderboard_csv`).

Per category: accuracy = correct / items. simple = unweighted mean of simple_python/java/javascript; non-live
AST = unweighted mean of simple, multiple, parallel, parallel_multiple; live AST = mean weighted by item count
over the four live AST categories; irrelevance = unweighted mean of irrelevance and live_irrelevance;
relevance = live_relevance. v4's "Non-Live" and "Live" columns are the AST scores; v3's also took in
irrelevance (unweighted) and live irrelevance + relevance (weighted). A score that needs a category that was
not loaded is left out and named under "incomplete", with every category it misses. Multi-turn, memory,
web-search and format-sensitivity categories are not supported yet (named under "not_supported"; BFCL scores
them by executing the calls in its simulated backends or with an agent loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.families.bfcl.categories import (
    OFFICIAL_CATEGORIES,
    PAPER_CATEGORY,
    PAPER_REFERENCE,
    UNSUPPORTED,
    UNSUPPORTED_WHY,
)

SIMPLE = ["simple_python", "simple_java", "simple_javascript"]
LIVE_AST = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
# the leaderboard's scores in the order the summary lists them
SCORE_KEYS = ("non_live_acc", "live_acc", "non_live_ast_acc", "simple_ast_acc", "live_ast_acc", "irrelevance_acc",
              "relevance_acc")
_RULES_TEXT = ("simple = mean(simple_python, simple_java, simple_javascript); non_live_ast = mean(simple, multiple, "
               "parallel, parallel_multiple); live_ast = count-weighted mean of the four live AST categories; "
               "irrelevance = mean(irrelevance, live_irrelevance); relevance = live_relevance; ")
_RULES_BY_VERSION = {
    "v3": "v3: non_live adds irrelevance (unweighted), live adds live_irrelevance and live_relevance (weighted); "
          "accuracy = all items pooled",
    "v4": "v4: non_live = non_live_ast, live = live_ast; accuracy = all items pooled",
}


def summarize(samples: list[EvalSample], verdicts: list[Verdict], categories: list[str]) -> dict[str, Any]:
    """The summary of scored samples; `categories` gives the order categories are listed in."""
    if len(samples) != len(verdicts):
        raise ValueError(f"{len(samples)} samples but {len(verdicts)} verdicts")
    version = samples[0].meta.get("version", "v4") if samples else "v4"
    correct, ordered = _tally(samples, verdicts)
    cats = _category_scores(correct, categories)
    total = sum(n for _, n in correct.values())
    overall: dict[str, Any] = {
        "accuracy": 100.0 * sum(c for c, _ in correct.values()) / total if total else 0.0, "n": total}
    result: dict[str, Any] = {"overall": overall, "categories": cats, "version": version}
    if PAPER_CATEGORY in correct:
        _add_paper_protocol(result, ordered, samples)
    if any(c in correct for c in OFFICIAL_CATEGORIES):
        board = _leaderboard(cats, version)
        overall.update({key: board.scores[key] for key in SCORE_KEYS if key in board.scores})
        result["summary_rules"] = _RULES_TEXT + _RULES_BY_VERSION["v3" if version == "v3" else "v4"]
        if board.incomplete:
            result["incomplete"] = {k: sorted(set(v)) for k, v in board.incomplete.items()}
    result["not_supported"] = {"categories": list(UNSUPPORTED.get(version, UNSUPPORTED["v4"])), "why": UNSUPPORTED_WHY}
    return result


def _tally(samples: list[EvalSample], verdicts: list[Verdict]) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """({category: (correct, items)}, (turns right in order, turns) of the paper protocol)."""
    correct: dict[str, tuple[int, int]] = {}
    in_order = turns = 0
    for sample, verdict in zip(samples, verdicts, strict=True):
        right, n = correct.get(sample.category, (0, 0))
        correct[sample.category] = (right + int(verdict.correct), n + 1)
        if sample.category == PAPER_CATEGORY:
            in_order += int(verdict.scores.get("ordered", 0.0) >= 1.0)
            turns += 1
    return correct, (in_order, turns)


def _category_scores(correct: dict[str, tuple[int, int]], categories: list[str]) -> dict[str, dict[str, Any]]:
    order = [c for c in categories if c in correct] + sorted(c for c in correct if c not in categories)
    return {c: {"accuracy": 100.0 * correct[c][0] / correct[c][1], "correct": correct[c][0], "n": correct[c][1]}
            for c in order}


def _add_paper_protocol(result: dict[str, Any], ordered: tuple[int, int], samples: list[EvalSample]) -> None:
    in_order, turns = ordered
    result["categories"][PAPER_CATEGORY]["ordered_accuracy"] = 100.0 * in_order / turns
    result["overall"]["ordered_accuracy"] = 100.0 * in_order / turns
    result["overall"]["dialogues"] = len({s.meta.get("bfcl_id") for s in samples if s.category == PAPER_CATEGORY})
    result["paper_reference"] = dict(PAPER_REFERENCE)
    result["protocol_note"] = ("GenEnv paper protocol: multi_turn_long_context, each turn scored on its own given "
                               "the gold history; accuracy = correct turns / turns")


@dataclass
class _Board:
    """The leaderboard's scores, each a mean over categories or earlier scores; a score whose parts are not all
    there is left out and listed in `incomplete` with the categories it misses (its parts' too)."""

    cats: dict[str, dict[str, Any]]
    scores: dict[str, float] = field(default_factory=dict)
    incomplete: dict[str, list[str]] = field(default_factory=dict)

    def mean(self, name: str, parts: list[str], weighted: bool = False) -> None:
        missing: list[str] = []
        for part in parts:
            if part not in self.scores and part not in self.cats:
                missing += self.incomplete.get(part, [part])
        if missing:
            self.incomplete[name] = missing
            return
        if weighted:  # by item count: categories only
            n = sum(self.cats[p]["n"] for p in parts)
            self.scores[name] = sum(self.cats[p]["accuracy"] * self.cats[p]["n"] for p in parts) / n
        else:
            values = [self.scores[p] if p in self.scores else self.cats[p]["accuracy"] for p in parts]
            self.scores[name] = sum(values) / len(values)


def _leaderboard(cats: dict[str, dict[str, Any]], version: str) -> _Board:
    board = _Board(cats)
    board.mean("simple_ast_acc", SIMPLE)
    board.mean("non_live_ast_acc", ["simple_ast_acc", "multiple", "parallel", "parallel_multiple"])
    board.mean("live_ast_acc", LIVE_AST, weighted=True)
    board.mean("irrelevance_acc", ["irrelevance", "live_irrelevance"])
    board.mean("relevance_acc", ["live_relevance"])
    if version == "v3":
        board.mean("non_live_acc", ["simple_ast_acc", "multiple", "parallel", "parallel_multiple", "irrelevance"])
        board.mean("live_acc", [*LIVE_AST, "live_irrelevance", "live_relevance"], weighted=True)
    else:
        board.mean("non_live_acc", ["non_live_ast_acc"])
        board.mean("live_acc", ["live_ast_acc"])
    return board
