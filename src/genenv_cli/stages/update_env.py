"""update-env: the environment learns, on a KL leash to its initial self.

    genenv update-env --epoch 3

Trains epoch N-1's environment by `env_update.algo`:

- `rwr` (the paper's, the default): reward-weighted regression on `pools/env_sft` (all epochs, or the last
  `env_update.window`): supervised fine-tuning on (conditioning context -> raw environment output) pairs that
  passed the difficulty filter, each weighted exp(lambda R_env) normalised over the update.
- `grpo`: a group-relative policy gradient over every generation of the epoch (`pools/env_gen`): each
  generation's reward (exp(-beta (p_task - alpha)^2) from its own task's K rollouts, `curriculum.invalid_reward`
  for one that became no task) is compared with the other generations of its conditioning context (its batch),
  so a generation that is invalid or further from alpha than its siblings is pushed down, not ignored. The loss
  is the agent's GRPO loss (training/grpo.py) on the tokens the environment sampled; on-policy, so it trains on
  the epoch's own generations only.
- `rwr-task`: reward-weighted regression on every valid generation of `pools/env_gen` (window as rwr), each
  weighted exp(lambda R) by its own task's reward, with no filter: per-task rewards without learning from the
  generations that failed.

All three add `kl_coef` x KL to the initial environment and stop when that KL passes `kl_max` (recorded). Writes
`epochs/N/env/`, `env_update.parquet` (per generation) and `env_update_steps.parquet` (per step). In the `frozen`,
`static` and `seeds` modes the environment is never trained: the stage completes with nothing to do and says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.curriculum import normalized_weights
from genenv_cli.core.errors import InputError
from genenv_cli.core.ui import UI, num
from genenv_cli.machinery.checkpoints import ENV_STAGE, env_model_for, env_trained
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging
from genenv_cli.rundir.datafiles import check_parquet, reading, refuse_non_finite, scan_parquet
from genenv_cli.stages.update_run import UpdateStage, run_update

STAGE = ENV_STAGE
CONFIG_SECTIONS = ["run.seed", "env", "env_update", "curriculum.lam"]


def window_epochs(epoch: int, window: int) -> list[int]:
    return list(range(1 if window == 0 else max(1, epoch - window + 1), epoch + 1))


def pool_inputs(run_dir: RunDir, cfg: Config, epoch: int) -> dict[str, Path]:
    """The pool partitions the update reads: env_sft in the window (rwr), env_gen of the epoch (grpo) or in the
    window (rwr-task). An epoch scored before genenv recorded every generation has no env_gen partition: said, with
    the way out."""
    algo, window = cfg.env_update.algo, cfg.env_update.window
    if algo == "rwr":
        return {f"pool_{e:04d}": run_dir.pool_partition("env_sft", e) for e in window_epochs(epoch, window)}
    epochs = [epoch] if algo == "grpo" else window_epochs(epoch, window)
    for e in epochs:
        if run_dir.manifest_path(e, "score").exists() and run_dir.recorded_output(e, "score", "env_gen") is None:
            raise InputError(f"env_update.algo = {algo!r} learns from every generation of the environment "
                             f"(pools/env_gen), which epoch {e} does not have: its generate-tasks and score predate "
                             f"that record. Rerun `genenv generate-tasks --epoch {e} --force` and the stages after "
                             f"it, or set env_update.algo = \"rwr\"" + (" or a window that leaves it out."
                                                                       if algo == "rwr-task" else "."))
    return {f"gen_{e:04d}": run_dir.pool_partition("env_gen", e) for e in epochs}


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS)
    p.values["env_mode"] = cfg.env.mode
    if not env_trained(cfg):
        return p
    p.requires.append((epoch, "score"))
    p.inputs.update(pool_inputs(run_dir, cfg, epoch))
    name, tag, manifest = env_model_for(run_dir, cfg, epoch, STAGE)
    p.models["env"] = (name, tag)
    p.values["env_model"] = tag
    if manifest is not None:
        p.inputs["env_checkpoint"] = manifest
    p.outputs = {"env": run_dir.checkpoint_dir(epoch, "env"), "env_update": run_dir.file("env_update", epoch),
                 "env_update_steps": run_dir.file("env_update_steps", epoch)}
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    stopped = " (stopped by kl_max)" if metrics.get("kl_stopped") else ""
    groups = (f" in {counts.get('groups_used', 0)} groups ({counts.get('groups_skipped', 0)} all-equal skipped)"
              if counts.get("algo") == "grpo" else "")
    return (f"{counts.get('samples_used', 0)} generations{groups}, {counts.get('steps', 0)} steps, "
            f"final KL {num(metrics.get('kl_final'))}{stopped}")


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    stage = UpdateStage(STAGE, "env_update", cfg.env.model, env_trained(cfg), f"env.mode = {cfg.env.mode}",
                        "the environment", f"{cfg.env_update.algo}, ", lambda: plan(run_dir, cfg, epoch), _update)
    return run_update(run_dir, cfg, epoch, stage, force=force, ui=ui or UI(quiet=True))


def select_pairs(paths: list[Path], lam: float) -> tuple[list[dict[str, Any]], Any]:
    """rwr: (pairs to train on, per-pair records frame): kept pairs with a non-empty output, each weighted
    exp(lambda R) / sum exp(lambda R) over them. The prompts and outputs are read for those pairs only."""
    import polars as pl

    df = pl.concat([scan_parquet(p).select("epoch", "task_id", "batch_id", "r_env", "kept",
                                              pl.col("output").str.strip_chars().str.len_chars().alias("_n"))
                    for p in paths]).collect()
    why = (pl.when(~pl.col("kept")).then(pl.lit("filtered"))
           .when(pl.col("_n") == 0).then(pl.lit("empty output")).otherwise(pl.lit(None, dtype=pl.String)))
    df = df.with_columns(why.alias("skip_reason")).with_columns(pl.col("skip_reason").is_null().alias("used"))
    records = _with_weights(df, lam).select("epoch", "task_id", "batch_id", "r_env", "weight", "weight_rel", "used",
                                            "skip_reason")
    want = records.filter(pl.col("used")).select("epoch", "task_id", "weight_rel")
    pairs = (pl.concat([scan_parquet(p).select("epoch", "task_id", "batch_id", "prompt", "output") for p in paths])
             .join(want.lazy(), on=["epoch", "task_id"], how="inner", maintain_order="right").collect())
    return pairs.to_dicts(), records


def _with_weights(df: Any, lam: float, reward: str = "r_env") -> Any:
    """`weight` (exp(lambda R) / sum over the used rows) and `weight_rel` (x their number: mean 1) per row, 0 for
    the rows not used."""
    import polars as pl

    used_r = df.filter(pl.col("used"))[reward].to_list()
    weights = iter(normalized_weights(used_r, lam=lam))
    w = [next(weights) if u else 0.0 for u in df["used"].to_list()]
    return df.with_columns(pl.Series("weight", w, dtype=pl.Float64)).with_columns(
        (pl.col("weight") * len(used_r)).alias("weight_rel"))


GEN_KEYS = ("epoch", "generation_id", "task_id", "batch_id")


def _generations(paths: list[Path]) -> Any:
    """The cheap columns of every generation in the env_gen partitions (tokens are read for the used rows only)."""
    import polars as pl

    return pl.concat([scan_parquet(p).select(*GEN_KEYS, "valid", "reward", "temperature",
                                                pl.col("completion_token_ids").list.len().alias("_n"))
                      for p in paths]).collect()


def _tokens(paths: list[Path], want: Any) -> list[dict[str, Any]]:
    """The token lists of the generations in `want` (epoch, generation_id, + its own columns), in `want`'s order."""
    import polars as pl

    return (pl.concat([scan_parquet(p).select("epoch", "generation_id", "prompt_token_ids", "completion_token_ids",
                                              "logprobs") for p in paths])
            .join(want.lazy(), on=["epoch", "generation_id"], how="inner", maintain_order="right")
            .collect().to_dicts())


