"""The transformers engine: batched `generate` with left padding, on CPU or GPU.

Sampled-token logprobs are recorded while generating, by a logits processor placed after the
temperature and top-p warpers: at each step it keeps the log-softmax of the final (warped) scores, and at
the next step reads off the log-probability of the token that was actually drawn. That costs one
log-softmax per step and one (batch x vocab) buffer, where `output_scores=True` would keep every step's
scores (gigabytes at batch 64 x 256 steps) and a second forward pass would double the work on CPU.
transformers has no option that returns only the sampled tokens' logprobs, hence this small processor.

The model's own `generation_config` (repetition_penalty, top_k, min_p, no_repeat_ngram_size ... as a Hub model
ships them) is replaced by one that keeps only the special token ids: generate() would otherwise apply those
processors before the recorder, and the stored logprobs (and the samples) would differ from what vLLM, which
applies only the sampling parameters it is given, records for the same settings.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.engines.base import Engine, Generation, Messages, ProgressFn, SamplingParams
from genenv_cli.models import ModelRef, load_model, load_tokenizer


class _SampledLogprobs:
    """LogitsProcessor that records log p(sampled token) under the scores it is handed."""

    def __init__(self) -> None:
        self.pending: Any = None
        self.steps: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.pending is not None:
            self.steps.append(self.pending.gather(1, input_ids[:, -1:]).squeeze(1))
        self.pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: Any) -> Any:
        import torch

        if self.pending is not None:
            self.steps.append(self.pending.gather(1, sequences[:, -1:]).squeeze(1))
            self.pending = None
        return torch.stack(self.steps, dim=1) if self.steps else torch.zeros((sequences.shape[0], 0))


class HFEngine(Engine):
    name = "hf"

    def __init__(self, ref: ModelRef, *, device: str = "auto", dtype: str = "auto",
                 trust_remote_code: bool = False, batch_size: int = 32, model: Any = None, tokenizer: Any = None):
        self.ref = ref
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
                 on_progress: ProgressFn | None = None) -> list[list[Generation]]:

        prompts = [self.prompt_ids(m) for m in conversations]
        jobs = [(i, k) for i in range(len(prompts)) for k in range(params.n)]
        # longest first: similar lengths share a batch (less padding), and memory peaks early
        jobs.sort(key=lambda j: (-len(prompts[j[0]]), j[0], j[1]))
        results: list[list[Generation | None]] = [[None] * params.n for _ in prompts]
        for b, start in enumerate(range(0, len(jobs), self.batch_size)):
            batch = jobs[start:start + self.batch_size]
            gens = self._generate_batch([prompts[i] for i, _ in batch], params, seed=params.seed + b)
            for (i, k), g in zip(batch, gens, strict=True):
                results[i][k] = g
            if on_progress is not None:
                on_progress(len(batch), sum(len(g.token_ids) for g in gens))
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams, seed: int) -> list[Generation]:
        import torch
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p):] = 1
        recorder = _SampledLogprobs()
        processors = []
        if not params.greedy:
            if params.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                processors.append(TopPLogitsWarper(params.top_p))
        processors.append(recorder)
        # the warpers are ours (above), so generate() must add none of its own: neutral values when sampling
        sampling = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0} if not params.greedy \
            else {"do_sample": False}
        torch.manual_seed(seed)
        with torch.inference_mode():
            sequences = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), **sampling,
                max_new_tokens=params.max_new_tokens, logits_processor=LogitsProcessorList(processors),
                eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
            )
        logps = recorder.finish(sequences).cpu()
        new = sequences[:, width:].cpu()
        out = []
        eos = set(self.eos_ids)
        for row, p in enumerate(prompts):
            ids = new[row].tolist()
            stop = next((j for j, t in enumerate(ids) if t in eos), None)
            if stop is None:
                kept, reason = ids, "length"
            else:
                kept, reason = ids[:stop + 1], "stop"
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            out.append(Generation(text=text, token_ids=kept, logprobs=logps[row, :len(kept)].tolist(),
                                  finish_reason=reason, prompt_token_ids=list(p)))
        return out

    def context_limit(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    def close(self) -> None:
        import gc

        del self.model
        gc.collect()


# token ids generate() needs; every other field of a model's generation_config is a decoding choice
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
