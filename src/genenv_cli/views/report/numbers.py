"""The numbers behind the report's charts, computed from what `read` returns (no HTML, no plotting)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from genenv_cli.catalogue.config import Config


def column(rows: list[dict[str, Any]], key: str) -> list[Any]:
    return [r.get(key) for r in rows]


def growth(values: list[Any]) -> list[float | None]:
    """Relative change against the first epoch with a value (None where either is missing)."""
    first = next((v for v in values if v is not None), None)
    if not first:
        return [None] * len(values)
    return [None if v is None else v / first - 1.0 for v in values]


def _edges(attempts: list[int]) -> list[float]:
    """Histogram bins centred on the values p-hat can take: k/K when every task had K attempts (K <= 40),
    else 21 bins centred on 0, 0.05, ..., 1."""
    ks = set(attempts)
    k = ks.pop() if len(ks) == 1 else 0
    steps = k if 0 < k <= 40 else 20
    return [(i - 0.5) / steps for i in range(steps + 2)]


def p_task_rows(epochs: list[int], stats: dict[int, dict[str, list[Any]] | None],
                metrics: dict[int, dict[str, Any] | None], cfg: Config) -> tuple[list[dict[str, Any]], list[int]]:
    """Per epoch: tasks by where their p-hat falls (0, below the band, in it, above it, 1), mean and median,
    and the histogram counts drawn. Epochs without task_stats are returned separately."""
    rows, skipped = [], []
    for e in epochs:
        st = stats.get(e)
        if st is None:
            skipped.append(e)
            continue
        m = metrics.get(e) or {}
        lo = m.get("band_low") if m.get("band_low") is not None else cfg.curriculum.band_low
        hi = m.get("band_high") if m.get("band_high") is not None else cfg.curriculum.band_high
        alpha = m.get("alpha") if m.get("alpha") is not None else cfg.curriculum.alpha
        ps, inb = st["p_task"], st["in_band"]
        kinds = Counter()
        for p, b in zip(ps, inb, strict=True):
            kinds["in_band" if b else "zero" if p <= 0 else "one" if p >= 1 else "below" if p < lo else "above"] += 1
        srt = sorted(ps)
        n = len(ps)
        median = None if not n else (srt[n // 2] if n % 2 else (srt[n // 2 - 1] + srt[n // 2]) / 2)
        edges = _edges(st["attempts"])
        counts = [0] * (len(edges) - 1)
        for p in ps:
            i = min(max(int((p - edges[0]) // (edges[1] - edges[0])), 0), len(counts) - 1)
            counts[i] += 1
        rows.append({"epoch": e, **aim_numbers(st, alpha), "tasks": n,
                     "seed_tasks": sum(s == "seed" for s in st["source"]),
                     "env_tasks": sum(s != "seed" for s in st["source"]),
                     "mean": sum(ps) / n if n else None, "median": median,
                     "zero": kinds["zero"], "below": kinds["below"], "in_band": kinds["in_band"],
                     "above": kinds["above"], "one": kinds["one"],
                     "in_band_share": kinds["in_band"] / n if n else None,
                     "alpha": alpha, "band_low": lo, "band_high": hi,
                     "hist_edges": edges, "hist_counts": counts})
    return rows, skipped


def aim_numbers(st: dict[str, list[Any]], alpha: float) -> dict[str, Any]:
    """The estimator p_task came from (`teacher_forced` where score kept its estimate and p_task is it,
    `teacher_forced_binomial` where p_task was drawn from it, else `rollouts`) and the mean
    |p - α| of the environment's tasks under it, and, where both estimates were kept, under each and their Pearson
    correlation over the environment's tasks."""
    env = [i for i, s in enumerate(st["source"]) if s != "seed"]
    tf, ro = st.get("p_task_teacher_forced") or [], st.get("p_task_rollouts") or []
    forced = any(x is not None for x in tf)

    def gap(ps: list[Any]) -> float | None:
        xs = [abs(ps[i] - alpha) for i in env if ps[i] is not None]
        return sum(xs) / len(xs) if xs else None

    binomial = forced and any(a is not None and a != b for a, b in zip(tf, st["p_task"], strict=True))
    name = "teacher_forced_binomial" if binomial else "teacher_forced" if forced else "rollouts"
    out: dict[str, Any] = {"estimator": name, "env_gap": gap(st["p_task"]),
                           "env_gap_rollouts": gap(ro) if forced else None,
                           "env_gap_teacher_forced": gap(tf) if forced else None, "pearson_estimators": None}
    pairs = [(tf[i], ro[i]) for i in env if forced and tf[i] is not None and ro[i] is not None]
    if len(pairs) >= 3:
        n = len(pairs)
        mx, my = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
        sxy = sum((a - mx) * (b - my) for a, b in pairs)
        sxx, syy = sum((a - mx) ** 2 for a, _ in pairs), sum((b - my) ** 2 for _, b in pairs)
        out["pearson_estimators"] = sxy / (sxx * syy) ** 0.5 if sxx and syy else None
    return out


def eval_groups(evals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per benchmark: one series per (protocol, headline metric) over epochs, newest file per epoch (older
    ones are marked not charted), and the references (evals with epoch null)."""
    groups: dict[str, dict[str, Any]] = {}
    for ev in sorted(evals, key=lambda v: (v["bench"], v["protocol"], v["metric"], v["created"] or "")):
        g = groups.setdefault(ev["bench"], {"bench": ev["bench"], "series": {}, "refs": {}})
        if ev["epoch"] is None:
            slot, key = g["refs"], (ev["model_tag"], ev["protocol"], ev["metric"])
        else:
            slot, key = g["series"].setdefault((ev["protocol"], ev["metric"]), {}), ev["epoch"]
        if key in slot:
            slot[key]["charted"] = False  # sorted by created: this one is newer
        slot[key] = ev
    out = []
    for bench in sorted(groups):
        g = groups[bench]
        series = []
        for (protocol, metric), by_epoch in sorted(g["series"].items()):
            xs = sorted(by_epoch)
            series.append({"label": f"{protocol}: {metric}", "protocol": protocol, "metric": metric,
                           "x": xs, "y": [by_epoch[x]["value"] for x in xs]})
        refs = [{"label": f"{tag} ({protocol})", "model_tag": tag, "protocol": protocol, "metric": metric,
                 "value": ev["value"]} for (tag, protocol, metric), ev in sorted(g["refs"].items())]
        out.append({"bench": bench, "series": series, "refs": refs})
    return out

