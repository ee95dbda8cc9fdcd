"""The environment-only experiment: with the agent held still, does the trained environment aim its tasks at it?

    python -m experiments.env_only                          # 3 arms x 3 seeds x 10 epochs, arith
    python -m experiments.env_only --jobs 2                 # the same runs in two single-threaded processes
    python -m experiments.env_only --report-only            # tables and compare page from what is finished

The curriculum experiment (curriculum.py) found the environment's batches mostly below the difficulty band and no
curriculum effect, but its agent changes every epoch, so "the environment does not learn to aim" and "it cannot
follow a moving target" were tangled. Here the agent is never updated (`agent.mode = "frozen"`), so its success
on each task shape is fixed and aiming has one right answer. Arms (same prompts, model, rollout budget and
environment training as the curriculum experiment's headline arms; only what is trained differs):
  env-only         the environment is trained under the paper's filter (k_min 0.1)
  env-only-kmin0.2 the same with the wider filter (k_min 0.2), the curriculum experiment's departure arm
  env-only-frozen  neither model is trained: what sampling noise alone does to the numbers below
Departure arms (run only when named in --arms; reported beside the rest, never as the headline):
  env-only-lr1e-3  env-only with the environment's learning rate 10x (1e-3): its update trains on a few samples,
                   two optimizer steps an epoch, and moved its KL by about 0.01 at 1e-4
  env-only-var2    env-only with 2 variations per batch instead of 4 (more, smaller batches, same rollouts)
  env-only-frozen-var2  env-only-frozen with 2 variations per batch: env-only-var2's baseline (smaller batches
                   alone spread p̂ wider, which can move the in-band share without any training)
The environment learning from every generation (run only when named; each against env-only-frozen):
  env-only-grpo    the environment learns by GRPO over every generation of the epoch (env_update.algo = "grpo"):
                   each generation's reward is exp(-β (p̂_task - α)²) from its own task's K rollouts, or 0 when it
                   became no task (unparseable, invalid, a duplicate), compared with the other generations of its
                   batch; the paper's update learns only from the valid generations of the 1-3 batches the filter
                   keeps, and never from the rest
  env-only-rwr-task  the second departure, which tells "a reward per task" apart from "learning from what failed":
                   reward-weighted regression on every valid generation of the epoch (env_update.algo =
                   "rwr-task", env_update.window = 1: the same generations GRPO sees), each weighted exp(λ R) by its own
                   task's reward, with λ = 10. It has GRPO's per-task rewards and data but never pushes a generation
                   down. Why λ = 10: at the paper's λ = 1 the weights of a task at p̂ = α (R = 1) and one at p̂ = 0
                   (R = exp(-0.5) = 0.61) differ by e^0.39 = 1.5x, so RWR would be fine-tuning on every valid task. In the recorded env-only-frozen runs the batches average p̂ 0.18, a quarter of
                   them at 0 and 8% in the band, so most valid tasks sit far below α. At λ = 10 a task at α weighs
                   51x one at p̂ = 0 and 3.2x one at p̂ = 0.25: the few tasks near α carry most of the weight, as
                   they carry GRPO's positive advantages
  env-only-uncertainty  R-Zero's challenger reward (curriculum.env_reward = "uncertainty": 1 - 2|p̂ - α|, a
                   generation that became no task earning what p̂ = 0 or 1 earns, so validity alone is worth nothing),
                   learnt by GRPO, a duplicate left out of its group (curriculum.duplicate_reward = "neutral": the
                   one-digit frontier shapes have about 100 exercises each, most taken by the seeds), at the update
                   the positive control moved (env_control.py: learning rate 1e-3, one pass); K = 8, as the
                   env-only-frozen it is compared with
Per epoch, mean and 95% interval over seeds of: the in-band share of the environment's batches, the mean
|p̂_batch - α| of its batches, batches kept by the filter, the environment's KL, the samples it trained on and
their total weight, its loss, and the share of its tasks whose shape the frozen agent solves 25-75% of the time
(its base held-out success per shape: the frontier, which does not move here). The claim tested: env-only's
in-band share and |p̂ - α| improve over env-only-frozen's by more than the seed spread (paired by seed; the 95%
interval of the difference, over epochs 2..N, excludes zero).

Runs live under --work (default .env-only-runs/), resumable; every finished run is kept as a record under
results/env_only/env_only-arith/runs/, and the result as env_only-arith.json and .md beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lab import arms, runs
from lab.record import git_commit, machine, versions

from experiments import curriculum as cur
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_parquet
from genenv_cli.views.report.compare import RunData, arm_mode, flat_settings, read_run

RESULTS = Path(__file__).parent / "results" / "env_only"
TABLE = Path(__file__).parent / "results" / "env_control" / "shape_table-arith.json"  # shape_table.py's
ARMS = arms.ENV_ONLY
# The untrained baseline each trained arm is paired with: the one with the same batches. A batch's p̂ is the mean of
# variations x group_size rollouts, so halving the variations widens the spread of p̂ and can move the in-band share
# and |p̂ - α| with no training at all (batch_size_effect measures it); env-only-var2 against env-only-frozen would
# mix that into what it reports as aiming.
BASELINE = arms.ENV_ONLY_BASELINE
HEADLINE = ["env-only", "env-only-kmin0.2", "env-only-frozen"]
DEPARTURES = [a for a in ARMS if a not in HEADLINE]
ALPHA = 0.5
COMMIT_FILE = "env-only-commit"  # in each run folder: the commit it was started on
TIMINGS = "env-only-timings.json"  # in each run folder: the seconds of each epoch
MOVEMENT = ["kept_logp_change", "rest_logp_change", "kept_minus_rest"]
SIGNAL = ["validity_share", "adv_valid_in_band", "adv_valid_off_band", "adv_invalid", "in_band_of_valid"]
FRONTIER = cur.FRONTIER
KEYS = ["env_batch_band_share", "env_batch_gap", "env_batches", "env_batches_kept", "env_kl", "env_loss",
        "env_samples_used", "env_weight_total", "env_frontier_share", "valid_generation_rate", "batch_p_mean",
        "env_groups", "env_groups_informative_share", "env_reward_valid", "env_reward_invalid",
        "table_frontier_share", "table_gap"]


def base_shape_success(run: RunDir) -> dict[str, float]:
    """The frozen agent's held-out success per shape (0-1), from the base model's evaluation."""
    for _, data in run.read_evals("heldout"):
        if data.get("epoch") is None and not (data.get("config") or {}).get("limit"):
            cats = (data.get("summary") or {}).get("categories") or {}
            return {k: v["success_rate"] / 100.0 for k, v in cats.items()}
    raise FileNotFoundError(f"{run.evals_dir('heldout')}: no base held-out evaluation")


def env_update_numbers(run: RunDir, epoch: int) -> dict[str, Any]:
    """What the environment trained on this epoch: the samples (its window: every epoch's kept generations so far,
    under rwr) and their total RWR weight, the sum of exp(λ R) before normalisation (0 when it did not train; None
    under grpo, which weights by advantages)."""
    import math

    import polars as pl

    path = run.file("env_update", epoch)
    if not path.exists():
        return {"env_samples_used": 0, "env_weight_total": 0.0}
    used = read_parquet(path, "env_update").filter(pl.col("used"))
    cfg = run.load_config()
    if cfg.env_update.algo == "grpo":
        return {"env_samples_used": used.height, "env_weight_total": None}
    total = sum(math.exp(cfg.curriculum.lam * r) for r in used["r_env"].to_list())
    return {"env_samples_used": used.height, "env_weight_total": round(total, 3)}


def validity_share(rewards: list[float], valid: list[bool], groups: list[str]) -> float | None:
    """The share of the within-group sum of squares of `rewards` that lies between each group's valid and invalid
    members (None when no group has any spread): 1 when every valid generation of a group earns the same, 0 when
    the valid and invalid ones earn the same on average."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    between = total = 0.0
    for idx in members.values():
        mean = sum(rewards[i] for i in idx) / len(idx)
        total += sum((rewards[i] - mean) ** 2 for i in idx)
        for cls in (True, False):
            part = [rewards[i] for i in idx if valid[i] == cls]
            if part:
                between += len(part) * (sum(part) / len(part) - mean) ** 2
    return between / total if total else None


