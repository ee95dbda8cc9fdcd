"""The curriculum's per-epoch numbers on a hand-built score table: informative groups, batches in the band,
the environment's shape mix and success per shape."""

import polars as pl
import pytest

from genenv_cli.core.curriculum import epoch_statistics, informative_expr

# (task, batch, source, shape, rewards of its K rollouts)
TASKS = [
    ("s1", "s1", "seed", "add-1d", [1, 1, 1, 1]),      # all solved: no signal
    ("s2", "s2", "seed", "sub-1d", [0, 1, 0, 0]),      # informative
    ("e1", "b1", "env", "sub-1d", [1, 0, 1, 0]),       # informative
    ("e2", "b1", "env", "mul-1d", [0, 0, 0, 0]),       # all failed
    ("e3", "b2", "env", "mul-1d", [1, 1, 1, 0]),       # informative
    ("e4", "b2", "env", "2op-1d", [1, 1, 1, 1]),       # all solved
    ("e5", "b3", "env", "2op-1d", [0.5]),              # a group of one: never informative
]


def scores() -> pl.DataFrame:
    rows = [{"task_id": t, "batch_id": b, "source": src, "shape": sh, "reward": float(r)}
            for t, b, src, sh, rs in TASKS for r in rs]
    return pl.DataFrame(rows)


def task_stats() -> pl.DataFrame:
    s = scores().with_columns((pl.col("reward") >= 1.0).alias("success"))
    per_task = s.group_by("task_id", "batch_id", "source", "shape", maintain_order=True).agg(
        pl.len().alias("attempts"), pl.col("success").sum().alias("successes"), informative_expr("reward"))
    per_batch = per_task.group_by("batch_id").agg((pl.col("successes").sum() / pl.col("attempts").sum()).alias("p_batch"))
    return per_task.join(per_batch, on="batch_id")


def test_informative_groups_are_the_unequal_ones_of_two_or_more():
    got = dict(task_stats().select("task_id", "informative").iter_rows())
    assert got == {"s1": False, "s2": True, "e1": True, "e2": False, "e3": True, "e4": False, "e5": False}


def test_epoch_statistics():
    st = epoch_statistics(task_stats(), band=(0.4, 0.6))
    # 6 groups of K >= 2 (e5 is a singleton), 3 informative
    assert st["informative_share"] == 0.5
    # env batches: b1 p = 2/8 = 0.25, b2 p = 7/8, b3 p = 0 -> none in [0.4, 0.6]
    assert st["env_batch_band_share"] == 0.0
    assert st["env_shape_mix"] == {"2op-1d": 0.4, "mul-1d": 0.4, "sub-1d": 0.2}
    assert st["shape_success"]["sub-1d"] == {"p": 0.375, "tasks": 2, "informative": 1.0}
    assert st["shape_success"]["mul-1d"] == {"p": 0.375, "tasks": 2, "informative": 0.5}
    assert st["shape_success"]["add-1d"] == {"p": 1.0, "tasks": 1, "informative": 0.0}
    assert st["shape_success"]["2op-1d"]["p"] == pytest.approx(4 / 5, abs=1e-4)


def test_success_per_shape_is_kept_apart_for_seed_and_environment_tasks():
    by = epoch_statistics(task_stats(), band=(0.4, 0.6))["shape_success_by_source"]
    # sub-1d: the seed task 1 of 4, the environment's 2 of 4 (pooled: 3 of 8)
    assert by["seed"] == {"add-1d": {"p": 1.0, "tasks": 1}, "sub-1d": {"p": 0.25, "tasks": 1}}
    assert by["env"]["sub-1d"] == {"p": 0.5, "tasks": 1}
    assert by["env"]["2op-1d"]["p"] == pytest.approx(4 / 5, abs=1e-4)
    assert set(by["env"]) == {"sub-1d", "mul-1d", "2op-1d"}


def test_a_batch_in_the_band_counts():
    ts = task_stats().with_columns(pl.when(pl.col("batch_id") == "b1").then(0.5).otherwise(pl.col("p_batch"))
                                   .alias("p_batch"))
    assert epoch_statistics(ts, band=(0.4, 0.6))["env_batch_band_share"] == pytest.approx(1 / 3, abs=1e-4)


def test_nothing_to_count_is_none():
    empty = task_stats().head(0)
    st = epoch_statistics(empty, band=(0.4, 0.6))
    assert st["informative_share"] is None and st["env_batch_band_share"] is None and st["env_shape_mix"] == {}
