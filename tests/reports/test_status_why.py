"""`genenv status` says why: the changed key in the table (`stale: rollout.max_new_tokens 16 → 24`), `stale upstream`
for what reads a stale stage's outputs, a note when a one-off --set differs from genenv.toml, generate-tasks' top
reject reasons, and an update that trained on nothing or took one step. The stages run on the arith domain with a
replayed engine (no model), the updates on the tiny model."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from genenv_cli.stages import generate_tasks, rollout, score, update_agent, update_env
from genenv_cli.views import status_table as status
from replay import ReplayEngine, patch_engine

SETTINGS = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.seed_share=0.5", "generate.max_rounds=1",
            "rollout.group_size=3", "rollout.max_new_tokens=16"]
NUMBERS = itertools.count(11)


def replay(conv, k):
    """The environment writes a new sum each time; the agent always answers 7 (so each group's rewards agree)."""
    if "EXERCISE" in conv[0]["content"]:
        return f"EXERCISE: {next(NUMBERS)} + {next(NUMBERS)}"
    return "Answer: 7"


def write_config(root: Path, *sets: str, model: str = "embedded") -> None:
    data = apply_overrides({"run": {"domain": "arith"}, "agent": {"model": model}, "env": {"model": model}},
                           [*SETTINGS, *sets])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))


@pytest.fixture
def scored(tmp_path, monkeypatch) -> RunDir:
    """Epoch 1's generate-tasks, rollout and score done (replayed engine)."""
    root = tmp_path / "run"
    root.mkdir()
    write_config(root)
    patch_engine(monkeypatch, ReplayEngine(replay))
    run = RunDir(root)
    for stage in (generate_tasks, rollout, score):
        stage.run(run, run.load_config(), 1)
    return run


def states(run: RunDir) -> dict[str, dict]:
    (row,) = status.collect(run, run.load_config())
    return row["stages"]


def test_the_table_names_the_changed_key_and_marks_what_reads_a_stale_stage(scored):
    st = states(scored)
    assert [st[s]["label"] for s in ("generate-tasks", "rollout", "score")] == ["done 6", "done 18", "done 18"]
    write_config(scored.root, "rollout.max_new_tokens=24")
    st = states(scored)
    assert st["generate-tasks"]["state"] == "done"
    assert st["rollout"]["label"] == "stale: rollout.max_new_tokens 16 → 24"
    assert st["rollout"]["changes"] == [{"kind": "config", "key": "rollout.max_new_tokens", "was": 16, "now": 24}]
    assert st["rollout"]["reasons"] == ["config changed: rollout.max_new_tokens 16 → 24"]
    # score's own inputs are as they were, but it read what the stale rollout wrote
    assert st["score"]["state"] == "stale" and st["score"]["label"] == "stale upstream"
    assert st["score"]["upstream"] == ["epoch 1 rollout"] and "upstream epoch 1 rollout is stale" in st["score"]["reasons"][0]
    # the plain table (off a terminal) and --json say the same
    out = CliRunner().invoke(app, ["status", "--run", str(scored.root)])
    assert out.exit_code == 0, out.output
    assert "stale: rollout.max_new_tokens 16 → 24" in out.stdout and "stale upstream" in out.stdout
    assert "epoch 1 rollout: stale — config changed: rollout.max_new_tokens 16 → 24" in out.stdout
    doc = json.loads(CliRunner().invoke(app, ["status", "--run", str(scored.root), "--json"]).stdout)
    assert doc["epochs"][0]["stages"]["rollout"]["changes"][0]["key"] == "rollout.max_new_tokens"
    # a change upstream of everything: generate-tasks names its key, and both later stages are stale upstream
    write_config(scored.root, "generate.temperature=0.9")
    st = states(scored)
    assert st["generate-tasks"]["label"] == "stale: generate.temperature 0.7 → 0.9"
    assert st["rollout"]["label"] == st["score"]["label"] == "stale upstream"
    assert st["score"]["upstream"] == ["epoch 1 generate-tasks", "epoch 1 rollout"]
    # redone in order, everything is done again
    cfg = scored.load_config()
    for stage in (generate_tasks, rollout, score):
        assert not stage.run(scored, cfg, 1).skipped
    assert {s["state"] for s in states(scored).values() if s["state"] != "missing"} == {"done"}


