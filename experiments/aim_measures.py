"""The primary measures of aim for every recorded arm of the environment-only experiment, from the measured shape
table: the frontier share (share of the environment's tasks in shapes the frozen agent solves 25-75% of the time)
and the mean |p_shape - α| of its tasks, recomputed from each recorded epoch's shape mix; the paper's in-band share
beside them, labelled with its resolution.

    python -m experiments.aim_measures              # results/env_control/aim_measures-arith.json and .md

The recorded runs keep, per epoch, the shape mix of the environment's tasks (`env_shape_mix`: share of its valid,
novel tasks per shape), not the tasks themselves, which is all these two measures need. The frontier the records
were made with was the base agent's greedy held-out success on 30 exercises per shape; the table here is its
sampled success (the rollouts' temperature) on 100 exercises per shape, so the two can disagree on a shape near
25% or 75%. Per arm: the mean over seeds of the per-run mean over epochs 2-10, with its 95% t-interval, and the
difference from the arm's untrained baseline paired by seed.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine

from experiments import shape_table
from genenv_cli.views.report.compare import mean_interval

RECORDS = Path(__file__).parent / "results" / "env_only" / "env_only-arith" / "runs"
OUT = Path(__file__).parent / "results" / "env_control" / "aim_measures-arith"
ALPHA = 0.5
BASELINE = {"env-only-var2": "env-only-frozen-var2", "env-only-frozen-var2": "env-only-frozen"}


def aim(mix: dict[str, float], table: dict[str, float]) -> tuple[float | None, float | None]:
    """(frontier share, mean |p_shape - α|) of a shape mix; a shape missing from the table counts as p = 0."""
    total = sum(mix.values())
    if not total:
        return None, None
    front = sum(v for s, v in mix.items() if shape_table.FRONTIER[0] <= table.get(s, 0.0) <= shape_table.FRONTIER[1])
    gap = sum(v * abs(table.get(s, 0.0) - ALPHA) for s, v in mix.items())
    return front / total, gap / total


def band_resolution(variations: int, k: int, low: float = 0.4, high: float = 0.6) -> dict[str, Any]:
    """What "p̂_batch in [low, high]" can resolve with `variations` x `k` attempts a batch: p̂'s step, the success
    counts the band holds, and the chance that a batch whose true success rate is exactly α lands in it."""
    n = variations * k
    counts = [c for c in range(n + 1) if low - 1e-9 <= c / n <= high + 1e-9]
    p_in = sum(math.comb(n, c) * 0.5 ** n for c in counts)
    return {"attempts": n, "step": round(1 / n, 4), "counts": f"{counts[0]}-{counts[-1]} of {n}",
            "p_in_band_at_alpha": round(p_in, 3)}


def per_run(path: Path, table: dict[str, float]) -> dict[str, Any]:
    data = json.loads(path.read_text())
    rows = []
    for r in data["rows"]:
        front, gap = aim(r.get("env_shape_mix") or {}, table)
        rows.append({"epoch": r["epoch"], "frontier_share": front, "gap": gap,
                     "in_band": r.get("env_batch_band_share"), "valid": r.get("valid_generation_rate")})
    later = [x for x in rows if x["epoch"] >= 2]

    def mean(key: str) -> float | None:
        xs = [x[key] for x in later if x[key] is not None]
        return sum(xs) / len(xs) if xs else None

    variations = next((int(s.split("=")[1]) for s in reversed(data["settings"]) if s.startswith("generate.variations=")),
                      4)
    k = next((int(s.split("=")[1]) for s in reversed(data["settings"]) if s.startswith("rollout.group_size=")), 8)
    return {"arm": data["arm"], "seed": data["seed"], "variations": variations, "k": k, "rows": rows,
            **{f"{key}_epochs_2_on": mean(key) for key in ("frontier_share", "gap", "in_band", "valid")}}


def ci(xs: list[float | None]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in mean_interval(xs).items()}


def measure(records: Path, table: dict[str, float]) -> dict[str, Any]:
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(records.glob("*.json")):
        r = per_run(path, table)
        runs.setdefault(r["arm"], {})[r["seed"]] = r
    keys = ("frontier_share", "gap", "in_band", "valid")
    arms: dict[str, Any] = {}
    for arm, by_seed in runs.items():
        one = next(iter(by_seed.values()))
        row: dict[str, Any] = {"seeds": sorted(by_seed),
                               "band_resolution": band_resolution(one["variations"], one["k"])}
        for key in keys:
            row[key] = ci([r[f"{key}_epochs_2_on"] for r in by_seed.values()])
        base = BASELINE.get(arm, "env-only-frozen")
        if arm != "env-only-frozen" and base in runs:
            seeds = sorted(set(by_seed) & set(runs[base]))
            row["baseline"] = base
            for key in keys:
                diffs = [by_seed[s][f"{key}_epochs_2_on"] - runs[base][s][f"{key}_epochs_2_on"] for s in seeds
                         if by_seed[s][f"{key}_epochs_2_on"] is not None
                         and runs[base][s][f"{key}_epochs_2_on"] is not None]
                row[f"{key}_minus_baseline"] = {**ci(diffs), "per_seed": [round(d, 4) for d in diffs]}
        arms[arm] = row
    return arms


def _f(m: dict[str, Any] | None, pct: bool) -> str:
    if not m or m.get("mean") is None:
        return "-"
    s = 100.0 if pct else 1.0
    fmt = (lambda x: f"{x * s:+.1f}" if "per_seed" in m else f"{x * s:.1f}") if pct else (lambda x: f"{x:.3f}")
    if m.get("low") is None:
        return fmt(m["mean"]) + " (1 seed)"
    return f"{fmt(m['mean'])} [{fmt(m['low'])}, {fmt(m['high'])}]"


def markdown(rec: dict[str, Any]) -> str:
    t = rec["table"]
    front = [s for s, p in sorted(t.items()) if shape_table.FRONTIER[0] <= p <= shape_table.FRONTIER[1]]
    lines = ["# Aim of every recorded environment-only arm, from the measured shape table", "",
             f"{rec['date']}, commit {rec['commit']}; table `{rec['table_file']}` (frontier: "
             f"{', '.join(front)}). Per arm, mean over seeds of each run's mean over epochs 2-10 [95% interval]; "
             "frontier share and in band in percent of tasks and batches; gap = mean |p_shape - α| of its tasks "
             "(lower is better). In band is the paper's measure: p̂_batch in [0.4, 0.6], with p̂_batch over "
             "variations x K attempts, so its resolution is the step and the counts given, and a batch whose true "
             "rate is exactly α lands in the band only with the probability given.", "",
             "| arm | seeds | frontier share | gap | in band (resolution) | valid generations |",
             "|---|---|---|---|---|---|"]
    for arm, r in rec["arms"].items():
        b = r["band_resolution"]
        lines.append(f"| {arm} | {len(r['seeds'])} | {_f(r['frontier_share'], True)} | {_f(r['gap'], False)} | "
                     f"{_f(r['in_band'], True)} ({b['counts']}, step {b['step']}, P(in band at α) "
                     f"{b['p_in_band_at_alpha']}) | {_f(r['valid'], True)} |")
    lines += ["", "Each arm minus its untrained baseline, paired by seed (points; gap in absolute units):", "",
              "| arm | baseline | frontier share | gap | in band | valid generations |", "|---|---|---|---|---|---|"]
    for arm, r in rec["arms"].items():
        if "baseline" in r:
            lines.append(f"| {arm} | {r['baseline']} | {_f(r['frontier_share_minus_baseline'], True)} | "
                         f"{_f(r['gap_minus_baseline'], False)} | {_f(r['in_band_minus_baseline'], True)} | "
                         f"{_f(r['valid_minus_baseline'], True)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=Path, default=RECORDS)
    ap.add_argument("--table", type=Path, default=shape_table.TABLE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    table = shape_table.load_table(args.table)
    rec = {"experiment": "aim-measures", "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "machine": machine(), "table_file": args.table.name, "table": table,
           "records": str(args.records.resolve().relative_to(Path(__file__).resolve().parent.parent))
           if args.records.resolve().is_relative_to(Path(__file__).resolve().parent.parent) else args.records.name,
           "arms": measure(args.records, table)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
