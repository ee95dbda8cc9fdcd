"""A hand-made epoch for score: five tool_call tasks in two batches and a seed, K = 4 rollouts each with known
successes (tests/stages/test_score.py checks every number by hand; the watchdog's tests reuse it)."""

import pytest

from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import frame, write_parquet
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
