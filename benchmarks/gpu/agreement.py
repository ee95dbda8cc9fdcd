"""The GPU check's shard agreement: `genenv rollout` of one epoch in one process against the same epoch in 2 shards
(`--shard 1/2`, `--shard 2/2`, one after the other on the same GPU), same model, tasks and seeds; how many of the
sampled tokens agree.

Every sample has its own seed whatever its batch (engines/base.py), so on a CPU in float32 the two draw the same
tokens (tests/stages/test_rollout_seeds.py). On a GPU in bf16 the kernels are not batch-invariant: a row's logits
depend a little on what shares its batch, and once one sampled token differs the rest of that sample follows another
path. So this reports shares, not a claim of identity: samples identical, tokens before each sample's first
difference over all tokens, and where the first difference falls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _run_dir(root: Path, model: str, s: dict[str, int]) -> Any:
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks

    root.mkdir(parents=True)
    data = apply_overrides({"run": {"domain": "arith", "engine": "hf"}, "env": {"mode": "seeds"},
                            "agent": {"model": model}}, [
        f"generate.tasks_per_epoch={s['tasks']}", f"rollout.group_size={s['k']}",
        f"rollout.max_new_tokens={s['max_new_tokens']}", f"rollout.batch_size={s['batch']}",
        "rollout.temperature=1.0", "rollout.top_p=1.0"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "gpu check")))
    run = RunDir(root)
    generate_tasks.run(run, run.load_config(), 1)
    return run


def _tokens(path: Path) -> dict[str, list[int]]:
    from genenv_cli.rundir.datafiles import read_parquet

    df = read_parquet(path, "rollouts")
    return {r["rollout_id"]: list(r["completion_token_ids"]) for r in df.iter_rows(named=True)}


def compare(one: dict[str, list[int]], sharded: dict[str, list[int]]) -> dict[str, Any]:
    """Shares of agreement between two rollouts of the same samples (by rollout id).

    >>> compare({"a": [1, 2, 3], "b": [4, 5]}, {"a": [1, 2, 3], "b": [4, 6, 7]})["token_agreement"]
    0.667
    """
    if set(one) != set(sharded):
        raise RuntimeError(f"the shards rolled out other samples: {len(set(one) ^ set(sharded))} ids differ")
    same, agreed, total, firsts = 0, 0, 0, []
    for rid, a in one.items():
        b = sharded[rid]
        prefix = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        if a == b:
            same += 1
        else:
            firsts.append(prefix)
        agreed += prefix if a != b else len(a)
        total += max(len(a), len(b))
    firsts.sort()
    return {"samples": len(one), "samples_identical": same, "sample_agreement": round(same / max(len(one), 1), 3),
            "tokens": total, "tokens_before_first_difference": agreed,
            "token_agreement": round(agreed / max(total, 1), 3),
            "first_difference_median": firsts[len(firsts) // 2] if firsts else None,
            "first_difference_min": firsts[0] if firsts else None}


def part_shards(work: Path, model: str, s: dict[str, int]) -> dict[str, Any]:
    """One process against 2 shards; in this process (each rollout opens its own engine, as a stage does)."""
    import time

    from genenv_cli.machinery.models import dtype_name, pick_device
    from genenv_cli.stages import rollout

    whole, split = _run_dir(work / "shards-one", model, s), _run_dir(work / "shards-two", model, s)
    t = time.perf_counter()
    rollout.run(whole, whole.load_config(), 1, force=True)
    one_s = time.perf_counter() - t
    t = time.perf_counter()
    sharded: dict[str, list[int]] = {}
    for i in (1, 2):
        rollout.run(split, split.load_config(), 1, shard=(i, 2), force=True)
        sharded.update(_tokens(split.file("rollouts", 1, (i, 2))))
    device = pick_device("auto")
    return {**compare(_tokens(whole.file("rollouts", 1, None)), sharded), "device": device,
            "dtype": dtype_name("auto", device), "settings": s, "one_process_s": round(one_s, 1),
            "two_shards_s": round(time.perf_counter() - t, 1)}
