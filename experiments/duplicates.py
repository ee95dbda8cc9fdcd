"""Duplicates per task shape in environment-only runs: of the environment's valid generations of each shape (novel
tasks and exact duplicates together), the share that were duplicates of a seed exercise (train or held-out) or of
an earlier task of the run, and what a duplicate earned.

    python -m experiments.duplicates --runs .env-only-runs --arms env-only-uncertainty

A duplicate is recorded in the run's `pools/env_gen` with the reason "duplicate of <id>", and no shape of its own;
its shape is the shape of what it duplicates (the same expression): a seed exercise's, from the domain's seed
file, or an earlier task's, from the run's tasks.jsonl files. Writes results/env_control/duplicates-<tag>.json
and .md. The untrained environment's rates under the same novelty rule are in results/env_control/control.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine

from experiments import shape_table

OUT = Path(__file__).parent / "results" / "env_control"
PREFIX = "duplicate of "


def shapes_by_id(run: Path) -> dict[str, str]:
    """Every id a duplicate can name: the seed exercises' and the run's tasks'."""
    from genenv_cli.catalogue.domains import get_domain

    domain = get_domain("arith")
    ids = {s.id: s.shape for s in domain.read_seeds(domain.seed_path())}
    for tasks in sorted(run.glob("epochs/*/tasks.jsonl")):
        for line in tasks.read_text().splitlines():
            t = json.loads(line)
            ids[t["task_id"]] = t["shape"]
            if t.get("source") == "seed" and t["task_id"].startswith("e"):
                ids.setdefault(t["task_id"].split("-seed-", 1)[-1], t["shape"])
    return ids


def count_run(run: Path) -> dict[str, dict[str, Any]]:
    """Per shape: valid generations, duplicates among them, and the rewards the duplicates earned (None: none)."""
    import polars as pl

    ids = shapes_by_id(run)
    per: dict[str, dict[str, Any]] = {}
    for part in sorted(run.glob("pools/env_gen/*.parquet")):
        gen = pl.read_parquet(part, columns=["task_id", "valid", "reason", "reward"])
        for task_id, valid, reason, reward in gen.iter_rows():
            if valid and task_id:
                shape, dup = ids.get(task_id, "unknown"), False
            elif reason and reason.startswith(PREFIX):
                shape, dup = ids.get(reason[len(PREFIX):], "unknown"), True
            else:
                continue
            row = per.setdefault(shape, {"valid": 0, "duplicate": 0, "duplicate_rewards": {}})
            row["valid"] += 1
            if dup:
                row["duplicate"] += 1
                key = "none" if reward is None else f"{reward:g}"
                row["duplicate_rewards"][key] = row["duplicate_rewards"].get(key, 0) + 1
    return per


def pool(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    total: dict[str, dict[str, Any]] = {}
    for per in runs:
        for shape, row in per.items():
            t = total.setdefault(shape, {"valid": 0, "duplicate": 0, "duplicate_rewards": {}})
            t["valid"] += row["valid"]
            t["duplicate"] += row["duplicate"]
            for k, v in row["duplicate_rewards"].items():
                t["duplicate_rewards"][k] = t["duplicate_rewards"].get(k, 0) + v
    for t in total.values():
        t["duplicate_share"] = round(t["duplicate"] / t["valid"], 4) if t["valid"] else None
    return dict(sorted(total.items()))


def markdown(rec: dict[str, Any]) -> str:
    lines = [f"# Duplicates per shape in environment-only runs ({rec['tag']})", "",
             f"{rec['date']}, commit {rec['commit']}; runs under `{rec['runs']}`. Valid generations of each shape "
             "(novel tasks and exact duplicates), pooled over seeds and epochs, the share that duplicated a seed "
             "exercise or an earlier task, and the rewards duplicates earned (`none`: left out of their group). "
             "p_shape from the measured table.", ""]
    for arm, row in rec["arms"].items():
        lines += [f"## {arm} (seeds {row['seeds']})", "", "| shape | p_shape | valid | duplicates | share | "
                  "duplicate rewards |", "|---|---|---|---|---|---|"]
        for shape, t in row["shapes"].items():
            p = rec["table"].get(shape)
            rewards = ", ".join(f"{k}: {v}" for k, v in t["duplicate_rewards"].items()) or "-"
            lines.append(f"| {shape} | {'-' if p is None else f'{p:.2f}'} | {t['valid']} | {t['duplicate']} | "
                         f"{100 * t['duplicate_share']:.0f}% | {rewards} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=Path(".env-only-runs"))
    ap.add_argument("--arms", nargs="+", default=["env-only-uncertainty"])
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tag", default="env-only")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    arms: dict[str, Any] = {}
    for arm in args.arms:
        runs = sorted(args.runs.glob(f"{args.domain}-{arm}-s*"))
        if not runs:
            raise SystemExit(f"error: no runs of {arm} under {args.runs} (expected {args.domain}-{arm}-sN folders)")
        arms[arm] = {"seeds": [int(r.name.rsplit("-s", 1)[1]) for r in runs],
                     "shapes": pool([count_run(r) for r in runs])}
    rec = {"experiment": "duplicates", "tag": args.tag, "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "machine": machine(), "runs": str(args.runs), "table": shape_table.load_table(), "arms": arms}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"duplicates-{args.tag}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (args.out / f"duplicates-{args.tag}.md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
