"""Shared by the speed benchmarks: result files, timing helpers and synthetic run directories."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

# one folder per benchmark script: results/<script>/<name>.json (GENENV_BENCH_RESULTS: somewhere else, e.g. a test)
RESULTS = Path(os.environ.get("GENENV_BENCH_RESULTS", Path(__file__).parent / "results"))


def write_result(bench: str, name: str, figures: dict[str, Any], **extra: Any) -> Path:
    """Record `figures` as results/<bench>/<name>.json (`bench`: the script; `name`: it, or it and a variant)."""
    folder = RESULTS / bench
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    record = {"benchmark": name, "date": time.strftime("%Y-%m-%d"), "commit": git_commit(), "machine": machine(),
              "versions": versions(), **extra, "figures": figures}
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return path


def left_padded(rows: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    """(input_ids, attention_mask) of token-id rows left-padded to the longest, as a batched generate wants."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, width - len(r):], mask[i, width - len(r):] = torch.tensor(r, dtype=torch.long), 1
    return ids, mask


def timed_command(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> list[float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t)
    return times


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def genenv_cmd() -> list[str]:
    """The installed console script when it is on PATH (what users run), else `python -m genenv_cli`."""
    exe = Path(sys.executable).with_name("genenv")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "genenv_cli"]


# ---------------------------------------------------------------- synthetic runs