def advantage_sources(run: RunDir, epoch: int) -> dict[str, Any] | None:
    """Where a group-relative update's signal comes from, from the epoch's per-generation rewards (pools/env_gen;
    None for epochs without it). Within each task batch (a group), the spread of rewards splits into the part
    between valid and invalid generations and the part among the valid ones (which alone says how near α a task
    is): `validity_share` is the first over the whole, pooled over the epoch's groups. Then the mean group-relative
    advantage (`grpo.group_advantages`, as the update computes it) of valid generations whose task is in the band,
    of valid ones outside it, and of invalid ones."""
    import polars as pl

    from genenv_cli.machinery.training.grpo import group_advantages

    path = run.pool_partition("env_gen", epoch)
    if not path.exists():
        return None
    gen = read_parquet(path, "env_gen")
    cfg = run.load_config().curriculum
    gen = gen.filter(pl.col("reward").is_not_null())  # no reward (a neutral duplicate): out of its group, as in the update
    rewards, groups = gen["reward"].to_list(), gen["batch_id"].to_list()
    adv, _ = group_advantages(rewards, groups)
    gen = gen.with_columns(pl.Series("adv", adv, dtype=pl.Float64))
    band = pl.col("valid") & pl.col("p_task").is_between(cfg.band_low, cfg.band_high)

    def mean_adv(expr: Any) -> float | None:
        v = gen.filter(expr & pl.col("adv").is_not_null())["adv"]
        return round(float(v.mean()), 4) if len(v) else None

    share = validity_share(rewards, gen["valid"].to_list(), groups)
    return {"validity_share": round(share, 4) if share is not None else None,
            "adv_valid_in_band": mean_adv(band), "adv_valid_off_band": mean_adv(pl.col("valid") & ~band),
            "adv_invalid": mean_adv(~pl.col("valid")),
            "in_band_of_valid": round(gen.filter(band).height / max(1, gen.filter(pl.col("valid")).height), 4)}


