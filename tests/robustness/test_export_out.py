"""`genenv export --out` never lands in the run: not the run itself, not a folder inside it (a checkpoint), not a
folder that contains it, with or without `--force`, and wherever a link leads. Its replacement of an existing
export is one commit: a kill at any point leaves the previous export or the new one at `--out`, and the next
export to the same `--out` cleans up what a killed one left beside it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from genenv_cli.rundir import atomic
from hostile import E1, cli, snapshot

DEAD = 4_000_000  # above Linux's PID ceiling: never a live writer


def _export(run: Path, out: Path, *extra: object, expect: int | None = 2):
    return cli("export", "--run", run, "--epoch", "1", "--model", "agent", "--no-merge", "--out", out, *extra,
               expect=expect)


@pytest.mark.parametrize("where", ["the run", "a checkpoint", "a new folder in the run", "the run's parent",
                                   "a link to the run"])
def test_export_out_is_never_the_run_inside_it_or_containing_it(run, tmp_path, where):
    before = snapshot(run)
    out = {"the run": run, "a checkpoint": run / E1 / "agent", "a new folder in the run": run / "exported",
           "the run's parent": run.parent, "a link to the run": tmp_path / "alias"}[where]
    if where == "a link to the run":
        (tmp_path / "alias").symlink_to(run)
        out = tmp_path / "alias" / "agent-e1"
    outside = sorted(p.name for p in run.parent.iterdir())
    r = _export(run, out, "--force")
    assert "run" in r.stderr and ("inside the run" in r.stderr or "is the run" in r.stderr
                                  or "contains the run" in r.stderr), r.stderr
    assert snapshot(run) == before
    assert sorted(p.name for p in run.parent.iterdir()) == outside


def test_a_rerun_puts_back_a_killed_exports_old_copy_and_cleans_its_leftovers(run, tmp_path):
    """A kill between the two renames of an older replacement: `--out` is missing, the previous export is under
    `.prev.old-PID`, the unfinished new one under `.prev.tmp-PID`. The next export cleans both up."""
    out = tmp_path / "prev"
    _export(run, out, expect=0)
    first = sorted(p.name for p in out.iterdir())
    os.replace(out, tmp_path / f".prev.old-{DEAD}")
    (tmp_path / f".prev.tmp-{DEAD}").mkdir()
    (tmp_path / f".prev.tmp-{DEAD}" / "config.json").write_text("{half")
    r = _export(run, out)  # without --force: the previous export is back, so --out exists
    assert "exists" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prev", "run"]
    # the same kill, then a rerun with --force: the new export in place, nothing left beside it
    os.replace(out, tmp_path / f".prev.old-{DEAD}")
    _export(run, out, "--force", expect=0)
    assert sorted(p.name for p in out.iterdir()) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prev", "run"]


def _folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "which").write_text(text)
    return path


def test_replacing_a_folder_is_one_commit_and_a_kill_after_it_leaves_the_new_one(tmp_path, monkeypatch):
    """Killed just after the commit (before the old copy is deleted): `--out` is already the new folder, and the
    old one, under the temporary name, is cleaned up by the next writer."""
    out = _folder(tmp_path / "out", "old")
    tmp = _folder(atomic.tmp_name(out, DEAD), "new")

    def killed(path):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(atomic, "writer_id", lambda: DEAD)
    monkeypatch.setattr(atomic, "remove_entry", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_into_place(tmp, out)
    monkeypatch.undo()
    assert (out / "which").read_text() == "new"
    assert (tmp / "which").read_text() == "old"
    atomic.recover_replaced(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (out / "which").read_text() == "new"


def test_where_no_exchange_exists_a_kill_between_the_renames_is_undone_by_the_next_writer(tmp_path, monkeypatch):
    out = _folder(tmp_path / "out", "old")
    tmp = _folder(atomic.tmp_name(out, DEAD), "new")
    calls = []
    real = os.replace

    def replace(a, b):
        calls.append(b)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed between the renames")
        real(a, b)

    monkeypatch.setattr(atomic, "writer_id", lambda: DEAD)
    monkeypatch.setattr(atomic, "exchange", lambda a, b: False)
    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_into_place(tmp, out)
    monkeypatch.undo()
    assert not out.exists()
    assert "put back" in " ".join(atomic.recover_replaced(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (out / "which").read_text() == "old"


def test_the_exchange_swaps_two_folders_atomically(tmp_path):
    a, b = _folder(tmp_path / "a", "A"), _folder(tmp_path / "b", "B")
    if not atomic.exchange(a, b):
        pytest.skip("this file system cannot exchange two names (renameat2 RENAME_EXCHANGE)")
    assert (a / "which").read_text() == "B" and (b / "which").read_text() == "A"
    shutil.rmtree(a)


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_never_write_among_a_runs_own_files(run, command):
    """`report --out` inside the run is refused but in RUN/report/ (its own folder); `compare --out` inside a run it
    compares is refused: the page and its PNGs would overwrite the run's files (here its genenv.toml)."""
    before = snapshot(run)
    target = run / "genenv.toml"
    args = (["report", "--run", run] if command == "report" else ["compare", run]) + ["--out", target]
    r = cli(*args)
    assert "inside the run directory" in r.stderr, r.stderr
    assert snapshot(run) == before
