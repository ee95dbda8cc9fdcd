"""log p(target token) from full-vocabulary logits, in chunks of positions, for the agent's GRPO (and every caller of
logits.token_logps: the old policy, the reference, the mismatch measurement).

Written as `log_softmax(logits.float() / T).gather(targets)`, autograd keeps a float32 copy of the logits, their
log-softmax, and in the backward pass a float32 gradient of each plus the logits' own: about 16 bytes x vocabulary
per completion token, measured on an H200 (benchmarks/speed/results/gpu/), where the logits themselves are 2 in
bf16. This function does the same operations per position, a chunk at a time, and its backward pass recomputes each
chunk's softmax and writes `g (onehot - p) / T` straight into the logits' gradient: what stays is the logits and
that gradient, plus one chunk's float32 temporaries. TRL's `selective_log_softmax` saves the forward's memory but
leaves the backward to autograd; no library we use has the chunked backward. Where the model's head can be taken
out of its forward (logits.completion_hidden), training/head_loss.py goes one step further and does not take the
logits at all.
"""

from __future__ import annotations

from typing import Any


def chunk_positions(batch: int, positions: int, vocab: int) -> int:
    """Positions per chunk: as many as keep a chunk's (batch x positions x vocab) float32 tensors under
    memory_plan.LOSS_CHUNK_ELEMENTS elements each, at least one.

    >>> chunk_positions(8, 1500, 152064)
    27
    """
    from genenv_cli.core.memory_plan import LOSS_CHUNK_ELEMENTS

    return max(1, min(positions, LOSS_CHUNK_ELEMENTS // max(1, batch * vocab)))


def chunk_logp(z: Any, tgt: Any, temperature: float) -> tuple[Any, Any]:
    """(log p of the targets, log p) of one chunk, in float32 (float64 for float64 logits)."""
    import torch

    work = z.to(torch.promote_types(z.dtype, torch.float32))
    if temperature not in (0.0, 1.0):
        work = work / temperature
    logp = torch.log_softmax(work, dim=-1)
    return logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1), logp


def kl_chunk_terms(logits: Any, ref_logits: Any, targets: Any) -> tuple[Any, Any, Any, Any]:
    """update-env's per-position terms of one chunk (training/rwr.py, training/head_loss.py): (log p of the targets,
    exact KL(p || q) per position, log p, log p - log q), in float32 (float64 for float64 logits)."""
    import torch

    tok_logp, logp = chunk_logp(logits, targets, 1.0)
    diff = logp - torch.log_softmax(ref_logits.to(logp.dtype), dim=-1)
    kl_tok = (logp.exp() * diff).sum(-1)
    return tok_logp, kl_tok, logp, diff


def target_logps(logits: Any, targets: Any, temperature: float = 1.0, chunk: int | None = None) -> Any:
    """(B, T) log-probabilities of `targets` (B, T) under `logits / temperature` (B, T, V), in float32;
    differentiable in `logits` (module docstring)."""
    import torch

    class _TargetLogps(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, tgt):
            step = chunk or chunk_positions(z.shape[0], z.shape[1], z.shape[-1])
            out = torch.empty(z.shape[:2], dtype=torch.promote_types(z.dtype, torch.float32), device=z.device)
            for s in range(0, z.shape[1], step):
                out[:, s:s + step], _ = chunk_logp(z[:, s:s + step], tgt[:, s:s + step], temperature)
            ctx.save_for_backward(z, tgt)
            ctx.step = step
            return out

        @staticmethod
        def backward(ctx, g):
            z, tgt = ctx.saved_tensors
            grad = torch.empty_like(z)
            scale = 1.0 if temperature in (0.0, 1.0) else 1.0 / temperature
            for s in range(0, z.shape[1], ctx.step):
                e = s + ctx.step
                with torch.no_grad():
                    _, logp = chunk_logp(z[:, s:e], tgt[:, s:e], temperature)
                    gs = g[:, s:e, None].to(logp.dtype) * scale
                    d = logp.exp_().mul_(-gs)  # d log p_y / dz = (onehot(y) - p) / T
                    d.scatter_add_(-1, tgt[:, s:e, None], gs)
                    grad[:, s:e] = d.to(grad.dtype)
            return grad, None

    return _TargetLogps.apply(logits, targets)
