"""One interface for batched text generation, whatever runs it (transformers or vLLM).

An engine takes chat conversations, applies the model's chat template, samples `n` completions per
conversation and returns, for each, the text, the sampled token ids, each sampled token's log-probability
under the distribution it was drawn from (temperature and top-p applied), and why it stopped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, str]]
# on_progress(sequences_finished, tokens_generated) after each batch
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


class Engine(ABC):
    name: str = ""
    model_tag: str = ""
    tokenizer: Any = None

    @abstractmethod
    def generate(self, conversations: list[Messages], params: SamplingParams,
                 on_progress: ProgressFn | None = None) -> list[list[Generation]]:
        """For each conversation, `params.n` generations, in order."""

    def prompt_ids(self, messages: Messages) -> list[int]:
        """The token ids the model is given for `messages` (chat template, generation prompt added)."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def context_limit(self) -> int:
        """The longest prompt + completion the engine accepts, in tokens; 0 when unknown."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook, most engines need nothing
        """Free the model's memory."""
