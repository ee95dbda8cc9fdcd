"""The curriculum experiment: does a trained environment aim at the agent, and does the agent learn faster for it?

    python -m experiments.curriculum                                   # 4 arms x 3 seeds x 5 epochs, arith
    python -m experiments.curriculum --arms seeds --seeds 11 12 13     # one arm, other seeds
    python -m experiments.curriculum --arms genenv-kmin0.2             # a departure arm, reported beside the rest
    nox -s curriculum

Arms (the paper's ablations, same domain, model, prompts, rollout budget per epoch and training settings; only
what the environment does differs):
  genenv  the environment is trained (RWR on the batches the difficulty filter keeps)
  frozen  GenEnv-Random: the base environment writes every epoch's tasks and is never trained
  static  GenEnv-Static: `static_variations` variations per seed written once, drawn from every epoch
  seeds   no environment: every task is a seed task
Departure arms (run only when named in --arms; reported apart, never as the headline):
  genenv-kmin0.2  genenv with a wider difficulty filter, k_min 0.2 (batches with p̂ in [0.3, 0.7] train the
                  environment): the headline filter kept almost nothing on arith, because the environment's batches
                  sit just below the band. This arm tells the filter apart from what comes after it (the RWR
                  weights, the environment's capacity): does an environment that trains on more batches move?
  genenv-lr1e-3   genenv with the environment's learning rate 10x (1e-3): with the agent held still (env_only.py)
                  the environment's update trained on a few samples, two optimizer steps an epoch, and moved its
                  KL by about 0.01. Does an update that moves further aim better, and does the agent gain?
  genenv-var2     genenv with 2 variations per batch instead of 4: twice the batches, each half the size, at the
                  same rollout budget. Chosen for the co-evolution rerun when env_only.py's env-only-var2 had run
                  7 epochs at two seeds: with the agent held still its filter kept 2-3 batches an epoch (the
                  paper's arm about 1) and the environment's KL grew about twice as fast, without the 10x learning
                  rate's collapse of valid generations (at 3 seeds x 10 epochs: about 2 of 18 batches kept, KL
                  0.42 against 0.28, and no better aim than its untrained baseline).
Headline arms use the paper's alpha 0.5, k_min 0.1, lambda 1; beta (not given by the paper) is 2.0, the
authors' code's value: inside the filter's band a batch's R_env is between exp(-2 * 0.1^2) = 0.98 and 1, so the
kept batches are weighted almost equally and beta changes nothing the environment trains on; it shapes only
the reported R_env and the parent choice, the same in every arm.

Each arm x seed is a run directory under --work (default .curriculum-runs/), run epoch by epoch with the same
stages as `genenv run`, then `genenv evaluate --bench heldout` after every epoch (greedy, the domain's
validation split) and once for the base model. Everything is resumable: finished stages and evaluations are
skipped, so the experiment can be run in parts (`--arms`, `--seeds`, or a kill and a rerun). Per epoch and arm
the result has the mean and a 95% interval over seeds (Student's t) of: environment batches in the band, batches
the filter kept, the environment's shape mix, informative GRPO groups, valid-generation rate, environment KL,
agent training reward and held-out success; and the three comparisons the experiment is for:
  (a) seeds arm: held-out success after the last epoch minus the base model's;
  (b) genenv: the in-band share of its batches, last epoch minus first, and minus frozen's (paired by seed);
  (c) held-out success at the last epoch (equal rollouts), genenv minus frozen (paired by seed).
Written to experiments/results/curriculum/curriculum-<domain>.json and .md, with the settings, versions, machine and the
seconds every epoch took; `genenv compare` draws the runs into <out>/curriculum-<domain>/compare.html.

Every finished run is also kept as <out>/curriculum-<domain>/runs/<arm>-s<seed>.json (its per-epoch rows, the
base model's held-out result, the settings, commit and machine), small enough to commit. A run whose record
exists with the same settings and epochs is not run again: the experiment can be finished in parts on
different machines or fresh checkouts, and the result says which runs came from records. compare.html draws
every finished run: from its folder under --work when it is there, else from its record. The result covers every
arm with a record for the seeds asked for, not only the arms run this time: running a departure arm (or one
arm) rewrites the result with all that is known.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from lab import arms, runs
from lab.record import git_commit, machine, versions

from genenv_cli.actions.compare import render_compare
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.views.report.compare import RunData, flat_settings, mean_interval, read_run

RESULTS = Path(__file__).parent / "results" / "curriculum"
TIMINGS = "curriculum-timings.json"  # in each run's folder: the seconds of each epoch, evaluation included

ARMS = arms.CURRICULUM
HEADLINE = ["genenv", "frozen", "static", "seeds"]
DEPARTURES = [a for a in ARMS if a not in HEADLINE]
COMMON = arms.COMMON  # the settings every arm shares (lab/arms.py says how they were chosen)
BAND = (0.4, 0.6)  # the reported band, curriculum.band_low/high; at α 0.5 and k_min 0.1 the filter's band too
KEYS = ["env_batch_band_share", "band_share", "env_batches", "env_batches_kept", "informative_share",
        "valid_generation_rate", "env_kl", "agent_train_reward", "success_rate", "batch_p_mean", "rollouts"]


def run_arm(run: RunDir, epochs: int, ui: UI, limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for epoch, value, timings in runs.run_epochs(run, epochs, ui, TIMINGS, limit=limit):
        rows.append(row(run, epoch, value, timings))
        metrics = rows[-1]
        ui.info(f"{run.root.name} epoch {epoch}: held-out {value:.1f}%, informative "
                f"{metrics.get('informative_share')}, env batches in band {metrics.get('env_batch_band_share')}")
    return rows


def rows_on_disk(run: RunDir, epochs: int, limit: int | None = None) -> list[dict[str, Any]] | None:
    """The rows of a run whose every epoch and evaluation is finished, read without running anything (None when
    the run is missing or unfinished): `--report-only` records what exists while other runs go on."""
    if not run.config_path.exists() or runs.heldout_done(run, None, limit) is None:
        return None
    if any(runs.heldout_done(run, e, limit) is None or not run.metrics_path(e).exists() for e in range(1, epochs + 1)):
        return None
    timings = runs.read_timings(run, TIMINGS)
    return [row(run, e, runs.heldout_done(run, e, limit), timings) for e in range(1, epochs + 1)]


def record_path(out_dir: Path, domain: str, arm: str, seed: int) -> Path:
    return out_dir / f"curriculum-{domain}" / "runs" / f"{arm}-s{seed}.json"


def run_settings(args: argparse.Namespace, arm: str) -> list[str]:
    """Everything that makes two runs of an arm and seed the same experiment (the seed is in the record's name)."""
    limit = [f"heldout_limit={args.heldout_limit}"] if args.heldout_limit else []  # absent: the whole split
    return [f"model={args.model}", f"domain={args.domain}", f"epochs={args.epochs}", *limit, *COMMON, *args.sets,
            *ARMS[arm]]


def save_run_record(path: Path, args: argparse.Namespace, arm: str, seed: int, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"arm": arm, "seed": seed, "settings": run_settings(args, arm), "commit": result.get("commit") or git_commit(),
            "date": time.strftime("%Y-%m-%d"), "machine": machine(), "base_heldout": result["base_heldout"],
            "rows": result["rows"]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def recorded_commit(path: Path, args: argparse.Namespace, arm: str) -> str:
    """The commit a finished run folder's record names (the code it ran on), else the checkout's."""
    return (load_run_record(path, args, arm) or {}).get("commit") or git_commit()


def load_run_record(path: Path, args: argparse.Namespace, arm: str, quiet: bool = False) -> dict[str, Any] | None:
    """A finished run's record, or None when there is none or it was made with other settings (then said, unless
    quiet: an arm not asked for is only looked for)."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.get("settings") != run_settings(args, arm) or len(data.get("rows", [])) != args.epochs:
        if not quiet:
            print(f"note: {path} was recorded with other settings or epochs; not used", file=sys.stderr)
        return None
    return {"rows": data["rows"], "base_heldout": data["base_heldout"], "commit": data.get("commit"),
            "from_record": True}


def row(run: RunDir, epoch: int, value: float, timings: dict[str, Any]) -> dict[str, Any]:
    metrics = run.read_metrics_file(epoch) or {}
    return {"epoch": epoch, **{k: metrics.get(k) for k in KEYS},
            "env_shape_mix": metrics.get("env_shape_mix") or {},
            "shape_p": {k: v.get("p") for k, v in (metrics.get("shape_success") or {}).items()},
            "env_batch_p": env_batch_p(run, epoch),
            "heldout": value / 100.0, "seconds": timings.get(str(epoch))}


def env_batch_p(run: RunDir, epoch: int) -> list[float]:
    """Every environment batch's p̂ this epoch, sorted: where the batches sit against the filter's band."""
    import polars as pl

    from genenv_cli.rundir.datafiles import read_parquet

    stats = read_parquet(run.file("task_stats", epoch), "task_stats").filter(pl.col("source") == "env")
    return sorted(round(p, 4) for p in stats.group_by("batch_id").agg(pl.col("p_batch").first())["p_batch"])


def batch_p_spread(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per arm, over every epoch and seed whose record has them: the share of environment batches below the band
    (too hard), in it, above it (too easy), and within 0.1 below it."""
    out: dict[str, Any] = {}
    lo, hi = BAND
    for arm, by_seed in per_run.items():
        ps = [p for r in by_seed.values() for x in r["rows"] for p in (x.get("env_batch_p") or [])]
        seeds = sorted(s for s, r in by_seed.items() if any(x.get("env_batch_p") for x in r["rows"]))
        if not ps:
            continue
        out[arm] = {"seeds": seeds, "batches": len(ps), "below": round(sum(p < lo for p in ps) / len(ps), 4),
                    "in_band": round(sum(lo <= p <= hi for p in ps) / len(ps), 4),
                    "above": round(sum(p > hi for p in ps) / len(ps), 4),
                    "just_below": round(sum(round(lo - 0.1, 6) <= p < lo for p in ps) / len(ps), 4)}
    return out


def interval(values: list[float | None]) -> dict[str, Any]:
    m = mean_interval(values)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}


def aggregate(per_run: dict[str, dict[int, dict[str, Any]]], epochs: int) -> dict[str, Any]:
    """arm -> per epoch, the mean and 95% interval over seeds of every recorded number."""
    out: dict[str, Any] = {}
    for arm, by_seed in per_run.items():
        rows = []
        for e in range(epochs):
            vals = [r["rows"][e] for r in by_seed.values() if len(r["rows"]) > e]
            row: dict[str, Any] = {"epoch": e + 1, "seeds": len(vals)}
            for k in [*KEYS, "heldout", "seconds"]:
                row[k] = interval([v.get(k) for v in vals])
            shapes = sorted({s for v in vals for s in v["env_shape_mix"]})
            row["env_shape_mix"] = {s: round(sum(v["env_shape_mix"].get(s, 0.0) for v in vals) / len(vals), 4)
                                    for s in shapes if vals}
            rows.append(row)
        base = interval([r["base_heldout"] for r in by_seed.values()])
        out[arm] = {"base_heldout": base, "epochs": rows}
    return out


def paired(a: dict[int, Any], b: dict[int, Any], key: Any) -> dict[str, Any]:
    """Mean and interval of key(a[seed]) - key(b[seed]) over the seeds both have."""
    seeds = sorted(set(a) & set(b))
    diffs = [key(a[s]) - key(b[s]) for s in seeds if key(a[s]) is not None and key(b[s]) is not None]
    return {**interval(diffs), "seeds": seeds, "per_seed": [round(d, 4) for d in diffs]}


def excludes_zero(m: dict[str, Any], sign: int = 1) -> bool | None:
    if m.get("low") is None:
        return None
    return m["low"] > 0 if sign > 0 else m["high"] < 0


def must_show(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "seeds" in per_run:
        diffs = [r["rows"][-1]["heldout"] - r["base_heldout"] for r in per_run["seeds"].values() if r["rows"]]
        lift = {**interval(diffs), "per_seed": [round(d, 4) for d in diffs]}
        out["a_seeds_lift_over_base"] = {**lift, "holds": excludes_zero(lift)}
    if "genenv" in per_run:
        g = per_run["genenv"]
        rise = [r["rows"][-1]["env_batch_band_share"] - r["rows"][0]["env_batch_band_share"] for r in g.values()
                if len(r["rows"]) > 1 and r["rows"][-1]["env_batch_band_share"] is not None
                and r["rows"][0]["env_batch_band_share"] is not None]
        out["b_genenv_in_band_rise"] = {**interval(rise), "per_seed": [round(d, 4) for d in rise]}
        if "frozen" in per_run:
            vs = paired(g, per_run["frozen"], last("env_batch_band_share"))
            out["b_genenv_minus_frozen_in_band_last_epoch"] = {**vs, "holds": excludes_zero(vs)}
            held = paired(g, per_run["frozen"], last("heldout"))
            out["c_genenv_minus_frozen_heldout_last_epoch"] = {**held, "holds": (held["mean"] or 0) >= 0
                                                               if held["mean"] is not None else None}
    return out


# Post hoc (chosen after seeing the first seed, so reported apart from the three comparisons above): "near the
# frontier" is a shape the agent solved 25-75% of the time in the previous epoch's rollouts.
FRONTIER = (0.25, 0.75)


def frontier_share(rows: list[dict[str, Any]], e: int) -> float | None:
    """Share of epoch e's environment tasks (by shape) whose shape was near the agent's frontier in epoch e-1."""
    if e < 1 or e >= len(rows) or not rows[e]["env_shape_mix"]:
        return None
    prev = rows[e - 1].get("shape_p") or {}
    near = {s for s, p in prev.items() if p is not None and FRONTIER[0] <= p <= FRONTIER[1]}
    return sum(v for s, v in rows[e]["env_shape_mix"].items() if s in near)


def later_mean(key: Any) -> Any:
    """run -> the mean of key(rows, e) over epochs 2..N (the epochs an environment could have trained before)."""
    def f(r: dict[str, Any]) -> float | None:
        vals = [v for v in (key(r["rows"], e) for e in range(1, len(r["rows"]))) if v is not None]
        return sum(vals) / len(vals) if vals else None
    return f


IN_BAND = later_mean(lambda rows, e: rows[e].get("env_batch_band_share"))
FRONTIER_SHARE = later_mean(frontier_share)
KEPT = later_mean(lambda rows, e: rows[e].get("env_batches_kept"))


def last(key: str) -> Any:
    return lambda r: r["rows"][-1].get(key) if r["rows"] else None


def diagnostics(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Where the mechanism holds or breaks, per arm: the environment's aim (frontier share, in-band share over
    epochs 2..N) and how much the filter gives the environment to learn from (batches kept)."""
    out: dict[str, Any] = {}
    for arm, by_seed in per_run.items():
        if arm == "seeds":
            continue
        out[f"{arm}_in_band_epochs_2_on"] = interval([IN_BAND(r) for r in by_seed.values()])
        out[f"{arm}_frontier_share_epochs_2_on"] = interval([FRONTIER_SHARE(r) for r in by_seed.values()])
        out[f"{arm}_batches_kept_epochs_2_on"] = {**interval([KEPT(r) for r in by_seed.values()]), "count": True}
    if "genenv" in per_run and "frozen" in per_run:
        out["genenv_minus_frozen_in_band_epochs_2_on"] = paired(per_run["genenv"], per_run["frozen"], IN_BAND)
        out["genenv_minus_frozen_frontier_share_epochs_2_on"] = paired(per_run["genenv"], per_run["frozen"],
                                                                       FRONTIER_SHARE)
        out["genenv_minus_frozen_heldout_mean_epochs"] = paired(
            per_run["genenv"], per_run["frozen"],
            lambda r: sum(x["heldout"] for x in r["rows"]) / len(r["rows"]) if r["rows"] else None)
    return out


def departures(per_run: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Each departure arm against frozen (the same comparisons as (b) and (c)) and against the headline genenv
    (did the change give the environment more to learn from, and did that move its aim or the agent?), paired by
    seed."""
    out: dict[str, Any] = {}
    for arm in DEPARTURES:
        if arm not in per_run:
            continue
        d = per_run[arm]
        for other in ("frozen", "genenv"):
            if other not in per_run:
                continue
            vs = per_run[other]
            out[f"{arm}_minus_{other}_in_band_last_epoch"] = paired(d, vs, last("env_batch_band_share"))
            out[f"{arm}_minus_{other}_in_band_epochs_2_on"] = paired(d, vs, IN_BAND)
            out[f"{arm}_minus_{other}_frontier_share_epochs_2_on"] = paired(d, vs, FRONTIER_SHARE)
            out[f"{arm}_minus_{other}_batches_kept_epochs_2_on"] = {**paired(d, vs, KEPT), "count": True}
            out[f"{arm}_minus_{other}_heldout_last_epoch"] = paired(d, vs, last("heldout"))
    return out


def _f(m: dict[str, Any] | None, pct: bool = True) -> str:
    if not m or m.get("mean") is None:
        return "-"
    scale, unit = (100, "%") if pct else (1, "")
    if m.get("low") is None:
        return f"{scale * m['mean']:.1f}{unit}"
    return f"{scale * m['mean']:.1f}{unit} [{scale * m['low']:.1f}, {scale * m['high']:.1f}]"


def _metric_line(key: str, m: dict[str, Any]) -> str:
    """One diagnostic or departure comparison: mean [interval], then the per-seed values (points, or counts)."""
    per_seed = m.get("per_seed") or []
    scale = 1 if m.get("count") else 100
    return (f"- {key}: {_f(m, pct=not m.get('count'))}"
            + (f" (per seed: {', '.join(f'{scale * d:+.1f}' for d in per_seed)})" if per_seed else ""))


def markdown(record: dict[str, Any]) -> str:
    status = "" if record["complete"] else f" PARTIAL: runs done so far {record['runs_done']}."
    if record.get("runs_from_records"):
        status += f" Read from run records (run earlier, elsewhere): {record['runs_from_records']}."
    status += f" Code: {', '.join(record.get('run_commits') or ['?'])}."
    if record.get("heldout_limit"):  # records written before the option have no such key: the whole split
        status += f" Held-out success on the first {record['heldout_limit']} exercises only."
    lines = [f"Domain `{record['domain']}`, {record['model']}; {record['epochs']} epochs; seeds "
             f"{record['seeds']}. Cells: mean over seeds [95% interval].{status}", "",
             "| arm | epoch | env batches in band | batches kept | informative groups | valid generations | env KL | "
             "agent train reward | held-out success |", "|---|---|---|---|---|---|---|---|---|"]
    for arm, data in record["arms"].items():
        lines.append(f"| {arm} | base | | | | | | | {_f(data['base_heldout'])} |")
        for r in data["epochs"]:
            lines.append(f"| {arm} | {r['epoch']} | {_f(r['env_batch_band_share'])} | "
                         f"{_f(r['env_batches_kept'], pct=False)} | {_f(r['informative_share'])} | "
                         f"{_f(r['valid_generation_rate'])} | {_f(r['env_kl'], pct=False)} | "
                         f"{_f(r['agent_train_reward'], pct=False)} | {_f(r['heldout'])} |")
    lines += ["", "Shape mix of the environment's tasks (mean share over seeds):", ""]
    for arm, data in record["arms"].items():
        for r in data["epochs"]:
            if r["env_shape_mix"]:
                mix = ", ".join(f"{s} {100 * v:.0f}%" for s, v in sorted(r["env_shape_mix"].items(), key=lambda x: -x[1]))
                lines.append(f"- {arm}, epoch {r['epoch']}: {mix}")
    lines += ["", "Comparisons:", ""]
    for k, m in record["must_show"].items():
        lines.append(f"- {k}: {_f(m)} (per seed: {', '.join(f'{100 * d:+.1f}' for d in m.get('per_seed', []))})"
                     + (f"; holds: {m['holds']}" if "holds" in m else ""))
    if record.get("diagnostics"):
        lines += ["", f"Diagnostics (post hoc; a shape is near the frontier when the agent solved "
                      f"{100 * FRONTIER[0]:.0f}-{100 * FRONTIER[1]:.0f}% of it in the previous epoch):", ""]
        lines += [_metric_line(k, m) for k, m in record["diagnostics"].items()]
    if record.get("departures"):
        lines += ["", f"Departure arms (not the headline; settings {json.dumps({a: ARMS[a] for a in record['departure_arms']})}"
                      "), paired by seed:", ""]
        lines += [_metric_line(k, m) for k, m in record["departures"].items()]
    if record.get("env_batch_p"):
        lines += ["", f"Where the environment's batches sit against the band [{BAND[0]}, {BAND[1]}] (all epochs, the "
                      "seeds whose records carry each batch's p̂):", ""]
        for arm, d in record["env_batch_p"].items():
            lines.append(f"- {arm} (seeds {d['seeds']}, {d['batches']} batches): below {100 * d['below']:.0f}% "
                         f"({100 * d['just_below']:.0f}% of all within 0.1 below the band), in band "
                         f"{100 * d['in_band']:.0f}%, above {100 * d['above']:.0f}%")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--arms", nargs="+", default=HEADLINE, choices=sorted(ARMS),
                    help=f"arms to run (default the headline {' '.join(HEADLINE)}; departures: {' '.join(DEPARTURES)})")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--model", default="embedded", help="agent and environment base model")
    ap.add_argument("--work", type=Path, default=Path(".curriculum-runs"))
    ap.add_argument("--out", type=Path, default=None, help="result folder (default experiments/results/curriculum)")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="SECTION.KEY=VALUE for every arm (recorded; a departure from the recorded settings)")
    ap.add_argument("--heldout-limit", type=int, default=None, metavar="N",
                    help="evaluate on the first N held-out exercises only (recorded; default all of them)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: record the runs under --work that are finished (a partial result says so)")
    args = ap.parse_args(argv)
    if args.heldout_limit is not None and args.heldout_limit < 1:
        ap.error(f"--heldout-limit {args.heldout_limit}: expected a number of exercises, at least 1")
    out_dir = args.out or RESULTS
    ui = UI(quiet=args.quiet)
    started = time.time()
    per_run: dict[str, dict[int, dict[str, Any]]] = {}
    first: RunDir | None = None
    record: dict[str, Any] = {}
    # seeds outermost: after each seed every arm has a run, so a partial experiment is still a comparison
    for seed in args.seeds:
        for arm in args.arms:
            root = args.work / f"{args.domain}-{arm}-s{seed}"
            rec_path = record_path(out_dir, args.domain, arm, seed)
            done_rows = rows_on_disk(RunDir(root), args.epochs, args.heldout_limit)
            if done_rows is not None:  # finished here: (re)write its record
                per_run.setdefault(arm, {})[seed] = {"rows": done_rows,
                                                     "base_heldout": runs.heldout_done(RunDir(root), None,
                                                                                       args.heldout_limit) / 100.0,
                                                     "commit": recorded_commit(rec_path, args, arm)}
                save_run_record(rec_path, args, arm, seed, per_run[arm][seed])
                continue
            recorded = load_run_record(rec_path, args, arm)
            if recorded is not None:  # finished elsewhere
                per_run.setdefault(arm, {})[seed] = recorded
                continue
            if args.report_only:
                continue
            commit = git_commit()  # the code the run starts on, not whatever is checked out when it ends
            run = runs.make_run(root, args.domain, ARMS[arm], seed, args.model, args.sets)
            if first is None:
                runs.heldout(run, None, ui, args.heldout_limit)
                first = run
            else:
                runs.share_base_eval(first, run, args.heldout_limit)
            rows = run_arm(run, args.epochs, ui, args.heldout_limit)
            per_run.setdefault(arm, {})[seed] = {"rows": rows,
                                                 "base_heldout": runs.heldout_done(run, None, args.heldout_limit) / 100.0,
                                                 "commit": commit}
            save_run_record(rec_path, args, arm, seed, per_run[arm][seed])
            record = write_record(out_dir, args, per_run, started)  # after every run: progress is never lost
    for seed in args.seeds:  # the arms not run this time are reported from their records, when they have them
        for arm in ARMS:
            if arm not in args.arms and (recorded := load_run_record(
                    record_path(out_dir, args.domain, arm, seed), args, arm, quiet=True)) is not None:
                per_run.setdefault(arm, {})[seed] = recorded
    per_run = {arm: dict(sorted(per_run[arm].items())) for arm in ARMS if arm in per_run}  # the tables' order
    record = write_record(out_dir, args, per_run, started)
    if per_run:
        compared = [compare_run(args, arm, seed, result) for arm, by_seed in per_run.items()
                    for seed, result in sorted(by_seed.items())]
        record["compare"] = render_compare(compared, out_dir / f"curriculum-{args.domain}" / "compare.html",
                                           baselines=["frozen"] if "frozen" in per_run else None)["html"]
    print(markdown(record))
    return record


