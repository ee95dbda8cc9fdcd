"""Under a launcher rank 0 decides whether a stage is done, recovered or must run, and every rank follows: after a
kill at the commit point the ranks of a 2-process launch take the same decision and nobody hangs.

The stage left behind was killed between its swap and its commit point (its output renamed in, the previous one
moved aside, its intent written). Rank 0, under the lock, undoes it: the previous commit stands and the stage is
done. A rank deciding on its own before that recovery (here rank 0 starts late, as on a loaded machine) read the
half-done state, found the output changed and ran the stage: its first collective then waited for a rank 0 that had
already returned, until the process group's timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.rundir import RunDir, old_name, tmp_name
from genenv_cli.rundir.contract import StagePlan, check_state
from stagekit import fake_stage

SCRIPT = textwrap.dedent('''
    import datetime, json, os, sys, time
    from pathlib import Path
    import torch.distributed as dist
    from genenv_cli.rundir.contract import StagePlan, execute
    from genenv_cli.rundir import RunDir

    root, out, action = sys.argv[1:4]
    run = RunDir(Path(root))
    cfg = run.load_config()
    rank = int(os.environ["RANK"])
    if rank == 0:
        time.sleep(4)  # rank 0 starts late: another rank reads the run folder before rank 0's recovery
    ran = []

    def body(staging):
        ran.append(1)
        # the stage's first collective, as a Trainer's: a rank that returned instead never joins it
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
        dist.barrier()
        staging.path("out").write_text("rerun by rank 0")

    plan = StagePlan("score", 1, outputs={"out": run.epoch_dir(1) / "scores.txt"})
    try:
        result = execute(run, cfg, "score", 1, lambda: plan, body, force=action == "force")
        said = {"ran": bool(ran), "up_to_date": result.skipped}
    except Exception as exc:
        said = {"ran": bool(ran), "error": type(exc).__name__, "message": str(exc)}
    Path(f"{out}.{rank}").write_text(json.dumps(said))
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
''')


@pytest.fixture
def killed(tmp_path) -> RunDir:
    """A run whose `score` of epoch 1 was committed once, then killed at its commit point on a rerun."""
    root = tmp_path / "run"
    r = CliRunner().invoke(app, ["init", str(root), "--domain", "arith"])
    assert r.exit_code == 0, r.output
    run = RunDir(root.resolve())
    final = run.epoch_dir(1) / "scores.txt"
    fake_stage(run, 1, "score", {"out": (final, "committed")})
    manifest = run.manifest_path(1, "score")
    import hashlib

    intent = json.loads(manifest.read_text())
    intent.update({"supersedes": hashlib.sha256(manifest.read_bytes()).hexdigest(), "finished": "2099-01-01T00:00:00"})
    intent.pop("writer", None)
    pid = 4_000_000  # beyond any kernel's PID range: a dead writer
    tmp_name(manifest, pid).write_text(json.dumps(intent))
    os.replace(final, old_name(final, pid))
    final.write_text("the killed writer's output")
    assert check_state(run, run.load_config(), StagePlan("score", 1, outputs={"out": final})).state != "done"
    return run


def _launch(run: RunDir, tmp_path, action: str, port: int) -> tuple[subprocess.CompletedProcess, list[dict]]:
    (tmp_path / "ranks.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_"))}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(port), str(tmp_path / "ranks.py"), str(run.root), str(tmp_path / "said"), action],
                          capture_output=True, text=True, env=env, timeout=240)
    said = [json.loads((tmp_path / f"said.{r}").read_text()) if (tmp_path / f"said.{r}").exists() else None
            for r in (0, 1)]
    return done, said


@pytest.mark.slow
def test_after_a_kill_at_the_commit_point_every_rank_follows_rank_0(killed, tmp_path):
    done, said = _launch(killed, tmp_path, "plain", 29671)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert said == [{"ran": False, "up_to_date": True}] * 2                 # recovered: done, on both ranks
    assert (killed.epoch_dir(1) / "scores.txt").read_text() == "committed"  # the previous commit stands
    # forced: rank 0 decides to run, and both ranks run the body together (it holds a collective)
    done, said = _launch(killed, tmp_path, "force", 29672)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert said == [{"ran": True, "up_to_date": False}] * 2
    assert (killed.epoch_dir(1) / "scores.txt").read_text() == "rerun by rank 0"


@pytest.mark.slow
def test_when_rank_0_refuses_every_rank_stops_at_once(killed, tmp_path):
    """Rank 0 cannot run the stage (its epoch's lock is held by another writer): the other rank stops with an error
    naming rank 0's reason instead of waiting in a collective."""
    from genenv_cli.rundir.lock import EpochLock

    with EpochLock(killed.epoch_dir(1), "score", root=killed.root):
        done, said = _launch(killed, tmp_path, "force", 29673)
    assert [(s["ran"], s["error"]) for s in said] == [(False, "LockError"), (False, "GenenvError")]
    assert said[1]["message"].startswith("`score --epoch 1`: rank 0 stopped it before any work: ")
    assert said[0]["message"] in said[1]["message"]                      # rank 0's own reason, word for word


@pytest.mark.parametrize("rank", [0, 1])
def test_without_the_launchers_store_every_rank_refuses_alike(killed, monkeypatch, rank):
    """A launch of two processes with no launcher store (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1): rank 0 has no channel
    for its decision, so neither rank decides alone (before, each did): both refuse with the same reason, from the
    environment they share, before anything is read or written; the killed writer's state stays for a proper
    launch to recover."""
    from genenv_cli.core.errors import ConfigError
    from genenv_cli.rundir.contract import execute

    for k, v in {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank),
                 "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    final = killed.epoch_dir(1) / "scores.txt"
    ran = []
    with pytest.raises(ConfigError, match=r"`score --epoch 1` was launched as 2 processes without the launcher's "
                                          r"key-value store.*each rank would decide alone.*torchrun"):
        execute(killed, killed.load_config(), "score", 1,
                lambda: StagePlan("score", 1, outputs={"out": final}), lambda staging: ran.append(1))
    assert not ran and final.read_text() == "the killed writer's output"
