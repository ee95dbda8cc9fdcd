"""The commit knows nothing above it: contract.py imports neither metrics.json's module, the trackers nor the
pruning, at any depth; what follows a commit is a row of `catalogue/commit_subscribers.py`, resolved by the
commit when it runs. A subscribed derived file is committed with the outputs and rewritten by a no-op rerun; a
`before` subscriber that raises stops the stage before any work; an `after` one sees the committed manifest; a
process that imported nothing but the contract commits metrics.json."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.commit_subscribers import COMMIT_SUBSCRIBERS
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError, RegistryError
from genenv_cli.rundir import RunDir, contract
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


HOOKS = '''
import json

SEEN = []


def derive(run, cfg, epoch, stage, manifest):
    SEEN.append(("derived", manifest is not None))
    return {run.epoch_dir(epoch) / "stage_count.json": json.dumps({"stage": stage}).encode()}


def after(run, cfg):
    SEEN.append(("after", run.manifest_path(1, "score").exists()))


def refuse(cfg, what):
    from genenv_cli.core.errors import ConfigError

    raise ConfigError(f"{what}: refused by a hook")
'''


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    """A throwaway module of subscribers, written to a temporary folder; the rows it registers are removed after."""
    folder = tmp_path / "hooks"
    folder.mkdir()
    (folder / "throwaway_hooks.py").write_text(HOOKS)
    monkeypatch.syspath_prepend(str(folder))
    import importlib

    module = importlib.import_module("throwaway_hooks")
    module.SEEN.clear()
    added: list[str] = []

    def register(name: str, target: str, when: str) -> None:
        COMMIT_SUBSCRIBERS.register(name, f"throwaway_hooks:{target}", when=when)
        added.append(name)

    yield register, module.SEEN
    for name in added:
        COMMIT_SUBSCRIBERS.unregister(name)
    monkeypatch.delitem(__import__("sys").modules, "throwaway_hooks")


def _stage(run: RunDir, text: str, force: bool = True):
    out = run.epoch_dir(1) / "scores.txt"
    plan = StagePlan("score", 1, outputs={"out": out})
    return execute(run, run.load_config(), "score", 1, lambda: plan, lambda s: s.path("out").write_text(text),
                   force=force)


def test_a_subscribed_derived_file_is_committed_and_kept_up_to_date(run, hooks):
    register, seen = hooks
    register("stage-count", "derive", "derived")
    _stage(run, "1")
    derived = run.epoch_dir(1) / "stage_count.json"
    assert json.loads(derived.read_text()) == {"stage": "score"}
    assert seen.count(("derived", True)) == 1
    derived.write_text("edited by hand")
    assert _stage(run, "1", force=False).skipped
    assert json.loads(derived.read_text()) == {"stage": "score"}


def test_a_before_hook_stops_the_stage_before_any_work_and_after_hooks_see_the_commit(run, hooks):
    register, seen = hooks
    register("seen-after", "after", "after")
    _stage(run, "1")
    assert ("after", True) in seen
    register("refuse", "refuse", "before")
    before = run.manifest_path(1, "score").read_text()
    with pytest.raises(ConfigError, match="refused by a hook"):
        _stage(run, "2")
    assert (run.epoch_dir(1) / "scores.txt").read_text() == "1"
    assert run.manifest_path(1, "score").read_text() == before


def test_a_row_must_say_when_it_is_called():
    with pytest.raises(RegistryError, match="when 'sometimes' is refused"):
        COMMIT_SUBSCRIBERS.register("odd", "throwaway_hooks:after", when="sometimes")
    assert "odd" not in COMMIT_SUBSCRIBERS.rows


COMMIT_ALONE = """
import json, sys
from pathlib import Path
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, execute

run = RunDir(Path(sys.argv[1]))
out = run.epoch_dir(1) / "scores.txt"
plan = StagePlan("score", 1, outputs={"out": out})
execute(run, run.load_config(), "score", 1, lambda: plan, lambda s: s.path("out").write_text("1"), force=True)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("genenv_cli.") and "metrics" in m)))
"""


def test_a_commit_writes_metrics_json_whatever_was_imported_before(run):
    """A process that imports only the contract, as a stage of a plugin does, still commits metrics.json: the
    commit reads its subscribers' rows, no stage module has to import them first."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(contract.__file__).parents[2]),
                                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", COMMIT_ALONE, str(run.root)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["genenv_cli.rundir.metrics"]
    metrics = json.loads(run.metrics_path(1).read_text())
    assert metrics["epoch"] == 1 and "success_rate" in metrics
