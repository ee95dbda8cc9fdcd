"""Files the episode engine wrote are checked when they are read, whatever their manifest vouches for: a mask that
is not 0/1 or not as long as the tokens, turns out of order, an episode's reward or partial credit out of [0, 1]
are refused by `score` and `update-agent` (exit 2, naming the file and the row, nothing committed); the report
draws its episodes panel only from committed, whole, regular files and marks an epoch it cannot draw from.

One three-turn epoch is played per test with an engine that needs no model (tests/hostile_plugins.py), about a
second each."""

from __future__ import annotations

import os

import polars as pl
import pytest
from test_plugins_in_stages import _cli, _run, _tasks

import hostile_plugins
from episode_domains import NAME, register
from genenv_cli.catalogue.domains import DOMAINS
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_parquet, write_parquet
from genenv_cli.stages import generate_tasks, rollout, score
from hostile import vouch
from stagekit import complete_as, jsonl


@pytest.fixture
def played(tmp_path, monkeypatch) -> RunDir:
    register()
    run = _run(tmp_path, NAME, "agent_update.batch_size=4")
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(NAME)), "rejects": ""})
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine())
    rollout.run(run, run.load_config(), 1)
    yield run
    DOMAINS.unregister(NAME)


def _edit(run: RunDir, rel: str, schema: str, change) -> None:
    path = run.root / rel
    df = read_parquet(path, schema) if schema else pl.read_parquet(path)
    write_parquet(change(df), path, schema)
    vouch(run.root, rel)


ROLLOUTS = "epochs/0001/rollouts.parquet"


def _first_row(column: str, value):
    def change(df):
        values = df[column].to_list()
        values[0] = value(values[0]) if callable(value) else value
        return df.with_columns(pl.Series(column, values, dtype=df.schema[column]))
    return change


ROLLOUT_EDITS = {  # the edit -> what the refusal says
    "mask of 5": (_first_row("agent_mask", lambda m: [5, *m[1:]]), "agent_mask holds a value other than 0 and 1"),
    "mask too short": (_first_row("agent_mask", lambda m: m[:-1]), "agent_mask is not as long as"),
    "reward 5.0": (_first_row("reward", 5.0), "reward is not a finite number in [0, 1]"),
    "partial 7.5": (_first_row("partial", 7.5), "partial is not a finite number in [0, 1]"),
    "turns 0": (_first_row("turns", 0), "turns is below 1"),
    "turns past the answers": (_first_row("turns", 7), "actions does not hold one answer per turn"),
    "unknown end": (_first_row("end", "won"), "end is not one of"),
}


@pytest.mark.parametrize("edit", sorted(ROLLOUT_EDITS))
def test_score_refuses_a_vouched_rollouts_file_with_a_damaged_episode(played, edit):
    change, said = ROLLOUT_EDITS[edit]
    _edit(played, ROLLOUTS, "rollouts", change)
    code, out = _cli("score", "--epoch", 1, "--run", played.root)
    assert code == 2 and said in out and "rollouts.parquet" in out and "row 0" in out, out
    assert "bug in genenv" not in out
    assert not played.manifest_path(1, "score").exists()


@pytest.mark.slow  # update-agent imports torch and transformers before it reads its pool (10 s on 2 loaded cores)
@pytest.mark.parametrize("edit,said", [("mask of 5", "agent_mask holds a value other than 0 and 1"),
                                       ("mask too short", "agent_mask is not as long as")])
def test_update_agent_refuses_a_vouched_pool_with_a_damaged_mask(played, edit, said):
    score.run(played, played.load_config(), 1)
    rel = played.rel(played.pool_partition("agent_train", 1))
    change = ROLLOUT_EDITS[edit][0]
    _edit(played, rel, "agent_train", change)
    code, out = _cli("update-agent", "--epoch", 1, "--run", played.root)
    assert code == 2 and said in out and "agent_train" in out and "bug in genenv" not in out, out
    assert not played.manifest_path(1, "update-agent").exists()


def _report(run: RunDir):
    from genenv_cli.actions.report import build_report

    return build_report(run, run.load_config(), None)


@pytest.mark.slow  # the whole report: matplotlib and every chart, 15 s on 2 loaded cores
def test_the_report_marks_an_epoch_cut_in_half_and_draws_nothing_from_it(played):
    assert _report(played)["numbers"]["episodes"]["episodes"][0]["episodes"] == 4  # drawn while whole
    path = played.file("rollouts", 1)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    res = _report(played)
    got = res["numbers"]["episodes"]
    assert got["episodes"] == [{}] and "1" in got["not_drawn"], got
    assert "Epoch 1: not drawn, incomplete" in res["html"].read_text()


def _damage(run: RunDir, damage: str) -> None:
    path = run.file("rollouts", 1)
    if damage == "cut in half":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "not committed":
        run.manifest_path(1, "rollout").unlink()
    elif damage == "observations not JSON":
        _edit(run, ROLLOUTS, "rollouts", _first_row("observations", "{not json"))
    elif damage == "200,000 turns":
        _edit(run, ROLLOUTS, "rollouts", _first_row("turns", 200_000))
    else:
        run.manifest_path(1, "rollout").unlink()
        path.unlink()
        os.mkfifo(path.parent / "rollouts.shard-1-of-1.parquet")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", ["cut in half", "not committed", "observations not JSON", "200,000 turns",
                                    "a FIFO as the only shard"])
def test_the_episodes_panel_marks_an_epoch_it_cannot_draw_from_and_draws_nothing_from_it(played, damage):
    from genenv_cli.views.report.episodes import episodes_body, read_episodes

    whole = read_episodes(played, 1)
    assert whole["episodes"] == 4 and whole["turns"] == {3: 4} and whole["calls"] == 8
    _damage(played, damage)
    got = read_episodes(played, 1)  # returns: nothing blocks on the FIFO, nothing raises
    assert set(got) == {"incomplete"}, got
    numbers, _, body = episodes_body([1, 2], {1: got, 2: whole})
    assert numbers["episodes"][0] == {} and numbers["not_drawn"] == {"1": got["incomplete"]}
    assert "Epoch 1: not drawn, incomplete" in body and len(body) < 200_000


def test_a_single_turn_run_with_rollouts_cut_in_half_has_no_episodes_panel(tmp_path, monkeypatch):
    from genenv_cli.views.report.episodes import read_episodes

    run = _run(tmp_path, "arith")
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks("arith")), "rejects": ""})
    hostile_plugins.patch_episode_engine(monkeypatch, hostile_plugins.EpisodeEngine("<answer>2</answer>"))
    rollout.run(run, run.load_config(), 1)
    path = run.file("rollouts", 1)
    path.write_bytes(path.read_bytes()[:100])
    assert read_episodes(run, 1) is None
