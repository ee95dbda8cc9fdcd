"""The report's episodes panel: for an epoch of multi-turn rollouts, how many turns its episodes took, why they
ended and how many of the agent's calls the environment could carry out. Read from the epoch's rollouts (their
`turns`, `end` and `observations` columns); an epoch of single-turn rollouts has none of these and shows nothing.

Whether a call was valid is the domain's to say (`Domain.call_valid`, judging the environment's reply to it): the
calculator's `calc error: ...`, for example. A domain that does not say leaves the validity row empty."""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

from genenv_cli.domains.base import ENDS

MAX_TURN_ROWS = 30  # the table's rows "N turns" stop here; longer episodes are counted in one row


def committed_rollouts(run: Any, epoch: int) -> tuple[list[Path], str | None]:
    """The epoch's rollout files that are committed and whole: the merged file, or else a complete set of shards,
    each a regular file still as its manifest records it (the stages' committed-input rule). ([], None) when the
    epoch has no rollouts; ([], why) when it has some that are not committed, changed since, or not regular files
    (`status` calls such an epoch's rollout incomplete), which the panel marks and does not draw from."""
    import stat

    from genenv_cli.rundir import shard_stage
    from genenv_cli.rundir.fingerprints import unchanged

    merged = run.file("rollouts", epoch)
    stages = ["rollout"] if run.manifest_path(epoch, "rollout").exists() else []
    if not stages:
        shards = run.rollout_shards(epoch)
        counts = {n for _, n in shards}
        if shards and (len(counts) != 1 or sorted(i for i, _ in shards) != list(range(1, next(iter(counts)) + 1))):
            return [], "its rollout shards are not one complete set"
        stages = [shard_stage("rollout", s) for s in shards]
    if not stages:
        written = merged.exists() or merged.is_symlink() or any(merged.parent.glob("rollouts.shard-*-of-*.parquet"))
        return [], ("its rollouts were written but never committed (no rollout manifest)" if written else None)
    files = []
    for stage in stages:
        rec = run.recorded_output(epoch, stage, "rollouts")
        if rec is None:
            return [], f"the manifest of {stage} records no rollouts file"
        path = run.root / rec["path"]
        try:
            mode = path.lstat().st_mode
        except OSError:
            return [], f"{rec['path']} is missing"
        if not stat.S_ISREG(mode):
            return [], f"{rec['path']} is not a regular file"
        if not unchanged(path, rec["fingerprint"]):
            return [], f"{rec['path']} is not what {stage} committed (changed since, or cut short)"
        files.append(path)
    return files, None


def read_episodes(run: Any, epoch: int) -> dict[str, Any] | None:
    """The epoch's episode numbers (`episode_numbers`), None when it has no episodes (single-turn, or no rollouts),
    {"incomplete": why} when its rollouts are not committed and whole or do not read as episodes."""
    import polars as pl

    from genenv_cli.core.errors import InputError
    from genenv_cli.rundir.datafiles import reading, scan_parquet
    from genenv_cli.rundir.episode_rows import check_episode_rows

    files, why = committed_rollouts(run, epoch)
    if why:
        return {"incomplete": why} if _plays_episodes(run) else None
    if not files:
        return None
    cols = ["domain", "turns", "end", "actions", "observations"]
    frames = []
    try:
        for f in files:
            with reading([f], f"the report's episodes of epoch {epoch}"):
                scan = scan_parquet(f)  # a regular file: committed_rollouts checked it
                if not all(c in scan.collect_schema().names() for c in cols):
                    return None  # rollouts written before episodes existed
                frame = scan.select(*cols).filter(pl.col("turns").is_not_null()).collect()
            check_episode_rows(frame, str(f))
            frames.append(frame.drop("actions"))
        rows = pl.concat(frames).to_dicts()
        return episode_numbers(rows) if rows else None
    except (InputError, pl.exceptions.PolarsError, OSError, ValueError) as exc:
        return {"incomplete": f"its rollouts do not read as episodes ({str(exc)[:200]})"}


