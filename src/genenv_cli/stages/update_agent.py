"""update-agent: GRPO on the epoch's scored rollouts, with no regeneration.

    genenv update-agent --epoch 3
    accelerate launch --config_file pipelines/accelerate/fsdp-full-shard.yaml -m genenv_cli update-agent --epoch 3

Reads `pools/agent_train/epoch=NNNN.parquet` (the K samples per task that `rollout` generated and `score`
graded), computes group-relative advantages, skips (and counts) groups whose rewards are all equal, and
trains epoch N-1's agent with the clipped policy-gradient loss, an optional KL to the epoch-0 policy, several
passes, gradient clipping and a learning-rate schedule, as a LoRA adapter or full weights.
`agent_update.replay_epochs` > 0 adds earlier epochs' valid traces with a truncated importance ratio. The old
policy is the trainer's own forward pass on the model before the update, and the sampler's recorded logprobs
enter through a truncated importance weight (training/grpo.py says how); the gap between the two is recorded
per sample and per epoch. Writes `epochs/N/agent/` (the checkpoint epoch N+1's rollout loads),
`agent_update.parquet` (per sample) and `agent_update_steps.parquet` (the training curve). With
`agent.mode = "frozen"` the agent is never trained: the stage completes with nothing to do and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.ui import UI, num
from genenv_cli.machinery.checkpoints import AGENT_STAGE, agent_model_for, agent_trained
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StagePlan, StageResult, Staging
from genenv_cli.rundir.datafiles import check_parquet, reading, refuse_non_finite, scan_parquet
from genenv_cli.rundir.episode_rows import check_episode_rows
from genenv_cli.stages.update_run import UpdateStage, run_update

STAGE = AGENT_STAGE
CONFIG_SECTIONS = ["run.seed", "agent", "agent_update"]


def plan(run_dir: RunDir, cfg: Config, epoch: int) -> StagePlan:
    p = StagePlan(STAGE, epoch, config_sections=CONFIG_SECTIONS)
    if not agent_trained(cfg):
        p.values["agent_mode"] = cfg.agent.mode
        return p
    p.requires.append((epoch, "score"))
    p.inputs["pool"] = run_dir.pool_partition("agent_train", epoch)
    name, tag, manifest = agent_model_for(run_dir, cfg, epoch, STAGE)
    p.models["agent"] = (name, tag)
    p.values["agent_model"] = tag
    if manifest is not None:
        p.inputs["agent_checkpoint"] = manifest
    for e in range(max(1, epoch - cfg.agent_update.replay_epochs), epoch):
        if cfg.agent_update.replay_epochs:
            p.inputs[f"replay_{e:04d}"] = run_dir.pool_partition("agent_train", e)
    p.outputs = {"agent": run_dir.checkpoint_dir(epoch, "agent"), "agent_update": run_dir.file("agent_update", epoch),
                 "agent_update_steps": run_dir.file("agent_update_steps", epoch)}
    return p


def summary(counts: dict[str, Any], metrics: dict[str, Any]) -> str:
    return (f"{counts.get('samples_used', 0)} samples in {counts.get('groups_used', 0)} groups "
            f"({counts.get('groups_skipped', 0)} all-equal groups skipped), {counts.get('steps', 0)} steps, "
            f"train reward {num(metrics.get('train_reward'))}")


def run(run_dir: RunDir, cfg: Config, epoch: int, *, force: bool = False, ui: UI | None = None) -> StageResult:
    stage = UpdateStage(STAGE, "agent_update", cfg.agent.model, agent_trained(cfg), f"agent.mode = {cfg.agent.mode}",
                        "the agent", "", lambda: plan(run_dir, cfg, epoch), _update)
    return run_update(run_dir, cfg, epoch, stage, force=force, ui=ui or UI(quiet=True))


def select_samples(pool: Path, replay: list[Path], temperature: float | None = None) -> tuple[list[dict], Any]:
    """(training rows, per-sample records frame) from the epoch's pool partition and the replayed ones.

    Two passes over the Parquet files: the cheap columns of every row decide advantages and skips (a group's
    statistics need all its rows), then only the rows used are read with their token lists, so memory follows
    what is trained on, not the history replayed."""
    import polars as pl

    from genenv_cli.machinery.training.grpo import group_advantages

    cheap = ["epoch", "rollout_id", "task_id", "group_id", "sample_index", "reward", "valid", "temperature"]
    parts = [scan_parquet(pool).select(*cheap, pl.col("completion_token_ids").list.len().alias("_n"),
                                         pl.lit(False).alias("replay"))]
    parts += [scan_parquet(p).select(*cheap, pl.col("completion_token_ids").list.len().alias("_n"),
                                        pl.lit(True).alias("replay")) for p in replay]
    df = pl.concat(parts).collect()
    adv, why = group_advantages(df["reward"].to_list(),
                                (df["epoch"].cast(pl.String) + "/" + df["group_id"]).to_list())
    for i, (n, t) in enumerate(zip(df["_n"].to_list(), df["temperature"].to_list(), strict=True)):
        if why[i] is None and n == 0:
            why[i] = "empty completion"
        elif why[i] is None and temperature is not None and t != temperature:
            why[i] = "other temperature"
    used = [w is None for w in why]
    records = (df.with_columns(pl.Series("advantage", [a if u else None for a, u in zip(adv, used, strict=True)],
                                         dtype=pl.Float64),
                               pl.Series("used", used, dtype=pl.Boolean),
                               pl.Series("skip_reason", why, dtype=pl.String))
               .filter(~pl.col("replay") | pl.col("valid"))  # only valid traces are replayed
               .select("epoch", "rollout_id", "task_id", "group_id", "sample_index", "reward", "advantage", "used",
                       "skip_reason", "replay"))
    chosen = records.filter(pl.col("used")).select("epoch", "rollout_id", "advantage", "replay")
    rows = []
    for path, is_replay in [(pool, False)] + [(p, True) for p in replay]:
        want = chosen.filter(pl.col("replay") == is_replay)
        if want.height == 0:
            continue
        scan = scan_parquet(path)
        # an episode's mask of the agent's tokens: absent from pools of single-turn rollouts
        mask = ["agent_mask"] if "agent_mask" in scan.collect_schema().names() else []
        got = (scan.select("epoch", "rollout_id", "prompt_token_ids", "completion_token_ids", "logprobs", *mask)
               .join(want.lazy(), on=["epoch", "rollout_id"], how="inner", maintain_order="left").collect())
        for d in got.iter_rows(named=True):
            row = {"prompt_ids": d["prompt_token_ids"], "completion_ids": d["completion_token_ids"],
                   "sampler_logps": d["logprobs"], "advantage": d["advantage"], "replay": d["replay"],
                   "epoch": d["epoch"], "rollout_id": d["rollout_id"]}
            if d.get("agent_mask") is not None:
                row["agent_mask"] = d["agent_mask"]
            rows.append(row)
    return rows, records


def _check_masks(path: Path) -> None:
    """The episodes' masks in a pool are 0/1 and as long as their tokens (a mask of 5 would weight a token's loss
    five times), whatever its manifest vouches for; a pool of single-turn rollouts has none."""
    import polars as pl

    with reading([path], "update-agent"):
        scan = scan_parquet(path)
        if "agent_mask" not in scan.collect_schema().names():
            return
        episodes = (scan.filter(pl.col("agent_mask").is_not_null())
                    .select("agent_mask", "completion_token_ids").collect())
    check_episode_rows(episodes, str(path))


def _read(cfg: Config, epoch: int, out: Staging, ui: UI) -> tuple[list[dict], Any, float, int, dict[str, int]]:
    """(training rows, per-sample records, the sampling temperature, groups used, groups skipped by reason) from the
    epoch's pool and the replayed ones, each checked first."""
    import polars as pl

    pool_path = out.plan.inputs["pool"]
    replay_paths = [p for n, p in sorted(out.plan.inputs.items()) if n.startswith("replay_")]
    for p in [pool_path, *replay_paths]:
        check_parquet(p, "agent_train")  # schema, before anything heavy
        refuse_non_finite(p, "agent_train", f"update-agent --epoch {epoch}")
        _check_masks(p)
    with reading([pool_path, *replay_paths], f"update-agent epoch {epoch}"):
        temps = scan_parquet(pool_path).select("temperature").head(1).collect()["temperature"]
        temperature = float(temps[0]) if len(temps) else cfg.rollout.temperature
        rows, records = select_samples(pool_path, replay_paths, temperature)
    groups_used = records.filter(pl.col("used")).select("epoch", "group_id").n_unique()
    skipped = records.filter(pl.col("skip_reason").is_not_null())
    skipped_by_reason = {r["skip_reason"]: r["n"] for r in skipped.group_by("skip_reason")
                         .agg(pl.struct("epoch", "group_id").n_unique().alias("n")).iter_rows(named=True)}
    if not groups_used and skipped_by_reason.get("all-equal group"):
        from genenv_cli.catalogue.advice import all_equal_advice
        from genenv_cli.catalogue.domains import run_domains

        ui.warn(f"update-agent epoch {epoch}: " + all_equal_advice(
            cfg, [n for n, d in run_domains(cfg).items() if d.episodic]))
    return rows, records, temperature, groups_used, skipped_by_reason


