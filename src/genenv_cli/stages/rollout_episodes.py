"""The rollout stage's episodes: every sample of a multi-turn domain's task played as its own episode with the
episode engine (machinery/episodes.py, token-level traces), and the row each one becomes in rollouts.parquet.

Episode k of the task at place j in the epoch samples its first turn with seed + j*K + k, as a single-turn sample
does, and each later turn with a seed derived from that one and the turn (`machinery.episodes.turn_seed`): what an
episode draws depends on its place and index only, never on the shards or on the other episodes of its turn."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from genenv_cli.domains.base import DomainEpisode
from genenv_cli.machinery.episodes import TokenTrace, play


def play_tasks(engine: Any, domains: dict[str, Any], tasks: list[dict[str, Any]], params: Any, seeds: list[int],
               on_done: Callable[[int], None] | None = None,
               on_turn: Callable[[int, int], None] | None = None,
               stats: dict[str, int] | None = None) -> list[list[dict[str, Any]]]:
    """`params.n` episodes per task (task i's k-th seeded seeds[i] + k), all played together; the rollout row of
    each (the columns after the ids), per task. `on_done`, `on_turn` and `stats` are `machinery.episodes.play`'s."""
    k = params.n
    episodes: list[DomainEpisode] = []
    try:
        for t in tasks:
            for _ in range(k):
                episodes.append(domains[t["domain"]].start_episode(t["payload"]))
        traces = [TokenTrace(engine.prompt_ids(e.messages)) for e in episodes]
        play(episodes, engine, params, context_limit=engine.context_limit(), traces=traces,
             seeds=[s + i for s in seeds for i in range(k)], on_done=on_done, on_turn=on_turn, stats=stats)
        rows = [episode_row(engine.tokenizer, e, tr) for e, tr in zip(episodes, traces, strict=True)]
    finally:
        for e in episodes:
            e.close()
    return [rows[i * k:(i + 1) * k] for i in range(len(tasks))]


def episode_row(tokenizer: Any, episode: DomainEpisode, trace: TokenTrace) -> dict[str, Any]:
    v = episode.verdict
    assert v is not None  # play() runs every episode to its end
    return {"prompt_token_ids": trace.prompt_ids,
            "completion": tokenizer.decode(trace.token_ids, skip_special_tokens=False),
            "completion_token_ids": trace.token_ids, "logprobs": trace.logprobs,
            "finish_reason": trace.finish_reasons[-1] if trace.finish_reasons else "length",
            "agent_mask": trace.agent_mask, "turns": episode.turns, "end": episode.end, "reward": float(v.reward),
            "partial": float(v.partial), "valid": bool(v.valid), "error": v.error,
            "actions": json.dumps(episode.actions, ensure_ascii=False),
            "observations": json.dumps(episode.observations, ensure_ascii=False)}


def episode_counts(cols: dict[str, list[Any]], stats: dict[str, int] | None = None) -> dict[str, Any]:
    """The rollout stage's counts of its episodes: how many, their agent turns and agent tokens, why they ended;
    with `play`'s `stats`, the prompt tokens sent over all turns and the share the engine had kept from earlier
    turns (its cache hit rate: the hf engine's kept keys and values, vLLM's prefix cache)."""
    played = [i for i, t in enumerate(cols["turns"]) if t is not None]
    out = {"episodes": len(played), "episode_turns": sum(cols["turns"][i] for i in played),
           "agent_tokens": sum(sum(cols["agent_mask"][i]) for i in played),
           "episode_ends": dict(sorted(Counter(cols["end"][i] for i in played).items()))}
    if stats and stats.get("prompt_tokens"):
        out |= {"episode_prompt_tokens": stats["prompt_tokens"], "episode_cached_tokens": stats["cached_tokens"],
                "episode_cache_hit_rate": round(stats["cached_tokens"] / stats["prompt_tokens"], 4)}
    return out
