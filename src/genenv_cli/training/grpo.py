"""GRPO on stored rollouts: group-relative advantages and the clipped policy-gradient loss.

The loss is GRPO's as TRL computes it (`GRPOTrainer._compute_loss`, loss types `grpo` and `bnpo`, token-level
importance ratio, k3 KL estimator to a reference weighted by the ratio) and the tests check it against TRL's
on the same batch.
It is written here rather than called through TRL because our rollouts already exist: TRL's trainer wants to
generate them, and its `rollout_func` path takes the current model, not the stored behaviour logprobs, as
the old policy. So `old_logps` here are the logprobs `rollout` recorded while sampling.

Replayed traces (earlier epochs, off-policy) use a truncated importance ratio instead of PPO's clip:
`-min(ratio, replay_clip) * A`, so a stale trace can count at most `replay_clip` times its on-policy weight.

>>> group_advantages([1.0, 0.0, 1.0, 0.0, 0.5, 0.5], ["a", "a", "a", "a", "b", "b"])[1]
[None, None, None, None, 'all-equal group', 'all-equal group']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

ADV_EPS = 1e-4  # TRL's epsilon in (r - mean) / (std + eps)


def group_advantages(rewards: Sequence[float], groups: Sequence[str]) -> tuple[list[float | None], list[str | None]]:
    """(advantage or None, skip reason or None) per sample. Advantages are (r - mean_g) / (std_g + 1e-4) with
    the unbiased std over the group, as TRL computes them; a group whose rewards are all equal carries no
    signal and is skipped, as is a group of one."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    adv: list[float | None] = [None] * len(rewards)
    why: list[str | None] = [None] * len(rewards)
    for idx in members.values():
        rs = [rewards[i] for i in idx]
        if len(rs) < 2:
            for i in idx:
                why[i] = "singleton group"
            continue
        mean = sum(rs) / len(rs)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / (len(rs) - 1))
        if std == 0.0:
            for i in idx:
                why[i] = "all-equal group"
            continue
        for i in idx:
            adv[i] = (rewards[i] - mean) / (std + ADV_EPS)
    return adv, why


def grpo_loss(logps: Any, old_logps: Any, advantages: Any, mask: Any, *, clip_eps: float, kl_coef: float,
              ref_logps: Any = None, loss_type: str = "grpo", replay: Any = None,
              replay_clip: float = 2.0, sync: bool = True) -> tuple[Any, dict[str, Any]]:
    """Per-token clipped surrogate (+ beta * KL), aggregated as TRL's `grpo` or `bnpo` loss types.

    logps, old_logps, ref_logps, mask: (B, T); advantages: (B,); replay: (B,) bool or None. The statistics come
    back as floats (`sync=True`, one device synchronisation for all of them) or as detached 0-d tensors
    (`sync=False`: the trainer reads them once per optimizer step, not per micro-step)."""
    import torch

    adv = advantages.unsqueeze(1)
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    per_token = -torch.min(ratio * adv, clipped * adv)
    if replay is not None:  # where() rather than a check of replay.any(), which would wait for the device
        truncated = -torch.clamp(ratio, max=replay_clip) * adv
        per_token = torch.where(replay.to(per_token.device).unsqueeze(1), truncated, per_token)
    kl = None
    if kl_coef != 0.0:
        diff = ref_logps - logps
        # k3 estimator, importance-weighted because the tokens were drawn from the behaviour policy
        # (TRL's default `use_bias_correction_kl=True`)
        kl = (torch.exp(diff) - diff - 1) * ratio
        per_token = per_token + kl_coef * kl
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    else:
        raise ValueError(f"unknown loss_type {loss_type!r}")
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        low = (ratio < 1 - clip_eps) & (adv < 0)
        high = (ratio > 1 + clip_eps) & (adv > 0)
        values = torch.stack([
            ((-torch.min(ratio * adv, clipped * adv)) * mask).sum() / n,
            (kl * mask).sum() / n if kl is not None else torch.zeros((), device=mask.device),
            ((low | high).float() * mask).sum() / n,
            (ratio * mask).sum() / n,
            mask.sum(),
        ]).float()
    names = ("policy_loss", "kl", "clip_frac", "ratio_mean", "tokens")
    if sync:
        return loss, dict(zip(names, values.tolist(), strict=True))
    return loss, dict(zip(names, values.unbind(), strict=True))


def collate(rows: list[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    import torch

    from genenv_cli.training.common import pad_pairs

    ids, attn, cmask = pad_pairs([r["prompt_ids"] for r in rows], [r["completion_ids"] for r in rows], pad_id)
    old = torch.zeros_like(cmask)
    for i, r in enumerate(rows):
        old[i, :len(r["completion_ids"])] = torch.tensor(r["old_logps"], dtype=torch.float32)
    return {"input_ids": ids, "attention_mask": attn, "completion_mask": cmask, "old_logps": old,
            "advantages": torch.tensor([r["advantage"] for r in rows], dtype=torch.float32),
            "replay": torch.tensor([bool(r.get("replay", False)) for r in rows])}


def make_trainer(policy: Any, args: Any, rows: list[dict[str, Any]], *, clip_eps: float, kl_coef: float,
                 loss_type: str, temperature: float, replay_clip: float) -> Any:
    """A transformers Trainer whose loss is GRPO's on the stored rows; per-step stats in `trainer.step_stats`."""
    import torch
    from transformers import Trainer

    from genenv_cli.training.common import attach_recorder, token_logps

    pad_id = policy.tokenizer.pad_token_id

    class StoredRolloutGRPO(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            n = inputs["completion_mask"].shape[1]
            logps = token_logps(model, inputs["input_ids"], inputs["attention_mask"], n, temperature)
            ref = None
            if kl_coef != 0.0:
                with torch.no_grad(), policy.reference_context():
                    ref = token_logps(policy.reference_model(), inputs["input_ids"], inputs["attention_mask"], n,
                                      temperature)
            loss, stats = grpo_loss(logps, inputs["old_logps"], inputs["advantages"], inputs["completion_mask"],
                                    clip_eps=clip_eps, kl_coef=kl_coef, ref_logps=ref, loss_type=loss_type,
                                    replay=inputs["replay"], replay_clip=replay_clip, sync=False)
            stats["loss"] = loss.detach()
            self.micro.append(stats)
            return loss

    return attach_recorder(StoredRolloutGRPO(model=policy.model, args=args, train_dataset=rows,
                                             data_collator=lambda batch: collate(batch, pad_id)))