def row(run: RunDir, epoch: int, frontier: dict[str, float], timings: dict[str, Any]) -> dict[str, Any]:
    metrics = run.read_metrics_file(epoch) or {}
    batch_p = cur.env_batch_p(run, epoch)
    mix = metrics.get("env_shape_mix") or {}
    near = {s for s, p in frontier.items() if FRONTIER[0] <= p <= FRONTIER[1]}
    return {"epoch": epoch, **{k: metrics.get(k) for k in KEYS if k in metrics},
            "env_batch_gap": round(sum(abs(p - ALPHA) for p in batch_p) / len(batch_p), 4) if batch_p else None,
            "env_frontier_share": round(sum(v for s, v in mix.items() if s in near), 4) if mix else None,
            **env_update_numbers(run, epoch), "signal": advantage_sources(run, epoch),
            "env_shape_mix": mix, "env_batch_p": batch_p,
            "shape_p": {k: v.get("p") for k, v in (metrics.get("shape_success") or {}).items()},
            "shape_success_by_source": metrics.get("shape_success_by_source"),  # seed and env tasks apart
            "seconds": timings.get(str(epoch))}


def with_table_aim(per_run: dict[str, dict[int, dict[str, Any]]], table_path: Path) -> None:
    """The primary measures of aim from the measured shape table (shape_table.py), added to every row from its shape
    mix: the frontier share of the environment's tasks and their mean |p_shape - α|. Recomputed at every report,
    so records made before the table have them too; absent when the table is."""
    if not table_path.is_file():
        return
    from experiments.aim_measures import aim
    from experiments.shape_table import load_table

    table = load_table(table_path)
    for by_seed in per_run.values():
        for r in by_seed.values():
            for x in r["rows"]:
                front, gap = aim(x.get("env_shape_mix") or {}, table)
                x["table_frontier_share"] = round(front, 4) if front is not None else None
                x["table_gap"] = round(gap, 4) if gap is not None else None