def _plays_episodes(run: Any) -> bool:
    """Whether one of the run's domains plays multi-turn episodes (a single-turn run gets no episodes panel)."""
    from genenv_cli.catalogue.domains import stage_domain

    try:
        cfg = run.load_config()
        return any(stage_domain(name, cfg.score.item_timeout_s).episodic for name in cfg.run.shares())
    except Exception:  # noqa: BLE001 - a config or a plugin that does not load: the other sections say so
        return False


def episode_numbers(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Episodes, mean turns, the count of each number of turns and of each end, and the calls: every turn the
    environment replied to (its observations), those its domain calls valid, and the share of episodes with one.

    >>> n = episode_numbers([{"domain": "calc", "turns": 2, "end": "done", "observations": '["calc(1 + 1) = 2"]'},
    ...                      {"domain": "calc", "turns": 1, "end": "done", "observations": "[]"}])
    >>> n["turns_mean"], n["calls"], n["calls_valid"], n["calling_share"]
    (1.5, 1, 1, 0.5)
    """
    from genenv_cli.catalogue.domains import stage_domain

    judges: dict[str, Any] = {}
    calls = judged = valid = calling = 0
    for r in rows:
        obs = json.loads(r["observations"]) if r.get("observations") else []
        calls += len(obs)
        calling += bool(obs)
        name = r.get("domain") or ""
        if name not in judges:
            try:
                judges[name] = stage_domain(name).call_valid
            except Exception:  # a domain no longer installed: its calls are counted, not judged
                judges[name] = None
        for o in obs:
            verdict = _judged(judges, name, o)
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


def _judged(judges: dict[str, Any], name: str, observation: str) -> bool | None:
    """The domain's word on a call (None: it does not say); a plugin's judge that fails judges no more calls."""
    if judges[name] is None:
        return None
    try:
        verdict = judges[name](observation)
    except Exception:  # noqa: BLE001 - a plugin's judge (under the guard): its calls are counted, not judged
        judges[name] = None
        return None
    return verdict if verdict is None else bool(verdict)


def episodes_body(epochs: list[int], per_epoch: dict[int, dict[str, Any] | None]) -> tuple[Any, bytes | None, str]:
    """(numbers, chart, HTML body) of the panel; (None, None, "") when no epoch has episodes."""
    from genenv_cli.views.report import charts as ch
    from genenv_cli.views.report.html import img, wide_table

    if not any(per_epoch.get(e) for e in epochs):
        return None, None, ""
    skipped = {e: per_epoch[e]["incomplete"] for e in epochs if (per_epoch.get(e) or {}).get("incomplete")}
    got = [{} if e in skipped else per_epoch.get(e) or {} for e in epochs]

    def col(key: str) -> list[Any]:
        return [g.get(key) for g in got]

    def share(end: str) -> list[Any]:
        return [g["ends"].get(end, 0) / g["episodes"] if g else None for g in got]

    most = min(max((t for g in got for t in g.get("turns", {})), default=1), MAX_TURN_ROWS)
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
    if any(t > MAX_TURN_ROWS for g in got for t in g.get("turns", {})):
        rows.append((f"more than {MAX_TURN_ROWS} turns",
                     [sum(n for t, n in g.get("turns", {}).items() if t > MAX_TURN_ROWS) if g else None for g in got],
                     "int"))
    rows += [(f"ended: {e}", [g["ends"].get(e, 0) if g else None for g in got], "int") for e in ends]
    rows += [("episodes with a call", col("calling_share"), "pct"), ("calls", col("calls"), "int"),
             ("calls judged by the domain", col("calls_judged"), "int"), ("valid calls", col("valid_share"), "pct")]
    numbers = {"epoch": epochs, "episodes": got, "not_drawn": {str(e): why for e, why in skipped.items()}}
    notes = "".join(f"<p>Epoch {e}: not drawn, incomplete: {escape(why)}.</p>" for e, why in skipped.items())
    return numbers, png, img(png, "episodes per epoch") + wide_table(epochs, rows) + notes
