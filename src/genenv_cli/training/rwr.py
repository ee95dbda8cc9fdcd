"""Reward-weighted regression for the environment, with a KL leash to the initial simulator.

Loss of a batch: `mean_i( w_rel_i * NLL_i ) + kl_coef * KL`, where NLL_i is the token-mean negative
log-likelihood of pair i's target (the environment's raw output, end-of-turn token included) given its
conditioning context, `w_rel_i = N * exp(lambda R_i) / sum_j exp(lambda R_j)` (the normalised RWR weight,
rescaled to mean 1 so the loss has the size of a plain SFT loss), and KL is the exact per-token
KL(pi_theta || pi_init) over the vocabulary at the target positions.

Before every optimizer step the batch's KL to the initial model (which reflects every step taken so far) is
compared with `kl_max`; past it, that step is not taken and the update stops (`KLCapReached`). The decision
is averaged over ranks first, so every process stops at the same step.
"""

from __future__ import annotations

from typing import Any


class KLCapReached(Exception):
    """The environment drifted past kl_max from the initial model; the update stops here."""


def rwr_loss(logits: Any, ref_logits: Any, targets: Any, mask: Any, weights: Any, *, kl_coef: float) -> tuple[Any, Any, Any]:
    """(loss, weighted nll, mean KL). logits/ref_logits: (B, T, V) at the target positions; targets, mask (B, T);
    weights (B,) with mean 1 over the whole update."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    tok_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    per_seq_nll = -(tok_logp * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    nll = (weights * per_seq_nll).mean()
    ref_logp = torch.log_softmax(ref_logits.float(), dim=-1)
    kl_tok = (logp.exp() * (logp - ref_logp)).sum(-1)
    kl = (kl_tok * mask).sum() / mask.sum().clamp(min=1.0)
    return nll + kl_coef * kl, nll, kl


def collate(rows: list[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    import torch

    from genenv_cli.training.common import pad_pairs

    ids, attn, tmask = pad_pairs([r["prompt_ids"] for r in rows], [r["target_ids"] for r in rows], pad_id)
    return {"input_ids": ids, "attention_mask": attn, "target_mask": tmask,
            "weights": torch.tensor([r["weight_rel"] for r in rows], dtype=torch.float32)}


def make_trainer(policy: Any, args: Any, rows: list[dict[str, Any]], *, kl_coef: float, kl_max: float) -> Any:
    """A Trainer whose loss is `rwr_loss` on the rows (prompt_ids, target_ids, weight_rel, and `group`: rows of
    one group, the generations of one conditioning context, share micro-batches; see common.grouped_order)."""
    import torch
    from transformers import Trainer

    from genenv_cli.training.common import all_mean, attach_recorder, completion_logits, grouped_order

    pad_id = policy.tokenizer.pad_token_id
    groups = [r.get("group", i) for i, r in enumerate(rows)]

    class WeightedSFT(Trainer):
        def _get_train_sampler(self, *args, **kwargs):  # the variations of one context share a micro-batch
            return grouped_order(groups, self.args.seed)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            n = inputs["target_mask"].shape[1]
            ids, attn = inputs["input_ids"], inputs["attention_mask"]
            logits = completion_logits(model, ids, attn, n)
            with torch.no_grad(), policy.reference_context():
                ref_logits = completion_logits(policy.reference_model(), ids, attn, n)
            loss, nll, kl = rwr_loss(logits, ref_logits, ids[:, -n:], inputs["target_mask"], inputs["weights"],
                                     kl_coef=kl_coef)
            kl_all = all_mean(kl.detach())  # the one synchronisation per micro-step: the cap decides before the step
            if kl_all > kl_max:
                self.stopped = {"step": self.state.global_step + 1, "kl": kl_all, "nll": float(nll.item()),
                                "loss": float(loss.item())}
                raise KLCapReached(f"KL {kl_all:.4g} > kl_max {kl_max:g}")
            self.micro.append({"loss": loss.detach(), "nll": nll.detach(), "kl": kl_all})
            return loss

    trainer = attach_recorder(WeightedSFT(model=policy.model, args=args, train_dataset=rows,
                                          data_collator=lambda batch: collate(batch, pad_id)))
    trainer.stopped = None
    return trainer
