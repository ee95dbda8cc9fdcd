"""The `run()` both update stages share (update_agent.py, update_env.py): the allocator set before CUDA starts, the
launch checked before the lock, the stage run under the contract (a mode that trains nothing completes with nothing
to do and says so), then the full checkpoints no stage needs any more pruned (`run.keep_checkpoints`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from genenv_cli.catalogue.config import Config
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging, execute
from genenv_cli.rundir.ranks import process_rank


@dataclass(frozen=True)
class UpdateStage:
    """What tells one update stage from the other: its name, its settings' section and model, whether the run
    trains it, why not (the setting: `agent.mode = frozen`) and what (`the agent`), what its first line says
    before the sharding, its plan and its update."""

    stage: str
    section: str
    model: str
    trained: bool
    mode: str
    who: str
    first: str
    plan: Callable[[], StagePlan]
    update: Callable[[Config, int, Staging, UI], None]


def run_update(run_dir: RunDir, cfg: Config, epoch: int, u: UpdateStage, *, force: bool, ui: UI) -> StageResult:
    from genenv_cli.core.memory_plan import default_allocator

    default_allocator()  # expandable segments, before anything initialises CUDA (unless the user chose a setting)
    from genenv_cli.machinery.launch import check_update_launch, sharding_line

    if u.trained:
        check_update_launch(cfg, u.section, u.model)  # before the lock and any compute

    def body(out: Staging) -> None:
        if not u.trained:
            out.counts.update({"samples_used": 0, "skipped": f"{u.mode}: {u.who} is not trained"})
            ui.info(f"{u.stage} epoch {epoch}: {u.mode}, {u.who} is not trained")
            return
        ui.info(f"{u.stage} epoch {epoch}: {u.first}{sharding_line(cfg)}")
        u.update(cfg, epoch, out, ui)

    result = execute(run_dir, cfg, u.stage, epoch, u.plan, body, force=force)
    if process_rank() == 0:  # after the commit: run.keep_checkpoints' full checkpoints no stage needs any more
        from genenv_cli.machinery.pruning import prune

        prune(run_dir, cfg)
    return result
