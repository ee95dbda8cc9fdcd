"""update-agent (GRPO) and update-env (RWR with a KL leash) on tiny models, checked by hand and against TRL."""

import json
import math

import polars as pl
import pytest
import torch

from genenv_cli.core.curriculum import normalized_weights
from genenv_cli.machinery.models import resolve
from genenv_cli.machinery.training.grpo import group_advantages, grpo_loss
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_parquet
from genenv_cli.stages import update_agent, update_env
from stagekit import agent_pool, env_pool

# ---------------------------------------------------------------- by hand

def test_advantages_by_hand():
    adv, why = group_advantages([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.7], ["g", "g", "g", "g", "h", "h", "s"])
    # group g: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735; (1 - 0.5) / (0.57735 + 1e-4) = 0.86588
    assert adv[:4] == pytest.approx([0.86588, -0.86588, -0.86588, 0.86588], abs=1e-5)
    assert adv[4:] == [None, None, None]
    assert why == [None, None, None, None, "all-equal group", "all-equal group", "singleton group"]


def test_loss_by_hand():
    logps = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]])
    old = torch.tensor([[-1.0, -2.5], [-0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([1.0, -2.0])
    # row 0: ratios 1 and e^0.5 = 1.6487 (clipped to 1.2 for A > 0): per-token -1, -1.2 -> mean -1.1
    # row 1: ratio 1 (second token masked): per-token 2 -> mean 2; grpo loss = (-1.1 + 2) / 2 = 0.45
    loss, stats = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, loss_type="grpo")
    assert loss.item() == pytest.approx(0.45, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(1 / 3)
    # bnpo: token mean over the 3 real tokens: (-1 - 1.2 + 2) / 3
    loss, _ = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, loss_type="bnpo")
    assert loss.item() == pytest.approx(-0.2 / 3, abs=1e-6)
    # KL term: ref = logps + 1 on every token -> k3 = e^1 - 1 - 1 = 0.71828, times the ratio
    ref = logps + 1.0
    loss_kl, stats = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.1, ref_logps=ref, loss_type="grpo")
    k3 = math.e - 2
    row0 = (-1 - 1.2 + 0.1 * k3 * (1 + math.exp(0.5))) / 2
    row1 = 2 + 0.1 * k3
    assert loss_kl.item() == pytest.approx((row0 + row1) / 2, abs=1e-5)


def test_replay_uses_a_truncated_ratio():
    logps, old = torch.tensor([[0.0]]), torch.tensor([[-2.0]])   # ratio e^2 = 7.39
    mask, adv = torch.ones(1, 1), torch.tensor([1.0])
    loss, _ = grpo_loss(logps, old, adv, mask, clip_eps=0.2, kl_coef=0.0, replay=torch.tensor([True]), replay_clip=2.0)
    assert loss.item() == pytest.approx(-2.0)


@pytest.mark.parametrize("loss_type,beta", [("grpo", 0.0), ("grpo", 0.04), ("bnpo", 0.04)])
@pytest.mark.slow
def test_loss_equals_trls_on_the_same_batch(tiny_model, tmp_path, loss_type, beta):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from genenv_cli.machinery.training.logits import token_logps

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    cfg = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                     num_generations=4, max_completion_length=8, report_to="none", beta=beta, loss_type=loss_type,
                     temperature=0.7, epsilon=0.2)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=cfg,
                          train_dataset=Dataset.from_list([{"prompt": "hi"}] * 8), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    g = torch.Generator().manual_seed(0)
    B, P, C = 4, 5, 6
    prompt_ids = torch.randint(3, 600, (B, P), generator=g)
    prompt_mask = torch.ones(B, P, dtype=torch.long)
    prompt_mask[0, :2] = 0
    completion_ids = torch.randint(3, 600, (B, C), generator=g)
    completion_mask = torch.ones(B, C, dtype=torch.long)
    completion_mask[1, 4:] = 0
    completion_mask[2, 2:] = 0
    adv = torch.tensor([1.0, -0.5, 0.3, -0.8])
    old = torch.randn(B, C, generator=g) * 0.3 - 6.5
    ref = torch.randn(B, C, generator=g) * 0.3 - 6.5
    trainer.model.train()
    theirs = trainer._compute_loss(trainer.model, {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": adv, "old_per_token_logps": old,
        "ref_per_token_logps": ref, "num_items_in_batch": completion_mask.sum()})
    ids = torch.cat([prompt_ids, completion_ids], 1)
    attn = torch.cat([prompt_mask, completion_mask], 1)
    logps = token_logps(trainer.model, ids, attn, C, temperature=0.7)
    ours, _ = grpo_loss(logps, old, adv, completion_mask.float(), clip_eps=0.2, kl_coef=beta, ref_logps=ref,
                        loss_type=loss_type)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5, abs=1e-7)


