"""The settings of GRPO on stored rows (grpo_trainer.py), beside its trainer as in TRL's layout.

TRL's GRPOConfig extends TrainingArguments; here the Trainer's own settings (batch size, learning rate, schedule,
sharding) come from the run's settings through `training_loop.training_arguments`, and this holds the loss's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GRPOConfig:
    """`clip_eps`: PPO's clip band; `kl_coef`: the weight of the KL to the reference in the loss; `loss_type`:
    `grpo` or `bnpo` (TRL's aggregations); `temperature`: the sampler's, at which the logprobs are computed;
    `replay_clip`: the truncation of a replayed row's importance ratio; `is_cap`: the truncation of the
    sampler/trainer mismatch weight; `kl_max`: the cap on each step's KL (the environment's leash; None: no cap);
    `group_batches`: rows of one `group` share micro-batches (base_trainer.GroupedOrder)."""

    clip_eps: float
    kl_coef: float
    loss_type: str
    temperature: float
    replay_clip: float
    is_cap: float = 3.0
    kl_max: float | None = None
    group_batches: bool = False

    @property
    def measures_kl(self) -> bool:
        """Whether the reference's logprobs are computed: the KL is in the loss, or the cap reads it."""
        return self.kl_coef != 0.0 or self.kl_max is not None
