"""CPU seconds of whole ALFWorld games under the official protocol, with the hf engine's key/value reuse across
turns and without it (every turn's prompt read in full), on the same games, model and settings.

    python -m benchmarks.speed.alfworld_game_cpu --data DIR [--games 1] [--model embedded] [--max-new-tokens 48]
                                                 [--arms reuse,no_reuse] [--threads 1] [--name NAME]

DIR holds `json_2.1.1/valid_unseen`. The games are the first `--games` of the split's sorted ids shuffled with
`random.Random(0)` (experiments/alfworld_baseline.py's order), played together through `machinery.episodes.play_episodes`
(what `genenv evaluate` runs), greedy. Each arm records the process's CPU seconds (model loading excluded), the
wall seconds, the turns played, the prompt tokens sent and those the engine computed (sent less reused), and the
transcripts' digest: with greedy decoding both arms must play the same game. Needs the alfworld extra. Writes
results/alfworld_game_cpu/<NAME>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from pathlib import Path

from benchmarks.speed.common import write_result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--games", type=int, default=1)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--arms", default="reuse,no_reuse")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--name", default="alfworld_game_cpu")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from genenv_cli.families.alfworld.benchmark import ALFWorld
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.episodes import play_episodes
    from genenv_cli.machinery.models import resolve

    bench = ALFWorld(max_steps=args.max_steps)
    loaded = bench.load(data=args.data, split="valid_unseen", version=None, protocol="official",
                        cache_dir=Path("/nonexistent"))
    order = sorted(s.id for s in loaded.samples)
    random.Random(0).shuffle(order)
    by_id = {s.id: s for s in loaded.samples}
    samples = [by_id[i] for i in order[:args.games]]
    engine = HFEngine(resolve(args.model), device="cpu", dtype="float32", batch_size=args.batch_size)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens, n=1, seed=0)
    arms = {}
    for arm in args.arms.split(","):
        engine.reuse_cache = arm == "reuse"
        stats: dict[str, int] = {}
        cpu, wall = time.process_time(), time.perf_counter()
        played = play_episodes(bench, samples, engine, params, args.max_steps, context_limit=engine.context_limit(),
                               stats=stats)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        digest = hashlib.sha256(json.dumps([t for t, _ in played]).encode()).hexdigest()[:16]
        arms[arm] = {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "cpu_s_per_game": round(cpu / len(samples), 1),
                     "turns": stats["prompts"], "prompt_tokens_sent": stats["prompt_tokens"],
                     "prompt_tokens_computed": stats["prompt_tokens"] - stats["cached_tokens"],
                     "cache_hit_rate": round(stats["cached_tokens"] / max(1, stats["prompt_tokens"]), 3),
                     "longest_prompt": stats["longest_prompt"],
                     "won": sum(bool(v.correct) for _, v in played),
                     "ends": sorted({v.end or "" for _, v in played}), "transcripts_sha256": digest}
        print(arm, json.dumps(arms[arm]), flush=True)
    figures: dict = {"games": [s.id for s in samples], "arms": arms}
    if {"reuse", "no_reuse"} <= set(arms):
        figures["no_reuse_over_reuse_cpu"] = round(arms["no_reuse"]["cpu_s"] / arms["reuse"]["cpu_s"], 2)
        figures["same_transcripts"] = arms["reuse"]["transcripts_sha256"] == arms["no_reuse"]["transcripts_sha256"]
    write_result("alfworld_game_cpu", args.name, figures,
                 settings=vars(args) | {"data": "json_2.1.1/valid_unseen (alfworld-download's files)",
                                        "protocol": "official", "commands": bench.commands, "temperature": 0.0,
                                        "engine": "hf", "dtype": "float32", "model_path": engine.ref.path,
                                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                                        "timed": "play_episodes only (model loaded once, outside the timing)"})


if __name__ == "__main__":
    main()
