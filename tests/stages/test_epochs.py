"""Several epochs: checkpoints flow from epoch N to N+1, `genenv run` resumes after a kill, two processes
train under a launcher, rollout shards merge, and the ablation modes behave."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_jsonl, read_parquet
from genenv_cli.stages import generate_tasks, rollout, score, update_agent, update_env
from paths import ROOT
from stagekit import agent_pool, complete_as, env_pool, fake_stage, jsonl

# several stages and epochs per test, two of them in subprocesses and under a launcher: the slow tier
pytestmark = pytest.mark.slow
runner = CliRunner()


def sums_tasks(epoch: int) -> list[dict]:
    out = []
    for i, (a, b) in enumerate([(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (3, 1)]):
        tid = f"e{epoch:04d}-seed-s{i}"
        out.append({"task_id": tid, "epoch": epoch, "batch_id": tid, "source": "seed", "domain": "arith",
                    "shape": "1op-1d", "payload": {"expression": f"{a} + {b}", "answer": a + b}, "parent_id": None,
                    "context": None, "env_prompt": None, "env_output": None, "env_model": None})
    return out


def arith_run(tmp_path, model, *extra) -> RunDir:
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config

    root = tmp_path / "run"
    root.mkdir()
    sets = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.max_rounds=1",
            "generate.max_new_tokens=12", "rollout.group_size=8", "rollout.max_new_tokens=6",
            "agent_update.learning_rate=0.005", "agent_update.batch_size=8", "env_update.learning_rate=0.005",
            "env_update.kl_max=100", *extra]
    data = apply_overrides({"run": {"domain": "arith"}, "agent": {"model": str(model)}, "env": {"model": str(model)}}, sets)
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    run = RunDir(root)
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(sums_tasks(1)), "rejects": ""})
    return run


def test_next_epoch_loads_the_new_checkpoints(make_run, tiny_model):
    run = RunDir(make_run("agent_update.learning_rate=0.01", "env_update.learning_rate=0.01", "env_update.kl_max=100"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0]})
    env_pool(run, 1, [1.0, 0.9], [True, True])
    cfg = run.load_config()
    update_agent.run(run, cfg, 1)
    update_env.run(run, cfg, 1)
    # epoch 2 is planned on epoch 1's checkpoints
    assert rollout.plan(run, cfg, 2).values["agent_model"] == "epochs/0001/agent"
    assert generate_tasks.plan(run, cfg, 2).values["env_model"] == "epochs/0001/env"
    # and really loads them: the records name the checkpoint, and generation runs on it
    e2 = run.epoch_dir(2)
    fake_stage(run, 2, "generate-tasks", {"tasks": (e2 / "tasks.jsonl", jsonl([
        {**t, "domain": "tool_call", "payload": {"request": "Weather in Lima?", "tools": ["get_weather"],
                                                  "calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]}}
        for t in sums_tasks(2)[:2]])), "rejects": (e2 / "tasks.rejects.jsonl", "")})
    rollout.run(run, cfg, 2)
    assert set(read_parquet(e2 / "rollouts.parquet", "rollouts")["model"]) == {"epochs/0001/agent"}
    # changing epoch 1's agent makes epoch 2's rollout stale
    from genenv_cli.rundir.contract import check_state

    update_agent.run(run, run.load_config(["agent_update.learning_rate=0.02"]), 1)
    assert check_state(run, cfg, rollout.plan(run, cfg, 2)).state == "stale"


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.e2e
@pytest.mark.heavy
def test_two_epoch_run_resumes_after_a_kill_in_update_agent(tmp_path, arith_model):
    run = arith_run(tmp_path, arith_model)
    env = dict(os.environ, GENENV_PROGRESS_INTERVAL="0")
    cmd = [sys.executable, "-m", "genenv_cli", "run", "--epochs", "2", "--run", str(run.root), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lock = run.epoch_dir(1) / ".lock"
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads(lock.read_text() or "{}").get("stage") == "update-agent":
                break
        except (OSError, json.JSONDecodeError):
            pass
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before update-agent could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not run.manifest_path(1, "update-agent").exists()
    assert not (run.epoch_dir(1) / "agent").exists()
    done_before = {s: json.loads(run.manifest_path(1, s).read_text())["finished"] for s in ("rollout", "score")}

    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = _json_lines(out.stdout)
    by = {(d["epoch"], d["stage"]): d for d in lines}
    for stage in ("generate-tasks", "rollout", "score"):
        assert by[(1, stage)]["skipped"] is True
    assert by[(1, "update-agent")]["skipped"] is False
    assert by[(1, "update-agent")]["samples_used"] > 0          # mixed rewards: GRPO had something to learn
    assert all(by[(2, s)]["skipped"] is False for s in ("generate-tasks", "rollout", "score", "update-agent", "update-env"))
    for s, finished in done_before.items():
        assert json.loads(run.manifest_path(1, s).read_text())["finished"] == finished   # not redone
    m2 = json.loads((run.epoch_dir(2) / "metrics.json").read_text())
    assert m2["success_rate"] is not None and m2["agent_train_reward"] is not None
    # every stage ran in a process of its own, not in the run's (whose GPU memory would carry over)
    logs = run.logs_dir()
    run_pids = set(re.findall(r"START run pid=(\d+)", (logs / "run.log").read_text()))
    stage_pids = [pid for stage in ("generate-tasks", "rollout", "score", "update-agent", "update-env")
                  for pid in re.findall(r"START \S+ epoch=\d pid=(\d+)", (logs / f"{stage}.log").read_text())]
    assert len(run_pids) == 2 and len(stage_pids) == 4 + 10      # run 1 killed in its 4th stage; run 2: 2 epochs
    assert len(set(stage_pids)) == len(stage_pids) and not run_pids & set(stage_pids)
    # the run is complete: running it again does nothing
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert all(d["skipped"] for d in _json_lines(again.stdout))


@pytest.mark.e2e
def test_two_processes_under_accelerate_train_and_rank_0_writes(make_run, tiny_model):
    pytest.importorskip("accelerate")
    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=2"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29517",
           "-m", "genenv_cli", "update-agent", "--epoch", "1", "--run", str(run.root)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK"))}
    env["CUDA_VISIBLE_DEVICES"] = ""
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    log = (run.logs_dir() / "update-agent.log").read_text()
    digests = dict(re.findall(r"rank (\d) trainable-parameter digest (\w+)", log))
    assert set(digests) == {"0"}        # rank 0 alone hashes, the gathered weights it writes
    manifest = json.loads(run.manifest_path(1, "update-agent").read_text())
    assert manifest["counts"]["world_size"] == 2
    meta = json.loads((run.epoch_dir(1) / "agent" / "genenv_checkpoint.json").read_text())
    assert meta["parameter_digest"] == digests["0"]


def test_rollout_shards_merge_and_an_incomplete_set_is_refused(tmp_path, arith_model):
    from genenv_cli.core.errors import InputError

    run = arith_run(tmp_path, arith_model)
    cfg = run.load_config()
    rollout.run(run, cfg, 1, shard=(1, 2))
    with pytest.raises(InputError, match=r"rollout shards 2/2 have not completed"):
        score.run(run, cfg, 1)
    rollout.run(run, cfg, 1, shard=(2, 2))
    result = score.run(run, cfg, 1)
    assert result.manifest["counts"]["rollouts"] == 6 * 8
    a = read_parquet(run.epoch_dir(1) / "rollouts.shard-1-of-2.parquet", "rollouts")
    b = read_parquet(run.epoch_dir(1) / "rollouts.shard-2-of-2.parquet", "rollouts")
    assert a.height == b.height == 24 and not set(a["task_id"]) & set(b["task_id"])
    status = json.loads(runner.invoke(app, ["status", "--json", "--run", str(run.root)]).stdout)
    stages = status["epochs"][0]["stages"]
    assert stages["rollout.shard-1-of-2"]["state"] == stages["rollout.shard-2-of-2"]["state"] == "done"


def test_static_mode_reuses_one_variation_set(tmp_path, arith_model, monkeypatch):
    from replay import ReplayEngine, patch_engine

    counter = iter(range(10_000))
    # four-digit operands: no generation can duplicate a seed, so every one is accepted
    patch_engine(monkeypatch, ReplayEngine(lambda conv, k: f"EXERCISE: {1000 + next(counter)} + 1"))
    run = arith_run(tmp_path, arith_model, "env.mode=static", "generate.static_variations=2",
                    "generate.seed_share=0.5")
    cfg = run.load_config()
    generate_tasks.run(run, cfg, 1, force=True)
    static = read_jsonl(run.root / "static" / "tasks.jsonl", "tasks")
    assert len(static) == 2 * len(get_domain("arith").seeds())
    t1 = read_jsonl(run.epoch_dir(1) / "tasks.jsonl", "tasks")
    env1 = [t for t in t1 if t["source"] == "env"]
    assert len(env1) == 3 and all(t["task_id"].startswith("e0001-static-") for t in env1)
    payloads = {json.dumps(t["payload"]) for t in static}
    assert all(json.dumps(t["payload"]) in payloads for t in env1)


@pytest.mark.e2e
@pytest.mark.heavy  # pipelines/epoch.sh's stages as processes, killed and resumed: 100 s on 2 cores
def test_shell_pipeline_runs_an_epoch_and_resumes(tmp_path, arith_model):
    run = arith_run(tmp_path, arith_model)
    script = ROOT / "pipelines" / "coevolve.sh"
    env = dict(os.environ, GENENV=f"{sys.executable} -m genenv_cli")
    first = subprocess.run(["bash", str(script), str(run.root), "1"], capture_output=True, text=True, env=env,
                           timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    for stage in ("generate-tasks", "rollout", "score", "update-agent", "update-env"):
        assert run.manifest_path(1, stage).exists()
    again = subprocess.run(["bash", str(script), str(run.root), "1"], capture_output=True, text=True, env=env,
                           timeout=600)
    assert again.returncode == 0 and again.stdout.count("up to date") == 6  # the five stages and eval-agent
    # --from forces a restart point: that stage and every later one are redone, earlier ones are not
    forced = subprocess.run([sys.executable, "-m", "genenv_cli", "run", "--epochs", "1", "--run", str(run.root),
                             "--from", "update-agent", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert forced.returncode == 0, forced.stderr[-2000:]
    skipped = {d["stage"]: d["skipped"] for d in _json_lines(forced.stdout)}
    assert skipped == {"generate-tasks": True, "rollout": True, "score": True, "update-agent": False,
                       "update-env": False, "eval-agent": False}


def test_run_stops_at_a_failing_stage_with_its_exit_status(make_run, tmp_path):
    """`genenv run` starts each stage as a process; one that fails stops the run, whose exit status is the stage's,
    and no later stage is started."""
    run = make_run(f"env.model={tmp_path / 'no-such-model'}")
    r = runner.invoke(app, ["run", "--epochs", "1", "--run", str(run), "-q"])
    assert r.exit_code == 2, r.output
    assert "`genenv generate-tasks --epoch 1` exited with status 2" in r.stderr
    logs = Path(run) / "logs"
    assert (logs / "generate-tasks.log").exists() and not (logs / "rollout.log").exists()
    assert "generate-tasks --epoch 1 --run" in (logs / "run.log").read_text()
