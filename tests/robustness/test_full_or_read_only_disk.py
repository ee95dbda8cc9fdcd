"""A full or read-only disk, and a write that cannot finish: reading a finished run works on read-only storage and
changes nothing; a full disk during a stage is named with the folder and leaves the run as it was; a record that
cannot be written leaves no file behind. Each run case runs on a copy of one finished tiny run."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostile import BAMBOOGLE, E1, cli, snapshot

# ---------------------------------------------------------------- read-only storage

def _readonly(run: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI on `run` mounted read-only (a user namespace with a read-only bind mount when root; plain
    permissions otherwise). Skips where neither can be had."""
    cmd = [sys.executable, "-m", "genenv_cli", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if os.geteuid() != 0:
        for p in [run, *run.rglob("*")]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode & ~0o222)
        return subprocess.run(cmd, capture_output=True, text=True, env=env)
    if not shutil.which("unshare"):
        pytest.skip("root without unshare: cannot make a read-only view")
    script = (f'mount --bind "{run}" "{run}" && mount -o remount,bind,ro "{run}" "{run}" && '
              f'touch "{run}/probe" 2>/dev/null && exit 99; exec "$@"')
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *cmd], capture_output=True, text=True, env=env)
    if r.returncode == 99 or "unshare:" in r.stderr or "mount:" in r.stderr:
        pytest.skip(f"no read-only bind mount here: {r.stderr.strip()[:200]}")
    return r


@pytest.mark.parametrize("args", [
    ["status"], ["status", "--json"], ["score", "--epoch", "1"], ["update-agent", "--epoch", "1"], ["report"],
    ["evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", "PREDS"],
])
def test_reading_a_finished_run_works_on_read_only_storage(run, tmp_path, monkeypatch, args):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "0", "output": "<answer>x</answer>"}) + "\n")
    args = [str(preds) if a == "PREDS" else a for a in args]
    before = snapshot(run)
    env_cache = tmp_path / "cache"
    monkeypatch.setenv("GENENV_CACHE", str(env_cache))
    r = _readonly(run, *args, "--run", str(run))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if args[0] in ("score", "update-agent"):
        assert "up to date" in r.stdout
    if args[0] in ("report", "evaluate"):
        assert "read-only" in r.stderr and str(env_cache) in r.stderr + r.stdout
    assert snapshot(run) == before


# ---------------------------------------------------------------- a full disk

def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_during_score_is_named(run, monkeypatch):
    import genenv_cli.stages.score as score_mod

    monkeypatch.setattr(score_mod, "write_parquet", _enospc)
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "no space left on device at" in r.stderr and str(run / E1) in r.stderr
    assert snapshot(run) == before


def test_full_disk_during_update_agent_is_named(run, monkeypatch):
    import genenv_cli.machinery.training.publishing as common

    def save(policy, folder, **kw):
        folder.mkdir(parents=True, exist_ok=True)
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                           "\"No space left on device\" })")

    monkeypatch.setattr(common, "save_checkpoint", save)
    before = snapshot(run)
    r = cli("update-agent", "--epoch", 1, "--run", run, "--force")
    assert "no space left on device at" in r.stderr
    assert snapshot(run) == before
    assert not [p for p in (run / E1).iterdir() if ".tmp-" in p.name]


# ---------------------------------------------------------------- a write that cannot finish

def test_write_jsonl_leaves_nothing_behind_when_a_record_cannot_be_written(tmp_path):
    from genenv_cli.rundir.datafiles import write_jsonl

    with pytest.raises(UnicodeEncodeError):
        write_jsonl(tmp_path / "x.tmp-1", [{"a": 1}, {"a": "\ud800"}])
    assert not list(tmp_path.iterdir())
