"""Links, hard links and special files where genenv writes or reads first: the run's logs, its locks, its config.

Every path genenv changes in place (a log it appends to, a lock whose record it rewrites) refuses a symbolic link
anywhere between the run's root and it, and a file with other hard links (changing it would change the file
under its other names, perhaps outside the run). genenv.toml is read as a regular file only, and only so much of
it: a FIFO there would block every command, `/dev/zero` would be read until memory ran out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app

runner = CliRunner()


def cli(*args, code: int | None = None):
    r = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if code is not None:
        assert r.exit_code == code, r.output
    return r


@pytest.fixture
def run(tmp_path) -> Path:
    root = tmp_path / "run"
    cli("init", root, "--domain", "arith", code=0)
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    return d


def test_a_logs_folder_that_is_a_link_is_never_written_through(run, outside):
    """The probe's break: `logs/` linked out of the run got score.log appended there, with exit 0 and no notice."""
    (run / "logs").symlink_to(outside, target_is_directory=True)
    r = cli("score", "--epoch", 1, "--run", run)
    assert list(outside.iterdir()) == []
    assert f"note: not logging to {run / 'logs' / 'score.log'}" in r.stderr
    assert f"{run / 'logs'} is a symbolic link" in r.stderr


def test_a_log_with_another_hard_link_is_never_appended(run, outside):
    target = outside / "precious.txt"
    target.write_text("mine\n")
    (run / "logs").mkdir()
    os.link(target, run / "logs" / "score.log")
    r = cli("score", "--epoch", 1, "--run", run)
    assert target.read_text() == "mine\n"
    assert "hard links" in r.stderr and "note: not logging to" in r.stderr


def test_a_lock_with_another_hard_link_is_refused_and_never_truncated(run, outside):
    """The probe's break: a hard link at epochs/0001/.lock had its outside name truncated to 0 bytes."""
    target = outside / "precious.txt"
    target.write_text("mine\n")
    (run / "epochs" / "0001").mkdir(parents=True)
    os.link(target, run / "epochs" / "0001" / ".lock")
    for stage in ("rollout", "score", "update-agent", "update-env"):  # each needs a stage before it: fails fast
        r = cli(stage, "--epoch", 1, "--run", run, code=2)
        assert "has 2 hard links" in r.stderr and "epochs/0001/.lock" in r.stderr
    assert target.read_text() == "mine\n"
    assert cli("status", "--run", run, code=0)          # reading holds no lock record: nothing to refuse there
    assert target.read_text() == "mine\n"


def _status(run: Path) -> subprocess.CompletedProcess:
    """`genenv status` in a process of its own, with 4 GB of address space and a minute: a regression must fail
    the test, not hang it or take the machine's memory."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    try:
        return subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--run", str(run)], capture_output=True,
                              text=True, timeout=60, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        pytest.fail("status blocked reading genenv.toml")


def test_a_config_linked_to_dev_zero_is_refused_without_reading_it(run):
    """The probe's break: `status` read /dev/zero whole (the OOM killer stopped it at 11.7 GB; under a memory cap
    the message blamed "the sizes in the config")."""
    (run / "genenv.toml").unlink()
    (run / "genenv.toml").symlink_to("/dev/zero")
    out = _status(run)
    assert out.returncode == 2 and "genenv.toml is a device, pipe or socket, not a regular file" in out.stderr, \
        out.stderr


def test_a_config_that_is_a_fifo_is_refused_at_once(run):
    """The probe's break: `status` blocked forever on a FIFO at genenv.toml (the README promises pipes are never
    read). In a process of its own: a hang must fail the test, not stop it."""
    (run / "genenv.toml").unlink()
    os.mkfifo(run / "genenv.toml")
    out = _status(run)
    assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr


def test_a_config_past_the_bound_is_refused_by_its_size(run):
    (run / "genenv.toml").write_text("# " + "x" * (1 << 20) + "\n")   # config.CONFIG_MAX
    r = cli("status", "--run", run, code=2)
    assert "more than 1,048,576 bytes" in r.stderr


def test_init_force_over_a_config_folder_names_the_folder(tmp_path):
    """The probe's break: the message named `.genenv.toml.tmp-PID`, which does not exist."""
    root = tmp_path / "run"
    (root / "genenv.toml").mkdir(parents=True)
    r = cli("init", root, "--force", code=2)
    assert f"{root / 'genenv.toml'} is a folder where the run's config belongs" in r.stderr
    assert ".tmp-" not in r.stderr
    assert sorted(p.name for p in root.iterdir()) == ["genenv.toml"]


def test_status_into_a_closed_pipe_ends_quietly(run):
    """The probe's break: `genenv status | head -1` exited 2 with "<run>: Broken pipe", blaming the run."""
    proc = subprocess.Popen([sys.executable, "-m", "genenv_cli", "status", "--run", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # the reader is gone before genenv writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == ""
