"""The training run both updates share: transformers' TrainingArguments from the run's settings (sharding
included), the trainer built and trained with a progress bar, and what the run did said in the log.

Sharded training (FSDP or DeepSpeed ZeRO-3: `run.sharding`, or the launch's config file in pipelines/accelerate/) is
what a 7B full fine-tune needs; the checkpoint is then written from accelerate's `get_state_dict`, which gathers the
shards on the main process (publishing.py).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.settings import TrainingConfig
from genenv_cli.machinery.models import dtype_name, pick_device
from genenv_cli.machinery.training.distributed import world
from genenv_cli.machinery.training.policy_loading import Policy


def sharding_arguments(sharding: str, gradient_checkpointing: bool) -> dict[str, Any]:
    """TrainingArguments options for `run.sharding`, so that the sharding reaches the trainer under any launcher
    (torchrun reads no accelerate config file). fsdp: FSDP2 full shard, one unit per decoder layer (the model's own
    `_no_split_modules`), gathered into a full state dict for saving, rank 0's weights broadcast to the others when
    the model is wrapped; gradient checkpointing becomes FSDP's own activation checkpointing (transformers refuses
    both at once). zero3: DeepSpeed ZeRO-3 with the 16-bit weights
    gathered on save. Every other option is left to transformers' defaults ("auto" values)."""
    if sharding == "fsdp":
        # cpu_ram_efficient_loading: accelerate broadcasts rank 0's weights into every rank's shards when it wraps
        # the model (every rank has read the same weights: load_policy), so all ranks start from rank 0's
        return {"fsdp": "full_shard auto_wrap",
                "fsdp_config": {"version": 2, "state_dict_type": "FULL_STATE_DICT", "reshard_after_forward": True,
                                "activation_checkpointing": gradient_checkpointing,
                                "cpu_ram_efficient_loading": True}}
    if sharding == "zero3":
        return {"deepspeed": {"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True},
                              "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
                              "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
                              "gradient_clipping": "auto", "train_batch_size": "auto"}}
    return {}


