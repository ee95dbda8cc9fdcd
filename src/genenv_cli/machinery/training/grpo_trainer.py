"""`GRPOTrainer`: GRPO on stored rollouts on transformers' Trainer (the loss, the old policy's table and the batch
layout are grpo.py's, whose docstring says why the old policy is the trainer's own forward pass).

Two callers: the agent's update (rollouts) and the environment's (`env_update.algo = "grpo"`, its generations, with
the leash's cap `kl_max`: base_trainer.StoredRowsTrainer.close_step)."""

from __future__ import annotations

from typing import Any

import torch

from genenv_cli.machinery.training.base_trainer import StoredRowsTrainer
from genenv_cli.machinery.training.grpo import collate, grpo_loss, old_policy_table
from genenv_cli.machinery.training.grpo_config import GRPOConfig
from genenv_cli.machinery.training.logits import token_logps


class GRPOTrainer(StoredRowsTrainer):
    """A Trainer whose loss is GRPO's on the stored rows; per-step stats in `step_stats`, the old policy's logprobs
    of every on-policy row from `old_policy_logps()`."""

    grpo: GRPOConfig
    rows: list[dict[str, Any]]      # the training rows, each with its `index` (its row of `old_table`)
    width: int                      # the longest completion
    # (rows, width) on the training device: the old policy's logprobs, row r's in old_table[r, :len(r)]; read and
    # written by index tensors, so no micro-step waits for the device
    old_table: Any

    def __init__(self, policy: Any, args: Any, rows: list[dict[str, Any]], config: GRPOConfig) -> None:
        self.grpo = config
        self.rows = [{**r, "index": i} for i, r in enumerate(rows)]
        self.width = max((len(r["completion_ids"]) for r in self.rows), default=0)
        self.old_table = None
        groups = [r.get("group", r["index"]) for r in self.rows] if config.group_batches else None
        super().__init__(policy, args, self.rows, collate, kl_max=config.kl_max, groups=groups)

    def _old_policy(self, model: Any, device: Any) -> Any:
        """The trainer's own logprobs of every on-policy row on the model before any optimizer step
        (`old_policy_table`, this rank's share of the rows), inside the Trainer's context (its autocast and
        wrapping), so they are the numbers the loss's forward computes."""
        import torch.distributed as dist

        spread = dist.is_available() and dist.is_initialized()
        return old_policy_table(model, self.rows, width=self.width, batch_size=self.args.per_device_train_batch_size,
                                pad_id=self.policy.tokenizer.pad_token_id, temperature=self.grpo.temperature,
                                device=device, rank=dist.get_rank() if spread else 0,
                                world=dist.get_world_size() if spread else 1)

    def old_policy_logps(self) -> dict[int, Any]:
        """The old policy's logprobs of every on-policy row trained on, 1-D CPU tensors by row index."""
        if self.old_table is None:
            return {}
        table = self.old_table.detach().cpu()
        return {r["index"]: table[r["index"], :len(r["completion_ids"])] for r in self.rows if not r.get("replay")}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        c = self.grpo
        device = inputs["input_ids"].device
        if self.old_table is None:
            self.old_table = self._old_policy(model, device)
        n = inputs["completion_mask"].shape[1]
        logps = token_logps(model, inputs["input_ids"], inputs["attention_mask"], n, c.temperature)
        sampler = inputs["sampler_logps"]
        index = inputs["index"].to(device)
        replay = inputs["replay"].to(device).unsqueeze(1)
        if self.state.global_step == 0:
            # before the first optimizer step the model is the old policy: this forward is its own, and the
            # batch's layout makes it bit for bit what the loss sees (ratio exactly 1)
            kept = self.old_table[index, :n]
            self.old_table[index, :n] = torch.where(replay, kept, logps.detach().float())
        old = torch.where(replay, sampler, self.old_table[index, :n].to(sampler.dtype))
        ref = None
        if c.measures_kl:
            with torch.no_grad(), self.policy.reference_context():
                ref = token_logps(self.policy.reference_model(), inputs["input_ids"], inputs["attention_mask"], n,
                                  c.temperature)
        loss, stats = grpo_loss(logps, old, inputs["advantages"], inputs["completion_mask"],
                                clip_eps=c.clip_eps, kl_coef=c.kl_coef, ref_logps=ref, loss_type=c.loss_type,
                                replay=inputs["replay"], replay_clip=c.replay_clip, sampler_logps=sampler,
                                is_cap=c.is_cap, sync=False)
        stats["loss"] = loss.detach()
        stats["rows"] = float(inputs["advantages"].shape[0])
        self.micro.append(stats)   # the step's numbers and the KL cap's decision: base_trainer.close_step
        return loss
