"""Plugin code inside the stages runs under the plugin guard: a plugin environment that hangs, raises, exits or
returns bad values in `rollout`, a scorer that exits in `score`, a parser or a payload check that raises, and a
plugin module that ends the process or cannot be imported in `init` and `generate-tasks`: each ends with exit 2,
a message naming the plugin and the method, and nothing committed.

The plugins are rows registered at run time (tests/hostile_plugins.py), the engine answers without a model, so
every case takes well under a second (the hanging step waits for a 1 s limit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import hostile_plugins
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from genenv_cli.stages import generate_tasks
from stagekit import complete_as, jsonl

LIMIT_S = 1


def _run(tmp_path: Path, domain: str, *sets: str) -> RunDir:
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config

    root = tmp_path / "run"
    root.mkdir()
    data = apply_overrides({"run": {"domain": domain}, "agent": {"model": "replay"}, "env": {"model": "replay"}},
                           ["rollout.group_size=2", "rollout.max_new_tokens=8", f"score.item_timeout_s={LIMIT_S}",
                            "generate.tasks_per_epoch=2", "generate.variations=1", "generate.seed_share=0.0",
                            "generate.max_rounds=1", *sets])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    return RunDir(root)


def _tasks(domain: str, n: int = 2) -> list[dict]:
    return [{"task_id": f"e0001-seed-s{i}", "epoch": 1, "batch_id": f"e0001-seed-s{i}", "source": "seed",
             "domain": domain, "shape": "1op-1d", "payload": {"expression": f"{i + 1} + 1", "answer": i + 2},
             "parent_id": None, "context": None, "env_prompt": None, "env_output": None, "env_model": None}
            for i in range(n)]


def _cli(*args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


def _cli_in_child(*args) -> tuple[int, str]:
    """`_cli` in a forked child, for a plugin that may end the process (hostile_plugins.in_child)."""
    code, out = hostile_plugins.in_child(lambda: _cli(*args))
    return code, out


def _nothing_committed(run: RunDir, stage: str, output: str) -> None:
    assert not run.manifest_path(1, stage).exists()
    assert not run.file(output, 1).exists()


@pytest.fixture
def plugin():
    added = []

    def add(name: str) -> str:
        hostile_plugins.register(name)
        added.append(name)
        return name

    yield add
    for name in added:
        hostile_plugins.unregister(name)


ROLLOUT_BREAKS = {  # the plugin -> what the message says besides its name and `step()`
    "step-hangs": f"did not return within {LIMIT_S} s",
    "step-raises": "RuntimeError: the environment tripped",
    "step-exits": "SystemExit(0)",
    "step-os-exits": "os._exit(0)",
    "reward-nan": "nan",
    "reward-five": "5.0",
    "partial-seven": "partial credit 7.5",
    "observation-int": "observation 123",
    "observation-huge": "2,000,001 characters",
}


@pytest.mark.parametrize("name", sorted(ROLLOUT_BREAKS))
def test_a_broken_plugin_environment_stops_rollout_naming_it(tmp_path, monkeypatch, plugin, name):
    run = _run(tmp_path, plugin(name))
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(name)), "rejects": ""})
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine())
    code, out = (_cli_in_child if "exits" in name else _cli)("rollout", "--epoch", 1, "--run", run.root)
    assert code == 2, out
    assert "bug in genenv" not in out and f"plugin `{name}`" in out and "step()" in out, out
    assert ROLLOUT_BREAKS[name] in out, out
    _nothing_committed(run, "rollout", "rollouts")


def _score_epoch(tmp_path, monkeypatch, name) -> RunDir:
    from genenv_cli.stages import rollout

    run = _run(tmp_path, name)
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(name)), "rejects": ""})
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine("<answer>2</answer>"))
    rollout.run(run, run.load_config(), 1)
    return run


def test_a_plugin_scorer_that_raises_system_exit_stops_score_naming_it(tmp_path, monkeypatch, plugin):
    name = plugin("score-exits")
    run = _score_epoch(tmp_path, monkeypatch, name)
    code, out = _cli("score", "--epoch", 1, "--run", run.root)
    assert code == 2 and f"plugin `{name}`" in out and "score_many()" in out and "SystemExit(0)" in out, out
    _nothing_committed(run, "score", "scores")


def test_a_plugin_scorer_that_calls_os_exit_stops_score_naming_it(tmp_path, monkeypatch, plugin):
    """In a genenv process of its own (the plugin installed as an entry point): an os._exit that went through
    would end the test's process."""
    import os
    import subprocess
    import sys

    name = plugin("score-os-exits")
    run = _score_epoch(tmp_path, monkeypatch, name)
    site = tmp_path / "site"
    dist = site / "hostile_scorer-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-scorer\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[genenv.domains]\n{name} = hostile_plugins:ScoreOsExits\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path(hostile_plugins.__file__).parent),
                                                        *sys.path])}
    r = subprocess.run([sys.executable, "-m", "genenv_cli", "score", "--epoch", "1", "--run", str(run.root)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"plugin `{name}`" in r.stderr and "os._exit(0)" in r.stderr and "score_many()" in r.stderr, r.stderr
    _nothing_committed(run, "score", "scores")


def test_a_plugin_parser_that_raises_stops_generate_tasks_naming_it(tmp_path, monkeypatch, plugin):
    name = plugin("parser-raises")
    run = _run(tmp_path, name)
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine("Compute 1 + 1"))
    code, out = _cli("generate-tasks", "--epoch", 1, "--run", run.root)
    assert code == 2 and f"plugin `{name}`" in out and "parse_env_output()" in out, out
    assert "RuntimeError: the parser tripped" in out and "bug in genenv" not in out, out
    _nothing_committed(run, "generate-tasks", "tasks")


def test_a_payload_check_that_raises_on_a_hand_edited_task_stops_rollout_naming_it(tmp_path, monkeypatch, plugin):
    name = plugin("payload-check-raises")
    run = _run(tmp_path, name)
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(name)), "rejects": ""})
    tasks = _tasks(name)
    tasks[0]["payload"] = {"expression": "9 + 9", "answer": 18}
    run.file("tasks", 1).write_text(jsonl(tasks))  # edited by hand: rollout checks every task again
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine())
    code, out = _cli("rollout", "--epoch", 1, "--run", run.root)
    assert code == 2 and f"plugin `{name}`" in out and "check_payload()" in out, out
    assert "the payload check tripped" in out and "bug in genenv" not in out, out
    _nothing_committed(run, "rollout", "rollouts")


