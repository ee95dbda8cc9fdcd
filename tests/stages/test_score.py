"""score on a hand-made epoch: every number checked against arithmetic done by hand."""

import math

import polars as pl
import pytest

from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import frame, read_parquet, write_parquet
from genenv_cli.stages import score
from genenv_cli.stages.update_env import select_pairs
from stagekit import fake_stage, jsonl

GOOD = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>'
BAD = '<tool_call>{"name": "get_weather", "arguments": {"city": "Quito"}}</tool_call>'
PAYLOAD = {"request": "Weather in Lima?", "tools": ["get_weather"],
           "calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]}


def task(tid, batch, source="env"):
    env = source == "env"
    return {"task_id": tid, "epoch": 1, "batch_id": batch, "source": source, "domain": "tool_call",
            "shape": "single", "payload": PAYLOAD, "parent_id": "tc-0001" if env else None,
            "context": {"parent_id": "tc-0001"} if env else None,
            "env_prompt": [{"role": "user", "content": f"write {tid}"}] if env else None,
            "env_output": f"REQUEST: {tid}" if env else None, "env_model": "base" if env else None}


# successes per task out of K = 4: batch A = 2 + 2 of 8 (p 0.5), batch B = 4 + 3 of 8 (p 0.875), seed 0 of 4
PLAN = {"A1": ("bA", 2), "A2": ("bA", 2), "B1": ("bB", 4), "B2": ("bB", 3), "S": ("S", 0)}


def parquet(rows):
    return lambda path: write_parquet(frame(rows, "rollouts"), path, "rollouts")


def rollouts():
    rows = []
    for tid, (batch, wins) in PLAN.items():
        for k in range(4):
            text = GOOD if k < wins else BAD
            rows.append({"rollout_id": f"{tid}/s{k}", "task_id": tid, "batch_id": batch, "sample_index": k,
                         "prompt_token_ids": [1, 2, 3, 4, 5], "completion": text,
                         "completion_token_ids": [7, 8, 9], "logprobs": [-0.1, -0.2, -0.3], "finish_reason": "stop",
                         "model": "base", "temperature": 1.0, "top_p": 1.0, "seed": 0})
    return rows


@pytest.fixture
def epoch1(make_run):
    run = RunDir(make_run())
    e = run.epoch_dir(1)
    tasks = [task("A1", "bA"), task("A2", "bA"), task("B1", "bB"), task("B2", "bB"), task("S", "S", "seed")]
    fake_stage(run, 1, "generate-tasks", {"tasks": (e / "tasks.jsonl", jsonl(tasks)),
                                          "rejects": (e / "tasks.rejects.jsonl", "")})
    fake_stage(run, 1, "rollout", {"rollouts": (e / "rollouts.parquet", parquet(rollouts()))})
    return run


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
    from genenv_cli.contract import check_state

    run = epoch1
    score.run(run, run.load_config(), 1)
    cfg2 = run.load_config(["curriculum.alpha=0.3"])
    st = check_state(run, cfg2, score.plan(run, cfg2, 1))
    assert st.state == "stale" and "config changed" in st.reasons[0]
    redo = score.run(run, cfg2, 1)
    assert not redo.skipped


def test_rollouts_missing_a_task_are_refused(epoch1):
    from genenv_cli.errors import InputError

    run = epoch1
    rows = [r for r in rollouts() if r["task_id"] != "S"]
    fake_stage(run, 1, "rollout", {"rollouts": (run.epoch_dir(1) / "rollouts.parquet", parquet(rows))})
    with pytest.raises(InputError, match="1 of 5 tasks have no rollouts"):
        score.run(run, run.load_config(), 1)


def test_an_edited_task_is_checked_again(epoch1):
    from genenv_cli.errors import InputError

    run = epoch1
    path = run.epoch_dir(1) / "tasks.jsonl"
    path.write_text(path.read_text().replace('"tools": ["get_weather"]', '"tools": ["get_wether"]', 1))
    with pytest.raises(InputError, match=r"task A1 \(record 1\): payload is not a valid tool_call task: unknown tool"):
        score.run(run, run.load_config(), 1)
