"""Sampler/trainer mismatch: how far the rollout engine's recorded logprobs are from update-agent's own forward
pass, with the engine sampling in float32 and in bfloat16 against the same float32 trainer.

    python benchmarks/sampler_mismatch.py [--domain arith] [--tasks 16] [--k 8] [--max-new-tokens 32]

For each sampler dtype, one run directory of the embedded model on the domain's seed tasks goes through the real
stages: generate-tasks (env.mode = seeds), rollout (hf engine, `run.dtype` = the sampler's dtype), score, and
update-agent with `run.dtype = float32` (one pass), whose metrics are the figures: mean |delta logprob| and
KL(sampler || trainer) per token, the share of tokens whose importance weight was truncated at
`agent_update.is_cap`, and the first optimizer step's ratio (exactly 1: the old policy is the trainer's forward).
Only samples update-agent trains on (groups whose rewards are not all equal) are measured. Writes
benchmarks/results/sampler_mismatch-<domain>.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_result  # noqa: E402


def one_arm(root: Path, args: argparse.Namespace, sampler_dtype: str) -> dict:
    import polars as pl

    from genenv_cli.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.pools import read_parquet
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks, rollout, score, update_agent

    root.mkdir(parents=True)
    data = apply_overrides({"run": {"domain": args.domain}, "env": {"mode": "seeds"}}, [
        f"generate.tasks_per_epoch={args.tasks}", f"rollout.group_size={args.k}",
        f"rollout.max_new_tokens={args.max_new_tokens}", "rollout.temperature=1.0", "rollout.top_p=1.0",
        "agent_update.passes=1", f"agent_update.batch_size={args.batch_size}", "agent_update.grad_accum=1",
        f"agent_update.is_cap={args.is_cap}"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "bench")))
    run = RunDir(root)
    generate_tasks.run(run, run.load_config(), 1)
    t = time.perf_counter()
    rolled = rollout.run(run, run.load_config([f"run.dtype={sampler_dtype}"]), 1)
    rollout_s = time.perf_counter() - t
    score.run(run, run.load_config(), 1)
    t = time.perf_counter()
    upd = update_agent.run(run, run.load_config(["run.dtype=float32"]), 1)
    update_s = time.perf_counter() - t
    m = upd.manifest["metrics"]
    per = read_parquet(run.epoch_dir(1) / "agent_update.parquet", "agent_update").filter(
        pl.col("used") & ~pl.col("replay"))
    steps = read_parquet(run.epoch_dir(1) / "agent_update_steps.parquet", "agent_update_steps").sort("step")
    first = steps.row(0, named=True) if steps.height else {}
    return {
        "sampler_dtype": sampler_dtype, "trainer_dtype": "float32",
        "samples_measured": per.height, "completion_tokens": rolled.manifest["counts"].get("completion_tokens"),
        "mean_abs_delta_logprob": m["mismatch_logp_abs_diff"], "kl_sampler_trainer": m["mismatch_sampler_kl"],
        "share_truncated": m["mismatch_truncated_share"],
        "max_sample_mean_abs_delta": per["logp_abs_diff"].max() if per.height else None,
        "step1_ratio_mean": first.get("ratio_mean"), "step1_ratio_dev_max": first.get("ratio_dev_max"),
        "rollout_s": round(rollout_s, 1), "update_agent_s": round(update_s, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--is-cap", type=float, default=3.0)
    args = ap.parse_args()
    arms = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            arms[dtype] = one_arm(Path(tmp) / dtype, args, dtype)
            print(dtype, arms[dtype], flush=True)
    write_result(f"sampler_mismatch-{args.domain}", arms,
                 settings=vars(args) | {"model": "embedded (SmolLM2-135M-Instruct)", "engine": "hf", "device": "cpu",
                                        "temperature": 1.0, "trainer": "update-agent, LoRA, run.dtype=float32",
                                        "measured on": "the on-policy samples update-agent trained on"})


if __name__ == "__main__":
    main()
