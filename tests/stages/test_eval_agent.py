"""eval-agent, the epoch's last stage: on an epoch run.eval_every does not evaluate it completes with nothing to do
(no model, no upstream stage), a changed schedule that still skips the epoch leaves it done, and one that now
evaluates it makes it stale; run.eval_benches is checked like the other names of genenv.toml; the items evaluated
are spread over the set. Its results in a whole run (files, metrics.json, TensorBoard, status, compare):
tests/reports/test_trackers.py; on the tiny model here, with a second benchmark beside heldout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import config_from_dict
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import check_state
from genenv_cli.rundir.evalfiles import model_tag
from genenv_cli.stages import eval_agent

runner = CliRunner()


def cli(*args: object, code: int = 0) -> str:
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output + str(r.exception)
    return r.output


def _set(root: Path, section: str, key: str, value: str) -> None:
    """genenv.toml's `section.key` set to `value` (TOML) in place."""
    out, current = [], None
    for line in (root / "genenv.toml").read_text().splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        out.append(f"{key} = {value}" if current == section and line.startswith(f"{key} = ") else line)
    (root / "genenv.toml").write_text("\n".join(out) + "\n")


def test_an_epoch_not_evaluated_completes_with_nothing_and_a_new_schedule_makes_it_stale_only_when_it_evaluates(
        tmp_path):
    root = tmp_path / "run"
    cli("init", root, "--domain", "arith", "--set", "run.eval_every=2", "--set", "agent.mode=frozen")
    out = cli("eval-agent", "--epoch", 1, "--run", root, "--json")  # no model, and no update-agent before it
    assert json.loads(out.strip().splitlines()[-1])["skipped"] == "run.eval_every = 2: epoch 1 is not evaluated"
    run = RunDir(root.resolve())
    manifest = json.loads(run.manifest_path(1, "eval-agent").read_text())
    assert manifest["outputs"] == {} and manifest["counts"]["samples"] == 0
    metrics = json.loads(run.metrics_path(1).read_text())
    assert metrics["heldout_success"] is None and metrics["evals"] is None
    assert not (run.epoch_dir(1) / "evals").exists()

    def state():
        cfg = run.load_config()
        return check_state(run, cfg, eval_agent.plan(run, cfg, 1))

    _set(root, "run", "eval_every", "3")  # epoch 1 is still not evaluated: nothing changed for it
    _set(root, "run", "eval_benches", '["heldout", "bamboogle"]')
    assert state().state == "done"
    _set(root, "run", "eval_every", "1")  # now it is
    st = state()
    assert st.state == "stale" and any("due" in r for r in st.reasons), st.reasons
    # it evaluates what update-agent of the epoch left, so it waits for it, before any model is loaded
    r = runner.invoke(app, ["eval-agent", "--epoch", "1", "--run", str(root)])
    assert r.exit_code != 0 and "update-agent" in r.output, r.output


def test_eval_benches_are_known_benchmarks_named_once():
    with pytest.raises(ConfigError, match="Did you mean `heldout`"):
        config_from_dict({"run": {"eval_benches": ["heldot"]}}, "genenv.toml")
    with pytest.raises(ConfigError, match="twice"):
        config_from_dict({"run": {"eval_benches": ["heldout", "heldout"]}}, "genenv.toml")
    with pytest.raises(ConfigError, match="eval_every"):
        config_from_dict({"run": {"eval_every": -1}}, "genenv.toml")
    cfg = config_from_dict({}, "t")
    assert (cfg.run.eval_every, cfg.run.eval_benches, cfg.run.eval_limit) == (1, ["heldout"], 32)


def test_the_items_are_spread_over_the_set():
    assert eval_agent.spread(list(range(10)), 4) == [0, 2, 5, 7]
    assert eval_agent.spread(list(range(3)), 8) == [0, 1, 2]
    assert eval_agent.spread(list(range(5)), 0) == [0, 1, 2, 3, 4]
    assert len(set(eval_agent.spread(list(range(240)), 32))) == 32


