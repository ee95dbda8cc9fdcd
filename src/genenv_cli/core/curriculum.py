"""The α-curriculum (GenEnv §3): the environment's reward, the difficulty filter, success, RWR weights, and the
statistics of the agent that condition the environment's next tasks.

The per-rollout and per-batch formulas are stated here once, as polars expressions; `score` builds
task_stats and env_sft from them, and `generate-tasks` weights its parents with `env_reward`.

>>> import polars as pl
>>> df = pl.DataFrame({"p_batch": [0.5, 0.0, 0.62, 0.6]})
>>> [round(r, 6) for r in df.select(env_reward(alpha=0.5, beta=2.0))["r_env"]]   # exp(-2 * 0.25) for p = 0
[1.0, 0.606531, 0.971611, 0.980199]
>>> df.select(filtered(alpha=0.5, k_min=0.1))["filtered"].to_list()   # 0.6 - 0.5 is 0.0999...98: not filtered
[False, True, True, False]
>>> pl.DataFrame({"reward": [1.0, 0.9999999999999, 0.5]}).select(success(1.0))["success"].to_list()
[True, True, False]
>>> is_success(0.9999999999999, 1.0), is_success(0.5, 0.5), is_success(0.4, 0.5)
(True, True, False)
>>> [round(w, 4) for w in pl.DataFrame({"r_env": [1.0, 0.0]}).select(rwr_weight(lam=1.0))["weight"]]   # e, 1
[2.7183, 1.0]
>>> [round(w, 4) for w in normalized_weights([1.0, 0.0], lam=1.0)]   # e / (e + 1), 1 / (e + 1)
[0.7311, 0.2689]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# The one tolerance for comparing rewards and rates with a threshold: it rounds away float noise
# (0.6 - 0.5 is 0.09999999999999998; a reward summed from parts may land a hair under 1.0).
EPS = 1e-9


def env_reward(*, alpha: float, beta: float, p: str = "p_batch", kind: str = "exp") -> Any:
    """R_env as a polars expression named `r_env`, 1 when the agent solves the batch alpha of the time:
    `exp` (the paper's) exp(-beta (p - alpha)^2); `uncertainty` (R-Zero's challenger reward) 1 - 2|p - alpha|.

    >>> import polars as pl
    >>> df = pl.DataFrame({"p_batch": [0.5, 0.0, 0.75, 1.0]})
    >>> df.select(env_reward(alpha=0.5, beta=2.0, kind="uncertainty"))["r_env"].to_list()
    [1.0, 0.0, 0.5, 0.0]
    """
    import polars as pl

    if kind == "uncertainty":
        return (1.0 - 2.0 * (pl.col(p) - alpha).abs()).alias("r_env")
    if kind != "exp":
        raise ValueError(f"unknown environment reward {kind!r}: exp or uncertainty")
    return (-beta * (pl.col(p) - alpha) ** 2).exp().alias("r_env")


def invalid_generation_reward(c: Any) -> float:
    """The reward of an environment generation that became no task: `curriculum.invalid_reward` under the exp reward;
    under the uncertainty reward, what a task at p = 0 or 1 earns (the lower of the two), so that a valid task far
    from alpha is worth no more than no task at all.

    >>> from types import SimpleNamespace as C
    >>> invalid_generation_reward(C(env_reward="uncertainty", alpha=0.5, invalid_reward=0.0))
    0.0
    >>> invalid_generation_reward(C(env_reward="uncertainty", alpha=0.3, invalid_reward=0.0))
    -0.4
    """
    if c.env_reward == "uncertainty":
        return round(1.0 - 2.0 * max(c.alpha, 1.0 - c.alpha), 12)
    return float(c.invalid_reward)


def filtered(*, alpha: float, k_min: float, p: str = "p_batch") -> Any:
    """|p_batch - alpha| > k_min, as a polars expression named `filtered`: the batch is too far from alpha to
    train the environment on."""
    import polars as pl

    return ((pl.col(p) - alpha).abs() > k_min + EPS).alias("filtered")


def success(threshold: float, reward: str = "reward") -> Any:
    """R_agent >= success_threshold, as a polars expression named `success` (see `is_success` for one value)."""
    import polars as pl

    return (pl.col(reward) >= threshold - EPS).alias("success")


def is_success(reward: float, threshold: float) -> bool:
    """`success` for one reward (evaluations score samples one at a time); the same comparison, the same EPS."""
    return reward >= threshold - EPS


def rwr_weight(*, lam: float, r_env: str = "r_env") -> Any:
    """The unnormalised reward-weighted-regression weight exp(lambda R_env), as a polars expression named `weight`."""
    import polars as pl

    return (pl.col(r_env) * lam).exp().alias("weight")


def normalized_weights(r_envs: Sequence[float], *, lam: float) -> list[float]:
    """exp(lambda R_i) / sum_j exp(lambda R_j), computed stably."""
    if not r_envs:
        return []
    top = max(lam * r for r in r_envs)
    raw = [math.exp(lam * r - top) for r in r_envs]
    total = sum(raw)
    return [w / total for w in raw]


def informative_expr(reward: str = "reward") -> Any:
    """Per-group aggregation (use in `group_by(...).agg`): True when the group's rewards are not all equal and it
    has at least two members, i.e. GRPO gets a non-zero advantage from it. For a success rate p over K samples
    this happens with probability 1 - p^K - (1-p)^K, largest at p = 1/2: the paper's p(1-p) argument, counted."""
    import polars as pl

    return ((pl.col(reward).max() > pl.col(reward).min()) & (pl.len() >= 2)).alias("informative")