def compare_run(args: argparse.Namespace, arm: str, seed: int, result: dict[str, Any]) -> RunData:
    """One run as `genenv compare` draws it: read from its folder when the folder is here, else rebuilt from its
    record (the settings the run was made with; per epoch the metrics and held-out success the page draws), so
    the page shows every finished run, those of earlier invocations (and other machines) included."""
    root = args.work / f"{args.domain}-{arm}-s{seed}"
    if not result.get("from_record") and RunDir(root).config_path.is_file():
        data = read_run(root)
        data.label = arm
        return data
    cfg = runs.arm_config(args.domain, ARMS[arm], seed, args.model, args.sets)
    settings = flat_settings(cfg)
    settings.pop("run.seed")
    rows = sorted(result["rows"], key=lambda r: r["epoch"])
    data = RunData(record_path(args.out or RESULTS, args.domain, arm, seed), seed, settings, cfg.env.mode,
                   {r["epoch"]: {k: r.get(k) for k in (*KEYS, "env_shape_mix")} for r in rows}, label=arm)
    data.heldout = {0: result["base_heldout"], **{r["epoch"]: r["heldout"] for r in rows}}
    total = 0
    for r in rows:
        total += r.get("rollouts") or 0
        data.rollouts[r["epoch"]] = total
    return data