def run_one(args: argparse.Namespace, arm: str, seed: int, ui: UI) -> dict[str, Any]:
    run = runs.make_run(args.work / f"{args.domain}-{arm}-s{seed}", args.domain, ARMS[arm], seed, args.model,
                        args.sets)
    marker = run.root / COMMIT_FILE
    if not marker.exists():  # the code the run starts on, not whatever is checked out when it is recorded
        marker.write_text(git_commit() + "\n")
    runs.heldout(run, None, ui)  # the frozen agent's per-shape success: the target
    frontier = base_shape_success(run)
    rows = []
    for epoch, _, timings in runs.run_epochs(run, args.epochs, ui, TIMINGS, evaluate_after=False):
        rows.append(row(run, epoch, frontier, timings))
        r = rows[-1]
        ui.info(f"{run.root.name} epoch {epoch}: env batches in band {r.get('env_batch_band_share')}, "
                f"|p-alpha| {r.get('env_batch_gap')}, kept {r.get('env_batches_kept')}")
    return {"rows": rows, "frontier": frontier, "commit": marker.read_text().strip()}


def settings(args: argparse.Namespace, arm: str) -> list[str]:
    return [f"model={args.model}", f"domain={args.domain}", f"epochs={args.epochs}", *arms.COMMON, *args.sets,
            *ARMS[arm]]


def record_path(out_dir: Path, domain: str, arm: str, seed: int) -> Path:
    return out_dir / f"env_only-{domain}" / "runs" / f"{arm}-s{seed}.json"


