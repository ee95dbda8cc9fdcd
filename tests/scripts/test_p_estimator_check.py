"""experiments/p_estimator_check.py's selection and statistics on numbers made by hand, and its recorded result's
shape: the exercises kept spread over p_tf, the binomial check, the noise floor of the mean absolute difference."""

from __future__ import annotations

import importlib
import json
import math
import random

import pytest


def _mod():
    return importlib.import_module("experiments.p_estimator_check")


def test_the_kept_exercises_spread_over_the_range_of_p():
    m = _mod()
    rng = random.Random(0)
    rows = [{"p_tf": rng.random() ** 8} for _ in range(500)]  # most near 0, as the pool's are
    kept = m.stratified(rows, 50)
    assert len(kept) == 50
    tenths = {min(int(r["p_tf"] * 10), 9) for r in kept}
    assert len(tenths) >= 8  # evenly spaced ranks of this pool would put about 37 of 50 below 0.1
    assert sum(r["p_tf"] < 0.1 for r in kept) <= 20


def test_binomial_checks_and_the_noise_floor():
    m = _mod()
    assert m.binomial_central(16, 32, 0.5) and not m.binomial_central(28, 32, 0.5)
    assert m.binomial_central(0, 32, 1e-9) and not m.binomial_central(3, 32, 1e-9)
    # E|X/k - p|: 0 at p = 0 or 1, about sqrt(2/pi) * sd at p = 0.5
    assert m.noise_mad(0.0, 32) == 0.0 and m.noise_mad(1.0, 32) == 0.0
    assert m.noise_mad(0.5, 32) == pytest.approx(math.sqrt(2 / math.pi) * math.sqrt(0.25 / 32), rel=0.05)
    rows = [{"p_tf": 0.5, "k": 32, "exact": 16, "successes": 18}, {"p_tf": 0.1, "k": 32, "exact": 3, "successes": 3},
            {"p_tf": 0.9, "k": 32, "exact": 29, "successes": 30}]
    a = m.agreement(rows, "successes")
    assert a["mean_diff_sampled_minus_tf"] == pytest.approx(((18 / 32 - 0.5) + (3 / 32 - 0.1) + (30 / 32 - 0.9)) / 3,
                                                             abs=1e-4)
    assert a["inside_binomial_95"] == 1.0 and a["pearson"] > 0.99


def test_the_recorded_result_agrees_within_sampling_noise():
    """The committed record: complete, K >= 32, and the exact-form share within the noise floor of p_tf."""
    m = _mod()
    rec = json.loads((m.RESULTS / "arith-embedded.json").read_text())
    assert rec["complete"] and rec["settings"]["k"] >= 32 and len(rec["exercises"]) == rec["settings"]["kept"]
    a = rec["exact_vs_tf"]
    assert a["mean_abs_diff"] <= 1.2 * a["mean_abs_diff_if_exact"] and abs(a["mean_diff_sampled_minus_tf"]) < 0.02
    assert rec["success_vs_tf"]["mean_diff_sampled_minus_tf"] >= 0  # success includes the exact form
