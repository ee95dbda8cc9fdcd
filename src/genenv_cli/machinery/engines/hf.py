"""The transformers engine: batched decoding on CPU or GPU, with transformers' models and logits warpers.

The decoding loop is written here rather than calling `generate()`, for three things generate() does not do and
a CPU pays for in full: the prompt tokens every row shares (the chat template and the domain's instructions) are
computed once per batch, and each prompt's own tokens once for its K samples (engines/shared_prefix.py); a row
that has finished leaves the batch at once instead of being computed to the longest row's end; and the
log-probability of each sampled token is read off the distribution it was drawn from (after the temperature and
top-p warpers), one (batch x vocab) log-softmax per step, where `output_scores=True` would keep every step's
scores. Models the shared-prefix forward does not support are decoded the same way with a plain prefill.
`tests/engines/test_shared_prefix.py` checks the tokens and logprobs against `generate()` and a full forward.

Episodes (`generate_ids(..., sessions=...)`, one session key per prompt): each row's keys and values are kept when
its turn ends, and the episode's next turn runs only its new tokens after them (engines/episode_cache.py), turns
still batched across episodes; `reuse_cache=False` re-reads every prompt in full instead.

The model's own `generation_config` (repetition_penalty, top_k, min_p, no_repeat_ngram_size ... as a Hub model
ships them) is replaced by one that keeps only the special token ids, and none of it is applied: the samples and
their logprobs come from the sampling parameters alone, as vLLM's do for the same settings.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from genenv_cli.machinery.engines.base import (
    Engine,
    Generation,
    Messages,
    ProgressFn,
    SamplingParams,
    sample_seeds,
)
from genenv_cli.machinery.models import ModelRef, load_model, load_tokenizer


class HFEngine(Engine):
    name = "hf"
    takes_sessions = True

    def __init__(self, ref: ModelRef, *, device: str = "auto", dtype: str = "auto",
                 trust_remote_code: bool = False, batch_size: int = 32, model: Any = None, tokenizer: Any = None,
                 reuse_cache: bool = True):
        self.ref = ref
        self.reuse_cache = reuse_cache
        self._kept: dict[Hashable, Any] = {}  # each live session's keys and values (episode_cache.Kept)
        self.model_tag = ref.tag
        self.batch_size = batch_size
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(ref, trust_remote_code)
        self.model = model if model is not None else load_model(ref, device=device, dtype=dtype,
                                                                trust_remote_code=trust_remote_code)
        self.model.eval()
        self.device = next(self.model.parameters()).device
        self.dropped_generation_settings = _neutral_generation_config(self.model)
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]

    def generate(self, conversations: list[Messages], params: SamplingParams,
                 on_progress: ProgressFn | None = None, seeds: list[int] | None = None) -> list[list[Generation]]:
        return self.generate_ids([self.prompt_ids(m) for m in conversations], params, on_progress, seeds)

    def generate_ids(self, prompts: list[list[int]], params: SamplingParams, on_progress: ProgressFn | None = None,
                     seeds: list[int] | None = None,
                     sessions: list[Hashable] | None = None) -> list[list[Generation]]:
        _check_sessions(sessions, len(prompts), params.n)
        base = sample_seeds(params, len(prompts), seeds)
        jobs = [(i, k) for i in range(len(prompts)) for k in range(params.n)]
        # longest first: similar lengths share a batch (less padding), and memory peaks early
        jobs.sort(key=lambda j: (-len(prompts[j[0]]), j[0], j[1]))
        results: list[list[Generation | None]] = [[None] * params.n for _ in prompts]
        for start in range(0, len(jobs), self.batch_size):
            batch = jobs[start:start + self.batch_size]
            # tokens counted at every decoding step, so a stage of one long batch shows its token rate before the
            # batch ends; the sequences when it ends
            gens = self._generate_batch([prompts[i] for i, _ in batch], params, [base[i] + k for i, k in batch],
                                        None if sessions is None else [sessions[i] for i, _ in batch],
                                        None if on_progress is None else lambda t: on_progress(0, t))
            for (i, k), g in zip(batch, gens, strict=True):
                results[i][k] = g
            if on_progress is not None:
                on_progress(len(batch), 0)
        return results  # type: ignore[return-value]

    def release(self, sessions: list[Hashable]) -> None:
        for s in sessions:
            self._kept.pop(s, None)

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams, seeds: list[int],
                        sessions: list[Hashable] | None = None,
                        on_tokens: Callable[[int], None] | None = None) -> list[Generation]:
        import torch

        from genenv_cli.machinery.engines import episode_cache, shared_prefix

        keep = sessions is not None and self.reuse_cache and shared_prefix.supports(self.model)
        kept = [self._kept.pop(s, None) for s in sessions] if keep and sessions is not None else []
        warpers, uniforms = self._sampling(params, seeds)
        eos = torch.tensor(self.eos_ids, device=self.device)
        tokens: list[list[int]] = [[] for _ in prompts]
        logps: list[list[float]] = [[] for _ in prompts]
        reasons = ["length"] * len(prompts)
        with torch.inference_mode():
            scores, cache, mask, position, reused = self._start(prompts, kept)
            del kept
            keep = keep and episode_cache.reusable(cache)
            episode_cache.make_room(cache, params.max_new_tokens)
            active = list(range(len(prompts)))
            for step in range(params.max_new_tokens):
                drawn, chosen = _draw(scores, warpers, None if params.greedy else uniforms[:, step])
                done = torch.isin(drawn, eos)
                for row, t, lp, d in zip(active, drawn.tolist(), chosen.tolist(), done.tolist(), strict=True):
                    tokens[row].append(t)
                    logps[row].append(lp)
                    if d:
                        reasons[row] = "stop"
                if on_tokens is not None:
                    on_tokens(len(active))
                going = ~done
                last = step == params.max_new_tokens - 1 or not bool(going.any())
                if keep and (last or not bool(going.all())):  # rows that leave keep their keys and values
                    for b, row in enumerate(active):
                        if last or not going[b]:
                            self._keep(sessions[row], episode_cache.take(cache, mask, b, prompts[row] + tokens[row][:-1]))
                if last:
                    break
                if not bool(going.all()):  # finished rows leave the batch
                    keep_rows = going.nonzero().squeeze(1)
                    cache.batch_select_indices(keep_rows)
                    drawn, mask, position = drawn[keep_rows], mask[keep_rows], position[keep_rows]
                    uniforms = uniforms[keep_rows] if uniforms is not None else None
                    active = [active[i] for i in keep_rows.tolist()]
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                out = shared_prefix.call(self.model, input_ids=drawn.unsqueeze(1), attention_mask=mask,
                                         position_ids=position.unsqueeze(1), cache=cache, use_cache=True,
                                         logits_to_keep=1)
                cache, position = shared_prefix.returned_cache(out), position + 1
                scores = out.logits[:, -1, :].float()
        return [Generation(text=self.tokenizer.decode(tokens[i], skip_special_tokens=True), token_ids=tokens[i],
                           logprobs=logps[i], finish_reason=reasons[i], prompt_token_ids=list(p),
                           cached_tokens=reused[i])
                for i, p in enumerate(prompts)]

    def _sampling(self, params: SamplingParams, seeds: list[int]) -> tuple[list[Any], Any]:
        """The logits warpers of `params`, and each row's uniform draws for all its steps (None when greedy)."""
        import torch
        from transformers import TemperatureLogitsWarper, TopPLogitsWarper

        warpers: list[Any] = []
        if not params.greedy:
            if params.temperature != 1.0:
                warpers.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                warpers.append(TopPLogitsWarper(params.top_p))
        # every row's noise comes from its own sample's seed, drawn once for all its steps: a row draws the same
        # tokens whatever else shares its batch (the batches depend on the call's prompts and the engine's batch
        # size). Sampled by inverse CDF, in one batched operation per step: torch.multinomial takes one generator
        # for the whole batch, and one call per row costs a kernel launch per row and step on a GPU
        uniforms = None if params.greedy else torch.stack([
            torch.rand(params.max_new_tokens, generator=torch.Generator(device=self.device).manual_seed(s),
                       device=self.device, dtype=torch.float64) for s in seeds])
        return warpers, uniforms

    def _start(self, prompts: list[list[int]], kept: list[Any]) -> tuple[Any, Any, Any, Any, list[int]]:
        """The batch's prefill: from the sessions' kept keys and values where any can be reused
        (engines/episode_cache.py), else every prompt afresh; `_prefill`'s four, and each row's tokens reused."""
        from genenv_cli.machinery.engines import episode_cache

        if kept and any(episode_cache.reuse_lengths(kept, prompts)):
            logits, cache, mask, position, reused = episode_cache.prefill(
                self.model, kept, prompts, pad_id=self.pad_id, device=self.device)
            return logits[:, -1, :].float(), cache, mask, position, reused
        return (*self._prefill(prompts), [0] * len(prompts))

    def _prefill(self, prompts: list[list[int]]) -> tuple[Any, Any, Any, Any]:
        """Every prompt read in full, what the rows share computed once (engines/shared_prefix.py): (the logits of
        each row's last position, the cache, the attention mask over it, each row's next position id)."""
        import torch

        from genenv_cli.machinery.engines import shared_prefix

        unique: dict[tuple[int, ...], int] = {}
        row_prompt = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
        distinct = [list(p) for p in unique]
        shared = shared_prefix.common_length(distinct) if shared_prefix.supports(self.model) else 0
        logits, cache, mask, position = shared_prefix.forward(
            self.model, distinct[0][:shared], [p[shared:] for p in distinct], pad_id=self.pad_id,
            logits_to_keep=1, device=self.device)
        rows = torch.tensor(row_prompt, device=self.device)  # each prompt's keys and values, once per sample
        cache.batch_select_indices(rows)
        return logits[rows, -1, :].float(), cache, mask[rows], position[rows]

    def _keep(self, session: Hashable, kept: Any) -> None:
        if kept is not None:
            self._kept[session] = kept

    def context_limit(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    def close(self) -> None:
        import gc

        self._kept.clear()
        del self.model
        gc.collect()


def _check_sessions(sessions: list[Hashable] | None, prompts: int, n: int) -> None:
    if sessions is None:
        return
    if len(sessions) != prompts or len(set(sessions)) != len(sessions):
        raise ValueError(f"{len(sessions)} session keys for {prompts} prompts: one distinct key per prompt")
    if n != 1:
        raise ValueError(f"sessions are episodes, one answer per turn: n = {n}")


def _draw(scores: Any, warpers: list[Any], u: Any) -> tuple[Any, Any]:
    """One step's tokens from the last logits `scores` (B, V) under the warpers: the most probable when `u` is None
    (greedy), else drawn by `_inverse_cdf` with each row's uniform; (the tokens, their log-probabilities)."""
    import torch

    for warp in warpers:
        scores = warp(None, scores)
    logp = torch.log_softmax(scores, dim=-1)
    drawn = scores.argmax(-1) if u is None else _inverse_cdf(logp, u)
    return drawn, logp.gather(1, drawn.unsqueeze(1)).squeeze(1)


def _inverse_cdf(logp: Any, u: Any) -> Any:
    """One token per row of log-probabilities `logp` (B, V), row b drawn with its uniform u[b] in [0, 1): the first
    token whose cumulative probability (in float64) passes u[b] times the row's total. A token of probability 0
    (removed by top-p) is never drawn."""
    import torch

    cdf = logp.double().exp().cumsum(-1)
    drawn = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    drawn = drawn.clamp(max=logp.shape[-1] - 1)
    # u * total can round up to the total itself, past every token: the most probable one then (no device wait)
    zero = logp.gather(1, drawn.unsqueeze(1)).squeeze(1) == float("-inf")
    return torch.where(zero, logp.argmax(-1), drawn)


# the special token ids a model's generation_config carries; every other field of it is a decoding choice
_KEEP_GENERATION_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def _neutral_generation_config(model: Any) -> dict[str, Any]:
    """Give `model` a generation_config with only its special token ids; returns the decoding settings dropped
    (those that differed from transformers' defaults), for the record."""
    from transformers import GenerationConfig

    old = model.generation_config
    fresh = GenerationConfig(**{k: getattr(old, k, None) for k in _KEEP_GENERATION_FIELDS})
    dropped = {k: v for k, v in old.to_diff_dict().items()
               if k not in _KEEP_GENERATION_FIELDS and not k.startswith("_") and k != "transformers_version"}
    model.generation_config = fresh
    return dropped


def open_hf(ref: ModelRef, *, device: str, dtype: str, trust_remote_code: bool, batch_size: int, **_: Any) -> Engine:
    """The `hf` row of `engines.ENGINES`: transformers on CPU or GPU."""
    return HFEngine(ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code, batch_size=batch_size)