def _train(policy: Any, cfg: Config, epoch: int, rows: list[dict], temperature: float,
           ui: UI) -> tuple[Any, list[dict[str, Any]]]:
    """(the trainer or None when there is nothing to train on, the rows of agent_update_steps)."""
    from genenv_cli.machinery.launch import trainer_sharding
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.training_loop import train_policy

    if not rows:
        return None, []
    u = cfg.agent_update
    config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=u.kl_coef, loss_type=u.loss_type, temperature=temperature,
                        replay_clip=u.replay_clip, is_cap=u.is_cap)
    trainer, logged, _ = train_policy(
        policy, u, lambda args: GRPOTrainer(policy, args, rows, config),
        seed=cfg.run.seed + epoch, device=cfg.run.device, dtype=cfg.run.dtype, ui=ui, desc=f"update-agent e{epoch}",
        sharding=trainer_sharding(cfg), timeout=cfg.run.dist_timeout)
    steps = []
    for s in trainer.step_stats:
        lg = logged.get(s["step"], {})
        steps.append({"step": s["step"], "pass": float(s["pass"] or 0.0), "loss": s["loss"],
                      "policy_loss": s["policy_loss"], "kl": s["kl"], "clip_frac": s["clip_frac"],
                      "ratio_mean": s["ratio_mean"], "ratio_dev_max": s["ratio_dev_max"],
                      "is_weight_mean": s["is_weight_mean"], "is_truncated": s["is_truncated"],
                      "grad_norm": lg.get("grad_norm"),
                      "learning_rate": lg.get("learning_rate"), "tokens": s["tokens"]})
    return trainer, steps


