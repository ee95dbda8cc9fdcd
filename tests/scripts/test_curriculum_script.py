"""experiments/curriculum.py end to end on the tiny model: every arm, two seeds, two epochs; then a rerun that
finds everything done (the experiment is resumable). The held-out evaluations use the first HELDOUT exercises
(`--heldout-limit`, recorded with the result): the whole split is most of the experiment's time on the tiny model,
and nothing the test checks depends on its size."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest

SMALL = ["generate.tasks_per_epoch=8", "generate.variations=2", "generate.max_rounds=1",
         "generate.max_new_tokens=12", "generate.static_variations=1", "rollout.group_size=3",
         "rollout.max_new_tokens=6", "evaluate.max_new_tokens=6", "agent_update.batch_size=8",
         "env_update.batch_size=8"]
HELDOUT = 12


def _load():
    """The experiment's module (the repository root is on pytest's pythonpath, as on `python -m` from it)."""
    return importlib.import_module("experiments.curriculum")


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.e2e
def test_curriculum_experiment_runs_and_resumes(tmp_path, tiny_model):
    mod = _load()
    argv = ["--seeds", "1", "2", "--epochs", "2", "--model", str(tiny_model), "--work", str(tmp_path / "runs"),
            "--out", str(tmp_path / "results"), "--quiet", "--heldout-limit", str(HELDOUT), *[a for s in SMALL for a in ("--set", s)]]
    record = mod.main(argv)
    saved = json.loads((tmp_path / "results" / "curriculum-arith.json").read_text())
    assert set(saved["arms"]) == {"genenv", "frozen", "static", "seeds"}
    for arm, data in saved["arms"].items():
        assert [r["epoch"] for r in data["epochs"]] == [1, 2]
        for r in data["epochs"]:
            assert r["seeds"] == 2 and r["heldout"]["n"] == 2, arm
            assert r["rollouts"]["mean"] == 8 * 3, arm            # the same rollout budget in every arm
            assert r["seconds"]["mean"] > 0
        assert data["base_heldout"]["n"] == 2
    assert set(saved["must_show"]) >= {"a_seeds_lift_over_base", "b_genenv_in_band_rise",
                                       "b_genenv_minus_frozen_in_band_last_epoch",
                                       "c_genenv_minus_frozen_heldout_last_epoch"}
    assert saved["complete"] and saved["machine"]["cpus"] and saved["versions"]["genenv-cli"] and saved["settings"]
    # the held-out subset is recorded, and every evaluation (the base model's, shared, and each epoch's) used it
    assert saved["heldout_limit"] == HELDOUT and f"first {HELDOUT} exercises" in saved_md(tmp_path)
    for arm in saved["arms"]:
        for s in (1, 2):
            evals = sorted((tmp_path / "runs" / f"arith-{arm}-s{s}" / "evals" / "heldout").glob("*.json"))
            assert len(evals) == 3 and all(json.loads(p.read_text())["n"] == HELDOUT for p in evals), (arm, s)
    # every environment batch's p̂ is recorded (the tiny model may write none: then there are none to place)
    for arm in ("genenv", "frozen", "static"):
        assert all(len(r["env_batch_p"]) == r["env_batches"] for s in ("1", "2")
                   for r in saved["per_run"][arm][s]["rows"]), arm
    assert (tmp_path / "results" / "curriculum-arith.md").read_text().count("| genenv |") == 3
    page = Path(record["compare"]).read_text()
    assert "seeds" in page and "frozen" in page and "⚠" not in page  # arms differ in env.mode only
    # rerun: every stage and evaluation is found done, the timings are kept
    again = mod.main(argv)
    assert again["arms"] == record["arms"]
    assert again["seconds_this_invocation"] < record["seconds_this_invocation"]
    # every finished run left a record; with the run folders gone (a fresh checkout) the records alone give the
    # same result and nothing is run again
    runs = tmp_path / "results" / "curriculum-arith" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == sorted(f"{a}-s{s}.json" for a in saved["arms"] for s in (1, 2))
    pngs = {p.name: p.read_bytes() for p in Path(again["compare"]).parent.glob("*.png")}
    # a claim no run records (the tiny environment may write no task) is said once on the page, with no chart
    assert set(pngs) <= {f"{c}{d}.png" for c in ("heldout", "in-band", "informative", "task-band")
                         for d in ("", "-diff")} | {"shape-mix.png"}
    assert {"heldout.png", "heldout-diff.png", "shape-mix.png"} <= set(pngs)
    shutil.rmtree(tmp_path / "runs")
    fresh = mod.main(argv)
    # the page is drawn from the records alone, the same charts as from the folders
    assert {p.name: p.read_bytes() for p in Path(fresh["compare"]).parent.glob("*.png")} == pngs
    assert "⚠" not in Path(fresh["compare"]).read_text()
    assert fresh["arms"] == record["arms"] and fresh["must_show"] == record["must_show"]
    assert fresh["runs_from_records"] == {a: [1, 2] for a in saved["arms"]} and fresh["complete"]
    # the result names the code its runs ran on, whether they were run, found on disk or read from records
    commits = {json.loads(p.read_text())["commit"] for p in runs.iterdir()}
    assert len(commits) == 1 and None not in commits
    assert record["run_commits"] == again["run_commits"] == fresh["run_commits"] == sorted(commits)
    assert not (tmp_path / "runs").exists()
    # one arm asked for: the result still covers every arm that has a record for these seeds
    one = mod.main([*argv, "--arms", "seeds", "--report-only"])
    assert list(one["arms"]) == ["genenv", "frozen", "static", "seeds"] and one["must_show"] == record["must_show"]
    # a record made with other settings is not used: that run would be run again (report-only runs nothing)
    other = mod.main([*argv, "--set", "curriculum.beta=3.0", "--report-only"])
    assert other["runs_done"] == {} and not other["complete"]
    # nor one made on another held-out subset
    wider = mod.main([*argv, "--heldout-limit", str(HELDOUT + 1), "--report-only"])
    assert wider["runs_done"] == {} and not wider["complete"]


def saved_md(tmp_path: Path) -> str:
    return (tmp_path / "results" / "curriculum-arith.md").read_text()


def test_batch_p_spread_places_every_batch_against_the_band():
    mod = _load()
    rows = [{"env_batch_p": [0.0, 0.3, 0.35, 0.4, 0.5]}, {"env_batch_p": [0.6, 0.61, 0.9]}, {"env_batch_p": None}]
    spread = mod.batch_p_spread({"genenv": {1: {"rows": rows}, 2: {"rows": [{"env_batch_p": []}]}},
                                 "seeds": {1: {"rows": [{"env_batch_p": []}]}}})
    assert spread == {"genenv": {"seeds": [1], "batches": 8, "below": 0.375, "in_band": 0.375, "above": 0.25,
                                 "just_below": 0.25}}


def _run(band: list[float], kept: list[int], heldout: list[float]) -> dict:
    rows = [{"epoch": e + 1, "env_batch_band_share": b, "env_batches_kept": k, "heldout": h, "env_shape_mix": {},
             "shape_p": {}} for e, (b, k, h) in enumerate(zip(band, kept, heldout, strict=True))]
    return {"rows": rows, "base_heldout": 0.2}


def test_departure_arms_are_compared_with_frozen_and_genenv_by_seed():
    mod = _load()
    assert "genenv-kmin0.2" in mod.DEPARTURES and mod.HEADLINE == ["genenv", "frozen", "static", "seeds"]
    per_run = {
        "genenv": {1: _run([0.1, 0.1, 0.1], [0, 0, 1], [0.3, 0.3, 0.3]), 2: _run([0.2, 0.2, 0.2], [0, 1, 1], [0.3, 0.4, 0.4])},
        "frozen": {1: _run([0.1, 0.1, 0.0], [0, 0, 0], [0.3, 0.3, 0.2]), 2: _run([0.2, 0.1, 0.1], [0, 0, 0], [0.3, 0.3, 0.3])},
        "genenv-kmin0.2": {1: _run([0.1, 0.3, 0.5], [2, 3, 4], [0.3, 0.3, 0.4]),
                           2: _run([0.2, 0.4, 0.4], [3, 5, 5], [0.3, 0.4, 0.5])},
    }
    dep = mod.departures(per_run)
    # last epoch, paired by seed: (0.5 - 0.0, 0.4 - 0.1) against frozen; (0.5 - 0.1, 0.4 - 0.2) against genenv
    assert dep["genenv-kmin0.2_minus_frozen_in_band_last_epoch"]["per_seed"] == pytest.approx([0.5, 0.3])
    assert dep["genenv-kmin0.2_minus_genenv_in_band_last_epoch"]["per_seed"] == pytest.approx([0.4, 0.2])
    # epochs 2..3: kept (3.5 - 0.5, 5 - 1) batches more than genenv; in band (0.4 - 0.1, 0.4 - 0.2)
    assert dep["genenv-kmin0.2_minus_genenv_batches_kept_epochs_2_on"]["per_seed"] == pytest.approx([3.0, 4.0])
    assert dep["genenv-kmin0.2_minus_genenv_in_band_epochs_2_on"]["per_seed"] == pytest.approx([0.3, 0.2])
    assert dep["genenv-kmin0.2_minus_frozen_heldout_last_epoch"]["per_seed"] == pytest.approx([0.2, 0.2])
    assert mod.departures({k: v for k, v in per_run.items() if k != "genenv-kmin0.2"}) == {}
    # the headline comparisons do not change with a departure arm beside them
    headline = {k: v for k, v in per_run.items() if k in mod.HEADLINE}
    assert mod.must_show(per_run) == mod.must_show(headline)


def test_heldout_limit_below_one_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _load().main(["--heldout-limit", "0", "--report-only", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "--heldout-limit 0: expected a number of exercises" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_rerun_check_counts_numbers_inside_the_prediction_interval():
    """experiments/rerun_check.py: a rerun near the recorded seeds lands inside their prediction interval, one far
    from them does not; a number with fewer than two recorded values is not compared."""
    check = importlib.import_module("experiments.rerun_check")
    low, high = check.prediction_interval([0.30, 0.32, 0.34])
    assert low < 0.30 and high > 0.34 and round((low + high) / 2, 6) == 0.32
    recorded = [{"seed": s, "rows": [{"epoch": 1, "heldout": h}]} for s, h in ((1, 0.30), (2, 0.32), (3, 0.34))]
    near = check.check({"arm": "genenv", "seed": 1, "rows": [{"epoch": 1, "heldout": 0.33}]}, recorded)
    far = check.check({"arm": "genenv", "seed": 1, "rows": [{"epoch": 1, "heldout": 0.60}]}, recorded)
    assert (near["inside"], near["compared"]) == (1, 1) and (far["inside"], far["compared"]) == (0, 1)
    assert near["epochs"][0]["heldout"]["recorded_same_seed"] == 0.30
