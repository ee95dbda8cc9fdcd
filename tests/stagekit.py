"""Writing a stage's inputs by hand, with genuine manifests, so later stages can be tested on exact data."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, execute
from genenv_cli.rundir.datafiles import frame, write_parquet


def fake_stage(run: RunDir, epoch: int, stage: str, files: dict[str, tuple[Path, Any]]) -> None:
    """Complete `stage` of `epoch` by writing `files` ({output name: (final path, text or writer(path))}) under
    the contract."""
    cfg = run.load_config()
    plan = StagePlan(stage, epoch, outputs={name: path for name, (path, _) in files.items()})

    def body(out):
        for name, (_, content) in files.items():
            if callable(content):
                content(out.path(name))
            else:
                out.path(name).write_text(content)

    execute(run, cfg, stage, epoch, lambda: plan, body, force=True)


def complete_as(run: RunDir, module: Any, epoch: int, contents: dict[str, Any]) -> None:
    """Complete a real stage's plan (same inputs, values, config digest) with outputs written by hand, so the
    stage counts as done for `genenv run` and `status`."""
    cfg = run.load_config()
    plan = module.plan(run, cfg, epoch)

    def body(out):
        for name, content in contents.items():
            if callable(content):
                content(out.path(name))
            else:
                out.path(name).write_text(content)

    execute(run, cfg, plan.stage, epoch, lambda: plan, body, force=True)


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def agent_pool(run: RunDir, model_dir, epoch: int, rewards: dict[str, list[float]], dtype: str = "auto",
               max_new_tokens: int = 6) -> None:
    """A pool partition whose completions were really sampled from the model (so the stored logprobs are the
    behaviour policy's, computed in `dtype`), with rewards given by hand."""
    engine = HFEngine(resolve(str(model_dir)), batch_size=16, dtype=dtype)
    convs = [[{"role": "user", "content": f"Compute {i} + {i}"}] for i in range(len(rewards))]
    k = len(next(iter(rewards.values())))
    outs = engine.generate(convs, SamplingParams(max_new_tokens=max_new_tokens, n=k, seed=epoch))
    rows = []
    for (gid, rs), gens in zip(rewards.items(), outs, strict=True):
        for s, (r, gen) in enumerate(zip(rs, gens, strict=True)):
            rows.append({"epoch": epoch, "rollout_id": f"{gid}/s{s}", "task_id": gid, "group_id": gid,
                         "sample_index": s, "source": "seed", "prompt_token_ids": gen.prompt_token_ids,
                         "completion_token_ids": gen.token_ids, "logprobs": gen.logprobs, "reward": r,
                         "success": r == 1.0, "valid": True, "finish_reason": gen.finish_reason, "temperature": 1.0,
                         "model": str(model_dir)})
    fake_stage(run, epoch, "score", {"agent_train": (run.pool_partition("agent_train", epoch),
                                                     lambda p: write_parquet(frame(rows, "agent_train"), p, "agent_train"))})


def env_pool(run: RunDir, epoch: int, r_envs: list[float], kept: list[bool]) -> None:
    rows = []
    for i, (r, k) in enumerate(zip(r_envs, kept, strict=True)):
        prompt = [{"role": "system", "content": "Write an exercise."}, {"role": "user", "content": f"Example: {i} + 1"}]
        rows.append({"epoch": epoch, "task_id": f"e{epoch}-t{i}", "batch_id": f"e{epoch}-b{i // 2}", "parent_id": "p",
                     "prompt": json.dumps(prompt), "output": f"EXERCISE: {i} + {i + 2}", "p_batch": 0.5, "r_env": r,
                     "weight": math.exp(r), "kept": k, "env_model": "base"})
    fake_stage(run, epoch, "score", {"env_sft": (run.pool_partition("env_sft", epoch),
                                                 lambda p: write_parquet(frame(rows, "env_sft"), p, "env_sft"))})


def gen_rows(model_dir, epoch: int, rewards: dict[str, list[float | None]], *, temperature: float = 1.0,
             max_new_tokens: int = 6) -> list[dict[str, Any]]:
    """env_gen rows whose outputs were really sampled from the model (their logprobs are the sampler's), one batch per
    key of `rewards` with its generations' rewards by hand (0.0: became no task; None: surplus)."""
    engine = HFEngine(resolve(str(model_dir)), batch_size=16)
    convs = [[{"role": "system", "content": "Write an exercise."}, {"role": "user", "content": f"Vary: {i} + 1"}]
             for i in range(len(rewards))]
    k = len(next(iter(rewards.values())))
    outs = engine.generate(convs, SamplingParams(max_new_tokens=max_new_tokens, n=k, seed=epoch,
                                                 temperature=temperature))
    rows = []
    for (batch, rs), gens, conv in zip(rewards.items(), outs, convs, strict=True):
        for g, (r, gen) in enumerate(zip(rs, gens, strict=True)):
            valid = r is not None and r > 0.0
            rows.append({"epoch": epoch, "generation_id": f"{batch}/g{g}", "batch_id": batch, "domain": "arith",
                         "task_id": f"{batch}-v{g}" if valid else None, "valid": valid,
                         "reason": None if valid else ("surplus: the epoch's tasks were already written" if r is None
                                                       else "parse: no EXERCISE: line"),
                         "p_task": 0.5 if valid else None, "reward": r, "prompt": json.dumps(conv),
                         "output": gen.text, "prompt_token_ids": gen.prompt_token_ids,
                         "completion_token_ids": gen.token_ids, "logprobs": gen.logprobs,
                         "finish_reason": gen.finish_reason, "temperature": temperature, "env_model": str(model_dir)})
    return rows


def gen_pool(run: RunDir, epoch: int, rows: list[dict[str, Any]], agent_rows: list[dict[str, Any]] | None = None) -> None:
    """Complete `score` of `epoch` with this env_gen partition (and, given, this agent_train one)."""
    files = {"env_gen": (run.pool_partition("env_gen", epoch),
                         lambda p: write_parquet(frame(rows, "env_gen"), p, "env_gen"))}
    if agent_rows is not None:
        files["agent_train"] = (run.pool_partition("agent_train", epoch),
                                lambda p: write_parquet(frame(agent_rows, "agent_train"), p, "agent_train"))
    fake_stage(run, epoch, "score", files)


def set_keep_checkpoints(root: Path, n: int, every: int = 0) -> None:
    """Rewrite a run's run.keep_checkpoints and run.keep_checkpoints_every (no stage's config digest reads them)."""
    import re

    path = root / "genenv.toml"
    text = re.sub(r"(?m)^keep_checkpoints = \d+$", f"keep_checkpoints = {n}", path.read_text())
    path.write_text(re.sub(r"(?m)^keep_checkpoints_every = \d+$", f"keep_checkpoints_every = {every}", text))
