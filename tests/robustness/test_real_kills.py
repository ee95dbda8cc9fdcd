"""Real SIGKILLs of a whole `genenv run` process group (the run and its stage's process, grading workers included)
that land inside generate-tasks, rollout and score of a new epoch, not only in the updates; after each, the run is
started again, and the run that finally completes equals one that was never killed.

A kill is aimed by the epoch's lock: once its record names the target stage (the stage's own process holds it,
before it reads anything), the group is killed after a short delay. It counts as landed in that stage when the
stage's manifest is still missing after the kill (the stage had not committed). Each stage is aimed at twice
(at once and 1 s after the lock names it), until a kill comes after its commit: on a fast machine score commits
in well under a second, so only the first is sure to land inside it. The test prints where
its kills landed, by stage, and its time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_run_kills import _diff, signature

from genenv_cli.catalogue.stages import EPOCH_STAGES, stage_module
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import check_state

# `heavy`: a minute or more on its own; `nox -s heavy` runs it (CI too), `nox -s tests` leaves it out
pytestmark = [pytest.mark.slow, pytest.mark.heavy]
TARGETS = ("generate-tasks", "rollout", "score")
DELAYS = (0.0, 1.0)  # seconds after the lock names the stage: as it loads, as it works


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1",
            "GENENV_PROGRESS_INTERVAL": "0"}


def _run(root: Path, epochs: int, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "genenv_cli", "run", "--epochs", str(epochs), "--run", str(root),
                           "-q"], capture_output=True, text=True, env=_env(), timeout=timeout)


def _holder(lock: Path) -> str | None:
    try:
        return json.loads(lock.read_text() or "{}").get("stage")
    except (OSError, ValueError):
        return None


def _kill_in(root: Path, stage: str, delay: float, epoch: int = 2) -> str:
    """Start `genenv run` in a process group of its own, SIGKILL the group `delay` s after the epoch's lock names
    `stage`; returns where the kill landed: the stage, "after <stage>" (it had committed), or "missed"."""
    proc = subprocess.Popen([sys.executable, "-m", "genenv_cli", "run", "--epochs", str(epoch), "--run", str(root),
                             "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                            start_new_session=True)
    lock = RunDir(root).epoch_dir(epoch) / ".lock"
    deadline = time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None and _holder(lock) != stage:
            time.sleep(0.005)
        if proc.poll() is not None or _holder(lock) != stage:
            return "missed"
        time.sleep(delay)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return stage if not RunDir(root).manifest_path(epoch, stage).exists() else f"after {stage}"


def test_real_kills_in_a_new_epochs_generate_rollout_and_score_then_a_rerun_equals_a_clean_run(tmp_path,
                                                                                             arith_model):
    from genenv_cli.cli import app
    from tiny import TWO_EPOCHS

    started = time.monotonic()
    base = tmp_path / "base"
    code = app(["init", str(base), "--domain", "arith", "--agent-model", str(arith_model), "--env-model",
                str(arith_model), *[a for s in TWO_EPOCHS for a in ("--set", s)]], standalone_mode=False)
    assert not code
    first = _run(base, 1)
    assert first.returncode == 0, first.stderr[-2000:]
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    shutil.copytree(base, clean)
    shutil.copytree(base, killed)
    done = _run(clean, 2)
    assert done.returncode == 0, done.stderr[-2000:]
    landed: Counter[str] = Counter()
    for stage in TARGETS:  # each kill is followed by the next run, which resumes where the last one stopped
        for delay in DELAYS:
            where = _kill_in(killed, stage, delay)
            landed[where] += 1
            if where != stage:  # the stage committed before the kill (or was done): on to the next one
                break
    final = _run(killed, 2)
    assert final.returncode == 0, final.stderr[-2000:]
    print(f"\nreal SIGKILLs by where they landed: {dict(landed)}; {time.monotonic() - started:.0f} s in all")
    for stage in TARGETS:
        assert landed[stage] >= 1, f"no kill landed inside {stage}: {dict(landed)}"
    run = RunDir(killed)
    cfg = run.load_config()
    for e in (1, 2):
        for stage in EPOCH_STAGES:
            state = check_state(run, cfg, stage_module(stage).plan(run, cfg, e))
            assert state.state == "done", f"epoch {e} {stage}: {state}"
    expected, got = signature(clean), signature(killed)
    left = [k for k in got if ".tmp-" in k or ".old-" in k]
    assert not left, f"left {left}"
    differ = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    assert not differ, f"differs from the clean run in {differ}: " + "; ".join(
        f"{k}: {_diff(expected.get(k), got.get(k))}" for k in differ[:3])
