"""score's numbers for the manifest and metrics.json: the epoch's counts and rates from task_stats (and, in a mixed
run, each domain's, which add up to the epoch's), the rollout-level means, the curriculum's epoch statistics, the
episodes' turns and ends, and what the environment's GRPO update will see in the epoch's generations.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.core.curriculum import epoch_statistics


def generation_metrics(gens: Any) -> dict[str, Any]:
    """What the environment's GRPO update will see in this epoch's generations: its groups (batches with two
    generations or more of known reward), the share whose rewards are not all equal, and the mean reward of the
    valid and of the invalid generations."""
    import polars as pl

    known = gens.filter(pl.col("reward").is_not_null())
    groups = known.group_by("batch_id").agg(pl.len().alias("n"), (pl.col("reward").max() > pl.col("reward").min())
                                           .alias("informative")).filter(pl.col("n") >= 2)

    def mean(df: Any) -> float | None:
        return round(float(df["reward"].mean()), 4) if df.height else None

    return {"env_groups": groups.height,
            "env_groups_informative_share": round(float(groups["informative"].mean()), 4) if groups.height else None,
            "env_reward_valid": mean(known.filter(pl.col("valid"))),
            "env_reward_invalid": mean(known.filter(~pl.col("valid")))}


def task_counts(stats: Any) -> dict[str, Any]:
    """What a set of tasks (the epoch's, or one domain's) adds up to, from task_stats: counts that add up over
    domains to the epoch's (tasks, rollouts, successes, tasks in band, GRPO groups and the informative ones,
    environment batches and the kept ones) and the rates made of them."""
    import polars as pl

    def share(num: int, den: int) -> float | None:
        return round(num / den, 4) if den else None

    groups = stats.filter(pl.col("attempts") >= 2)
    env_batches = stats.filter(pl.col("source") == "env").unique("batch_id")
    attempts, successes = int(stats["attempts"].sum()), int(stats["successes"].sum())
    in_band, informative = int(stats["in_band"].sum()), int(groups["informative"].sum())
    return {
        "tasks": stats.height, "env_tasks": int((stats["source"] == "env").sum()), "rollouts": attempts,
        "successes": successes, "success_rate": share(successes, attempts),
        "in_band": in_band, "band_share": share(in_band, stats.height),
        "groups": groups.height, "informative": informative, "informative_share": share(informative, groups.height),
        "env_batches": env_batches.height,
        "env_r_mean": round(float(env_batches["r_env"].mean()), 4) if env_batches.height else None,
        "env_batches_kept": int((~env_batches["filtered"]).sum()) if env_batches.height else 0,
    }


# the keys of metrics.json's by_domain that score gives (docs/pools.md)
BY_DOMAIN_KEYS = ("tasks", "env_tasks", "rollouts", "successes", "success_rate", "in_band", "band_share", "groups",
                  "informative", "informative_share", "env_batches", "env_r_mean")


def epoch_metrics(stats: Any, scores: Any, c: Any, domains: list[str] | None = None) -> dict[str, Any]:
    """The manifest's metrics: the epoch's `task_counts` rates, the rollout-level means, the curriculum's epoch
    statistics (curriculum.epoch_statistics), and for a mixed run (`domains`) `by_domain`."""
    n = task_counts(stats)
    metrics = {
        **{k: n[k] for k in ("success_rate", "band_share", "env_batches", "env_r_mean", "env_batches_kept")},
        "mean_reward": round(float(scores["reward"].mean()), 4) if scores.height else None,
        "batch_p_mean": round(float(stats.unique("batch_id")["p_batch"].mean()), 4) if stats.height else None,
        "mean_prompt_tokens": round(float(stats["prompt_tokens"].mean()), 2) if stats.height else None,
        "mean_completion_tokens": round(float(scores["completion_tokens"].mean()), 2) if scores.height else None,
        **epoch_statistics(stats, band=(c.band_low, c.band_high)),
    }
    if domains is not None:
        metrics["by_domain"] = domain_breakdown(stats, domains)
    return metrics


def episode_metrics(scores: Any) -> dict[str, Any]:
    """The epoch's episodes (rollouts of multi-turn domains): mean agent turns and why they ended. Nothing for an
    epoch of single-turn rollouts, whose metrics stay as they were."""
    import polars as pl

    played = scores.filter(pl.col("turns").is_not_null())
    if played.height == 0:
        return {}
    ends = {r["end"]: r["len"] for r in played.group_by("end").len().sort("end").iter_rows(named=True)}
    return {"episode_turns_mean": round(float(played["turns"].mean()), 4), "episode_ends": ends}


def domain_breakdown(stats: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per domain of a mixed run: its `task_counts`, which add up over the domains to the epoch's."""
    import polars as pl

    return {name: {k: v for k, v in task_counts(stats.filter(pl.col("domain") == name)).items() if k in BY_DOMAIN_KEYS}
            for name in names}
