"""`RWRTrainer`: reward-weighted regression for the environment on transformers' Trainer (the loss is rwr.py's)."""

from __future__ import annotations

from typing import Any

from genenv_cli.machinery.training.base_trainer import StoredRowsTrainer
from genenv_cli.machinery.training.rwr import batch_loss, collate
from genenv_cli.machinery.training.rwr_config import RWRConfig


class RWRTrainer(StoredRowsTrainer):
    """A Trainer whose loss is `rwr_loss` on the rows (prompt_ids, target_ids, weight_rel, and `group`: rows of one
    group, the generations of one conditioning context, share micro-batches: base_trainer.GroupedOrder); the KL cap
    stops it (the `kl_max` of its `RWRConfig`)."""

    def __init__(self, policy: Any, args: Any, rows: list[dict[str, Any]], config: RWRConfig) -> None:
        self.rwr = config
        super().__init__(policy, args, rows, collate, kl_max=config.kl_max,
                         groups=[r.get("group", i) for i, r in enumerate(rows)])

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        n = inputs["target_mask"].shape[1]
        ids, attn = inputs["input_ids"], inputs["attention_mask"]
        loss, nll, kl = batch_loss(model, self.policy, ids, attn, n, inputs["target_mask"], inputs["weights"],
                                   kl_coef=self.rwr.kl_coef)
        # read once per optimizer step (base_trainer.materialize); the cap decides on the whole step's KL there
        self.micro.append({"loss": loss.detach(), "nll": nll.detach(), "kl": kl.detach(),
                           "tokens": inputs["target_mask"].sum().detach(), "rows": float(ids.shape[0])})
        return loss
