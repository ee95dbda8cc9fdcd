"""The finished run the hostile tests damage, built once per test process, and a fresh copy of it per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from paths import FIXTURES


@pytest.fixture(scope="session")
def hostile_finished_run(tmp_path_factory, tiny_model) -> Path:
    """One finished tool_call epoch (all five stages) on the tiny model, plus an evaluation of predictions: what
    the hostile tests damage copies of. Built once (about 40 s on 2 cores): every test that uses it is slow
    (tests/conftest.py's SLOW_FIXTURES)."""
    import json

    from typer.testing import CliRunner

    from genenv_cli.cli import app

    def cli(*args):
        r = CliRunner().invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output + str(r.exception)

    root = tmp_path_factory.mktemp("finished") / "run"
    sets = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.seed_share=0.5",
            "generate.max_new_tokens=24", "generate.max_rounds=1", "rollout.group_size=3", "rollout.max_new_tokens=12",
            "env_update.kl_max=100", "env_update.learning_rate=0.001", "evaluate.max_new_tokens=4", "run.eval_every=0"]
    cli("init", root, "--agent-model", tiny_model, "--env-model", tiny_model, *[a for s in sets for a in ("--set", s)])
    cli("run", "--epochs", "1", "--run", root, "-q")
    preds = root.parent / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": str(i), "output": "<answer>x</answer>"}) + "\n" for i in range(6)))
    cli("evaluate", "--bench", "bamboogle", "--data", FIXTURES / "bamboogle" / "bamboogle.csv",
        "--predictions", preds, "--run", root, "-q")
    return root


@pytest.fixture
def run(hostile_finished_run, tmp_path) -> Path:
    """A fresh copy of the finished run, for one test to damage."""
    dst = tmp_path / "run"
    shutil.copytree(hostile_finished_run, dst)
    return dst
