"""update-agent's old policy is the trainer's own forward pass, and the rollout engine's logprobs enter only
through a truncated importance weight: the step-1 ratio is exactly 1, the weight is capped, and the gap is
recorded per sample (agent_update.parquet) and per epoch (metrics.json)."""

import json
import math

import polars as pl
import pytest
import torch

from genenv_cli.machinery.training.grpo import grpo_loss, sample_mismatch
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_parquet, write_parquet
from genenv_cli.rundir.schemas import SCHEMAS
from genenv_cli.stages import update_agent
from stagekit import agent_pool

REWARDS = {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 0.0, 0.0, 1.0], "t3": [1.0, 1.0, 1.0, 1.0]}
MISMATCH = ("logp_abs_diff", "sampler_kl", "truncated_share")


def test_a_far_off_sampler_gets_weight_cap():
    # the model is the old policy (ratio 1); token 1's sampler logprob is far below the trainer's (weight
    # e^9.9, truncated to C = 3), token 2's is a little above it (weight e^-0.1, kept)
    logps = old = torch.tensor([[-0.1, -1.0]])
    sampler = torch.tensor([[-10.0, -0.9]])
    mask, adv = torch.ones(1, 2), torch.tensor([1.0])
    loss, stats = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, loss_type="grpo",
                            sampler_logps=sampler, is_cap=3.0)
    assert loss.item() == pytest.approx(-(3.0 + math.exp(-0.1)) / 2, abs=1e-6)
    assert stats["is_truncated"] == pytest.approx(0.5)
    assert stats["is_weight_mean"] == pytest.approx((3.0 + math.exp(-0.1)) / 2, abs=1e-6)
    assert stats["ratio_mean"] == 1.0 and stats["ratio_dev_max"] == 0.0
    # another cap, same case
    loss, _ = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, sampler_logps=sampler, is_cap=1.5)
    assert loss.item() == pytest.approx(-(1.5 + math.exp(-0.1)) / 2, abs=1e-6)


def test_replayed_rows_keep_their_own_truncation_only():
    # row 0 on-policy (weight min(e^2, 3) = 3); row 1 replayed: its old policy is its sampler, the ratio
    # e^(0 - (-2)) = 7.39 is truncated at replay_clip = 2 and no second (mismatch) weight multiplies it
    logps = torch.tensor([[-1.0], [0.0]])
    old = torch.tensor([[-1.0], [-2.0]])
    sampler = torch.tensor([[-3.0], [-2.0]])
    mask, adv = torch.ones(2, 1), torch.tensor([1.0, 1.0])
    loss, stats = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, replay=torch.tensor([False, True]),
                            replay_clip=2.0, sampler_logps=sampler, is_cap=3.0)
    assert loss.item() == pytest.approx((-3.0 - 2.0) / 2, abs=1e-6)
    assert stats["is_truncated"] == pytest.approx(0.5)  # the on-policy token only


def test_sample_mismatch_by_hand():
    old, sampler = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -2.0])
    got = sample_mismatch(old, sampler, 1.5)
    assert got["logp_abs_diff"] == pytest.approx(0.25)
    assert got["sampler_kl"] == pytest.approx((math.exp(0.5) - 1 - 0.5) / 2)
    assert got["truncated_share"] == pytest.approx(0.5)  # e^0.5 = 1.65 > 1.5
    assert got["tokens"] == 2


def _update(make_run, tiny_model, *overrides, dtype="auto"):
    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=2", "agent_update.grad_accum=2",
                          "agent_update.passes=2", "agent_update.kl_coef=0.05", *overrides))
    agent_pool(run, tiny_model, 1, REWARDS, dtype=dtype)
    return run, update_agent.run(run, run.load_config(), 1)


