"""Each optimizer step's statistics as the step's, whatever the layout, and the KL cap decided on them.

A step of N ranks with `grad_accum` G covers N x G micro-batches; one process with G' = N x G covers the same rows.
Every rank's `compute_loss` records its micro-batches' numbers (`trainer.micro`); before the optimizer step they are
combined over the micro-batches and over the ranks with the weights their definitions carry, so the step's numbers
are the same in every layout:

- token means (the policy loss, KL, clip fraction, ratio, importance weight, truncated share): weighted by each
  micro-batch's tokens;
- sample means (the loss, which is a mean over rows of each row's own mean under `grpo` and the RWR loss; the
  weighted NLL): weighted by each micro-batch's rows;
- `*_max`: the largest; `tokens`, `rows`: summed.

The KL cap (`kl_max`, the environment's leash) compares the step's KL, so computed, with the cap before the optimizer
step: past it, the step is not taken and the update stops (`KLCapReached`) on every rank at once, since every rank
holds the same reduced numbers. The KL of a step's micro-batches is measured on the weights all of them share (those
after the previous step), so the decision is the whole step's, not its first micro-batch's.
"""

from __future__ import annotations

from typing import Any

TOKEN_MEANS = ("policy_loss", "kl", "clip_frac", "ratio_mean", "is_weight_mean", "is_truncated")
SAMPLE_MEANS = ("loss", "nll")
SUMS = ("tokens", "rows")


class KLCapReached(Exception):
    """The environment drifted past kl_max from the initial model; the update stops here."""


def _kind(key: str) -> str:
    if key.endswith("_max"):
        return "max"
    if key in SUMS:
        return "sum"
    if key in TOKEN_MEANS:
        return "tokens"
    if key in SAMPLE_MEANS:
        return "rows"
    raise KeyError(f"step statistic {key!r} has no rule for combining micro-batches")


def step_totals(micro: list[dict[str, Any]]) -> dict[str, float]:
    """The step's numbers from this rank's micro-batches' (floats; each holds `tokens` and `rows`), combined over the
    micro-batches and the ranks (module docstring). A collective: every rank calls it at every step."""
    from genenv_cli.machinery.training.distributed import all_reduce_floats

    keys = list(micro[0]) if micro else []
    for k in SUMS:
        if k not in keys:
            raise KeyError(f"micro-batch statistics lack {k!r}")
    summed = [k for k in keys if _kind(k) != "max"]
    maxed = [k for k in keys if _kind(k) == "max"]
    # a mean's weighted sum (its weight: the micro-batch's tokens or rows), or a count's plain sum
    local = [sum(m[k] * (m[_kind(k)] if _kind(k) != "sum" else 1.0) for m in micro) for k in summed]
    total = dict(zip(summed, all_reduce_floats(local, "sum"), strict=True))
    top = dict(zip(maxed, all_reduce_floats([max(m[k] for m in micro) for k in maxed], "max"), strict=True))
    out: dict[str, float] = {}
    for k in keys:
        kind = _kind(k)
        if kind == "max":
            out[k] = top[k]
        elif kind == "sum":
            out[k] = total[k]
        else:
            out[k] = total[k] / total[kind] if total[kind] else 0.0
    return out
