"""The settings of reward-weighted regression (rwr_trainer.py), beside its trainer as in TRL's layout; the Trainer's
own settings come from the run's through `training_loop.training_arguments`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RWRConfig:
    """`kl_coef`: the weight of the exact KL to the initial model in the loss; `kl_max`: the cap on each step's KL,
    past which the update stops."""

    kl_coef: float
    kl_max: float
