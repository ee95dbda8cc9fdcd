"""`genenv init --preset paper`, `genenv table` and pipelines/paper.sh: the paper's protocol as one command."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import load_config
from genenv_cli.catalogue.presets import PRESETS, preset_overrides
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from paths import FIXTURES, ROOT

FIX = FIXTURES
runner = CliRunner()


def test_paper_preset_sets_table_2_and_marks_our_choices(tmp_path):
    r = runner.invoke(app, ["init", str(tmp_path / "run"), "--preset", "paper", "--set", "curriculum.beta=3.0"])
    assert r.exit_code == 0, r.output
    cfg = load_config(tmp_path / "run" / "genenv.toml")
    assert (cfg.curriculum.alpha, cfg.curriculum.k_min, cfg.curriculum.lam) == (0.5, 0.1, 1.0)
    assert (cfg.agent_update.learning_rate, cfg.env_update.learning_rate) == (1e-6, 5e-7)
    assert cfg.generate.tasks_per_epoch == 64 and cfg.vllm.max_model_len == 9000
    assert cfg.agent.model == cfg.env.model == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.run.engine == "auto"
    assert cfg.run.sharding == "fsdp" and "--config_file pipelines/accelerate/fsdp-full-shard.yaml" in r.output
    assert cfg.curriculum.beta == 3.0  # --set beside the preset wins
    text = (tmp_path / "run" / "genenv.toml").read_text()
    assert "# preset: paper" in text and "Ours, where the source is silent: curriculum.beta = 2.0" in text
    assert "changed by --set at init: curriculum.beta=3.0" in text


def test_paper_preset_leaves_the_engine_auto_and_names_the_sharded_launch():
    sets, notes = preset_overrides(PRESETS["paper"], engine_available=False)
    assert not any(s.startswith("run.engine") for s in sets) and "vllm is not importable" in notes[1]
    sets, notes = preset_overrides(PRESETS["paper"], engine_available=True)
    assert not any(s.startswith("run.engine") for s in sets) and len(notes) == 1
    assert "accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml" in notes[0]
    assert "run.sharding=fsdp" in sets


def test_explicit_model_option_beats_the_preset(tmp_path):
    r = runner.invoke(app, ["init", str(tmp_path / "run"), "--preset", "paper", "--agent-model", "embedded"])
    assert r.exit_code == 0, r.output
    cfg = load_config(tmp_path / "run" / "genenv.toml")
    assert cfg.agent.model == "embedded" and cfg.env.model == "Qwen/Qwen2.5-7B-Instruct"


def test_unknown_preset_lists_the_presets(tmp_path):
    r = runner.invoke(app, ["init", str(tmp_path / "run"), "--preset", "papr"])
    assert r.exit_code == 2 and "unknown preset 'papr'" in r.stderr and "paper" in r.stderr
    assert not (tmp_path / "run" / "genenv.toml").exists()


def _result(run: Path, bench: str, value: float, epoch: int, protocol: str = "paper", limit=None) -> None:
    folder = run / "evals" / bench
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"epoch-{epoch:04d}-agent.{protocol}{'.limit' + str(limit) if limit else ''}.json").write_text(json.dumps({
        "bench": bench, "model_tag": f"epoch-{epoch:04d}-agent", "epoch": epoch, "protocol": protocol,
        "headline": {"name": "accuracy", "value": value}, "config": {"limit": limit}, "created": "2026-01-01"}))


def test_table_takes_the_latest_full_paper_result_per_benchmark(make_run):
    run = Path(make_run())
    for bench, value in [("alfworld", 10.0), ("bfcl", 20.0), ("api-bank", 30.0), ("bamboogle", 40.0),
                         ("travelplanner", 50.0)]:
        _result(run, bench, value, 1)
        _result(run, bench, value + 1, 2)
        _result(run, bench, 99.0, 3, limit=2)        # a --limit subset is not the benchmark's number
        _result(run, bench, 98.0, 3, protocol="official")
    r = runner.invoke(app, ["table", "--run", str(run)])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("| this run"))
    assert line == "| this run (epoch-0002-agent) | 11.0 | 21.0 | 31.0 | 41.0 | 51.0 | 31.0 |"
    assert "| GenEnv 7B (paper, reference) | 54.5 | 41.8 | 79.1 | 76.0 | 16.6 | 53.6 |" in r.stdout


def test_table_says_which_benchmarks_are_missing(make_run):
    run = Path(make_run())
    _result(run, "bfcl", 20.0, 1)
    r = runner.invoke(app, ["table", "--run", str(run)])
    assert r.exit_code == 0 and "| 20.0 |" in r.stdout
    assert "for: ALFWorld, API-Bank, Bamboogle, TravelPlanner" in r.stdout


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.e2e
def test_paper_script_runs_end_to_end(tmp_path, tiny_model):
    """pipelines/paper.sh as users get it: the paper preset with --set overrides for a tiny model, two epochs, then
    every benchmark under --protocol paper on the hand-written fixtures, ending with the Table 1 layout."""
    run = tmp_path / "run"
    small = ["generate.tasks_per_epoch=5", "generate.variations=2", "generate.max_rounds=1",
             "generate.max_new_tokens=12", "rollout.group_size=2", "rollout.max_new_tokens=6",
             "agent_update.batch_size=4", "env_update.batch_size=4", "env_update.kl_max=100",
             "evaluate.max_new_tokens=6", "evaluate.max_steps=2", "run.engine=hf", "run.device=cpu", "run.eval_limit=4",
             f"agent.model={tiny_model}", f"env.model={tiny_model}"]
    families = [a for d in ("alfworld", "bfcl", "api-bank", "bamboogle", "travelplanner") for a in ("--domain", d)]
    r = runner.invoke(app, ["init", str(run), "--preset", "paper", *families, *[a for s in small for a in ("--set", s)]])
    assert r.exit_code == 0, r.output
    env = dict(os.environ, GENENV=f"{sys.executable} -m genenv_cli", EPOCHS="2", GENENV_OFFLINE="1",
               ALFWORLD_DATA=str(FIX / "alfworld"), BFCL_DATA=str(FIX / "bfcl"), API_BANK_DATA=str(FIX / "api_bank"),
               BAMBOOGLE_DATA=str(FIX / "bamboogle" / "bamboogle.csv"), TRAVELPLANNER_DATA=str(FIX / "travelplanner"))
    done = subprocess.run(["bash", str(ROOT / "pipelines" / "paper.sh"), str(run)], capture_output=True, text=True,
                          env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert RunDir(run).manifest_path(2, "update-env").exists() and not (run / "epochs" / "0003").exists()
    # the README's command: the agent trained on the five benchmark families, one task of each an epoch
    tasks = [json.loads(x) for x in (run / "epochs" / "0002" / "tasks.jsonl").read_text().splitlines()]
    assert sorted(t["domain"] for t in tasks) == ["alfworld", "api-bank", "bamboogle", "bfcl", "travelplanner"]
    for bench in ("alfworld", "bfcl", "api-bank", "bamboogle", "travelplanner"):
        results = [json.loads(p.read_text()) for p in (run / "evals" / bench).glob("*.paper.json")]
        assert results and results[0]["protocol"] == "paper" and results[0]["epoch"] == 2, bench
    out = done.stdout.strip().splitlines()
    table = out[next(i for i, x in enumerate(out) if x.startswith("| model |")):]
    assert table[0] == "| model | ALFWorld | BFCL | API-Bank | Bamboogle | TravelPlanner | avg |"
    measured = next(x for x in table if x.startswith("| this run"))
    assert "epoch-0002-agent" in measured and " - |" not in measured
