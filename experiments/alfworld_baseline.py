"""A model's ALFWorld scores on the real valid_unseen games, under either protocol, through `genenv evaluate`.

The games are put in a fixed order, a permutation of the split's 134 drawn with `--seed`; the run plays the first
`--games` of it (all 134 by default), `--chunk` games per `genenv evaluate` call (each chunk a folder holding copies
of its games' files; an official chunk's episodes are played together, one batched generate call per turn). So a
run stopped early (`--stop-after`) has still played a seeded random subset: the first M games of the
permutation. Each finished chunk's games are appended to `<out>/<protocol>/games.jsonl` and its samples to
`<out>/<protocol>/samples.jsonl`; a rerun with the same settings skips the games recorded (a run with other
settings is refused rather than mixed in). `<out>/<protocol>/summary.json` holds the figures with 95% intervals
(games won: Clopper-Pearson; step accuracy: Clopper-Pearson over steps, and a bootstrap over games, since a game's
steps are not independent), seconds per game, settings, versions, machine and commit.

    python -m experiments.alfworld_baseline --data DIR --protocol paper|official [--games N] [--seed 0]
        [--chunk 8] [--model embedded] [--max-new-tokens 48] [--threads 1] [--stop-after SECONDS]
        [--summarize-only] [--note TEXT]

DIR holds `json_2.1.1/valid_unseen` (alfworld-download's layout). Needs the alfworld extra.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from genenv_cli.families.alfworld.benchmark import collect_games
from genenv_cli.families.alfworld.games import alfworld_version

OUT = Path(__file__).parent / "results" / "alfworld" / "baseline"
SPLIT = "valid_unseen"


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The exact binomial interval of k successes in n trials (bisection on the binomial tail; no scipy needed)."""
    def tail_ge(p: float) -> float:  # P(X >= k)
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))

    def solve(f, target: float) -> float:  # f increasing in p
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2
    if n == 0:
        return 0.0, 1.0
    low = 0.0 if k == 0 else solve(tail_ge, alpha / 2)
    # the upper end: P(X <= k) = alpha/2, that is P(X > k) = 1 - alpha/2 (increasing in p)
    high = 1.0 if k == n else solve(lambda p: tail_ge(p) - math.comb(n, k) * p ** k * (1 - p) ** (n - k),
                                    1 - alpha / 2)
    return low, high


