"""Logits and log-probabilities of completions: TRL's padded layout (prompts left-padded, completions
right-padded, so every completion occupies the last columns), the logits predicting the completion tokens only,
and log p(token) at a sampling temperature. Both updates, the old policy, the reference and the mismatch
measurement compute theirs here."""

from __future__ import annotations

import inspect
from typing import Any


def _accepts_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward takes `logits_to_keep` (transformers' causal LMs do; remote code may not).
    Wrappers (DDP, DeepSpeed, FSDP: `.module`; PEFT: the base model) pass keyword arguments through."""
    inner = unwrapped(model)
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return False


def completion_logits(model: Any, input_ids: Any, attention_mask: Any, n_completion: int) -> Any:
    """Logits predicting the last `n_completion` tokens of each row, (B, n, V). Only those positions go through
    the LM head (`logits_to_keep`): prompts are often longer than completions, and full-vocabulary logits for
    them (B x T x 150k floats for a Qwen tokenizer) would be computed only to be thrown away. The tokens every
    row's prompt begins with are computed once (engines/shared_prefix.py) where the model allows it."""
    from genenv_cli.machinery.engines import shared_prefix

    if shared_prefix.supports(model):
        logits = shared_prefix.padded_forward(model, input_ids, attention_mask, n_completion + 1)
        if logits is not None:
            return logits[:, -n_completion - 1:-1, :]
    if _accepts_logits_to_keep(model):
        # the positions themselves, not the last n + 1 sliced afterwards: a slice's backward pass builds a
        # zero-filled gradient of the unsliced logits, one more (B x n x V) tensor at the peak (measured on a GPU)
        import torch

        width = input_ids.shape[1]
        keep = torch.arange(width - n_completion - 1, width - 1, device=input_ids.device)
        return model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return logits[:, -n_completion - 1:-1, :]


# Architectures whose causal-LM forward returns `lm_head(hidden states)` untouched (no scaling or soft-capping of the
# logits after the head): only for them is the head applied inside the loss (`completion_hidden`)
PLAIN_HEAD_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral", "mixtral", "qwen2_moe", "qwen3_moe", "phi3",
                              "olmo2", "smollm3"})
# config fields of models that change the logits after the head
LOGIT_CHANGES = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def unwrapped(model: Any) -> Any:
    """The transformers model inside DDP / DeepSpeed / FSDP1 (`.module`) and PEFT (`get_base_model`) wrappers."""
    inner = model
    while hasattr(inner, "module"):
        inner = inner.module
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    return inner


def plain_head(model: Any) -> Any | None:
    """The output projection of `model` when the loss may apply it itself (training/head_loss.py): a plain
    nn.Linear of a known architecture whose logits are the head's output as they are, not partitioned by DeepSpeed
    ZeRO-3 (which gathers a module's weight only while that module runs). None otherwise: the caller computes logits."""
    import torch

    inner = unwrapped(model)
    config = getattr(inner, "config", None)
    if config is None or getattr(config, "model_type", None) not in PLAIN_HEAD_TYPES:
        return None
    if any(getattr(config, name, None) not in (None, 1.0) for name in LOGIT_CHANGES):
        return None
    get = getattr(inner, "get_output_embeddings", None)
    head = get() if get is not None else None
    if type(head) is not torch.nn.Linear or hasattr(head.weight, "ds_id"):
        return None
    if hasattr(head.weight, "to_local") and not hasattr(model, "set_reshard_after_forward"):
        return None  # sharded by something other than an FSDP2 root that can keep it gathered (completion_hidden)
    return head


def _passthrough(hidden: Any) -> Any:
    return hidden


def completion_hidden(model: Any, input_ids: Any, attention_mask: Any, n_completion: int) -> tuple[Any, Any] | None:
    """(the last hidden states at the positions predicting the last `n_completion` tokens, (B, n, H); the head
    module), from the model's own forward with its head passing its input through; None where `plain_head` says
    the head cannot be taken out (the caller takes `completion_logits`).

    The model's forward runs whole (its wrappers' hooks included: under FSDP2 the root's forward gathers the head's
    weight and keeps it gathered for the backward pass, so `head.weight` read after it is the whole weight), only
    the head's matrix product is left to the loss. Read the weight after this call, not before."""
    head = plain_head(model)
    if head is None:
        return None
    if hasattr(head.weight, "to_local"):
        # FSDP2 holds the head in the root's parameters, gathered by the root's forward; told to reshard after
        # forward (accelerate passes `reshard_after_forward` explicitly) it would free them before the loss uses
        # them. Kept gathered until the backward pass, as torch's own default for the root does
        model.set_reshard_after_forward(False, recurse=False)
    own = head.__dict__.get("forward")  # a hook library may have set its own forward on the instance
    head.forward = _passthrough
    try:
        hidden = completion_logits(model, input_ids, attention_mask, n_completion)
    finally:
        if own is None:
            del head.forward
        else:
            head.forward = own
    return hidden, head


def head_weights(head: Any) -> tuple[Any, Any]:
    """(weight, bias) of the head as the loss uses them, read after the forward (`completion_hidden`). A weight still
    sharded then is an error: gathering it here would give it a gradient FSDP does not reduce over the ranks."""
    if hasattr(head.weight, "to_local"):
        raise RuntimeError("the LM head's weight is still sharded after the model's forward pass: the loss cannot "
                           "apply it (FSDP2 was expected to keep the root's parameters gathered)")
    return head.weight, head.bias


def token_logps(model: Any, input_ids: Any, attention_mask: Any, n_completion: int, temperature: float = 1.0) -> Any:
    """log p(token) of the last `n_completion` positions of each row, with logits divided by temperature
    (the distribution the behaviour policy sampled from). From the hidden states, the head applied a chunk at a time
    (training/head_loss.py), where `completion_hidden` allows; else from the logits."""
    from genenv_cli.machinery.training.target_logps import target_logps

    targets = input_ids[:, -n_completion:]
    taken = completion_hidden(model, input_ids, attention_mask, n_completion)
    if taken is not None:
        from genenv_cli.machinery.training.head_loss import head_target_logps

        hidden, head = taken
        return head_target_logps(hidden, *head_weights(head), targets, temperature)
    logits = completion_logits(model, input_ids, attention_mask, n_completion)
    return target_logps(logits, targets, temperature)


def pad_pairs(prompts: list[list[int]], completions: list[list[int]], pad_id: int) -> tuple[Any, Any, Any]:
    """TRL's layout: prompts left-padded, completions right-padded, so every completion occupies the last
    columns. Returns (input_ids, attention_mask, completion_mask)."""
    import torch

    P = max(len(p) for p in prompts)
    C = max(len(c) for c in completions)
    ids = torch.full((len(prompts), P + C), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompts), P + C), dtype=torch.long)
    cmask = torch.zeros((len(prompts), C), dtype=torch.float32)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, P - len(p):P] = torch.tensor(p)
        attn[i, P - len(p):P] = 1
        ids[i, P:P + len(c)] = torch.tensor(c)
        attn[i, P:P + len(c)] = 1
        cmask[i, :len(c)] = 1.0
    return ids, attn, cmask
