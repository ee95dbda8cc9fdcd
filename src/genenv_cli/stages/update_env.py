"""update-env: the environment learns by reward-weighted regression, on a KL leash to its initial self.

    genenv update-env --epoch 3

Trains epoch N-1's environment on `pools/env_sft` (all epochs, or the last `env_update.window`): supervised
fine-tuning on (conditioning context -> raw environment output) pairs that passed the difficulty filter,
each weighted exp(lambda R_env) normalised over the update, plus `kl_coef` x KL to the initial environment
model; the update stops when that KL passes `kl_max` (recorded). Writes `epochs/N/env/`,
`env_update.parquet` (per pair) and `env_update_steps.parquet` (per step). In the `frozen`, `static` and
`seeds` modes the environment is never trained: the stage completes with nothing to do and says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.checkpoints import ENV_STAGE, env_model_for, env_trained
from genenv_cli.config import Config
from genenv_cli.contract import StagePlan, StageResult, Staging, execute, process_rank
from genenv_cli.curriculum import normalized_weights
from genenv_cli.metrics import after_stage
from genenv_cli.pools import check_parquet, reading, scan_parquet
from genenv_cli.rundir import RunDir
from genenv_cli.ui import UI

STAGE = ENV_STAGE
CONFIG_SECTIONS = ["run.seed", "env", "env_update", "curriculum.lam"]


def window_epochs(epoch: int, window: int) -> list[int]:
    return list(range(1 if window == 0 else max(1, epoch - window + 1), epoch + 1))


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS)
    p.values["env_mode"] = cfg.env.mode
    if not env_trained(cfg):
        return p
    p.requires.append((epoch, "score"))
    for e in window_epochs(epoch, cfg.env_update.window):
        p.inputs[f"pool_{e:04d}"] = run_dir.pool_partition("env_sft", e)
    name, tag, manifest = env_model_for(run_dir, cfg, epoch, STAGE)
    p.models["env"] = (name, tag)
    p.values["env_model"] = tag
    if manifest is not None:
        p.inputs["env_checkpoint"] = manifest
    p.outputs = {"env": run_dir.checkpoint_dir(epoch, "env"), "env_update": run_dir.file("env_update", epoch),
                 "env_update_steps": run_dir.file("env_update_steps", epoch)}
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    from genenv_cli.summaries import num

    stopped = " (stopped by kl_max)" if metrics.get("kl_stopped") else ""
    return (f"{counts.get('samples_used', 0)} generations, {counts.get('steps', 0)} steps, "
            f"final KL {num(metrics.get('kl_final'))}{stopped}")


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    ui = ui or UI(quiet=True)
    if env_trained(cfg):
        from genenv_cli.launch import check_update_launch

        check_update_launch(cfg, "env_update", cfg.env.model)  # before the lock and any compute

    def body(out: Staging) -> None:
        if not env_trained(cfg):
            out.counts.update({"samples_used": 0, "skipped": f"env.mode = {cfg.env.mode}: the environment is not trained"})
            ui.info(f"update-env epoch {epoch}: env.mode = {cfg.env.mode}, the environment is not trained")
            return
        from genenv_cli.launch import sharding_line

        ui.info(f"update-env epoch {epoch}: {sharding_line(cfg)}")
        _update(cfg, epoch, out, ui)

    result = execute(run_dir, cfg, STAGE, epoch, lambda: plan(run_dir, cfg, epoch), body, force=force,
                     derived=after_stage)
    if process_rank() == 0:  # after the commit: run.keep_checkpoints' full checkpoints no stage needs any more
        from genenv_cli.pruning import prune

        prune(run_dir, cfg)
    return result


def select_pairs(paths: list[Path], lam: float) -> tuple[list[dict[str, Any]], Any]:
    """(pairs to train on, per-pair records frame): kept pairs with a non-empty output, each weighted
    exp(lambda R) / sum exp(lambda R) over them. The prompts and outputs are read for those pairs only."""
    import polars as pl

    df = pl.concat([scan_parquet(p).select("epoch", "task_id", "batch_id", "r_env", "kept",
                                              pl.col("output").str.strip_chars().str.len_chars().alias("_n"))
                    for p in paths]).collect()
    why = (pl.when(~pl.col("kept")).then(pl.lit("filtered"))
           .when(pl.col("_n") == 0).then(pl.lit("empty output")).otherwise(pl.lit(None, dtype=pl.String)))
    df = df.with_columns(why.alias("skip_reason")).with_columns(pl.col("skip_reason").is_null().alias("used"))
    used_r = df.filter(pl.col("used"))["r_env"].to_list()
    weights = iter(normalized_weights(used_r, lam=lam))
    w = [next(weights) if u else 0.0 for u in df["used"].to_list()]
    records = df.with_columns(pl.Series("weight", w, dtype=pl.Float64)).with_columns(
        (pl.col("weight") * len(used_r)).alias("weight_rel")).select(
        "epoch", "task_id", "batch_id", "r_env", "weight", "weight_rel", "used", "skip_reason")
    want = records.filter(pl.col("used")).select("epoch", "task_id", "weight_rel")
    pairs = (pl.concat([scan_parquet(p).select("epoch", "task_id", "prompt", "output") for p in paths])
             .join(want.lazy(), on=["epoch", "task_id"], how="inner", maintain_order="right").collect())
    return pairs.to_dicts(), records


def _update(cfg: Config, epoch: int, out: Staging, ui: UI) -> None:
    from genenv_cli.launch import rank0_loads, trainer_sharding
    from genenv_cli.training.common import (
        load_policy,
        publish_update,
        train_policy,
        world,
    )
    from genenv_cli.training.rwr import KLCapReached, make_trainer

    u = cfg.env_update

    paths = [p for n, p in sorted(out.plan.inputs.items()) if n.startswith("pool_")]
    for p in paths:
        check_parquet(p, "env_sft")
    with reading(paths, f"update-env epoch {epoch}"):
        used, records = select_pairs(paths, cfg.curriculum.lam)
    name, tag = out.plan.models["env"]
    _, size = world()
    ui.info(f"update-env epoch {epoch}: {len(used)} of {records.height} generations from epochs "
            f"{window_epochs(epoch, u.window)} pass the filter; training {tag}")
    policy = load_policy(name, tag, base_name=cfg.env.model, train=u, need_reference=True, device=cfg.run.device,
                         dtype=cfg.run.dtype, trust_remote_code=cfg.run.trust_remote_code, seed=cfg.run.seed + epoch,
                         rank0_loads=rank0_loads(cfg))
    tok = policy.tokenizer
    rows = []
    for r in used:
        messages = json.loads(r["prompt"])
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        target_ids = tok(r["output"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append({"prompt_ids": prompt_ids, "target_ids": target_ids, "weight_rel": r["weight_rel"]})
    steps: list[dict[str, Any]] = []
    stopped = None
    trainer = None
    if rows:
        trainer, logged, cap = train_policy(
            policy, u, lambda args: make_trainer(policy, args, rows, kl_coef=u.kl_coef, kl_max=u.kl_max),
            seed=cfg.run.seed + epoch, device=cfg.run.device, dtype=cfg.run.dtype, ui=ui, desc=f"update-env e{epoch}",
            stop_on=(KLCapReached,), sharding=trainer_sharding(cfg), timeout=cfg.run.dist_timeout)
        if cap is not None:
            stopped = trainer.stopped
            ui.info(f"update-env epoch {epoch}: stopped at step {stopped['step']}: {cap}")
        for s in trainer.step_stats:
            lg = logged.get(s["step"], {})
            steps.append({"step": s["step"], "loss": s["loss"], "nll": s["nll"], "kl": s["kl"], "applied": True,
                          "stopped_by_kl": False, "grad_norm": lg.get("grad_norm"),
                          "learning_rate": lg.get("learning_rate")})
        if stopped is not None:
            steps.append({"step": stopped["step"], "loss": stopped["loss"], "nll": stopped["nll"],
                          "kl": stopped["kl"], "applied": False, "stopped_by_kl": True, "grad_norm": None,
                          "learning_rate": None})
    digest = publish_update(policy, out, role="env", epoch=epoch, trained_from=tag, records=records, steps=steps,
                            ui=ui, trainer=trainer, train=u)
    applied = [s for s in steps if s["applied"]]
    out.counts.update({"samples_used": len(used), "pairs_seen": records.height, "steps": len(applied),
                       "world_size": size})
    out.metrics.update({
        "loss_mean": round(sum(s["loss"] for s in applied) / len(applied), 6) if applied else None,
        "kl_final": round(steps[-1]["kl"], 6) if steps else None,
        "kl_stopped": stopped is not None,
        "stopped_at_step": stopped["step"] if stopped else None,
        "parameter_digest": digest,
    })