@pytest.mark.slow
def test_step_one_ratio_is_exactly_one_and_the_gap_is_recorded(make_run, tiny_model):
    run, result = _update(make_run, tiny_model)
    steps = read_parquet(run.epoch_dir(1) / "agent_update_steps.parquet", "agent_update_steps").sort("step")
    first = steps.row(0, named=True)
    # the old policy is the model the first step starts from, computed by the trainer's own forward
    assert first["ratio_mean"] == 1.0 and first["ratio_dev_max"] == 0.0 and first["clip_frac"] == 0.0
    assert steps["ratio_dev_max"][1:].max() > 0.0  # later steps: the policy has moved
    upd = read_parquet(run.epoch_dir(1) / "agent_update.parquet", "agent_update")
    used = upd.filter(pl.col("used") & ~pl.col("replay"))
    assert used.height == 8
    for c in MISMATCH:
        assert used[c].null_count() == 0
        assert upd.filter(~pl.col("used"))[c].null_count() == 4  # skipped samples: nothing to measure
    # fp32 sampling (transformers' generate, with its KV cache) against the fp32 trainer: near zero
    assert used["logp_abs_diff"].max() < 1e-4
    assert used["truncated_share"].max() == 0.0
    metrics = json.loads(run.metrics_path(1).read_text())
    for key in ("agent_logp_mismatch", "agent_sampler_kl", "agent_is_truncated"):
        assert metrics[key] is not None
    assert used["logp_abs_diff"].min() - 1e-9 <= metrics["agent_logp_mismatch"] <= used["logp_abs_diff"].max() + 1e-9
    assert metrics["agent_is_truncated"] == 0.0
    assert result.manifest["metrics"]["mismatch_logp_abs_diff"] == metrics["agent_logp_mismatch"]
    # genenv status shows the three numbers of the epoch
    from genenv_cli.views.status_table import collect, table_cells

    header, cells = table_cells(collect(run, run.load_config()))
    shown = dict(zip(header, [text for text, _ in cells[0]], strict=True))
    assert shown["|Δlogp|"] == f"{metrics['agent_logp_mismatch']:.4f}" and shown["IS trunc"] == "0.0000"
    assert shown["KL samp"] == f"{metrics['agent_sampler_kl']:.5f}"


@pytest.mark.slow
def test_a_bf16_sampler_shows_a_gap_against_the_fp32_trainer(make_run, tiny_model):
    run32, _ = _update(make_run, tiny_model)
    m32 = json.loads(run32.metrics_path(1).read_text())
    run16 = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=4", name="bf16"))
    agent_pool(run16, tiny_model, 1, REWARDS, dtype="bfloat16")
    update_agent.run(run16, run16.load_config(), 1)  # run.dtype stays auto: the trainer computes in fp32 on CPU
    m16 = json.loads(run16.metrics_path(1).read_text())
    assert m16["agent_logp_mismatch"] > max(1e-4, 50 * m32["agent_logp_mismatch"])
    assert m16["agent_sampler_kl"] > m32["agent_sampler_kl"]


def test_an_agent_update_file_without_the_gap_columns_still_reads(tmp_path):
    old_columns = [c for c in SCHEMAS["agent_update"].names() if c not in MISMATCH]
    row = {"epoch": 1, "rollout_id": "t1/s0", "task_id": "t1", "group_id": "t1", "sample_index": 0, "reward": 1.0,
           "advantage": 0.5, "used": True, "skip_reason": None, "replay": False}
    assert set(row) == set(old_columns)
    path = tmp_path / "agent_update.parquet"
    pl.DataFrame([row], schema_overrides={"skip_reason": pl.String}).write_parquet(path)
    got = read_parquet(path, "agent_update")
    assert got.columns == SCHEMAS["agent_update"].names()
    assert got["logp_abs_diff"].to_list() == [None]
    write_parquet(got, tmp_path / "again.parquet", "agent_update")  # and writes back


@pytest.mark.slow
def test_replayed_traces_run_through_the_stage_without_a_gap_of_their_own(make_run, tiny_model):
    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=4",
                          "agent_update.replay_epochs=1"))
    agent_pool(run, tiny_model, 1, REWARDS)
    update_agent.run(run, run.load_config(), 1)
    agent_pool(run, tiny_model, 2, REWARDS)
    result = update_agent.run(run, run.load_config(), 2)
    assert result.manifest["counts"]["replayed"] == 8
    upd = read_parquet(run.epoch_dir(2) / "agent_update.parquet", "agent_update")
    used = upd.filter(pl.col("used"))
    for c in MISMATCH:  # replayed traces: their sampler is an older policy, no engine gap is measured on them
        assert used.filter(pl.col("replay"))[c].null_count() == 8
        assert used.filter(~pl.col("replay"))[c].null_count() == 0
    steps = read_parquet(run.epoch_dir(2) / "agent_update_steps.parquet", "agent_update_steps")
    assert steps["is_weight_mean"].min() > 0.0 and steps["is_truncated"].max() == 0.0