def select_task_pairs(paths: list[Path], lam: float) -> tuple[list[dict[str, Any]], Any]:
    """rwr-task: (rows to train on, per-generation records): every valid generation with a non-empty output, each
    weighted exp(lambda R) / sum exp(lambda R) by its own task's reward."""
    import polars as pl

    df = _generations(paths)
    why = (pl.when(~pl.col("valid")).then(pl.lit("not valid"))
           .when(pl.col("_n") == 0).then(pl.lit("empty output")).otherwise(pl.lit(None, dtype=pl.String)))
    df = df.with_columns(why.alias("skip_reason")).with_columns(pl.col("skip_reason").is_null().alias("used"))
    records = _with_weights(df.rename({"reward": "r_env"}), lam).select(
        "epoch", "task_id", "batch_id", "r_env", "weight", "weight_rel", "used", "skip_reason", "generation_id")
    got = _tokens(paths, records.filter(pl.col("used")).select("epoch", "generation_id", "batch_id", "weight_rel"))
    rows = [{"prompt_ids": d["prompt_token_ids"], "target_ids": d["completion_token_ids"],
             "weight_rel": d["weight_rel"], "group": f"{d['epoch']}/{d['batch_id']}"} for d in got]
    return rows, records


def select_group_samples(paths: list[Path]) -> tuple[list[dict[str, Any]], Any, float | None]:
    """grpo: (rows to train on, per-generation records, the sampling temperature). Advantages are group-relative
    over each batch's generations of known reward (training/grpo.group_advantages, as the agent's); a group whose
    rewards are all equal, a group of one, a generation with no reward (surplus) and an empty one are skipped."""
    import polars as pl

    from genenv_cli.machinery.training.grpo import group_advantages

    df = _generations(paths)
    known = df["reward"].is_not_null().to_list()
    scored = df.filter(pl.col("reward").is_not_null())
    adv_k, why_k = group_advantages(scored["reward"].to_list(),
                                    (scored["epoch"].cast(pl.String) + "/" + scored["batch_id"]).to_list())
    adv: list[float | None] = []
    why: list[str | None] = []
    it = iter(zip(adv_k, why_k, scored["_n"].to_list(), strict=True))
    for k in known:
        if not k:
            adv.append(None)
            why.append("no reward")
            continue
        a, w, n = next(it)
        if w is None and n == 0:
            w = "empty output"
        adv.append(a if w is None else None)
        why.append(w)
    records = df.rename({"reward": "r_env"}).with_columns(
        pl.Series("advantage", adv, dtype=pl.Float64), pl.Series("skip_reason", why, dtype=pl.String),
        pl.Series("used", [w is None for w in why], dtype=pl.Boolean),
        pl.lit(None, pl.Float64).alias("weight"), pl.lit(None, pl.Float64).alias("weight_rel"))
    records = records.select("epoch", "task_id", "batch_id", "r_env", "weight", "weight_rel", "used", "skip_reason",
                             "generation_id", "advantage")
    temps = df["temperature"].unique().to_list()
    got = _tokens(paths, records.filter(pl.col("used")).select("epoch", "generation_id", "batch_id", "advantage"))
    rows = [{"prompt_ids": d["prompt_token_ids"], "completion_ids": d["completion_token_ids"],
             "sampler_logps": d["logprobs"], "advantage": d["advantage"], "replay": False, "epoch": d["epoch"],
             "generation_id": d["generation_id"], "group": f"{d['epoch']}/{d['batch_id']}"} for d in got]
    return rows, records, (float(temps[0]) if len(temps) == 1 else None)


