"""generate-tasks: the environment writes the epoch's tasks.

    genenv generate-tasks --epoch 3

Each task batch starts from a conditioning context (docs/design.md, "The mathematics"): a task to vary (a seed, or from
epoch 2 a task of the previous epoch, preferring those the agent solved about alpha of the time), the
agent's statistics from `epochs/N-1/task_stats.parquet`, and examples near the frontier. The environment
samples `generate.variations` (n) outputs per context; every output is parsed by the domain, and valid,
novel ones become the batch's tasks. Exact and near duplicates (word-trigram Jaccard >= `near_duplicate`) of
any seed, any earlier epoch's task or an earlier task of this epoch are rejected, as are unparseable and
invalid outputs: all go to `tasks.rejects.jsonl` with the reason. Batches still short are retried for up to
`max_rounds` rounds; whatever the environment could not fill is filled with seed tasks (counted). Every generation,
task or not, is also recorded with its tokens and sampler logprobs in `env_generations.parquet`: a batch's
generations are the group the environment's GRPO update (`env_update.algo = "grpo"`) compares.

`generate.seed_share` of the epoch's tasks are seed (base) tasks, as the paper's training pool mixes base
data with new tasks. Modes: `frozen` generates with the base environment every epoch; `static` draws the
env tasks from a set of `static_variations` variations per seed generated once (`RUN/static/tasks.jsonl`);
`seeds` writes seed tasks only.

A mixed run (run.domain = "mixed") splits the epoch's `tasks_per_epoch` over `run.domains` by share, by largest
remainder (`split_budget`), and writes each domain's part as above with that domain alone: its seeds, its
earlier tasks and its own agent statistics condition the environment through its own prompt. Ids name the
domain (`e0003-arith-b0012-v2`, `e0003-seed-arith-a17`); one environment model serves every domain.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import domain_data
from genenv_cli.core.curriculum import agent_statistics, env_reward
from genenv_cli.core.reject_reasons import describe, top_reasons
from genenv_cli.core.safefiles import refuse_links_below
from genenv_cli.core.ui import UI, pct
from genenv_cli.domains.base import Domain, EnvContext, SeedTask
from genenv_cli.domains.fingerprints import generate_values
from genenv_cli.domains.seedfiles import domains_for_run
from genenv_cli.machinery.checkpoints import derive_seed, env_model_for
from genenv_cli.rundir import RunDir, clean_stale_tmp, replace_into_place, tmp_name, write_text_atomic
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging, execute
from genenv_cli.rundir.datafiles import frame, iter_jsonl, read_parquet, write_jsonl, write_parquet
from genenv_cli.stages.env_batches import STAGE, Novelty, Sampling, open_env_engine, sample_batches

CONFIG_SECTIONS = ["run.domain", "run.domains", "run.seed", "env", "generate", "curriculum"]


def static_set_path(run: RunDir, domain: str | None = None) -> Path:
    """RUN/static/tasks.jsonl; a mixed run keeps one set per domain, RUN/static/<domain>/tasks.jsonl."""
    return run.static_tasks(domain)


def split_budget(total: int, shares: dict[str, float]) -> dict[str, int]:
    """`total` tasks over domains by share, by largest remainder: each domain gets floor(total x share), and the
    tasks left go one each to the largest fractional parts (ties by name), so the parts sum to `total`.

    >>> split_budget(7, {"arith": 0.5, "tool_call": 0.5})
    {'arith': 4, 'tool_call': 3}
    >>> split_budget(10, {"a": 0.25, "b": 0.25, "c": 0.5})
    {'a': 3, 'b': 2, 'c': 5}
    """
    norm = sum(shares.values())
    exact = {name: total * share / norm for name, share in shares.items()}
    out = {name: math.floor(v) for name, v in exact.items()}
    for name in sorted(exact, key=lambda n: (out[n] - exact[n], n))[:total - sum(out.values())]:
        out[name] += 1
    return out


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    domains = domains_for_run(cfg, run_dir.root)
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS)
    p.outputs = {"tasks": run_dir.file("tasks", epoch), "rejects": run_dir.file("rejects", epoch),
                 "env_generations": run_dir.file("env_generations", epoch)}
    # the stage always writes it; optional so that tasks written by hand (tests, benchmarks) complete the stage as
    # an earlier genenv's did, and `score` then treats the epoch as one without the record
    p.optional_outputs.add("env_generations")
    # + the parser's code and the environment's prompt
    p.values = {"domain_data": domain_data(domains), **generate_values(domains, cfg.env.mode != "seeds")}
    if cfg.env.mode != "seeds":
        name, tag, manifest = env_model_for(run_dir, cfg, epoch, STAGE)
        p.models["env"] = (name, tag)
        p.values["env_model"] = tag
        if manifest is not None:
            p.inputs["env_checkpoint"] = manifest
    if epoch > 1:
        p.inputs["prev_task_stats"] = run_dir.file("task_stats", epoch - 1)
        p.requires.append((epoch - 1, "score"))
        for e in range(1, epoch):
            p.inputs[f"tasks_{e:04d}"] = run_dir.file("tasks", e)
    # the static set is written by the first epoch that needs it, so it is that epoch's output, not its input:
    # declared as an input there, it would make the finished epoch stale the moment it exists
    if cfg.env.mode == "static" and epoch > 1:
        for name in domains:
            path = static_set_path(run_dir, name if cfg.run.mixed else None)
            if path.exists():
                p.inputs["static_set" + (f"_{name}" if cfg.run.mixed else "")] = path
    return p


def _prev_tasks(run: RunDir, epoch: int) -> list[dict[str, Any]]:
    out = []
    for e in range(1, epoch):
        out.extend(iter_jsonl(run.file("tasks", e), "tasks"))
    return out


def _seed_record(epoch: int, seed: SeedTask, domain: str, used: dict[str, int], tag: str = "") -> dict[str, Any]:
    n = used.get(seed.id, 0)
    used[seed.id] = n + 1
    tid = f"e{epoch:04d}-seed{tag}-{seed.id}" + (f"-{n}" if n else "")
    return {"task_id": tid, "epoch": epoch, "batch_id": tid, "source": "seed", "domain": domain,
            "shape": seed.shape, "payload": seed.payload, "parent_id": None, "context": None,
            "env_prompt": None, "env_output": None, "env_model": None}


def _pick_parents(rng: random.Random, count: int, seeds: list[SeedTask], prev: list[dict[str, Any]],
                  prev_p: dict[str, float], alpha: float, beta: float) -> list[tuple[str, str, dict, float | None]]:
    """Parents to vary: seeds at epoch 1; later, half from the previous epoch's tasks weighted by
    exp(-beta (p - alpha)^2) (closest to the frontier first), half from seeds."""
    parents = []
    scored = [t for t in prev if t["task_id"] in prev_p]
    import polars as pl

    ps = pl.DataFrame({"p": [prev_p[t["task_id"]] for t in scored]}, schema={"p": pl.Float64})
    weights = ps.select(env_reward(alpha=alpha, beta=beta, p="p"))["r_env"].to_list()
    for _ in range(count):
        if scored and rng.random() < 0.5:
            t = rng.choices(scored, weights=weights, k=1)[0]
            parents.append((t["task_id"], t["shape"], t["payload"], prev_p[t["task_id"]]))
        else:
            s = rng.choice(seeds)
            parents.append((s.id, s.shape, s.payload, None))
    return parents


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    line = (f"{counts.get('tasks')} tasks ({counts.get('seed_tasks')} seed, {counts.get('env_tasks')} env) in "
            f"{counts.get('batches')} batches; {counts.get('accepted', 0)}/{counts.get('generations', 0)} "
            f"generations valid and novel ({pct(counts.get('valid_generation_rate'))})")
    if counts.get("truncated"):
        line += f"; {truncated_words(counts)}"
    refused = sum(counts.get(k, 0) or 0 for k in ("rejected_parse", "rejected_invalid", "rejected_duplicate"))
    top = describe(counts.get("reject_reasons"), refused)
    return line + (f"; top reject reasons: {top}" if top else "")


def truncated_words(counts: dict[str, Any]) -> str:
    """How many generations the token limit cut off, said where the limit is set.

    >>> truncated_words({"truncated": 12, "generations": 16})
    '12 of 16 generations stopped at generate.max_new_tokens'
    """
    return f"{counts.get('truncated')} of {counts.get('generations')} generations stopped at generate.max_new_tokens"


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    ui = ui or UI(quiet=True)
    domains = domains_for_run(cfg, run_dir.root)

    def body(out: Staging) -> None:
        _generate(run_dir, cfg, epoch, domains, out, ui)

    return execute(run_dir, cfg, STAGE, epoch, lambda: plan(run_dir, cfg, epoch), body, force=force)


def _new_counts() -> dict[str, Any]:
    return {"generations": 0, "accepted": 0, "rejected_parse": 0, "rejected_invalid": 0,
            "rejected_duplicate": 0, "rounds": 0, "seed_fill": 0, "truncated": 0}


def _tally(counts: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
    counts["tasks"] = len(tasks)
    counts["seed_tasks"] = sum(t["source"] == "seed" for t in tasks)
    counts["env_tasks"] = sum(t["source"] == "env" for t in tasks)
    counts["batches"] = len({t["batch_id"] for t in tasks})
    counts["valid_generation_rate"] = round(counts["accepted"] / counts["generations"], 4) \
        if counts["generations"] else None


def _generate(run_dir: RunDir, cfg: Config, epoch: int, domains: dict[str, Domain], out: Staging, ui: UI) -> None:
    prev = _prev_tasks(run_dir, epoch)
    ts = read_parquet(run_dir.file("task_stats", epoch - 1), "task_stats") if epoch > 1 else None
    rejects: list[dict[str, Any]] = []
    generations: list[dict[str, Any]] = []
    if not cfg.run.mixed:
        (domain,) = domains.values()
        counts = _new_counts()
        rng = random.Random(derive_seed(cfg.run.seed, STAGE, epoch))
        tasks = _domain_tasks(_Epoch(run_dir, cfg, epoch, out, ui, rejects, generations), domain,
                              cfg.generate.tasks_per_epoch, rng, prev, ts, counts, "")
    else:
        import polars as pl

        counts, tasks, by_domain = _new_counts(), [], {}
        budget = split_budget(cfg.generate.tasks_per_epoch, cfg.run.shares())
        engine = None
        if cfg.env.mode in ("genenv", "frozen") and cfg.generate.seed_share < 1.0:
            name, tag = out.plan.models["env"]
            engine = open_env_engine(cfg, epoch, name, tag, ui)  # one load serves every domain
        try:
            for name, wanted in budget.items():
                own = _new_counts()
                rng = random.Random(derive_seed(cfg.run.seed, STAGE, epoch, name))
                made = _domain_tasks(_Epoch(run_dir, cfg, epoch, out, ui, rejects, generations, engine),
                                     domains[name], wanted,
                                     rng, [t for t in prev if t["domain"] == name],
                                     None if ts is None else ts.filter(pl.col("domain") == name), own, f"-{name}")
                _tally(own, made)
                by_domain[name] = {k: own[k] for k in ("tasks", "seed_tasks", "env_tasks", "batches", "generations",
                                                       "accepted", "seed_fill", "valid_generation_rate")}
                for k in ("generations", "accepted", "rejected_parse", "rejected_invalid", "rejected_duplicate",
                          "seed_fill", "truncated"):
                    counts[k] += own[k]
                counts["rounds"] = max(counts["rounds"], own["rounds"])
                tasks.extend(made)
        finally:
            if engine is not None:
                engine.close()
        counts["by_domain"] = by_domain
    _tally(counts, tasks)
    counts["reject_reasons"] = top_reasons(rejects)  # the summary line and status name them
    if counts["truncated"]:
        ui.warn(f"{truncated_words(counts)} (= {cfg.generate.max_new_tokens} tokens): a task cut off there rarely "
                f"parses; raise it (--set generate.max_new_tokens=N, or in genenv.toml) if the rejects in "
                f"tasks.rejects.jsonl end mid-task")
    write_jsonl(out.path("tasks"), tasks)
    write_jsonl(out.path("rejects"), rejects)
    write_parquet(frame(generations, "env_generations"), out.path("env_generations"), "env_generations")
    out.counts.update(counts)


@dataclass
class _Epoch:
    """What every domain's part of an epoch shares: the run, its settings, the stage's staging area and UI, the
    rejects file's rows, env_generations' rows, and (a mixed run) the one open environment engine (None: each
    part opens its own)."""

    run_dir: RunDir
    cfg: Config
    epoch: int
    out: Staging
    ui: UI
    rejects: list[dict[str, Any]]
    generations: list[dict[str, Any]]
    engine: Any = None


def _domain_tasks(ep: _Epoch, domain: Domain, wanted: int, rng: random.Random, prev: list[dict[str, Any]], ts: Any,
                  counts: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    """`wanted` tasks of one domain: seed tasks, the environment's, and seed tasks filling what it could not
    write. `prev` and `ts` (the previous epoch's task_stats, None at epoch 1) hold this domain's tasks only;
    `tag` is "" for a single-domain run, `-<domain>` in a mixed one (in ids)."""
    run_dir, cfg, epoch, out, ui, rejects = ep.run_dir, ep.cfg, ep.epoch, ep.out, ep.ui, ep.rejects
    g = cfg.generate
    seeds = domain.seeds("train")
    if not seeds:
        raise ValueError(f"domain {domain.name} has no train seeds")
    n_env = 0 if cfg.env.mode == "seeds" else wanted - round(wanted * g.seed_share)
    n_seed = wanted - n_env

    novelty = Novelty(domain, g.near_duplicate)
    for s in seeds + domain.seeds("validation"):
        novelty.add(s.payload, s.id)
    for t in prev:
        if t["source"] == "env":
            novelty.add(t["payload"], t["task_id"])

    stats, prev_p, frontier = None, {}, []
    if ts is not None:
        c = cfg.curriculum
        stats = agent_statistics(ts, alpha=c.alpha, band=(c.band_low, c.band_high), examples=g.frontier_examples)
        prev_p = dict(zip(ts["task_id"].to_list(), ts["p_task"].to_list(), strict=True))
        by_id = {t["task_id"]: t for t in prev}
        frontier = [by_id[t]["payload"] for t in stats.get("frontier_task_ids", []) if t in by_id]

    used: dict[str, int] = {}
    tasks: list[dict[str, Any]] = []

    if n_env and cfg.env.mode == "static":
        env_tasks = _static_tasks(run_dir, cfg, epoch, domain, seeds, n_env, ui, counts, rejects, tag)
    elif n_env:
        n_batches = math.ceil(n_env / g.variations)
        parents = _pick_parents(rng, n_batches, seeds, prev, prev_p, cfg.curriculum.alpha, cfg.curriculum.beta)
        contexts = [EnvContext(pid, shape, payload, pp, stats, frontier) for pid, shape, payload, pp in parents]
        name, model_tag = out.plan.models["env"]
        sampling = Sampling(cfg, epoch, domain, name, model_tag, novelty, g.variations, f"e{epoch:04d}{tag}", ui,
                            counts, rejects, ep.generations)
        env_tasks = sample_batches(sampling, contexts, n_env, ep.engine)
    else:
        env_tasks = []

    for s in rng.sample(seeds, k=min(n_seed, len(seeds))) + rng.choices(seeds, k=max(0, n_seed - len(seeds))):
        tasks.append(_seed_record(epoch, s, domain.name, used, tag))
    tasks.extend(env_tasks)
    shortfall = wanted - len(tasks)
    if shortfall > 0:
        counts["seed_fill"] = shortfall
        ui.warn(f"the environment wrote {len(env_tasks)} usable {domain.name + ' ' if tag else ''}tasks of {n_env} "
                f"wanted; {shortfall} seed tasks fill the epoch")
        for s in rng.choices(seeds, k=shortfall):
            tasks.append(_seed_record(epoch, s, domain.name, used, tag))
    return tasks


def _static_tasks(run_dir: RunDir, cfg: Config, epoch: int, domain: Domain, seeds: list[SeedTask], wanted: int,
                  ui: UI, counts: dict[str, Any], rejects: list[dict[str, Any]], tag: str = "") -> list[dict[str, Any]]:
    """GenEnv-Static: `static_variations` variations of every seed, generated once by the base environment
    and stored in RUN/static/tasks.jsonl (a mixed run: one set per domain); each epoch draws its env tasks from
    that set."""
    path = static_set_path(run_dir, domain.name if tag else None)
    if not path.exists():
        ui.info(f"static mode: generating the fixed variation set ({cfg.generate.static_variations} per seed)")
        static_novelty = Novelty(domain, cfg.generate.near_duplicate)
        for s in seeds + domain.seeds("validation"):
            static_novelty.add(s.payload, s.id)
        contexts = [EnvContext(s.id, s.shape, s.payload, None, None, []) for s in seeds]
        v = cfg.generate.static_variations
        sampling = Sampling(cfg, 0, domain, cfg.env.model, cfg.env.model, static_novelty, v, f"static{tag}", ui,
                            counts, rejects)
        made = sample_batches(sampling, contexts, len(seeds) * v)
        refuse_links_below(run_dir.root, path, "the static task set")  # never written through a linked folder
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_tmp(path.parent)
        tmp = tmp_name(path)
        write_jsonl(tmp, made)
        replace_into_place(tmp, path)
        write_text_atomic(path.with_name("README.txt"),
                          "GenEnv-Static: variations of the seeds generated once (epoch 0) and reused by every epoch.\n")
    pool = list(iter_jsonl(path, "tasks"))
    # each epoch takes the next slice of one fixed shuffle, so epochs see the whole set before repeating;
    # reuse across epochs is the point of this ablation, so no novelty check applies here
    order = list(range(len(pool)))
    random.Random(derive_seed(cfg.run.seed, "static-order", *([domain.name] if tag else []))).shuffle(order)
    out = []
    for j in range(min(wanted, len(pool))):
        t = dict(pool[order[((epoch - 1) * wanted + j) % len(pool)]])
        t["task_id"] = f"e{epoch:04d}-{t['task_id']}"
        t["batch_id"] = f"e{epoch:04d}-{t['batch_id']}"
        t["epoch"] = epoch
        out.append(t)
    return out