def bootstrap_games(per_game: list[tuple[int, int]], reps: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the pooled step accuracy, resampling whole games."""
    if not per_game:
        return 0.0, 1.0
    rng = random.Random(seed)
    stats = []
    for _ in range(reps):
        draw = [per_game[rng.randrange(len(per_game))] for _ in per_game]
        steps = sum(n for _, n in draw)
        stats.append(sum(k for k, _ in draw) / steps if steps else 0.0)
    stats.sort()
    return stats[int(0.025 * reps)], stats[int(0.975 * reps) - 1]


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {"protocol": args.protocol, "seed": args.seed, "model": args.model, "engine": "hf",
            "temperature": 0.0, "max_new_tokens": args.max_new_tokens, "batch_size": 16, "max_steps": 50,
            "split": SPLIT}


def run_chunk(args: argparse.Namespace, index: int, refs: list[Any], work: Path) -> dict[str, Any]:
    """One `genenv evaluate` call on a folder holding copies of these games; its result and samples."""
    chunk = work / f"chunk{index:03d}"
    if chunk.exists():
        shutil.rmtree(chunk)
    for ref in refs:
        trial = ref.path.parent
        shutil.copytree(trial, chunk / "data" / "json_2.1.1" / SPLIT / trial.parent.name / trial.name)
    cmd = ["nice", "-n", str(args.nice), sys.executable, "-m", "genenv_cli", "evaluate", "--bench", "alfworld",
           "--model", args.model, "--data", str((chunk / "data").resolve()), "--protocol", args.protocol,
           "--set", f"evaluate.max_new_tokens={args.max_new_tokens}",
           "--set", "evaluate.temperature=0.0", "--set", "evaluate.batch_size=16", "--set", "evaluate.max_steps=50",
           "--label", f"c{index:03d}", "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    (chunk / "run").mkdir()  # the working folder: evaluate writes evals/alfworld/ there
    log = chunk / "evaluate.log"  # its progress, to follow a long chunk
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, text=True, env=env, cwd=chunk / "run")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"genenv evaluate failed on chunk {index} (exit {proc.returncode}):\n"
                         f"{log.read_text()[-4000:]}")
    folder = chunk / "run" / "evals" / "alfworld"
    result_file = next(p for p in folder.glob("*.json"))
    result = json.loads(result_file.read_text())
    samples = [json.loads(line) for line in (folder / result["samples"]["path"]).read_text().splitlines()]
    return {"result": result, "samples": samples, "wall_seconds": wall,
            "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def game_records(protocol: str, refs: list[Any], chunk: dict[str, Any], index: int) -> list[dict[str, Any]]:
    by_game: dict[str, list[dict[str, Any]]] = {}
    for s in chunk["samples"]:
        by_game.setdefault(s["id"].split("#")[0], []).append(s)
    share = {"chunk": index, "chunk_games": len(refs), "chunk_wall_seconds": round(chunk["wall_seconds"], 1),
             "chunk_cpu_seconds": round(chunk["cpu_seconds"], 1)}
    out = []
    for ref in refs:
        rows = by_game.get(ref.id, [])
        if protocol == "official":
            (row,) = rows
            out.append({"game": ref.id, "task_type": ref.task_type, "won": bool(row["correct"]),
                        "steps": int(row.get("scores", {}).get("steps", 0)), "end": row.get("end"),
                        "reason": row.get("reason"), **share})
        else:
            out.append({"game": ref.id, "task_type": ref.task_type, "steps": len(rows),
                        "correct": sum(bool(r["correct"]) for r in rows), **share})
    return out


def summarize(protocol: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    chunks = {r["chunk"]: r for r in records}
    wall = sum(r["chunk_wall_seconds"] for r in chunks.values())
    cpu = sum(r["chunk_cpu_seconds"] for r in chunks.values())
    block: dict[str, Any] = {"games": len(records), "wall_seconds_per_game": round(wall / max(len(records), 1), 1),
                             "cpu_seconds_per_game": round(cpu / max(len(records), 1), 1)}
    types = sorted({r["task_type"] for r in records})
    if protocol == "official":
        won = sum(r["won"] for r in records)
        lo, hi = clopper_pearson(won, len(records))
        block.update({"won": won, "success_rate": round(100 * won / max(len(records), 1), 2),
                      "ci95_clopper_pearson": [round(100 * lo, 2), round(100 * hi, 2)],
                      "ends": {e: sum(r["end"] == e for r in records) for e in sorted({str(r["end"]) for r in records})},
                      "mean_steps": round(sum(r["steps"] for r in records) / max(len(records), 1), 1),
                      "per_task_type": {t: {"games": sum(r["task_type"] == t for r in records),
                                            "won": sum(r["won"] for r in records if r["task_type"] == t)}
                                        for t in types}})
    else:
        steps = sum(r["steps"] for r in records)
        right = sum(r["correct"] for r in records)
        lo, hi = clopper_pearson(right, steps)
        blo, bhi = bootstrap_games([(r["correct"], r["steps"]) for r in records])
        block.update({"steps": steps, "correct": right, "step_accuracy": round(100 * right / max(steps, 1), 2),
                      "ci95_clopper_pearson_steps": [round(100 * lo, 2), round(100 * hi, 2)],
                      "ci95_bootstrap_over_games": [round(100 * blo, 2), round(100 * bhi, 2)],
                      "per_task_type": {t: {"games": sum(r["task_type"] == t for r in records),
                                            "steps": sum(r["steps"] for r in records if r["task_type"] == t),
                                            "correct": sum(r["correct"] for r in records if r["task_type"] == t)}
                                        for t in types}})
    return block


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the folder holding json_2.1.1/valid_unseen")
    ap.add_argument("--protocol", choices=["official", "paper"], required=True)
    ap.add_argument("--games", type=int, default=None, help="the first N games of the seeded order (default all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the games' order")
    ap.add_argument("--chunk", type=int, default=8, help="games per genenv evaluate call")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each evaluate call")
    ap.add_argument("--nice", type=int, default=5)
    ap.add_argument("--stop-after", type=float, default=None, help="start no chunk after this many seconds")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--note", default="", help="a line recorded in summary.json (the load, why a run is partial)")
    ap.add_argument("--work", type=Path, default=Path(".alfworld-baseline-runs"))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    refs = collect_games(args.data / "json_2.1.1" / SPLIT)
    order = sorted(refs, key=lambda r: r.id)
    random.Random(args.seed).shuffle(order)
    planned = order[:args.games]
    out = args.out / args.protocol
    out.mkdir(parents=True, exist_ok=True)
    log, sample_log, settings_file = out / "games.jsonl", out / "samples.jsonl", out / "settings.json"
    settings = settings_of(args)
    if settings_file.exists() and json.loads(settings_file.read_text()) != settings:
        raise SystemExit(f"{settings_file} records other settings; give another --out to keep both")
    settings_file.write_text(json.dumps(settings, indent=1) + "\n")
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    done = {r["game"] for r in records}
    todo = [r for r in planned if r.id not in done]
    start = time.perf_counter()
    index = max((r["chunk"] for r in records), default=-1) + 1
    while todo and not args.summarize_only:
        if args.stop_after is not None and time.perf_counter() - start > args.stop_after:
            print(f"stopping: {args.stop_after} s passed; {len(todo)} games not played", flush=True)
            break
        batch, todo = todo[:args.chunk], todo[args.chunk:]
        chunk = run_chunk(args, index, batch, args.work / args.protocol)
        new = game_records(args.protocol, batch, chunk, index)
        with log.open("a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in new)
        with sample_log.open("a") as fh:
            fh.writelines(json.dumps({k: s.get(k) for k in ("id", "category", "output", "parsed", "correct",
                                                            "reason", "end", "scores")}) + "\n"
                          for s in chunk["samples"])
        records += new
        shutil.rmtree(args.work / args.protocol / f"chunk{index:03d}", ignore_errors=True)
        print(f"chunk {index}: {len(new)} games, {chunk['wall_seconds']:.0f} s wall, {chunk['cpu_seconds']:.0f} s "
              f"CPU; recorded {len(records)} of {len(planned)}: {json.dumps(summarize(args.protocol, new))}",
              flush=True)
        index += 1
    order_ids = [r.id for r in order]
    summary = {"what": f"the model's ALFWorld scores on {SPLIT}, {args.protocol} protocol, through genenv evaluate",
               "command": "python -m experiments.alfworld_baseline " + " ".join(
                   "DIR" if a == str(args.data) else a for a in (argv or sys.argv[1:])),
               "selection": f"the first {len(planned)} games of a permutation of the split's {len(refs)} sorted ids "
                            f"drawn with random.Random({args.seed}).shuffle; recorded: the first {len(records)}"
                            if len(planned) < len(refs) or len(records) < len(refs) else f"all {len(refs)} games",
               "games_planned": len(planned), "games_in_split": len(refs), "settings": settings,
               "note": args.note, "alfworld": alfworld_version(), "machine": machine(), "versions": versions(),
               "commit": git_commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "recorded_are_order_prefix": sorted(order_ids.index(r["game"]) for r in records)
               == list(range(len(records))),
               **summarize(args.protocol, records)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("machine", "versions")}, indent=2))
    return summary


if __name__ == "__main__":
    main()
