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

Two measures are called "frontier share" and they are not the same. The env-only arms' shape mix counts the tasks
the environment wrote that became tasks: valid and novel (generate-tasks rejects duplicates). The positive control
(`env_control.py`) records its counts per shape of every valid generation and how many of them were duplicates,
and its claim's frontier share counts duplicates in (its `shape` rule pays them). The section on the control here
gives both from its records, recomputed with the same table, so that the env-only arms sit beside the control's
novel-only figure (`frontier_share_novel`), the one measured as theirs is. Beside them: each env-only arm's
per-shape success as its records hold it (`shape_p`: the agent's success over the epoch's tasks of the shape,
seed and environment tasks pooled), and R-Zero's expected reward for a task the agent solves p of the time at
K rollouts (`expected_uncertainty_reward`).
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
CONTROL = Path(__file__).parent / "results" / "env_control" / "control"
CONTROL_EPOCHS = (3, 5)  # the control's claim epochs (env_control --claim-epochs 3 of 5)
SHAPES_SEEN = ("add-1d", "sub-1d", "mul-1d", "add-2d", "mul-2d")
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


def expected_uncertainty_reward(p: float, k: int = 8, alpha: float = ALPHA) -> float:
    """E[1 - 2|X/k - α|] for X ~ Binomial(k, p): what R-Zero's reward pays on average for a task the agent solves p
    of the time, when p̂ comes from k rollouts.

    >>> round(expected_uncertainty_reward(0.5), 3), round(expected_uncertainty_reward(0.2), 3)
    (0.727, 0.394)
    >>> round(expected_uncertainty_reward(0.03), 3)
    0.06
    """
    return sum(math.comb(k, x) * p ** x * (1 - p) ** (k - x) * (1 - 2 * abs(x / k - alpha)) for x in range(k + 1))


def shape_success(path: Path, shapes: tuple[str, ...] = SHAPES_SEEN) -> dict[str, float | None]:
    """Per shape, one run's mean over epochs 2-10 of the agent's recorded success on that epoch's tasks of the shape
    (`shape_p`: seed and environment tasks pooled, as these records keep it)."""
    rows = [r for r in json.loads(path.read_text())["rows"] if r["epoch"] >= 2]
    out: dict[str, float | None] = {}
    for s in shapes:
        xs = [r["shape_p"][s] for r in rows if (r.get("shape_p") or {}).get(s) is not None]
        out[s] = sum(xs) / len(xs) if xs else None
    return out


def control_measures(records: Path, table: dict[str, float]) -> dict[str, Any]:
    """The positive control's frontier share from its records with `table`, both ways (valid generations with
    duplicates; novel valid ones only, the env-only arms' measure), and its gap, over CONTROL_EPOCHS; each trained
    arm minus control-frozen, paired by seed."""
    from experiments.env_control import measures as counts_measures

    runs: dict[str, dict[int, dict[str, float | None]]] = {}
    for path in sorted(records.glob("*.json")):
        data = json.loads(path.read_text())
        rows = [counts_measures(r, table) for r in data["rows"]
                if CONTROL_EPOCHS[0] <= r["epoch"] <= CONTROL_EPOCHS[1]]
        per: dict[str, float | None] = {}
        for key in ("frontier_share", "frontier_share_novel", "gap", "valid_rate"):
            xs = [r[key] for r in rows if r[key] is not None]
            per[key] = sum(xs) / len(xs) if xs else None
        per["reward_table"] = data.get("reward_table", {}).get("file")
        runs.setdefault(data["arm"], {})[data["seed"]] = per
    out: dict[str, Any] = {}
    base = runs.get("control-frozen", {})
    for arm, by_seed in runs.items():
        row: dict[str, Any] = {"seeds": sorted(by_seed),
                               "reward_tables": sorted({r["reward_table"] or "none (untrained)" for r in by_seed.values()})}
        for key in ("frontier_share", "frontier_share_novel", "gap", "valid_rate"):
            row[key] = ci([r[key] for r in by_seed.values()])
            if arm != "control-frozen":
                seeds = sorted(set(by_seed) & set(base))
                diffs = [by_seed[s][key] - base[s][key] for s in seeds
                         if by_seed[s][key] is not None and base[s][key] is not None]
                row[f"{key}_minus_frozen"] = {**ci(diffs), "per_seed": [round(d, 4) for d in diffs]}
        out[arm] = row
    return out


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
        r["shape_success"] = shape_success(path)
        runs.setdefault(r["arm"], {})[r["seed"]] = r
    keys = ("frontier_share", "gap", "in_band", "valid")
    arms: dict[str, Any] = {}
    for arm, by_seed in runs.items():
        one = next(iter(by_seed.values()))
        row: dict[str, Any] = {"seeds": sorted(by_seed),
                               "band_resolution": band_resolution(one["variations"], one["k"]),
                               "shape_success": {s: ci([r["shape_success"][s] for r in by_seed.values()])
                                                 for s in SHAPES_SEEN}}
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
             "Frontier share here is of the novel valid tasks (what became tasks; the env-only records' shape mix).", "",
             "| arm | seeds | frontier share (novel) | gap | in band (resolution) | valid generations |",
             "|---|---|---|---|---|---|"]
    for arm, r in rec["arms"].items():
        b = r["band_resolution"]
        lines.append(f"| {arm} | {len(r['seeds'])} | {_f(r['frontier_share'], True)} | {_f(r['gap'], False)} | "
                     f"{_f(r['in_band'], True)} ({b['counts']}, step {b['step']}, P(in band at α) "
                     f"{b['p_in_band_at_alpha']}) | {_f(r['valid'], True)} |")
    lines += ["", "Each arm minus its untrained baseline, paired by seed (points; gap in absolute units):", "",
              "| arm | baseline | frontier share (novel) | gap | in band | valid generations |", "|---|---|---|---|---|---|"]
    for arm, r in rec["arms"].items():
        if "baseline" in r:
            lines.append(f"| {arm} | {r['baseline']} | {_f(r['frontier_share_minus_baseline'], True)} | "
                         f"{_f(r['gap_minus_baseline'], False)} | {_f(r['in_band_minus_baseline'], True)} | "
                         f"{_f(r['valid_minus_baseline'], True)} |")
    lines += control_markdown(rec)
    return "\n".join(lines) + "\n"


