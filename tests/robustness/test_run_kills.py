"""A kill anywhere in a whole `genenv run`: two epochs of full fine-tuning with run.keep_checkpoints = 1, killed at
every N-th file-system operation, then run again; the run must end exactly as an uninterrupted one.

`genenv run --epochs 2` runs here through its own command line, in this process: the stage commands it would start
as child processes run in-process through the same command line (`runner._run_child` is replaced), so the
fault injector of test_faults.py sees every operation of the run, its stages, their commits, the pruning
after the second epoch's updates (the deletes inside its recursive delete included) and the logs. The N-th
operation raises `KillPoint`, and every later one too, as after SIGKILL; the dead process's leftovers then carry a
PID no process has, and its locks are released (`test_faults._die`).

After each kill, `genenv run --epochs 2` runs again, and then:
- it exits 0, every stage of both epochs is `done`, and no temporary or old copy is left;
- every output, pool partition, metrics.json and checkpoint is byte for byte what the clean run wrote (generation
  and training are seeded, so a stage redone gives the same bytes), and the manifests and pruned.json agree with
  the clean run's once the fields that name a time or a process are left out.

The slow tier kills at every `GENENV_KILL_EVERY`-th operation (by default a stride that gives about 16 points),
from the `GENENV_KILL_FROM`-th (default 1: a failing point can be rerun alone); `nox -s kills` sets the stride to 1:
every operation.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from test_faults import Injector, KillPoint, _die

from genenv_cli.actions import runner
from genenv_cli.catalogue.stages import EPOCH_STAGES, stage_module
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import check_state

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # minutes on 2 cores: `nox -s heavy`
POINTS = 16  # kill points in the slow tier when GENENV_KILL_EVERY is not set
VOLATILE = {"started", "finished", "seconds", "host", "since", "pruned", "supersedes", "writer"}


def _in_process(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """A stage's command line (`python -m genenv_cli STAGE ...`), run here instead of in a child process."""
    code = app(cmd[cmd.index("genenv_cli") + 1:], standalone_mode=False)
    return code or 0


def genenv_run(root: Path) -> int:
    code = app(["run", "--epochs", "2", "--run", str(root), "-q"], standalone_mode=False)
    return code or 0


def _normal(value):
    """A manifest or pruned.json without what names a time or a process (fingerprints keep content and size). An
    input that is a manifest (the checkpoint's, for the next epoch) holds its writer's times: its path is kept."""
    if isinstance(value, dict):
        if str(value.get("path", "")).endswith(".json") and "/manifests/" in str(value.get("path")):
            return {"path": value["path"]}
        out = {k: _normal(v) for k, v in value.items() if k not in VOLATILE and k != "mtime_ns"}
        if "files" in out and isinstance(out["files"], dict):   # a folder's fingerprint: [size, mtime] per file
            out["files"] = {k: v[0] for k, v in out["files"].items()}
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def signature(root: Path) -> dict[str, object]:
    """Every file of the run but its logs and lock files: JSON records normalized, everything else hashed."""
    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or rel.parts[0] == "logs" or p.name.startswith(".lock"):
            continue
        if p.suffix == ".json" and ("manifests" in rel.parts or p.name == "pruned.json"):
            out[str(rel)] = _normal(json.loads(p.read_text()))
        else:
            out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _diff(a, b, at: str = "") -> str:
    """Where two normalized records first differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            if a.get(k) != b.get(k):
                return _diff(a.get(k), b.get(k), f"{at}.{k}")
    return f"{at or 'file'}: {str(a)[:80]} != {str(b)[:80]}"


@pytest.fixture(scope="module")
def initialized(tmp_path_factory, arith_model) -> Path:
    from tiny import TWO_EPOCHS

    root = tmp_path_factory.mktemp("run-kills") / "run"
    settings = [s for s in TWO_EPOCHS if not s.startswith("run.keep_checkpoints")] + ["run.keep_checkpoints=1",
                                                                                      "run.keep_checkpoints_every=0"]
    code = app(["init", str(root), "--domain", "arith", "--agent-model", str(arith_model), "--env-model",
                str(arith_model), *[a for s in settings for a in ("--set", s)]], standalone_mode=False)
    assert not code
    return root.resolve()


def test_a_kill_at_every_nth_operation_of_a_whole_run_then_a_rerun_equals_a_clean_run(initialized, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setattr(runner, "_run_child", _in_process)
    clean = tmp_path / "clean"
    shutil.copytree(initialized, clean)
    inj = Injector(clean, dir_fd=True)
    with monkeypatch.context() as mp:
        inj.install(mp)
        assert genenv_run(clean) == 0
    total = inj.count
    if os.environ.get("GENENV_KILL_LOG"):  # where each operation is, to choose points
        Path(os.environ["GENENV_KILL_LOG"]).write_text("".join(f"{i} {line}\n" for i, line in enumerate(inj.log, 1)))
    expected = signature(clean)
    assert not (clean / "epochs/0001/agent").exists() and (clean / "epochs/0002/agent").is_dir()  # pruned
    assert "epochs/0001/pruned.json" in expected
    every = int(os.environ.get("GENENV_KILL_EVERY") or max(1, total // POINTS))
    points = list(range(int(os.environ.get("GENENV_KILL_FROM") or 1), total + 1, every))
    held = []
    for n in points:
        root = tmp_path / f"kill-{n}"
        shutil.copytree(initialized, root)
        inj = Injector(root, kill_at=n, dir_fd=True)
        with monkeypatch.context() as mp:
            inj.install(mp)
            mp.setenv("GENENV_DEBUG", "1")   # the kill passes through the error path as it is
            with pytest.raises(KillPoint):
                genenv_run(root)
        _die(root)
        where = f"killed at {inj.log[-1]} ({n} of {total})"
        assert genenv_run(root) == 0, where
        run = RunDir(root)
        cfg = run.load_config()
        for e in (1, 2):
            for stage in EPOCH_STAGES:
                state = check_state(run, cfg, stage_module(stage).plan(run, cfg, e))
                assert state.state == "done", f"{where}: epoch {e} {stage} {state}"
        got = signature(root)
        left = [k for k in got if ".tmp-" in k or ".old-" in k]
        assert not left, f"{where}: left {left}"
        differ = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
        assert not differ, f"{where}: differs from the clean run in {differ}: " + "; ".join(
            f"{k}: {_diff(expected.get(k), got.get(k))}" for k in differ[:3])
        held.append(n)
        shutil.rmtree(root)
    print(f"\nkill points: {len(held)} of {total} operations (every {every}), all held")
    assert held == points
