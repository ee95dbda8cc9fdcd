"""experiments/env_only.py end to end on the tiny model (three arms, two seeds, two epochs), then its analysis on
records made by hand: the claim holds only when the trained environment beats the frozen one by more than the
seeds' spread."""

from __future__ import annotations

import importlib
import json

import pytest

SMALL = ["generate.tasks_per_epoch=8", "generate.variations=2", "generate.max_rounds=1",
         "generate.max_new_tokens=12", "rollout.group_size=3", "rollout.max_new_tokens=6",
         "evaluate.max_new_tokens=4", "env_update.batch_size=8", "curriculum.k_min=0.5"]


def _load():
    return importlib.import_module("experiments.env_only")


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.e2e
def test_env_only_experiment_runs_and_resumes(tmp_path, tiny_model):
    mod = _load()
    argv = ["--seeds", "1", "2", "--epochs", "2", "--model", str(tiny_model), "--work", str(tmp_path / "runs"),
            "--out", str(tmp_path / "results"), "--quiet", *[a for s in SMALL for a in ("--set", s)]]
    record = mod.main(argv)
    saved = json.loads((tmp_path / "results" / "env_only-arith.json").read_text())
    assert saved["complete"] and set(saved["arms"]) == set(mod.HEADLINE)
    for arm in mod.HEADLINE:
        for seed in (1, 2):
            root = tmp_path / "runs" / f"arith-{arm}-s{seed}"
            assert not (root / "epochs" / "0001" / "agent").exists()  # the agent is never trained
            assert (root / "epochs" / "0002" / "env").exists() == (arm != "env-only-frozen")
            rows = json.loads((tmp_path / "results" / "env_only-arith" / "runs" / f"{arm}-s{seed}.json").read_text())
            assert [r["epoch"] for r in rows["rows"]] == [1, 2] and rows["commit"]
    # epoch 1 is the same in every arm of a seed (nothing has trained yet): the arms are paired
    tasks = {arm: (tmp_path / "runs" / f"arith-{arm}-s1" / "epochs" / "0001" / "tasks.jsonl").read_text()
             for arm in mod.HEADLINE}
    assert len(set(tasks.values())) == 1
    assert "env-only" in record["claims"] and "in_band_epochs_2_on" in record["claims"]["env-only"]
    for arm in mod.HEADLINE:  # every generation's reward is in pools/env_gen: the signal's sources are read from it
        rows = json.loads((tmp_path / "results" / "env_only-arith" / "runs" / f"{arm}-s1.json").read_text())["rows"]
        share = rows[0]["signal"]["validity_share"]
        assert share is None or 0.0 <= share <= 1.0
    again = mod.main([*argv, "--report-only"])  # everything is done: nothing runs, the same numbers
    assert again["arms"] == record["arms"]


@pytest.mark.slow
@pytest.mark.e2e
def test_the_teacher_forced_arms_run_with_their_estimator(tmp_path, tiny_model):
    """Issue 49's arms b and their baseline end to end: every epoch's task_stats carries the teacher-forced p; arm b's
    p_task is a share of K draws from it, the untrained arm's p_task is it; both epochs 1 are the same batch."""
    import polars as pl

    mod = _load()
    arms = ["env-only-tf-binomial", "env-only-frozen-tf"]
    argv = ["--arms", *arms, "--seeds", "1", "--epochs", "2", "--model", str(tiny_model), "--work",
            str(tmp_path / "runs"), "--out", str(tmp_path / "results"), "--quiet",
            *[a for s in SMALL for a in ("--set", s)]]
    record = mod.main(argv)
    assert record["claims"]["env-only-tf-binomial"]["baseline"] == "env-only-frozen-tf"
    for arm in arms:
        for epoch in (1, 2):
            st = pl.read_parquet(tmp_path / "runs" / f"arith-{arm}-s1" / "epochs" / f"{epoch:04d}" / "task_stats.parquet")
            assert st["p_task_teacher_forced"].null_count() == 0
            if arm == "env-only-frozen-tf":
                assert st["p_task"].to_list() == st["p_task_teacher_forced"].to_list()
            else:
                assert all(round(x * 3, 9) % 1 == 0 for x in st["p_task"].to_list())  # K = 3 draws
    tasks = {arm: (tmp_path / "runs" / f"arith-{arm}-s1" / "epochs" / "0001" / "tasks.jsonl").read_text()
             for arm in arms}
    assert len(set(tasks.values())) == 1


def _run(band: list[float], gap: list[float]) -> dict:
    return {"rows": [{"epoch": e + 1, "env_batch_band_share": b, "env_batch_gap": g, "env_shape_mix": {}}
                     for e, (b, g) in enumerate(zip(band, gap, strict=True))]}


