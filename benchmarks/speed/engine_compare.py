"""Which engine on CPU: generated tokens/s on the rollout workload, in one run, of bare vLLM (`LLM.generate`, its CPU
build), bare transformers `generate`, and genenv's rollout stage on each engine.

    python -m benchmarks.speed.engine_compare [--domain arith] [--tasks 16] [--k 8] [--max-new-tokens 48]
                                        [--vllm-dtypes float32] [--hf-dtypes float32]

Every side gets the same prompts (the domain's tasks, as the rollout stage builds them), k samples each, temperature 1,
top-p 1, at most --max-new-tokens; the vLLM sides a seed per prompt, as genenv's engine (--unseeded adds one without). Model loading and engine start-up are timed apart and left out of the tokens/s
(they are paid once per stage: see `start_s`); genenv's sides are the rollout stage less its engine's opening. The
transformers sides batch --batch-size sequences at a time, as the hf engine does. One measurement per side, one after
another: on a busy machine read the figures as a ratio, not to the decimal. vLLM spawns processes: run as a script.
Writes benchmarks/speed/results/engine_compare/engine_compare-<domain>.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import write_result
from benchmarks.speed.engine_overhead import bare_vllm, generate_batches, prepare_run, timed_rollout


def bare_hf(model_dir: str, conversations: list, k: int, batch_size: int, max_new_tokens: int, seed: int,
            dtype: str) -> tuple[int, float, float]:
    """transformers alone, model load apart: (generated tokens, generation seconds, load seconds)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    load = time.perf_counter() - t
    t = time.perf_counter()
    total = generate_batches(model, tok, conversations, k, batch_size, max_new_tokens, seed)
    return total, time.perf_counter() - t, load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--vllm-dtypes", nargs="*", default=["float32"])
    ap.add_argument("--hf-dtypes", nargs="*", default=["float32"])
    ap.add_argument("--unseeded", action="store_true",
                    help="also bare vLLM without per-prompt seeds (what vllm.seeding = \"engine\" costs less)")
    args = ap.parse_args()

    from genenv_cli.machinery.models import ensure_embedded

    model_dir = str(ensure_embedded())
    sides: dict[str, dict] = {}
    settings = vars(args) | {"model": "embedded (SmolLM2-135M-Instruct)", "sampling": "temperature 1, top-p 1",
                             "timed": "generation only; model load / engine start-up in start_s"}

    def record(name: str, tokens: int, seconds: float, start: float) -> None:
        sides[name] = {"tokens": tokens, "generate_s": round(seconds, 2), "start_s": round(start, 1),
                       "tokens_per_s": round(tokens / seconds, 1)}
        print(f"{name}: {sides[name]}", flush=True)
        # written after every side: a run stopped part way keeps what it measured
        write_result("engine_compare", f"engine_compare-{args.domain}", {"sides": sides, "complete": False}, settings=settings)

    with tempfile.TemporaryDirectory() as tmp:
        for engine in ("vllm", "hf"):
            run, cfg, convs, seed = prepare_run(Path(tmp) / engine, args.domain, args.tasks, args.k,
                                                args.max_new_tokens, args.batch_size, engine)
            if engine == "vllm":
                for dtype in args.vllm_dtypes:
                    record(f"bare vLLM LLM.generate ({dtype})",
                           *bare_vllm(model_dir, convs, args.k, args.max_new_tokens, seed, cfg.run.seed, dtype))
                if args.unseeded:
                    record(f"bare vLLM LLM.generate ({args.vllm_dtypes[0]}, engine seed only)",
                           *bare_vllm(model_dir, convs, args.k, args.max_new_tokens, seed, cfg.run.seed,
                                      args.vllm_dtypes[0], seeded=False))
            else:
                for dtype in args.hf_dtypes:
                    record(f"bare transformers generate ({dtype})",
                           *bare_hf(model_dir, convs, args.k, args.batch_size, args.max_new_tokens, seed, dtype))
            tokens, seconds, opened = timed_rollout(run, cfg)
            record(f"genenv rollout, run.engine = {engine} (dtype auto)", tokens, seconds - opened, opened)
    fastest = max(sides, key=lambda n: sides[n]["tokens_per_s"])
    hf_rollout = sides["genenv rollout, run.engine = hf (dtype auto)"]["tokens_per_s"]
    vllm_rollout = sides["genenv rollout, run.engine = vllm (dtype auto)"]["tokens_per_s"]
    figures = {"sides": sides, "complete": True, "fastest": fastest,
               "rollout_vllm_over_hf": round(vllm_rollout / hf_rollout, 2)}
    write_result("engine_compare", f"engine_compare-{args.domain}", figures, settings=settings,
                 note="one measurement per side, in sequence, on a shared 2-core machine with other jobs running: "
                      "the figures are noisy; the ratio between engines is the finding")


if __name__ == "__main__":
    main()
