"""Reference losses the chunked ones are checked against (tests/training/test_rwr_chunks.py, and on a GPU
tests/engines/test_on_gpu.py)."""

import torch


def whole_vocabulary(logits, ref_logits, targets, mask, weights, *, kl_coef):
    """rwr_loss as it was: every full-vocabulary tensor of the batch in float32 at once."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    tok_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    per_seq_nll = -(tok_logp * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    nll = (weights * per_seq_nll).mean()
    ref_logp = torch.log_softmax(ref_logits.float(), dim=-1)
    kl_tok = (logp.exp() * (logp - ref_logp)).sum(-1)
    kl = (kl_tok * mask).sum() / mask.sum().clamp(min=1.0)
    return nll + kl_coef * kl, nll, kl
