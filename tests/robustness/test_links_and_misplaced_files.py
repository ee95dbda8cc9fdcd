"""Links, devices and misplaced files in a finished run: a link is never written through and its target never
changed or created, a device where a file belongs is named and never read, a file where a folder belongs (or the
reverse) is named by its own path. Each case runs on a copy of one finished tiny run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hostile import E1, cli, in_subprocess, snapshot

# ---------------------------------------------------------------- links

def _digests(*paths: Path) -> dict[str, bytes | None]:
    return {str(p): p.read_bytes() if p.is_file() else None for p in paths}


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_lock_is_refused_and_its_target_untouched(run, tmp_path, dangling):
    outside = tmp_path / "outside.txt"
    if not dangling:
        outside.write_text("precious, outside the run\n")
    lock = run / E1 / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run)
    assert str(lock) in r.stderr and "symbolic link" in r.stderr
    if dangling:
        assert not outside.exists()  # a dangling link never makes genenv create its target
    else:
        assert outside.read_text() == "precious, outside the run\n"
    assert snapshot(run) == before
    cli("status", "--run", run, expect=0)  # reading the run still works


@pytest.mark.parametrize("target", ["epochs/0001/scores.parquet", "epochs/0001/manifests", "epochs/0001/metrics.json",
                                    "pools/agent_train", "logs/score.log"])
def test_links_inside_the_run_are_never_written_through(run, tmp_path, target):
    p = run / target
    outside = tmp_path / "outside"
    if p.is_dir():
        shutil.copytree(p, outside)
        shutil.rmtree(p)
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            shutil.copy(p, outside)
            p.unlink()
        else:
            outside.write_text("a log outside the run\n")
    p.symlink_to(outside)
    files = sorted(outside.rglob("*")) if outside.is_dir() else [outside]
    before = _digests(*files)
    r = cli("score", "--epoch", 1, "--run", run, "--force", expect=None)
    assert _digests(*files) == before
    if target.startswith("logs/"):
        assert r.exit_code == 0 and "not logging to" in r.output
    else:
        assert r.exit_code == 2 and "symbolic link" in r.stderr and str(p) in r.stderr


@pytest.mark.parametrize("where", ["/dev/zero", "../outside.parquet"])
def test_a_manifest_naming_an_output_elsewhere_is_not_read(run, where):
    path = run / E1 / "manifests" / "score.json"
    manifest = json.loads(path.read_text())
    manifest["outputs"]["scores"]["path"] = where
    manifest["outputs"]["scores"]["fingerprint"].update({"size": 0, "mtime_ns": 1})
    path.write_text(json.dumps(manifest))
    r = in_subprocess("status", "--json", "--run", str(run))
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["epochs"][0]["stages"]["score"]
    assert st["state"] == "incomplete" and where in st["reasons"][0]


# ---------------------------------------------------------------- devices

def test_a_device_where_an_input_belongs_is_named(run):
    tasks = run / E1 / "tasks.jsonl"
    tasks.unlink()
    tasks.symlink_to("/dev/zero")
    r = in_subprocess("score", "--epoch", "1", "--run", str(run), "--force")
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr
    assert in_subprocess("status", "--run", str(run)).returncode == 0


# ---------------------------------------------------------------- a file where a folder belongs, or the reverse

def test_logs_as_a_file_does_not_stop_a_stage(run):
    shutil.rmtree(run / "logs")
    (run / "logs").write_text("not a folder")
    r = cli("score", "--epoch", 1, "--run", run, expect=0)
    assert "up to date" in r.stdout


@pytest.mark.parametrize("target, args, words", [
    ("pools/agent_train", ["score", "--epoch", "1", "--force"], "a file where a folder belongs"),
    ("epochs/0002", ["generate-tasks", "--epoch", "2"], "a file where epoch 2's folder belongs"),
    ("epochs/0001/.lock", ["score", "--epoch", "1"], "is a folder where the epoch's lock file belongs"),
    ("genenv.toml", ["status"], "is a folder; the run's config must be a TOML file"),
])
def test_file_folder_swaps_are_named(run, target, args, words):
    p = run / target
    if p.is_dir():
        shutil.rmtree(p)
        p.write_text("a file now")
    elif p.exists():
        p.unlink()
        p.mkdir()
    else:
        p.write_text("a file where a folder belongs")
    r = cli(*args, "--run", run)
    assert words in r.stderr and str(p) in r.stderr
    if target != "genenv.toml":
        cli("status", "--run", run, expect=0)


def test_manifests_being_a_file_is_named(run):
    m = run / E1 / "manifests"
    shutil.rmtree(m)
    m.write_text("not a folder")
    r = cli("status", "--run", run, expect=0)
    assert f"{m} is a file where the epoch's manifests folder belongs" in r.stdout
    assert "missing" not in r.stdout.split("\n")[2]
    r = cli("score", "--epoch", 1, "--run", run)
    assert f"{m} is a file where the epoch's manifests folder belongs" in r.stderr
    assert "Run `genenv rollout" not in r.stderr


def test_a_folder_at_an_output_path_is_named_by_its_own_name(run):
    out = run / E1 / "scores.parquet"
    out.unlink()
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert f"{out} is a folder where `score` writes its output scores" in r.stderr and ".tmp-" not in r.stderr
    assert snapshot(run) == before
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
