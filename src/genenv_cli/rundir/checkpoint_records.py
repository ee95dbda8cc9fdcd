"""The run's checkpoints as the commit knows them: which stage writes each (`epochs/N/<role>/`, the folder epoch
N+1 starts from), and the pruning record (`epochs/N/pruned.json`: what `run.keep_checkpoints` deleted,
machinery/pruning.py), so that a pruned checkpoint counts as deleted, not damaged, and one that is gone is
named with the way to get it back. The lowest floor that needs this is the run directory's (the state check
and the commit read it); machinery/checkpoints.py builds on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import read_regular
from genenv_cli.rundir.fingerprints import unchanged
from genenv_cli.rundir.layout import RunDir

PRUNED = "pruned.json"  # epochs/N/pruned.json: the checkpoints run.keep_checkpoints deleted (pruning.py)


def read_pruned(run: RunDir, epoch: int) -> dict[str, Any]:
    """epochs/N/pruned.json by output path ({fingerprint, pruned}); {} when absent or unreadable. A regular file
    only: a device or pipe planted there is never read."""
    try:
        data = json.loads(read_regular(run.epoch_dir(epoch) / PRUNED, limit=1 << 22).decode("utf-8"))
    except (OSError, ValueError, InputError):
        return {}
    return data if isinstance(data, dict) else {}


# who writes epochs/N/<role>/: the checkpoints epoch N+1 starts from
CHECKPOINT_STAGES = {"agent": "update-agent", "env": "update-env"}


def pruned_fingerprint(record: dict[str, Any], rel: str) -> Any:
    """The fingerprint pruned.json (`record`) holds for the output at `rel`, None when it holds none."""
    entry = record.get(rel)
    return entry.get("fingerprint") if isinstance(entry, dict) else None


def checkpoint_usable(run: RunDir, folder: Path) -> bool:
    """Whether a checkpoint folder of the run can be loaded: it is there and, when `run.keep_checkpoints` pruned
    it, still whole (a deletion cut short by a kill leaves part of it, which must never be loaded)."""
    if not folder.is_dir():
        return False
    where = checkpoint_of(run, folder)
    pruned = _pruned_now(run, *where) if where else None
    return pruned is None or unchanged(folder, pruned)


def _pruned_now(run: RunDir, epoch: int, role: str) -> dict[str, Any] | None:
    """The fingerprint pruned.json records for the epoch's checkpoint, when it is the checkpoint the stage's
    manifest records now (a record of an earlier checkpoint, since written again with --force, is no longer
    about this one); None otherwise."""
    rel = run.rel(run.checkpoint_dir(epoch, role))
    recorded = pruned_fingerprint(read_pruned(run, epoch), rel)
    if not isinstance(recorded, dict):
        return None
    current = run.recorded_output(epoch, CHECKPOINT_STAGES[role], role)
    return recorded if current is not None and current["fingerprint"] == recorded else None


def checkpoint_of(run: RunDir, folder: Path) -> tuple[int, str] | None:
    """(epoch, role) of a checkpoint folder of the run (`epochs/0003/agent`), None for any other path."""
    parent = folder.parent
    if parent.parent == run.root / "epochs" and parent.name.isdigit() and folder.name in CHECKPOINT_STAGES:
        return int(parent.name), folder.name
    return None


def checkpoint_gone(run: RunDir, cfg: Config, folder: Path, needed_by: str) -> InputError:
    """The error for a checkpoint of the run that `needed_by` must load and cannot: pruned by
    `run.keep_checkpoints` (the setting named, and how to get it back), or gone by a kill or a hand."""
    epoch, role = checkpoint_of(run, folder) or (0, folder.name)
    stage = CHECKPOINT_STAGES.get(role, "update-agent")
    rel = run.rel(folder)
    base = " Or evaluate the base model explicitly with `--epoch 0`." if needed_by.startswith("evaluate") else ""
    if role in CHECKPOINT_STAGES and _pruned_now(run, epoch, role) is not None:
        n, m = cfg.run.keep_checkpoints, cfg.run.keep_checkpoints_every
        return InputError(
            f"{rel}: epoch {epoch}'s {role} checkpoint was pruned by run.keep_checkpoints (= {n}"
            f"{f', with run.keep_checkpoints_every = {m}' if m else ''}) once epoch {epoch + 1} was done; "
            f"{run.rel(run.epoch_dir(epoch) / 'pruned.json')} records it. `{needed_by}` needs it. Recreate it with "
            f"`genenv {stage} --epoch {epoch} --force` (it trains again on the same data; the stages of epoch "
            f"{epoch + 1} become stale and `genenv run` redoes them), and to keep checkpoints from now on, raise "
            f"run.keep_checkpoints or run.keep_checkpoints_every in genenv.toml (0 keeps every checkpoint).{base}")
    return InputError(f"{rel}: epoch {epoch}'s {role} checkpoint folder is missing, though `{stage}` of epoch "
                      f"{epoch} completed ({run.rel(run.manifest_path(epoch, stage))} is there), and `{needed_by}` "
                      f"needs it; a kill or a hand removed it. Recreate it with `genenv {stage} --epoch {epoch} "
                      f"--force`.{base}")


def require_models(run: RunDir, cfg: Config, models: list[tuple[str, str]], needed_by: str) -> None:
    """Before a stage runs its body: every checkpoint of the run it loads (`models`: its plan's (name, tag) pairs)
    can be loaded, else an InputError naming it (`checkpoint_gone`), before any model is read. Not at plan time: a
    done stage whose upstream checkpoint was pruned stays done (`status` builds plans too)."""
    for name, _tag in models:
        folder = Path(name)
        if checkpoint_of(run, folder) is not None and not checkpoint_usable(run, folder):
            raise checkpoint_gone(run, cfg, folder, needed_by)