def write_record(out_dir: Path, args: argparse.Namespace, per_run: dict[str, dict[int, dict[str, Any]]],
                 started: float) -> dict[str, Any]:
    done = {arm: sorted(by_seed) for arm, by_seed in per_run.items()}
    record = {
        "benchmark": "curriculum", "date": time.strftime("%Y-%m-%d"), "commit": git_commit(), "domain": args.domain,
        "model": args.model if args.model != "embedded" else "embedded (SmolLM2-135M-Instruct), LoRA r=16",
        "epochs": args.epochs, "seeds": args.seeds, "complete": all(done.get(a) == sorted(args.seeds) for a in args.arms),
        "runs_done": done, "arms_settings": {a: ARMS[a] for a in ARMS if a in args.arms or a in per_run},
        "departure_arms": [a for a in DEPARTURES if a in per_run],
        "runs_from_records": {arm: sorted(s for s, r in by_seed.items() if r.get("from_record"))
                              for arm, by_seed in per_run.items() if any(r.get("from_record") for r in by_seed.values())},
        "run_commits": sorted({r["commit"] for by_seed in per_run.values() for r in by_seed.values() if r.get("commit")}),
        "settings": COMMON + args.sets, "heldout_limit": args.heldout_limit, "machine": machine(),
        "versions": versions(),
        "arms": aggregate(per_run, args.epochs), "must_show": must_show(per_run),
        "diagnostics": diagnostics(per_run), "departures": departures(per_run),
        "env_batch_p": batch_p_spread(per_run),
        "per_run": {arm: {str(s): {"rows": r["rows"], "base_heldout": r["base_heldout"]} for s, r in by_seed.items()}
                    for arm, by_seed in per_run.items()},
        "seconds_this_invocation": round(time.time() - started, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"curriculum-{args.domain}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(record))
    return record


if __name__ == "__main__":
    main()
