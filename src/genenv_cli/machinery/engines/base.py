"""One interface for batched text generation, whatever runs it (transformers or vLLM).

An engine takes chat conversations, applies the model's chat template, samples `n` completions per
conversation and returns, for each, the text, the sampled token ids, each sampled token's log-probability
under the distribution it was drawn from (temperature and top-p applied), and why it stopped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, str]]
# on_progress(sequences_finished, tokens_generated): sequences as they finish, tokens as they are generated (either
# may be 0 in a call)
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0     # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    n: int = 1                   # completions per conversation
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str           # "stop" (end of turn) | "length" (max_new_tokens)
    prompt_token_ids: list[int]
    cached_tokens: int = 0       # leading prompt tokens whose keys and values the engine had kept (not computed)


def sample_seeds(params: SamplingParams, count: int, seeds: list[int] | None = None) -> list[int]:
    """The base seed of each of `count` conversations: `seeds` as given (the caller's: rollout gives each task the
    seed of its place in the epoch, so shards draw what one process would), else `params.seed + i * n` by the
    conversation's place in the call, n apart so that no two samples of a call share a seed.

    >>> sample_seeds(SamplingParams(seed=7, n=4), 3)
    [7, 11, 15]
    """
    if seeds is not None:
        if len(seeds) != count:
            raise ValueError(f"{len(seeds)} seeds for {count} conversations")
        return list(seeds)
    return [params.seed + i * params.n for i in range(count)]


class Engine(ABC):
    name: str = ""
    model_tag: str = ""
    tokenizer: Any = None
    # whether generate_ids takes `sessions`: one key per prompt, the same key for every turn of an episode, so that
    # the engine can keep what it computed for a turn's prompt and answer and compute only the next turn's new tokens
    takes_sessions: bool = False

    @abstractmethod
    def generate(self, conversations: list[Messages], params: SamplingParams,
                 on_progress: ProgressFn | None = None, seeds: list[int] | None = None) -> list[list[Generation]]:
        """For each conversation, `params.n` generations, in order. Sample k of conversation i is drawn with its
        own seed, `sample_seeds(params, len(conversations), seeds)[i] + k` (vLLM's own rule for the children of a
        seeded request), so what a conversation draws does not depend on the others in the call."""

    def generate_ids(self, prompts: list[list[int]], params: SamplingParams, on_progress: ProgressFn | None = None,
                     seeds: list[int] | None = None,
                     sessions: list[Hashable] | None = None) -> list[list[Generation]]:
        """`generate` for prompts given as token ids: an episode's growing sequence, whose earlier turns are the
        tokens sampled then, not a re-tokenization of their text (machinery/episodes.py). The same sampling rules.
        `sessions` (engines with `takes_sessions`; n = 1): each prompt's episode, whose earlier turn the engine
        may have kept; what is sampled does not depend on it."""
        raise TypeError(f"the {self.name or type(self).__name__} engine takes chat messages only; episodes recorded "
                        f"for training need an engine that takes token ids (hf or vllm)")

    def prompt_ids(self, messages: Messages) -> list[int]:
        """The token ids the model is given for `messages` (chat template, generation prompt added)."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def release(self, sessions: list[Hashable]) -> None:  # noqa: B027 - optional hook
        """Forget what was kept for `sessions` (episodes that have ended)."""

    def context_limit(self) -> int:
        """The longest prompt + completion the engine accepts, in tokens; 0 when unknown."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook, most engines need nothing
        """Free the model's memory."""
