"""Keys and values kept across an episode's turns, for the hf engine: a turn computes only the tokens that are new.

An episode's prompt at turn t+1 is its prompt at turn t, the answer sampled then, and the tokens the chat template
puts after it (the end of the agent's turn, the environment's observation, the start of the agent's next turn).
Re-reading the whole sequence every turn makes a long episode cost the square of its length: an ALFWorld game
re-reads about 3,300 tokens at its 46th turn to write a dozen. So when a turn's generation ends, the engine keeps
the row's keys and values (`Kept`: the tokens they stand for, and per layer a (1, heads, length, head_dim) pair,
padding removed), under the episode's session key; the next turn looks up the longest common prefix of the kept
tokens and the new prompt and runs only the rest.

Batching across episodes stays: `prefill` lays the rows of a turn out as `[left padding][kept keys and values]
[left padding][new tokens]`, the attention mask 0 on both paddings and position ids counting real tokens only, so
each row attends to exactly its own sequence, as the shared-prefix forward does (engines/shared_prefix.py). Keys
are stored after their rotary embedding at the positions they were computed at, which are the same positions a
full re-read gives them (real tokens counted from 0), so the result is a full re-read's up to float rounding:
`tests/engines/test_episode_cache.py` checks greedy tokens and sampled logprobs against it.

The common prefix is found token by token, so a prompt that does not extend the kept tokens (an evaluation that
re-templates the conversation, whose re-tokenized answer can differ from the sampled tokens) reuses only what
agrees and is still exact. Used only for transformers' full-attention dynamic caches (`reusable`); a sliding-window
or other cache is never kept, and such models re-read every turn as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from genenv_cli.machinery.engines import shared_prefix


@dataclass
class Kept:
    """One episode's keys and values: `ids`, the tokens they stand for; `layers`, per layer (keys, values), each
    (1, heads, len(ids), head_dim)."""

    ids: list[int]
    layers: list[tuple[Any, Any]]


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens `a` and `b` share.

    >>> common_prefix([1, 2, 3, 4], [1, 2, 5]), common_prefix([], [1]), common_prefix([1, 2], [1, 2, 3])
    (2, 0, 2)
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]: halve (list slices compare in C)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def reusable(cache: Any) -> bool:
    """Whether `cache` holds one full-attention key/value pair per layer that `take` can cut rows out of."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # a transformers without per-layer caches
        return False
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) in (DynamicLayer, _roomy_class()) and getattr(layer, "keys", None)
                                is not None and layer.keys.dim() == 4 for layer in layers)


def make_room(cache: Any, extra: int) -> None:
    """Give every layer of a `reusable` cache room for `extra` more positions, so that the decode steps write their
    keys and values in place. transformers' dynamic layer concatenates instead: every decode step copies the whole
    cache into freshly allocated memory, which for a batch of long episodes on a CPU costs more than the step's
    attention (16 rows of 3,000 tokens: 2.2 GB allocated and copied per token with the embedded model)."""
    if extra > 0 and reusable(cache):
        cls = _roomy_class()
        cache.layers = [layer if isinstance(layer, cls) else cls(layer, extra) for layer in cache.layers]


_ROOMY: Any = None


def _roomy_class() -> Any:
    """The dynamic layer with room to grow (made on first use: transformers is imported only when a model runs)."""
    global _ROOMY
    if _ROOMY is not None:
        return _ROOMY
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """A DynamicLayer whose `keys` and `values` are views of the first `n` positions of larger buffers."""

        def __init__(self, layer: Any, extra: int) -> None:
            super().__init__()
            for name, value in vars(layer).items():
                setattr(self, name, value)
            self._n = layer.keys.shape[-2]
            self._k, self._v = self._grown(layer.keys, extra), self._grown(layer.values, extra)
            self._views()

        def _grown(self, t: Any, extra: int) -> Any:
            out = t.new_empty((*t.shape[:-2], self._n + extra, t.shape[-1]))
            out[..., :self._n, :] = t[..., :self._n, :]
            return out

        def _views(self) -> None:
            self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            m = key_states.shape[-2]
            if self._n + m > self._k.shape[-2]:  # out of room: twice what is needed
                self._k, self._v = self._grown(self._k, self._n + 2 * m), self._grown(self._v, self._n + 2 * m)
            self._k[..., self._n:self._n + m, :] = key_states
            self._v[..., self._n:self._n + m, :] = value_states
            self._n += m
            self._views()
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            self._k, self._v = self._k[indices, ...], self._v[indices, ...]
            self._views()

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)
            self._n = self.keys.shape[-2]

    _ROOMY = RoomyLayer
    return _ROOMY


def take(cache: Any, mask: Any, row: int, ids: list[int]) -> Kept | None:
    """Row `row` of a batched `cache` without its padding (`mask` row: 1 on the row's real tokens), as the keys and
    values of `ids`; None when the row holds a different number of tokens (nothing is kept then)."""
    valid = mask[row].bool()
    if int(valid.sum()) != len(ids) or not ids:
        return None
    return Kept(list(ids), [(layer.keys[row:row + 1][:, :, valid], layer.values[row:row + 1][:, :, valid])
                            for layer in cache.layers])


def reuse_lengths(kept: list[Kept | None], prompts: list[list[int]]) -> list[int]:
    """How many of each prompt's tokens its kept keys and values cover: the common prefix, leaving at least the last
    token to run (its logits start the answer)."""
    return [0 if k is None else min(common_prefix(k.ids, p), len(p) - 1) for k, p in zip(kept, prompts, strict=True)]


def prefill(model: Any, kept: list[Kept | None], prompts: list[list[int]], *, pad_id: int,
            device: Any) -> tuple[Any, Any, Any, Any, list[int]]:
    """Run each prompt after its kept keys and values: (the logits of each row's last position, the batch's cache,
    the attention mask over it, each row's next position id, how many tokens of each prompt came from the kept
    cache). At least one row must reuse something."""
    import torch
    from transformers.cache_utils import DynamicCache

    reused = reuse_lengths(kept, prompts)
    width_kept = max(reused)
    own = [p[c:] for p, c in zip(prompts, reused, strict=True)]
    width = max(len(o) for o in own)
    batch = len(prompts)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width_kept + width), dtype=torch.long)
    for j, (o, c) in enumerate(zip(own, reused, strict=True)):
        ids[j, width - len(o):] = torch.tensor(o, dtype=torch.long)
        mask[j, width_kept - c:width_kept] = 1
        mask[j, width_kept + width - len(o):] = 1
    sample = next(k for k, c in zip(kept, reused, strict=True) if k is not None and c > 0)
    cache = DynamicCache()
    for layer, (k0, v0) in enumerate(sample.layers):
        keys = k0.new_zeros((batch, k0.shape[1], width_kept, k0.shape[3]))
        values = v0.new_zeros((batch, v0.shape[1], width_kept, v0.shape[3]))
        for j, (k, c) in enumerate(zip(kept, reused, strict=True)):
            if k is not None and c > 0:
                keys[j, :, width_kept - c:] = k.layers[layer][0][0, :, :c]
                values[j, :, width_kept - c:] = k.layers[layer][1][0, :, :c]
        cache.update(keys, values, layer)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -width:]
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    out = shared_prefix.call(model, input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache,
                             use_cache=True, logits_to_keep=1)
    return out.logits, shared_prefix.returned_cache(out), mask, positions[:, -1] + 1, reused