def control_markdown(rec: dict[str, Any]) -> list[str]:
    c = rec.get("control") or {}
    e0, e1 = CONTROL_EPOCHS
    lines = ["", f"## The positive control beside them (`env_control.py`, epochs {e0}-{e1}, same table)", "",
             "Two frontier shares from the same records: of every valid generation, duplicates included (the "
             "control's claim; its `shape` rule pays a duplicate), and of the novel valid generations only (the "
             "measure of the env-only tables above). The reward table each run was trained with is named; the "
             "measures are all from the table above.", "",
             "| arm | seeds | reward table | frontier share (valid, duplicates in) | frontier share (novel only) | "
             "gap (valid) | valid generations |", "|---|---|---|---|---|---|---|"]
    for arm, r in c.items():
        lines.append(f"| {arm} | {len(r['seeds'])} | {', '.join(r['reward_tables'])} | {_f(r['frontier_share'], True)} "
                     f"| {_f(r['frontier_share_novel'], True)} | {_f(r['gap'], False)} | {_f(r['valid_rate'], True)} |")
    lines += ["", "Minus control-frozen, paired by seed:", "",
              "| arm | frontier share (valid, duplicates in) | frontier share (novel only) | gap (valid) | valid |",
              "|---|---|---|---|---|"]
    for arm, r in c.items():
        if "frontier_share_minus_frozen" in r:
            lines.append(f"| {arm} | {_f(r['frontier_share_minus_frozen'], True)} | "
                         f"{_f(r['frontier_share_novel_minus_frozen'], True)} | {_f(r['gap_minus_frozen'], False)} | "
                         f"{_f(r['valid_rate_minus_frozen'], True)} |")
    lines += ["", "## The agent's success per shape on the tasks of each arm (epochs 2-10)", "",
              "From the records' `shape_p`: the frozen agent's success over the epoch's tasks of a shape, seed and "
              "environment tasks pooled (these records do not separate them; score's `shape_success_by_source`, "
              "which env_only.py records, does for new runs). Mean over seeds of each run's mean over epochs [95% interval], percent; the "
              "shape table's uniform p beside the shape's name.", "",
              "| arm | " + " | ".join(f"{s} (table {rec['table'].get(s, 0) * 100:.0f})" for s in SHAPES_SEEN) + " |",
              "|---|" + "---|" * len(SHAPES_SEEN)]
    for arm, r in rec["arms"].items():
        lines.append(f"| {arm} | " + " | ".join(_f(r["shape_success"][s], True) for s in SHAPES_SEEN) + " |")
    ev = rec.get("expected_uncertainty_reward") or {}
    lines += ["", "R-Zero's reward 1 - 2|p̂ - α| with p̂ from K = 8 rollouts, in expectation over the rollouts, for a "
              "task the agent solves p of the time: " + ", ".join(f"p {p}: {v:.3f}" for p, v in ev.items()) + "."]
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=Path, default=RECORDS)
    ap.add_argument("--control", type=Path, default=CONTROL, help="the positive control's run records")
    ap.add_argument("--table", type=Path, default=shape_table.TABLE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    table = shape_table.load_table(args.table)
    rec = {"experiment": "aim-measures", "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "machine": machine(), "table_file": args.table.name, "table": table,
           "records": str(args.records.resolve().relative_to(Path(__file__).resolve().parent.parent))
           if args.records.resolve().is_relative_to(Path(__file__).resolve().parent.parent) else args.records.name,
           "arms": measure(args.records, table), "control": control_measures(args.control, table),
           "expected_uncertainty_reward": {str(p): round(expected_uncertainty_reward(p), 4)
                                           for p in (0.03, 0.1, 0.2, 0.3, 0.5)}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