def _update(cfg: Config, epoch: int, out: Staging, ui: UI) -> None:
    from genenv_cli.machinery.training.distributed import world
    from genenv_cli.machinery.training.grpo import mismatch_records
    from genenv_cli.machinery.training.policy_loading import load_policy

    u = cfg.env_update
    paths = [p for n, p in sorted(out.plan.inputs.items()) if n.startswith(("pool_", "gen_"))]
    for p in paths:
        check_parquet(p, "env_sft" if u.algo == "rwr" else "env_gen")
        refuse_non_finite(p, "env_sft" if u.algo == "rwr" else "env_gen", f"update-env --epoch {epoch}")
    name, tag = out.plan.models["env"]
    _, size = world()
    policy_seed = cfg.run.seed + epoch
    with reading(paths, f"update-env epoch {epoch}"):
        if u.algo == "grpo":
            rows, records, temperature = select_group_samples(paths)
        elif u.algo == "rwr-task":
            rows, records = select_task_pairs(paths, cfg.curriculum.lam)
        else:
            pairs, records = select_pairs(paths, cfg.curriculum.lam)
    ui.info(f"update-env epoch {epoch}: {records.filter(records['used']).height} of {records.height} generations "
            f"from epochs {sorted(set(records['epoch'].to_list()))} are trained on ({u.algo}); training {tag}")
    with ui.working(f"update-env e{epoch}: loading {tag}"):
        policy = load_policy(name, tag, base_name=cfg.env.model, train=u, need_reference=True,
                             device=cfg.run.device, dtype=cfg.run.dtype, trust_remote_code=cfg.run.trust_remote_code,
                             seed=policy_seed)
    if u.algo == "rwr":
        rows = _tokenize_pairs(policy.tokenizer, pairs)
    if u.algo == "grpo":
        if temperature is None and rows:
            raise InputError(f"update-env epoch {epoch}: the epoch's generations were sampled at several "
                             f"temperatures; GRPO trains against one. Rerun `genenv generate-tasks --epoch {epoch} "
                             f"--force` and the stages after it.")
        steps, trainer, stopped, extra = _train_grpo(policy, cfg, epoch, rows, temperature or 1.0, ui)
        old = trainer.old_policy_logps() if trainer is not None else None
        records, mismatch = mismatch_records(records, rows, old, u.is_cap, key="generation_id")
        extra.update(mismatch)
    else:
        steps, trainer, stopped = _train_rwr(policy, cfg, epoch, rows, ui)
        extra = {}
    _publish(policy, cfg, epoch, out, ui, tag=tag, records=records, steps=steps, trainer=trainer, stopped=stopped,
             used=len(rows), size=size, extra=extra)


