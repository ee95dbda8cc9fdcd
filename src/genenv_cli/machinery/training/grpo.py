"""GRPO on stored rollouts: group-relative advantages and the clipped policy-gradient loss.

The loss is GRPO's as TRL computes it (`GRPOTrainer._compute_loss`, loss types `grpo` and `bnpo`, token-level
importance ratio, k3 KL estimator to a reference weighted by the ratio) and the tests check it against TRL's
on the same batch.
It is written here rather than called through TRL because our rollouts already exist: TRL's trainer wants to
generate them, and its `rollout_func` path takes the current model, not the stored behaviour logprobs, as
the old policy.

Old policy and sampler mismatch. The engine that sampled a trace (vLLM, or transformers' `generate`, in the
run's dtype) computes its token logprobs with other kernels, another dtype and another batching than the
trainer's forward pass, so its numbers are not the trainer's even for the same weights. Were they used as PPO's
old policy, part of the clip band would be spent on engine numerics. So the old policy is the trainer's own
forward pass on the model as it was before the first optimizer step (`old_policy_table`: one no-grad forward per
on-policy sample, each rank computing its own share of the rows and the ranks summing their tables into the
whole; the micro-batches of the first optimizer step use their own forward, detached, so the ratio there is
exactly 1), and the gap between the sampler and that old policy is corrected with a truncated
importance weight per token, `w = min(pi_old / pi_sampler, is_cap)`, detached, multiplying the clipped
surrogate (not the KL term), as TRL's `token_truncate` mode and verl's token-level truncated importance
sampling do. Per token rather than per sequence: engine rounding is independent from token to token, and a
sequence weight is the product of all of them, whose spread grows with the completion's length (a 500-token
answer with 0.02 nats of noise per token would swing by e^(+-0.5)) and would be truncated or dominated by a
few long traces; the per-token weight has bounded spread whatever the length and matches the token-level
ratio PPO already uses.

Replayed traces (earlier epochs, off-policy) use a truncated importance ratio instead of PPO's clip:
`-min(pi / pi_sampler, replay_clip) * A`, so a stale trace can count at most `replay_clip` times its on-policy
weight. Their sampler is an earlier epoch's model, so pi / pi_sampler already spans both the policy change and
the engine mismatch (pi / pi_sampler = pi / pi_old * pi_old / pi_sampler); they get no separate mismatch
weight (it would count the mismatch twice), and the one truncation at `replay_clip` bounds the product.

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


def mismatch_weights(old_logps: Any, sampler_logps: Any, is_cap: float) -> tuple[Any, Any]:
    """(w, truncated): the truncated importance weight min(pi_old / pi_sampler, is_cap) per token, and where the
    cap bit. Both (B, T), no gradient. Padding (both logprobs 0) gets weight 1."""
    import torch

    with torch.no_grad():
        raw = torch.exp((old_logps - sampler_logps).float())  # inf where the sampler's logprob is far below
        return torch.clamp(raw, max=is_cap), raw > is_cap


def sample_mismatch(old_logps: Any, sampler_logps: Any, is_cap: float) -> dict[str, float]:
    """One sample's sampler/trainer gap over its completion tokens (1-D tensors of equal length): mean |delta
    logprob|, KL(sampler || trainer) by the k3 estimator (r - 1 - log r with r = pi_old / pi_sampler: unbiased
    for tokens drawn from the sampler, and never negative), the share of tokens whose weight was truncated, and
    the token count (for token-weighted means over samples)."""
    import torch

    with torch.no_grad():
        d = (old_logps.double() - sampler_logps.double())
        n = d.numel()
        if n == 0:
            return {"logp_abs_diff": 0.0, "sampler_kl": 0.0, "truncated_share": 0.0, "tokens": 0}
        k3 = torch.expm1(d) - d
        return {"logp_abs_diff": float(d.abs().mean()), "sampler_kl": float(k3.mean()),
                "truncated_share": float((torch.exp(d) > is_cap).double().mean()), "tokens": n}


def grpo_loss(logps: Any, old_logps: Any, advantages: Any, mask: Any, *, clip_eps: float, kl_coef: float,
              ref_logps: Any = None, loss_type: str = "grpo", replay: Any = None,
              replay_clip: float = 2.0, sampler_logps: Any = None, is_cap: float = 3.0,
              sync: bool = True) -> tuple[Any, dict[str, Any]]:
    """Per-token clipped surrogate (+ beta * KL), aggregated as TRL's `grpo` or `bnpo` loss types.

    logps, old_logps, ref_logps, sampler_logps, mask: (B, T); advantages: (B,); replay: (B,) bool or None.
    `ref_logps` None: no KL (the agent with kl_coef 0); given, the KL is measured (and added when kl_coef is not 0).
    `old_logps` are the old policy's (the trainer's forward before the update; for a replayed row, its sampler's
    logprobs). With `sampler_logps`, each on-policy token's surrogate is multiplied by the truncated importance
    weight min(exp(old - sampler), is_cap) (module docstring); replayed rows get weight 1. The statistics come
    back as floats (`sync=True`, one device synchronisation for all of them) or as detached 0-d tensors
    (`sync=False`: the trainer reads them once per optimizer step, not per micro-step)."""
    import torch

    adv = advantages.unsqueeze(1)
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    per_token = -torch.min(ratio * adv, clipped * adv)
    weight = capped = None
    if sampler_logps is not None:
        weight, capped = mismatch_weights(old_logps, sampler_logps, is_cap)
        if replay is not None:  # a replayed row's ratio already reaches back to its sampler: no second factor
            on_policy = ~replay.to(per_token.device).unsqueeze(1)
            weight = torch.where(on_policy, weight, torch.ones_like(weight))
            capped = capped & on_policy
        per_token = per_token * weight
    if replay is not None:  # where() rather than a check of replay.any(), which would wait for the device
        truncated = -torch.clamp(ratio, max=replay_clip) * adv
        per_token = torch.where(replay.to(per_token.device).unsqueeze(1), truncated, per_token)
    kl = None
    if ref_logps is not None:  # measured whenever the reference is given; in the loss when kl_coef is not 0
        diff = ref_logps - logps
        # k3 estimator, importance-weighted because the tokens were drawn from the behaviour policy
        # (TRL's default `use_bias_correction_kl=True`)
        kl = (torch.exp(diff) - diff - 1) * ratio
        if kl_coef != 0.0:
            per_token = per_token + kl_coef * kl
    loss = _aggregate(per_token, mask, loss_type)
    return loss, _loss_statistics(ratio, clipped, adv, mask, clip_eps, kl, weight, capped, sync)


def _aggregate(per_token: Any, mask: Any, loss_type: str) -> Any:
    """The per-token loss (B, T) over the completions' tokens (`mask`), as TRL's loss types: `grpo` averages each
    sequence's tokens, then the sequences; `bnpo` averages every token of the batch."""
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    raise ValueError(f"unknown loss_type {loss_type!r}")


