"""The one precision story of every training route, and a record of the dtypes a run really had.

The story: the weights being trained are float32 (the master copy AdamW updates and the checkpoint keeps), forward
and backward compute in the run's dtype (`run.dtype`: bf16 on GPUs), and gradients are reduced over the ranks and
accumulated over micro-steps in float32.

- One process and DDP: accelerate runs the forward under autocast in the compute dtype over the float32 weights, so
  each parameter's gradient arrives in float32, accumulates in its float32 `.grad` and DDP all-reduces it in float32.
- FSDP2: accelerate applies no autocast there; FSDP2's `MixedPrecisionPolicy` decides. `param_dtype` is the dtype the
  gathered weights are cast to for the forward (the compute dtype), `reduce_dtype` the dtype of the gradients'
  reduce-scatter, and, while gradient sync is off between micro-steps (accelerate's `no_sync` under
  `grad_accum` > 1), the dtype FSDP2 accumulates the unsharded gradients in. Left to accelerate, `bf16=True` in the
  Trainer's arguments builds `(bf16, bf16, bf16)`, whatever the launch's config file says: gradients reduced and
  accumulated in bf16. genenv sets its own policy on accelerate's FSDP plugin before the model is prepared
  (`apply_precision`): `param_dtype` and `output_dtype` the compute dtype, `reduce_dtype` float32.
- DeepSpeed ZeRO-3 with 16-bit weights keeps bf16 working weights and reduces in them: refused (machinery/launch.py).

`PrecisionProbe` records what the trainer held: the dtype of the trainable weights (this rank's shards), of a
trainable layer's output (the compute), of the gradients at the optimizer step, and of the reduction (FSDP2: the
reduce dtype its parameters carry; DDP: the gradients' own; one process: none).
"""

from __future__ import annotations

from typing import Any


def fsdp_policy(compute: str) -> Any:
    """FSDP2's mixed-precision policy for a compute dtype name ("bfloat16", "float16", "float32")."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    dtype = getattr(torch, compute)
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32, output_dtype=dtype)


def apply_precision(trainer: Any, compute: str) -> str | None:
    """Set genenv's FSDP2 policy on the trainer's accelerate FSDP plugin (no-op without one, or for FSDP1, which
    genenv never configures). Called after the Trainer is built and before it trains: accelerate reads the plugin's
    policy when it wraps the model. Returns the policy in words, or None."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None)
    if plugin is None or getattr(plugin, "fsdp_version", 2) != 2:
        return None
    plugin.mixed_precision_policy = fsdp_policy(compute)
    return f"FSDP2 MixedPrecisionPolicy(param_dtype={compute}, reduce_dtype=float32, output_dtype={compute})"


def _name(dtype: Any) -> str | None:
    return None if dtype is None else str(dtype).replace("torch.", "")


def fsdp_reduce_dtypes(model: Any) -> tuple[set[str], set[str]]:
    """(the dtypes FSDP2 gathers its parameters in for the forward, the dtypes it reduce-scatters and accumulates
    their gradients in), over every fully_shard unit of `model`, as its parameters hold them (FSDP2 drops a cast
    that would not change the dtype: then the reduction is in the parameter's own)."""
    compute: set[str] = set()
    reduce: set[str] = set()
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        group = getattr(state(), "_fsdp_param_group", None) if state is not None else None
        for fp in getattr(group, "fsdp_params", None) or []:
            gathered = fp.param_dtype or fp.orig_dtype
            compute.add(_name(gathered))
            reduce.add(_name(fp.reduce_dtype or gathered))
    return compute, reduce


def attach_probe(trainer: Any, model: Any) -> None:
    """Record in `trainer.precision` the dtypes this rank's training had (module docstring), from the first
    optimizer step."""
    from transformers import TrainerCallback

    trainer.precision = {}
    layer = next((m for m in model.modules() if any(p.requires_grad for p in m.parameters(recurse=False))
                  and hasattr(m, "weight") and getattr(m.weight, "dim", lambda: 0)() == 2
                  and type(m).__name__ != "Embedding"), None)
    hooks: list[Any] = []

    def seen(module, args, output):
        if "compute" not in trainer.precision and hasattr(output, "dtype"):
            trainer.precision["compute"] = _name(output.dtype)
        for h in hooks:
            h.remove()
        hooks.clear()

    if layer is not None:
        hooks.append(layer.register_forward_hook(seen))

    class _Probe(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kw):
            if "grads" in trainer.precision:
                return
            wrapped = trainer.model_wrapped
            params = [p for p in wrapped.parameters() if p.requires_grad]
            local = [p.to_local() if hasattr(p, "to_local") else p for p in params]
            grads = [g.to_local() if hasattr(g, "to_local") else g for g in (p.grad for p in params) if g is not None]
            trainer.precision["weights"] = ",".join(sorted({_name(p.dtype) for p in local})) or None
            trainer.precision["grads"] = ",".join(sorted({_name(g.dtype) for g in grads})) or None
            gathered, reduce = fsdp_reduce_dtypes(wrapped)
            if reduce:
                trainer.precision["reduce"] = ",".join(sorted(reduce))
                trainer.precision["gathered"] = ",".join(sorted(gathered))
            elif trainer.accelerator.num_processes > 1:   # DDP all-reduces each gradient in its own dtype
                trainer.precision["reduce"] = trainer.precision["grads"]
            else:
                trainer.precision["reduce"] = None

    trainer.add_callback(_Probe())