def training_arguments(output_dir: Path | str, train: TrainingConfig, *, seed: int, device: str,
                       dtype: str = "auto", sharding: str = "none", timeout: int = 1800) -> Any:
    """Trainer settings. Autocast in the compute dtype (bf16/fp16) over float32 master weights; the warm-up is set
    in `train_with_progress`, once the number of steps is known (a step count means the same in transformers 4
    and 5, where `warmup_ratio` was folded into `warmup_steps`). `sharding` is `run.sharding`, `timeout` the
    process group's (`run.dist_timeout`)."""
    from transformers import TrainingArguments

    dev = pick_device(device)
    on_gpu = dev.startswith("cuda")
    compute = dtype_name(dtype, dev)
    checkpointing = {"gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"use_reentrant": False}} \
        if train.gradient_checkpointing and sharding != "fsdp" else {}
    with warnings.catch_warnings():  # transformers warns about its own renamed fields while building defaults
        warnings.simplefilter("ignore", FutureWarning)
        return TrainingArguments(
            output_dir=str(output_dir), per_device_train_batch_size=train.batch_size,
            gradient_accumulation_steps=train.grad_accum, num_train_epochs=train.passes,
            learning_rate=train.learning_rate, lr_scheduler_type=train.lr_scheduler, warmup_steps=0,
            max_grad_norm=train.max_grad_norm,
            weight_decay=0.0, optim="adamw_torch", logging_steps=1, save_strategy="no", report_to="none",
            use_cpu=not on_gpu, bf16=compute == "bfloat16", fp16=compute == "float16" and on_gpu,
            dataloader_num_workers=0,
            remove_unused_columns=False, seed=seed, data_seed=seed, disable_tqdm=True,
            ddp_find_unused_parameters=False, ddp_timeout=timeout, **checkpointing,
            **sharding_arguments(sharding, train.gradient_checkpointing),
        )


def train_with_progress(trainer: Any, ui: Any, desc: str, passes: int, grad_accum: int,
                        warmup_ratio: float = 0.0) -> None:
    """trainer.train() with a progress bar over optimizer steps (and transformers' deprecation notices muted).
    The random state is seeded first: Trainer's sampler draws the data order from the global generator.
    `warmup_ratio` becomes a whole number of warm-up steps here, where the number of steps is known."""
    from transformers import TrainerCallback, set_seed

    set_seed(trainer.args.seed)
    total = max(len(trainer.get_train_dataloader()) * passes // grad_accum, 1)
    trainer.args.warmup_steps = math.ceil(warmup_ratio * total)
    with ui.progress(desc, total, "steps") as bar:
        class _Bar(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                bar.advance(1)

        trainer.add_callback(_Bar())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            trainer.train()


def train_policy(policy: Policy, train: TrainingConfig, build: Any, *, seed: int, device: str, dtype: str, ui: Any,
                 desc: str, sharding: str = "none",
                 timeout: int = 1800) -> tuple[Any, dict[int, dict[str, Any]], BaseException | None]:
    """The middle both update stages share: trainer settings in a scratch folder, `build(args)` makes the
    trainer (a base_trainer.StoredRowsTrainer), it trains with a progress bar, and the trained model becomes the
    policy's. Returns (the trainer, its log records by step, the `KLCapReached` that ended training early or
    None: the refused step is in `trainer.stopped`)."""
    import tempfile

    from genenv_cli.machinery.training.step_stats import KLCapReached

    stopped = None
    with tempfile.TemporaryDirectory(prefix="genenv-trainer-") as tmp:
        args = training_arguments(tmp, train, seed=seed, device=device, dtype=dtype, sharding=sharding,
                                  timeout=timeout)
        with ui.working(f"{desc}: preparing the trainer"):
            trainer = build(args)
        from genenv_cli.machinery.training.precision import apply_precision

        apply_precision(trainer, dtype_name(dtype, pick_device(device)))  # before train() wraps the model
        warning = _memory_warning(policy, train, trainer, sharding, dtype)
        if warning and world()[0] == 0:
            ui.warn(f"{desc}: {warning}")
        try:
            train_with_progress(trainer, ui, desc, train.passes, train.grad_accum, warmup_ratio=train.warmup_ratio)
        except KLCapReached as exc:
            stopped = exc
        logged = trainer.logs_by_step()
        policy.model = trainer.model
        kind = str(trainer.accelerator.distributed_type).split(".")[-1]
        said = (f"{desc}: trained {distribution_words(kind, trainer.accelerator.num_processes)} "
                f"(accelerate: {kind}, {type(trainer.model_wrapped).__name__})")
        (ui.info if trainer.accelerator.num_processes > 1 else ui.log)(said)  # one process: nothing to say
        asked = sharding != "none" or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
        if asked and kind not in ("FSDP", "DEEPSPEED"):
            # accelerate applies FSDP only to GPU-like process groups: CPU processes (MULTI_CPU) train unsharded
            ui.info(f"{desc}: warning: sharding was asked for, but accelerate trained {kind}, unsharded")
        held = getattr(trainer, "precision", {})
        if held:
            ui.info(f"{desc}: precision: weights {held.get('weights')}, compute {held.get('compute')}, gradients "
                    f"{held.get('grads')}, reduced over the ranks in {held.get('reduce') or '(one process: none)'}")
        shards = [p for p in trainer.model_wrapped.parameters() if hasattr(p, "to_local")]
        if shards:  # FSDP2 holds each parameter as a DTensor: this rank's part of it
            local = sum(p.to_local().numel() for p in shards)
            ui.log(f"{desc}: parameters sharded, this rank holds {local:,} of {sum(p.numel() for p in shards):,}")
    return trainer, logged, stopped


def distribution_words(kind: str, processes: int) -> str:
    """accelerate's distributed type in words, for the log line (its name for one process is `NO`).

    >>> distribution_words("NO", 1), distribution_words("MULTI_GPU", 8), distribution_words("FSDP", 2)
    ('in one process (no distribution)', 'data-parallel (DDP) over 8 GPU processes', 'sharded with FSDP over 2 processes')
    """
    if kind == "NO":
        return "in one process (no distribution)"
    where = {"MULTI_GPU": "GPU ", "MULTI_CPU": "CPU ", "MULTI_XPU": "XPU ", "MULTI_NPU": "NPU "}
    if kind in where:
        return f"data-parallel (DDP) over {processes} {where[kind]}processes"
    if kind in ("FSDP", "DEEPSPEED"):
        return f"sharded with {'FSDP' if kind == 'FSDP' else 'DeepSpeed'} over {processes} processes"
    return f"as accelerate's {kind} over {processes} processes"


def _memory_warning(policy: Policy, train: TrainingConfig, trainer: Any, sharding: str, dtype: str) -> str | None:
    """launch.memory_warning for this update on this process's GPU (None on CPU): the rows it trains on give the
    lengths (`target_ids`: update-env's RWR pairs; `completion_ids`: GRPO rows); the plan is compared with the
    memory the allocator can reserve."""
    import torch

    first = next(iter(policy.model.parameters()), None)
    if first is None or first.device.type != "cuda":
        return None
    from genenv_cli.catalogue.settings import AgentUpdateConfig, EnvUpdateConfig
    from genenv_cli.core.memory_plan import shape_of_config
    from genenv_cli.machinery.launch import launcher_choice, memory_warning

    rows = list(trainer.train_dataset or [])
    config = getattr(policy.model, "config", None)
    shape = shape_of_config(config.to_dict()) if config is not None else None
    if not rows or shape is None:
        return None
    key = "target_ids" if "target_ids" in rows[0] else "completion_ids"
    lengths = (max(len(r["prompt_ids"]) + len(r[key]) for r in rows), max(len(r[key]) for r in rows))
    chosen = sharding if sharding != "none" else launcher_choice()
    method = "lora" if policy.lora else {"none": "full", "fsdp": "fsdp", "zero3": "zero3"}[chosen]
    section = {AgentUpdateConfig: "agent_update", EnvUpdateConfig: "env_update"}.get(type(train), "the update")
    # what the allocator can still reserve: the GPU's free memory and what this process holds already (not the
    # GPU's total: other processes and CUDA's own context take theirs)
    total = int(torch.cuda.mem_get_info(first.device)[0]) + int(torch.cuda.memory_reserved(first.device))
    width = torch.finfo(getattr(torch, dtype_name(dtype, str(first.device)))).bits // 8
    return memory_warning(section, train, shape, method, world()[1], lengths,
                          reference=policy.reference is not None and not policy.lora,
                          loss="rwr" if key == "target_ids" else "grpo", device_total=total, compute_bytes=width)


