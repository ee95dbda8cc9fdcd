"""The charts of `genenv compare`'s page and the numbers behind them: per claim, each arm's own series and each
arm minus its baseline, never more than three bands a panel (one panel per arm beside its baseline when there are
more arms); the environment's shape mix per arm."""

from __future__ import annotations

from typing import Any

from genenv_cli.views.report.compare import (
    CLAIMS,
    ArmData,
    arm_heldout,
    arm_series,
    arm_shape_mix,
    difference,
)


def compare_figures(arms: list[ArmData], pairs: dict[str, str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the numbers, keyed by chart id: each claim's arms and differences, the shape mix; each chart's PNG by chart
    id, a claim's difference as `<id>-diff`). A claim no run records has numbers and no chart."""
    from genenv_cli.views.report import charts as ch

    by_label = {a.label: a for a in arms}
    colors = {a.label: ch.PALETTE[i % len(ch.PALETTE)] for i, a in enumerate(arms)}
    numbers: dict[str, Any] = {}
    pngs: dict[str, bytes] = {}
    for cid, (key, title) in CLAIMS.items():
        series = {a.label: arm_heldout(a) if key == "heldout" else arm_series(a, key) for a in arms}
        diffs = {label: difference(by_label[label], by_label[base], key) for label, base in pairs.items()}
        numbers[cid] = {"arms": series, "differences": diffs}
        if not any(v is not None for s in series.values() for v in s["mean"]):
            continue  # no run records it: the page says so once, with no empty charts
        pngs |= _claim_charts(cid, key, title, arms, pairs, series, diffs, colors)
    mixes = {a.label: arm_shape_mix(a) for a in arms}
    numbers["shape-mix"] = mixes
    pngs["shape-mix"] = ch.shape_mix([(label, m["epoch"], m["mix"]) for label, m in mixes.items()])
    return numbers, pngs


def _claim_charts(cid: str, key: str, title: str, arms: list[ArmData], pairs: dict[str, str],
                  series: dict[str, dict[str, Any]], diffs: dict[str, dict[str, Any]],
                  colors: dict[str, str]) -> dict[str, bytes]:
    """One claim's charts: the arms' own series (`cid`), and each arm minus its baseline (`<cid>-diff`)."""
    from genenv_cli.views.report import charts as ch

    def line(label: str, s: dict[str, Any], shown: str | None = None, x: str = "epoch") -> Any:
        return ch.Arm(shown or label, s[x], s["mean"], s["low"], s["high"], colors[label])

    x = "rollouts" if key == "heldout" else "epoch"  # held-out success against the rollouts consumed
    if len(arms) <= ch.MAX_BANDS:
        panels = [ch.Panel(title, [line(a.label, series[a.label], x=x) for a in arms])]
    else:  # one panel per arm, beside its baseline (drawn grey)
        panels = []
        for a in arms:
            own = [line(a.label, series[a.label], x=x)]
            if a.label in pairs:
                base = series[pairs[a.label]]
                own.append(ch.Arm(f"baseline: {pairs[a.label]}", base[x], base["mean"], base["low"],
                                  base["high"], ch.GREY))
            panels.append(ch.Panel(a.label, own))
    share = ch.Decor(ylabel="share", percent=True, ylim=(0, None))
    pngs = {cid: ch.arm_grid(panels, share if key != "heldout" else
                             ch.Decor(ylabel="success", percent=True, ylim=(0, None)),
                             xlabel="rollouts consumed" if key == "heldout" else "epoch")}
    if diffs:
        lines = [line(label, d, f"{label} − {pairs[label]}") for label, d in diffs.items()]
        together = len(lines) <= ch.MAX_BANDS and len(arms) <= ch.MAX_BANDS
        diff_panels = ([ch.Panel(f"{title}: arm minus baseline", lines)] if together
                       else [ch.Panel(a.label, [a]) for a in lines])
        pngs[f"{cid}-diff"] = ch.arm_grid(diff_panels, ch.Decor(ylabel="difference (% points)", percent=True),
                                          zero_line=True)
    return pngs
