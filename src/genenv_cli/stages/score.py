"""score: grade every rollout and turn the grades into the curriculum's numbers and the two pools.

    genenv score --epoch 3

Per rollout: R_agent, success (R_agent >= success_threshold), validity (scores.parquet). Per task: p_task
over its K rollouts; per batch: p_batch over its n x K rollouts, R_env (`curriculum.env_reward`: by default
exp(-beta (p_batch - alpha)^2), or 1 - 2|p_batch - alpha|) and
the filter flag |p_batch - alpha| > k_min, carried to every task of the batch (task_stats.parquet). Then
the epoch's pool partitions, replaced whole on a rerun so rows are never duplicated:
`pools/agent_train/epoch=NNNN.parquet` (every trace with group ids, tokens, logprobs and rewards) and
`pools/env_sft/epoch=NNNN.parquet` (each environment generation that became a task: context -> raw output,
R_env, weight exp(lambda R_env), kept = passed the filter) and `pools/env_gen/epoch=NNNN.parquet` (every
environment generation, task or not, with its own reward: R_env of its task's p_task over K rollouts,
`curriculum.invalid_reward` for one that became no task (under the uncertainty reward, what p = 0 or 1 earns);
what `env_update.algo = "grpo"` learns from).

Every row carries its task's domain, and each task is graded by its own domain's scorer; a mixed run's metrics add
`by_domain`, the epoch's numbers per domain, which add up to its totals.

Sharded rollouts (`rollout --shard I/N`) are merged; a missing shard is an error naming it.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import domain_data, run_domains
from genenv_cli.core.curriculum import (
    env_reward,
    filtered,
    informative_expr,
    invalid_generation_reward,
    rwr_weight,
)
from genenv_cli.core.errors import InputError
from genenv_cli.core.ui import UI, num, pct
from genenv_cli.domains.fingerprints import score_values
from genenv_cli.machinery.checkpoints import derive_seed
from genenv_cli.machinery.taskfile import load_tasks
from genenv_cli.rundir import RunDir, shard_of, shard_stage
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging, execute, manifests_problem
from genenv_cli.rundir.datafiles import polars_schema, read_parquet, write_parquet
from genenv_cli.rundir.schemas import SCHEMAS
from genenv_cli.stages.score_grading import grade, task_info
from genenv_cli.stages.score_metrics import episode_metrics, epoch_metrics, generation_metrics

STAGE = "score"
# the watchdog's limit decides which pairs time out (scored wrong): a changed limit makes score stale, and the
# manifest's config records the limit every "timed out" came from
CONFIG_SECTIONS = ["run.domain", "run.domains", "curriculum", "score.item_timeout_s"]


def rollout_sources(run: RunDir, epoch: int) -> list[tuple[str, str]]:
    """[(input name, rollout stage)] to merge: the unsharded file, else every shard of one split."""
    problem = manifests_problem(run, epoch)
    if problem:
        raise InputError(f"{problem}; `score --epoch {epoch}` cannot see which rollouts completed.")
    if run.manifest_path(epoch, "rollout").exists():
        return [("rollouts", "rollout")]
    shards = run.rollout_shards(epoch)
    if not shards:
        raise InputError(f"`score --epoch {epoch}` needs the epoch's rollouts, but neither `rollout` nor any "
                         f"`rollout --shard I/N` of epoch {epoch} has completed. Run `genenv rollout --epoch {epoch}`.")
    splits = {n for _, n in shards}
    if len(splits) > 1:
        raise InputError(f"epoch {epoch} has rollout shards of different splits ({sorted(splits)}); remove the "
                         f"stale ones (epochs/{epoch:04d}/rollouts.shard-*.parquet and their manifests).")
    n = splits.pop()
    missing = sorted(set(range(1, n + 1)) - {i for i, _ in shards})
    if missing:
        raise InputError(f"epoch {epoch}: rollout shards {', '.join(f'{i}/{n}' for i in missing)} have not completed "
                         f"(have {len(shards)} of {n}); score refuses an incomplete set. Run "
                         f"`genenv rollout --epoch {epoch} --shard {missing[0]}/{n}`.")
    return [(f"rollouts_shard_{i}", shard_stage("rollout", (i, n))) for i in range(1, n + 1)]


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS)
    p.inputs["tasks"] = run_dir.file("tasks", epoch)
    p.requires.append((epoch, "generate-tasks"))
    for name, stage in rollout_sources(run_dir, epoch):
        p.inputs[name] = run_dir.file("rollouts", epoch, shard_of(stage))
        p.requires.append((epoch, stage))
    p.outputs = {key: run_dir.file(key, epoch) for key in ("scores", "task_stats", "agent_train", "env_sft")}
    if run_dir.recorded_output(epoch, "generate-tasks", "env_generations") is not None:
        # absent where generate-tasks predates it: such an epoch has no env_gen partition, and stays done
        p.inputs["env_generations"] = run_dir.file("env_generations", epoch)
        p.outputs["env_gen"] = run_dir.file("env_gen", epoch)
    p.values["domain_data"] = domain_data(run_domains(cfg))
    p.values.update(score_values(run_domains(cfg)))  # the scorer's code
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    graded = (f"{counts['rollouts']} rollouts ({how_scored(counts)}), "
              if isinstance(counts.get("rollouts"), int) and isinstance(counts.get("graded_distinct"), int) else "")
    return (f"{graded}success {num(metrics.get('success_rate'))}, mean p_batch {num(metrics.get('batch_p_mean'))}, "
            f"{pct(metrics.get('band_share'))} of tasks in band, mean R_env {num(metrics.get('env_r_mean'))} over "
            f"{metrics.get('env_batches', 0)} env batches ({metrics.get('env_batches_kept', 0)} kept)")


def how_scored(counts: dict[str, Any]) -> str:
    """What the rollouts' rewards came from: the distinct completions graded, and the episodes (whose reward is
    their environment's, given as they were played).

    >>> how_scored({"rollouts": 8, "graded_distinct": 0, "episodes_scored": 8})
    '8 episodes, rewarded as played'
    >>> how_scored({"rollouts": 12, "graded_distinct": 3, "episodes_scored": 8})
    '8 episodes rewarded as played, 3 distinct completions graded'
    >>> how_scored({"rollouts": 8, "graded_distinct": 5})
    '5 distinct completions graded'
    """
    episodes = counts.get("episodes_scored") or 0
    graded = f"{counts.get('graded_distinct')} distinct completions graded"
    if not episodes:
        return graded
    if episodes == counts.get("rollouts"):
        return f"{episodes} episodes, rewarded as played"
    return f"{episodes} episodes rewarded as played, {graded}"


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    ui = ui or UI(quiet=True)

    def body(out: Staging) -> None:
        with collector_paused():
            _score(run_dir, cfg, epoch, out.plan, out, ui)

    return execute(run_dir, cfg, STAGE, epoch, lambda: plan(run_dir, cfg, epoch), body, force=force)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the stage builds its millions of long-lived objects (task
    dicts, grades): each collection walks every object made so far, which makes reading a large epoch's tasks
    several times slower. Nothing the stage makes needs the collector to be freed."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _score(run_dir: RunDir, cfg: Config, epoch: int, p: StagePlan, out: Staging, ui: UI) -> None:
    """The stage's steps: read, check, grade, the curriculum's task statistics, the pools, the metrics."""
    domains = run_domains(cfg)
    c = cfg.curriculum
    tasks, roll = read_inputs(run_dir, epoch, p, domains)
    check_rollouts(run_dir, epoch, tasks, roll)
    scored, distinct = grade(roll, tasks, domains, c.success_threshold, cfg.score.item_timeout_s, ui, epoch)
    scores = scored.select(*SCORE_COLUMNS)
    stats = task_statistics(scored, tasks, c, seed=derive_seed(cfg.run.seed, STAGE, epoch))
    env_sft = write_outputs(out, epoch, scores, stats, agent_train_partition(scored, roll, epoch), tasks, c.lam)
    out.counts.update({"tasks": stats.height, "rollouts": scores.height, "graded_distinct": distinct,
                       "episodes_scored": int(roll["reward"].is_not_null().sum()),
                       "valid_rollouts": int(scores["valid"].sum()), "env_generations": env_sft.height,
                       "env_kept": int(env_sft["kept"].sum())})
    out.metrics.update(epoch_metrics(stats, scores, c, list(domains) if cfg.run.mixed else None))
    out.metrics.update(episode_metrics(scores))
    if "env_gen" in p.outputs:
        gens = generation_rewards(read_parquet(p.inputs["env_generations"], "env_generations"), stats, epoch, c)
        _refuse_non_finite(gens, "env_gen", epoch)
        write_parquet(gens, out.path("env_gen"), "env_gen")
        out.metrics.update(generation_metrics(gens))


SCORE_COLUMNS = ("rollout_id", "task_id", "batch_id", "sample_index", "source", "domain", "shape", "reward",
                 "partial", "success", "valid", "error", "completion_tokens", "finish_reason", "turns", "end")


def read_inputs(run_dir: RunDir, epoch: int, p: StagePlan, domains: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    """(the epoch's tasks, its rollouts as one frame, every shard merged). polars decodes the rollouts on its own
    threads while this one parses the tasks' JSON (both take seconds on a big epoch); nothing is left running when
    grading forks its workers."""
    # here, not at the top: `genenv status` imports this module for its plan
    from concurrent.futures import ThreadPoolExecutor

    import polars as pl

    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(lambda: [read_parquet(path, "rollouts") for name, path in p.inputs.items()
                                       if name.startswith("rollouts")])
        tasks = load_tasks(p.inputs["tasks"], domains, run_dir.recorded_output(epoch, "generate-tasks", "tasks"))
        frames = reading.result()
    return tasks, pl.concat(frames) if len(frames) > 1 else frames[0]


def check_rollouts(run_dir: RunDir, epoch: int, tasks: list[dict[str, Any]], roll: Any) -> None:
    """The rollouts are one consistent set for these tasks: each names a task of tasks.jsonl, no rollout_id
    twice, every task attempted. Otherwise an InputError saying which stage to rerun."""
    import polars as pl

    by_id = {t["task_id"] for t in tasks}
    unknown = roll.filter(~pl.col("task_id").is_in(list(by_id)))
    if unknown.height:
        raise InputError(f"{run_dir.rel(run_dir.epoch_dir(epoch))}: {unknown.height} rollouts name tasks that are not in "
                         f"tasks.jsonl (first: {unknown['task_id'][0]}); rerun `genenv rollout --epoch {epoch}`.")
    dup = roll.filter(pl.col("rollout_id").is_duplicated())
    if dup.height:
        raise InputError(f"epoch {epoch}: rollout_id {dup['rollout_id'][0]} appears more than once; the rollouts "
                         f"are not one consistent set. Rerun `genenv rollout --epoch {epoch} --force`.")
    covered = set(roll["task_id"].unique().to_list())
    missing = [t["task_id"] for t in tasks if t["task_id"] not in covered]
    if missing:
        raise InputError(f"epoch {epoch}: {len(missing)} of {len(by_id)} tasks have no rollouts (first: {missing[0]}); "
                         f"the rollouts are older than tasks.jsonl. Rerun `genenv rollout --epoch {epoch}`.")


def task_statistics(scored: Any, tasks: list[dict[str, Any]], c: Any, seed: int = 0) -> Any:
    """task_stats: per task p_task over its K rollouts; per batch p_batch over its n x K, R_env and the filter flag,
    carried to every task of the batch; the band and informative flags (curriculum.py's expressions). Under
    `curriculum.p_estimator = "teacher_forced"` p_task is the rollouts' recorded teacher-forced p and p_batch the mean
    of its tasks'; the rollouts' share is kept beside it (p_task_rollouts). Under "teacher_forced_binomial" p_task is
    X / K with X ~ Binomial(K, that p), K the task's attempts, drawn from `seed` and the task id (`binomial_share`)."""
    import polars as pl

    forced = c.p_estimator.startswith("teacher_forced")
    if "p_teacher_forced" not in scored.columns:
        scored = scored.with_columns(pl.lit(None, pl.Float64).alias("p_teacher_forced"))
    per_task = scored.group_by("task_id").agg(
        pl.len().cast(pl.Int64).alias("attempts"), pl.col("success").sum().cast(pl.Int64).alias("successes"),
        pl.col("reward").mean().alias("mean_reward"), pl.col("prompt_tokens").first(), informative_expr("reward"),
        pl.col("p_teacher_forced").first().alias("p_task_teacher_forced"))
    if forced and per_task["p_task_teacher_forced"].null_count():
        first = per_task.filter(pl.col("p_task_teacher_forced").is_null())["task_id"][0]
        raise InputError(f"curriculum.p_estimator is \"teacher_forced\" but the rollouts of task {first} carry no "
                         f"p_teacher_forced: they were made under another setting. Rerun `genenv rollout --force` for "
                         f"the epoch.")
    batch_of = pl.DataFrame({"task_id": [t["task_id"] for t in tasks], "batch_id": [t["batch_id"] for t in tasks]})
    per_task = (per_task.join(batch_of, on="task_id").join(task_info(tasks), on="task_id")
                .with_columns((pl.col("successes") / pl.col("attempts")).alias("p_task_rollouts")))
    if c.p_estimator == "teacher_forced_binomial":
        drawn = [binomial_share(p, k, f"{seed}/{t}") for t, p, k in
                 per_task.select("task_id", "p_task_teacher_forced", "attempts").iter_rows()]
        per_task = per_task.with_columns(pl.Series("p_task", drawn, dtype=pl.Float64))
        per_batch = per_task.group_by("batch_id").agg(pl.col("p_task").mean().alias("p_batch"))
    elif forced:
        per_task = per_task.with_columns(pl.col("p_task_teacher_forced").alias("p_task"))
        per_batch = per_task.group_by("batch_id").agg(pl.col("p_task").mean().alias("p_batch"))
    else:
        per_task = per_task.with_columns(pl.col("p_task_rollouts").alias("p_task"),
                                         pl.lit(None, pl.Float64).alias("p_task_rollouts"),
                                         pl.lit(None, pl.Float64).alias("p_task_teacher_forced"))
        per_batch = per_task.group_by("batch_id").agg(
            (pl.col("successes").sum() / pl.col("attempts").sum()).alias("p_batch"))
    return (per_task.join(per_batch, on="batch_id")
            .with_columns(env_reward(alpha=c.alpha, beta=c.beta, kind=c.env_reward), filtered(alpha=c.alpha, k_min=c.k_min),
                          pl.col("p_task").is_between(c.band_low, c.band_high).alias("in_band"))
            .sort("task_id")
            .select(*SCHEMAS["task_stats"].names()))


def binomial_share(p: float, k: int, key: str) -> float:
    """X / k with X ~ Binomial(k, p), drawn from a generator seeded by `key` (the same key draws the same X).

    >>> binomial_share(0.0, 8, "a"), binomial_share(1.0, 8, "a"), binomial_share(0.4, 8, "a") * 8 % 1
    (0.0, 1.0, 0.0)
    """
    import random

    rng = random.Random(key)
    return sum(rng.random() < p for _ in range(k)) / k


def agent_train_partition(scored: Any, roll: Any, epoch: int) -> Any:
    """The epoch's D_train partition: every trace with its group, tokens, behaviour logprobs and reward."""
    import polars as pl

    return pl.concat([
        scored.select(pl.lit(epoch, pl.Int64).alias("epoch"), "rollout_id", "task_id",
                      pl.col("task_id").alias("group_id"), "sample_index", "source", "domain"),
        roll.select("prompt_token_ids", "completion_token_ids", "logprobs", "agent_mask"),
        scored.select("reward", "success", "valid", "finish_reason", "temperature", "model", "turns", "end"),
    ], how="horizontal")


def write_outputs(out: Staging, epoch: int, scores: Any, stats: Any, agent_train: Any, tasks: list[dict[str, Any]],
                  lam: float) -> Any:
    """Write the four outputs to their staging paths (nothing NaN or infinite: a refusal leaves nothing behind);
    returns the env_sft partition. The largest file is written (polars, off the GIL) while the environment's
    pairs are built in Python."""
    from concurrent.futures import ThreadPoolExecutor

    for name, df in (("scores", scores), ("task_stats", stats)):
        _refuse_non_finite(df, name, epoch)
    with ThreadPoolExecutor(1) as pool:
        writing = pool.submit(write_parquet, agent_train, out.path("agent_train"), "agent_train")
        env_sft = _env_sft(tasks, stats, epoch, lam)
        _refuse_non_finite(env_sft, "env_sft", epoch)
        write_parquet(scores, out.path("scores"), "scores")
        write_parquet(stats, out.path("task_stats"), "task_stats")
        write_parquet(env_sft, out.path("env_sft"), "env_sft")
        writing.result()
    return env_sft


def generation_rewards(gens: Any, stats: Any, epoch: int, c: Any) -> Any:
    """The epoch's env_gen partition: every environment generation with its own reward. A generation that became a
    task gets R_env of that task's p_task over its K rollouts (`env_reward`, `curriculum.env_reward`); one that
    became no task gets `invalid_generation_reward` (curriculum.invalid_reward, or under the uncertainty reward what
    p = 0 or 1 earns); a surplus one (valid, but the epoch had no room for it, so never
    attempted) gets none and stays out of its group, as does a duplicate under `curriculum.duplicate_reward =
    "neutral"`."""
    import polars as pl

    p_task = stats.select("task_id", "p_task")
    unknown = gens.filter(pl.col("task_id").is_not_null()).join(p_task, on="task_id", how="anti")
    if unknown.height:
        raise InputError(f"epoch {epoch}: env_generations.parquet names task {unknown['task_id'][0]}, which is not in "
                         f"tasks.jsonl; the two files of generate-tasks disagree. Rerun `genenv generate-tasks --epoch "
                         f"{epoch} --force`.")
    surplus = pl.col("reason").is_not_null() & pl.col("reason").str.starts_with("surplus")
    if c.duplicate_reward == "neutral":  # a duplicate, like a surplus generation, has no reward and leaves its group
        dup = pl.col("reason").str.starts_with("duplicate of") | pl.col("reason").str.starts_with("near duplicate of")
        surplus = surplus | (pl.col("reason").is_not_null() & dup)
    return (gens.join(p_task, on="task_id", how="left", maintain_order="left")
            .with_columns(pl.col("task_id").is_not_null().alias("valid"),
                          env_reward(alpha=c.alpha, beta=c.beta, p="p_task", kind=c.env_reward).alias("_r"))
            .with_columns(pl.when(pl.col("valid")).then(pl.col("_r"))
                          .when(surplus).then(pl.lit(None, pl.Float64))
                          .otherwise(pl.lit(invalid_generation_reward(c))).alias("reward"),
                          pl.lit(epoch, pl.Int64).alias("epoch"))
            .select(list(polars_schema("env_gen"))))


# the setting most likely at fault when a derived column is not a finite number
_SUSPECTS = {"r_env": "curriculum.beta", "weight": "curriculum.lam", "p_batch": "curriculum.alpha"}


def _refuse_non_finite(df: Any, name: str, epoch: int) -> None:
    """No NaN or infinity reaches a pool file: a float column holding one stops the stage, naming the column and
    the setting most likely at fault."""
    import polars as pl

    floats = [c for c, t in df.schema.items() if t in (pl.Float64, pl.Float32)]
    if not floats or df.height == 0:
        return
    bad = df.select(*[(~pl.col(c).is_finite()).any().alias(c) for c in floats]).row(0, named=True)
    for column, hit in bad.items():
        if hit:
            suspect = _SUSPECTS.get(column)
            raise InputError(f"score epoch {epoch}: the {column} column of {name} would hold NaN or infinity; nothing "
                             f"was written." + (f" The setting most likely at fault is `{suspect}`." if suspect else "")
                             + " Check the curriculum settings and rerun `genenv score`.")


def _env_sft(tasks: list[dict[str, Any]], stats: Any, epoch: int, lam: float) -> Any:
    """The epoch's environment pairs: each env task's context -> raw output, with its batch's R_env, weight
    exp(lambda R_env) and kept flag (= its batch passed the filter)."""
    import polars as pl

    env_rows = [t for t in tasks if t["source"] == "env"]
    pairs = pl.DataFrame({
        "task_id": [t["task_id"] for t in env_rows],
        "batch_id": [t["batch_id"] for t in env_rows],
        "domain": [t["domain"] for t in env_rows],
        "parent_id": [t["parent_id"] for t in env_rows],
        "prompt": [json.dumps(t["env_prompt"], ensure_ascii=False) for t in env_rows],
        "output": [t["env_output"] or "" for t in env_rows],
        "env_model": [t["env_model"] or "" for t in env_rows],
    }, schema={k: pl.String for k in ("task_id", "batch_id", "domain", "parent_id", "prompt", "output", "env_model")})
    batches = stats.select("batch_id", "p_batch", "r_env", "filtered").unique("batch_id")
    return (pairs.join(batches, on="batch_id", how="left", maintain_order="left")
            .with_columns(pl.lit(epoch, pl.Int64).alias("epoch"), rwr_weight(lam=lam),
                          (~pl.col("filtered")).alias("kept"))
            .select(list(polars_schema("env_sft"))))
