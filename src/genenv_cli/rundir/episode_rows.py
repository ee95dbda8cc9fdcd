"""The rows the episode engine wrote (rollouts.parquet's episodes, and the agent_train pool that carries their
masks) checked as they are read: a manifest vouches for a file's bytes, not for what they say, and a mask of 5 would
weight a token's loss five times, a mask of the wrong length would fail the update. Checked with polars
expressions over whole columns (a few milliseconds for an epoch); the first bad row is named.

- `agent_mask`: 0 or 1 at every place, as many places as `completion_token_ids`;
- `turns`: at least 1, and `actions` (the agent's answer of each turn, a JSON list) that many;
  `observations` (the environment's replies) at most that many, since a reply follows an answer;
- `end`: one of the engine's ends; `reward` and `partial`: finite numbers in [0, 1].
"""

from __future__ import annotations

from typing import Any

from genenv_cli.core.errors import InputError

ENDS = ("done", "turn_cap", "context_overflow")  # domains/base.py's ENDS, which this floor cannot import


def check_episode_rows(df: Any, where: str) -> None:
    """InputError naming `where`, the row and what is wrong with the first episode row that breaks a rule above;
    nothing for a frame of single-turn rows (or without the columns)."""
    import polars as pl

    cols = set(df.columns)
    if df.height == 0 or ("agent_mask" not in cols and "turns" not in cols):
        return
    rules: list[tuple[Any, str]] = []
    if {"agent_mask", "completion_token_ids"} <= cols:
        mask = pl.col("agent_mask")
        rules.append((mask.is_not_null() & mask.list.eval((pl.element() != 0) & (pl.element() != 1)).list.any(),
                      "agent_mask holds a value other than 0 and 1"))
        rules.append((mask.is_not_null() & (mask.list.len() != pl.col("completion_token_ids").list.len()),
                      "agent_mask is not as long as completion_token_ids"))
    if "turns" in cols:
        turns = pl.col("turns")
        rules.append((turns.is_not_null() & (turns < 1), "turns is below 1"))
        if "actions" in cols:
            n_actions = pl.col("actions").str.json_decode(pl.List(pl.String)).list.len()
            rules.append((turns.is_not_null() & (n_actions != turns), "actions does not hold one answer per turn"))
        if "observations" in cols:
            n_obs = pl.col("observations").str.json_decode(pl.List(pl.String)).list.len()
            rules.append((turns.is_not_null() & (n_obs > turns), "observations holds more replies than turns"))
        if "end" in cols:
            rules.append((turns.is_not_null() & ~pl.col("end").is_in(list(ENDS)),
                          f"end is not one of {', '.join(ENDS)}"))
        for c in ("reward", "partial"):
            if c in cols and df.schema[c].is_float() and "actions" in cols:  # rollouts: the environment's verdict
                v = pl.col(c)
                rules.append((turns.is_not_null() & (v.is_null() | v.is_nan() | (v < 0) | (v > 1)),
                              f"{c} is not a finite number in [0, 1]"))
    try:
        hits = df.select(*[rule.fill_null(False).alias(f"r{i}") for i, (rule, _) in enumerate(rules)]) \
            .with_row_index("_row")
    except pl.exceptions.PolarsError as exc:  # a cell of actions or observations that is not a JSON list of text
        raise InputError(f"{where}: the episodes' actions or observations are not JSON lists of text "
                         f"({str(exc)[:160]}); the file is damaged or was not written by genenv. Rerun the stage that "
                         f"wrote it with --force.") from None
    for i, (_, what) in enumerate(rules):
        bad = hits.filter(pl.col(f"r{i}"))
        if bad.height:
            raise InputError(f"{where}: row {bad['_row'][0]}: {what} ({bad.height} row(s) like it); the episode "
                             f"engine never writes that, so the file is damaged or was not written by genenv. Rerun "
                             f"the stage that wrote it with --force.")
