"""experiments/duplicates.py on a run made by hand: a duplicate takes the shape of what it duplicates (a seed
exercise or an earlier task), and its reward is counted as given (none when it left its group)."""

from __future__ import annotations

import importlib
import json

import polars as pl


def test_a_duplicate_takes_the_shape_of_what_it_duplicates(tmp_path):
    mod = importlib.import_module("experiments.duplicates")
    run = tmp_path / "arith-arm-s1"
    (run / "epochs" / "0001").mkdir(parents=True)
    (run / "pools" / "env_gen").mkdir(parents=True)
    tasks = [{"task_id": "e0001-b0000-v0", "shape": "add-2d", "source": "env"},
             {"task_id": "e0001-seed-ar-0003", "shape": "sub-2d", "source": "seed"}]
    (run / "epochs" / "0001" / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    pl.DataFrame({"task_id": ["e0001-b0000-v0", None, None, None, None],
                  "valid": [True, False, False, False, False],
                  "reason": [None, "duplicate of e0001-b0000-v0", "duplicate of ar-0003", "parse: no EXERCISE: line",
                             "duplicate of e0001-b0000-v0"],
                  "reward": [0.5, None, None, 0.0, 0.0]}).write_parquet(run / "pools" / "env_gen" / "epoch=0001.parquet")
    per = mod.pool([mod.count_run(run)])
    assert per["add-2d"] == {"valid": 3, "duplicate": 2, "duplicate_rewards": {"none": 1, "0": 1},
                             "duplicate_share": 0.6667}
    assert per["sub-2d"]["duplicate"] == 1 and per["sub-2d"]["valid"] == 1  # ar-0003 is a sub-2d seed exercise
    assert "unknown" not in per
