"""What the hostile tests here share: the CLI run in-process, where no traceback may escape and a refusal is one
paragraph; a run's files as bytes, to show a failed command changed nothing; the CLI in a child process with a
time limit; and the names of a finished run's first epoch and of the Bamboogle fixture. The finished run itself,
and a fresh copy of it per test, are conftest.py's fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from paths import FIXTURES

runner = CliRunner()
BAMBOOGLE = str(FIXTURES / "bamboogle" / "bamboogle.csv")
E1 = Path("epochs") / "0001"


def cli(*args: object, expect: int | None = 2):
    """Run the CLI in-process; no unhandled exception may escape (that is CliRunner's exit 1 with a traceback)."""
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{args}: unhandled {type(r.exception).__name__}: {r.exception}\n{r.output}")
    assert "Traceback" not in r.output
    if expect is not None:
        assert r.exit_code == expect, f"{args}: exit {r.exit_code}\n{r.output}"
    if r.exit_code == 2 and r.stderr.startswith("error:"):
        assert r.stderr.count("\n") == 1, f"not one paragraph: {r.stderr!r}"
    return r


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the run by its path, with its bytes (logs and lock files aside)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "logs" not in p.parts and p.name != ".lock"}


def in_subprocess(*args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """The CLI in a child process with a time limit: a hang fails the test instead of stalling the suite."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        return subprocess.run([sys.executable, "-m", "genenv_cli", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"genenv {' '.join(args)} did not finish in {timeout} s")


def vouch(run: Path, rel: str, epoch: int = 1) -> None:
    """Make the manifest that records `rel` as its output record the file as it is now: what the stage would have
    committed had it written these bytes itself (hostile model output, rather than a file edited afterwards, which
    the next stage refuses)."""
    import json

    from genenv_cli.rundir import fingerprint

    for path in (run / "epochs" / f"{epoch:04d}" / "manifests").glob("*.json"):
        manifest = json.loads(path.read_text())
        for rec in (manifest.get("outputs") or {}).values():
            if rec.get("path") == rel:
                rec["fingerprint"] = fingerprint(run / rel)
                path.write_text(json.dumps(manifest, indent=2))
