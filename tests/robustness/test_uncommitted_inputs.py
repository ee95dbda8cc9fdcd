"""A stage reads only inputs that are committed and whole. update-env (GRPO) given a pool of generations whose
rewards were overwritten with NaN used to train on every one of them (NaN makes every group look informative);
now each stage checks its inputs against the fingerprints the manifests that wrote them record, and the updates
refuse a reward, advantage or weight that is not a finite number, naming the file, before any training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv_cli.rundir import RunDir, fingerprint
from hostile import cli, snapshot

UPDATES = {  # the update, the pool it trains on (written by score), the override that makes it read that pool
    "update-env": ("env_gen", ["--set", "env_update.algo=grpo"]),
    "update-agent": ("agent_train", []),
}


def _poison(path: Path, column: str, value: float) -> None:
    import polars as pl

    df = pl.read_parquet(path)
    df.with_columns(pl.lit(value, pl.Float64).alias(column)).write_parquet(path)


def _vouch(run: Path, rel: str) -> None:
    """Make score's manifest record the file as it is now: what a writer that wrote the bad numbers itself (a
    plugin's scorer, an older genenv) would have left."""
    path = run / "epochs" / "0001" / "manifests" / "score.json"
    manifest = json.loads(path.read_text())
    for rec in manifest["outputs"].values():
        if rec["path"] == rel:
            rec["fingerprint"] = fingerprint(run / rel)
    path.write_text(json.dumps(manifest, indent=2))


@pytest.mark.parametrize("stage", sorted(UPDATES))
def test_an_update_refuses_a_pool_changed_since_score_wrote_it(run, stage):
    pool, sets = UPDATES[stage]
    rel = RunDir(run).rel(RunDir(run).pool_partition(pool, 1))
    _poison(run / rel, "reward", float("nan"))
    before = snapshot(run)
    r = cli(stage, "--epoch", "1", "--run", run, "--force", *sets)
    assert rel in r.stderr and "not what `score --epoch 1` wrote" in r.stderr, r.stderr
    assert "genenv score --epoch 1 --force" in r.stderr
    assert snapshot(run) == before


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("stage", sorted(UPDATES))
def test_an_update_refuses_rewards_that_are_not_finite_even_where_a_manifest_vouches_for_them(run, stage, value):
    pool, sets = UPDATES[stage]
    rel = RunDir(run).rel(RunDir(run).pool_partition(pool, 1))
    _poison(run / rel, "reward", value)
    _vouch(run, rel)
    before = snapshot(run)
    r = cli(stage, "--epoch", "1", "--run", run, "--force", *sets)
    assert rel in r.stderr and "reward is" in r.stderr and "not a finite number" in r.stderr, r.stderr
    assert snapshot(run) == before
