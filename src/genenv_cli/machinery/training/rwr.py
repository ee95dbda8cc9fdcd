"""Reward-weighted regression for the environment, with a KL leash to the initial simulator.

Loss of a batch: `mean_i( w_rel_i * NLL_i ) + kl_coef * KL`, where NLL_i is the token-mean negative
log-likelihood of pair i's target (the environment's raw output, end-of-turn token included) given its
conditioning context, `w_rel_i = N * exp(lambda R_i) / sum_j exp(lambda R_j)` (the normalised RWR weight,
rescaled to mean 1 so the loss has the size of a plain SFT loss), and KL is the exact per-token
KL(pi_theta || pi_init) over the vocabulary at the target positions.

Before every optimizer step the step's KL to the initial model (which reflects every step taken so far), the
token mean over all its micro-batches on all ranks, is compared with `kl_max`; past it, that step is not taken and
the update stops (`KLCapReached`, training/step_stats.py), at the same step in every layout.

Memory. The per-token terms (the target token's log-probability and the exact KL) need the log-softmax of both
models over the whole vocabulary. Computed for the whole batch at once, in float32, with autograd keeping what
it needs for the backward pass, that was about 24 bytes x vocabulary per target token (44 GB at 8 x 1,500 target
tokens of Qwen's 152k vocabulary). `token_terms` computes them in chunks of positions instead, with the same
operations per position (so the same numbers), and its backward pass recomputes each chunk and writes its
gradient, `g_tok (onehot - p) + g_kl p (log p - log q - kl)`, straight into the logits' gradient: what stays is
the logits, the reference's logits and that gradient, plus one chunk's float32 temporaries
(memory_plan.LOSS_CHUNK_ELEMENTS). No library we use has this loss in chunked form (TRL's and Liger's chunked
losses are cross-entropy and sampled-token KL estimators, not the exact KL against a second model's logits).
That is the route from logits; the update itself (`batch_loss`) takes the hidden states instead and applies both
models' heads a chunk at a time inside the same per-position operations (training/head_loss.py), so that neither
logits tensor nor their gradient exists for the whole batch.
"""

from __future__ import annotations

from typing import Any


def rwr_loss(logits: Any, ref_logits: Any, targets: Any, mask: Any, weights: Any, *, kl_coef: float) -> tuple[Any, Any, Any]:
    """(loss, weighted nll, mean KL). logits/ref_logits: (B, T, V) at the target positions; targets, mask (B, T);
    weights (B,) with mean 1 over the whole update."""
    tok_logp, kl_tok = token_terms(logits, ref_logits, targets)
    per_seq_nll = -(tok_logp * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    nll = (weights * per_seq_nll).mean()
    kl = (kl_tok * mask).sum() / mask.sum().clamp(min=1.0)
    return nll + kl_coef * kl, nll, kl


def token_terms(logits: Any, ref_logits: Any, targets: Any, chunk: int | None = None) -> tuple[Any, Any]:
    """(log p of each target token, exact KL(p || q) at each position), both (B, T) in float32, for logits (B, T, V)
    and the reference's `ref_logits` (no gradient flows to them), in chunks of `chunk` positions (default
    `target_logps.chunk_positions`). Differentiable in `logits`; the module docstring says how it saves memory."""
    import torch

    from genenv_cli.machinery.training.target_logps import chunk_positions, kl_chunk_terms

    class _TokenTerms(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, ref, tgt):
            step = chunk or chunk_positions(z.shape[0], z.shape[1], z.shape[-1])
            tok = torch.empty(z.shape[:2], dtype=torch.promote_types(z.dtype, torch.float32), device=z.device)
            kl = torch.empty_like(tok)
            for s in range(0, z.shape[1], step):
                tok[:, s:s + step], kl[:, s:s + step], _, _ = kl_chunk_terms(z[:, s:s + step], ref[:, s:s + step],
                                                                            tgt[:, s:s + step])
            ctx.save_for_backward(z, ref, tgt, kl)
            ctx.step = step
            return tok, kl

        @staticmethod
        def backward(ctx, g_tok, g_kl):
            z, ref, tgt, kl = ctx.saved_tensors
            grad = torch.empty_like(z)
            for s in range(0, z.shape[1], ctx.step):
                e = s + ctx.step
                with torch.no_grad():
                    _, _, logp, diff = kl_chunk_terms(z[:, s:e], ref[:, s:e], tgt[:, s:e])
                    p = logp.exp()
                    # d log p_y / dz = onehot(y) - p;  d KL / dz = p (log p - log q - KL)
                    g = p * (diff - kl[:, s:e, None]) * g_kl[:, s:e, None] - p * g_tok[:, s:e, None]
                    g.scatter_add_(-1, tgt[:, s:e, None], g_tok[:, s:e, None].to(g.dtype))
                    grad[:, s:e] = g.to(grad.dtype)
            return grad, None, None

    return _TokenTerms.apply(logits, ref_logits.detach(), targets)


def collate(rows: list[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    import torch

    from genenv_cli.machinery.training.logits import pad_pairs

    ids, attn, tmask = pad_pairs([r["prompt_ids"] for r in rows], [r["target_ids"] for r in rows], pad_id)
    return {"input_ids": ids, "attention_mask": attn, "target_mask": tmask,
            "weights": torch.tensor([r["weight_rel"] for r in rows], dtype=torch.float32)}


def batch_loss(model: Any, policy: Any, ids: Any, attn: Any, n: int, mask: Any, weights: Any, *,
               kl_coef: float) -> tuple[Any, Any, Any]:
    """rwr_loss of a batch whose targets are its last `n` columns: from the hidden states of the model and of the
    reference, the heads applied a chunk at a time inside the loss (training/head_loss.py), where both models allow
    it (logits.plain_head); else from their logits."""
    import torch

    from genenv_cli.machinery.training.logits import (
        completion_hidden,
        completion_logits,
        head_weights,
        plain_head,
    )

    reference = policy.reference_model()
    if plain_head(model) is not None and plain_head(reference) is not None:
        from genenv_cli.machinery.training.head_loss import head_rwr_loss

        hidden, head = completion_hidden(model, ids, attn, n)
        with torch.no_grad(), policy.reference_context():
            ref_hidden, ref_head = completion_hidden(reference, ids, attn, n)
            ref_weights = head_weights(ref_head)
        return head_rwr_loss(hidden, *head_weights(head), ref_hidden, *ref_weights, ids[:, -n:], mask, weights,
                             kl_coef=kl_coef)
    logits = completion_logits(model, ids, attn, n)
    with torch.no_grad(), policy.reference_context():
        ref_logits = completion_logits(reference, ids, attn, n)
    return rwr_loss(logits, ref_logits, ids[:, -n:], mask, weights, kl_coef=kl_coef)
