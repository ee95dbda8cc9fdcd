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

The same loop plays the training episodes of the rollout stage (`play` with `traces`). There each episode's prompt
is its token sequence so far, sent as token ids: the first prompt under the chat template, then every turn's
sampled tokens exactly as drawn, then the tokens the chat template puts between that answer and the next one (the
end of the agent's turn, the environment's observation as a user message, the start of the agent's next turn).
Re-templating the whole conversation each turn would tokenize the agent's earlier answers afresh, which need not
give the tokens it sampled; the trainer must score the tokens the sampler conditioned on. `TokenTrace` records
them with the sampler's logprobs and a mask of which tokens are the agent's.

Every episode is the engine's session (engines with `takes_sessions`: hf and vllm): its prompts go as token ids with
the episode's key, so the engine computes only what is new since its last turn (the hf engine keeps each episode's
keys and values, engines/episode_cache.py; vLLM's prefix cache finds the blocks), and forgets the session when the
episode ends. What is sampled does not depend on it. `stats` counts the prompt tokens sent and how many of them the
engine had kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

from genenv_cli.evals.base import CONTEXT_OVERFLOW, Benchmark, EvalSample, Verdict

Transcript = list[dict[str, str]]
_MARK = "\u2063genenv-turn\u2063"  # stands for the agent's answer when the template is rendered around it


def overflow_reason(prompt_tokens: int, max_new_tokens: int, limit: int, step: int | None = None) -> str:
    """Why a prompt was not sent; `step` (0-based) for an episode's step."""
    where = f" before step {step + 1}" if step is not None else ""
    return (f"context overflow{where}: the prompt ({prompt_tokens} tokens) plus max_new_tokens ({max_new_tokens}) "
            f"exceeds the model's context ({limit} tokens)")


@dataclasses.dataclass
class TokenTrace:
    """One episode as the sampler saw it: `prompt_ids` (the first prompt), then `token_ids`, every token after it
    (the agent's sampled ones and the environment's), with `logprobs` (the sampler's; 0.0 for the environment's) and
    `agent_mask` (1 for the agent's tokens, 0 for the environment's); `finish_reasons` per agent turn."""

    prompt_ids: list[int]
    token_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    agent_mask: list[int] = dataclasses.field(default_factory=list)
    finish_reasons: list[str] = dataclasses.field(default_factory=list)

    def ids(self) -> list[int]:
        return self.prompt_ids + self.token_ids

    def add_agent(self, generation: Any) -> None:
        self.token_ids += generation.token_ids
        self.logprobs += [float(x) for x in generation.logprobs]
        self.agent_mask += [1] * len(generation.token_ids)
        self.finish_reasons.append(generation.finish_reason)

    def add_environment(self, ids: list[int]) -> None:
        self.token_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.agent_mask += [0] * len(ids)


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of an episode's turn (0-based): its own seed at the first turn, so that a one-turn episode
    draws what a single-turn rollout with that seed draws; after that a hash of both, so no turn repeats another
    turn's noise and no episode's depends on the others.

    >>> turn_seed(42, 0), turn_seed(42, 1) == turn_seed(43, 0), turn_seed(42, 1) == turn_seed(42, 2)
    (42, False, False)
    """
    if turn == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}/{turn}".encode()).digest()[:8], "big") >> 2


def observation_ids(tokenizer: Any, before: Transcript, after: Transcript, generation: Any) -> list[int]:
    """The tokens the chat template puts between the agent's sampled answer to `before` and its next turn, when the
    episode's next prompt is `after` (= `before`, the answer as an assistant message, then the environment's
    messages): the rest of the answer's closing (whatever of it the model did not sample: an answer ending in the
    end-of-turn token has sampled it), the observation, and the generation prompt. Raises ValueError when `after`
    does not extend `before` that way, or the template renders earlier messages differently once later ones follow."""
    k = len(before)
    if len(after) <= k + 1 or after[:k] != before or after[k].get("role") != "assistant":
        raise ValueError("the episode's next prompt does not extend its conversation with the agent's answer and the "
                         "environment's reply; token-level episodes need a growing conversation")
    marked = [*after[:k], {**after[k], "content": _MARK}, *after[k + 1:]]
    head = tokenizer.apply_chat_template(marked[:k + 1], tokenize=False, add_generation_prompt=False)
    full = tokenizer.apply_chat_template(marked, tokenize=False, add_generation_prompt=True)
    if _MARK not in head or not full.startswith(head):
        raise ValueError("the chat template renders the conversation's earlier turns differently once the "
                         "environment's reply follows; token-level episodes need a template that only appends")
    closing = head[head.rindex(_MARK) + len(_MARK):]
    if generation.finish_reason == "stop" and generation.token_ids:
        sampled = tokenizer.decode(generation.token_ids[-1:], skip_special_tokens=False)
        if sampled and closing.startswith(sampled):
            closing = closing[len(sampled):]
    return tokenizer(closing + full[len(head):], add_special_tokens=False)["input_ids"]


def play(episodes: list[Any], engine: Any, params: Any, *, context_limit: int = 0,
         traces: list[TokenTrace] | None = None, seeds: list[int] | None = None,
         on_done: Callable[[int], None] | None = None, on_turn: Callable[[int, int], None] | None = None,
         stats: dict[str, int] | None = None) -> None:
    """Play `episodes` (evals.base.Episode objects) to their ends, all live ones in lockstep, one generate call per
    turn. Without `traces`, each turn's prompt is the episode's messages (evaluation); with them (one per episode,
    its first prompt's ids set), the prompt is the trace's token ids, and every turn's tokens go into the trace
    (module docstring). `seeds`: one per episode (episode i's turn t samples with `turn_seed(seeds[i], t)`); without
    them turn t's call is seeded `params.seed + t * len(episodes)`, each prompt then by its place in the call.
    `stats`, when given, gains "calls", "prompts", "prompt_tokens", "cached_tokens" and "longest_prompt" (module
    docstring)."""
    sessions = getattr(engine, "takes_sessions", False)
    token = object()  # this call's episodes, as the engine's session keys: (token, i)
    try:
        _play(episodes, engine, params, context_limit, traces, seeds, on_done, on_turn,
              stats if stats is not None else {}, token if sessions else None)
    finally:
        if sessions:
            engine.release([(token, i) for i in range(len(episodes))])


def _play(episodes: list[Any], engine: Any, params: Any, context_limit: int, traces: list[TokenTrace] | None,
          seeds: list[int] | None, on_done: Callable[[int], None] | None,
          on_turn: Callable[[int, int], None] | None, stats: dict[str, int], token: object | None) -> None:
    for key in ("calls", "prompts", "prompt_tokens", "cached_tokens", "longest_prompt"):
        stats.setdefault(key, 0)
    steps = [0] * len(episodes)
    pending = {i: e.prompt() for i, e in enumerate(episodes)}    # each live episode's next prompt
    turn = 0
    while pending:
        asks: list[tuple[int, Any]] = []
        for i, messages in pending.items():
            if messages is None:
                continue
            if traces is not None:
                prompt = traces[i].ids()
            elif token is not None:
                prompt = engine.prompt_ids(messages)
            else:
                prompt = messages
            if context_limit > 0:
                n = len(prompt) if traces is not None or token is not None else len(engine.prompt_ids(messages))
                if n + params.max_new_tokens > context_limit:
                    episodes[i].stop(CONTEXT_OVERFLOW, overflow_reason(n, params.max_new_tokens, context_limit,
                                                                       steps[i]))
                    if token is not None:
                        engine.release([(token, i)])
                    continue
            asks.append((i, prompt))
        if asks:
            if on_turn is not None:
                on_turn(turn, len(asks))
            gens = _generate_turn(engine, params, asks, traces, seeds, steps, turn * len(episodes), token)
            _count_call(stats, gens)
            for (i, _), g in zip(asks, gens, strict=True):
                if traces is not None:
                    traces[i].add_agent(g[0])
                episodes[i].advance(g[0].text)
                steps[i] += 1
                if traces is not None and (nxt := episodes[i].prompt()) is not None:
                    traces[i].add_environment(observation_ids(engine.tokenizer, pending[i], nxt, g[0]))
        following = {i: episodes[i].prompt() for i, _ in asks}
        if token is not None and (ended := [(token, i) for i, m in following.items() if m is None]):
            engine.release(ended)
        following = {i: m for i, m in following.items() if m is not None}
        if on_done is not None and len(following) < len(pending):
            on_done(len(pending) - len(following))
        pending = following
        turn += 1


def _generate_turn(engine: Any, params: Any, asks: list[tuple[int, Any]], traces: list[TokenTrace] | None,
                   seeds: list[int] | None, steps: list[int], offset: int, token: object | None) -> list[Any]:
    """One turn's generate call for `asks` ((episode, prompt) pairs), as `play` describes: with `traces`, token ids
    seeded per episode and turn; else the turn's call seeded `params.seed + offset`."""
    keys = {"sessions": [(token, i) for i, _ in asks]} if token is not None else {}
    if traces is not None:
        turn_params = dataclasses.replace(params, n=1)
        own = [turn_seed(seeds[i] if seeds is not None else params.seed + i, steps[i]) for i, _ in asks]
        return engine.generate_ids([p for _, p in asks], turn_params, seeds=own, **keys)
    # a fresh seed per turn, so sampled turns do not repeat one turn's noise (greedy ignores it)
    turn_params = dataclasses.replace(params, seed=params.seed + offset)
    if token is not None:  # one answer per episode, seeded as the first of `generate`'s n would be
        return engine.generate_ids([p for _, p in asks], dataclasses.replace(turn_params, n=1),
                                   seeds=[turn_params.seed + j * params.n for j in range(len(asks))], **keys)
    return engine.generate([m for _, m in asks], turn_params)


def _count_call(stats: dict[str, int], gens: list[Any]) -> None:
    """`stats` (`play`'s) gains one generate call: its prompts, their tokens, those the engine had kept."""
    stats["calls"] += 1
    stats["prompts"] += len(gens)
    stats["prompt_tokens"] += sum(len(g[0].prompt_token_ids) for g in gens)
    stats["cached_tokens"] += sum(getattr(g[0], "cached_tokens", 0) for g in gens)
    stats["longest_prompt"] = max(stats["longest_prompt"], *(len(g[0].prompt_token_ids) for g in gens))


def play_episodes(bench: Benchmark, samples: list[EvalSample], engine: Any, params: Any, max_steps: int, *,
                  context_limit: int = 0, on_done: Callable[[int], None] | None = None,
                  on_turn: Callable[[int, int], None] | None = None,
                  stats: dict[str, int] | None = None) -> list[tuple[Transcript, Verdict]]:
    """Play every sample's episode to its end, all live ones in lockstep (see the module docstring).

    `engine` is a genenv engine (`generate`, `prompt_ids`), `params` its SamplingParams; `context_limit` 0 means
    unknown (no check). `on_done(n)` is called as n episodes finish, `on_turn(turn, prompts)` before each
    generate call; `stats` as `play`'s. Returns (transcript, verdict) per sample, in order."""
    episodes = []
    try:
        for s in samples:
            episodes.append(bench.start_episode(s, max_steps))
        play(episodes, engine, params, context_limit=context_limit, on_done=on_done, on_turn=on_turn, stats=stats)
        return [e.result() for e in episodes]
    finally:
        for e in episodes:
            e.close()
