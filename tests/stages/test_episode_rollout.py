"""The rollout stage plays a multi-turn domain's tasks as episodes and records every turn; score takes the
environment's reward; update-agent trains on the agent's tokens. A single-turn domain's files keep exactly their
columns (and, on the 2-core machine, their bytes: dev/LOG.md)."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch
from test_epochs import sums_tasks

from episode_domains import NAME, register
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_parquet, write_parquet
from genenv_cli.stages import generate_tasks, rollout, score, update_agent
from hostile import vouch
from stagekit import complete_as, jsonl

# the columns single-turn runs have always written (and still do)
ROLLOUTS = ["rollout_id", "task_id", "batch_id", "domain", "sample_index", "prompt_token_ids", "completion",
            "completion_token_ids", "logprobs", "finish_reason", "model", "temperature", "top_p", "seed"]
SCORES = ["rollout_id", "task_id", "batch_id", "sample_index", "source", "domain", "shape", "reward", "partial",
          "success", "valid", "error", "completion_tokens", "finish_reason"]
AGENT_TRAIN = ["epoch", "rollout_id", "task_id", "group_id", "sample_index", "source", "domain", "prompt_token_ids",
               "completion_token_ids", "logprobs", "reward", "success", "valid", "finish_reason", "temperature", "model"]


def _run(make_run, domain: str) -> RunDir:
    run = RunDir(make_run("rollout.group_size=3", "rollout.max_new_tokens=5", "rollout.temperature=1.0",
                          "agent_update.batch_size=6", domain=domain))
    tasks = [{**t, "domain": domain} for t in sums_tasks(1)[:4]]
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(tasks), "rejects": ""})
    return run


@pytest.fixture
def three_turns():
    register()
    yield
    from genenv_cli.catalogue.domains import DOMAINS

    DOMAINS.unregister(NAME)


def test_episodes_are_recorded_turn_by_turn_and_trained_on_the_agents_tokens(make_run, three_turns):
    run = _run(make_run, NAME)
    cfg = run.load_config()
    rollout.run(run, cfg, 1)
    roll = read_parquet(run.epoch_dir(1) / "rollouts.parquet", "rollouts")
    assert roll.height == 12 and roll["turns"].to_list() == [3] * 12 and set(roll["end"]) == {"done"}
    for r in roll.iter_rows(named=True):
        mask = r["agent_mask"]
        assert len(mask) == len(r["completion_token_ids"]) == len(r["logprobs"]) and sum(mask) == 15
        assert all(lp == 0.0 for lp, m in zip(r["logprobs"], mask, strict=True) if not m)
        assert json.loads(r["observations"]) == ["calc(1 + 1) = 2", "calc(1 + 2) = 3"]
        assert "calc(1 + 2) = 3" in r["completion"] and len(json.loads(r["actions"])) == 3
    # shard-independent per episode: two shards draw what one process draws
    parts = []
    for i in (1, 2):
        rollout.run(run, cfg, 1, shard=(i, 2))
        parts.append(read_parquet(run.epoch_dir(1) / f"rollouts.shard-{i}-of-2.parquet", "rollouts"))
    sharded = pl.concat(parts).sort("rollout_id")
    whole = roll.sort("rollout_id")
    for col in ("completion_token_ids", "agent_mask", "actions", "reward", "seed"):
        assert sharded[col].to_list() == whole[col].to_list(), col
    for a, b in zip(sharded["logprobs"].to_list(), whole["logprobs"].to_list(), strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-4)
    for i in (1, 2):  # score merges either set; keep the unsharded one
        (run.epoch_dir(1) / f"rollouts.shard-{i}-of-2.parquet").unlink()
        run.manifest_path(1, f"rollout.shard-{i}-of-2").unlink()

    score.run(run, cfg, 1)
    scores = read_parquet(run.epoch_dir(1) / "scores.parquet", "scores").sort("rollout_id")
    assert scores["reward"].to_list() == whole["reward"].to_list()      # the environment's reward, not regraded
    assert scores["turns"].to_list() == [3] * 12
    pool = read_parquet(run.pool_partition("agent_train", 1), "agent_train").sort("rollout_id")
    assert pool["agent_mask"].to_list() == whole["agent_mask"].to_list()
    metrics = json.loads(run.manifest_path(1, "score").read_text())["metrics"]
    assert metrics["episode_turns_mean"] == 3.0 and metrics["episode_ends"] == {"done": 12}

    # rewards by hand so that groups differ (a random tiny model rarely answers right), then GRPO on them
    path = run.pool_partition("agent_train", 1)
    write_parquet(read_parquet(path, "agent_train").with_columns(pl.Series("reward", [float(i % 2) for i in range(12)])),
                  path, "agent_train")
    vouch(run.root, run.rel(path))      # as if score had written these rewards: an edited pool is refused
    update_agent.run(run, cfg, 1, force=True)
    used = read_parquet(run.epoch_dir(1) / "agent_update.parquet", "agent_update").filter(pl.col("used"))
    assert used.height == 12
    assert used["logp_abs_diff"].max() < 1e-4       # recomputed over the whole episode, compared on the agent's tokens


def test_a_single_turn_domain_writes_the_files_it_always_wrote(make_run):
    run = _run(make_run, "arith")
    cfg = run.load_config()
    rollout.run(run, cfg, 1)
    score.run(run, cfg, 1)
    assert pl.read_parquet(run.epoch_dir(1) / "rollouts.parquet").columns == ROLLOUTS
    assert pl.read_parquet(run.epoch_dir(1) / "scores.parquet").columns == SCORES
    assert pl.read_parquet(run.pool_partition("agent_train", 1)).columns == AGENT_TRAIN
    counts = json.loads(run.manifest_path(1, "rollout").read_text())["counts"]
    assert set(counts) == {"tasks", "rollouts", "completion_tokens", "truncated"}
    metrics = json.loads(run.manifest_path(1, "score").read_text())["metrics"]
    assert not any(k.startswith("episode") for k in metrics)


def test_an_episode_that_outgrows_the_context_ends_and_says_why(tiny_model, three_turns):
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    domain = get_domain(NAME)
    engine = HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32")
    task = {"domain": NAME, "payload": {"expression": "1 + 1", "answer": 2}}
    first = len(engine.prompt_ids(domain.agent_messages(task["payload"])))
    engine.context_limit = lambda: first + 5 + 3   # the first turn fits, the second prompt does not
    (row,) = play_tasks(engine, {NAME: domain}, [task], SamplingParams(max_new_tokens=5, n=1, seed=3), [0])[0]
    assert (row["turns"], row["end"], row["reward"], row["valid"]) == (1, "context_overflow", 0.0, False)
    assert row["error"].startswith("context overflow before step 2: the prompt (")
    assert sum(row["agent_mask"]) == 5 and 0 in row["agent_mask"]  # the observation was added before the check