def test_rwr_weights_by_hand():
    w = normalized_weights([1.0, 0.5, 0.0], lam=1.0)
    total = math.e + math.exp(0.5) + 1.0
    assert w == pytest.approx([math.e / total, math.exp(0.5) / total, 1.0 / total])


# ---------------------------------------------------------------- the stages on a tiny model

REWARDS = {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 0.0, 0.0, 1.0], "t3": [1.0, 1.0, 1.0, 1.0]}


@pytest.mark.parametrize("lora", [True, False])
@pytest.mark.slow
def test_update_agent_trains_and_records(make_run, tiny_model, lora):
    run = RunDir(make_run(f"agent_update.lora={str(lora).lower()}", "agent_update.learning_rate=0.01",
                          "agent_update.batch_size=4", "agent_update.passes=2", "agent_update.kl_coef=0.05"))
    agent_pool(run, tiny_model, 1, REWARDS)
    result = update_agent.run(run, run.load_config(), 1)
    c, m = result.manifest["counts"], result.manifest["metrics"]
    assert c["samples_used"] == 8 and c["groups_used"] == 2 and c["groups_skipped"] == 1
    assert c["skipped_by_reason"] == {"all-equal group": 1}
    assert c["steps"] == 4                                   # 8 samples / batch 4, two passes
    upd = read_parquet(run.epoch_dir(1) / "agent_update.parquet", "agent_update").sort("rollout_id")
    t1 = upd.filter(pl.col("task_id") == "t1")["advantage"].to_list()
    assert t1 == pytest.approx([0.86588, -0.86588, 0.86588, -0.86588], abs=1e-5)
    t2 = upd.filter(pl.col("task_id") == "t2")["advantage"].to_list()
    # t2: mean 0.25, unbiased std sqrt((3 * 0.25^2 + 0.75^2) / 3) = 0.5
    assert t2 == pytest.approx([-0.25 / 0.5001] * 3 + [0.75 / 0.5001], abs=1e-6)
    assert upd.filter(pl.col("task_id") == "t3")["skip_reason"].to_list() == ["all-equal group"] * 4
    steps = read_parquet(run.epoch_dir(1) / "agent_update_steps.parquet", "agent_update_steps")
    assert steps.height == 4 and steps["grad_norm"].null_count() == 0 and (steps["kl"] >= 0).all()
    meta = json.loads((run.epoch_dir(1) / "agent" / "genenv_checkpoint.json").read_text())
    assert meta["kind"] == ("lora" if lora else "full") and meta["base"] == str(tiny_model)
    # parameters changed: the checkpoint's logits differ from the base model's
    from genenv_cli.machinery.models import load_model

    ids = torch.tensor([[1, 50, 60, 70]])
    base = load_model(resolve(str(tiny_model)))
    trained = load_model(resolve(str(run.epoch_dir(1) / "agent")))
    with torch.no_grad():
        assert not torch.allclose(base(ids).logits, trained(ids).logits, atol=1e-6)
    assert m["train_reward"] == pytest.approx(7 / 12, abs=1e-4)


