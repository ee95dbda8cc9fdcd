"""The model an update trains: the previous epoch's policy (LoRA adapter or full weights) and the frozen epoch-0
reference, loaded on this process's device.

Both updates run on `transformers.Trainer` (base_trainer.py) with their own losses; this module only loads. Precision
(training/precision.py has the whole story): the weights being trained are kept in float32 (the master copy AdamW
updates), forward and backward compute in the run's compute dtype (autocast, Trainer's bf16/fp16; under FSDP2 the
policy genenv sets), and gradients are reduced and accumulated in float32. Weights stored in bf16 would round an
AdamW step of about 1e-6 away: bf16 keeps 8 bits of mantissa, so a weight of 0.02 moves in steps of 1e-4. Frozen
weights (a LoRA base, the reference model) are loaded in the compute dtype.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from genenv_cli.catalogue.settings import TrainingConfig
from genenv_cli.machinery.models import ModelRef, load_model, load_tokenizer, resolve


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


