"""rollout: the agent attempts every task of the epoch K times.

    genenv rollout --epoch 3                 # all tasks -> epochs/0003/rollouts.parquet
    genenv rollout --epoch 3 --shard 2/4     # every 4th task from the 2nd -> rollouts.shard-2-of-4.parquet

K is `rollout.group_size`, the GRPO group. The agent is epoch N-1's checkpoint (the base model at epoch 1).
Each row records the completion text, its token ids, each sampled token's logprob under the sampling
distribution (the behaviour policy GRPO's ratio is taken against), the finish reason and the model. Rollouts
are Parquet, not JSONL: the token lists make JSON several times larger and slower to read back
(benchmarks/speed/score_throughput.py measures it; benchmarks/speed/results/ has the figures).
Each task is put to the agent in its own domain's prompt (a mixed run has several domains), and its rows carry
the domain. Shards split the tasks round-robin so N machines share an epoch; `score` merges them and refuses an
incomplete set. A sample's seed depends on its task's place in the epoch and its index, never on the shards, so
one process and N shards draw the same rollouts.

A multi-turn domain's tasks (an environment: `Environment` in domains/base.py) are played as episodes, each of the
K samples its own, all live ones advanced together one turn at a time (stages/rollout_episodes.py); each row then
records the whole episode: its token sequence after the first prompt with the sampler's logprobs and the mask of
the agent's tokens, the turns, why it ended and the environment's reward (docs/pools.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import run_domains
from genenv_cli.core.errors import ConfigError
from genenv_cli.core.ui import UI
from genenv_cli.domains.base import Domain
from genenv_cli.domains.fingerprints import rollout_values
from genenv_cli.domains.seedfiles import domains_for_run
from genenv_cli.machinery.checkpoints import agent_model_for, derive_seed
from genenv_cli.machinery.taskfile import load_tasks
from genenv_cli.rundir import SHARD_MAX, RunDir, shard_stage
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging, execute
from genenv_cli.rundir.datafiles import frame, polars_schema, write_parquet

STAGE = "rollout"
CONFIG_SECTIONS = ["run.domain", "run.domains", "run.seed", "rollout", "curriculum.p_estimator"]



def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/4' -> (2, 4): shard 2 of 4, counted from 1; N at most `SHARD_MAX`."""
    if text is None:
        return None
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        i, n = (int(x) for x in text.split("/")) if len(text) <= 40 else (0, 0)
    except ValueError:
        i, n = 0, 0
    if not 1 <= i <= n <= SHARD_MAX:
        raise ConfigError(f"--shard {shown!r}: expected I/N with 1 <= I <= N <= {SHARD_MAX:,}, e.g. --shard 2/4.")
    return i, n


def stage_name(shard: tuple[int, int] | None) -> str:
    return STAGE if shard is None else shard_stage(STAGE, shard)


def output_path(run: RunDir, epoch: int, shard: tuple[int, int] | None) -> Path:
    return run.file("rollouts", epoch, shard)


def plan(run_dir: RunDir, cfg: Config, epoch: int, shard: tuple[int, int] | None = None) -> StagePlan:
    p = StagePlan(stage_name(shard), epoch, config_sections=CONFIG_SECTIONS)
    p.inputs["tasks"] = run_dir.file("tasks", epoch)
    p.requires.append((epoch, "generate-tasks"))
    name, tag, manifest = agent_model_for(run_dir, cfg, epoch, STAGE)
    p.models["agent"] = (name, tag)
    p.values["agent_model"] = tag
    p.values.update(rollout_values(domains_for_run(cfg, run_dir.root)))  # the agent's prompt, rendered
    if manifest is not None:
        p.inputs["agent_checkpoint"] = manifest
    p.outputs["rollouts"] = output_path(run_dir, epoch, shard)
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    """The stage's line; the rollouts whose (last) answer ran to the token limit are said against it.

    >>> summary({"rollouts": 24, "tasks": 4, "completion_tokens": 300, "truncated": 5}, {})
    '24 rollouts of 4 tasks, 300 tokens; 5 of 24 stopped at rollout.max_new_tokens'
    """
    cut = counts.get("truncated", 0)
    return (f"{counts.get('rollouts')} rollouts of {counts.get('tasks')} tasks, {counts.get('completion_tokens')} "
            f"tokens; " + (f"{cut} of {counts.get('rollouts')} stopped at rollout.max_new_tokens" if cut else
                           "none stopped at rollout.max_new_tokens"))


