"""score on a hand-made epoch: every number checked against arithmetic done by hand."""

import math

import polars as pl
import pytest

from genenv_cli.rundir.datafiles import read_parquet
from genenv_cli.stages import score
from genenv_cli.stages.update_env import select_pairs
from score_epoch import BAD, GOOD, PAYLOAD, PLAN, parquet, rollouts, task  # noqa: F401 - the epoch1 fixture's parts
from stagekit import fake_stage


def test_numbers_by_hand(epoch1):
    run = epoch1
    result = score.run(run, run.load_config(), 1)
    stats = read_parquet(run.epoch_dir(1) / "task_stats.parquet", "task_stats")
    row = {r["task_id"]: r for r in stats.iter_rows(named=True)}
    assert [row[t]["p_task"] for t in ("A1", "A2", "B1", "B2", "S")] == [0.5, 0.5, 1.0, 0.75, 0.0]
    assert row["A1"]["p_batch"] == row["A2"]["p_batch"] == 0.5
    assert row["B1"]["p_batch"] == row["B2"]["p_batch"] == 0.875
    assert row["A1"]["r_env"] == 1.0
    assert row["B1"]["r_env"] == pytest.approx(math.exp(-2.0 * 0.375 ** 2))       # 0.754840...
    assert row["B1"]["r_env"] == pytest.approx(0.7548396, abs=1e-6)
    assert row["S"]["r_env"] == pytest.approx(math.exp(-0.5))
    assert [row[t]["filtered"] for t in ("A1", "B1", "S")] == [False, True, True]
    assert [row[t]["in_band"] for t in ("A1", "A2", "B1", "B2", "S")] == [True, True, False, False, False]
    m = result.manifest["metrics"]
    assert m["success_rate"] == 11 / 20
    assert m["band_share"] == 0.4
    assert m["env_r_mean"] == pytest.approx((1.0 + 0.7548396) / 2, abs=1e-4)  # metrics are rounded to 4 places

    env = read_parquet(run.pool_partition("env_sft", 1), "env_sft").sort("task_id")
    assert env["task_id"].to_list() == ["A1", "A2", "B1", "B2"]
    assert env["weight"].to_list() == pytest.approx([math.e, math.e, math.exp(0.7548396), math.exp(0.7548396)], abs=1e-5)
    assert env["kept"].to_list() == [True, True, False, False]

    pool = read_parquet(run.pool_partition("agent_train", 1), "agent_train")
    assert pool.height == 20 and pool["group_id"].n_unique() == 5
    assert pool.filter(pl.col("task_id") == "B2")["reward"].sum() == 3.0
    scores = read_parquet(run.epoch_dir(1) / "scores.parquet", "scores")
    assert scores["success"].sum() == 11 and scores["valid"].all()


def test_weights_of_kept_pairs_by_hand(epoch1):
    """With k_min wide enough to keep both batches and lambda = 2, score's weights are exp(2 R_env) of each
    batch, and normalised over the kept pairs (what update-env trains on) they are unequal as computed by hand."""
    run = epoch1
    score.run(run, run.load_config(["curriculum.k_min=0.4", "curriculum.lam=2.0"]), 1)
    env = read_parquet(run.pool_partition("env_sft", 1), "env_sft").sort("task_id")
    assert env["kept"].to_list() == [True, True, True, True]
    r_b = math.exp(-2.0 * 0.375 ** 2)  # batch B, p_batch 0.875
    raw = [math.exp(2.0), math.exp(2.0), math.exp(2.0 * r_b), math.exp(2.0 * r_b)]
    assert env["weight"].to_list() == pytest.approx(raw)
    total = 2 * math.e ** 2 + 2 * math.exp(2.0 * r_b)
    _, records = select_pairs([run.pool_partition("env_sft", 1)], lam=2.0)
    normalised = records.sort("task_id")["weight"].to_list()
    assert normalised == pytest.approx([math.e ** 2 / total] * 2 + [math.exp(2.0 * r_b) / total] * 2)
    assert normalised == pytest.approx([w / sum(raw) for w in raw]) and normalised[0] > normalised[2]


def test_rerun_is_a_noop_and_force_rewrites_identically(epoch1):
    run, cfg = epoch1, epoch1.load_config()
    score.run(run, cfg, 1)
    part = run.pool_partition("agent_train", 1)
    before = part.read_bytes()
    again = score.run(run, cfg, 1)
    assert again.skipped and "up to date" in again.message
    forced = score.run(run, cfg, 1, force=True)
    assert not forced.skipped
    assert part.read_bytes() == before                       # byte-identical partition
    assert read_parquet(part, "agent_train").height == 20     # replaced, not appended
    assert len(run.pool_partitions("agent_train")) == 1


def test_changed_config_makes_it_stale(epoch1):
    from genenv_cli.rundir.contract import check_state

    run = epoch1
    score.run(run, run.load_config(), 1)
    cfg2 = run.load_config(["curriculum.alpha=0.3"])
    st = check_state(run, cfg2, score.plan(run, cfg2, 1))
    assert st.state == "stale" and "config changed" in st.reasons[0]
    redo = score.run(run, cfg2, 1)
    assert not redo.skipped


def test_rollouts_missing_a_task_are_refused(epoch1):
    from genenv_cli.core.errors import InputError

    run = epoch1
    rows = [r for r in rollouts() if r["task_id"] != "S"]
    fake_stage(run, 1, "rollout", {"rollouts": (run.epoch_dir(1) / "rollouts.parquet", parquet(rows))})
    with pytest.raises(InputError, match="1 of 5 tasks have no rollouts"):
        score.run(run, run.load_config(), 1)


def test_an_edited_task_is_checked_again(epoch1):
    from genenv_cli.core.errors import InputError

    run = epoch1
    path = run.epoch_dir(1) / "tasks.jsonl"
    path.write_text(path.read_text().replace('"tools": ["get_weather"]', '"tools": ["get_wether"]', 1))
    with pytest.raises(InputError, match=r"task A1 \(record 1\): payload is not a valid tool_call task: unknown tool"):
        score.run(run, run.load_config(), 1)
