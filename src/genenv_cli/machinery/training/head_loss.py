"""Both updates' per-token terms from the hidden states: the output projection (the LM head) is applied a chunk of
positions at a time inside the loss, forward and backward, so that no (batch x positions x vocabulary) tensor exists:
neither the logits, nor the reference's logits, nor their gradient, nor accelerate's float32 copy of them.

The chunked losses of target_logps.py and rwr.py still took the logits of the whole batch as their input, and with
them their float32 conversion, the reference's logits and the logits' gradient and its cast: about 14 bytes x
vocabulary per target token for update-env (12.6 measured on an H200). Here the loss takes the last hidden states
(batch x positions x hidden, a few hundred times smaller) and the head's weight; each chunk computes its logits
(`hidden @ weight.T` in the compute dtype, as the head computes them under autocast), the same per-position
operations as target_logps.chunk_logp and kl_chunk_terms on them, and in the backward pass computes them again and
turns their gradient straight into the gradients of the hidden states and of the weight (accumulated in float32).
What stays across the chunk loop is the hidden states, their gradient, the weight's gradient (only when the head
trains: full fine-tuning) and one chunk's temporaries (memory_plan.LOSS_CHUNK_ELEMENTS).

This is the technique of Liger-Kernel's fused linear cross-entropy, written in plain torch so that it runs on a CPU
as on a GPU, and for our two losses (log p of the target at a temperature; the exact KL against a second model),
which Liger has not. logits.py decides when it applies (`logits.completion_hidden`) and falls back to the logits
otherwise.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.machinery.training.target_logps import chunk_logp, chunk_positions, kl_chunk_terms


def compute_dtype(hidden: Any, weight: Any) -> Any:
    """The dtype the head's matrix product runs in: autocast's where autocast is on (as nn.Linear would under it),
    else the weight's."""
    import torch

    kind = hidden.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return weight.dtype


class _Head:
    """The head's weight and bias in the compute dtype (cast once per pass, not per chunk), and a chunk's logits."""

    def __init__(self, weight: Any, bias: Any, dtype: Any) -> None:
        self.weight = weight.to(dtype)
        self.bias = bias.to(dtype) if bias is not None else None
        self.dtype = dtype

    def logits(self, hidden: Any) -> Any:
        import torch

        rows = hidden.reshape(-1, hidden.shape[-1]).to(self.dtype)  # 2-D: one matrix product, no batched one
        return torch.nn.functional.linear(rows, self.weight, self.bias).reshape(*hidden.shape[:-1], -1)


def _backward_chunk(dz: Any, h: Any, head: _Head, grads: dict[str, Any], s: int, e: int, wants: tuple) -> None:
    """Turn one chunk's logits gradient `dz` (float32) into the hidden states' (written to grads["h"][:, s:e]) and,
    where they train, the weight's and bias's (added to float32 accumulators)."""
    flat = dz.reshape(-1, dz.shape[-1]).to(head.dtype)  # the gradient the head's backward receives, in its dtype
    grads["h"][:, s:e] = (flat @ head.weight).reshape(*dz.shape[:-1], -1).to(grads["h"].dtype)
    if wants[1]:
        grads["w"] += (flat.T @ h[:, s:e].reshape(-1, h.shape[-1]).to(head.dtype)).float()
    if wants[2]:
        grads["b"] += flat.float().sum(0)


def _grads(h: Any, weight: Any, bias: Any, wants: tuple) -> dict[str, Any]:
    import torch

    return {"h": torch.empty_like(h),
            "w": torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if wants[1] else None,
            "b": torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if wants[2] else None}


def _result(grads: dict[str, Any], weight: Any, bias: Any) -> tuple[Any, Any, Any]:
    w = grads["w"].to(weight.dtype) if grads["w"] is not None else None
    b = grads["b"].to(bias.dtype) if grads["b"] is not None else None
    return grads["h"], w, b


