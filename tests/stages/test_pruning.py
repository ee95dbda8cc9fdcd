"""run.keep_checkpoints: full checkpoints of epochs whose next epoch is complete are deleted, except the last N
and every M-th; the stage that wrote them stays done, status shows each epoch's disk use; LoRA adapters stay."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.machinery import pruning
from genenv_cli.machinery.pruning import keep, prune
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, check_state
from stagekit import fake_stage, set_keep_checkpoints

runner = CliRunner()


def _checkpoint(kind: str):
    def write(path):
        path.mkdir()
        (path / "genenv_checkpoint.json").write_text(json.dumps({"kind": kind}))
        (path / "model.safetensors").write_bytes(b"\0" * 1000)
    return write


def _epochs(run: RunDir, n: int, kind: str = "full") -> None:
    for e in range(1, n + 1):
        d = run.epoch_dir(e)
        fake_stage(run, e, "update-agent", {"agent": (d / "agent", _checkpoint(kind))})
        fake_stage(run, e, "update-env", {"env": (d / "env", _checkpoint(kind))})


def _done(monkeypatch, epochs) -> None:
    """These runs have only their updates (written by hand): say which epochs count as done."""
    monkeypatch.setattr(pruning, "epoch_done", lambda run, cfg, e: e in epochs)


def test_keeps_the_last_n_and_every_mth_and_the_200_gb_default(make_run, monkeypatch):
    run = RunDir(make_run("run.keep_checkpoints=1", "run.keep_checkpoints_every=5"))
    _done(monkeypatch, {1, 2, 3, 4})
    cfg = run.load_config()
    assert [e for e in range(1, 11) if keep(cfg, e, 10)] == [5, 10]
    # the most a 10-epoch run holds at once: the kept epochs plus the one being written, two 30.5 GB models each
    peak = max(len([e for e in range(1, done + 1) if keep(cfg, e, done)]) + 1 for done in range(1, 10))
    assert peak * 2 * 30.5 < 200
    _epochs(run, 4)
    prune(run, cfg)
    assert [e for e in range(1, 5) if (run.epoch_dir(e) / "agent").exists()] == [4]
    assert not (run.epoch_dir(3) / "env").exists()
    # the pruned epoch's update still counts as done, and status says what was pruned and the disk used
    plan = StagePlan("update-agent", 2, outputs={"agent": run.epoch_dir(2) / "agent"})   # as fake_stage wrote it
    assert check_state(run, cfg, plan).state == "done"
    record = run.epoch_dir(2) / "pruned.json"
    kept = record.read_text()
    record.unlink()        # without the record the deletion is what it looks like
    assert check_state(run, cfg, plan).state == "incomplete"
    record.write_text(kept)
    out = runner.invoke(app, ["status", "--run", str(run.root)]).stdout
    assert re.search(r"epoch 2 disk: [\d.]+ GB, pruned: agent, env", out)
    assert re.search(r"epoch 4 disk: [\d.]+ GB$", out, re.M)


def test_an_epoch_whose_next_is_incomplete_and_lora_adapters_are_kept(make_run, monkeypatch):
    run = RunDir(make_run("run.keep_checkpoints=1", "run.keep_checkpoints_every=0"))
    _done(monkeypatch, {1, 2})
    _epochs(run, 2)
    d3 = run.epoch_dir(3)
    fake_stage(run, 3, "update-agent", {"agent": (d3 / "agent", _checkpoint("full"))})   # epoch 3 not complete
    prune(run, run.load_config())
    assert not (run.epoch_dir(1) / "agent").exists()
    assert (run.epoch_dir(2) / "agent").exists() and (run.epoch_dir(2) / "env").exists()
    lora = RunDir(make_run("run.keep_checkpoints=1", name="lora"))
    _done(monkeypatch, {1, 2, 3})
    _epochs(lora, 3, kind="lora")
    assert prune(lora, lora.load_config()) == []
    assert all((lora.epoch_dir(e) / "agent").exists() for e in (1, 2, 3))


# ---------------------------------------------------------------- pruning on a real run of full checkpoints

def cli(*args, code: int | None = 0):
    r = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    if code is not None:
        assert r.exit_code == code, r.output + str(r.exception)
    return r


def states(root) -> dict[tuple[int, str], str]:
    rows = json.loads(cli("status", "--run", root, "--json").stdout)["epochs"]
    return {(row["epoch"], name): s["state"] for row in rows for name, s in row["stages"].items()}


def resume(run: RunDir, epochs: int = 2) -> None:
    """What `genenv run --epochs N` does, in this process (each stage the same command, skipping what is done)."""
    from genenv_cli.actions.runner import run_epochs
    from genenv_cli.core.ui import UI

    run_epochs(run, run.load_config(), epochs, ui=UI(quiet=True))


@pytest.fixture
def pruned(two_full_epochs, tmp_path) -> RunDir:
    """Two epochs of full checkpoints, with run.keep_checkpoints = 1: epoch 1's were pruned once epoch 2 was done."""
    root = tmp_path / "run"
    shutil.copytree(two_full_epochs, root)
    set_keep_checkpoints(root, 1)
    run = RunDir(root)
    assert prune(run, run.load_config()) == ["epochs/0001/agent", "epochs/0001/env"]
    assert set(states(root).values()) == {"done"}
    return run