def _tokenize_pairs(tok: Any, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """rwr's rows: the context rendered with the chat template, the raw output re-tokenised with the end-of-turn
    token appended (env_sft keeps text: its rows predate the recorded tokens)."""
    rows = []
    for r in pairs:
        prompt = tok.apply_chat_template(json.loads(r["prompt"]), tokenize=False, add_generation_prompt=True)
        rows.append({"prompt_ids": tok(prompt, add_special_tokens=False)["input_ids"],
                     "target_ids": tok(r["output"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                     "weight_rel": r["weight_rel"], "group": f"{r['epoch']}/{r['batch_id']}"})
    return rows


def _train_rwr(policy: Any, cfg: Config, epoch: int, rows: list[dict[str, Any]],
               ui: UI) -> tuple[list[dict[str, Any]], Any, dict[str, Any] | None]:
    from genenv_cli.machinery.training.rwr_config import RWRConfig
    from genenv_cli.machinery.training.rwr_trainer import RWRTrainer

    u = cfg.env_update
    config = RWRConfig(kl_coef=u.kl_coef, kl_max=u.kl_max)
    return _train(policy, cfg, epoch, rows, ui, lambda args: RWRTrainer(policy, args, rows, config), lambda s: {})


def _train_grpo(policy: Any, cfg: Config, epoch: int, rows: list[dict[str, Any]], temperature: float,
                ui: UI) -> tuple[list[dict[str, Any]], Any, dict[str, Any] | None, dict[str, Any]]:
    """The environment's GRPO update: the agent's trainer (training/grpo_trainer.py) on the environment's
    generations, with the leash's cap (`kl_max`) stopping it."""
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer

    u = cfg.env_update
    config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=u.kl_coef, loss_type="grpo", temperature=temperature,
                        replay_clip=1.0, is_cap=u.is_cap, kl_max=u.kl_max, group_batches=True)
    steps, trainer, stopped = _train(
        policy, cfg, epoch, rows, ui, lambda args: GRPOTrainer(policy, args, rows, config),
        lambda s: {"policy_loss": s["policy_loss"], "clip_frac": s["clip_frac"], "is_weight_mean": s["is_weight_mean"]})
    applied = [s for s in steps if s["applied"]]
    extra = {"clip_frac_mean": round(sum(s["clip_frac"] for s in applied) / len(applied), 4) if applied else None}
    return steps, trainer, stopped, extra


def _train(policy: Any, cfg: Config, epoch: int, rows: list[dict[str, Any]], ui: UI, build: Any,
           columns: Any) -> tuple[list[dict[str, Any]], Any, dict[str, Any] | None]:
    """Either algorithm's training: `build(args)` makes its trainer; each step taken becomes a row of
    env_update_steps (with the algorithm's own `columns(step)`), the step the KL cap refused a last row."""
    from genenv_cli.machinery.launch import trainer_sharding
    from genenv_cli.machinery.training.training_loop import train_policy

    steps: list[dict[str, Any]] = []
    if not rows:
        return steps, None, None
    trainer, logged, cap = train_policy(
        policy, cfg.env_update, build, seed=cfg.run.seed + epoch, device=cfg.run.device, dtype=cfg.run.dtype, ui=ui,
        desc=f"update-env e{epoch}", sharding=trainer_sharding(cfg), timeout=cfg.run.dist_timeout)
    for s in trainer.step_stats:
        lg = logged.get(s["step"], {})
        steps.append({"step": s["step"], "loss": s["loss"], "nll": s.get("nll"), "kl": s["kl"], "applied": True,
                      "stopped_by_kl": False, "grad_norm": lg.get("grad_norm"), "learning_rate": lg.get("learning_rate"),
                      **columns(s)})
    stopped = _stopped_row(trainer, cap, epoch, ui, steps)
    return steps, trainer, stopped


def _stopped_row(trainer: Any, cap: BaseException | None, epoch: int, ui: UI,
                 steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """When kl_max stopped the update: the row of the step that was not taken, appended to `steps`."""
    if cap is None:
        return None
    stopped = trainer.stopped
    ui.info(f"update-env epoch {epoch}: stopped at step {stopped['step']}: {cap}")
    steps.append({"step": stopped["step"], "loss": stopped["loss"], "nll": stopped.get("nll"), "kl": stopped["kl"],
                  "applied": False, "stopped_by_kl": True, "grad_norm": None, "learning_rate": None})
    return stopped


def _publish(policy: Any, cfg: Config, epoch: int, out: Staging, ui: UI, *, tag: str, records: Any,
             steps: list[dict[str, Any]], trainer: Any, stopped: dict[str, Any] | None, used: int, size: int,
             extra: dict[str, Any]) -> None:
    import polars as pl

    from genenv_cli.machinery.training.publishing import publish_update

    u = cfg.env_update
    digest = publish_update(policy, out, role="env", epoch=epoch, trained_from=tag, records=records, steps=steps,
                            ui=ui, trainer=trainer, train=u)
    applied = [s for s in steps if s["applied"]]
    out.counts.update({"algo": u.algo, "samples_used": used, "pairs_seen": records.height, "steps": len(applied),
                       "world_size": size})
    if u.algo == "grpo":
        skipped = records.filter(pl.col("skip_reason").is_in(["all-equal group", "singleton group"]))
        out.counts.update({"groups_used": records.filter(pl.col("used")).select("epoch", "batch_id").n_unique(),
                           "groups_skipped": skipped.select("epoch", "batch_id").n_unique()})
    out.metrics.update({
        "loss_mean": round(sum(s["loss"] for s in applied) / len(applied), 6) if applied else None,
        "kl_final": round(steps[-1]["kl"], 6) if steps else None,
        "kl_stopped": stopped is not None,
        "stopped_at_step": stopped["step"] if stopped else None,
        "parameter_digest": digest,
        **extra,
    })
