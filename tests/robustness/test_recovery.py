"""Recovery of a killed writer's half-done commit is ordered by commit, and a writer is known by more than its PID
(and a lock refused to a second process leaves the holder's lock file alone).

A killed stage leaves an intent (its new manifest under `.STAGE.json.tmp-PID`) and old copies (`.NAME.old-PID`).
The next run undoes them only while the committed manifest is still the one the intent was written to replace;
an intent that a later commit superseded is discarded, never undone (undoing it would delete the later commit's
outputs and put the killed writer's stale copies in their place). A live process holding a dead writer's PID
(PIDs are reused) is told apart by its start time, and a PID out of any kernel's range is a dead writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.rundir import RunDir, old_name, tmp_name
from genenv_cli.rundir.contract import StagePlan, check_state, recover_stage
from stagekit import fake_stage

STAGE = "score"


@pytest.fixture
def run(tmp_path) -> RunDir:
    root = tmp_path / "run"
    r = CliRunner().invoke(app, ["init", str(root), "--domain", "arith"])
    assert r.exit_code == 0, r.output
    return RunDir(root.resolve())


def _output(run: RunDir, kind: str) -> Path:
    return run.epoch_dir(1) / ("scores.txt" if kind == "file" else "agent")


def _content(kind: str, text: str):
    if kind == "file":
        return text

    def write(path: Path) -> None:
        path.mkdir()
        (path / "weights.bin").write_text(text)
    return write


def _read(path: Path) -> str:
    return (path / "weights.bin").read_text() if path.is_dir() else path.read_text()


def _commit(run: RunDir, kind: str, text: str) -> None:
    fake_stage(run, 1, STAGE, {"out": (_output(run, kind), _content(kind, text))})


def _plan(run: RunDir, kind: str) -> StagePlan:
    return StagePlan(STAGE, 1, outputs={"out": _output(run, kind)})


def _killed_before_its_commit_point(run: RunDir, kind: str, pid: int, writer: dict | None) -> None:
    """What a writer with this PID leaves when it is killed between its swap and its commit point: its intent
    (superseding the manifest committed now), the previous output moved aside, its own output renamed in."""
    final = _output(run, kind)
    manifest = run.manifest_path(1, STAGE)
    intent = json.loads(manifest.read_text())
    intent.update({"supersedes": _digest(manifest), "finished": "2099-01-01T00:00:00"})
    intent["writer"] = writer
    if writer is None:
        del intent["writer"]
    tmp_name(manifest, pid).write_text(json.dumps(intent))
    os.replace(final, old_name(final, pid))
    _content(kind, "the killed writer's output")(final) if kind == "folder" else final.write_text(
        "the killed writer's output")


def _digest(manifest: Path) -> str:
    return hashlib.sha256(manifest.read_bytes()).hexdigest()


def _start(pid: int) -> int:
    """Field 22 of /proc/PID/stat, read here independently of genenv."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return int(fh.read().rsplit(b")", 1)[1].split()[19])


def _alive(pid: int, record: dict | None = None) -> bool:
    from genenv_cli.core import process_identity as writers

    return writers.alive(pid, record)