@pytest.mark.slow
def test_update_env_weights_and_parameters(make_run):
    run = RunDir(make_run("env_update.learning_rate=0.01", "env_update.batch_size=2", "env_update.kl_max=100"))
    env_pool(run, 1, [1.0, 0.8, 0.5, 0.9, 0.2], [True, True, False, True, True])
    result = update_env.run(run, run.load_config(), 1)
    rec = read_parquet(run.epoch_dir(1) / "env_update.parquet", "env_update").sort("task_id")
    used = rec.filter(pl.col("used"))
    expected = normalized_weights([1.0, 0.8, 0.9, 0.2], lam=1.0)
    assert used["weight"].to_list() == pytest.approx(expected)
    assert used["weight_rel"].to_list() == pytest.approx([w * 4 for w in expected])
    assert rec.filter(~pl.col("used"))["skip_reason"].to_list() == ["filtered"]
    steps = read_parquet(run.epoch_dir(1) / "env_update_steps.parquet", "env_update_steps")
    assert steps.height == 2 and steps["applied"].all() and not steps["stopped_by_kl"].any()
    assert steps["kl"][0] == pytest.approx(0.0, abs=1e-7)  # the first step starts at the initial model
    assert result.manifest["metrics"]["kl_stopped"] is False
    digest0 = json.loads((run.epoch_dir(1) / "env" / "genenv_checkpoint.json").read_text())["parameter_digest"]
    assert digest0 == result.manifest["metrics"]["parameter_digest"]


@pytest.mark.slow
def test_tiny_kl_max_stops_at_the_first_step(make_run):
    run = RunDir(make_run("env_update.learning_rate=0.01", "env_update.batch_size=1", "env_update.kl_max=0.0"))
    env_pool(run, 1, [1.0, 0.8, 0.9], [True, True, True])
    result = update_env.run(run, run.load_config(), 1)
    steps = read_parquet(run.epoch_dir(1) / "env_update_steps.parquet", "env_update_steps")
    assert steps["applied"].to_list() == [True, False]
    assert steps["stopped_by_kl"].to_list() == [False, True]
    assert steps["kl"][1] > 0.0
    m = result.manifest["metrics"]
    assert m["kl_stopped"] is True and m["stopped_at_step"] == 2 and result.manifest["counts"]["steps"] == 1


def test_frozen_mode_never_trains_the_environment(make_run):
    run = RunDir(make_run("env.mode=frozen"))
    result = update_env.run(run, run.load_config(), 1)
    assert result.manifest["counts"]["skipped"].startswith("env.mode = frozen")
    assert not (run.epoch_dir(1) / "env").exists()
    from genenv_cli.machinery.checkpoints import env_model_for

    assert env_model_for(run, run.load_config(), 2, "generate-tasks")[1] == run.load_config().env.model


def test_frozen_agent_is_never_trained(make_run):
    """agent.mode = frozen: update-agent completes with nothing to do (no scored pool needed), every epoch's rollouts
    use the base agent, and `evaluate` without --epoch evaluates it without looking for a checkpoint."""
    from genenv_cli.machinery.checkpoints import agent_model_for, latest_agent

    run = RunDir(make_run("agent.mode=frozen"))
    cfg = run.load_config()
    result = update_agent.run(run, cfg, 1)
    assert result.manifest["counts"]["skipped"].startswith("agent.mode = frozen")
    assert not (run.epoch_dir(1) / "agent").exists()
    assert agent_model_for(run, cfg, 3, "rollout")[:2] == (cfg.agent.model, cfg.agent.model)
    assert latest_agent(run, cfg) == (cfg.agent.model, cfg.agent.model)


@pytest.mark.slow
def test_update_agent_is_reproducible(make_run, tiny_model):
    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=4"))
    agent_pool(run, tiny_model, 1, REWARDS)
    first = update_agent.run(run, run.load_config(), 1).manifest["metrics"]["parameter_digest"]
    torch.rand(1000)  # disturb the global random state: a fresh adapter must not depend on it
    again = update_agent.run(run, run.load_config(), 1, force=True).manifest["metrics"]["parameter_digest"]
    assert first == again
