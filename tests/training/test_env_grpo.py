"""The environment's learning from every generation: generate-tasks records each one, score gives each its own reward,
and update-env's `grpo` (the agent's GRPO loss on the environment's tokens) and `rwr-task` train on them."""

import json
import math

import polars as pl
import pytest
import torch

from genenv_cli.catalogue.settings import CurriculumConfig
from genenv_cli.core.curriculum import normalized_weights
from genenv_cli.core.errors import InputError
from genenv_cli.machinery.models import load_model, load_tokenizer, resolve
from genenv_cli.machinery.training.logits import pad_pairs, token_logps
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_jsonl, read_parquet
from genenv_cli.stages import generate_tasks, update_agent, update_env
from genenv_cli.stages.score import generation_rewards
from genenv_cli.stages.score_metrics import generation_metrics
from stagekit import env_pool, gen_pool, gen_rows


def _gens(rows: list[tuple[str, str | None, str | None]]) -> pl.DataFrame:
    """env_generations rows (batch, task_id, reason), the token columns left out (generation_rewards keeps them)."""
    return pl.DataFrame({
        "generation_id": [f"{b}/g{i}" for i, (b, _, _) in enumerate(rows)], "batch_id": [b for b, _, _ in rows],
        "domain": ["arith"] * len(rows), "parent_id": [None] * len(rows), "round": [1] * len(rows),
        "prompt": ["[]"] * len(rows), "prompt_token_ids": [[1, 2]] * len(rows), "output": ["x"] * len(rows),
        "completion_token_ids": [[3]] * len(rows), "logprobs": [[-0.5]] * len(rows),
        "finish_reason": ["stop"] * len(rows), "temperature": [0.7] * len(rows), "top_p": [0.95] * len(rows),
        "env_model": ["base"] * len(rows), "task_id": [t for _, t, _ in rows], "reason": [r for _, _, r in rows]},
        schema_overrides={"parent_id": pl.String, "task_id": pl.String, "reason": pl.String})


def test_each_generation_gets_its_own_tasks_reward():
    gens = _gens([("b0", "t0", None), ("b0", "t1", None), ("b0", None, "parse: no EXERCISE: line"),
                  ("b0", None, "surplus: the epoch's tasks were already written"), ("b1", "t2", None),
                  ("b1", "t3", None), ("b2", None, "duplicate of ar-1")])
    stats = pl.DataFrame({"task_id": ["t0", "t1", "t2", "t3"], "p_task": [0.5, 0.0, 0.25, 0.25]})
    c = CurriculumConfig(alpha=0.5, beta=2.0, invalid_reward=-0.25)
    out = generation_rewards(gens, stats, 3, c)
    r = out["reward"].to_list()
    assert r[:2] == pytest.approx([1.0, math.exp(-2 * 0.25)])       # exp(-beta (p_task - alpha)^2), per task
    assert r[2] == -0.25 and r[3] is None                            # invalid: the penalty; surplus: no reward
    assert r[4:6] == pytest.approx([math.exp(-2 * 0.0625)] * 2) and r[6] == -0.25
    assert out["valid"].to_list() == [True, True, False, False, True, True, False]
    assert out["epoch"].unique().to_list() == [3]
    m = generation_metrics(out)
    # b0 and b1 have two rewards or more (b2 has one); b1's are equal
    assert m["env_groups"] == 2 and m["env_groups_informative_share"] == 0.5
    assert m["env_reward_valid"] == pytest.approx((1.0 + math.exp(-0.5) + 2 * math.exp(-0.125)) / 4, abs=1e-4)
    assert m["env_reward_invalid"] == -0.25


def test_a_generation_naming_an_unknown_task_is_refused():
    gens = _gens([("b0", "t9", None)])
    with pytest.raises(InputError, match="t9.*not in tasks.jsonl"):
        generation_rewards(gens, pl.DataFrame({"task_id": ["t0"], "p_task": [0.5]}), 1, CurriculumConfig())


