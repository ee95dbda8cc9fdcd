"""The GPU check's precision part: what genenv's precision story (docs/gpus.md, "Precision") does on a GPU.

Two measurements, each in its own process (check.py):

- `routes`: update-agent, full fine-tuning in bf16 (`run.dtype = "bfloat16"`, `grad_accum` 2), on the plain one-GPU
  route and on the FSDP route over one process (`accelerate launch --num_processes 1` with
  pipelines/accelerate/fsdp-full-shard.yaml), from the same pool: the dtypes each trainer held (its manifest's
  `counts.precision`), each step's gradient norm before clipping and loss, and how far the final weights differ
  against how far the one-GPU route moved them;
- `reduce`: FSDP2 itself on the same model, 4 micro-batches accumulated with gradient sync off between them (as
  accelerate does under `grad_accum` 4), once with genenv's policy (`reduce_dtype` float32) and once with
  accelerate's own for bf16 (`reduce_dtype` bf16): each accumulated gradient against the float64 sum of the
  micro-batches' own gradients, and the dtype the unsharded gradients were held in between micro-batches.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FSDP_CONFIG = ROOT / "pipelines" / "accelerate" / "fsdp-full-shard.yaml"
SIZES = {"gpu": {"batch": 4, "length": 256, "lr": 1e-5}, "dry": {"batch": 2, "length": 16, "lr": 1e-5}}


def route_settings(dry: bool) -> list[str]:
    return ["agent_update.lora=false", "agent_update.grad_accum=2", "agent_update.passes=1",
            f"agent_update.learning_rate={SIZES['dry' if dry else 'gpu']['lr']}", "agent_update.warmup_ratio=0",
            "agent_update.kl_coef=0", "agent_update.gradient_checkpointing=false", "run.dtype=bfloat16"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _trained(run: Path) -> dict[str, Any]:
    """The trained checkpoint's tensors (float32, CPU), its manifest, its steps and the log's distributed type."""
    import polars as pl
    from safetensors.torch import load_file

    folder = run / "epochs" / "0001" / "agent"
    tensors: dict[str, Any] = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update({k: v.float() for k, v in load_file(str(f)).items()})
    manifest = json.loads((run / "epochs" / "0001" / "manifests" / "update-agent.json").read_text())
    steps = pl.read_parquet(run / "epochs" / "0001" / "agent_update_steps.parquet").to_dicts()
    log = (run / "logs" / "update-agent.log").read_text() if (run / "logs" / "update-agent.log").exists() else ""
    kind = re.search(r"\(accelerate: (\w+),", log)
    return {"tensors": tensors, "manifest": manifest, "steps": steps, "accelerate": kind.group(1) if kind else None}


def compare_routes(check: Any, prepared_run: str, model_dir: str) -> dict[str, Any]:
    """Run the two routes on copies of a prepared run directory (an agent pool scored in epoch 1, training
    `model_dir`) and compare them."""
    sets = [a for s in route_settings(check.dry) for a in ("--set", s)]
    runs = {}
    for route in ("one-gpu", "fsdp"):
        folder = check.work / f"precision-{route}"
        shutil.copytree(prepared_run, folder)
        genenv = ["-m", "genenv_cli", "update-agent", "--epoch", "1", "--run", str(folder), *sets]
        cmd = [sys.executable, *genenv] if route == "one-gpu" else [
            sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG), "--num_processes",
            "1", "--main_process_port", str(_free_port()), *genenv]
        done = check.run(cmd, timeout=check.budget())
        if done.returncode != 0:
            raise RuntimeError(((done.stdout or "") + (done.stderr or ""))[-1500:])
        runs[route] = _trained(folder)
    one, fsdp = runs["one-gpu"], runs["fsdp"]
    start = _start(model_dir)
    moved = diff = 0.0
    worst = 0.0
    for name, w in one["tensors"].items():
        if name not in fsdp["tensors"] or name not in start:
            continue
        move = (w - start[name]).abs()
        d = (fsdp["tensors"][name] - w).abs()
        moved, diff = moved + float(move.sum()), diff + float(d.sum())
        if float(move.max()) > 0:
            worst = max(worst, float(d.max() / move.max()))
    steps = []
    for a, b in zip(one["steps"], fsdp["steps"], strict=False):
        steps.append({"step": a["step"], "grad_norm_one_gpu": a["grad_norm"], "grad_norm_fsdp": b["grad_norm"],
                      "loss_one_gpu": a["loss"], "loss_fsdp": b["loss"]})
    return {"settings": route_settings(check.dry),
            "precision": {"one-gpu": one["manifest"]["counts"].get("precision"),
                          "fsdp": fsdp["manifest"]["counts"].get("precision")},
            "accelerate": {"one-gpu": one["accelerate"], "fsdp": fsdp["accelerate"]},
            "steps": steps,
            "weights_mean_diff_over_mean_move": round(diff / moved, 6) if moved else None,
            "weights_worst_tensor_max_diff_over_max_move": round(worst, 6)}


def _start(model_dir: str) -> dict[str, Any]:
    """The starting weights, float32."""
    from safetensors.torch import load_file

    out: dict[str, Any] = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        out.update({k: v.float() for k, v in load_file(str(f)).items()})
    return out


def part_reduce(model_dir: str, dry: bool) -> dict[str, Any]:
    """FSDP2's gradient accumulation over 4 micro-batches, reduce_dtype float32 against bf16 (module docstring).
    Runs in this process over a process group of one."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM

    cuda = torch.cuda.is_available() and not dry
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    size = SIZES["dry" if dry else "gpu"]
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    base.config.use_cache = False
    vocab = base.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    micro = [torch.randint(100, min(vocab, 30000), (size["batch"], size["length"]), generator=gen).to(device)
             for _ in range(4)]

    def sharded(reduce: Any) -> Any:
        m = copy.deepcopy(base)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce, output_dtype=torch.bfloat16)
        for layer in m.model.layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(m, mp_policy=policy)
        return m

    def grads(m: Any) -> dict[str, Any]:
        return {n: (p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad).double().clone()
                for n, p in m.named_parameters() if p.grad is not None}

    # the reference: each micro-batch's gradient on its own (synced, float32), summed in float64
    ref_model = sharded(torch.float32)
    reference: dict[str, Any] = {}
    for ids in micro:
        ref_model.zero_grad(set_to_none=True)
        ref_model(input_ids=ids, labels=ids).loss.backward()
        for n, g in grads(ref_model).items():
            reference[n] = reference.get(n, 0) + g
    out: dict[str, Any] = {"micro_batches": 4, "batch": size["batch"], "length": size["length"],
                           "device": str(device)}
    for label, reduce in (("reduce_float32", torch.float32), ("reduce_bfloat16", torch.bfloat16)):
        m = sharded(reduce)
        held = set()
        for i, ids in enumerate(micro):
            m.set_requires_gradient_sync(i == len(micro) - 1)   # accelerate's no_sync between micro-steps
            m(input_ids=ids, labels=ids).loss.backward()
            if i == 1:
                for module in m.modules():
                    group = getattr(module._get_fsdp_state(), "_fsdp_param_group", None) \
                        if hasattr(module, "_get_fsdp_state") else None
                    for fp in getattr(group, "fsdp_params", None) or []:
                        acc = fp.unsharded_accumulated_grad
                        g = acc if acc is not None else fp._unsharded_param.grad
                        if g is not None:
                            held.add(str(g.dtype).replace("torch.", ""))
        got = grads(m)
        num = sum(float((got[n] - reference[n]).pow(2).sum()) for n in reference)
        den = sum(float(reference[n].pow(2).sum()) for n in reference)
        out[label] = {"relative_error_vs_float64_sum": float(f"{(num / den) ** 0.5:.6g}") if den else None,
                      "accumulated_in": sorted(held)}
        del m
    dist.destroy_process_group()
    return out
