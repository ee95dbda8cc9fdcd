"""Engine overhead: `genenv rollout` tokens/s against a bare transformers `generate` loop over the same prompts,
model, sampling settings and batch size, measured in one process. Goal: ratio >= 0.95.

    python -m benchmarks.speed.engine_overhead [--domain arith] [--tasks 32] [--k 4] [--max-new-tokens 32] [--repeat 2]

Both sides load the model from the same folder, batch the same sequences in the same order (longest prompt
first), seed each batch the same way and sample with temperature 1, top-p 1, no top-k, so they draw the same
tokens; the rollout side also records every sampled token's logprob and writes rollouts.jsonl. Runs alternate
(bare, genenv, bare, genenv ...) and the best of each is kept. Writes benchmarks/speed/results/engine_overhead/engine_overhead-<domain>.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import write_result


def bare_loop(model_dir: str, conversations: list, k: int, batch_size: int, max_new_tokens: int, seed: int) -> int:
    """What a user would write with transformers alone; returns the number of generated tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model.eval()
    eos = tok.eos_token_id
    prompts = [tok(tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for c in conversations]
    jobs = sorted(((i, s) for i in range(len(prompts)) for s in range(k)), key=lambda j: (-len(prompts[j[0]]), j))
    total = 0
    for b, start in enumerate(range(0, len(jobs), batch_size)):
        batch = [prompts[i] for i, _ in jobs[start:start + batch_size]]
        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, p in enumerate(batch):
            ids[r, width - len(p):] = torch.tensor(p)
            mask[r, width - len(p):] = 1
        torch.manual_seed(seed + b)
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                                 top_k=0, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=eos)
        for row in out[:, width:].tolist():
            total += next((j + 1 for j, t in enumerate(row) if t == eos), len(row))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from genenv_cli.checkpoints import derive_seed
    from genenv_cli.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.domains import get_domain
    from genenv_cli.models import ensure_embedded
    from genenv_cli.pools import read_jsonl
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks, rollout

    model_dir = str(ensure_embedded())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        data = apply_overrides({"run": {"domain": args.domain}, "env": {"mode": "seeds"}}, [
            f"generate.tasks_per_epoch={args.tasks}", f"rollout.group_size={args.k}",
            f"rollout.max_new_tokens={args.max_new_tokens}", f"rollout.batch_size={args.batch_size}",
            "rollout.temperature=1.0", "rollout.top_p=1.0"])
        (root / "genenv.toml").write_text(render_config(config_from_dict(data, "bench")))
        run = RunDir(root)
        cfg = run.load_config()
        generate_tasks.run(run, cfg, 1)
        domain = get_domain(args.domain)
        tasks = read_jsonl(run.epoch_dir(1) / "tasks.jsonl", "tasks")
        convs = [domain.agent_messages(t["payload"]) for t in tasks]
        seed = derive_seed(cfg.run.seed, "rollout", 1)
        bare, ours = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            n_bare = bare_loop(model_dir, convs, args.k, args.batch_size, args.max_new_tokens, seed)
            bare.append((n_bare, time.perf_counter() - t))
            t = time.perf_counter()
            result = rollout.run(run, cfg, 1, force=True)
            ours.append((result.manifest["counts"]["completion_tokens"], time.perf_counter() - t))
    best_bare = max(n / s for n, s in bare)
    best_ours = max(n / s for n, s in ours)
    figures = {
        "bare_generate_tokens_per_s": round(best_bare, 1),
        "genenv_rollout_tokens_per_s": round(best_ours, 1),
        "ratio": round(best_ours / best_bare, 3),
        "goal_met": best_ours / best_bare >= 0.95,
        "tokens": {"bare": bare[0][0], "genenv": ours[0][0]},
        "runs": {"bare": [[n, round(s, 2)] for n, s in bare], "genenv": [[n, round(s, 2)] for n, s in ours]},
    }
    write_result("engine_overhead", f"engine_overhead-{args.domain}", figures, goal="genenv rollout tok/s >= 0.95 x bare transformers generate",
                 settings=vars(args) | {"model": "embedded (SmolLM2-135M-Instruct, float32)", "device": "cpu",
                                        "timed": "model load + generation (+ rollouts.parquet write on the genenv side)"})


if __name__ == "__main__":
    main()