@pytest.mark.parametrize("name,said", [("exits-at-import", "SystemExit(0)"),
                                       ("fails-at-import", "ModuleNotFoundError")])
def test_a_plugin_that_fails_at_import_stops_init_naming_it(tmp_path, plugin, name, said):
    plugin(name)
    code, out = _cli("init", tmp_path / "run", "--domain", name)
    assert code == 2 and f"plugin `{name}`" in out and said in out and "bug in genenv" not in out, out
    assert not (tmp_path / "run" / "genenv.toml").exists()


@pytest.mark.parametrize("name,said", [("exits-at-import", "SystemExit(0)"),
                                       ("fails-at-import", "ModuleNotFoundError")])
def test_a_plugin_that_fails_at_import_stops_generate_tasks_naming_it(tmp_path, plugin, name, said):
    plugin(name)
    run = _run(tmp_path, name)
    code, out = _cli("generate-tasks", "--epoch", 1, "--run", run.root)
    assert code == 2 and f"plugin `{name}`" in out and said in out and "bug in genenv" not in out, out
    _nothing_committed(run, "generate-tasks", "tasks")


def test_a_guarded_plugin_that_behaves_plays_its_episodes_as_before(tmp_path, monkeypatch):
    """The guard is transparent: the three-turn plugin's rollout records every turn, as unguarded."""
    from episode_domains import NAME, register
    from genenv_cli.catalogue.domains import DOMAINS
    from genenv_cli.rundir.datafiles import read_parquet

    register()
    try:
        run = _run(tmp_path, NAME)
        complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(NAME)), "rejects": ""})
        hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine())
        code, out = _cli("rollout", "--epoch", 1, "--run", run.root)
        assert code == 0, out
        roll = read_parquet(run.file("rollouts", 1), "rollouts")
        assert roll["turns"].to_list() == [3] * 4
        assert json.loads(roll["observations"][0]) == ["calc(1 + 1) = 2", "calc(1 + 2) = 3"]
    finally:
        DOMAINS.unregister(NAME)


def test_genenv_run_stops_at_a_stage_that_exits_0_having_committed_nothing(tmp_path, monkeypatch):
    """A stage process ended with status 0 before its commit (an exit the guard could not see): `genenv run` does
    not carry on to the next stage as if it were done."""
    from genenv_cli.actions import runner
    from genenv_cli.core.ui import UI

    run = _run(tmp_path, "arith")
    started = []
    monkeypatch.setattr(runner, "_run_child", lambda cmd, env=None: started.append(cmd) or 0)
    with pytest.raises(runner.StageFailed) as err:
        runner.spawn_epochs(run, 1, ui=UI(quiet=True))
    assert len(started) == 1 and "generate-tasks" in " ".join(started[0])
    assert "exited with status 0 but committed nothing" in str(err.value) and err.value.exit_code == 2