def _update(cfg: Config, epoch: int, out: Staging, ui: UI) -> None:
    import polars as pl

    from genenv_cli.machinery.training.distributed import world
    from genenv_cli.machinery.training.grpo import mismatch_records
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.machinery.training.publishing import publish_update

    u = cfg.agent_update
    rows, records, temperature, groups_used, skipped_by_reason = _read(cfg, epoch, out, ui)
    name, tag = out.plan.models["agent"]
    rank, size = world()
    ui.info(f"update-agent epoch {epoch}: {len(rows)} samples in {groups_used} groups from {tag}"
            + (f" (rank {rank} of {size})" if size > 1 else ""))
    with ui.working(f"update-agent e{epoch}: loading {tag}"):
        policy = load_policy(name, tag, base_name=cfg.agent.model, train=u, need_reference=u.kl_coef > 0,
                             device=cfg.run.device, dtype=cfg.run.dtype, trust_remote_code=cfg.run.trust_remote_code,
                             seed=cfg.run.seed + epoch)
    trainer, steps = _train(policy, cfg, epoch, rows, temperature, ui)
    old_logps = trainer.old_policy_logps() if trainer is not None else None
    records, mismatch = mismatch_records(records, rows, old_logps, u.is_cap, key="rollout_id")
    loss_mean = sum(s["loss"] for s in steps) / len(steps) if steps else None   # each step's: every rank's alike
    digest = publish_update(policy, out, role="agent", epoch=epoch, trained_from=tag, records=records, steps=steps,
                            ui=ui, trainer=trainer, train=u)
    on_policy = records.filter(~pl.col("replay"))["reward"]
    out.counts.update({"samples_used": len(rows), "groups_used": groups_used,
                       "groups_skipped": sum(skipped_by_reason.values()), "skipped_by_reason": skipped_by_reason,
                       "replayed": records.filter(pl.col("replay") & pl.col("used")).height, "steps": len(steps),
                       "world_size": size})
    out.metrics.update({
        "train_reward": round(float(on_policy.mean()), 4) if len(on_policy) else None,
        "loss_mean": round(loss_mean, 6) if loss_mean is not None else None,
        "kl_mean": round(sum(s["kl"] for s in steps) / len(steps), 6) if steps else None,
        "clip_frac_mean": round(sum(s["clip_frac"] for s in steps) / len(steps), 4) if steps else None,
        "parameter_digest": digest,
        **mismatch,
    })