def epoch_statistics(task_stats: Any, *, band: tuple[float, float]) -> dict[str, Any]:
    """The curriculum's per-epoch numbers from task_stats (a polars frame with source, shape, batch_id, attempts,
    successes, p_batch and informative): the informative-group share, the share of environment batches in the
    band, the environment's shape mix, the agent's success per shape, and the same per shape and source (`seed`,
    `env`): the environment writes its own exercises of a shape, on which the agent may succeed more or less often
    than on the seeds of that shape, so the pooled number describes neither.

    Shares are None when there is nothing to count (no task, no environment batch)."""
    import polars as pl

    def share(num: int, den: int) -> float | None:
        return round(num / den, 4) if den else None

    groups = task_stats.filter(pl.col("attempts") >= 2)
    env = task_stats.filter(pl.col("source") == "env")
    env_batches = env.unique("batch_id")
    mix = env.group_by("shape").agg(pl.len().alias("n")).sort("shape")
    per_shape = (task_stats.group_by("shape")
                 .agg(pl.col("successes").sum().alias("s"), pl.col("attempts").sum().alias("a"), pl.len().alias("n"),
                      pl.col("informative").sum().alias("i"))
                 .sort("shape"))
    by_source = (task_stats.group_by("source", "shape")
                 .agg(pl.col("successes").sum().alias("s"), pl.col("attempts").sum().alias("a"), pl.len().alias("n"))
                 .sort("source", "shape"))
    sources: dict[str, dict[str, Any]] = {}
    for r in by_source.iter_rows(named=True):
        sources.setdefault(r["source"], {})[r["shape"]] = {"p": share(r["s"], r["a"]), "tasks": r["n"]}
    return {
        "informative_share": share(int(groups["informative"].sum()), groups.height),
        "env_batch_band_share": share(int(env_batches["p_batch"].is_between(band[0], band[1]).sum()),
                                      env_batches.height),
        "env_shape_mix": {r["shape"]: round(r["n"] / env.height, 4) for r in mix.iter_rows(named=True)},
        "shape_success": {r["shape"]: {"p": share(r["s"], r["a"]), "tasks": r["n"],
                                       "informative": share(r["i"], r["n"])}
                          for r in per_shape.iter_rows(named=True)},
        "shape_success_by_source": sources,
    }


def agent_statistics(task_stats: Any, *, alpha: float, band: tuple[float, float], examples: int) -> dict[str, Any]:
    """What the environment is told about the agent after an epoch (from task_stats.parquet, a polars frame):
    success overall and per shape, and task ids near p = alpha, too easy (p = 1) and too hard (p = 0)."""
    import polars as pl

    if task_stats.height == 0:
        return {"tasks": 0}
    overall = task_stats["successes"].sum() / max(task_stats["attempts"].sum(), 1)
    per_shape = (task_stats.group_by("shape")
                 .agg((pl.col("successes").sum() / pl.col("attempts").sum()).alias("p"), pl.len().alias("n"))
                 .sort("shape"))
    near = (task_stats.with_columns((pl.col("p_task") - alpha).abs().alias("dist"))
            .filter(pl.col("p_task").is_between(band[0], band[1]))
            .sort(["dist", "task_id"]).head(examples))
    return {
        "tasks": task_stats.height,
        "success_rate": round(float(overall), 4),
        "per_shape": {r["shape"]: {"success_rate": round(float(r["p"]), 4), "tasks": int(r["n"])}
                      for r in per_shape.iter_rows(named=True)},
        "too_easy": int((task_stats["p_task"] >= 1.0).sum()),
        "too_hard": int((task_stats["p_task"] <= 0.0).sum()),
        "in_band": int(task_stats["p_task"].is_between(band[0], band[1]).sum()),
        "frontier_task_ids": near["task_id"].to_list(),
    }