def save(path: Path, args: argparse.Namespace, arm: str, seed: int, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"arm": arm, "seed": seed, "settings": settings(args, arm), "commit": result.get("commit"),
            "date": time.strftime("%Y-%m-%d"), "machine": machine(), "frontier": result["frontier"],
            "rows": result["rows"]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def load(path: Path, args: argparse.Namespace, arm: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.get("settings") != settings(args, arm) or len(data.get("rows", [])) != args.epochs:
        return None
    return {**data, "from_record": True}


def done_on_disk(args: argparse.Namespace, arm: str, seed: int) -> dict[str, Any] | None:
    """A run finished under --work, read back without running anything."""
    run = RunDir(args.work / f"{args.domain}-{arm}-s{seed}")
    if not run.config_path.exists():
        return None
    if any(not run.metrics_path(e).exists() or not run.manifest_path(e, "update-env").exists()
           for e in range(1, args.epochs + 1)):
        return None
    try:
        frontier = base_shape_success(run)
    except FileNotFoundError:
        return None
    timings = runs.read_timings(run, TIMINGS)
    old = load(record_path(args.out, args.domain, arm, seed), args, arm) or {}
    moved = {x["epoch"]: x["movement"] for x in old.get("rows", []) if "movement" in x}  # measured by --signal
    rows = [row(run, e, frontier, timings) for e in range(1, args.epochs + 1)]
    for x in rows:
        if x["epoch"] in moved:
            x["movement"] = moved[x["epoch"]]
    marker = run.root / COMMIT_FILE
    commit = marker.read_text().strip() if marker.exists() else old.get("commit") or git_commit()
    return {"rows": rows, "frontier": frontier, "commit": commit}


def update_movement(run: RunDir, epoch: int) -> dict[str, Any] | None:
    """How far epoch `epoch`'s environment update moved the log-probability of what it was trained towards: the
    mean per-token logprob of the epoch's kept generations (the filter's pairs, its RWR targets) under the
    environment after the update minus before it, against the same for the epoch's other generations (the ones
    the filter dropped). An update that aims raises the first more than the second. None when nothing was kept or
    the environment did not train."""
    import json as _json

    import polars as pl
    import torch

    from genenv_cli.machinery.models import load_model, load_tokenizer, resolve
    from genenv_cli.machinery.training.logits import pad_pairs, token_logps

    after = run.checkpoint_dir(epoch, "env")
    pool = run.pool_partition("env_sft", epoch)
    if not after.is_dir() or not pool.exists():
        return None
    frame = pl.read_parquet(pool)
    if frame.filter(pl.col("kept")).height == 0 or frame.filter(~pl.col("kept")).height == 0:
        return None
    cfg = run.load_config()
    before = str(run.checkpoint_dir(epoch - 1, "env")) if epoch > 1 else cfg.env.model
    tok = load_tokenizer(resolve(cfg.env.model))

    def encode(rows: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
        prompts = [tok(tok.apply_chat_template(_json.loads(r["prompt"]), tokenize=False, add_generation_prompt=True),
                       add_special_tokens=False)["input_ids"] for r in rows]
        targets = [tok(r["output"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for r in rows]
        return pad_pairs(prompts, targets, tok.pad_token_id)

    groups = {name: encode(frame.filter(pl.col("kept") == keep).to_dicts()) for name, keep in
              (("kept", True), ("rest", False))}
    means: dict[str, dict[str, float]] = {}
    for label, name in (("before", before), ("after", str(after))):
        model = load_model(resolve(name), device="cpu", dtype="float32")
        model.eval()
        means[label] = {}
        with torch.no_grad():
            for g, (ids, attn, tmask) in groups.items():
                lp = token_logps(model, ids, attn, tmask.shape[1])
                means[label][g] = float((lp * tmask).sum() / tmask.sum())
        del model
    kept = means["after"]["kept"] - means["before"]["kept"]
    rest = means["after"]["rest"] - means["before"]["rest"]
    return {"kept_logp_change": round(kept, 5), "rest_logp_change": round(rest, 5),
            "kept_minus_rest": round(kept - rest, 5), "kept": groups["kept"][0].shape[0],
            "rest": groups["rest"][0].shape[0]}


# --- the analysis -------------------------------------------------------------------------------------------------

def aggregate(per_run: dict[str, dict[int, dict[str, Any]]], epochs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm, by_seed in per_run.items():
        rows = []
        for e in range(epochs):
            vals = [r["rows"][e] for r in by_seed.values() if len(r["rows"]) > e]
            agg: dict[str, Any] = {"epoch": e + 1, "seeds": len(vals)}
            for k in [*KEYS, "seconds"]:
                agg[k] = cur.interval([v.get(k) for v in vals])
            for k in MOVEMENT:
                agg[k] = cur.interval([(v.get("movement") or {}).get(k) for v in vals])
            for k in SIGNAL:
                agg[k] = cur.interval([(v.get("signal") or {}).get(k) for v in vals])
            shapes = sorted({s for v in vals for s in v["env_shape_mix"]})
            agg["env_shape_mix"] = {s: round(sum(v["env_shape_mix"].get(s, 0.0) for v in vals) / len(vals), 4)
                                    for s in shapes}
            rows.append(agg)
        out[arm] = {"epochs": rows}
    return out


def mean_over(key: str, first: int = 2) -> Any:
    """run -> the mean of a row key over epochs first..N."""
    def f(r: dict[str, Any]) -> float | None:
        vals = [x.get(key) for x in r["rows"][first - 1:] if x.get(key) is not None]
        return sum(vals) / len(vals) if vals else None
    return f


def claims(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Each trained arm against its untrained baseline (BASELINE; env-only-frozen unless named), paired by seed, over
    epochs 2..N (the epochs a trained environment could differ in) and at the last epoch: in-band share (higher is
    better) and |p̂ - α| (lower is better). An arm whose baseline has no runs yet has no claim."""
    out: dict[str, Any] = {}
    for arm in [a for a in ARMS if ARMS[a][0] == "env.mode=genenv"]:
        baseline = BASELINE.get(arm, "env-only-frozen")
        base = per_run.get(baseline)
        if arm not in per_run or not base:
            continue
        a = per_run[arm]
        band = cur.paired(a, base, mean_over("env_batch_band_share"))
        gap = cur.paired(a, base, mean_over("env_batch_gap"))
        band_last = cur.paired(a, base, cur.last("env_batch_band_share"))
        gap_last = cur.paired(a, base, cur.last("env_batch_gap"))
        frontier = cur.paired(a, base, mean_over("env_frontier_share"))
        valid = cur.paired(a, base, mean_over("valid_generation_rate"))
        t_front = cur.paired(a, base, mean_over("table_frontier_share"))
        t_gap = cur.paired(a, base, mean_over("table_gap"))
        out[arm] = {"baseline": baseline,
                    "in_band_epochs_2_on": {**band, "holds": cur.excludes_zero(band)},
                    "gap_epochs_2_on": {**gap, "holds": cur.excludes_zero(gap, -1)},
                    "in_band_last_epoch": {**band_last, "holds": cur.excludes_zero(band_last)},
                    "gap_last_epoch": {**gap_last, "holds": cur.excludes_zero(gap_last, -1)},
                    "frontier_share_epochs_2_on": {**frontier, "holds": cur.excludes_zero(frontier)},
                    # the primary measures of aim, from the measured shape table (with_table_aim)
                    "table_frontier_share_epochs_2_on": {**t_front, "holds": cur.excludes_zero(t_front)},
                    "table_gap_epochs_2_on": {**t_gap, "holds": cur.excludes_zero(t_gap, -1)},
                    # not part of the claim: what the update taught instead, where it taught anything
                    "valid_rate_epochs_2_on": {**valid, "holds": cur.excludes_zero(valid)}}
        out[arm]["claim_holds"] = bool(out[arm]["in_band_epochs_2_on"]["holds"]
                                       and out[arm]["gap_epochs_2_on"]["holds"])
    return out


def batch_size_effect(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """What the batches alone do with nothing trained: each named baseline (BASELINE) minus env-only-frozen, paired
    by seed, over epochs 2..N. It tells how much of a departure's difference from env-only-frozen is its batch size
    (which a co-evolution arm of the same batches, compared with the 4-variation frozen arm, carries too)."""
    out: dict[str, Any] = {}
    base = per_run.get("env-only-frozen")
    for other in sorted(set(BASELINE.values())):
        if base and per_run.get(other):
            out[f"{other}_minus_env-only-frozen"] = {
                "in_band_epochs_2_on": cur.paired(per_run[other], base, mean_over("env_batch_band_share")),
                "gap_epochs_2_on": cur.paired(per_run[other], base, mean_over("env_batch_gap")),
                "frontier_share_epochs_2_on": cur.paired(per_run[other], base, mean_over("env_frontier_share"))}
    return out


def _f(m: dict[str, Any] | None, pct: bool = True) -> str:
    """A mean [95% interval]: in percent, or (pct False) to three significant digits (KLs and logprob changes are
    small)."""
    if pct:
        return cur._f(m, pct)
    if not m or m.get("mean") is None:
        return "-"
    if m.get("low") is None:
        return f"{m['mean']:.3g}"
    return f"{m['mean']:.3g} [{m['low']:.3g}, {m['high']:.3g}]"


def markdown(record: dict[str, Any]) -> str:
    lines = [f"# The environment-only experiment ({record['domain']})", "",
             f"{record['date']}, commit {record['commit']}, {record['machine'].get('cpu')} "
             f"({record['machine'].get('cpus')} cores), {record['epochs']} epochs, seeds {record['seeds']}; "
             f"complete: {record['complete']}. The agent is never trained (`agent.mode = frozen`).", "",
             "Per epoch, mean [95% interval] over seeds. in band: share of the environment's batches with p̂ in "
             "[0.4, 0.6]; |p̂-α|: their mean distance from α = 0.5; kept: batches the filter kept (of "
             "`env batches`); frontier: share of its tasks in shapes the frozen agent solves 25-75% of the time "
             "(its greedy held-out success, 30 exercises a shape); table frontier and table gap: the primary measures "
             "of aim, the same share and the tasks' mean |p_shape - α| from the measured shape table "
             "(results/env_control/shape_table-arith.md: sampled success, 100 attempts a shape). In band resolves "
             "p̂_batch in steps of 1/(variations x K): 13-19 successes of 32 at 4 x 8, 7-9 of 16 at 2 x 8.", ""]
    for arm, data in record["arms"].items():
        lines += [f"## {arm}", "", "| epoch | in band | abs(p̂-α) | kept | env KL | env loss | trained on | weight | "
                  "frontier | table frontier | table gap | Δlogp kept - rest | s/epoch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in data["epochs"]:
            lines.append(f"| {r['epoch']} | {_f(r['env_batch_band_share'])} | {_f(r['env_batch_gap'], False)} | "
                         f"{_f(r['env_batches_kept'], False)} | {_f(r['env_kl'], False)} | "
                         f"{_f(r['env_loss'], False)} | {_f(r['env_samples_used'], False)} | "
                         f"{_f(r['env_weight_total'], False)} | {_f(r['env_frontier_share'])} | "
                         f"{_f(r['table_frontier_share'])} | {_f(r['table_gap'], False)} | "
                         f"{_f(r['kept_minus_rest'], False)} | {_f(r['seconds'], False)} |")
        lines.append("")
        if any(r["valid_generation_rate"] and r["valid_generation_rate"].get("mean") is not None
               for r in data["epochs"]):
            lines += ["What its generations were: valid share, informative groups, mean reward of valid and of "
                      "invalid ones, the share of the reward spread within groups that is valid against invalid, and "
                      "the mean advantage of valid in-band, valid off-band and invalid generations.", "",
                      "| epoch | valid | informative | reward valid | reward invalid | validity share | "
                      "adv in band | adv off band | adv invalid |", "|---|---|---|---|---|---|---|---|---|"]
            for r in data["epochs"]:
                lines.append(f"| {r['epoch']} | {_f(r['valid_generation_rate'])} | "
                             f"{_f(r['env_groups_informative_share'])} | {_f(r['env_reward_valid'], False)} | "
                             f"{_f(r['env_reward_invalid'], False)} | {_f(r['validity_share'])} | "
                             f"{_f(r['adv_valid_in_band'], False)} | {_f(r['adv_valid_off_band'], False)} | "
                             f"{_f(r['adv_invalid'], False)} |")
            lines.append("")
    lines += ["## The claim", "", "Paired by seed against the untrained arm with the same batches (env-only-frozen, "
              "or the one named; difference of the per-run means over epochs 2..N, and at the last epoch); it holds "
              "when the 95% interval excludes zero in the good direction.", ""]
    for arm, c in record["claims"].items():
        lines.append(f"- **{arm}** against {c.get('baseline', 'env-only-frozen')}: holds = {c['claim_holds']}")
        for key in ("in_band_epochs_2_on", "gap_epochs_2_on", "in_band_last_epoch", "gap_last_epoch",
                    "frontier_share_epochs_2_on", "table_frontier_share_epochs_2_on", "table_gap_epochs_2_on",
                    "valid_rate_epochs_2_on"):
            if key not in c:  # a record made before the key was reported
                continue
            m = c[key]
            pct = "gap" not in key
            lines.append(f"  - {key}: {_f(m, pct)} (per seed {m.get('per_seed')}; holds {m.get('holds')})")
    for name, c in (record.get("batch_size_effect") or {}).items():
        lines.append(f"- **{name}** (nothing trained; what the smaller batches alone do): "
                     + "; ".join(f"{k} {_f(m, 'gap' not in k)} (per seed {m.get('per_seed')})" for k, m in c.items()))
    if record.get("frontier"):
        frontier = record["frontier"]
        lines += ["", "## Where the environment's tasks go", "",
                  "The frozen agent's held-out success per shape is the target (α = 0.5: the shapes it solves "
                  "25-75% of the time are the frontier). The environment's shape mix, mean over seeds, at the first "
                  "and the last epoch:", "",
                  "| arm | epoch | " + " | ".join(f"{k} ({v:.0%})" for k, v in sorted(frontier.items())) + " |",
                  "|---|---|" + "---|" * len(frontier)]
        for arm, data in record["arms"].items():
            for r in (data["epochs"][0], data["epochs"][-1]) if data["epochs"] else ():
                mix = r["env_shape_mix"]
                lines.append(f"| {arm} | {r['epoch']} | " + " | ".join(f"{mix.get(k, 0.0):.0%}" for k in
                                                                       sorted(frontier)) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def compare_run(args: argparse.Namespace, arm: str, seed: int, result: dict[str, Any]) -> RunData:
    root = args.work / f"{args.domain}-{arm}-s{seed}"
    if not result.get("from_record") and (root / "genenv.toml").is_file():
        data = read_run(root)
        data.label = arm
        return data
    cfg = runs.arm_config(args.domain, ARMS[arm], seed, args.model, args.sets)
    flat = flat_settings(cfg)
    flat.pop("run.seed")
    rows = sorted(result["rows"], key=lambda r: r["epoch"])
    data = RunData(record_path(args.out, args.domain, arm, seed), seed, flat, arm_mode(cfg),
                   {r["epoch"]: {k: r.get(k) for k in (*cur.KEYS, "env_shape_mix")} for r in rows}, label=arm)
    return data


def write(args: argparse.Namespace, per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    done = {arm: sorted(by_seed) for arm, by_seed in per_run.items()}
    frontier = next((r["frontier"] for by_seed in per_run.values() for r in by_seed.values()), None)
    record = {"experiment": "env-only", "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
              "domain": args.domain, "epochs": args.epochs, "seeds": args.seeds,
              "complete": all(done.get(a) == sorted(args.seeds) for a in HEADLINE), "runs_done": done,
              "arms_settings": ARMS, "settings": arms.COMMON + args.sets, "machine": machine(), "versions": versions(),
              "run_commits": sorted({r["commit"] for b in per_run.values() for r in b.values() if r.get("commit")}),
              "frontier": frontier, "arms": aggregate(per_run, args.epochs), "claims": claims(per_run),
              "batch_size_effect": batch_size_effect(per_run),
              "per_run": {arm: {str(s): r["rows"] for s, r in b.items()} for arm, b in per_run.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"env_only-{args.domain}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(record))
    return record


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--arms", nargs="+", default=HEADLINE, choices=list(ARMS),
                    help=f"arms to run (default {' '.join(HEADLINE)}; departures: {' '.join(DEPARTURES)})")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--work", type=Path, default=Path(".env-only-runs"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=1,
                    help="run the runs in this many processes of one thread each (2 finish sooner on 2 cores)")
    ap.add_argument("--only", action="append", default=None, metavar="ARM:SEED", help=argparse.SUPPRESS)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--signal", action="store_true",
                    help="also measure how far each update moved the kept generations' logprobs against the rest "
                         "(loads two environment models per epoch of the trained arms; recorded in the runs' rows)")
    args = ap.parse_args(argv)
    ui = UI(quiet=args.quiet)
    todo = [(arm, seed) for seed in args.seeds for arm in args.arms]
    if args.only:  # a worker of --jobs: its share, one run after another, and no result
        for item in args.only:
            arm, seed = item.rsplit(":", 1)
            if done_on_disk(args, arm, int(seed)) is None:
                run_one(args, arm, int(seed), ui)
        return {}
    pending = [(arm, seed) for arm, seed in todo if done_on_disk(args, arm, seed) is None
               and load(record_path(args.out, args.domain, arm, seed), args, arm) is None]
    if pending and not args.report_only:
        if args.jobs > 1:
            common = [sys.executable, "-m", "experiments.env_only", "--domain", args.domain, "--epochs",
                      str(args.epochs), "--model", args.model, "--work", str(args.work), "--out", str(args.out),
                      *[x for s in args.sets for x in ("--set", s)], *(["--quiet"] if args.quiet else [])]
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            procs = [subprocess.Popen([*common, *[x for a, s in pending[i::args.jobs] for x in ("--only", f"{a}:{s}")]],
                                      env=env) for i in range(min(args.jobs, len(pending)))]
            if any(p.wait() != 0 for p in procs):
                print("error: a worker failed (its message is above); rerun to resume", file=sys.stderr)
                sys.exit(1)
        else:
            for arm, seed in pending:
                run_one(args, arm, seed, ui)
    per_run: dict[str, dict[int, dict[str, Any]]] = {}
    for arm, seed in [(a, s) for a in ARMS for s in args.seeds]:  # every arm finished or recorded, not only these
        path = record_path(args.out, args.domain, arm, seed)
        found = done_on_disk(args, arm, seed)
        if found is not None:
            save(path, args, arm, seed, found)
        else:
            found = load(path, args, arm)
        if found is not None:
            per_run.setdefault(arm, {})[seed] = found
    if args.signal:
        for arm, b in per_run.items():
            for seed, r in b.items():
                root = args.work / f"{args.domain}-{arm}-s{seed}"
                if ARMS[arm][0] != "env.mode=genenv" or not root.is_dir():
                    continue
                for x in r["rows"]:
                    if "movement" not in x:
                        x["movement"] = update_movement(RunDir(root), x["epoch"])
                save(record_path(args.out, args.domain, arm, seed), args, arm, seed, r)
    with_table_aim(per_run, TABLE)
    record = write(args, per_run)
    if per_run:
        compared = [compare_run(args, arm, seed, r) for arm, b in per_run.items() for seed, r in sorted(b.items())]
        bases = [f"{a}={b}" for a, b in BASELINE.items() if a in per_run and b in per_run]
        bases += ["env-only-frozen"] if "env-only-frozen" in per_run else []
        record["compare"] = cur.render_compare(compared, args.out / f"env_only-{args.domain}" / "compare.html",
                                               baselines=bases)["html"]
    print(markdown(record))
    return record


if __name__ == "__main__":
    main()
