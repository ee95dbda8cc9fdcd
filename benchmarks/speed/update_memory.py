"""update-env's loss step on CPU, from the model: peak memory of one forward and backward pass (the policy's forward,
the reference's, the loss, the backward pass through the model), the code at a commit against this checkout's, at
several vocabulary sizes.

    python -m benchmarks.speed.update_memory [--vocab 32000 151936] [--before 48cda1d] [--batch 4] [--positions 256]

The "before" arm imports genenv from `git archive <before>` (there the loss took the logits of the whole batch);
the "after" arm from this checkout's src/ (the head applied inside the loss, training/head_loss.py). Each arm runs in
its own process: a Qwen2-shaped model with random weights (2 layers, hidden 256, untied head; `--mode full`: a second
one as the frozen reference, `lora`: an adapter on q/v whose reference is the adapter switched off), a batch of
`--batch` rows of 64 prompt and `--positions` target tokens, all built first; then the peak resident memory is reset
(/proc/self/clear_refs) and the step runs. The figure is the peak (VmHWM) above what the inputs held. Every tensor
an operation allocates is also counted (a dispatch mode, views excluded): the largest, against batch x positions x
vocabulary. Both arms must give the same loss, NLL and KL. The machine's load average is recorded (memory, unlike
time, does not depend on it). Writes benchmarks/speed/results/update_memory/update_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import write_result

ROOT = Path(__file__).resolve().parents[2]
PROMPT = 64
HIDDEN = 256


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _loss(model, policy, ids, attn, n, mask, weights):
    """update-env's compute_loss as the imported genenv has it."""
    import torch

    from genenv_cli.machinery.training import rwr

    if hasattr(rwr, "batch_loss"):
        return rwr.batch_loss(model, policy, ids, attn, n, mask, weights, kl_coef=0.1)
    from genenv_cli.machinery.training.logits import (
        completion_logits,  # the code before: the logits of the whole batch
    )

    logits = completion_logits(model, ids, attn, n)
    with torch.no_grad(), policy.reference_context():
        ref_logits = completion_logits(policy.reference_model(), ids, attn, n)
    return rwr.rwr_loss(logits, ref_logits, ids[:, -n:], mask, weights, kl_coef=0.1)


def child(args: argparse.Namespace) -> None:
    """One arm, in this process: prints one JSON line."""
    import gc

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from genenv_cli.machinery.training.logits import pad_pairs
    from genenv_cli.machinery.training.policy_loading import Policy

    def build(seed):
        torch.manual_seed(seed)
        cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                          tie_word_embeddings=False, pad_token_id=0)
        model = Qwen2ForCausalLM(cfg)
        model.config.use_cache = False
        return model

    model, reference = build(0).train(), None
    if args.mode == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                 task_type="CAUSAL_LM", init_lora_weights=False))
    else:
        reference = build(1).eval().requires_grad_(False)
    policy = Policy(model=model, tokenizer=None, lora=args.mode == "lora", base_name="bench", reference=reference)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, args.vocab, (PROMPT,), generator=g).tolist() for _ in range(args.batch)]
    targets = [torch.randint(1, args.vocab, (args.positions,), generator=g).tolist() for _ in range(args.batch)]
    ids, attn, mask = pad_pairs(prompts, targets, 0)
    weights = torch.rand(args.batch, generator=g) + 0.5
    n = mask.shape[1]

    class Largest(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            out = func(*a, **(kw or {}))
            if all(r.alias_info is None for r in func._schema.returns):
                for t in (out if isinstance(out, (tuple, list)) else (out,)):
                    if isinstance(t, torch.Tensor):
                        Largest.largest = max(Largest.largest, t.numel())
            return out

    gc.collect()
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:  # the peak (VmHWM) starts again from here
        fh.write("5")
    t = time.perf_counter()
    with Largest():
        loss, nll, kl = _loss(model, policy, ids, attn, n, mask, weights)
        loss.backward()
    seconds = time.perf_counter() - t
    peak = _status_kb("VmHWM")
    grads = [p.grad.float() for p in model.parameters() if p.grad is not None]
    print(json.dumps({"peak_above_inputs_mb": round((peak - base) / 1024, 1), "inputs_mb": round(base / 1024, 1),
                      "largest_tensor_elements": Largest.largest, "batch_positions_vocab": args.batch * n * args.vocab,
                      "seconds": round(seconds, 2), "loss": loss.item(), "nll": nll.item(), "kl": kl.item(),
                      "grad_sq_sum": float(sum(x.pow(2).sum() for x in grads))}))


def arm(args: argparse.Namespace, vocab: int, mode: str, src: Path) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.speed.update_memory", "--child", "--mode", mode, "--batch",
           str(args.batch), "--positions", str(args.positions), "--vocab", str(vocab)]
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{ROOT}", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    if out.returncode != 0:
        raise SystemExit(f"the {mode} arm at vocabulary {vocab} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--positions", type=int, default=256)
    ap.add_argument("--vocab", type=int, nargs="+", default=[32000, 151936])
    ap.add_argument("--mode", nargs="+", default=["lora", "full"])
    ap.add_argument("--before", default="48cda1d", help="the commit whose genenv is the 'before' arm")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.vocab, args.mode = args.vocab[0], args.mode[0]
        child(args)
        return
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.before, "src"], capture_output=True, cwd=ROOT, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        for vocab in args.vocab:
            for mode in args.mode:
                before, after = arm(args, vocab, mode, Path(tmp) / "src"), arm(args, vocab, mode, ROOT / "src")
                rel = {k: abs(before[k] - after[k]) / max(abs(before[k]), 1e-30) for k in ("loss", "nll", "kl",
                                                                                         "grad_sq_sum")}
                figures[f"{mode}-vocab{vocab}"] = {
                    "before": before, "after": after,
                    "peak_ratio_before_to_after": round(before["peak_above_inputs_mb"]
                                                        / max(after["peak_above_inputs_mb"], 0.1), 2),
                    "relative_difference": {k: float(f"{v:.3g}") for k, v in rel.items()}}
                print(mode, vocab, json.dumps(figures[f"{mode}-vocab{vocab}"]), flush=True)
    write_result("update_memory", "update_memory", figures,
                 settings={"batch": args.batch, "prompt": PROMPT, "positions": args.positions, "hidden": HIDDEN,
                           "layers": 2, "before": args.before, "kl_coef": 0.1, "device": "cpu", "dtype": "float32",
                           "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                           "peak": "VmHWM after the forward and backward pass, less VmRSS with the inputs built"})


if __name__ == "__main__":
    main()