def test_the_agent_is_evaluated_on_heldout_and_a_named_benchmark_and_a_rerun_is_a_no_op(make_run, tmp_path,
                                                                                        monkeypatch):
    """Two suites on the tiny model (the agent frozen, so no update trains): each result and its samples committed
    with the manifest, metrics.json's numbers and the summary line from them, and a rerun that does nothing."""
    import os
    import shutil

    from paths import FIXTURES

    # bamboogle's default data as its loader caches it (the tests are offline): the project's fixture in the official
    # format, where a download would have put it, in a cache of this test's own (the session's stays without it)
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    cached = Path(os.environ["GENENV_CACHE"]) / "benchmarks" / "bamboogle" / "self-ask-Google-Sheet" / "bamboogle.csv"
    cached.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "bamboogle" / "bamboogle.csv", cached)
    root = make_run("run.eval_every=1", 'run.eval_benches=["heldout", "bamboogle"]', "run.eval_limit=4",
                    "evaluate.max_new_tokens=4", "agent.mode=frozen", domain="arith")
    cli("update-agent", "--epoch", 1, "--run", root, "-q")  # frozen: completes with nothing to train
    out = cli("eval-agent", "--epoch", 1, "--run", root)
    assert "heldout" in out and "bamboogle" in out and "right" in out, out
    run = RunDir(root.resolve())
    manifest = json.loads(run.manifest_path(1, "eval-agent").read_text())
    assert sorted(manifest["outputs"]) == ["bamboogle", "bamboogle.samples", "heldout", "heldout.samples"]
    metrics = json.loads(run.metrics_path(1).read_text())
    for bench in ("heldout", "bamboogle"):
        result_path, samples_path = run.epoch_eval_paths(1, bench)
        result = json.loads(result_path.read_text())
        rows = [json.loads(line) for line in samples_path.read_text().splitlines()]
        assert result["n"] == len(rows) == 4 and result["epoch"] == 1 and result["stage"] == "eval-agent"
        assert result["model_tag"] == model_tag(run.load_config().agent.model)  # frozen: the base agent
        assert metrics["evals"][bench] == pytest.approx(result["headline"]["value"])
        assert manifest["counts"]["by_bench"][bench] == {"samples": 4, "correct": sum(r["correct"] for r in rows)}
    assert metrics["heldout_success"] == pytest.approx(metrics["evals"]["heldout"] / 100)
    # the report and compare read the results as evaluations of epoch 1
    assert {(b, e) for b, e in ((d["bench"], d["epoch"]) for _, d in run.read_evals())} == {("heldout", 1),
                                                                                          ("bamboogle", 1)}
    again = cli("eval-agent", "--epoch", 1, "--run", root)
    assert "up to date" in again


def test_a_suite_whose_data_cannot_be_had_stops_the_stage_before_any_model_naming_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "run"  # bamboogle's data is downloaded on first use; the tests are offline and its cache empty
    cli("init", root, "--domain", "arith", "--set", "agent.mode=frozen", "--set", 'run.eval_benches=["heldout", "bamboogle"]')
    cli("update-agent", "--epoch", 1, "--run", root, "-q")
    r = runner.invoke(app, ["eval-agent", "--epoch", "1", "--run", str(root)])
    assert r.exit_code != 0
    text = " ".join(r.output.split())
    assert "bamboogle" in text and "remove bamboogle from run.eval_benches, or set run.eval_every = 0" in text, text
    assert "loading" not in text  # no model was loaded (the agent here is the embedded one)
    run = RunDir(root.resolve())
    assert not run.manifest_path(1, "eval-agent").exists() and not (run.epoch_dir(1) / "evals").exists()


def test_settings_that_evaluate_epochs_again_go_on_past_a_pruned_checkpoint_saying_so(two_full_epochs, tmp_path):
    """Turned on after the run, eval-agent evaluates epoch 2's agent; epoch 1's full checkpoint, which
    run.keep_checkpoints deleted, completes as not evaluated with the reason instead of stopping `genenv run`."""
    import shutil

    from genenv_cli.actions.runner import run_epochs
    from genenv_cli.core.ui import UI
    from genenv_cli.machinery.pruning import prune
    from stagekit import set_keep_checkpoints

    root = tmp_path / "run"
    shutil.copytree(two_full_epochs, root)
    set_keep_checkpoints(root, 1)
    run = RunDir(root)
    assert prune(run, run.load_config()) == ["epochs/0001/agent", "epochs/0001/env"]
    _set(root, "run", "eval_every", "1")
    _set(root, "run", "eval_limit", "4")
    cfg = run.load_config()
    assert check_state(run, cfg, eval_agent.plan(run, cfg, 1)).state == "stale"  # due now
    results = {(r.stage, r.epoch): r for r in run_epochs(run, cfg, 2, ui=UI(quiet=True))}
    first, second = results["eval-agent", 1].manifest, results["eval-agent", 2].manifest
    assert "pruned by run.keep_checkpoints" in first["counts"]["skipped"] and first["outputs"] == {}
    assert second["counts"]["samples"] == 4 and sorted(second["outputs"]) == ["heldout", "heldout.samples"]
    assert not any(r.stage != "eval-agent" and not r.skipped for r in results.values())  # nothing else redone
    metrics = json.loads(run.metrics_path(2).read_text())
    assert metrics["heldout_success"] == pytest.approx(metrics["evals"]["heldout"] / 100)
    assert json.loads(run.metrics_path(1).read_text())["heldout_success"] is None
    for e in (1, 2):  # and both are done now
        assert check_state(run, cfg, eval_agent.plan(run, cfg, e)).state == "done"
