"""Scoring throughput: `genenv score` end to end (the command, start-up included) on a synthetic tool_call
epoch of 1,000,000 rollouts. Goal: >= 100,000 rollouts/s on this machine; peak memory recorded.

    python -m benchmarks.speed.score_throughput [--rollouts 1000000] [--k 8]

The synthetic epoch has rollouts/K tasks taken from the seed set, K rollouts each, whose completions are drawn
from five per task (the right calls twice, a wrong argument, truncated JSON, prose), with 24 prompt and 16-40
completion tokens each. Writes benchmarks/speed/results/score_throughput/score_throughput.json.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import complete_stage, genenv_cmd, write_epoch_files, write_result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    from genenv_cli.catalogue.config import Config, render_config
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks, rollout

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        (root / "genenv.toml").write_text(render_config(Config()))
        run = RunDir(root)
        staging = Path(tmp) / "staging"
        t = time.perf_counter()
        write_epoch_files(staging, 1, args.rollouts // args.k, args.k, random.Random(0))
        e = staging / "epochs" / "0001"
        complete_stage(run, generate_tasks, 1, {"tasks": e / "tasks.jsonl", "rejects": lambda p: p.write_text("")})
        complete_stage(run, rollout, 1, {"rollouts": e / "rollouts.parquet"})
        size_mb = (run.epoch_dir(1) / "rollouts.parquet").stat().st_size / 2**20
        print(f"synthetic epoch written in {time.perf_counter() - t:.0f}s ({size_mb:.0f} MB of rollouts)")
        runs = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            subprocess.run([*genenv_cmd(), "score", "--epoch", "1", "--run", str(root), "--force", "--quiet"],
                           check=True)
            runs.append(time.perf_counter() - t)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        import json

        manifest = json.loads(run.manifest_path(1, "score").read_text())
    best = min(runs)
    figures = {
        "rollouts": args.rollouts, "tasks": args.rollouts // args.k,
        "distinct_completions_graded": manifest["counts"]["graded_distinct"],
        "seconds": round(best, 2), "rollouts_per_s": round(args.rollouts / best),
        "goal_met": args.rollouts / best >= 100_000, "peak_rss_mb": round(peak_mb),
        "rollouts_parquet_mb": round(size_mb), "stage_seconds_in_manifest": manifest["seconds"],
        "all_runs_s": [round(r, 2) for r in runs],
    }
    write_result("score_throughput", "score_throughput", figures,
                 goal=">= 100,000 rollouts/s end to end (genenv score, one command)")


if __name__ == "__main__":
    main()