@pytest.mark.slow
def test_generate_tasks_records_every_generation(tmp_path, arith_model):
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from tiny import SMALL

    root = tmp_path / "run"
    root.mkdir()
    data = apply_overrides({"run": {"domain": "arith"}, "agent": {"model": str(arith_model)},
                            "env": {"model": str(arith_model)}},
                           [*SMALL, "generate.tasks_per_epoch=7", "generate.variations=3", "generate.max_rounds=2"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    run = RunDir(root)
    result = generate_tasks.run(run, run.load_config(), 1)
    gens = read_parquet(run.file("env_generations", 1), "env_generations")
    tasks = read_jsonl(run.file("tasks", 1), "tasks")
    rejects = read_jsonl(run.file("rejects", 1), "rejects")
    assert gens.height == result.manifest["counts"]["generations"]
    env_ids = sorted(t["task_id"] for t in tasks if t["source"] == "env")
    assert sorted(gens["task_id"].drop_nulls().to_list()) == env_ids
    by_task = {t["task_id"]: t for t in tasks}
    for g in gens.filter(pl.col("task_id").is_not_null()).iter_rows(named=True):
        assert by_task[g["task_id"]]["env_output"] == g["output"] and by_task[g["task_id"]]["batch_id"] == g["batch_id"]
        assert json.loads(g["prompt"]) == by_task[g["task_id"]]["env_prompt"]
    # every rejected generation is one with a reason, the surplus ones (valid, no room) besides
    assert sorted(r["reason"] for r in rejects) == sorted(
        gens.filter(pl.col("task_id").is_null() & ~pl.col("reason").str.starts_with("surplus: the epoch"))["reason"])
    assert all(len(ids) == len(lp) > 0 for ids, lp in zip(gens["completion_token_ids"], gens["logprobs"], strict=True))
    assert gens.group_by("batch_id").agg(pl.col("generation_id").n_unique() == pl.len())["generation_id"].all()


def _same_update_settings(lr: float = 5e-3) -> list[str]:
    # one micro-batch of every row per step (two passes: two steps): the agent's update orders its rows at random
    # and the environment's group by group, which then puts the same rows in every step
    return [f"agent_update.learning_rate={lr}", f"env_update.learning_rate={lr}", "agent_update.batch_size=8",
            "env_update.batch_size=8", "agent_update.kl_coef=0.1", "env_update.kl_coef=0.1", "env_update.kl_max=100",
            "agent_update.passes=2", "env_update.passes=2", "env_update.algo=grpo"]


@pytest.mark.slow
def test_the_environments_grpo_loss_is_the_agents(make_run, tiny_model):
    """One loss, two callers: the same tokens, rewards and groups as an agent pool (update-agent) and as the
    environment's generations (update-env, grpo) give the same loss at every step and the same trained weights."""
    run = RunDir(make_run(*_same_update_settings()))
    rewards = {"b0": [1.0, 0.0, 0.6, 0.0], "b1": [0.9, 0.9, 0.7, 0.0]}
    rows = gen_rows(tiny_model, 1, rewards)
    agent_rows = [{"epoch": 1, "rollout_id": r["generation_id"], "task_id": r["batch_id"], "group_id": r["batch_id"],
                   "sample_index": int(r["generation_id"][-1]), "source": "env", "domain": "arith",
                   "prompt_token_ids": r["prompt_token_ids"], "completion_token_ids": r["completion_token_ids"],
                   "logprobs": r["logprobs"], "reward": r["reward"], "success": False, "valid": True,
                   "finish_reason": r["finish_reason"], "temperature": 1.0, "model": r["env_model"]} for r in rows]
    gen_pool(run, 1, rows, agent_rows)
    cfg = run.load_config()
    update_agent.run(run, cfg, 1)
    env = update_env.run(run, cfg, 1)
    a_steps = read_parquet(run.file("agent_update_steps", 1), "agent_update_steps")
    e_steps = read_parquet(run.file("env_update_steps", 1), "env_update_steps")
    assert e_steps.height == a_steps.height == 2 and e_steps["applied"].all()
    assert e_steps["loss"].to_list() == pytest.approx(a_steps["loss"].to_list(), rel=1e-6, abs=1e-7)
    assert e_steps["policy_loss"].to_list() == pytest.approx(a_steps["policy_loss"].to_list(), rel=1e-6, abs=1e-7)
    assert e_steps["kl"].to_list() == pytest.approx(a_steps["kl"].to_list(), rel=1e-5, abs=1e-9)
    # the same weights (to float rounding: the two orders sum a micro-batch's rows in another order)
    from safetensors.torch import load_file

    a_w = load_file(run.checkpoint_dir(1, "agent") / "adapter_model.safetensors")
    e_w = load_file(run.checkpoint_dir(1, "env") / "adapter_model.safetensors")
    assert a_w.keys() == e_w.keys() and a_w
    moved = 0.0
    for k in a_w:
        assert torch.allclose(a_w[k], e_w[k], atol=1e-6, rtol=1e-4), k
        moved = max(moved, float((a_w[k].abs()).max()))
    assert moved > 0.0
    rec = read_parquet(run.file("env_update", 1), "env_update").sort("generation_id")
    adv = read_parquet(run.file("agent_update", 1), "agent_update").sort("rollout_id")
    assert rec["advantage"].to_list() == pytest.approx(adv["advantage"].to_list())
    assert rec["logp_abs_diff"].drop_nulls().len() == 8
    assert env.manifest["counts"]["groups_used"] == 2


def _mean_logps(model_dir: str, rows: list[dict]) -> list[float]:
    model = load_model(resolve(model_dir), device="cpu", dtype="float32")
    ids, attn, cmask = pad_pairs([r["prompt_token_ids"] for r in rows], [r["completion_token_ids"] for r in rows],
                                 load_tokenizer(resolve(model_dir)).pad_token_id)
    with torch.no_grad():
        lp = token_logps(model, ids, attn, cmask.shape[1])
    return ((lp * cmask).sum(-1) / cmask.sum(-1)).tolist()


@pytest.mark.slow
def test_grpo_pushes_down_a_generation_that_became_no_task(make_run, tiny_model):
    """A batch of four generations, three valid (rewards near 1) and one that became no task (0): after the update
    the invalid one's per-token logprob has fallen against its siblings'."""
    run = RunDir(make_run("env_update.learning_rate=0.02", "env_update.batch_size=4", "env_update.passes=4",
                          "env_update.kl_max=100", "env_update.algo=grpo"))
    rows = gen_rows(tiny_model, 1, {"b0": [1.0, 0.95, 0.0, 0.9]})
    gen_pool(run, 1, rows)
    update_env.run(run, run.load_config(), 1)
    before = _mean_logps(str(tiny_model), rows)
    after = _mean_logps(str(run.checkpoint_dir(1, "env")), rows)
    moved = [a - b for a, b in zip(after, before, strict=True)]
    siblings = (moved[0] + moved[1] + moved[3]) / 3
    assert moved[2] < 0 < siblings
    assert moved[2] < siblings - 0.05


@pytest.mark.slow
def test_grpo_kl_max_stops_the_update(make_run, tiny_model):
    run = RunDir(make_run("env_update.learning_rate=0.02", "env_update.batch_size=2", "env_update.kl_max=1e-9",
                          "env_update.algo=grpo"))
    gen_pool(run, 1, gen_rows(tiny_model, 1, {"b0": [1.0, 0.0, 0.5, 0.0]}))
    result = update_env.run(run, run.load_config(), 1)
    steps = read_parquet(run.file("env_update_steps", 1), "env_update_steps")
    # step 1 starts at the initial model (a fresh adapter: KL 0); the step after it has moved is refused
    assert steps["applied"].to_list() == [True, False] and steps["stopped_by_kl"].to_list() == [False, True]
    assert steps["kl"][0] == pytest.approx(0.0, abs=1e-7) and steps["kl"][1] > 1e-9
    assert result.manifest["metrics"]["kl_stopped"] is True and result.manifest["metrics"]["stopped_at_step"] == 2


@pytest.mark.slow
def test_grpo_skips_what_carries_no_signal(make_run, tiny_model):
    run = RunDir(make_run("env_update.algo=grpo", "env_update.kl_max=100"))
    gen_pool(run, 1, gen_rows(tiny_model, 1, {"b0": [0.0, 0.0, 0.0], "b1": [1.0, None, 0.0], "b2": [0.5, 0.5, None],
                                              "b3": [0.7, None, None]}))
    result = update_env.run(run, run.load_config(), 1)
    rec = read_parquet(run.file("env_update", 1), "env_update").sort("generation_id")
    assert rec["skip_reason"].to_list() == ["all-equal group"] * 3 + [None, "no reward", None] + \
        ["all-equal group", "all-equal group", "no reward"] + ["singleton group", "no reward", "no reward"]
    assert result.manifest["counts"]["samples_used"] == 2 and result.manifest["counts"]["groups_used"] == 1


@pytest.mark.slow
def test_rwr_task_weights_every_valid_generation_by_its_own_reward(make_run, tiny_model):
    run = RunDir(make_run("env_update.algo=rwr-task", "env_update.kl_max=100", "curriculum.lam=10"))
    rewards = {"b0": [1.0, 0.0, 0.61, None], "b1": [0.88, 0.0, 0.0, 0.95]}
    gen_pool(run, 1, gen_rows(tiny_model, 1, rewards))
    update_env.run(run, run.load_config(), 1)
    rec = read_parquet(run.file("env_update", 1), "env_update").sort("generation_id")
    used = rec.filter(pl.col("used"))
    expected = normalized_weights([1.0, 0.61, 0.88, 0.95], lam=10.0)
    assert used["weight"].to_list() == pytest.approx(expected)
    assert used["weight_rel"].to_list() == pytest.approx([w * 4 for w in expected])
    assert rec.filter(~pl.col("used"))["skip_reason"].to_list() == ["not valid"] * 4


def test_grpo_on_an_epoch_scored_before_the_generations_were_recorded_is_refused(make_run):
    run = RunDir(make_run("env_update.algo=grpo"))
    env_pool(run, 1, [1.0, 0.5], [True, True])  # score's outputs as an earlier genenv wrote them: no env_gen
    with pytest.raises(InputError, match=r"epoch 1 does not have.*generate-tasks --epoch 1 --force.*algo = \"rwr\""):
        update_env.run(run, run.load_config(), 1)