def test_a_checkpoint_is_pruned_only_once_the_next_epoch_is_done(two_full_epochs, tmp_path):
    """Epoch 2's manifests exist, but a stage of it is stale: epoch 1's checkpoints are still needed."""
    root = tmp_path / "run"
    shutil.copytree(two_full_epochs, root)
    set_keep_checkpoints(root, 1)
    run = RunDir(root)
    cfg = run.load_config(["rollout.temperature=0.7"])   # epoch 2's rollout is stale under this config
    assert prune(run, cfg) == []
    assert (run.epoch_dir(1) / "agent").is_dir() and (run.epoch_dir(1) / "env").is_dir()
    assert prune(run, run.load_config()) == ["epochs/0001/agent", "epochs/0001/env"]


def test_update_agent_force_on_a_pruned_epoch_keeps_its_new_checkpoint(pruned):
    """The probe's break: `update-agent --epoch 1 --force` (what evaluate advised) trained a new epoch-1 agent and
    pruning deleted it at once, since epoch 2's manifests existed though epoch 2 was now stale; every later
    `rollout --epoch 2` then failed with "no such folder"."""
    root = pruned.root
    cli("update-agent", "--epoch", 1, "--force", "--run", root, "-q")
    assert (pruned.epoch_dir(1) / "agent").is_dir()
    s = states(root)
    assert s[(1, "update-agent")] == "done" and s[(2, "rollout")] == "stale"
    cli("rollout", "--epoch", 2, "--run", root, "-q")
    assert states(root)[(2, "rollout")] == "done"


def test_a_stage_that_needs_a_pruned_checkpoint_names_the_setting(pruned):
    root = pruned.root
    for args in (["rollout", "--epoch", 2, "--set", "rollout.temperature=0.7"],
                 ["update-agent", "--epoch", 2, "--force"], ["generate-tasks", "--epoch", 2, "--force"],
                 ["update-env", "--epoch", 2, "--force"], ["evaluate", "--bench", "heldout", "--epoch", 1]):
        r = cli(*args, "--run", root, "-q", code=2)
        role = "env" if args[0] in ("generate-tasks", "update-env") else "agent"
        assert f"epochs/0001/{role}: epoch 1's {role} checkpoint was pruned by run.keep_checkpoints (= 1" in r.stderr, r.stderr
        assert "no such" not in r.stderr.lower() and "a kill or a hand" not in r.stderr
    assert set(states(root).values()) == {"done"}   # nothing was changed by the refusals


def _kill_inside_the_delete(monkeypatch, after: int) -> None:
    """Pruning's recursive delete stops after `after` files, as a SIGKILL would stop it."""
    import os

    class Killed(BaseException):
        pass

    def partial(path):
        files = sorted(p for p in path.rglob("*") if p.is_file())
        for p in files[:after]:
            os.unlink(p)
        raise Killed

    if hasattr(pruning, "remove_entry"):
        monkeypatch.setattr(pruning, "remove_entry", partial)
    else:  # how genenv deleted before (to check that this test fails there)
        monkeypatch.setattr(shutil, "rmtree", partial)
    return Killed


def test_a_kill_inside_the_delete_leaves_the_run_done_and_the_next_pruning_finishes_it(
        two_full_epochs, tmp_path, monkeypatch):
    """The probe's break: a SIGKILL inside the recursive delete of epochs/0001/agent left epoch 1 incomplete;
    `run --epochs 2` retrained it, pruned it again and failed at epoch 2's rollout, every time."""
    root = tmp_path / "run"
    shutil.copytree(two_full_epochs, root)
    set_keep_checkpoints(root, 1)
    run = RunDir(root)
    with monkeypatch.context() as mp:
        killed = _kill_inside_the_delete(mp, 2)
        with pytest.raises(killed):
            prune(run, run.load_config())
    half = run.epoch_dir(1) / "agent"
    assert half.is_dir() and "epochs/0001/agent" in json.loads((run.epoch_dir(1) / "pruned.json").read_text())
    assert set(states(root).values()) == {"done"}       # pruned, not incomplete
    manifests = {p: p.read_bytes() for p in root.glob("epochs/*/manifests/*.json")}
    r = cli("evaluate", "--bench", "heldout", "--epoch", 1, "--run", root, code=2)   # never loaded half deleted
    assert "pruned by run.keep_checkpoints" in r.stderr
    resume(run)                                          # nothing to redo: the deletion is finished
    assert {p: p.read_bytes() for p in root.glob("epochs/*/manifests/*.json")} == manifests
    assert not half.exists() and not (run.epoch_dir(1) / "env").exists()
    assert (run.epoch_dir(2) / "agent").is_dir() and set(states(root).values()) == {"done"}


def test_pruning_hands_a_crashed_stages_record_on_to_the_next_stage(two_full_epochs, tmp_path):
    """Pruning takes the epoch's lock but is no stage: a killed stage's record it finds there stays, so the next
    stage of that epoch still warns that the previous one did not finish."""
    root = tmp_path / "run"
    shutil.copytree(two_full_epochs, root)
    set_keep_checkpoints(root, 1)
    crashed = json.dumps({"stage": "evaluate-like", "pid": 4_000_000, "host": "h", "since": "then"})
    (root / "epochs/0001/.lock").write_text(crashed)
    run = RunDir(root)
    assert prune(run, run.load_config()) == ["epochs/0001/agent", "epochs/0001/env"]
    assert (root / "epochs/0001/.lock").read_text() == crashed
    assert (root / "epochs/0002/.lock").read_text() == ""
    assert "deleted epochs/0001/agent (run.keep_checkpoints = 1" in (root / "logs/prune.log").read_text()
