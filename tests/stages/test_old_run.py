"""A run written by an earlier genenv (tests/fixtures/old_run, made at commit 397d5bc, before the run
directory had one owner) is read and carried on by the current code: the file formats did not change.

`status` shows its finished stages as done (their manifests, fingerprints and config digests still match), the
report reads its numbers and its evaluation result, a rerun of a finished stage is a no-op, and the next stage
(`score`) runs on its files and writes what the earlier genenv wrote there: the same metrics.json and the same
task_stats.parquet.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from genenv_cli.cli import app
from paths import FIXTURES

FIXTURE = FIXTURES / "old_run"


@pytest.fixture
def old_run(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", run)
    return run


def cli(*args: object, code: int = 0):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, result.output + str(result.exception)
    return result


def states(run: Path) -> dict[str, str]:
    rows = json.loads(cli("status", "--run", run, "--json").stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]
    return {name: s["state"] for name, s in rows[0]["stages"].items()}


@pytest.mark.slow  # the report draws its charts (matplotlib): about 3 s
def test_status_and_report_read_a_run_written_before(old_run):
    assert states(old_run) == {"generate-tasks": "done", "rollout": "done", "score": "missing",
                               "update-agent": "missing", "update-env": "missing", "eval-agent": "missing"}
    result = json.loads(cli("report", "--run", old_run, "--json").stdout)
    assert Path(result["html"]) == (old_run / "report" / "report.html").resolve() and Path(result["html"]).is_file()
    assert result["numbers"]["metrics"][0]["tasks"] == 4 and result["numbers"]["metrics"][0]["rollouts"] is None
    [read] = result["numbers"]["evals"]["files"]  # the evaluation result the earlier genenv wrote
    assert (read["bench"], read["model_tag"], read["metric"], read["value"]) == \
        ("heldout", "pred-predictions", "success_rate", 50.0)


# what score writes that the earlier genenv did not
ADDED_METRICS = {"shape_success_by_source"}
ADDED_TASK_STATS: set[str] = set()


def test_a_run_written_before_resumes_where_it_stopped(old_run):
    for stage in ("generate-tasks", "rollout"):  # finished: nothing to do (and no model is loaded)
        assert json.loads(cli(stage, "--epoch", 1, "--run", old_run, "--json").stdout.splitlines()[-1])["skipped"]
    done = json.loads(cli("score", "--epoch", 1, "--run", old_run, "--json").stdout.splitlines()[-1])
    assert not done["skipped"] and done["rollouts"] == 8
    epoch = old_run / "epochs" / "0001"
    # every number the earlier genenv wrote is written again; keys and columns added since come beside them
    now, then = (json.loads((epoch / "metrics.json").read_text()),
                 json.loads((FIXTURE / "after_score_metrics.json").read_text()))
    assert {k: now[k] for k in then} == then
    assert set(now) - set(then) <= ADDED_METRICS
    stats_then = pl.read_parquet(FIXTURE / "after_score_task_stats.parquet")
    stats_now = pl.read_parquet(epoch / "task_stats.parquet")
    assert_frame_equal(stats_now.select(stats_then.columns), stats_then)
    assert set(stats_now.columns) - set(stats_then.columns) <= ADDED_TASK_STATS
    assert states(old_run)["score"] == "done"
    assert json.loads(cli("score", "--epoch", 1, "--run", old_run, "--json").stdout.splitlines()[-1])["skipped"]