def run(run_dir: RunDir, cfg: Config, epoch: int, *, shard: tuple[int, int] | None = None, force: bool = False,
        ui: UI | None = None) -> StageResult:
    ui = ui or UI(quiet=True)
    domains = run_domains(cfg)

    def body(out: Staging) -> None:
        tasks = load_tasks(out.plan.inputs["tasks"], domains, run_dir.recorded_output(epoch, "generate-tasks", "tasks"))
        places = list(range(len(tasks)))
        if shard is not None:
            tasks, places = tasks[shard[0] - 1::shard[1]], places[shard[0] - 1::shard[1]]
        name, tag = out.plan.models["agent"]
        out.counts.update(_rollout(cfg, epoch, domains, tasks, name, tag, out.path("rollouts"), ui, places))

    return execute(run_dir, cfg, stage_name(shard), epoch, lambda: plan(run_dir, cfg, epoch, shard), body,
                   force=force)


def _rollout(cfg: Config, epoch: int, domains: dict[str, Domain], tasks: list[dict[str, Any]], model_name: str, model_tag: str,
             path: Path, ui: UI, places: list[int] | None = None) -> dict[str, Any]:
    """Every task's K samples. `places`: each task's index in the epoch's tasks.jsonl; task j's sample k is drawn
    with seed + j*K + k (`engines.base.sample_seeds`), so a shard draws exactly what the whole epoch in one process
    draws for its tasks, whatever the number of shards (with vllm.seeding = "engine" vLLM's own engine seed decides
    instead, and results depend on the batches)."""
    from genenv_cli.machinery.engines import SamplingParams

    r = cfg.rollout
    teacher_forced = cfg.curriculum.p_estimator.startswith("teacher_forced")
    if teacher_forced:
        refuse_without_reference(domains, tasks)
    engine = _open_agent_engine(cfg, epoch, model_name, model_tag, ui)
    seed = derive_seed(cfg.run.seed, STAGE, epoch)
    params = SamplingParams(temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                            n=r.group_size, seed=seed)
    seeds = [seed + j * r.group_size for j in (places or range(len(tasks)))]
    single = [j for j, t in enumerate(tasks) if not domains[t["domain"]].episodic]
    multi = [j for j, t in enumerate(tasks) if domains[t["domain"]].episodic]
    outs: list[list[dict[str, Any]]] = [[] for _ in tasks]
    episode_stats: dict[str, int] = {}  # the episodes' prompt tokens, and those the engine reused (machinery/episodes.py)
    try:
        with ui.progress(f"rollout e{epoch}", len(tasks) * r.group_size, "rollouts") as bar:
            if single:
                gens = engine.generate([domains[tasks[j]["domain"]].agent_messages(tasks[j]["payload"]) for j in single],
                                       params, on_progress=lambda s, t: bar.advance(s, tokens=t),
                                       seeds=[seeds[j] for j in single])
                for j, task_gens in zip(single, gens, strict=True):
                    outs[j] = [_generation_row(g) for g in task_gens]
            if multi:
                from genenv_cli.core.progress import EpisodeProgress
                from genenv_cli.stages.rollout_episodes import play_tasks

                turns = EpisodeProgress(bar, max(domains[tasks[j]["domain"]].max_turns for j in multi))
                played = play_tasks(engine, domains, [tasks[j] for j in multi], params, [seeds[j] for j in multi],
                                    on_done=turns.on_done, on_turn=turns.on_turn, stats=episode_stats)
                for j, task_rows in zip(multi, played, strict=True):
                    outs[j] = task_rows
        if teacher_forced:
            for rows, p in zip(outs, teacher_forced_p(engine, cfg, domains, tasks, model_name, model_tag), strict=True):
                for row in rows:
                    row["p_teacher_forced"] = p
    finally:
        engine.close()
    cols = _rollout_columns(tasks, outs, {"model": model_tag, "temperature": r.temperature, "top_p": r.top_p,
                                          "seed": seed})
    n = write_parquet(frame(cols, "rollouts"), path, "rollouts")
    tokens = sum(len(ids) for ids in cols["completion_token_ids"])
    counts = {"tasks": len(tasks), "rollouts": n, "completion_tokens": tokens,
              "truncated": cols["finish_reason"].count("length")}
    if multi:  # the episodes' own numbers (a single-turn run's counts stay as they were)
        from genenv_cli.stages.rollout_episodes import episode_counts

        counts.update(episode_counts(cols, episode_stats))
    return counts


