"""What both updates' trainers share: `StoredRowsTrainer`, transformers' Trainer over rows that already exist
(rollouts, generations, weighted pairs), with the per-step record, the grouped sampler and the KL cap.

Both updates run on `transformers.Trainer` (the loop, AdamW, schedule, gradient clipping, accumulation and
accelerate's multi-process/FSDP/DeepSpeed support) with their own `compute_loss` (grpo_trainer.py, rwr_trainer.py);
neither TRL trainer fits: TRL's GRPOTrainer generates its own completions (and with `rollout_func` ignores stored
behaviour logprobs), and SFTTrainer has no per-sample weights or KL term.

A subclass's `compute_loss` appends a dict per micro-step to `micro` (with its `tokens` and `rows`, as detached
tensors); before each optimizer step they are combined over the step's micro-batches and the ranks
(training/step_stats.py) and, with `kl_max`, the step's KL decides whether the step is taken (`KLCapReached`, the
refused step in `stopped`); the steps taken land in `step_stats`, transformers' own log records (grad norm before
clipping, learning rate) in `logged`, the dtypes the training had in `precision` (training/precision.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

from torch.utils.data import Sampler
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback

from genenv_cli.machinery.training.precision import attach_probe
from genenv_cli.machinery.training.step_stats import KLCapReached, step_totals


class GroupedOrder(Sampler):
    """A sampler that keeps the rows of a group next to each other: every pass shuffles the groups and the rows
    inside each (seeded: `seed` and the pass), then runs them group after group, so a micro-batch holds whole groups.
    The environment's groups are the generations of one conditioning context, which share their whole prompt (a few
    hundred tokens against a few dozen of output): together in a micro-batch, the shared-prefix forward
    (engines/shared_prefix.py) computes that prompt once for all of them instead of once per row. Every row is still
    used once per pass; only which rows share a micro-batch changes."""

    def __init__(self, groups: list[Any], seed: int) -> None:
        self.members: dict[Any, list[int]] = {}
        for i, g in enumerate(groups):
            self.members.setdefault(g, []).append(i)
        self.size = len(groups)
        self.seed = seed
        self.passes = 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        rng = random.Random(f"{self.seed}/{self.passes}")
        self.passes += 1
        keys = list(self.members)
        rng.shuffle(keys)
        order: list[int] = []
        for k in keys:
            rows = list(self.members[k])
            rng.shuffle(rows)
            order.extend(rows)
        return iter(order)


def materialize(micro: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The micro-steps' numbers as floats. compute_loss records them as detached tensors, so the device is
    synchronised once per optimizer step here (one transfer of all of them), not once per number."""
    import torch

    where = [(i, k) for i, m in enumerate(micro) for k, v in m.items() if isinstance(v, torch.Tensor)]
    if not where:
        return micro
    values = torch.stack([micro[i][k].detach().float().reshape(()) for i, k in where]).tolist()
    out = [dict(m) for m in micro]
    for (i, k), v in zip(where, values, strict=True):
        out[i][k] = v
    return out


class StepRecorder(TrainerCallback):
    """The trainer's side of each optimizer step: its numbers combined (and the KL cap asked) before it, recorded
    after it, transformers' log records kept."""

    def __init__(self, trainer: StoredRowsTrainer) -> None:
        self.trainer = trainer

    def on_log(self, args, state, control, logs=None, **kw):
        self.trainer.logged.append({"step": state.global_step, **(logs or {})})

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self.trainer.close_step(state.global_step + 1)

    def on_step_end(self, args, state, control, **kw):
        t = self.trainer
        if t.pending is not None:
            t.step_stats.append({**t.pending, "step": state.global_step, "pass": state.epoch})
        t.pending = None


class StoredRowsTrainer(Trainer):
    """transformers' Trainer on stored rows, for a subclass to give its `compute_loss` (module docstring).

    `rows` are the training rows, `collate(batch, pad_id)` makes a batch of them; `groups` (one key per row), when
    given, keeps each group's rows in the same micro-batches (`GroupedOrder`), else Trainer's random order;
    `kl_max`, when given, is the cap on each step's KL to the reference."""

    policy: Any                          # the Policy trained (policy_loading.py): its model, tokenizer, reference
    kl_max: float | None
    groups: list[Any] | None
    micro: list[dict[str, Any]]          # this optimizer step's micro-steps, appended by compute_loss
    pending: dict[str, Any] | None       # the step being taken, combined over micro-steps and ranks
    step_stats: list[dict[str, Any]]     # every step taken, with its `step` and `pass`
    stopped: dict[str, Any] | None       # the step the KL cap refused: its step, kl, loss, nll
    logged: list[dict[str, Any]]         # transformers' log records
    precision: dict[str, Any]            # the dtypes the training held (precision.attach_probe)

    def __init__(self, policy: Any, args: Any, rows: list[dict[str, Any]],
                 collate: Callable[[list[dict[str, Any]], int], dict[str, Any]], *, kl_max: float | None = None,
                 groups: list[Any] | None = None) -> None:
        self.policy, self.kl_max, self.groups = policy, kl_max, groups
        self.micro, self.step_stats, self.logged, self.pending, self.stopped = [], [], [], None, None
        super().__init__(model=policy.model, args=args, train_dataset=rows,
                         data_collator=partial(collate, pad_id=policy.tokenizer.pad_token_id))
        attach_probe(self, self.model)   # first: it reads the dtypes even of a step the KL cap refuses
        self.add_callback(StepRecorder(self))
        self.remove_callback(PrinterCallback)  # it prints every log dict to stdout; ours go to the UI and parquet
        self.model_accepts_loss_kwargs = False  # our losses are means: let Trainer divide by accumulation steps

    def _get_train_sampler(self, *args, **kwargs):
        if self.groups is not None:
            return GroupedOrder(self.groups, self.args.seed)
        return super()._get_train_sampler(*args, **kwargs)

    def close_step(self, step: int) -> None:
        """Before optimizer step `step`: its micro-steps' numbers combined, and the KL cap asked; past it the step
        is recorded in `stopped` and not taken (`KLCapReached`, on every rank alike: the numbers are reduced)."""
        micro, self.micro = materialize(self.micro), []
        self.pending = step_totals(micro) if micro else None
        if self.kl_max is not None and self.pending is not None and self.pending["kl"] > self.kl_max:
            p = self.pending
            self.stopped = {"step": step, "kl": p["kl"], "loss": p["loss"], "nll": p.get("nll")}
            raise KLCapReached(f"KL {p['kl']:.4g} > kl_max {self.kl_max:g}")

    def logs_by_step(self) -> dict[int, dict[str, Any]]:
        """transformers' log records by step (the end-of-training summary shares the last step's number: merged)."""
        logged: dict[int, dict[str, Any]] = {}
        for r in self.logged:
            logged.setdefault(r["step"], {}).update({k: v for k, v in r.items()
                                                     if k not in logged.get(r["step"], {})})
        return logged