def _call(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def synthetic_completions(payload: dict[str, Any], rng: random.Random) -> list[str]:
    """A plausible mix for one task: right answers, near misses, prose and broken JSON."""
    calls = payload["calls"]
    right = "\n".join(_call(c["name"], c["arguments"]) for c in calls) or "No tool can do that, sorry."
    if calls:
        c = calls[0]
        args = dict(c["arguments"])
        key = next(iter(args))
        args[key] = str(args[key]) + "x" if isinstance(args[key], str) else 0
        wrong = _call(c["name"], args)
        broken = right[: len(right) // 2]
    else:
        wrong = _call("get_weather", {"city": "Paris"})
        broken = "<tool_call>{\"name\": "
    return [right, right, wrong, broken, "I think the answer is " + str(rng.randint(0, 99))]


def write_epoch_files(root: Path, epoch: int, n_tasks: int, k: int, rng: random.Random) -> None:
    """tasks.jsonl and rollouts.parquet of a tool_call epoch: K rollouts per task, each completion drawn from
    five per task, 24 prompt tokens and 16-40 completion tokens (random ids and logprobs, built vectorised)."""
    import numpy as np
    import polars as pl

    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.rundir.datafiles import write_parquet

    seeds = get_domain("tool_call").seeds("train")
    e = root / "epochs" / f"{epoch:04d}"
    e.mkdir(parents=True, exist_ok=True)
    task_ids, batch_ids, completions = [], [], []
    with open(e / "tasks.jsonl", "w") as ft:
        for t in range(n_tasks):
            seed = seeds[t % len(seeds)]
            tid = f"e{epoch:04d}-b{t // 4:06d}-v{t % 4}"
            bid = f"e{epoch:04d}-b{t // 4:06d}"
            ft.write(json.dumps({
                "task_id": tid, "epoch": epoch, "batch_id": bid, "source": "env" if t % 4 else "seed",
                "domain": "tool_call", "shape": seed.shape, "payload": seed.payload, "parent_id": seed.id,
                "context": {"parent_id": seed.id}, "env_prompt": [{"role": "user", "content": "write a task"}],
                "env_output": "REQUEST: ...", "env_model": "embedded"}) + "\n")
            options = synthetic_completions(seed.payload, rng)
            for _ in range(k):
                task_ids.append(tid)
                batch_ids.append(bid)
                completions.append(options[rng.randrange(len(options))])
    n = len(task_ids)
    gen = np.random.default_rng(rng.randrange(2**32))
    prompts = gen.integers(0, 49152, size=(n_tasks, 24))
    lengths = gen.integers(16, 41, size=n)
    df = pl.DataFrame({
        "rollout_id": [f"{t}/s{i % k}" for i, t in enumerate(task_ids)], "task_id": task_ids, "batch_id": batch_ids,
        "sample_index": np.arange(n) % k,
        "prompt_token_ids": pl.Series(np.repeat(prompts, k, axis=0)).cast(pl.List(pl.Int64)),
        "completion": completions,
        "completion_token_ids": pl.Series(gen.integers(0, 49152, size=(n, 40))).cast(pl.List(pl.Int64)),
        "logprobs": pl.Series(-gen.random((n, 40)) * 3).cast(pl.List(pl.Float64)),
        "_n": lengths, "finish_reason": "stop", "model": "embedded", "temperature": 1.0, "top_p": 1.0, "seed": 0,
    }).with_columns(pl.col("completion_token_ids").list.head(pl.col("_n")), pl.col("logprobs").list.head(pl.col("_n")),
                    pl.col("sample_index").cast(pl.Int64), pl.col("seed").cast(pl.Int64)).drop("_n")
    write_parquet(df, e / "rollouts.parquet", "rollouts")


def complete_stage(run: Any, module: Any, epoch: int, writers: dict[str, Any]) -> None:
    """Mark a stage of `epoch` done on its real plan, with outputs written by `writers` ({output: fn(path)} or
    an existing file to copy)."""
    import shutil

    from genenv_cli.rundir.contract import execute

    cfg = run.load_config()

    def body(out):
        for name, w in writers.items():
            if callable(w):
                w(out.path(name))
            else:
                shutil.copy(w, out.path(name))

    plan = module.plan(run, cfg, epoch)
    execute(run, cfg, plan.stage, epoch, lambda: plan, body, force=True)


def synthetic_run(root: Path, epochs: int, n_tasks: int, k: int, *, train_stages: bool = True, seed: int = 0) -> Any:
    """A run directory with `epochs` complete epochs of tool_call data (scored for real; training stages marked
    done with placeholder checkpoints when `train_stages`)."""
    from genenv_cli.catalogue.config import Config, render_config
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks, rollout, score, update_agent, update_env

    root.mkdir(parents=True, exist_ok=True)
    (root / "genenv.toml").write_text(render_config(Config()))
    run = RunDir(root)
    rng = random.Random(seed)
    cfg = run.load_config()

    def placeholder(kind: str):
        def write(path: Path) -> None:
            path.mkdir(parents=True)
            (path / "genenv_checkpoint.json").write_text(json.dumps({"kind": "lora", "base": "embedded", "role": kind}))
        return write

    def empty_parquet(key: str):
        from genenv_cli.rundir.datafiles import frame, write_parquet

        return lambda path: write_parquet(frame([], key), path, key)

    for epoch in range(1, epochs + 1):
        staging = root / ".synthetic"
        staging.mkdir(exist_ok=True)
        write_epoch_files(staging, epoch, n_tasks, k, rng)
        e = staging / "epochs" / f"{epoch:04d}"
        complete_stage(run, generate_tasks, epoch, {"tasks": e / "tasks.jsonl", "rejects": lambda p: p.write_text("")})
        complete_stage(run, rollout, epoch, {"rollouts": e / "rollouts.parquet"})
        score.run(run, cfg, epoch)
        if train_stages:
            complete_stage(run, update_agent, epoch, {
                "agent": placeholder("agent"), "agent_update": empty_parquet("agent_update"),
                "agent_update_steps": empty_parquet("agent_update_steps")})
            complete_stage(run, update_env, epoch, {
                "env": placeholder("env"), "env_update": empty_parquet("env_update"),
                "env_update_steps": empty_parquet("env_update_steps")})
        import shutil

        shutil.rmtree(staging)
    return run


def fixed_turns_calc(turns: int) -> Any:
    """The `calc` domain with episodes of exactly `turns` turns: every turn but the last gets the calculator's result
    of the exercise, the last is graded. The episode benchmarks use it so that each episode's length, and so the
    work measured, does not depend on what the model writes."""
    from genenv_cli.domains.base import Environment, Step
    from genenv_cli.domains.calc import CalcDomain, calculate

    class FixedTurns(Environment):
        def first_messages(self):
            return self.domain.agent_messages(self.payload)

        def step(self, action):
            self.turn = getattr(self, "turn", 0) + 1
            if self.turn < turns:
                return Step(calculate(self.payload["expression"]), False)
            verdict = self.domain.score(self.payload, action)
            return Step(None, True, verdict.reward, verdict)

    class FixedTurnsCalc(CalcDomain):
        name = "calc"
        max_turns = turns

        def environment(self, payload):
            return FixedTurns(self, payload)

    return FixedTurnsCalc
