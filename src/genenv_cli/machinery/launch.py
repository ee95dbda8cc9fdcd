"""Launch checks for the training stages: what a launch will shard, and the launches that cannot work, refused
before any model is loaded (a ConfigError, exit 2, naming the key or the config file to use).

A launch shards when `accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml` (or zero3.yaml) said
so (accelerate's launcher passes its choice to the process in ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED and the
FSDP_* / ACCELERATE_DEEPSPEED_* variables, which is what is read here), or when `run.sharding` says so under a
distributed launcher (it reaches the trainer's own options, torchrun included). A single process started without a
launcher has nothing to shard over: there `run.sharding` is dropped and the stage's log says so (transformers
refuses FSDP outside distributed training, after the models have loaded), which is what lets `--preset paper` with
LoRA train on one GPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.settings import TrainingConfig
from genenv_cli.core.errors import ConfigError

FSDP_FILE = "pipelines/accelerate/fsdp-full-shard.yaml"
ZERO3_FILE = "pipelines/accelerate/zero3.yaml"
FSDP_LAUNCH = f"accelerate launch --config_file {FSDP_FILE} -m genenv_cli"


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def distributed() -> bool:
    """Whether this process was started by a distributed launcher (accelerate launch, torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1 or "LOCAL_RANK" in os.environ


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def launcher_choice() -> str:
    """none | fsdp | zero3: what `accelerate launch` was told to shard with (its config file), whatever the setting."""
    if _true("ACCELERATE_USE_FSDP"):
        return "fsdp"
    if _true("ACCELERATE_USE_DEEPSPEED") and os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "") == "3":
        return "zero3"
    return "none"


def launcher_sharding() -> bool:
    """Whether the launcher itself chose FSDP or DeepSpeed (accelerate launch with such a config file)."""
    return _true("ACCELERATE_USE_FSDP") or _true("ACCELERATE_USE_DEEPSPEED")


def sharding_dropped(cfg: Config) -> bool:
    """Whether `run.sharding` names a sharding this process cannot use: one process, no launcher."""
    return cfg.run.sharding != "none" and not distributed() and not launcher_sharding()


def effective_sharding(cfg: Config) -> str:
    """none | fsdp | zero3: what this launch trains with. The launcher's config file first (check_update_launch
    refuses a setting that contradicts it), then `run.sharding` under a distributed launcher; one process without a
    launcher trains unsharded whatever the setting (`sharding_dropped`)."""
    launched = launcher_choice()
    if launched != "none" or launcher_sharding():
        return launched
    return "none" if sharding_dropped(cfg) else cfg.run.sharding


def trainer_sharding(cfg: Config) -> str:
    """What the trainer's own options must set up: `run.sharding`, unless the launcher already chose (accelerate
    refuses a DeepSpeed config given twice, once by its launcher and once by TrainingArguments) or there is no
    launcher (transformers refuses FSDP outside distributed training)."""
    return "none" if launcher_sharding() or sharding_dropped(cfg) else cfg.run.sharding


def sharding_line(cfg: Config) -> str:
    """The stage log's account of how this launch trains: the sharding, over how many processes, chosen by what."""
    n = world_size()
    over = f"over {n} process{'es' if n != 1 else ''}"
    if sharding_dropped(cfg):
        return (f"sharding none {over}: run.sharding = \"{cfg.run.sharding}\" is dropped, a single process without "
                f"a launcher has nothing to shard over (launch with accelerate or torchrun to shard)")
    if launcher_sharding():
        stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "")
        chosen = launcher_choice()
        what = chosen if chosen != "none" else f"DeepSpeed ZeRO-{stage or '?'}"
        return f"sharding {what} {over} (chosen by the accelerate launch's config file)"
    sharding = effective_sharding(cfg)
    source = " (run.sharding)" if sharding != "none" else (" (each process holds a whole copy: DDP)" if n > 1 else "")
    return f"sharding {sharding} {over}{source}"


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


