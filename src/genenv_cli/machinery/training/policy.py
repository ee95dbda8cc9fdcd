"""What both updates share: the trainable model (LoRA adapter or full weights), the frozen reference,
transformers' Trainer settings, the training loop and its checks, and checkpoints (the log-probabilities are
in `logits.py`, the ranks' arithmetic in `distributed.py`).

Both updates run on `transformers.Trainer` (the loop, AdamW, schedule, gradient clipping, accumulation and
accelerate's multi-process/FSDP/DeepSpeed support) with their own `compute_loss`; neither TRL trainer fits:
GRPOTrainer generates its own completions (and with `rollout_func` ignores stored behaviour logprobs), and
SFTTrainer has no per-sample weights or KL term.

Precision (training/precision.py has the whole story): the weights being trained are kept in float32 (the master
copy AdamW updates), forward and backward compute in the run's compute dtype (autocast, Trainer's bf16/fp16; under
FSDP2 the policy genenv sets), and gradients are reduced and accumulated in float32. Weights stored in bf16 would
round an AdamW step of about 1e-6 away: bf16 keeps 8 bits of mantissa, so a weight of 0.02 moves in steps of 1e-4.
Frozen weights (a LoRA base, the reference model) are loaded in the compute dtype.

Sharded training (FSDP or DeepSpeed ZeRO-3: `run.sharding`, or the launch's config file in pipelines/accelerate/) is
what a 7B full fine-tune needs;
the checkpoint is then written from accelerate's `get_state_dict`, which gathers the shards on the main process.
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.settings import TrainingConfig
from genenv_cli.machinery.models import (
    ModelRef,
    dtype_name,
    load_model,
    load_tokenizer,
    pick_device,
    resolve,
    write_checkpoint_meta,
)
from genenv_cli.machinery.training.distributed import all_mean, finish_distributed, world


@dataclass
class Policy:
    model: Any                 # the model being trained (a PeftModel when LoRA)
    tokenizer: Any
    lora: bool
    base_name: str             # the epoch-0 model name (config), recorded in checkpoints
    reference: Any = None      # a frozen copy of the epoch-0 model, when the adapter trick cannot serve

    def reference_context(self) -> AbstractContextManager:
        """Inside it, `self.model` computes the epoch-0 (reference) policy: the LoRA adapter switched off."""
        if self.reference is None and self.lora:
            return self.model.disable_adapter()
        return nullcontext()

    def reference_model(self) -> Any:
        return self.reference if self.reference is not None else self.model


def load_policy(name: str, tag: str, *, base_name: str, train: TrainingConfig, need_reference: bool, device: str,
                dtype: str, trust_remote_code: bool, seed: int = 0) -> Policy:
    """The model of the previous epoch, ready to train.

    LoRA: an adapter checkpoint keeps training the same adapter; a base model gets a fresh adapter. The
    reference (epoch 0) is then the same model with the adapter disabled, so no second copy is loaded, as
    long as the adapter sits on the configured base. Full fine-tuning loads the reference separately.

    Every model lands on this process's device (`pick_device`: cuda:LOCAL_RANK under a launcher), read straight
    onto a GPU (`load_model`). The weights being trained are float32 (see the module docstring); frozen ones use
    the compute dtype `dtype`. Every rank reads the same weights the same way, sharded or not: no rank builds an
    empty (meta-device) model to be filled later. Such a model's parameters all share the address 0, and accelerate's
    FSDP2 preparation finds each optimizer slot's new shard by the old parameter's address, so every slot of those
    ranks ended up on one parameter; reading straight onto the GPU costs no host memory anyway."""
    lora = train.lora
    ref = resolve(name, tag=tag)
    tokenizer = load_tokenizer(ref, trust_remote_code)
    base_ref = resolve(base_name)
    adapter_on_base = ref.adapter is not None and ref.path == base_ref.path
    if lora:
        from peft import LoraConfig, get_peft_model

        if adapter_on_base:
            model = load_model(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                               trainable_adapter=True)
        else:
            model = load_model(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
            import torch

            torch.manual_seed(seed)  # a new adapter's A matrices are random: same seed, same update
            cfg = LoraConfig(r=train.lora_r, lora_alpha=train.lora_alpha, lora_dropout=train.lora_dropout,
                             target_modules=train.lora_targets, task_type="CAUSAL_LM")
            model = get_peft_model(model, cfg)
        reference = None
        starts_from_base = adapter_on_base or ref.path == base_ref.path
        if need_reference and not starts_from_base:
            reference = _frozen(base_ref, device, dtype, trust_remote_code)
    else:
        model = load_model(ref, device=device, dtype="float32", trust_remote_code=trust_remote_code, merge=True)
        reference = _frozen(base_ref, device, dtype, trust_remote_code) if need_reference else None
    model.train()
    if hasattr(model, "config"):
        model.config.use_cache = False
    return Policy(model=model, tokenizer=tokenizer, lora=lora, base_name=base_name, reference=reference)


def _frozen(ref: ModelRef, device: str, dtype: str, trust_remote_code: bool) -> Any:
    model = load_model(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


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


def grouped_order(groups: list[Any], seed: int) -> Any:
    """A sampler for Trainer that keeps the rows of a group next to each other: every pass shuffles the groups and
    the rows inside each (seeded: `seed` and the pass), then runs them group after group, so a micro-batch holds
    whole groups. The environment's groups are the generations of one conditioning context, which share their
    whole prompt (a few hundred tokens against a few dozen of output): together in a micro-batch, the shared-prefix
    forward (engines/shared_prefix.py) computes that prompt once for all of them instead of once per row. Every row
    is still used once per pass; only which rows share a micro-batch changes."""
    import random

    from torch.utils.data import Sampler

    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)

    class _Grouped(Sampler):
        def __init__(self) -> None:
            self.passes = 0

        def __len__(self) -> int:
            return len(groups)

        def __iter__(self):
            rng = random.Random(f"{seed}/{self.passes}")
            self.passes += 1
            keys = list(members)
            rng.shuffle(keys)
            order: list[int] = []
            for k in keys:
                rows = list(members[k])
                rng.shuffle(rows)
                order.extend(rows)
            return iter(order)

    return _Grouped()


def attach_recorder(trainer: Any, kl_max: float | None = None) -> Any:
    """Make a Trainer with our own compute_loss report per-step numbers: compute_loss appends a dict per
    micro-step to `trainer.micro` (with its `tokens` and `rows`); before each optimizer step they are combined over
    the step's micro-batches and the ranks (training/step_stats.py) and, with `kl_max`, the step's KL decides whether
    the step is taken (`KLCapReached`, the step in `trainer.stopped`); the step's numbers land in
    `trainer.step_stats`, transformers' own log records (grad norm before clipping, learning rate) in
    `trainer.logged`, the dtypes the training had in `trainer.precision` (training/precision.py)."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    from genenv_cli.machinery.training.precision import attach_probe
    from genenv_cli.machinery.training.step_stats import KLCapReached, step_totals

    class _Recorder(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            trainer.logged.append({"step": state.global_step, **(logs or {})})

        def on_pre_optimizer_step(self, args, state, control, **kw):
            micro, trainer.micro = materialize(trainer.micro), []
            trainer.pending = step_totals(micro) if micro else None
            if kl_max is not None and trainer.pending is not None and trainer.pending["kl"] > kl_max:
                step = trainer.pending
                trainer.stopped = {"step": state.global_step + 1, "kl": step["kl"], "loss": step["loss"],
                                   "nll": step.get("nll")}
                raise KLCapReached(f"KL {step['kl']:.4g} > kl_max {kl_max:g}")

        def on_step_end(self, args, state, control, **kw):
            if trainer.pending is not None:
                trainer.step_stats.append({**trainer.pending, "step": state.global_step, "pass": state.epoch})
            trainer.pending = None

    attach_probe(trainer, trainer.model)   # first: it reads the dtypes even of a step the KL cap refuses
    trainer.add_callback(_Recorder())
    trainer.remove_callback(PrinterCallback)  # it prints every log dict to stdout; ours go to the UI and parquet
    trainer.model_accepts_loss_kwargs = False  # our losses are means: let Trainer divide by accumulation steps
    trainer.micro, trainer.step_stats, trainer.logged, trainer.pending, trainer.stopped = [], [], [], None, None
    return trainer


def materialize(micro: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The micro-steps' numbers as floats. compute_loss records them as detached tensors, so the device is
    synchronised once per optimizer step here (one transfer of all of them), not once per number."""
    import torch

    where = [(i, k) for i, m in enumerate(micro) for k, v in m.items() if isinstance(v, torch.Tensor)]
    if not where:
        return micro
    values = torch.stack([micro[i][k].detach().float().reshape(()) for i, k in where]).tolist()
    out = [dict(m) for m in micro]
    for (i, k), v in zip(where, values, strict=True):
        out[i][k] = v
    return out


def merged_logs(trainer: Any) -> dict[int, dict[str, Any]]:
    """Trainer's log records by step (the end-of-training summary shares the last step's number: merged)."""
    logged: dict[int, dict[str, Any]] = {}
    for r in trainer.logged:
        logged.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k not in logged.get(r["step"], {})})
    return logged


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


def train_policy(policy: Policy, train: TrainingConfig, build: Any, *, seed: int, device: str, dtype: str, ui: Any,
                 desc: str, stop_on: tuple[type[BaseException], ...] = (), sharding: str = "none",
                 timeout: int = 1800) -> tuple[Any, dict[int, dict[str, Any]], BaseException | None]:
    """The middle both update stages share: trainer settings in a scratch folder, `build(args)` makes the
    trainer, it trains with a progress bar, and the trained model becomes the policy's. Returns (the trainer,
    its log records by step, the `stop_on` exception that ended training early or None)."""
    import tempfile

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
        except stop_on as exc:
            stopped = exc
        logged = merged_logs(trainer)
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
        ui.log(f"rank 0 trainable-parameter digest {digest}")  # the log's, for checking ranks: not news to a user
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
