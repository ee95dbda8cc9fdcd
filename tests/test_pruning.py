"""run.keep_checkpoints: full checkpoints of epochs whose next epoch is complete are deleted, except the last N
and every M-th; the stage that wrote them stays done, status shows each epoch's disk use; LoRA adapters stay."""

import json
import re

from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.contract import StagePlan, check_state
from genenv_cli.pruning import keep, prune
from genenv_cli.rundir import RunDir
from stagekit import fake_stage

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


def test_keeps_the_last_n_and_every_mth_and_the_200_gb_default(make_run):
    run = RunDir(make_run("run.keep_checkpoints=1", "run.keep_checkpoints_every=5"))
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


def test_an_epoch_whose_next_is_incomplete_and_lora_adapters_are_kept(make_run):
    run = RunDir(make_run("run.keep_checkpoints=1", "run.keep_checkpoints_every=0"))
    _epochs(run, 2)
    d3 = run.epoch_dir(3)
    fake_stage(run, 3, "update-agent", {"agent": (d3 / "agent", _checkpoint("full"))})   # epoch 3 not complete
    prune(run, run.load_config())
    assert not (run.epoch_dir(1) / "agent").exists()
    assert (run.epoch_dir(2) / "agent").exists() and (run.epoch_dir(2) / "env").exists()
    lora = RunDir(make_run("run.keep_checkpoints=1", name="lora"))
    _epochs(lora, 3, kind="lora")
    assert prune(lora, lora.load_config()) == []
    assert all((lora.epoch_dir(e) / "agent").exists() for e in (1, 2, 3))
