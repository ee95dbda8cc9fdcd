"""Run one genenv command in this process and record what it used, for the GPU check.

    python -m benchmarks.gpu.probe OUT.json update-agent --epoch 1 --run DIR

Writes OUT.json: the command's exit status and wall time; the peak GPU memory torch's allocator saw (allocated and
reserved; null without CUDA) and the allocator setting it ran with; the peak host memory: the process's anonymous
memory (what it allocated itself, sampled every 10 ms; file pages such as a memory-mapped checkpoint are not counted)
and VmHWM (everything resident, file pages included); and what the update's loss was handed (`loss_inputs`): the
route (`head`: hidden states, the head applied inside the loss; `logits`), the dtype of the tensor the model's
forward gave the loss, and the dtype the head's product ran in; and the GPU peak while accelerate prepared the model
(`prepare_gpu_allocated_peak_gb`: under FSDP with cpu_ram_efficient_loading, the weights moved to the meta device,
sharded and rank 0's broadcast into the shards).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def watch_loss_inputs(seen: dict) -> None:
    """Record, once, what the losses receive: wraps logits.completion_logits (the model's forward, whose output is
    the hidden states where the head is taken out) and head_loss.compute_dtype."""
    from genenv_cli.machinery.training import head_loss, logits

    forward, dtype_of = logits.completion_logits, head_loss.compute_dtype

    def completion_logits(model, *args, **kwargs):
        out = forward(model, *args, **kwargs)
        if "output_dtype" not in seen:
            head = logits.plain_head(model)
            seen["route"] = "logits" if head is None or head.forward is not logits._passthrough else "head"
            seen["output_dtype"] = str(out.dtype).replace("torch.", "")
            seen["output_width"] = int(out.shape[-1])
        return out

    def compute_dtype(hidden, weight):
        got = dtype_of(hidden, weight)
        seen.setdefault("head_compute_dtype", str(got).replace("torch.", ""))
        seen.setdefault("head_weight_dtype", str(weight.dtype).replace("torch.", ""))
        return got

    logits.completion_logits, head_loss.compute_dtype = completion_logits, compute_dtype


def watch_prepare(seen: dict) -> None:
    """Record the allocator's peak over `Accelerator.prepare` (reset before, read after), once."""
    import accelerate

    prepare = accelerate.Accelerator.prepare

    def measured(self, *args, **kwargs):
        import torch

        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        if cuda:
            torch.cuda.synchronize()
            before = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        out = prepare(self, *args, **kwargs)
        if cuda and "prepare_gpu_allocated_peak_gb" not in seen:
            torch.cuda.synchronize()
            seen["prepare_gpu_allocated_peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 3)
            seen["before_prepare_gpu_allocated_peak_gb"] = round(before / 1e9, 3)
        seen.setdefault("prepared", True)
        return out

    accelerate.Accelerator.prepare = measured


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    peak = {"anon_kb": _status_kb("RssAnon")}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak["anon_kb"] = max(peak["anon_kb"], _status_kb("RssAnon"))

    threading.Thread(target=sample, daemon=True).start()
    seen: dict = {}
    watch_loss_inputs(seen)
    prepared: dict = {}
    watch_prepare(prepared)
    sys.argv = ["genenv", *args]
    t = time.perf_counter()
    code = 0
    try:
        from genenv_cli.cli import main as genenv

        genenv()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        seconds = time.perf_counter() - t
        done.set()
        record = {"args": args, "exit": code, "seconds": round(seconds, 2),
                  "host_anon_peak_gb": round(max(peak["anon_kb"], _status_kb("RssAnon")) * 1024 / 1e9, 3),
                  "host_hwm_gb": round(_status_kb("VmHWM") * 1024 / 1e9, 3),
                  "gpu_allocated_peak_gb": None, "gpu_reserved_peak_gb": None, "loss_inputs": seen,
                  "prepare": prepared,
                  "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            record["gpu_allocated_peak_gb"] = max(round(torch.cuda.max_memory_allocated() / 1e9, 3),
                                                  prepared.get("before_prepare_gpu_allocated_peak_gb", 0.0))
            record["gpu_reserved_peak_gb"] = round(torch.cuda.max_memory_reserved() / 1e9, 3)
        with open(out, "w") as fh:
            json.dump(record, fh)
    sys.exit(code)


if __name__ == "__main__":
    main()
