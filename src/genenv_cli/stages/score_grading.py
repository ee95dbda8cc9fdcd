"""score's grading: every rollout of the epoch given its reward, partial credit, validity and success. A completion
is graded by its task's own domain's scorer, each distinct (task, completion) once; an episode's verdict is its
environment's, as it was played. A grade that is not a finite number in [0, 1] is refused before anything is written.
"""

from __future__ import annotations

import math
from typing import Any

from genenv_cli.catalogue.settings import ITEM_TIMEOUT_S
from genenv_cli.core.curriculum import success
from genenv_cli.core.errors import InputError
from genenv_cli.core.ui import UI
from genenv_cli.machinery.grading import Graded, grade_pairs


def grade(roll: Any, tasks: list[dict[str, Any]], domains: dict[str, Any], threshold: float, limit: float, ui: UI,
          epoch: int) -> tuple[Any, int]:
    """(one row per rollout with its grade, task and success, the number of distinct pairs graded).

    Each distinct (task, completion) is graded once by its task's domain: K samples of a task often coincide. A
    pair is keyed by the 64-bit hash of (task_id, completion), so grades join back on one integer column; the
    joins run on a narrow frame (the token lists stay in `roll`, in the same row order)."""
    import polars as pl

    meta = roll.select("rollout_id", "task_id", "batch_id", "sample_index", "completion", "finish_reason",
                       "temperature", "model",
                       pl.col("prompt_token_ids").list.len().cast(pl.Int64).alias("prompt_tokens"),
                       pl.col("completion_token_ids").list.len().cast(pl.Int64).alias("completion_tokens"),
                       pl.struct("task_id", "completion").hash(seed=0).alias("_pair"), "turns", "end",
                       "p_teacher_forced")
    # an episode's verdict is its environment's, given as it was played (rollouts' reward, partial, valid, error)
    episodes = roll.select(pl.col("reward").is_not_null().alias("_episode"), pl.col("reward").alias("_reward"),
                           pl.col("partial").alias("_partial"), pl.col("valid").alias("_valid"),
                           pl.col("error").alias("_error"))
    played = bool(episodes["_episode"].any())
    graded_rows = meta.filter(~episodes["_episode"]) if played else meta
    pairs = graded_rows.select("_pair", "task_id", "completion").unique("_pair", maintain_order=True)
    # K samples of a task often coincide: the bar counts the distinct ones graded, and says of how many rollouts
    with ui.progress(f"score e{epoch} ({meta.height} rollouts)", pairs.height, "distinct completions") as bar:
        graded = _grade_by_domain(domains, tasks, pairs["task_id"].to_list(), pairs["completion"].to_list(),
                                  bar.advance, limit)
    _refuse_non_finite_grades(graded, pairs["task_id"].to_list(), {t["task_id"]: t["domain"] for t in tasks})
    grades = pl.DataFrame({"_pair": pairs["_pair"], "reward": graded.reward, "partial": graded.partial,
                           "valid": graded.valid, "error": graded.error},
                          schema={"_pair": pl.UInt64, "reward": pl.Float64, "partial": pl.Float64,
                                  "valid": pl.Boolean, "error": pl.String})
    scored = meta.drop("completion").join(grades, on="_pair", how="left", maintain_order="left")
    if played:
        scored = pl.concat([scored, episodes], how="horizontal").with_columns(
            *[pl.when(pl.col("_episode")).then(pl.col(f"_{c}")).otherwise(pl.col(c)).alias(c)
              for c in ("reward", "partial", "valid", "error")]).drop(episodes.columns)
    scored = (scored.join(task_info(tasks), on="task_id", how="left", maintain_order="left")
              .with_columns(success(threshold)))
    return scored, pairs.height


def task_info(tasks: list[dict[str, Any]]) -> Any:
    import polars as pl

    return pl.DataFrame({"task_id": [t["task_id"] for t in tasks], "source": [t["source"] for t in tasks],
                         "domain": [t["domain"] for t in tasks], "shape": [t["shape"] for t in tasks]},
                        schema={k: pl.String for k in ("task_id", "source", "domain", "shape")})


def _refuse_non_finite_grades(graded: Graded, task_ids: list[str],
                              domain_of: dict[str, str]) -> None:
    """A reward or partial credit that is NaN, infinite or outside [0, 1] is the domain scorer's fault (a
    plugin's, since the built-in ones return 0 or 1): refused with the domain and the task, before anything is
    written."""
    for reward, partial, tid in zip(graded.reward, graded.partial, task_ids, strict=True):
        for what, value in (("reward", reward), ("partial credit", partial)):
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise InputError(f"the scorer of domain {domain_of.get(tid)!r} gave task {tid} the {what} {value!r}, "
                                 f"which is not a finite number in [0, 1]; nothing was written. Fix the domain's "
                                 f"`score` (a plugin's) and rerun `genenv score`.")


def _grade_by_domain(domains: dict[str, Any], tasks: list[dict[str, Any]], task_ids: list[str],
                     completions: list[str], advance: Any, limit: float = ITEM_TIMEOUT_S) -> Graded:
    """grade_pairs with each task's own domain's scorer, in the pairs' order (`limit`: score.item_timeout_s)."""
    payloads = {t["task_id"]: t["payload"] for t in tasks}
    if len(domains) == 1:
        return grade_pairs(next(iter(domains)), payloads, task_ids, completions, advance=advance, limit=limit)
    domain_of = {t["task_id"]: t["domain"] for t in tasks}
    n = len(task_ids)
    graded = Graded([0.0] * n, [0.0] * n, [False] * n, [None] * n)
    for name in domains:
        idx = [i for i, tid in enumerate(task_ids) if domain_of[tid] == name]
        if idx:
            got = grade_pairs(name, payloads, [task_ids[i] for i in idx], [completions[i] for i in idx],
                              advance=advance, limit=limit)
            for column, values in zip(graded, got, strict=True):
                for i, v in zip(idx, values, strict=True):
                    column[i] = v
    return graded
