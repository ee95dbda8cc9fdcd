"""Which engine on CPU at an epoch's real size: genenv's two engines on the curriculum epoch's two generation
workloads, the agent's rollout and the environment's task writing.

    python -m benchmarks.speed.engine_workloads                      # every side, one after another
    python -m benchmarks.speed.engine_workloads --sides hf vllm-bf16-all-cores

Workloads (the curriculum experiment's settings, experiments/curriculum.py):
  rollout  48 arith tasks (the seed set's first 48) x K 8 samples, temperature 1, top-p 1, at most 16 new tokens
  env      the environment's first round: 9 conditioning contexts (arith seeds, no agent statistics yet, as at
           epoch 1) x n 4 variations, temperature 0.7, top-p 0.95, at most 24 new tokens
Sides: genenv's `hf` engine (float32, what `run.dtype = auto` is on CPU) and its `vllm` engine on vLLM's CPU build in
float32 and bfloat16, each with vLLM's own thread binding (on a 2-core machine it binds its OpenMP threads to one core
and reserves the other) and with every core bound (`VLLM_CPU_OMP_THREADS_BIND=0-N`, `VLLM_CPU_NUM_OF_RESERVED_CPU=0`).
Each side runs in its own process (vLLM reads its variables when it starts), opens the engine once (timed apart:
`start_s`, paid by every stage that generates) and generates both workloads with it (`generate_s`). A stage's
cost is its start plus its generation: `stage_s`. The `hf` engine also runs each workload a second time, as the
first pays for warming up. One measurement per side: read the ratios, and check `uptime` first.
Writes results/engine_compare/engine_workloads.json.
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

ROLLOUT = {"tasks": 48, "k": 8, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16}
ENV = {"contexts": 9, "n": 4, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 24}


def sides(cores: int) -> dict[str, dict[str, Any]]:
    every = {"VLLM_CPU_OMP_THREADS_BIND": f"0-{cores - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    return {
        "hf": {"engine": "hf", "dtype": "float32", "env": {}},
        "vllm-fp32": {"engine": "vllm", "dtype": "float32", "env": {}},
        "vllm-bf16": {"engine": "vllm", "dtype": "bfloat16", "env": {}},
        "vllm-fp32-all-cores": {"engine": "vllm", "dtype": "float32", "env": every},
        "vllm-bf16-all-cores": {"engine": "vllm", "dtype": "bfloat16", "env": every},
    }


def workloads() -> dict[str, tuple[list[Any], Any]]:
    """name -> (conversations, SamplingParams): the rollout's and the environment's, as the stages build them."""
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.domains.base import EnvContext
    from genenv_cli.machinery.engines import SamplingParams

    dom = get_domain("arith")
    seeds = dom.seeds("train")
    agent = [dom.agent_messages(s.payload) for s in seeds[:ROLLOUT["tasks"]]]
    env = [dom.env_messages(EnvContext(s.id, s.shape, s.payload, None, None, [])) for s in seeds[:ENV["contexts"]]]
    return {
        "rollout": (agent, SamplingParams(temperature=ROLLOUT["temperature"], top_p=ROLLOUT["top_p"],
                                          max_new_tokens=ROLLOUT["max_new_tokens"], n=ROLLOUT["k"], seed=1)),
        "env": (env, SamplingParams(temperature=ENV["temperature"], top_p=ENV["top_p"],
                                    max_new_tokens=ENV["max_new_tokens"], n=ENV["n"], seed=2)),
    }


def measure(side: str, cores: int) -> dict[str, Any]:
    """In this process (its environment already set): open the engine, generate both workloads."""
    import torch

    from genenv_cli.catalogue.settings import VLLMConfig
    from genenv_cli.machinery.engines import open_engine
    from genenv_cli.machinery.models import resolve

    spec = sides(cores)[side]
    torch.set_num_threads(cores)
    t = time.perf_counter()
    engine = open_engine(resolve("embedded"), engine=spec["engine"], device="cpu", dtype=spec["dtype"],
                         batch_size=64, seed=0, vllm_settings=VLLMConfig())
    start = time.perf_counter() - t
    out: dict[str, Any] = {"start_s": round(start, 1)}
    try:
        for name, (convs, params) in workloads().items():
            runs = 2 if spec["engine"] == "hf" else 1
            for _ in range(runs):
                t = time.perf_counter()
                gens = engine.generate(convs, params)
                seconds = time.perf_counter() - t
            tokens = sum(len(g.token_ids) for gs in gens for g in gs)
            out[name] = {"sequences": sum(len(gs) for gs in gens), "tokens": tokens, "generate_s": round(seconds, 2),
                         "tokens_per_s": round(tokens / seconds, 1), "stage_s": round(start + seconds, 1),
                         "runs": runs}
    finally:
        engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sides", nargs="*", default=None, help="which sides (default: every one)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child: measure this side, print JSON
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    if args.one:
        print("RESULT " + json.dumps(measure(args.one, cores)), flush=True)
        return

    from benchmarks.speed.common import write_result

    figures: dict[str, Any] = {}
    names = args.sides or list(sides(cores))
    settings = {"rollout": ROLLOUT, "env": ENV, "model": "embedded (SmolLM2-135M-Instruct)", "cores": cores,
                "sides": {n: sides(cores)[n] for n in names}}
    load = {}
    for name in names:
        env = {**os.environ, **sides(cores)[name]["env"], "OMP_NUM_THREADS": str(cores)}
        before = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, "-m", "benchmarks.speed.engine_workloads", "--one", name], env=env,
                              cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=False,
                              timeout=3600, stdin=subprocess.DEVNULL)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            figures[name] = {"error": (proc.stderr or proc.stdout)[-600:]}
        else:
            figures[name] = json.loads(lines[-1][len("RESULT "):])
        load[name] = round(before, 2)
        print(name, json.dumps(figures[name]), flush=True)
        write_result("engine_compare", "engine_workloads", {"sides": figures, "complete": False},
                     settings=settings, load_average_before=load)
    ok = {n: f for n, f in figures.items() if "error" not in f}
    best = {w: min(ok, key=lambda n: ok[n][w]["stage_s"]) for w in ("rollout", "env")} if ok else {}
    write_result("engine_compare", "engine_workloads", {"sides": figures, "complete": True,
                                                        "fastest_stage": best}, settings=settings,
                 load_average_before=load)


if __name__ == "__main__":
    main()
