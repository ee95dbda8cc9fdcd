"""What a process of a multi-process update needs to know of the others: its rank and the world's size, a mean
over the ranks, and closing the process group cleanly."""

from __future__ import annotations

import os
from typing import Any


def world() -> tuple[int, int]:
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def finish_distributed() -> None:
    """Every rank waits for the others, then the process group is closed (without it, about one
    torchrun in nine aborted at exit)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def all_mean(value: Any) -> float:
    """The mean of a number (a float or a one-element tensor) over all ranks (the number itself alone), read
    back with one device synchronisation."""
    import torch
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if isinstance(value, torch.Tensor):
            t = value.detach().reshape(1).to(torch.float64)
        else:
            # nccl reduces on this rank's own GPU (pick_device made it the current one)
            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
            t = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return float(t.item()) / dist.get_world_size()
    return float(value.item()) if isinstance(value, torch.Tensor) else value


def all_reduce_floats(values: list[float], op: str = "sum") -> list[float]:
    """Numbers summed (op "sum") or maximised ("max") elementwise over all ranks, in float64, with one collective
    (the numbers themselves alone)."""
    import torch
    import torch.distributed as dist

    if not values or not (dist.is_available() and dist.is_initialized()):
        return list(values)
    device = "cpu"
    if "nccl" in str(dist.get_backend()) and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())   # nccl reduces on this rank's own GPU
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return t.cpu().tolist()