def _open_agent_engine(cfg: Config, epoch: int, model_name: str, model_tag: str, ui: UI) -> Any:
    from genenv_cli.machinery.engines import open_run_engine
    from genenv_cli.machinery.models import resolve

    ui.info(f"rollout epoch {epoch}: loading agent model {model_tag}")
    with ui.working(f"rollout e{epoch}: loading agent model {model_tag}"):
        return open_run_engine(resolve(model_name, tag=model_tag), cfg, batch_size=cfg.rollout.batch_size)


def _generation_row(g: Any) -> dict[str, Any]:
    """A single-turn sample's columns of rollouts.parquet: its prompt, its text, its tokens as drawn."""
    return {"prompt_token_ids": g.prompt_token_ids, "completion": g.text, "completion_token_ids": g.token_ids,
            "logprobs": g.logprobs, "finish_reason": g.finish_reason}


def _rollout_columns(tasks: list[dict[str, Any]], outs: list[list[dict[str, Any]]],
                     sampling: dict[str, Any]) -> dict[str, list[Any]]:
    """rollouts.parquet's columns: each task's samples (`outs`, in the task's order) under their ids, with the
    sampling every row records (model, temperature, top_p, seed); a column a row lacks is null."""
    cols: dict[str, list[Any]] = {c: [] for c in polars_schema("rollouts")}
    for task, rows in zip(tasks, outs, strict=True):
        for k, g in enumerate(rows):
            row = {"rollout_id": f"{task['task_id']}/s{k}", "task_id": task["task_id"], "batch_id": task["batch_id"],
                   "domain": task["domain"], "sample_index": k, **g, **sampling}
            for c in cols:
                cols[c].append(row.get(c))
    return cols


def refuse_without_reference(domains: dict[str, Domain], tasks: list[dict[str, Any]]) -> None:
    """curriculum.p_estimator = "teacher_forced" (or its binomial control) needs every task's domain to declare a
    reference answer."""
    from genenv_cli.core.errors import ConfigError
    from genenv_cli.machinery.teacher_forced import SUPPORT

    lacking = sorted({t["domain"] for t in tasks if getattr(domains[t["domain"]], "teacher_forced", "") not in SUPPORT})
    if lacking:
        raise ConfigError(f"curriculum.p_estimator = \"teacher_forced\" needs a reference answer for every task, and "
                          f"domain {', '.join(lacking)} declares none (`teacher_forced` in the domain: docs/curriculum.md)"
                          f"; set curriculum.p_estimator = \"rollouts\".")


def teacher_forced_p(engine: Any, cfg: Config, domains: dict[str, Domain], tasks: list[dict[str, Any]],
                     model_name: str, model_tag: str) -> list[float | None]:
    """Each task's teacher-forced p under the rollout's sampling settings (machinery/teacher_forced.py), with the
    engine's own model where it holds one in this process (transformers), else the agent loaded by transformers."""
    from genenv_cli.machinery.models import load_model, load_tokenizer, resolve
    from genenv_cli.machinery.teacher_forced import task_probabilities

    r = cfg.rollout
    model, tokenizer, eos = getattr(engine, "model", None), getattr(engine, "tokenizer", None), \
        getattr(engine, "eos_ids", None)
    if model is None or tokenizer is None or eos is None:
        ref = resolve(model_name, tag=model_tag)
        tokenizer = load_tokenizer(ref, cfg.run.trust_remote_code)
        model = load_model(ref, device=cfg.run.device, dtype=cfg.run.dtype, trust_remote_code=cfg.run.trust_remote_code)
        eos = sorted({*(model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list)
                        else [model.generation_config.eos_token_id]), tokenizer.eos_token_id} - {None})
    return task_probabilities(model, tokenizer, eos, domains, tasks, temperature=r.temperature, top_p=r.top_p,
                              max_new_tokens=r.max_new_tokens, batch_size=r.batch_size)
