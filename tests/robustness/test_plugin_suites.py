"""A benchmark suite registered by a plugin runs under the plugin guard in `genenv evaluate` and `eval-agent`:
loading that hangs, a scorer or an episode that exits (SystemExit, os._exit) or hangs, a NaN score or summary, a
sample or an observation that is not text: each ends with exit 2, a message naming the plugin and the method, and
no result written. A scorer's ordinary exception stays what it is for a built-in suite, an unscorable output.

The suites are rows registered at run time (tests/hostile_suites.py) over the Bamboogle fixture; the episodes are
answered by a replay engine, so every case takes about a second (the hangs wait for a 1 s limit)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import hostile_plugins
import hostile_suites
from hostile import BAMBOOGLE, cli
from replay import ReplayEngine

LIMIT_S = 1


@pytest.fixture
def suite(request, tmp_path, monkeypatch):
    """The hostile suite named by the test's parameter, registered; the test runs in tmp_path (evaluate without a
    run writes to ./evals)."""
    monkeypatch.chdir(tmp_path)
    row = hostile_suites.register(request.param)
    yield row
    hostile_suites.unregister(row)


def _preds(tmp_path: Path) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "output": "<answer>x</answer>"}) + "\n" for i in range(3)))
    return path


def _evaluate_predictions(row: str, tmp_path: Path, expect: int | None = 2):
    return cli("evaluate", "--bench", row, "--data", BAMBOOGLE, "--predictions", _preds(tmp_path), "--set",
               f"score.item_timeout_s={LIMIT_S}", expect=expect)


def _nothing_written(tmp_path: Path) -> None:
    assert not list(tmp_path.glob("evals/**/*.json")), "a result was written"


@pytest.mark.parametrize("suite", ["LoadHangs"], indirect=True)
def test_a_suite_whose_loading_hangs_is_stopped_and_named(suite, tmp_path, monkeypatch):
    monkeypatch.setattr("genenv_cli.core.plugin_suite.LOAD_LIMIT_S", LIMIT_S)
    r = _evaluate_predictions(suite, tmp_path)
    assert f"plugin `{suite}`" in r.stderr and "load() did not return within 1 s" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["MessageNotText"], indirect=True)
def test_a_sample_whose_message_is_not_text_is_the_plugins_error(suite, tmp_path):
    r = _evaluate_predictions(suite, tmp_path)
    assert f"plugin `{suite}`" in r.stderr and "load()" in r.stderr and "42" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["ScoreExits"], indirect=True)
def test_a_scorer_raising_system_exit_is_the_plugins_failure(suite, tmp_path):
    r = _evaluate_predictions(suite, tmp_path)
    assert f"plugin `{suite}`" in r.stderr and "score() raised SystemExit(0)" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["ScoreOsExits"], indirect=True)
def test_a_scorer_calling_os_exit_is_the_plugins_failure(suite, tmp_path):
    def run():
        r = _evaluate_predictions(suite, tmp_path, expect=None)
        return r.exit_code, r.stderr

    code, err = hostile_plugins.in_child(run)
    assert code == 2 and f"plugin `{suite}`" in err and "score() ended the process (os._exit(0))" in err
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["ScoreNaN"], indirect=True)
def test_a_nan_score_is_the_plugins_error(suite, tmp_path):
    r = _evaluate_predictions(suite, tmp_path)
    assert f"plugin `{suite}`" in r.stderr and "score()" in r.stderr and "nan" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["SummaryNaN"], indirect=True)
def test_a_nan_in_the_summary_is_the_plugins_error(suite, tmp_path):
    r = _evaluate_predictions(suite, tmp_path)
    assert f"plugin `{suite}`" in r.stderr and "summarize()" in r.stderr and "finite" in r.stderr
    _nothing_written(tmp_path)


def _replay(monkeypatch) -> None:
    """evaluate's model: a replay engine answering every turn."""
    import genenv_cli.machinery.training.policy_loading  # noqa: F401 - imported now, it binds the real `resolve`, not the patch

    monkeypatch.setattr("genenv_cli.machinery.engines.open_engine",
                        lambda *a, **k: ReplayEngine(lambda conv, k: "<answer>x</answer>"))
    monkeypatch.setattr("genenv_cli.machinery.models.resolve",
                        lambda name, tag=None: SimpleNamespace(identity=lambda: {"name": name}))


def _evaluate_episodes(row: str, expect: int | None = 2):
    return cli("evaluate", "--bench", row, "--data", BAMBOOGLE, "--model", "replay", "--limit", "2", "--set",
               f"score.item_timeout_s={LIMIT_S}", expect=expect)


@pytest.mark.parametrize("suite", ["EpisodeFine"], indirect=True)
def test_a_working_interactive_suite_plays_through_the_guard(suite, tmp_path, monkeypatch):
    _replay(monkeypatch)
    _evaluate_episodes(suite, expect=0)
    result = json.loads(next(tmp_path.glob(f"evals/{suite}/*.json")).read_text())
    assert result["counts"]["correct"] == 2


@pytest.mark.parametrize("suite", ["EpisodeHangs"], indirect=True)
def test_an_episode_step_that_hangs_is_stopped_and_named(suite, tmp_path, monkeypatch):
    _replay(monkeypatch)
    r = _evaluate_episodes(suite)
    assert f"plugin `{suite}`" in r.stderr and "episode advance() did not return within 1 s" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["EpisodeExits"], indirect=True)
def test_an_episode_step_raising_system_exit_is_the_plugins_failure(suite, tmp_path, monkeypatch):
    _replay(monkeypatch)
    r = _evaluate_episodes(suite)
    assert f"plugin `{suite}`" in r.stderr and "episode advance() raised SystemExit(0)" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["ObservationNotText"], indirect=True)
def test_an_observation_that_is_not_text_is_the_plugins_error(suite, tmp_path, monkeypatch):
    _replay(monkeypatch)
    r = _evaluate_episodes(suite)
    assert f"plugin `{suite}`" in r.stderr and "episode prompt()" in r.stderr
    _nothing_written(tmp_path)


@pytest.mark.parametrize("suite", ["LoadExits"], indirect=True)
def test_eval_agent_loads_a_plugin_suite_under_the_guard(suite, tmp_path):
    """eval-agent takes its suites where evaluate does: a plugin's, guarded (its loading exits here)."""
    from genenv_cli.catalogue.config import Config
    from genenv_cli.core.plugin_guard import PluginError
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import eval_agent

    (tmp_path / "run").mkdir()
    with pytest.raises(PluginError, match=r"plugin `hostile-loadexits`.*load\(\) raised SystemExit\(3\)"):
        eval_agent._load(RunDir(tmp_path / "run"), Config(), suite)
