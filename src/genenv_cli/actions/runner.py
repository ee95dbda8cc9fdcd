"""`genenv run --epochs N`: the stages of epoch after epoch, each in its own process, skipping what is done.

Every stage is the same command a user would type (`genenv rollout --epoch 3 --run DIR ...`), run as a child
process, so whatever a stage holds (model weights, optimizer state, CUDA's cached blocks, vLLM's reserved KV
cache) is returned to the system when it exits. In one process, training's reserved memory would still count
against vLLM's free-memory check (`gpu_memory_utilization`) when the next epoch's generation starts. The
children die with the run (Linux: PR_SET_PDEATHSIG), so a killed run leaves no stage behind, and they print
their own progress and summary (`--json`, `--quiet` pass through).

A run killed anywhere resumes at the stage that did not finish: completed stages with unchanged inputs are
no-ops. `--from STAGE` (with `--from-epoch E`, default the first epoch) forces that stage and every later one
to be redone.

`run_epochs` does the same in the calling process; it is for CPU scripts (experiments/demonstration.py) that
hold a config built in memory. On GPUs use `spawn_epochs` (the CLI does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.stages import STAGES, epoch_stages, stage_module
from genenv_cli.core.errors import ConfigError, GenenvError
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StageResult


def run_epochs(run: RunDir, cfg: Config, epochs: int, *, ui: UI, start: int = 1, from_stage: str | None = None,
               from_epoch: int | None = None, report: Callable[[StageResult], None] | None = None) -> list[StageResult]:
    """In this process (CPU scripts only: GPU memory is not returned between stages)."""
    restart = _restart_point(from_stage, from_epoch, start)
    results = []
    for epoch in range(start, epochs + 1):
        for i, stage in enumerate(epoch_stages()):
            force = restart is not None and (epoch, i) >= restart
            result = stage_module(stage).run(run, cfg, epoch, force=force, ui=ui)
            results.append(result)
            if report is not None:
                report(result)
    return results


class StageFailed(GenenvError):
    """A stage's process exited non-zero (it printed its own error); the run stops there."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def _restart_point(from_stage: str | None, from_epoch: int | None, start: int) -> tuple[int, int] | None:
    order = epoch_stages()
    if from_stage is not None and from_stage not in order:
        raise ConfigError(f"--from {from_stage!r}: choose one of {', '.join(order)}.")
    return (from_epoch or start, order.index(from_stage)) if from_stage else None


def stage_command(stage: str, run: RunDir, epoch: int, *, sets: list[str], force: bool, quiet: bool,
                  as_json: bool) -> list[str]:
    """The command line of one stage, run with this interpreter (the same install and environment)."""
    cmd = [sys.executable, "-m", "genenv_cli", stage, "--epoch", str(epoch), "--run", str(run.root)]
    for s in sets:
        cmd += ["--set", s]
    if force:
        cmd.append("--force")
    if as_json:
        cmd.append("--json")
    elif quiet:
        cmd.append("--quiet")
    return cmd


def _die_with_parent(parent: int) -> Callable[[], None]:
    """preexec_fn: the child gets SIGTERM when the run's process dies, however it dies (Linux only). The C
    function is looked up here, before the fork, so the child only makes the call (no dlopen after fork)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    PR_SET_PDEATHSIG = 1
    sig = int(signal.SIGTERM)

    def setup() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the run died before prctl took effect
            os._exit(1)

    return setup




def child_env(stage: str, gpus: int) -> dict[str, str] | None:
    """The environment of a stage's process: a training stage sees one GPU when several are visible and none was
    chosen, since it is not under a distributed launcher here (transformers would otherwise wrap the model in
    nn.DataParallel; pipelines/coevolve.sh with TRAIN= launches training on all of them). None: inherit as is."""
    if STAGES[stage.split(".")[0]].training and gpus > 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
        return {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    return None


def _visible_gpus() -> int:
    """CUDA devices this machine shows (0 without torch or a GPU); NVML's count, CUDA is not initialised."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _run_child(cmd: list[str], env: dict[str, str] | None = None) -> int:
    preexec = _die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None
    proc = subprocess.Popen(cmd, preexec_fn=preexec, env=env)  # the preexec_fn only calls prctl: no lock is taken
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached the child too (same process group): let it leave its stage clean, then stop
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def spawn_epochs(run: RunDir, epochs: int, *, ui: UI, sets: list[str] | None = None, start: int = 1,
                 from_stage: str | None = None, from_epoch: int | None = None, quiet: bool = False,
                 as_json: bool = False) -> int:
    """Epochs `start`..`epochs`, one child process per stage. Returns the number of stages run; raises
    StageFailed with the child's exit status when one fails."""
    restart = _restart_point(from_stage, from_epoch, start)
    count = 0
    gpus = _visible_gpus()
    if gpus > 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
        ui.info(f"{gpus} GPUs visible: genenv run trains on GPU 0 alone (CUDA_VISIBLE_DEVICES=0 for update-agent and "
                f"update-env); to train on all of them use pipelines/coevolve.sh with TRAIN=\"accelerate launch "
                f"--config_file pipelines/accelerate/fsdp-full-shard.yaml -m genenv_cli\" (docs/gpus.md)")
    for epoch in range(start, epochs + 1):
        for i, stage in enumerate(epoch_stages()):
            force = restart is not None and (epoch, i) >= restart
            cmd = stage_command(stage, run, epoch, sets=sets or [], force=force, quiet=quiet, as_json=as_json)
            ui.log(f"epoch {epoch} {stage}: {' '.join(cmd)}")
            env = child_env(stage, gpus)
            if sets:  # `genenv run` said once which --set values differ from genenv.toml: not again per stage
                env = {**(env or os.environ), "GENENV_SETS_NOTED": "1"}
            rc = _run_child(cmd, env)
            count += 1
            if rc != 0:
                raise StageFailed(f"`genenv {stage} --epoch {epoch}` exited with status {rc}; the run stops here. "
                                  f"Completed stages keep their outputs: run the same command again to resume.",
                                  rc if 0 < rc < 256 else 1)
            if not run.manifest_path(epoch, stage).is_file():  # status 0 and nothing committed: not a success
                raise StageFailed(f"`genenv {stage} --epoch {epoch}` exited with status 0 but committed nothing (no "
                                  f"{run.rel(run.manifest_path(epoch, stage))}): something in its process ended it "
                                  f"early (a plugin's code calling exit, for one); the run stops here. Run the same "
                                  f"command again to resume, with `genenv {stage} --epoch {epoch}` alone to see "
                                  f"what ends it.", 2)
    return count