def _loss_statistics(ratio: Any, clipped: Any, adv: Any, mask: Any, clip_eps: float, kl: Any, weight: Any,
                     capped: Any, sync: bool) -> dict[str, Any]:
    """`grpo_loss`'s statistics, token means over `mask`: the clipped surrogate, the KL, the clipped share, the
    ratio's mean and largest deviation, the importance weights' mean and truncated share, the tokens."""
    import torch

    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        low = (ratio < 1 - clip_eps) & (adv < 0)
        high = (ratio > 1 + clip_eps) & (adv > 0)
        values = torch.stack([
            ((-torch.min(ratio * adv, clipped * adv)) * mask).sum() / n,
            (kl * mask).sum() / n if kl is not None else torch.zeros((), device=mask.device),
            ((low | high).float() * mask).sum() / n,
            (ratio * mask).sum() / n,
            # the largest |ratio - 1| of the step: exactly 0 before the first optimizer step
            ((ratio - 1).abs() * mask).max() if mask.numel() else torch.zeros((), device=mask.device),
            (weight * mask).sum() / n if weight is not None else torch.ones((), device=mask.device),
            (capped.float() * mask).sum() / n if capped is not None else torch.zeros((), device=mask.device),
            mask.sum(),
        ]).float()
    names = ("policy_loss", "kl", "clip_frac", "ratio_mean", "ratio_dev_max", "is_weight_mean", "is_truncated",
             "tokens")
    if sync:
        return dict(zip(names, values.tolist(), strict=True))
    return dict(zip(names, values.unbind(), strict=True))


