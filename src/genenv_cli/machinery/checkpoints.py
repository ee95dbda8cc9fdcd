"""Which model a stage of epoch N uses, and what it records as its identity.

Epoch N reads the checkpoints epoch N-1 wrote (`epochs/N-1/agent/`, `epochs/N-1/env/`); "epoch 0" is the
base models of the config. In the `frozen`, `static` and `seeds` modes the environment is never trained, so
every epoch generates with the base environment model; with `agent.mode = "frozen"` every epoch's rollouts use
the base agent.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from genenv_cli.catalogue.config import Config
from genenv_cli.core.errors import InputError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.checkpoint_records import CHECKPOINT_STAGES, checkpoint_gone, checkpoint_usable
from genenv_cli.rundir.stage_state import require_done

AGENT_STAGE = CHECKPOINT_STAGES["agent"]
ENV_STAGE = CHECKPOINT_STAGES["env"]


def derive_seed(base: int, *parts: object) -> int:
    """A stable 31-bit seed from the run seed and labels (epoch, stage, round ...)."""
    blob = ":".join(str(p) for p in (base, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


def agent_trained(cfg: Config) -> bool:
    return cfg.agent.mode == "trained"


def agent_model_for(run: RunDir, cfg: Config, epoch: int, needed_by: str) -> tuple[str, str, Path | None]:
    """(name to resolve, tag for records, manifest of the stage that wrote it or None for the base)."""
    if epoch <= 1 or not agent_trained(cfg):
        return cfg.agent.model, cfg.agent.model, None
    require_done(run, epoch - 1, AGENT_STAGE, needed_by)
    folder = run.checkpoint_dir(epoch - 1, "agent")
    return str(folder), run.rel(folder), run.manifest_path(epoch - 1, AGENT_STAGE)


def env_trained(cfg: Config) -> bool:
    return cfg.env.mode == "genenv"


def env_model_for(run: RunDir, cfg: Config, epoch: int, needed_by: str) -> tuple[str, str, Path | None]:
    if epoch <= 1 or not env_trained(cfg):
        return cfg.env.model, cfg.env.model, None
    require_done(run, epoch - 1, ENV_STAGE, needed_by)
    folder = run.checkpoint_dir(epoch - 1, "env")
    return str(folder), run.rel(folder), run.manifest_path(epoch - 1, ENV_STAGE)


def missing_checkpoint(run: RunDir, cfg: Config, epoch: int, needed_by: str, role: str = "agent") -> InputError:
    """The error for a checkpoint folder whose stage completed (its manifest is there) but which cannot be loaded:
    pruned by `run.keep_checkpoints` (which it names, with how to get the checkpoint back), or gone."""
    return checkpoint_gone(run, cfg, run.checkpoint_dir(epoch, role), needed_by)


def latest_agent(run: RunDir, cfg: Config) -> tuple[str, str]:
    """The newest agent checkpoint of the run (name, tag), or the base model when no update-agent has completed.
    A completed update-agent whose folder is gone or pruned is an error, never a silent fall back to an older
    model."""
    if not agent_trained(cfg):
        return cfg.agent.model, cfg.agent.model
    for epoch in reversed(run.epochs()):
        if run.manifest_path(epoch, AGENT_STAGE).exists():
            folder = run.checkpoint_dir(epoch, "agent")
            if not checkpoint_usable(run, folder):
                raise missing_checkpoint(run, cfg, epoch, "evaluate")
            return str(folder), run.rel(folder)
    return cfg.agent.model, cfg.agent.model
