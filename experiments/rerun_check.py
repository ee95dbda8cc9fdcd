"""Does a rerun of a recorded curriculum run land where the recorded seeds say a run of that arm lands?

    python -m experiments.curriculum --arms genenv --seeds 1 --work /tmp/rerun --out /tmp/rerun-out
    python -m experiments.rerun_check /tmp/rerun-out/curriculum-arith/runs/genenv-s1.json

For a change that should alter the experiment's numbers only through sampling (a faster decoding loop that draws
other random numbers), a rerun of one arm and seed is a new draw from that arm. Per epoch and number, it is
compared with the 95% prediction interval for one more seed from the recorded seeds of the arm,
mean ± t(0.975, n-1) · sd · sqrt(1 + 1/n): about 1 in 20 numbers should fall outside by chance. Also shown: the
recorded run of the same seed, which the rerun need not equal. Writes <rerun's stem>-check.json and .md beside
the recorded results (--out).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine

RESULTS = Path(__file__).parent / "results" / "curriculum"
KEYS = ["heldout", "env_batch_band_share", "env_batches_kept", "informative_share", "valid_generation_rate",
        "agent_train_reward", "batch_p_mean"]
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def prediction_interval(values: list[float]) -> tuple[float, float] | None:
    """The 95% prediction interval for one more draw (Student's t), from at least two values."""
    if len(values) < 2:
        return None
    m, s, n = statistics.mean(values), statistics.stdev(values), len(values)
    half = T975[n - 1] * s * math.sqrt(1 + 1 / n)
    return m - half, m + half


def check(rerun: dict[str, Any], recorded: list[dict[str, Any]]) -> dict[str, Any]:
    same_seed = next((r for r in recorded if r["seed"] == rerun["seed"]), None)
    rows, inside, total = [], 0, 0
    for row in rerun["rows"]:
        e = row["epoch"]
        out: dict[str, Any] = {"epoch": e}
        for k in KEYS:
            values = [x[k] for r in recorded for x in r["rows"] if x["epoch"] == e and x.get(k) is not None]
            band = prediction_interval(values)
            v = row.get(k)
            ok = None if band is None or v is None else band[0] <= v <= band[1]
            if ok is not None:
                total += 1
                inside += ok
            seed_row = next((x for x in (same_seed or {}).get("rows", []) if x["epoch"] == e), {})
            out[k] = {"rerun": v, "recorded_same_seed": seed_row.get(k),
                      "recorded_mean": round(statistics.mean(values), 4) if values else None,
                      "prediction_interval": [round(b, 4) for b in band] if band else None, "inside": ok}
        rows.append(out)
    return {"arm": rerun["arm"], "seed": rerun["seed"], "recorded_seeds": sorted(r["seed"] for r in recorded),
            "rerun_commit": rerun.get("commit"), "recorded_commits": sorted({r.get("commit") for r in recorded}),
            "inside": inside, "compared": total, "epochs": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Rerun of `{result['arm']}` seed {result['seed']} against its recorded seeds "
             f"{result['recorded_seeds']}", "",
             f"Rerun on commit {result['rerun_commit']}; recorded on {', '.join(result['recorded_commits'])}. "
             f"{result['inside']} of {result['compared']} numbers lie inside the 95% prediction interval for one more "
             "seed (about 1 in 20 outside is chance).", "",
             "| epoch | number | rerun | recorded, same seed | recorded mean | 95% prediction interval | inside |",
             "|---|---|---|---|---|---|---|"]
    for row in result["epochs"]:
        for k in KEYS:
            c = row[k]
            band = c["prediction_interval"]
            lines.append(f"| {row['epoch']} | {k} | {_n(c['rerun'])} | {_n(c['recorded_same_seed'])} | "
                         f"{_n(c['recorded_mean'])} | {f'[{band[0]:.3f}, {band[1]:.3f}]' if band else '-'} | "
                         f"{'yes' if c['inside'] else 'no' if c['inside'] is False else '-'} |")
    return "\n".join(lines) + "\n"


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rerun", type=Path, help="the rerun's record (runs/<arm>-s<seed>.json)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--domain", default="arith")
    args = ap.parse_args(argv)
    rerun = json.loads(args.rerun.read_text())
    runs = args.out / f"curriculum-{args.domain}" / "runs"
    recorded = [json.loads(p.read_text()) for p in sorted(runs.glob(f"{rerun['arm']}-s*.json"))]
    recorded = [r for r in recorded if r["arm"] == rerun["arm"] and r["settings"] == rerun["settings"]]
    if not recorded:
        raise SystemExit(f"error: no recorded run of arm {rerun['arm']!r} with the rerun's settings under {runs}")
    result = {**check(rerun, recorded), "checked_on": git_commit(), "machine": machine()}
    stem = args.out / f"rerun-{rerun['arm']}-s{rerun['seed']}-check"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