def head_target_logps(hidden: Any, weight: Any, bias: Any, targets: Any, temperature: float = 1.0,
                      chunk: int | None = None) -> Any:
    """(B, T) log p(targets) under `(hidden @ weight.T + bias) / temperature`, in float32, from the hidden states
    (B, T, H): target_logps.target_logps of the head's logits, without them. Differentiable in hidden, weight, bias."""
    import torch

    class _TargetLogps(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, w, b, tgt):
            dtype = compute_dtype(h, w)
            step = chunk or chunk_positions(h.shape[0], h.shape[1], w.shape[0])
            out = torch.empty(h.shape[:2], dtype=torch.promote_types(dtype, torch.float32), device=h.device)
            with torch.autocast(h.device.type, enabled=False):
                head = _Head(w, b, dtype)
                for s in range(0, h.shape[1], step):
                    out[:, s:s + step], _ = chunk_logp(head.logits(h[:, s:s + step]), tgt[:, s:s + step], temperature)
            ctx.save_for_backward(h, w, b, tgt)
            ctx.step, ctx.dtype = step, dtype
            return out

        @staticmethod
        def backward(ctx, g):
            h, w, b, tgt = ctx.saved_tensors
            wants = ctx.needs_input_grad
            grads = _grads(h, w, b, wants)
            scale = 1.0 if temperature in (0.0, 1.0) else 1.0 / temperature
            with torch.no_grad(), torch.autocast(h.device.type, enabled=False):
                head = _Head(w, b, ctx.dtype)
                for s in range(0, h.shape[1], ctx.step):
                    e = s + ctx.step
                    _, logp = chunk_logp(head.logits(h[:, s:e]), tgt[:, s:e], temperature)
                    gs = g[:, s:e, None].to(logp.dtype) * scale
                    d = logp.exp_().mul_(-gs)  # d log p_y / dz = (onehot(y) - p) / T
                    d.scatter_add_(-1, tgt[:, s:e, None], gs)
                    _backward_chunk(d, h, head, grads, s, e, wants)
            return (*_result(grads, w, b), None)

    return _TargetLogps.apply(hidden, weight, bias, targets)


def head_token_terms(hidden: Any, weight: Any, bias: Any, ref_hidden: Any, ref_weight: Any, ref_bias: Any,
                     targets: Any, chunk: int | None = None) -> tuple[Any, Any]:
    """(log p of each target token, exact KL(p || q) at each position), both (B, T) float32: rwr.token_terms of the
    head's logits and of the reference head's (`ref_hidden @ ref_weight.T + ref_bias`, no gradient), without either.
    Differentiable in hidden, weight, bias."""
    import torch

    class _TokenTerms(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, w, b, rh, rw, rb, tgt):
            dtype, ref_dtype = compute_dtype(h, w), compute_dtype(rh, rw)
            step = chunk or chunk_positions(h.shape[0], h.shape[1], w.shape[0])
            tok = torch.empty(h.shape[:2], dtype=torch.promote_types(dtype, torch.float32), device=h.device)
            kl = torch.empty_like(tok)
            with torch.autocast(h.device.type, enabled=False):
                head, ref = _Head(w, b, dtype), _Head(rw, rb, ref_dtype)
                for s in range(0, h.shape[1], step):
                    e = s + step
                    tok[:, s:e], kl[:, s:e], _, _ = kl_chunk_terms(head.logits(h[:, s:e]), ref.logits(rh[:, s:e]),
                                                                 tgt[:, s:e])
            ctx.save_for_backward(h, w, b, rh, rw, rb, tgt, kl)
            ctx.step, ctx.dtypes = step, (dtype, ref_dtype)
            return tok, kl

        @staticmethod
        def backward(ctx, g_tok, g_kl):
            h, w, b, rh, rw, rb, tgt, kl = ctx.saved_tensors
            wants = ctx.needs_input_grad
            grads = _grads(h, w, b, wants)
            with torch.no_grad(), torch.autocast(h.device.type, enabled=False):
                head, ref = _Head(w, b, ctx.dtypes[0]), _Head(rw, rb, ctx.dtypes[1])
                for s in range(0, h.shape[1], ctx.step):
                    e = s + ctx.step
                    _, _, logp, diff = kl_chunk_terms(head.logits(h[:, s:e]), ref.logits(rh[:, s:e]), tgt[:, s:e])
                    p = logp.exp_()
                    # d log p_y / dz = onehot(y) - p;  d KL / dz = p (log p - log q - KL): in place, in diff's memory
                    d = diff.sub_(kl[:, s:e, None]).mul_(g_kl[:, s:e, None]).sub_(g_tok[:, s:e, None]).mul_(p)
                    del p, logp
                    d.scatter_add_(-1, tgt[:, s:e, None], g_tok[:, s:e, None].to(d.dtype))
                    _backward_chunk(d, h, head, grads, s, e, wants)
            return (*_result(grads, w, b), None, None, None, None)

    ref_bias = ref_bias.detach() if ref_bias is not None else None
    return _TokenTerms.apply(hidden, weight, bias, ref_hidden.detach(), ref_weight.detach(), ref_bias, targets)


def head_rwr_loss(hidden: Any, weight: Any, bias: Any, ref_hidden: Any, ref_weight: Any, ref_bias: Any, targets: Any,
                  mask: Any, weights: Any, *, kl_coef: float) -> tuple[Any, Any, Any]:
    """rwr.rwr_loss from the hidden states: (loss, weighted nll, mean KL)."""
    tok_logp, kl_tok = head_token_terms(hidden, weight, bias, ref_hidden, ref_weight, ref_bias, targets)
    per_seq_nll = -(tok_logp * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    nll = (weights * per_seq_nll).mean()
    kl = (kl_tok * mask).sum() / mask.sum().clamp(min=1.0)
    return nll + kl_coef * kl, nll, kl
