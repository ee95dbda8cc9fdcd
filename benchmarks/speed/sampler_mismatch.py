"""Sampler/trainer mismatch: how far the rollout engine's recorded logprobs are from update-agent's own forward
pass (its old policy), with the hf engine sampling in float32 and in bfloat16 against the float32 trainer.

    python -m benchmarks.speed.sampler_mismatch [--domain arith] [--tasks 8] [--k 4] [--max-new-tokens 16]

For each sampler dtype, one run directory of the embedded model on the domain's seed tasks (env.mode = seeds)
runs the real generate-tasks and rollout stages (hf engine, `run.dtype` = the sampler's dtype, temperature 1).
Every sample of rollouts.parquet is then scored by update-agent's own old-policy pass (`GRPOTrainer`'s
`_old_policy`: the LoRA policy `load_policy` builds for the update, float32 on CPU, the trainer's batch size)
and compared token by token with the engine's logprobs: mean |delta logprob| and KL(sampler || trainer) per
token (`sample_mismatch`, token-weighted), the largest |delta|, the share of tokens whose importance weight
was truncated at `agent_update.is_cap`, and the share of per-token ratios outside PPO's clip band [0.8, 1.2]
(what the old code, which took the engine's logprobs as the old policy, spent of the band at step 1). All
samples are measured, not only those of informative groups. Writes benchmarks/speed/results/sampler_mismatch/sampler_mismatch-<domain>.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import write_result


def one_arm(root: Path, args: argparse.Namespace, sampler_dtype: str) -> dict:
    import torch

    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.machinery.training.grpo import sample_mismatch
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.machinery.training.training_loop import training_arguments
    from genenv_cli.rundir import RunDir
    from genenv_cli.rundir.datafiles import read_parquet
    from genenv_cli.stages import generate_tasks, rollout

    root.mkdir(parents=True)
    data = apply_overrides({"run": {"domain": args.domain}, "env": {"mode": "seeds"}}, [
        f"generate.tasks_per_epoch={args.tasks}", f"rollout.group_size={args.k}",
        f"rollout.max_new_tokens={args.max_new_tokens}", "rollout.temperature=1.0", "rollout.top_p=1.0",
        f"agent_update.batch_size={args.batch_size}", f"agent_update.is_cap={args.is_cap}"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "bench")))
    run = RunDir(root)
    generate_tasks.run(run, run.load_config(), 1)
    t = time.perf_counter()
    rollout.run(run, run.load_config([f"run.dtype={sampler_dtype}"]), 1)
    rollout_s = time.perf_counter() - t
    df = read_parquet(run.epoch_dir(1) / "rollouts.parquet", "rollouts")
    rows = [{"prompt_ids": r["prompt_token_ids"], "completion_ids": r["completion_token_ids"],
             "sampler_logps": r["logprobs"], "advantage": 1.0, "replay": False}
            for r in df.iter_rows(named=True) if r["completion_token_ids"]]
    cfg = run.load_config(["run.dtype=float32"])
    u = cfg.agent_update
    t = time.perf_counter()
    policy = load_policy(cfg.agent.model, "base", base_name=cfg.agent.model, train=u, need_reference=False,
                         device="cpu", dtype="float32", trust_remote_code=False, seed=cfg.run.seed + 1)
    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=0.0, loss_type=u.loss_type, temperature=1.0,
                            replay_clip=u.replay_clip, is_cap=u.is_cap)
        trainer = GRPOTrainer(policy, training_arguments(tmp, u, seed=0, device="cpu", dtype="float32"), rows, config)
        table = trainer._old_policy(trainer.model, torch.device("cpu"))
    trainer_s = time.perf_counter() - t
    per, deltas = [], []
    for i, r in enumerate(rows):
        old = table[i, :len(r["completion_ids"])].double()
        sampler = torch.tensor(r["sampler_logps"], dtype=torch.float64)
        per.append(sample_mismatch(old, sampler, u.is_cap))
        deltas.append(old - sampler)
    d = torch.cat(deltas)
    tokens = sum(p["tokens"] for p in per)

    def weighted(key: str) -> float:
        return float(f"{sum(p[key] * p['tokens'] for p in per) / tokens:.6g}")

    ratio = torch.exp(-d)  # the old code's step-1 ratio: trainer / sampler at unchanged weights
    return {
        "sampler_dtype": sampler_dtype, "trainer_dtype": "float32", "samples": len(rows), "tokens": tokens,
        "mean_abs_delta_logprob": weighted("logp_abs_diff"), "kl_sampler_trainer": weighted("sampler_kl"),
        "share_truncated": weighted("truncated_share"),
        "max_abs_delta_logprob": float(f"{d.abs().max().item():.6g}"),
        "step1_ratio_range_with_engine_logprobs": [round(float(ratio.min()), 4), round(float(ratio.max()), 4)],
        "share_outside_clip_band_with_engine_logprobs": float(f"{((ratio < 0.8) | (ratio > 1.2)).double().mean():.6g}"),
        "rollout_s": round(rollout_s, 1), "trainer_pass_s": round(trainer_s, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--is-cap", type=float, default=3.0)
    args = ap.parse_args()
    arms = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            arms[dtype] = one_arm(Path(tmp) / dtype, args, dtype)
            print(dtype, arms[dtype], flush=True)
    write_result("sampler_mismatch", f"sampler_mismatch-{args.domain}", arms,
                 settings=vars(args) | {"model": "embedded (SmolLM2-135M-Instruct)", "engine": "hf", "device": "cpu",
                                        "temperature": 1.0, "top_p": 1.0,
                                        "trainer": "update-agent's old-policy pass, LoRA (fresh adapter), float32",
                                        "measured on": "every sample of the epoch's rollouts"})


if __name__ == "__main__":
    main()
