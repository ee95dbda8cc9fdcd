"""The figures of experiments/alfworld_baseline.py (the exact binomial interval, the bootstrap over games, the
per-protocol summary) and how experiments/travelplanner_official.py compares a model answer with no plan."""

from __future__ import annotations

import math

import pytest
from experiments.alfworld_baseline import bootstrap_games, clopper_pearson, summarize
from experiments.travelplanner_official import _value, final_pass, genenv_verdict


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 20, 0.0, 1 - 0.025 ** (1 / 20)),        # no success: the upper end solves (1 - p)^n = alpha/2
    (20, 20, 0.025 ** (1 / 20), 1.0),
    (5, 10, 0.187086028, 0.812913972),          # Beta(5, 6) and Beta(6, 5) quantiles
    (1, 17, 0.001488174, 0.286889397),
])
def test_clopper_pearson_gives_the_exact_binomial_interval(k, n, low, high):
    lo, hi = clopper_pearson(k, n)
    assert math.isclose(lo, low, abs_tol=1e-7) and math.isclose(hi, high, abs_tol=1e-7)


def test_the_bootstrap_over_games_is_wider_than_one_game_and_holds_the_pooled_accuracy():
    per_game = [(0, 6), (3, 6), (1, 4), (0, 8), (2, 5)]
    lo, hi = bootstrap_games(per_game, reps=2000)
    pooled = 6 / 29
    assert lo < pooled < hi and hi - lo > 0.1
    assert bootstrap_games([(0, 5), (0, 7)], reps=200) == (0.0, 0.0)


def _rec(game, task, chunk, **kw):
    return {"game": game, "task_type": task, "chunk": chunk, "chunk_games": 2, "chunk_wall_seconds": 100.0,
            "chunk_cpu_seconds": 40.0, **kw}


def test_the_summaries_count_games_won_and_steps_right_per_task_type():
    official = summarize("official", [
        _rec("a", "t1", 0, won=False, steps=50, end="turn_cap"), _rec("b", "t2", 0, won=True, steps=7, end="done"),
        _rec("c", "t1", 1, won=False, steps=12, end="context_overflow")])
    assert (official["games"], official["won"], official["success_rate"]) == (3, 1, 33.33)
    assert official["ends"] == {"context_overflow": 1, "done": 1, "turn_cap": 1}
    assert official["per_task_type"]["t1"] == {"games": 2, "won": 0}
    assert official["wall_seconds_per_game"] == round(200 / 3, 1)  # each chunk's time counted once
    paper = summarize("paper", [_rec("a", "t1", 0, steps=6, correct=1), _rec("b", "t2", 0, steps=4, correct=0)])
    assert (paper["steps"], paper["correct"], paper["step_accuracy"]) == (10, 1, 10.0)
    assert paper["ci95_clopper_pearson_steps"][0] < 10.0 < paper["ci95_clopper_pearson_steps"][1]


def test_an_answer_with_no_plan_is_not_delivered_under_both_and_agrees_on_every_constraint():
    undelivered = genenv_verdict({}, None, db=None)
    official = {"commonsense": None, "hard": None}  # what the driver writes for an empty plan, as eval.py does
    assert undelivered == official and not final_pass(undelivered)
    assert _value(undelivered, "is_not_absent") is None and _value(undelivered, "valid_cost") is None
