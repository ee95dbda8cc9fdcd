"""`run.keep_checkpoints`: deleting old full-weight checkpoints of a long run, and the disk each epoch uses.

A full fine-tune of a 7B model writes two float32 checkpoints (agent, environment) of about 30 GB an epoch. Once
epoch E+1 is complete (its updates done), nothing in the pipeline reads epoch E's checkpoints any more: epoch E+2
starts from E+1's. So after every update the checkpoints of epochs whose next epoch is complete are deleted,
except the last `keep_checkpoints` epochs and every `keep_checkpoints_every`-th. LoRA adapters are never deleted.

A deleted checkpoint leaves `epochs/N/pruned.json` (what was deleted, its fingerprint, when), so the stage that
wrote it still counts as done: the manifest's output check accepts a pruned output with the same fingerprint.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from genenv_cli.checkpoints import AGENT_STAGE, ENV_STAGE, env_trained
from genenv_cli.config import Config
from genenv_cli.errors import GenenvError
from genenv_cli.models import CHECKPOINT_META, read_checkpoint_meta
from genenv_cli.rundir import PRUNED, RunDir, read_pruned, write_json_atomic

ROLES = {"agent": AGENT_STAGE, "env": ENV_STAGE}


def pruned_record(run: RunDir, epoch: int) -> dict[str, Any]:
    return read_pruned(run, epoch)


def epoch_complete(run: RunDir, cfg: Config, epoch: int) -> bool:
    stages = [AGENT_STAGE] + ([ENV_STAGE] if env_trained(cfg) else [])
    return all(run.manifest_path(epoch, s).exists() for s in stages)


def keep(cfg: Config, epoch: int, newest_complete: int) -> bool:
    n, m = cfg.run.keep_checkpoints, cfg.run.keep_checkpoints_every
    return n == 0 or epoch > newest_complete - n or (m > 0 and epoch % m == 0)


def _full_checkpoint(folder: Path) -> bool:
    try:
        return read_checkpoint_meta(folder / CHECKPOINT_META)["kind"] == "full"
    except (OSError, GenenvError):
        return False


def prune(run: RunDir, cfg: Config) -> list[str]:
    """Delete what `run.keep_checkpoints` no longer keeps; returns the deleted folders (relative to the run)."""
    if cfg.run.keep_checkpoints == 0:
        return []
    epochs = run.epochs()
    complete = [e for e in epochs if epoch_complete(run, cfg, e)]
    if not complete:
        return []
    newest = max(complete)
    deleted = []
    for e in epochs:
        if keep(cfg, e, newest) or not epoch_complete(run, cfg, e + 1):
            continue
        record = pruned_record(run, e)
        for role, stage in ROLES.items():
            folder = run.checkpoint_dir(e, role)
            if folder.is_symlink() or not folder.is_dir() or not _full_checkpoint(folder):
                continue  # a link is never followed out of the run, let alone deleted through
            try:
                manifest = run.read_manifest(e, stage, f"{stage} manifest")
                fp = manifest["outputs"][role]["fingerprint"]
            except (GenenvError, KeyError, TypeError):
                continue  # no manifest to vouch for it: leave it
            record[run.rel(folder)] = {"fingerprint": fp, "pruned": time.strftime("%Y-%m-%dT%H:%M:%S")}
            write_json_atomic(run.epoch_dir(e) / PRUNED, record)  # the record first, then the deletion
            shutil.rmtree(folder)
            deleted.append(run.rel(folder))
    return deleted


def disk_use(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def disk_lines(run: RunDir) -> list[str]:
    """One line per epoch: bytes on disk, and the checkpoints pruned."""
    out = []
    for e in run.epochs():
        size = disk_use(run.epoch_dir(e))
        pruned = pruned_record(run, e)
        note = f", pruned: {', '.join(sorted(Path(k).name for k in pruned))}" if pruned else ""
        out.append(f"epoch {e} disk: {size / 1e9:.2f} GB{note}")
    return out