def collate(rows: list[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    """A batch: token ids in TRL's layout, the sampler's logprobs (B, T), advantages, replay flags and each row's
    position in the training rows (`index`, the key of its old-policy logprobs).

    An episode's row (a multi-turn rollout) has the whole episode after its first prompt as its completion and an
    `agent_mask`; the completion mask is that mask, so the environment's tokens (observations, turn markers) stay in
    the forward pass as context, and the old policy's logprobs are computed over the whole episode, but they carry
    no gradient, no KL and no importance weight: every term of `grpo_loss` is multiplied by the mask, and its
    advantage, the episode's, reaches the agent's tokens only."""
    import torch

    from genenv_cli.machinery.training.logits import pad_pairs

    ids, attn, cmask = pad_pairs([r["prompt_ids"] for r in rows], [r["completion_ids"] for r in rows], pad_id)
    sampler = torch.zeros_like(cmask)
    for i, r in enumerate(rows):
        sampler[i, :len(r["completion_ids"])] = torch.tensor(r["sampler_logps"], dtype=torch.float32)
        if r.get("agent_mask") is not None:  # an episode: the environment's tokens leave the loss
            cmask[i, :len(r["completion_ids"])] = torch.tensor(r["agent_mask"], dtype=torch.float32)
    return {"input_ids": ids, "attention_mask": attn, "completion_mask": cmask, "sampler_logps": sampler,
            "advantages": torch.tensor([r["advantage"] for r in rows], dtype=torch.float32),
            "replay": torch.tensor([bool(r.get("replay", False)) for r in rows]),
            "index": torch.tensor([int(r.get("index", i)) for i, r in enumerate(rows)], dtype=torch.long)}


def old_policy_table(model: Any, rows: list[dict[str, Any]], *, width: int, batch_size: int, pad_id: int,
                     temperature: float, device: Any, rank: int = 0, world: int = 1) -> Any:
    """The old policy's logprobs of every on-policy row, (rows, width) float32 on `device`: row r's in
    table[r["index"], :len(completion)], zeros for replayed rows (their old policy is their sampler).

    The on-policy rows are cut into batches of `batch_size` in order; rank k of `world` computes batches k,
    k + world, ... with one no-grad forward each, and the ranks' tables (each zero outside its own rows) are summed
    over the process group, so every rank ends with the whole table after 1/world of the forwards (before, every rank
    computed every row: 64 forwards a rank at the paper preset, against 8 training micro-steps). A sharded or
    DDP-wrapped model's forward is a collective, so every rank makes the same number of calls: a rank whose batches
    run out repeats its last one (or the first batch) and throws the result away. The batches are the same whatever
    the number of ranks, so the table is the one a single process computes."""
    import torch

    from genenv_cli.machinery.training.logits import token_logps

    table = torch.zeros((len(rows), width), dtype=torch.float32, device=device)
    fresh = [r for r in rows if not r.get("replay")]
    size = max(int(batch_size), 1)
    batches = [fresh[i:i + size] for i in range(0, len(fresh), size)]
    mine = batches[rank::world]
    calls = -(-len(batches) // world)  # every rank makes this many forwards
    with torch.no_grad():
        for i in range(calls):
            real = i < len(mine)
            chunk = mine[i] if real else (mine[-1] if mine else batches[0])
            b = collate(chunk, pad_id)
            n = b["completion_mask"].shape[1]
            lp = token_logps(model, b["input_ids"].to(device), b["attention_mask"].to(device), n, temperature)
            if real:
                for j, r in enumerate(chunk):
                    table[r["index"], :len(r["completion_ids"])] = lp[j, :len(r["completion_ids"])].float()
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(table)  # rows are disjoint between ranks: the sum is each row's own values
    return table


MISMATCH_COLUMNS = ("logp_abs_diff", "sampler_kl", "truncated_share")


def mismatch_records(records: Any, rows: list[dict[str, Any]], old_logps: dict[int, Any] | None, is_cap: float,
                     key: str = "rollout_id") -> tuple[Any, dict[str, float | None]]:
    """The per-sample records with the sampler/trainer gap of each on-policy row trained on (null for the rest:
    skipped, or replayed, whose sampler is an older policy), and the update's three numbers, token-weighted over
    those rows: mean |delta logprob|, KL(sampler || trainer), share of tokens truncated (`mismatch_<column>`).
    Rows and records are matched on (epoch, `key`): a rollout's id for the agent, a generation's for the
    environment; `old_logps` is `trainer.old_policy_logps()`, by row index."""
    import polars as pl
    import torch

    per: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        if r.get("replay") or old_logps is None or i not in old_logps:
            continue
        sampler, old = torch.tensor(r["sampler_logps"], dtype=torch.float64), old_logps[i]
        if r.get("agent_mask") is not None:  # an episode: the agent's tokens only (the others were not sampled)
            agent = torch.tensor(r["agent_mask"], dtype=torch.bool)
            sampler, old = sampler[agent], old[agent]
        per.append({"epoch": r["epoch"], key: r[key], **sample_mismatch(old, sampler, is_cap)})
    tokens = sum(p["tokens"] for p in per)
    # six significant digits, not decimals: a KL of 1e-7 is a result, not zero
    totals = {f"mismatch_{c}": (float(f"{sum(p[c] * p['tokens'] for p in per) / tokens:.6g}") if tokens else None)
              for c in MISMATCH_COLUMNS}
    frame = pl.DataFrame(per, schema={"epoch": pl.Int64, key: pl.String,
                                      **{c: pl.Float64 for c in MISMATCH_COLUMNS}, "tokens": pl.Int64})
    records = records.join(frame.drop("tokens"), on=["epoch", key], how="left", maintain_order="left")
    return records, totals