def _zero3_weight_bits(cfg: Config) -> int:
    """16 or 32: the width of the weights DeepSpeed ZeRO-3 trains and gathers for the checkpoint. The accelerate
    launch's mixed precision (`mixed_precision: bf16` in zero3.yaml), else a DeepSpeed JSON's bf16/fp16 switch, else
    (`"auto"`, or run.sharding under torchrun) the run's compute dtype on a GPU."""
    if os.environ.get("ACCELERATE_MIXED_PRECISION", "").lower() in ("bf16", "fp16"):
        return 16
    path = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "")
    if path and path != "none":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            data = {}
        switches = [(data.get(k) or {}).get("enabled") for k in ("bf16", "fp16")] if isinstance(data, dict) else []
        if any(v is True or str(v).lower() == "true" for v in switches):
            return 16
        if not any(str(v).lower() == "auto" for v in switches):
            return 32
    return 16 if cfg.run.dtype in ("auto", "bfloat16", "float16") else 32  # auto: bf16 or fp16 on every GPU


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
    from genenv_cli.core.memory_plan import shape_of_config
    from genenv_cli.machinery.models import resolve

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
            f"them: {FSDP_LAUNCH} (full fine-tuning; pipelines/accelerate/ddp.yaml for LoRA), or torchrun with "
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
    if cfg.run.sharding == "zero3" and _true("ACCELERATE_USE_FSDP"):
        raise ConfigError(f"run.sharding = \"zero3\" but the launch uses FSDP ({FSDP_FILE}); launch with "
                          f"{ZERO3_FILE} or set run.sharding = \"fsdp\".")
    if cfg.run.sharding == "fsdp" and _true("ACCELERATE_USE_DEEPSPEED"):
        raise ConfigError(f"run.sharding = \"fsdp\" but the launch uses DeepSpeed ({ZERO3_FILE} or another "
                          f"DeepSpeed config): the log would say one and the trainer use the other. Launch with "
                          f"{FSDP_FILE}, or set run.sharding = \"zero3\" (or \"none\", to let the config file decide).")
    if sharding == "zero3" and train.lora and (bits := _zero3_weight_bits(cfg)) < 32:
        raise ConfigError(
            f"`{section}.lora` = true under DeepSpeed ZeRO-3 with {bits}-bit weights: DeepSpeed keeps the adapter's "
            f"working weights in {bits} bits, reduces their gradients in them and gathers the checkpoint from them, "
            f"not from the float32 master weights AdamW updates, so the next epoch would start from an adapter "
            f"rounded to {bits} bits (small updates of lora_A are lost) and the gradients were not reduced in "
            f"float32 as on every other route (docs/gpus.md, \"Precision\"). LoRA: launch with "
            f"pipelines/accelerate/ddp.yaml (the adapter's base fits on each GPU) or {FSDP_FILE}; or set "
            f"run.dtype = \"float32\" with mixed_precision: 'no'.")
    if sharding == "zero3" and not train.lora and (bits := _zero3_weight_bits(cfg)) < 32:
        raise ConfigError(
            f"`{section}.lora` = false under DeepSpeed ZeRO-3 with {bits}-bit weights: its checkpoint is gathered from "
            f"DeepSpeed's {bits}-bit working weights, not the float32 master weights AdamW updates, so the next epoch "
            f"would start from the update rounded to {bits} bits. A step of about {section}.learning_rate = "
            f"{train.learning_rate:g} moves a weight of 0.02 far less than bf16's resolution there (about 1e-4): "
            f"the update is lost. Full fine-tuning: launch with {FSDP_FILE} (its checkpoint is float32), or set "
            f"run.dtype = \"float32\" with mixed_precision: 'no'; or train a LoRA adapter ({section}.lora = true) "
            f"with pipelines/accelerate/ddp.yaml.")
    if not train.lora and gpus >= 1:
        _check_full_finetune_fits(cfg, section, train, model_name, sharding)
    return sharding


def _check_full_finetune_fits(cfg: Config, section: str, train: TrainingConfig, model_name: str,
                              sharding: str) -> None:
    """Full fine-tuning whose state (weights, gradients, AdamW, the reference) does not fit on one GPU under
    this launch. Only the state is counted (memory_plan, activations left out): what is refused cannot fit."""
    from genenv_cli.core.memory_plan import GB, Workload, training_bytes

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


def memory_warning(section: str, train: TrainingConfig, shape, method: str, processes: int,
                   lengths: tuple[int, int], *, reference: bool, loss: str, device_total: int,
                   compute_bytes: int = 2) -> str | None:
    """A warning when memory_plan's prediction for this update exceeds the GPU, or None: its method, its batch size,
    its gradient checkpointing and the longest rows it trains on (`lengths`: prompt + completion, completion).
    Activations are an estimate, so this warns rather than refuses; it names the setting that helps most."""
    from dataclasses import replace

    from genenv_cli.core.memory_plan import GB, Workload, training_bytes

    longest, completion = lengths
    w = Workload(batch_size=train.batch_size, seq_len=longest, completion_len=completion,
                 gradient_checkpointing=train.gradient_checkpointing, reference=reference, lora_r=train.lora_r,
                 loss=loss, compute_bytes=compute_bytes)
    need = training_bytes(shape, method, processes, w)["total"]
    if need <= device_total:
        return None
    said = (f"memory_plan predicts {need / GB:.0f} GB per GPU for this update ({method}, {train.batch_size} "
            f"sequences of up to {longest:,} tokens per micro-step, gradient checkpointing "
            f"{'on' if train.gradient_checkpointing else 'off'}), more than this GPU's {device_total / GB:.0f} GB")
    if not train.gradient_checkpointing:
        alt = training_bytes(shape, method, processes, replace(w, gradient_checkpointing=True))
        return (f"{said}. Set {section}.gradient_checkpointing = true (predicted {alt['total'] / GB:.0f} GB) or lower "
                f"{section}.batch_size; docs/gpus.md has the table.")
    one = training_bytes(shape, method, processes, replace(w, batch_size=1))
    return (f"{said}. Lower {section}.batch_size (predicted {one['total'] / GB:.0f} GB at 1) and raise "
            f"{section}.grad_accum to keep the batch; docs/gpus.md has the table.")
