"""`run.keep_checkpoints`: deleting old full-weight checkpoints of a long run, and the disk each epoch uses.

A full fine-tune of a 7B model writes two float32 checkpoints (agent, environment) of about 30 GB an epoch. Epoch
E's checkpoints are read by E's own eval-agent and by epoch E+1 (its generate-tasks and update-env start from E's
environment, its rollout and update-agent from E's agent). So they are deleted once epoch E+1 is *done*: every
stage complete and up to date, which the epoch's last stage, eval-agent, makes it (pruning runs after each update
and after eval-agent). Manifests alone are not enough: after `update-agent --epoch E --force`, or a changed setting, E+1's
stages are stale and rerun from E's checkpoints, so a stale or incomplete E+1 keeps them. The last
`keep_checkpoints` epochs (counted back from the newest done one) and every `keep_checkpoints_every`-th are kept;
LoRA adapters are never deleted.

A deletion holds the locks of epochs E and E+1 (a stage running on either is never pulled from under; if one
is busy, that epoch waits for a later pruning), records itself first in `epochs/E/pruned.json` (what, its
fingerprint, when), then deletes. So a kill in the middle leaves a half-deleted folder that the record names: it
counts as pruned, is never loaded, and the next pruning finishes it. The stage that wrote a pruned checkpoint
still counts as done (the manifest's output check accepts a pruned output with the same fingerprint); a stage
that needs it again says it was pruned by `run.keep_checkpoints` and how to get it back
(`checkpoint_records.checkpoint_gone`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.stages import epoch_stages, stage_module
from genenv_cli.core.errors import GenenvError
from genenv_cli.core.safefiles import remove_entry
from genenv_cli.core.ui import UI
from genenv_cli.machinery.checkpoints import AGENT_STAGE, ENV_STAGE
from genenv_cli.machinery.models import CHECKPOINT_META, read_checkpoint_meta
from genenv_cli.rundir import (
    PRUNED,
    EpochLock,
    RunDir,
    dead_leftovers,
    read_pruned,
    shard_of,
    shard_stage,
    unchanged,
    write_json_atomic,
)
from genenv_cli.rundir.checkpoint_records import pruned_fingerprint
from genenv_cli.rundir.stage_state import check_state

ROLES = {"agent": AGENT_STAGE, "env": ENV_STAGE}


def pruned_record(run: RunDir, epoch: int) -> dict[str, Any]:
    return read_pruned(run, epoch)


def epoch_done(run: RunDir, cfg: Config, epoch: int) -> bool:
    """Every stage of the epoch is done: complete, and up to date with its inputs (the previous epoch's
    checkpoints among them) and the config. Rollout shards stand for the rollout when it ran sharded."""
    names = epoch_stages()
    if not run.manifest_path(epoch, "rollout").exists():
        shards = [shard_stage("rollout", s) for s in run.rollout_shards(epoch)]
        names[names.index("rollout"):names.index("rollout") + 1] = shards or ["rollout"]
    for name in names:
        try:
            module = stage_module(name.split(".")[0])
            shard = shard_of(name)
            plan = module.plan(run, cfg, epoch, shard=shard) if shard else module.plan(run, cfg, epoch)
            if check_state(run, cfg, plan).state != "done":
                return False
        except (GenenvError, OSError):  # a plan that cannot be built (an upstream stage not done) is not done
            return False
    return True


def keep(cfg: Config, epoch: int, newest_done: int) -> bool:
    n, m = cfg.run.keep_checkpoints, cfg.run.keep_checkpoints_every
    return n == 0 or epoch > newest_done - n or (m > 0 and epoch % m == 0)


def _full_checkpoint(folder: Path) -> bool:
    try:
        return read_checkpoint_meta(folder / CHECKPOINT_META)["kind"] == "full"
    except (OSError, GenenvError):
        return False


def _to_delete(run: RunDir, epoch: int) -> list[tuple[Path, dict[str, Any], bool]]:
    """(folder, its manifest's fingerprint, already recorded) of each checkpoint of the epoch pruning may delete:
    a full checkpoint exactly as its manifest recorded it, or what is left of one whose deletion pruned.json
    recorded (a deletion cut short). A link is never followed out of the run, let alone deleted through; a
    folder its manifest does not vouch for is not genenv's to delete."""
    found = []
    record = read_pruned(run, epoch)
    for role, stage in ROLES.items():
        folder = run.checkpoint_dir(epoch, role)
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            fp = run.read_manifest(epoch, stage, f"{stage} manifest")["outputs"][role]["fingerprint"]
        except (GenenvError, KeyError, TypeError):
            continue
        if not isinstance(fp, dict):
            continue
        if pruned_fingerprint(record, run.rel(folder)) == fp:
            found.append((folder, fp, True))
        elif _full_checkpoint(folder) and unchanged(folder, fp):
            found.append((folder, fp, False))
    return found


def prune(run: RunDir, cfg: Config) -> list[str]:
    """Delete what `run.keep_checkpoints` no longer keeps; returns the deleted folders (relative to the run).
    Each deletion is logged in RUN/logs/prune.log."""
    if cfg.run.keep_checkpoints == 0:
        return []
    epochs = run.epochs()
    done: dict[int, bool] = {}

    def is_done(e: int) -> bool:
        if e not in done:
            done[e] = epoch_done(run, cfg, e)
        return done[e]

    newest = next((e for e in reversed(epochs) if is_done(e)), None)
    if newest is None:
        return []
    deleted: list[str] = []
    log = UI(quiet=True, log_path=run.logs_dir() / "prune.log", root=run.root)
    for e in epochs:
        record = run.epoch_dir(e) / PRUNED
        if keep(cfg, e, newest) or not (_to_delete(run, e) or dead_leftovers(record)) or not is_done(e + 1):
            continue
        try:
            with EpochLock(run.epoch_dir(e + 1), "prune", root=run.root, hand_on=True), \
                    EpochLock(run.epoch_dir(e), "prune", root=run.root, hand_on=True):
                for leftover in dead_leftovers(record):  # a pruning killed while it wrote its record
                    remove_entry(leftover)
                if not epoch_done(run, cfg, e + 1):  # changed before the locks were taken
                    continue
                deleted += _delete(run, cfg, e, log)
        except GenenvError as exc:  # a busy epoch (a stage runs there) or a refused lock: a later pruning does it
            log.log(f"epoch {e}: not pruned now ({str(exc)[:300]})")
    return deleted


def _delete(run: RunDir, cfg: Config, epoch: int, log: UI) -> list[str]:
    deleted = []
    for folder, fp, recorded in _to_delete(run, epoch):
        rel = run.rel(folder)
        if not recorded:
            record = read_pruned(run, epoch)
            record[rel] = {"fingerprint": fp, "pruned": time.strftime("%Y-%m-%dT%H:%M:%S")}
            write_json_atomic(run.epoch_dir(epoch) / PRUNED, record)  # the record first, then the deletion
        remove_entry(folder)
        deleted.append(rel)
        log.log(f"deleted {rel} (run.keep_checkpoints = {cfg.run.keep_checkpoints}, keep_checkpoints_every = "
                f"{cfg.run.keep_checkpoints_every}; epoch {epoch + 1} is done)"
                + ("; it finished a deletion that was cut short" if recorded else ""))
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
