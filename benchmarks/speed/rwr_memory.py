"""update-env's loss on CPU: peak memory of one forward and backward pass of `rwr_loss`, the code before the exact KL
was computed in chunks of positions against the current code, on the same logits.

    python -m benchmarks.speed.rwr_memory [--batch 4] [--positions 256] [--vocab 151936] [--before b6f7938]

Each arm runs in its own process (a fresh allocator and peak counter): the logits (B x positions x vocabulary, with
a gradient) and the reference's logits are built first, then the peak resident memory is reset
(/proc/self/clear_refs) and the loss's forward and backward pass run; the figure is the peak above what the inputs
already held. The "before" arm is `rwr.py` as the commit `--before` has it (read with `git show`), the "after" arm
the installed genenv's. Both arms must give the same loss, NLL and KL, and gradients of the same size (their sums are
recorded). Arms in float32 (CPU training) and bfloat16 (the logits a GPU's autocast gives the loss). Qwen2.5's
vocabulary by default; the machine's load average is recorded beside the figures (memory, unlike time, does not
depend on it). Writes benchmarks/speed/results/rwr_memory/rwr_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from benchmarks.speed.common import write_result

ROOT = Path(__file__).resolve().parents[2]
RWR = "src/genenv_cli/machinery/training/rwr.py"


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(args: argparse.Namespace) -> None:
    """One arm, in this process: prints one JSON line."""
    import torch

    if args.source:
        module = types.ModuleType("rwr_before")
        exec(compile(Path(args.source).read_text(), "rwr_before", "exec"), module.__dict__)  # noqa: S102 - our own file at a commit
        loss_fn = module.rwr_loss
    else:
        from genenv_cli.machinery.training.rwr import rwr_loss as loss_fn
    dtype = getattr(torch, args.dtype)
    g = torch.Generator().manual_seed(0)
    shape = (args.batch, args.positions, args.vocab)
    logits = (torch.randn(shape, generator=g) * 2).to(dtype).requires_grad_()
    ref = (torch.randn(shape, generator=g) * 2).to(dtype)
    targets = torch.randint(0, args.vocab, shape[:2], generator=g)
    mask = (torch.rand(shape[:2], generator=g) > 0.1).float()
    weights = torch.rand(args.batch, generator=g) + 0.5
    import gc

    gc.collect()
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:  # the peak (VmHWM) starts again from here
        fh.write("5")
    t = time.perf_counter()
    loss, nll, kl = loss_fn(logits, ref, targets, mask, weights, kl_coef=0.1)
    loss.backward()
    seconds = time.perf_counter() - t
    peak = _status_kb("VmHWM")
    grad = logits.grad.float()
    print(json.dumps({"peak_above_inputs_mb": round((peak - base) / 1024, 1), "inputs_mb": round(base / 1024, 1),
                      "seconds": round(seconds, 2), "loss": loss.item(), "nll": nll.item(), "kl": kl.item(),
                      "grad_abs_sum": grad.abs().sum().item(), "grad_sq_sum": grad.pow(2).sum().item()}))


def arm(args: argparse.Namespace, dtype: str, source: str | None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.speed.rwr_memory", "--child", "--dtype", dtype, "--batch",
           str(args.batch), "--positions", str(args.positions), "--vocab", str(args.vocab)]
    if source:
        cmd += ["--source", source]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False,
                         env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
    if out.returncode != 0:
        raise SystemExit(f"the {dtype} arm failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--positions", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--before", default="b6f7938", help="the commit whose rwr.py is the 'before' arm")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--source", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.dtype = args.dtype[0]
        child(args)
        return
    old = subprocess.run(["git", "show", f"{args.before}:{RWR}"], capture_output=True, text=True, cwd=ROOT, check=True)
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "rwr_before.py"
        source.write_text(old.stdout)
        for dtype in args.dtype:
            before, after = arm(args, dtype, str(source)), arm(args, dtype, None)
            same = all(before[k] == after[k] for k in ("loss", "nll", "kl"))
            grad_rel = abs(before["grad_sq_sum"] - after["grad_sq_sum"]) / max(before["grad_sq_sum"], 1e-30)
            figures[dtype] = {"before": before, "after": after,
                              "peak_ratio_before_to_after": round(before["peak_above_inputs_mb"]
                                                                  / max(after["peak_above_inputs_mb"], 0.1), 2),
                              "same_loss_nll_kl": same, "grad_sq_sum_relative_difference": float(f"{grad_rel:.3g}")}
            print(dtype, json.dumps(figures[dtype]), flush=True)
    write_result("rwr_memory", "rwr_memory", figures,
                 settings={"batch": args.batch, "positions": args.positions, "vocab": args.vocab,
                           "before": args.before, "kl_coef": 0.1, "device": "cpu",
                           "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                           "peak": "VmHWM after the forward and backward pass, less VmRSS with the inputs built"})


if __name__ == "__main__":
    main()
