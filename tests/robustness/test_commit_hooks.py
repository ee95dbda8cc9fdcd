"""The commit knows nothing above it: contract.py imports neither metrics.json's module, the trackers nor the
pruning, at any depth; what follows a commit subscribes to it (`commit_hooks`). A subscribed derived file is
committed with the outputs and rewritten by a no-op rerun; a `BEFORE` hook that raises stops the stage before any
work; an `AFTER` hook sees the committed manifest."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError
from genenv_cli.rundir import RunDir, commit_hooks, contract
from genenv_cli.rundir.contract import StagePlan, execute


def test_the_contract_imports_nothing_that_follows_a_commit():
    tree = ast.parse(Path(contract.__file__).read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {f"{node.module}.{a.name}" for a in node.names} | {node.module or ""}
    above = [n for n in names if any(w in n.split(".") for w in ("metrics", "trackers", "pruning", "stages"))]
    assert above == []


@pytest.fixture
def run(tmp_path) -> RunDir:
    root = tmp_path / "run"
    r = CliRunner().invoke(app, ["init", str(root), "--domain", "arith"])
    assert r.exit_code == 0, r.output
    return RunDir(root.resolve())


@pytest.fixture
def hooks(monkeypatch):
    """The hook lists as they are, restored after the test."""
    for name in ("DERIVED", "BEFORE", "AFTER"):
        monkeypatch.setattr(commit_hooks, name, list(getattr(commit_hooks, name)))
    return commit_hooks


def _stage(run: RunDir, text: str, force: bool = True):
    out = run.epoch_dir(1) / "scores.txt"
    plan = StagePlan("score", 1, outputs={"out": out})
    return execute(run, run.load_config(), "score", 1, lambda: plan, lambda s: s.path("out").write_text(text),
                   force=force)


def test_a_subscribed_derived_file_is_committed_and_kept_up_to_date(run, hooks):
    seen = []

    def derive(run_, cfg, epoch, stage, manifest):
        seen.append(manifest is not None)
        return {run_.epoch_dir(epoch) / "stage_count.json": json.dumps({"stage": stage}).encode()}

    hooks.subscribe(hooks.DERIVED, derive)
    hooks.subscribe(hooks.DERIVED, derive)  # once, however often it is subscribed
    _stage(run, "1")
    derived = run.epoch_dir(1) / "stage_count.json"
    assert json.loads(derived.read_text()) == {"stage": "score"}
    assert seen.count(True) == 1
    derived.write_text("edited by hand")
    assert _stage(run, "1", force=False).skipped
    assert json.loads(derived.read_text()) == {"stage": "score"}


def test_a_before_hook_stops_the_stage_before_any_work_and_after_hooks_see_the_commit(run, hooks):
    committed = []
    hooks.subscribe(hooks.AFTER, lambda run_, cfg: committed.append(run_.manifest_path(1, "score").exists()))
    _stage(run, "1")
    assert committed == [True]

    def refuse(cfg, what):
        raise ConfigError(f"{what}: refused by a hook")

    hooks.subscribe(hooks.BEFORE, refuse)
    before = run.manifest_path(1, "score").read_text()
    with pytest.raises(ConfigError, match="refused by a hook"):
        _stage(run, "2")
    assert (run.epoch_dir(1) / "scores.txt").read_text() == "1"
    assert run.manifest_path(1, "score").read_text() == before
