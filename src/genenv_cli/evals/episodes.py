"""Playing many interactive episodes with one engine: all live episodes advance together, one batched generate
call per turn, and an episode whose next prompt would not fit the model's context ends as a failure.

Turn t asks every live episode for its next prompt, checks each against the context limit (the prompt's token
count under the model's chat template, plus `max_new_tokens`, must not exceed the engine's limit: vLLM's
`max_model_len`, or the hf model's `max_position_embeddings`), sends the prompts that fit to the engine in one
`generate` call, and hands each answer back to its episode. Episodes that are over (won, out of steps, or ended
for their context) drop out; the loop ends when none is left. With greedy decoding every episode sees exactly
the prompts and answers it would see played alone, up to the numerics of batched matrix products.

vLLM refuses a whole batch when one prompt is longer than its limit, so without the check one long history
would abort the evaluation; with it the episode ends with `end = "context_overflow"` and a reason that gives the
numbers, and the others go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from genenv_cli.evals.base import CONTEXT_OVERFLOW, Benchmark, EvalSample, Verdict

Transcript = list[dict[str, str]]


def overflow_reason(prompt_tokens: int, max_new_tokens: int, limit: int, step: int | None = None) -> str:
    """Why a prompt was not sent; `step` (0-based) for an episode's step."""
    where = f" before step {step + 1}" if step is not None else ""
    return (f"context overflow{where}: the prompt ({prompt_tokens} tokens) plus max_new_tokens ({max_new_tokens}) "
            f"exceeds the model's context ({limit} tokens)")


def play_episodes(bench: Benchmark, samples: list[EvalSample], engine: Any, params: Any, max_steps: int, *,
                  context_limit: int = 0, on_done: Callable[[int], None] | None = None,
                  on_turn: Callable[[int, int], None] | None = None) -> list[tuple[Transcript, Verdict]]:
    """Play every sample's episode to its end, all live ones in lockstep (see the module docstring).

    `engine` is a genenv engine (`generate`, `prompt_ids`), `params` its SamplingParams; `context_limit` 0 means
    unknown (no check). `on_done(n)` is called as n episodes finish, `on_turn(turn, prompts)` before each
    generate call. Returns (transcript, verdict) per sample, in order."""
    episodes = []
    try:
        for s in samples:
            episodes.append(bench.start_episode(s, max_steps))
        steps = [0] * len(episodes)
        pending = {i: e.prompt() for i, e in enumerate(episodes)}    # each live episode's next prompt
        turn = 0
        while pending:
            asks: list[tuple[int, Transcript]] = []
            for i, messages in pending.items():
                if messages is None:
                    continue
                if context_limit > 0:
                    n = len(engine.prompt_ids(messages))
                    if n + params.max_new_tokens > context_limit:
                        episodes[i].stop(CONTEXT_OVERFLOW, overflow_reason(n, params.max_new_tokens, context_limit,
                                                                           steps[i]))
                        continue
                asks.append((i, messages))
            if asks:
                if on_turn is not None:
                    on_turn(turn, len(asks))
                # a fresh seed per turn, so sampled turns do not repeat one turn's noise (greedy ignores it)
                turn_params = dataclasses.replace(params, seed=params.seed + turn * len(episodes))
                gens = engine.generate([m for _, m in asks], turn_params)
                for (i, _), g in zip(asks, gens, strict=True):
                    episodes[i].advance(g[0].text)
                    steps[i] += 1
            following = {i: episodes[i].prompt() for i, _ in asks}
            following = {i: m for i, m in following.items() if m is not None}
            if on_done is not None and len(following) < len(pending):
                on_done(len(pending) - len(following))
            pending = following
            turn += 1
        return [e.result() for e in episodes]
    finally:
        for e in episodes:
            e.close()
