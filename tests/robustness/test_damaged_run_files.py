"""A finished run's own files damaged: each reader that meets one (of tasks, pool partitions, manifests, metrics,
checkpoints, epoch folders, a killed writer's leftovers) answers with exit 2 and one paragraph naming the file and
what was expected, or does its job, and a command that fails leaves the run as it was. Each case runs on a copy of
one finished tiny run (one whole epoch, plus an evaluation)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hostile import BAMBOOGLE, E1, cli, snapshot

# ---------------------------------------------------------------- the tasks file

def test_invalid_utf8_in_tasks_is_named(run):
    tasks = run / E1 / "tasks.jsonl"
    tasks.write_bytes(tasks.read_bytes().replace(b'"epoch"', b'"\xff\xfeepoch"', 1))
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run)
    assert "tasks.jsonl, line 1: not valid UTF-8" in r.stderr
    assert snapshot(run) == before


@pytest.mark.parametrize("expression", ["(" * 3000 + "1" + ")" * 3000, "1" * 5000 + " + 1", "-" * 3000 + "1"])
def test_hostile_arith_tasks_are_refused(make_run, expression):
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks
    from stagekit import complete_as, jsonl

    root = make_run(domain="arith")
    task = {"task_id": "t1", "epoch": 1, "batch_id": "t1", "source": "seed", "domain": "arith", "shape": "1op-1d",
            "payload": {"expression": expression, "answer": 2}, "parent_id": None, "context": None,
            "env_prompt": None, "env_output": None, "env_model": None}
    complete_as(RunDir(root), generate_tasks, 1, {"tasks": jsonl([task]), "rejects": ""})
    (root / E1 / "tasks.jsonl").write_text(jsonl([task]) + "\n")  # edited by hand: the domain checks it again
    r = cli("rollout", "--epoch", 1, "--run", root)
    assert "payload is not a valid arith task" in r.stderr


@pytest.mark.parametrize("line", ['{"task_id": ' + "1" * 5000 + "}", "[" * 3000 + "]" * 3000])
def test_hostile_json_lines_are_refused(run, line):
    tasks = run / E1 / "tasks.jsonl"
    tasks.write_text(tasks.read_text() + line + "\n")
    r = cli("score", "--epoch", 1, "--run", run)
    assert "tasks.jsonl, line 7" in r.stderr


def test_a_lone_surrogate_in_a_task_shape_stops_rollout_before_any_compute(run, monkeypatch):
    tasks = run / E1 / "tasks.jsonl"
    lines = tasks.read_text().splitlines(keepends=True)
    rec = json.loads(lines[1])
    rec["shape"] = "PLACEHOLDER"
    lines[1] = json.dumps(rec).replace("PLACEHOLDER", "\\ud800") + "\n"
    tasks.write_text("".join(lines))
    import genenv_cli.machinery.engines as engines

    def no_engine(*a, **k):
        raise AssertionError("rollout opened an engine on a tasks file it should have refused")

    monkeypatch.setattr(engines, "open_engine", no_engine)
    before = snapshot(run)
    for stage in ("rollout", "score"):
        r = cli(stage, "--epoch", 1, "--run", run, "--force")
        assert "tasks.jsonl, line 2" in r.stderr and "lone surrogate" in r.stderr, r.stderr
    assert snapshot(run) == before


# ---------------------------------------------------------------- pool partitions

@pytest.mark.parametrize("stage, pool", [("update-agent", "agent_train"), ("update-env", "env_sft")])
@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_pool_partition_is_named(run, stage, pool, damage):
    part = run / "pools" / pool / "epoch=0001.parquet"
    part.write_bytes(b"" if damage == "empty" else part.read_bytes()[: part.stat().st_size // 2])
    r = cli(stage, "--epoch", 1, "--run", run, "--force")
    assert "epoch=0001.parquet: not a readable Parquet file" in r.stderr
    assert (run / E1 / stage.split("-")[1]).is_dir()  # the previous checkpoint is still there


# ---------------------------------------------------------------- manifests and metrics.json

@pytest.mark.parametrize("name, content", [("manifests/rollout.json", "[]"), ("manifests/score.json", "[1, 2]"),
                                           ("manifests/score.json", '{"counts": 5, "metrics": [1]}'),
                                           ("manifests/generate-tasks.json", '{"inputs": 3, "outputs": "x"}'),
                                           ("metrics.json", "[1, 2]"), ("metrics.json", '{"batch_p_mean": "high"}'),
                                           ("manifests/update-env.json", "7")])
def test_wrong_shape_json_is_handled(run, name, content):
    (run / E1 / name).write_text(content)
    out = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)
    cli("status", "--run", run, expect=0)
    stage = Path(name).stem
    if name.startswith("manifests/"):
        assert out["epochs"][0]["stages"][stage]["state"] in ("incomplete", "stale")


def test_score_force_refuses_a_wrong_shape_rollout_manifest(run):
    (run / E1 / "manifests" / "rollout.json").write_text("[]")
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "not a valid manifest of `rollout`" in r.stderr
    assert snapshot(run) == before


def test_report_takes_its_numbers_from_the_manifests_not_a_damaged_metrics_file(run):
    (run / E1 / "metrics.json").write_text("[1, 2]")  # derived state: the manifests have the numbers
    out = json.loads(cli("report", "--run", run, "--json", expect=0).stdout)
    score = json.loads((run / E1 / "manifests" / "score.json").read_text())
    assert out["numbers"]["metrics"][0]["success_rate"] == score["metrics"]["success_rate"]


def test_report_names_a_manifest_number_of_the_wrong_type(run):
    path = run / E1 / "manifests" / "score.json"
    manifest = json.loads(path.read_text())
    manifest["metrics"]["batch_p_mean"] = "high"
    path.write_text(json.dumps(manifest))
    r = cli("report", "--run", run)
    assert "`batch_p_mean` must be a number or null" in r.stderr and str(run / E1 / "manifests") in r.stderr


def test_metrics_json_is_derived_state_rebuilt_by_a_no_op_rerun(run):
    manifest = json.loads((run / E1 / "manifests" / "score.json").read_text())
    metrics = run / E1 / "metrics.json"
    stale = json.loads(metrics.read_text())
    stale.update({"env_r_mean": 0.123456, "tasks": 8, "alpha": 0.9})  # numbers a killed older genenv left
    metrics.write_text(json.dumps(stale))
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert rows[0]["metrics"]["env_r_mean"] == manifest["metrics"]["env_r_mean"]
    assert rows[0]["metrics"]["tasks"] == 6 and rows[0]["metrics"]["alpha"] == 0.5
    out = json.loads(cli("report", "--run", run, "--json", expect=0).stdout)
    assert out["numbers"]["metrics"][0]["env_r_mean"] == manifest["metrics"]["env_r_mean"]
    assert "up to date" in cli("score", "--epoch", 1, "--run", run, expect=0).stdout
    fixed = json.loads(metrics.read_text())
    assert fixed["env_r_mean"] == manifest["metrics"]["env_r_mean"] and fixed["tasks"] == 6


# ---------------------------------------------------------------- checkpoints: evaluate never falls back silently

def _evaluate(run: Path, *extra: object, expect: int = 2):
    return cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--limit", 1, "--run", run, "-q", *extra,
               expect=expect)


@pytest.mark.parametrize("extra", [(), ("--epoch", 1)], ids=["latest", "epoch1"])
def test_evaluate_refuses_a_missing_agent_folder_instead_of_the_base_model(run, extra):
    import shutil

    shutil.rmtree(run / E1 / "agent")
    before = snapshot(run)
    r = _evaluate(run, *extra)
    assert "epochs/0001/agent" in r.stderr and "genenv update-agent --epoch 1 --force" in r.stderr, r.stderr
    assert snapshot(run) == before  # no result written for the wrong model


def test_evaluate_epoch_0_is_the_base_model_asked_for(run):
    import shutil

    shutil.rmtree(run / E1 / "agent")
    r = _evaluate(run, "--epoch", 0, "--json", expect=0)
    result = json.loads(r.stdout)
    assert result["model_tag"] != "epoch-0001-agent" and result["epoch"] is None


META = "genenv_checkpoint.json"


@pytest.mark.parametrize("damage,expected", [
    (lambda f: f.write_bytes(f.read_bytes()[:10]), "not valid JSON"),
    (lambda f: f.write_text("[1, 2]"), "holds a JSON list"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "base": 123})), "`base` is 123"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "kind": "quantum"})), "`kind` is 'quantum'"),
    (lambda f: f.write_bytes(b"\xff\xfe" + f.read_bytes()), "not UTF-8"),
], ids=["truncated", "list", "base-int", "kind", "not-utf8"])
def test_a_damaged_checkpoint_meta_is_named(run, damage, expected):
    meta = run / E1 / "agent" / META
    damage(meta)
    before = snapshot(run)
    r = _evaluate(run, "--epoch", 1)
    assert f"epochs/0001/agent/{META}" in r.stderr and expected in r.stderr, r.stderr
    assert snapshot(run) == before


def test_a_truncated_adapter_is_named(run):
    weights = run / E1 / "agent" / "adapter_model.safetensors"
    assert weights.is_file()
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = snapshot(run)
    r = _evaluate(run, "--epoch", 1)
    assert "adapter_model.safetensors: not a whole safetensors file" in r.stderr, r.stderr
    assert snapshot(run) == before


# ---------------------------------------------------------------- epoch folders

def test_an_epoch_folder_past_the_range_is_not_an_epoch(run):
    (run / "epochs" / "99999999999999999999").mkdir()
    (run / "epochs" / "99999999999999999999" / "tasks.jsonl").write_text("")
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]
    cli("report", "--run", run, expect=0)


def test_a_folder_holding_only_a_lock_is_not_an_epoch(run):
    (run / "epochs" / "0009").mkdir()
    (run / "epochs" / "0009" / ".lock").write_text("")  # left by a failed command of an older genenv
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]


# ---------------------------------------------------------------- what a killed writer leaves

def test_old_checkpoint_left_by_a_kill_between_renames_is_put_back(run):
    agent = run / E1 / "agent"
    files = {p.name: p.read_bytes() for p in agent.iterdir()}
    os.replace(agent, run / E1 / ".agent.old-999999999")  # the first rename happened, the second did not
    assert json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"][0]["stages"][
        "update-agent"]["state"] == "incomplete"
    r = cli("update-agent", "--epoch", 1, "--run", run, expect=0)
    assert "up to date" in r.stdout  # the old copy is back, and it is exactly what the manifest recorded
    assert {p.name: p.read_bytes() for p in agent.iterdir()} == files


def test_a_dead_lock_holder_is_reported_with_its_log(run):
    (run / E1 / ".lock").write_text(json.dumps({"stage": "score", "pid": 999999999, "host": "h",
                                                "since": "2026-01-01T00:00:00"}))
    r = cli("score", "--epoch", 1, "--run", run, expect=0)
    assert "previous `score` (pid 999999999" in r.stderr and "crashed or was killed" in r.stderr
    assert str(run / "logs" / "score.log") in r.stderr
    assert (run / E1 / ".lock").read_text() == ""  # released cleanly this time: no warning next time
    assert "crashed" not in cli("score", "--epoch", 1, "--run", run, expect=0).stderr


def test_a_manifest_tmp_of_a_dead_writer_is_cleaned(run):
    m = run / E1 / "manifests"
    dead, alive = m / ".score.json.tmp-999999999", m / ".score.json.tmp-1"
    for p in (dead, alive):
        p.write_bytes((m / "score.json").read_bytes())
    assert "up to date" in cli("score", "--epoch", 1, "--run", run, expect=0).stdout
    assert not dead.exists() and alive.exists()  # only a writer that is gone leaves garbage
    assert json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"][0]["stages"]["score"][
        "state"] == "done"
