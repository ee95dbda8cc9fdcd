"""The end of an update: the trained weights gathered from the ranks, refused when NaN or infinite, hashed,
and saved as a checkpoint with the update's per-sample and per-step files.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.settings import TrainingConfig
from genenv_cli.machinery.models import write_checkpoint_meta
from genenv_cli.machinery.training.distributed import all_mean, finish_distributed
from genenv_cli.machinery.training.policy_loading import Policy


def gather_state_dict(trainer: Any | None) -> dict[str, Any] | None:
    """The full state dict of the trained model, gathered by accelerate from whatever wraps it (DDP: the module's
    own; FSDP and DeepSpeed ZeRO-3: the shards of every rank, assembled on the main process). A collective under
    sharding: every rank calls it. None when nothing was trained (the model is not wrapped: save it directly)."""
    if trainer is None:
        return None
    return trainer.accelerator.get_state_dict(trainer.model_wrapped)


def save_checkpoint(policy: Policy, folder: Path, *, role: str, epoch: int, extra: dict[str, Any],
                    trainer: Any = None, state_dict: dict[str, Any] | None = None) -> None:
    """An adapter (with its base recorded) or full weights, plus the tokenizer and genenv_checkpoint.json.
    Main process only; `state_dict` is `gather_state_dict`'s (every rank took part in gathering it)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = policy.model if trainer is None else trainer.accelerator.unwrap_model(trainer.model_wrapped)
    if state_dict is None:
        model.save_pretrained(folder)
    else:
        model.save_pretrained(folder, state_dict=state_dict)
    policy.tokenizer.save_pretrained(folder)
    write_checkpoint_meta(folder, kind="lora" if policy.lora else "full", base=policy.base_name, role=role,
                          epoch=epoch, extra=extra)


def _first_non_finite_step(steps: list[dict[str, Any]]) -> tuple[int, str, float] | None:
    for s in steps:
        for key, value in s.items():
            if isinstance(value, float) and not math.isfinite(value):
                return int(s.get("step") or 0), key, value
    return None


def local_part(p: Any) -> Any:
    """This rank's values of a parameter: an FSDP2 DTensor's local shard, a DeepSpeed ZeRO-3 parameter's partition
    (`ds_tensor`: the parameter itself is an empty placeholder between forwards), else the parameter."""
    if hasattr(p, "to_local"):
        return p.to_local()
    return p.ds_tensor if hasattr(p, "ds_tensor") else p


def _first_non_finite_parameter(model: Any) -> str | None:
    """The first trainable parameter whose local part holds NaN or infinity: under sharding each rank sees its own
    shard or partition, and `check_finite` reduces over the ranks, so every value is seen by some rank."""
    import torch

    for name, p in model.named_parameters():
        if p.requires_grad and not bool(torch.isfinite(local_part(p).detach()).all()):
            return name
    return None


def check_finite(policy: Policy, steps: list[dict[str, Any]], *, role: str, epoch: int,
                 train: TrainingConfig | None) -> None:
    """Refuse to publish an update whose weights or per-step numbers are NaN or infinite: a ConfigError naming
    the step and the setting most likely at fault (the learning rate first), raised on every rank alike, before
    anything is written, so the stage's previous outputs stay in place."""
    from genenv_cli.core.errors import ConfigError

    param = _first_non_finite_parameter(policy.model)
    step = _first_non_finite_step(steps)
    if all_mean(1.0 if (param or step) else 0.0) == 0.0:
        return
    section = f"{role}_update"
    what = []
    if step is not None:
        what.append(f"the {step[1]} of step {step[0]} is {step[2]}")
    if param is not None:
        what.append(f"the trained weights hold NaN or infinity (first: {param})")
    if not what:  # only another rank's shard or partition of the weights holds it
        what.append("the trained weights hold NaN or infinity (in another rank's shard)")
    lr = f" = {train.learning_rate:g}" if train is not None else ""
    default = type(train)().learning_rate if train is not None else None
    hint = f" (the default is {default:g})" if default is not None else ""
    raise ConfigError(f"update-{role} epoch {epoch}: training diverged: {'; '.join(what)}. Nothing was written: the "
                      f"previous checkpoint and outputs stay as they were. The setting most likely at fault is "
                      f"`{section}.learning_rate`{lr}{hint}; lower it (and check `{section}.max_grad_norm`), "
                      f"then rerun `genenv update-{role} --epoch {epoch}`.")


def publish_update(policy: Policy, out: Any, *, role: str, epoch: int, trained_from: str, records: Any,
                   steps: list[dict[str, Any]], ui: Any, trainer: Any = None,
                   train: TrainingConfig | None = None) -> str:
    """The end both update stages share: the state dict gathered by all ranks; on the main rank the digest of the
    gathered trainable weights, the checkpoint and `<role>_update.parquet` (per sample) and
    `<role>_update_steps.parquet`; then the process group is closed. Returns the digest (empty on other ranks)."""
    from genenv_cli.rundir.datafiles import frame, write_parquet

    check_finite(policy, steps, role=role, epoch=epoch, train=train)
    if trainer is not None and getattr(trainer, "precision", None):
        out.counts["precision"] = dict(trainer.precision)   # the dtypes the training held (training/precision.py)
    state_dict = gather_state_dict(trainer)
    digest = ""
    if out.is_main:  # rank 0 alone hashes, and what it hashes is the gathered weights it saves
        digest = parameter_digest(policy.model if trainer is None
                                  else trainer.accelerator.unwrap_model(trainer.model_wrapped), state_dict)
        ui.detail(f"rank 0 trainable-parameter digest {digest}")  # for checking ranks: not news to a user (--verbose)
        save_checkpoint(policy, out.path(role), role=role, epoch=epoch, trainer=trainer, state_dict=state_dict,
                        extra={"trained_from": trained_from, "parameter_digest": digest})
        write_parquet(records, out.path(f"{role}_update"), f"{role}_update")
        write_parquet(frame(steps, f"{role}_update_steps"), out.path(f"{role}_update_steps"), f"{role}_update_steps")
    finish_distributed()
    return digest


# Prefixes that wrappers put into parameter names but not into the state dict they produce: activation checkpointing
# (torch's checkpoint_wrapper, which FSDP's activation checkpointing applies), FSDP1's wrapper, torch.compile
WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_fsdp_wrapped_module.", "_orig_mod.")


def plain_name(name: str) -> str:
    """A parameter's name as a checkpoint and the reloaded model spell it, without wrappers' prefixes.

    >>> plain_name("model.layers.0._checkpoint_wrapped_module.mlp.up_proj.weight")
    'model.layers.0.mlp.up_proj.weight'
    """
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def parameter_digest(model: Any, state_dict: dict[str, Any] | None = None) -> str:
    """sha256 of the trainable parameters (by their plain names), to compare a checkpoint with what loads back. With
    `state_dict` (the gathered one: under FSDP or ZeRO-3 a rank's own parameters are shards) the values are read from
    it; a sharded parameter it lacks is an error, never this rank's shard hashed in its place."""
    h = hashlib.sha256()
    named = sorted(((plain_name(n), p) for n, p in model.named_parameters() if p.requires_grad), key=lambda x: x[0])
    for name, p in named:
        value = state_dict.get(name) if state_dict is not None else None
        if value is None:
            if state_dict is not None and (hasattr(p, "to_local") or hasattr(p, "ds_tensor")):
                raise RuntimeError(f"the gathered state dict has no value for the sharded parameter {name}: the "
                                   f"checkpoint's digest would be of one rank's shard")
            value = p
        local = local_part(value)
        h.update(name.encode())
        h.update(local.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
