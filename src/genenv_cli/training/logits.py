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
    inner = model
    while hasattr(inner, "module"):
        inner = inner.module
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return False


def completion_logits(model: Any, input_ids: Any, attention_mask: Any, n_completion: int) -> Any:
    """Logits predicting the last `n_completion` tokens of each row, (B, n, V). Only those positions go through
    the LM head (`logits_to_keep`): prompts are often longer than completions, and full-vocabulary logits for
    them (B x T x 150k floats for a Qwen tokenizer) would be computed only to be thrown away. The tokens every
    row's prompt begins with are computed once (engines/shared_prefix.py) where the model allows it."""
    from genenv_cli.engines import shared_prefix

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


def token_logps(model: Any, input_ids: Any, attention_mask: Any, n_completion: int, temperature: float = 1.0) -> Any:
    """log p(token) of the last `n_completion` positions of each row, with logits divided by temperature
    (the distribution the behaviour policy sampled from)."""
    from genenv_cli.training.target_logps import target_logps

    logits = completion_logits(model, input_ids, attention_mask, n_completion)
    return target_logps(logits, input_ids[:, -n_completion:], temperature)


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
