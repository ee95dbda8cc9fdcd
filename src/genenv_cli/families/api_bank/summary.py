"""API-Bank's summary: accuracy per level and overall, and the errors by kind."""

from __future__ import annotations

from typing import Any

from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.families.api_bank.release_files import LEVELS

PAPER_REFERENCE = {"GenEnv 7B": 79.1, "Qwen2.5-7B-Instruct": 61.6}


def summarize(samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
    """API-call accuracy per level and overall (micro over all calls), as `evaluator.py` prints it, and the
    failures counted by kind."""
    cats: dict[str, dict[str, Any]] = {}
    errors: dict[str, int] = {}
    for s, v in zip(samples, verdicts, strict=True):
        c = cats.setdefault(s.category, {"correct": 0, "n": 0})
        c["n"] += 1
        c["correct"] += int(v.correct)
        kind = (v.parsed or {}).get("error") if isinstance(v.parsed, dict) else None
        if not v.correct:
            errors[kind or "other"] = errors.get(kind or "other", 0) + 1
    for c in cats.values():
        c["accuracy"] = 100.0 * c["correct"] / c["n"] if c["n"] else 0.0
    n = sum(c["n"] for c in cats.values())
    correct = sum(c["correct"] for c in cats.values())
    out: dict[str, Any] = {
        "overall": {"accuracy": 100.0 * correct / n if n else 0.0, "correct": correct, "n": n},
        "categories": {k: cats[k] for k in LEVELS if k in cats},
        "errors": dict(sorted(errors.items())),
    }
    if protocol == "paper":
        out["paper_reference"] = dict(PAPER_REFERENCE)
    return out
