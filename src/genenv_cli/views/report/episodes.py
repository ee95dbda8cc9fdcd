"""The report's episodes panel: for an epoch of multi-turn rollouts, how many turns its episodes took, why they
ended and how many of the agent's calls the environment could carry out. Read from the epoch's rollouts (their
`turns`, `end` and `observations` columns); an epoch of single-turn rollouts has none of these and shows nothing.

Whether a call was valid is the domain's to say (`Domain.call_valid`, judging the environment's reply to it): the
calculator's `calc error: ...`, for example. A domain that does not say leaves the validity row empty."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_cli.domains.base import ENDS


def rollout_files(run: Any, epoch: int) -> list[Path]:
    """The epoch's rollouts: the merged file, or else its shards."""
    merged = run.file("rollouts", epoch)
    if merged.is_file():
        return [merged]
    return sorted(merged.parent.glob("rollouts.shard-*-of-*.parquet"))


def read_episodes(run: Any, epoch: int) -> dict[str, Any] | None:
    """The epoch's episode numbers (`episode_numbers`), None when it has no episodes (single-turn, or no rollouts)."""
    import polars as pl

    from genenv_cli.rundir.datafiles import scan_parquet

    files = rollout_files(run, epoch)
    if not files:
        return None
    cols = ("domain", "turns", "end", "observations")
    frames = []
    for f in files:
        scan = scan_parquet(f)
        if not all(c in scan.collect_schema().names() for c in cols):
            return None  # rollouts written before episodes existed
        frames.append(scan.select(*cols).filter(pl.col("turns").is_not_null()).collect())
    rows = pl.concat(frames).to_dicts()
    return episode_numbers(rows) if rows else None


def episode_numbers(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Episodes, mean turns, the count of each number of turns and of each end, and the calls: every turn the
    environment replied to (its observations), those its domain calls valid, and the share of episodes with one.

    >>> n = episode_numbers([{"domain": "calc", "turns": 2, "end": "done", "observations": '["calc(1 + 1) = 2"]'},
    ...                      {"domain": "calc", "turns": 1, "end": "done", "observations": "[]"}])
    >>> n["turns_mean"], n["calls"], n["calls_valid"], n["calling_share"]
    (1.5, 1, 1, 0.5)
    """
    from genenv_cli.catalogue.domains import get_domain

    judges: dict[str, Any] = {}
    calls = judged = valid = calling = 0
    for r in rows:
        obs = json.loads(r["observations"]) if r.get("observations") else []
        calls += len(obs)
        calling += bool(obs)
        name = r.get("domain") or ""
        if name not in judges:
            try:
                judges[name] = get_domain(name).call_valid
            except Exception:  # a domain no longer installed: its calls are counted, not judged
                judges[name] = None
        for o in obs:
            verdict = judges[name](o) if judges[name] is not None else None
            if verdict is not None:
                judged += 1
                valid += bool(verdict)
    n = len(rows)
    ends = Counter(r["end"] for r in rows)
    return {"episodes": n, "turns_mean": round(sum(r["turns"] for r in rows) / n, 3),
            "turns": dict(sorted(Counter(int(r["turns"]) for r in rows).items())),
            "ends": {e: ends.get(e, 0) for e in [*ENDS, *sorted(set(ends) - set(ENDS))]},
            "calls": calls, "calls_judged": judged, "calls_valid": valid,
            "valid_share": round(valid / judged, 4) if judged else None,
            "calling_share": round(calling / n, 4)}


def episodes_body(epochs: list[int], per_epoch: dict[int, dict[str, Any] | None]) -> tuple[Any, bytes | None, str]:
    """(numbers, chart, HTML body) of the panel; (None, None, "") when no epoch has episodes."""
    from genenv_cli.views.report import charts as ch
    from genenv_cli.views.report.html import img, wide_table

    if not any(per_epoch.get(e) for e in epochs):
        return None, None, ""
    got = [per_epoch.get(e) or {} for e in epochs]

    def col(key: str) -> list[Any]:
        return [g.get(key) for g in got]

    def share(end: str) -> list[Any]:
        return [g["ends"].get(end, 0) / g["episodes"] if g else None for g in got]

    most = max((t for g in got for t in g.get("turns", {})), default=1)
    ends = sorted({e for g in got for e in g.get("ends", {})}, key=lambda e: (e not in ENDS, ENDS.index(e)
                                                                                if e in ENDS else 0, e))
    png = ch.timeseries(epochs, [
        ch.Series("ended by the environment (done)", share("done"), ch.BLUE),
        ch.Series("episodes with a call", col("calling_share"), ch.PURPLE, ":", "D"),
        ch.Series("valid calls", col("valid_share"), ch.TEAL, "--", "s"),
    ], ch.Decor(ylabel="share", ylim=(0, 1)), title="Episodes")
    rows: list[tuple[str, list[Any], str]] = [("episodes", col("episodes"), "int"),
                                              ("mean agent turns", col("turns_mean"), "num")]
    rows += [(f"{t} turn{'s' if t != 1 else ''}", [g.get("turns", {}).get(t, 0) if g else None for g in got], "int")
             for t in range(1, most + 1)]
    rows += [(f"ended: {e}", [g["ends"].get(e, 0) if g else None for g in got], "int") for e in ends]
    rows += [("episodes with a call", col("calling_share"), "pct"), ("calls", col("calls"), "int"),
             ("calls judged by the domain", col("calls_judged"), "int"), ("valid calls", col("valid_share"), "pct")]
    numbers = {"epoch": epochs, "episodes": got}
    return numbers, png, img(png, "episodes per epoch") + wide_table(epochs, rows)