def test_a_one_off_set_that_differs_from_the_config_is_noted(scored):
    runner = CliRunner()
    out = runner.invoke(app, ["score", "--epoch", "1", "--run", str(scored.root), "--set", "curriculum.alpha=0.3",
                              "--set", "curriculum.beta=2.0"])
    assert out.exit_code == 0, out.output
    assert ("note: --set curriculum.alpha=0.3 is not what genenv.toml says (0.5); what this command writes records "
            "0.3, so `genenv status` will show it stale (stale: curriculum.alpha 0.3 → 0.5)") in out.output
    assert "curriculum.beta" not in out.output.split("note:", 2)[-1].split("\n")[0]  # the same value: no note
    assert states(scored)["score"]["label"] == "stale: curriculum.alpha 0.3 → 0.5"
    quiet = runner.invoke(app, ["score", "--epoch", "1", "--run", str(scored.root), "--set", "curriculum.alpha=0.5"])
    assert quiet.exit_code == 0 and "note: --set" not in quiet.output
    # a key score does not record (rollout's): nothing it writes looks stale, so nothing to note
    other = runner.invoke(app, ["score", "--epoch", "1", "--run", str(scored.root), "--set", "rollout.group_size=5"])
    assert other.exit_code == 0 and "note: --set" not in other.output


def test_generate_tasks_names_its_top_reject_reasons(tmp_path, monkeypatch):
    root = tmp_path / "run"
    root.mkdir()
    write_config(root, "generate.seed_share=0.0", "generate.tasks_per_epoch=4")
    texts = itertools.cycle(["Sure! Here is a fun exercise.", "EXERCISE: 3 + x", "EXERCISE: 12345 * 2",
                             "Sure! Here is a fun exercise."])
    patch_engine(monkeypatch, ReplayEngine(lambda conv, k: next(texts)))
    out = CliRunner().invoke(app, ["generate-tasks", "--epoch", "1", "--run", str(root)])
    assert out.exit_code == 0, out.output
    summary = out.stdout.strip().splitlines()[-1]
    assert re.search(r"0/4 generations valid and novel \(0%\); top reject reasons: parse: no EXERCISE: line "
                     r"\(2 of 4\), parse: unexpected character 'x' \(1 of 4\), invalid: a number with more than 4 "
                     r"digits \(1 of 4\)", summary), summary
    manifest = json.loads((root / "epochs/0001/manifests/generate-tasks.json").read_text())
    assert manifest["counts"]["reject_reasons"][0] == ["parse: no EXERCISE: line", 2]
    shown = CliRunner().invoke(app, ["status", "--run", str(root)]).stdout
    assert ("epoch 1 generate-tasks: 0 of 4 environment generations usable, 4 seed tasks filled the epoch; top reject "
            "reasons: parse: no EXERCISE: line (2 of 4)") in shown


def test_an_update_that_trained_on_nothing_or_took_one_step_says_so():
    def st(name, **counts):
        return {"state": "done", "counts": counts}
    assert status.label("update-agent", st("update-agent", samples_used=0, steps=0)) == "done 0: trained on nothing"
    assert status.label("update-env", st("update-env", samples_used=12, steps=1)) == "done 12: 1 step"
    assert status.label("update-env", st("update-env", samples_used=12, steps=3)) == "done 12"
    assert status.label("update-agent", st("update-agent", samples_used=0, skipped="agent.mode = frozen: ...")) == \
        "done 0: not trained"
    assert status.label("rollout", st("rollout", rollouts=0)) == "done 0"  # only the updates train


def test_updates_that_trained_on_nothing_are_marked_with_the_reason(tmp_path, tiny_model):
    root = tmp_path / "run"
    root.mkdir()
    write_config(root, "agent_update.batch_size=4", "env_update.batch_size=4", model=str(tiny_model))
    run = RunDir(root)
    with pytest.MonkeyPatch.context() as mp:  # generation replayed; the updates load the tiny model
        patch_engine(mp, ReplayEngine(replay))
        for stage in (generate_tasks, rollout, score):
            stage.run(run, run.load_config(), 1)
    for stage in (update_agent, update_env):
        stage.run(run, run.load_config(), 1)
    st = states(run)
    assert st["update-agent"]["label"] == st["update-env"]["label"] == "done 0: trained on nothing"
    assert st["update-agent"]["flag"] == "trained on nothing"
    shown = CliRunner().invoke(app, ["status", "--run", str(root)]).stdout
    assert "epoch 1 update-agent: trained on nothing: no GRPO group had rewards that differ (skipped groups: 6 " \
           "all-equal group)" in shown
    assert re.search(r"epoch 1 update-env: trained on nothing: none of \d+ environment generations passed the "
                     r"difficulty filter \(\|p̂ batch − α\| ≤ curriculum.k_min = 0.1\)", shown), shown