def test_the_claim_needs_more_than_the_seed_spread():
    mod = _load()
    frozen = {s: _run([0.1, 0.1, 0.1], [0.3, 0.3, 0.3]) for s in (1, 2, 3)}
    better = {1: _run([0.1, 0.4, 0.5], [0.3, 0.15, 0.1]), 2: _run([0.1, 0.3, 0.4], [0.3, 0.2, 0.15]),
              3: _run([0.1, 0.5, 0.4], [0.3, 0.12, 0.14])}
    mixed = {1: _run([0.1, 0.5, 0.5], [0.3, 0.1, 0.1]), 2: _run([0.1, 0.0, 0.0], [0.3, 0.4, 0.45]),
             3: _run([0.1, 0.1, 0.1], [0.3, 0.3, 0.3])}
    claims = mod.claims({"env-only": better, "env-only-kmin0.2": mixed, "env-only-frozen": frozen})
    assert claims["env-only"]["claim_holds"] is True
    assert claims["env-only"]["in_band_epochs_2_on"]["per_seed"] == [0.35, 0.25, 0.35]
    assert claims["env-only-kmin0.2"]["claim_holds"] is False


def test_a_trained_arm_is_paired_with_the_baseline_of_its_own_batches():
    """env-only-var2 (2 variations a batch) is compared with env-only-frozen-var2, never with the 4-variation
    env-only-frozen, and has no claim until its own baseline has runs."""
    mod = _load()
    frozen4 = {s: _run([0.1, 0.1, 0.1], [0.3, 0.3, 0.3]) for s in (1, 2, 3)}
    frozen2 = {s: _run([0.3, 0.3, 0.3], [0.2, 0.2, 0.2]) for s in (1, 2, 3)}
    var2 = {s: _run([0.3, 0.3, 0.3], [0.2, 0.2, 0.2]) for s in (1, 2, 3)}
    assert "env-only-var2" not in mod.claims({"env-only-var2": var2, "env-only-frozen": frozen4})
    c = mod.claims({"env-only-var2": var2, "env-only-frozen": frozen4, "env-only-frozen-var2": frozen2})
    assert c["env-only-var2"]["baseline"] == "env-only-frozen-var2"
    assert c["env-only-var2"]["in_band_epochs_2_on"]["mean"] == pytest.approx(0.0)
    assert c["env-only-var2"]["claim_holds"] is False
    effect = mod.batch_size_effect({"env-only-frozen": frozen4, "env-only-frozen-var2": frozen2})
    assert effect["env-only-frozen-var2_minus_env-only-frozen"]["in_band_epochs_2_on"]["mean"] == pytest.approx(0.2)


def test_the_validity_share_splits_the_reward_spread_within_groups():
    mod = _load()
    # group a: rewards 0 | 0.6, 1 (mean 8/15): 0.4267 of its 0.5067 lies between the classes; group b: 0 | 0.6, 0.6
    # (mean 0.4): all 0.24 of it
    share = mod.validity_share([0.0, 0.6, 1.0, 0.0, 0.6, 0.6], [False, True, True, False, True, True], list("aaabbb"))
    assert share == pytest.approx((0.42667 + 0.24) / (0.50667 + 0.24), abs=1e-4)
    assert mod.validity_share([0.0, 1.0], [True, True], ["a", "a"]) == 0.0  # only the valid spread
    assert mod.validity_share([0.0, 0.6], [False, True], ["a", "a"]) == 1.0  # only validity
    assert mod.validity_share([0.5, 0.5], [True, True], ["a", "a"]) is None  # no spread at all


def test_the_signal_leaves_generations_without_a_reward_out_of_their_groups(tmp_path, monkeypatch):
    """A neutral duplicate (curriculum.duplicate_reward = "neutral") has no reward, as in the update: the analysis
    of where the signal comes from must leave it out of its group, not fail on it (env-only-uncertainty did)."""
    from types import SimpleNamespace

    import polars as pl

    mod = _load()
    gen = pl.DataFrame({"batch_id": list("aaaabb"), "reward": [0.0, 1.0, None, 0.5, None, 0.2],
                        "valid": [False, True, True, True, True, True], "p_task": [None, 0.5, 0.5, 0.9, 0.5, 0.1]})
    path = tmp_path / "env_gen.parquet"
    path.write_bytes(b"")
    run = SimpleNamespace(pool_partition=lambda pool, epoch: path, load_config=lambda: SimpleNamespace(
        curriculum=SimpleNamespace(band_low=0.4, band_high=0.6)))
    monkeypatch.setattr(mod, "read_parquet", lambda p, key: gen)
    got = mod.advantage_sources(run, 1)
    # group a keeps 0, 1, 0.5 (mean 0.5): the in-band valid one is above it, the invalid one below; group b keeps
    # one generation, which has no spread and no advantage
    assert got["adv_valid_in_band"] > 0 > got["adv_invalid"]
    assert 0.0 < got["validity_share"] < 1.0
