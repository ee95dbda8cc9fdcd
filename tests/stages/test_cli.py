"""The real CLI, end to end on a tiny model, plus reruns, kills, locks and bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import polars as pl
import pytest
import typer.main
from typer.testing import CliRunner

from genenv_cli.catalogue.stages import STAGES
from genenv_cli.cli import app
from genenv_cli.rundir.datafiles import read_jsonl, read_parquet
from genenv_cli.rundir.schemas import SCHEMAS

runner = CliRunner()
COMMANDS = sorted(typer.main.get_command(app).commands)  # every command the CLI has, read from the CLI


def test_every_stage_has_a_command():
    assert set(STAGES) <= set(COMMANDS) and {"init", "run", "status", "report", "compare", "domains"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output
    if command in STAGES:  # the help a stage declares is the help its command shows
        assert " ".join(STAGES[command].help.split()[:4]) in " ".join(result.output.split())


def test_help_does_not_import_heavy_libraries():
    code = ("import sys; from genenv_cli.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0; "
            "print(' '.join(m for m in ('torch', 'transformers', 'trl', 'vllm', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""



def test_status_imports_no_click_beside_typers_own(tmp_path):
    """typer >= 0.28 vendors click: the `click` package is then an undeclared dependency and ~25 ms of start-up."""
    code = ("import sys, runpy; sys.argv = ['genenv', 'status', '--run', sys.argv[1]]\n"
            "try:\n    runpy.run_module('genenv_cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('click' in sys.modules and 'typer._click' in sys.modules, file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code, str(tmp_path / "no-run")], capture_output=True,
                         text=True).stderr.strip().splitlines()
    assert err[-1] == "False", err

def invoke(*args, ok=True):
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, result.output + str(result.exception)
    return result


@pytest.mark.e2e
@pytest.mark.slow
def test_epoch_data_path_end_to_end(tmp_path, tiny_model, monkeypatch):
    run = tmp_path / "run"
    invoke("init", str(run), "--agent-model", str(tiny_model), "--env-model", str(tiny_model),
           "--set", "generate.tasks_per_epoch=6", "--set", "generate.variations=2", "--set", "generate.max_rounds=1",
           "--set", "generate.max_new_tokens=16", "--set", "rollout.group_size=3", "--set", "rollout.max_new_tokens=12")
    text = (run / "genenv.toml").read_text()
    assert "group_size = 3" in text and "# (default: 8)" in text
    monkeypatch.chdir(run)                                  # the run is found from the current directory
    invoke("generate-tasks", "--epoch", "1", "-q")
    gen = invoke("rollout", "--epoch", "1", "--run", str(run), "--json")
    summary = json.loads(gen.stdout.strip().splitlines()[-1])
    assert summary["stage"] == "rollout" and summary["rollouts"] == 18
    invoke("score", "--epoch", "1")
    e = run / "epochs" / "0001"
    tasks = read_jsonl(e / "tasks.jsonl", "tasks")
    assert len(tasks) == 6 and {t["source"] for t in tasks} <= {"seed", "env"}
    rolls = read_parquet(e / "rollouts.parquet", "rollouts").to_dicts()
    assert len(rolls) == 18
    r0 = rolls[0]
    assert len(r0["completion_token_ids"]) == len(r0["logprobs"]) <= 12
    assert r0["finish_reason"] in ("stop", "length") and r0["model"] == str(tiny_model)
    assert read_parquet(e / "scores.parquet", "scores").height == 18
    assert read_parquet(e / "task_stats.parquet", "task_stats").height == 6
    pool = read_parquet(run / "pools/agent_train/epoch=0001.parquet", "agent_train")
    assert pool.height == 18 and pool["group_id"].n_unique() == 6
    env = pl.read_parquet(run / "pools/env_sft/epoch=0001.parquet")
    assert list(env.columns) == SCHEMAS["env_sft"].names()
    for stage in ("generate-tasks", "rollout", "score"):
        m = json.loads((e / "manifests" / f"{stage}.json").read_text())
        assert m["stage"] == stage and m["outputs"] and m["inputs"] is not None
    status = json.loads(invoke("status", "--json").stdout)
    states = {k: v["state"] for k, v in status["epochs"][0]["stages"].items()}
    assert states["generate-tasks"] == states["rollout"] == states["score"] == "done"
    assert "done" in invoke("status").stdout
    assert (run / "logs" / "rollout.log").read_text().count("SUMMARY") == 1

    # rerun: a no-op that says so
    again = invoke("score", "--epoch", "1")
    assert "up to date" in again.stdout
    # an edited input makes the downstream stage stale
    rollouts = (e / "rollouts.parquet").read_bytes()
    edited = read_parquet(e / "rollouts.parquet", "rollouts").with_columns(pl.col("completion") + " (edited)")
    edited.write_parquet(e / "rollouts.parquet")
    status = json.loads(invoke("status", "--json").stdout)
    assert status["epochs"][0]["stages"]["score"]["state"] == "stale"
    (e / "rollouts.parquet").write_bytes(rollouts)      # score refuses an edited input: put it back

    # a malformed tasks.jsonl line: non-zero exit naming file and line, and nothing overwritten
    before = {p: p.read_bytes() for p in [e / "scores.parquet", run / "pools/agent_train/epoch=0001.parquet"]}
    lines = (e / "tasks.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    (e / "tasks.jsonl").write_text("".join(lines))
    bad = invoke("score", "--epoch", "1", ok=False)
    assert bad.exit_code == 2
    assert "tasks.jsonl, line 3: not valid JSON" in bad.stderr
    assert all(p.read_bytes() == b for p, b in before.items())


def test_errors_are_one_paragraph(tmp_path):
    r = invoke("score", "--epoch", "1", "--run", str(tmp_path), ok=False)
    assert r.exit_code == 2 and "not a genenv run" in r.stderr and "Traceback" not in r.stderr
    invoke("init", str(tmp_path / "r"))
    r = invoke("score", "--epoch", "1", "--run", str(tmp_path / "r"), ok=False)
    assert "Run `genenv rollout --epoch 1`" in r.stderr
    r = invoke("rollout", "--epoch", "1", "--run", str(tmp_path / "r"), "--set", "rollout.group_sise=2", ok=False)
    assert "Did you mean `group_size`" in r.stderr
    r = invoke("init", str(tmp_path / "r2"), "--domain", "tool_calls", ok=False)
    assert "unknown domain `tool_calls`. Did you mean `tool_call`?" in r.stderr


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "genenv_cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


@pytest.mark.e2e
@pytest.mark.slow
def test_sigkill_in_rollout_leaves_nothing_and_rerun_completes(make_run):
    run = make_run("rollout.batch_size=1", "rollout.max_new_tokens=64", "rollout.group_size=4")
    invoke("generate-tasks", "--epoch", "1", "--run", str(run), "-q")
    env = dict(os.environ, GENENV_PROGRESS_INTERVAL="0")
    proc = _cli("rollout", "--epoch", "1", "--run", str(run), env=env)
    deadline = time.time() + 120
    line = ""
    while time.time() < deadline and "rollouts (" not in line:   # wait for the first finished batch
        line = proc.stderr.readline()
    assert "rollouts (" in line, "rollout never reported progress"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    e = run / "epochs" / "0001"
    assert not (e / "rollouts.parquet").exists() and not (e / "manifests" / "rollout.json").exists()
    invoke("rollout", "--epoch", "1", "--run", str(run), "-q")
    assert read_parquet(e / "rollouts.parquet", "rollouts").height == 24
    assert not [p for p in e.iterdir() if ".tmp-" in p.name]


def test_second_writer_fails_fast_naming_the_holder(make_run):
    run = make_run()
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; from pathlib import Path; from genenv_cli.rundir import RunDir, EpochLock; "
                               f"l = EpochLock(RunDir(Path({str(run)!r})).epoch_dir(1), 'score', root=Path({str(run)!r})); "
                               "l.__enter__(); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t = time.time()
        r = invoke("score", "--epoch", "1", "--run", str(run), ok=False)
        assert time.time() - t < 5
        assert r.exit_code == 3
        assert f"epoch 1 is locked by `score` (pid {holder.pid}" in r.stderr
        status = json.loads(invoke("status", "--json", "--run", str(run)).stdout)
        assert status["epochs"][0]["running"] == "score"
    finally:
        holder.kill()
        holder.wait()


def test_an_unreachable_hub_model_fails_at_once(make_run, monkeypatch):
    import socket

    def no_dns(*a, **k):
        raise OSError("no network")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    run = make_run()
    invoke("generate-tasks", "--epoch", "1", "--run", str(run), "-q")
    t = time.time()
    r = invoke("rollout", "--epoch", "1", "--run", str(run), "--set", "agent.model=nosuch/model", ok=False)
    assert r.exit_code == 2 and time.time() - t < 10
    assert "nosuch/model: not a local folder, not in the Hugging Face cache" in r.stderr
    assert not (run / "epochs" / "0001" / "rollouts.parquet").exists()


def test_an_empty_tasks_file_is_refused(make_run):
    run = make_run()
    invoke("generate-tasks", "--epoch", "1", "--run", str(run), "-q")
    (run / "epochs" / "0001" / "tasks.jsonl").write_text("")
    r = invoke("rollout", "--epoch", "1", "--run", str(run), ok=False)
    assert r.exit_code == 2 and "no tasks in the file" in r.stderr


def test_the_main_module_runs_the_cli_only_as_main():
    """A `spawn`ed child (vLLM's engine workers) re-imports `python -m genenv_cli`'s main module as `__mp_main__`:
    that import must not run the command again."""
    code = ("import runpy, sys; sys.argv = ['genenv', '--help']\n"
            "runpy.run_module('genenv_cli', run_name='__mp_main__')\n"
            "print('imported without running')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "imported without running", out.stdout + out.stderr