def _leftovers(run: RunDir) -> list[str]:
    return sorted(p.name for p in run.root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_an_intent_that_a_later_commit_superseded_is_discarded_not_undone(run, kind):
    """The probe's break: a later commit came after the killed writer's intent (its PID was held by a live
    process meanwhile, so nothing resolved it then). Recovery must keep the later commit."""
    _commit(run, kind, "first")
    dead = 4_000_000  # in range, and no process has it here
    assert not os.path.exists(f"/proc/{dead}")
    _killed_before_its_commit_point(run, kind, dead, None)
    intent = tmp_name(run.manifest_path(1, STAGE), dead)
    stale = intent.read_bytes()
    # a later writer committed while the leftovers stood (as when the dead writer's PID looked alive)
    final = _output(run, kind)
    aside = old_name(final, dead)
    kept = run.root / "kept-aside"
    os.replace(aside, kept)
    _commit(run, kind, "later")
    os.replace(kept, aside)
    intent.write_bytes(stale)
    later_manifest = run.manifest_path(1, STAGE).read_bytes()

    done = recover_stage(run, run.load_config(), _plan(run, kind))

    assert _read(final) == "later", done
    assert run.manifest_path(1, STAGE).read_bytes() == later_manifest
    assert check_state(run, run.load_config(), _plan(run, kind)).state == "done"
    assert _leftovers(run) == [] and any("superseded" in line for line in done)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_an_intent_whose_manifest_is_still_committed_is_undone(run, kind):
    _commit(run, kind, "first")
    _killed_before_its_commit_point(run, kind, 4_000_000, None)
    done = recover_stage(run, run.load_config(), _plan(run, kind))
    assert _read(_output(run, kind)) == "first" and any("put back" in line for line in done)
    assert check_state(run, run.load_config(), _plan(run, kind)).state == "done"
    assert _leftovers(run) == []


@pytest.fixture
def stranger():
    """An unrelated live process: the PID a dead writer had, reused."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_process_holding_a_dead_writers_pid_is_told_apart_by_its_start_time(run, stranger):
    """The whole sequence of the probe: the writer is killed before its commit point, its PID is taken by an
    unrelated process, the stage reruns and commits, the process exits, and the stage runs again."""
    kind = "file"
    _commit(run, kind, "first")
    pid = stranger.pid
    dead_writer = {"pid": pid, "start": _start(pid) - 1, "host": os.uname().nodename}  # the same PID, started earlier  # the same PID, started earlier: another process
    _killed_before_its_commit_point(run, kind, pid, dead_writer)
    _commit(run, kind, "rerun")                 # resolves the dead writer's leftovers first, then commits
    assert _leftovers(run) == []
    stranger.kill()
    stranger.wait()
    recover_stage(run, run.load_config(), _plan(run, kind))   # the next run, with nothing to do
    assert _read(_output(run, kind)) == "rerun"
    assert check_state(run, run.load_config(), _plan(run, kind)).state == "done"


def test_a_writer_recorded_with_its_own_start_time_is_alive(stranger):
    from genenv_cli.core import process_identity as writers

    me = writers.identity(os.getpid())
    assert writers.alive(os.getpid(), me)
    assert writers.alive(stranger.pid, writers.identity(stranger.pid))
    assert not writers.alive(stranger.pid, {**writers.identity(stranger.pid), "start": 1})
    assert not writers.alive(stranger.pid, {**writers.identity(stranger.pid), "host": "another-machine"})
    assert not writers.alive(stranger.pid, {**writers.identity(stranger.pid), "boot": "an-earlier-boot"})


@pytest.mark.parametrize("pid", [0, -1, 1 << 22, 2_147_483_648, 9_999_999_999, 10**29])
def test_a_pid_out_of_range_is_a_dead_writer(pid):
    assert _alive(pid) is False


@pytest.mark.parametrize("suffix", ["9999999999", "2147483648", "0", "99999999999999999999"])
def test_leftovers_with_a_pid_out_of_range_are_removed_without_an_error(run, suffix):
    """`.scores.txt.tmp-9999999999` made `os.kill` raise OverflowError ("a bug in genenv")."""
    _commit(run, "file", "first")
    final = _output(run, "file")
    final.with_name(f".{final.name}.tmp-{suffix}").write_text("junk")
    manifest = run.manifest_path(1, STAGE)
    manifest.with_name(f".{manifest.name}.tmp-{suffix}").write_text("{")
    recover_stage(run, run.load_config(), _plan(run, "file"))
    assert _leftovers(run) == []
    assert _read(final) == "first"


def test_the_manifest_records_what_it_supersedes_and_its_writer(run):
    _commit(run, "file", "first")
    first = run.manifest_path(1, STAGE)
    digest = _digest(first)
    _commit(run, "file", "second")
    m = json.loads(first.read_text())
    assert m["supersedes"] == digest
    assert m["writer"]["pid"] == os.getpid() and m["writer"]["start"] == _start(os.getpid())


def test_a_shard_refused_by_its_lock_leaves_the_holders_lock_file(run):
    """A second process on the same rollout shard fails on the shard's own lock; it used to remove that lock file
    on its way out, so a third process could lock a new file and run beside the holder."""
    import fcntl

    from genenv_cli.core.errors import LockError
    from genenv_cli.rundir import EpochLock

    stage = "rollout.shard-1-of-2"
    with EpochLock(run.epoch_dir(1), stage, root=run.root, shared=True):
        own = run.epoch_dir(1) / f".lock.{stage}"
        inode = own.stat().st_ino
        # a second holder of the same shard (flock: another open file description excludes this one)
        with pytest.raises(LockError, match="epoch 1 is locked by"), EpochLock(run.epoch_dir(1), stage, root=run.root, shared=True):
            pass
        assert own.exists() and own.stat().st_ino == inode
        with open(own, "rb") as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not own.exists()   # the holder removes its own lock file when it leaves
