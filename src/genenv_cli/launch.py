"""Launch checks for the training stages: what a launch will shard, and the launches that cannot work, refused
before any model is loaded (a ConfigError, exit 2, naming the key or the config file to use).

A launch shards when `run.sharding` says so (it reaches the trainer under any launcher, torchrun included) or when
`accelerate launch --config_file stages/accelerate/fsdp-full-shard.yaml` (or zero3.yaml) said so: accelerate's
launcher passes its choice to the process in ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED and the FSDP_* /
ACCELERATE_DEEPSPEED_* variables, which is what is read here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from genenv_cli.config import Config, TrainingConfig
from genenv_cli.errors import ConfigError

FSDP_FILE = "stages/accelerate/fsdp-full-shard.yaml"
ZERO3_FILE = "stages/accelerate/zero3.yaml"
FSDP_LAUNCH = f"accelerate launch --config_file {FSDP_FILE} -m genenv_cli"


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def distributed() -> bool:
    """Whether this process was started by a distributed launcher (accelerate launch, torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1 or "LOCAL_RANK" in os.environ


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def effective_sharding(cfg: Config) -> str:
    """none | fsdp | zero3: what this launch shards with (the setting, or the accelerate config it was launched with)."""
    if cfg.run.sharding != "none":
        return cfg.run.sharding
    if _true("ACCELERATE_USE_FSDP"):
        return "fsdp"
    if _true("ACCELERATE_USE_DEEPSPEED") and os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "") == "3":
        return "zero3"
    return "none"


def launcher_sharding() -> bool:
    """Whether the launcher itself chose FSDP or DeepSpeed (accelerate launch with such a config file)."""
    return _true("ACCELERATE_USE_FSDP") or _true("ACCELERATE_USE_DEEPSPEED")


def trainer_sharding(cfg: Config) -> str:
    """What the trainer's own options must set up: `run.sharding`, unless the launcher already chose (accelerate
    refuses a DeepSpeed config given twice, once by its launcher and once by TrainingArguments)."""
    return "none" if launcher_sharding() else cfg.run.sharding


def _zero3_gathers_on_save() -> bool:
    """Whether an accelerate-launched ZeRO-3 gathers 16-bit weights on save (its yaml key, or a DeepSpeed JSON)."""
    path = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "")
    if path and path != "none":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return False
        zero = data.get("zero_optimization", {}) if isinstance(data, dict) else {}
        flag = zero.get("stage3_gather_16bit_weights_on_model_save", zero.get("gather_16bit_weights_on_model_save"))
        return flag is True or str(flag).lower() == "true"
    return _true("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL")


def visible_gpus(device: str) -> int:
    if device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def device_bytes() -> int:
    """Memory of this process's GPU (0 without one)."""
    import torch

    if not torch.cuda.is_available():
        return 0
    index = int(os.environ.get("LOCAL_RANK", "0") or 0)
    return int(torch.cuda.get_device_properties(index).total_memory)


def _model_shape(name: str):
    from genenv_cli.memory_plan import shape_of_config
    from genenv_cli.models import resolve

    try:
        path = Path(resolve(name).path) / "config.json"
        return shape_of_config(json.loads(path.read_text())) if path.exists() else None
    except Exception:  # noqa: BLE001 - an unreadable model is reported when it is loaded
        return None


def check_update_launch(cfg: Config, section: str, model_name: str) -> str:
    """Refuse a training launch that cannot work; returns the sharding it will use. `section` is agent_update or
    env_update, `model_name` the model that update trains."""
    train: TrainingConfig = getattr(cfg, section)
    gpus = visible_gpus(cfg.run.device)
    if gpus > 1 and not distributed():
        raise ConfigError(
            f"{gpus} GPUs are visible but `{section.replace('_', '-')}` was not started by a distributed launcher: "
            f"transformers would wrap the model in nn.DataParallel (the whole batch's logits on cuda:0, a different "
            f"number of optimizer steps). Use one GPU (CUDA_VISIBLE_DEVICES=0 genenv ...) or launch it on all of "
            f"them: {FSDP_LAUNCH} (full fine-tuning; stages/accelerate/ddp.yaml for LoRA), or torchrun with "
            f"run.sharding set.")
    sharding = effective_sharding(cfg)
    if _true("ACCELERATE_USE_FSDP") and _true("FSDP_ACTIVATION_CHECKPOINTING") and train.gradient_checkpointing:
        raise ConfigError(
            f"`{section}.gradient_checkpointing` = true and the accelerate config turns on FSDP's activation "
            f"checkpointing: transformers refuses both at once. Set {section}.gradient_checkpointing = false, or "
            f"launch with {FSDP_FILE} (activation checkpointing off there) and run.sharding = \"fsdp\", which turns "
            f"gradient checkpointing into FSDP's own.")
    if _true("ACCELERATE_USE_DEEPSPEED") and os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "") == "3" \
            and not _zero3_gathers_on_save():
        raise ConfigError(
            f"DeepSpeed ZeRO-3 is launched without gathering 16-bit weights on save (zero3_save_16bit_model: false, "
            f"or stage3_gather_16bit_weights_on_model_save missing): the checkpoint could not be written after the "
            f"whole update. Launch with {ZERO3_FILE}, or set zero3_save_16bit_model: true.")
    if sharding == "zero3" and cfg.run.sharding == "zero3" and _true("ACCELERATE_USE_FSDP"):
        raise ConfigError(f"run.sharding = \"zero3\" but the launch uses FSDP ({FSDP_FILE}); launch with "
                          f"{ZERO3_FILE} or set run.sharding = \"fsdp\".")
    if not train.lora and gpus >= 1:
        _check_full_finetune_fits(cfg, section, train, model_name, sharding)
    return sharding


def _check_full_finetune_fits(cfg: Config, section: str, train: TrainingConfig, model_name: str,
                              sharding: str) -> None:
    """Full fine-tuning whose state (weights, gradients, AdamW, the reference) does not fit on one GPU under
    this launch. Only the state is counted (memory_plan, activations left out): what is refused cannot fit."""
    from genenv_cli.memory_plan import GB, Workload, training_bytes

    shape = _model_shape(model_name)
    total = device_bytes()
    if shape is None or total <= 0:
        return
    n = world_size() if sharding != "none" else 1
    method = {"none": "full", "fsdp": "fsdp", "zero3": "zero3"}[sharding]
    kl = getattr(train, "kl_coef", 0.0) > 0
    parts = training_bytes(shape, method, n, Workload(reference=kl))
    need = parts["total"] - parts["activations"]
    if need <= total:
        return
    if sharding == "none":
        raise ConfigError(
            f"`{section}.lora` = false fine-tunes all {shape.params() / 1e9:.1f} B parameters of {model_name}: "
            f"{need / GB:.0f} GB per GPU for weights, gradients and AdamW states unsharded, more than this GPU's "
            f"{total / GB:.0f} GB. Shard it: TRAIN=\"{FSDP_LAUNCH}\" (or set run.sharding = \"fsdp\" under "
            f"torchrun), or set {section}.lora = true. docs/gpus.md has the table.")
    raise ConfigError(
        f"`{section}.lora` = false with {sharding} over {n} processes still needs {need / GB:.0f} GB per GPU for "
        f"{model_name}, more than this GPU's {total / GB:.0f} GB: launch on more GPUs (--num_processes) or set "
        f"{section}.lora = true. docs/gpus.md has the table.")
