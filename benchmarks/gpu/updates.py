"""The GPU check's update runs: each a `genenv update-agent` or `update-env` process under probe.py, on a run directory
whose epoch 1 is scored with a synthetic pool of set lengths, its peaks (allocated and reserved) against memory_plan's
plan for the same shape, method, workload and allocator setting, and what its loss was handed (route, dtypes).

Two parts use them (check.py):

- `updates`, Qwen2.5-0.5B's shape: update-agent with LoRA in one process (the one-GPU route), and update-env with
  full fine-tuning under `accelerate launch --num_processes 1` with pipelines/accelerate/fsdp-full-shard.yaml (FSDP2
  over one process: its wrapping, genenv's mixed-precision policy, rank 0's weights broadcast by
  cpu_ram_efficient_loading and the gathered root, not its communication), each with its peak during
  `Accelerator.prepare` and over the whole update;
- `big`, Qwen2.5-7B's shape with random weights, the one-GPU LoRA route at the paper preset's sizes: update-env at
  8 outputs of 2,560 tokens (prompts of about 2,048), update-agent at 8 rows of 9,000 tokens (1,024 of them the
  completion), each with the allocator's expandable segments (genenv's default) and without
  (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False`, the user's setting, which genenv leaves alone).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FSDP_CONFIG = ROOT / "pipelines" / "accelerate" / "fsdp-full-shard.yaml"

# pools: agent rows (groups x k, prompt and completion tokens); env pairs (prompt and output tokens, about)
POOLS = {
    "gpu": {"agent": {"groups": 8, "k": 4, "prompt": 384, "completion": 512, "batch": 8},
            "env": {"pairs": 16, "prompt": 300, "output": 2000, "batch": 8},
            "agent-7b": {"groups": 2, "k": 4, "prompt": 9000 - 1024, "completion": 1024, "batch": 8},
            "env-7b": {"pairs": 8, "prompt": 2048, "output": 2560, "batch": 8}},
    "dry": {"agent": {"groups": 4, "k": 4, "prompt": 24, "completion": 16, "batch": 4},
            "env": {"pairs": 8, "prompt": 30, "output": 40, "batch": 4},
            "agent-7b": {"groups": 2, "k": 4, "prompt": 40, "completion": 24, "batch": 8},
            "env-7b": {"pairs": 8, "prompt": 40, "output": 32, "batch": 8}},
}


def variants(part: str, dry: bool) -> list[dict[str, Any]]:
    """The runs of a part: name, role, method (lora | fsdp), pool, allocator (expandable | plain)."""
    def v(name, role, method, pool, alloc="expandable"):
        return {"name": name, "role": role, "method": method, "pool": pool, "alloc": alloc}

    if part == "updates":   # the one-GPU LoRA route and the FSDP route, one run each (the check's 6 minutes)
        return [v("update-agent LoRA", "agent", "lora", "agent"), v("update-env FSDP", "env", "fsdp", "env")]
    if dry:
        return [v("7B update-env LoRA", "env", "lora", "env-7b"),
                v("7B update-agent LoRA, no expandable segments", "agent", "lora", "agent-7b", "plain")]
    return [v(f"7B update-{role} LoRA{label}", role, "lora", f"{role}-7b", alloc)
            for role in ("env", "agent") for alloc, label in (("expandable", ""), ("plain", ", no expandable segments"))]


def _complete_score(run: Any, epoch: int, outputs: dict[str, tuple[Path, Any]]) -> None:
    """Mark `score` of `epoch` done with the given outputs written under the stage contract (as if it had run)."""
    from genenv_cli.rundir.contract import StagePlan, execute

    cfg = run.load_config()
    plan = StagePlan("score", epoch, outputs={name: path for name, (path, _) in outputs.items()})

    def body(out):
        for name, (_, write) in outputs.items():
            write(out.path(name))

    execute(run, cfg, "score", epoch, lambda: plan, body, force=True)


def _text(tok: Any, rng: random.Random, tokens: int, line) -> str:
    """Lines from `line(rng)` until the text is `tokens` tokens long (a line's own tokens, counted alone)."""
    lines, count = [], 0
    while count < tokens:
        text = line(rng)
        lines.append(text)
        count += len(tok(text + "\n", add_special_tokens=False)["input_ids"])
    return "\n".join(lines)


def prepare(work: Path, model: str, variant: dict[str, Any], dry: bool) -> dict[str, Any]:
    """A run directory whose epoch 1 is scored, with a synthetic pool for the variant's role (agent: random token
    ids the tokenizer has, rewards that differ inside every group; env: arith-like text of about the set lengths),
    training `model`; returns the run and the rows' longest lengths (prompt + completion, completion)."""
    from transformers import AutoTokenizer

    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.rundir import RunDir
    from genenv_cli.rundir.datafiles import frame, write_parquet

    role, lora = variant["role"], variant["method"] == "lora"
    s = POOLS["dry" if dry else "gpu"][variant["pool"]]
    root = work / f"{variant['pool']}-{variant['method']}-{variant['alloc']}"
    root.mkdir(parents=True)
    section = f"{role}_update"
    data = apply_overrides({"run": {"domain": "arith", "engine": "hf"}, "agent": {"model": model},
                            "env": {"model": model}},
                           [f"{section}.lora={'true' if lora else 'false'}", f"{section}.batch_size={s['batch']}",
                            f"{section}.gradient_checkpointing=true", "env_update.kl_max=1000"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "gpu check")))
    run = RunDir(root)
    rng = random.Random(0)
    tok = AutoTokenizer.from_pretrained(model)
    top = min(len(tok), 40000)
    if role == "agent":
        rows = []
        for gidx in range(s["groups"]):
            prompt = [rng.randrange(100, top) for _ in range(s["prompt"])]
            for k in range(s["k"]):
                n = s["completion"] - (rng.randrange(0, max(1, s["completion"] // 4)) if k else 0)
                rows.append({"epoch": 1, "rollout_id": f"g{gidx}/s{k}", "task_id": f"g{gidx}", "group_id": f"g{gidx}",
                             "sample_index": k, "source": "seed", "prompt_token_ids": prompt,
                             "completion_token_ids": [rng.randrange(100, top) for _ in range(n)],
                             "logprobs": [-2.0] * n, "reward": float(k % 2), "success": k % 2 == 1, "valid": True,
                             "finish_reason": "length", "temperature": 1.0, "model": "base"})
        _complete_score(run, 1, {"agent_train": (run.pool_partition("agent_train", 1),
                                                 lambda p: write_parquet(frame(rows, "agent_train"), p, "agent_train"))})
        lengths = (max(len(r["prompt_token_ids"]) + len(r["completion_token_ids"]) for r in rows),
                   max(len(r["completion_token_ids"]) for r in rows))
    else:
        rows, longest, target = [], 0, 0
        for i in range(s["pairs"]):
            context = _text(tok, rng, s["prompt"], lambda r: f"Example: {r.randint(1, 99)} + {r.randint(1, 99)}")
            output = _text(tok, rng, s["output"], lambda r: f"EXERCISE: {r.randint(1, 999)} * ({r.randint(1, 99)} - "
                                                            f"{r.randint(1, 9)})")
            messages = [{"role": "system", "content": "Write exercises."}, {"role": "user", "content": context}]
            rows.append({"epoch": 1, "task_id": f"e1-t{i}", "batch_id": f"e1-b{i // 4}", "parent_id": "p",
                         "prompt": json.dumps(messages), "output": output, "p_batch": 0.5, "r_env": 1.0 - i / 100,
                         "weight": 1.0, "kept": True, "env_model": "base"})
            p = len(tok(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                        add_special_tokens=False)["input_ids"])
            o = len(tok(output, add_special_tokens=False)["input_ids"]) + 1
            longest, target = max(longest, p + o), max(target, o)
        _complete_score(run, 1, {"env_sft": (run.pool_partition("env_sft", 1),
                                             lambda p: write_parquet(frame(rows, "env_sft"), p, "env_sft"))})
        lengths = (longest, target)
    return {"run": str(root), "lengths": list(lengths), "rows": len(rows), "batch": s["batch"]}


def prepare_all(work: Path, model: str, part: str, dry: bool) -> dict[str, Any]:
    return {v["name"]: prepare(work, model, v, dry) for v in variants(part, dry)}


def command(variant: dict[str, Any], probe: Path, run: str) -> list[str]:
    """The probe around `genenv update-<role>`: in this process for LoRA, under accelerate's launcher with the FSDP
    config over one process for FSDP."""
    genenv = ["-m", "benchmarks.gpu.probe", str(probe), f"update-{variant['role']}", "--epoch", "1", "--run", run,
              "--json"]
    if variant["method"] == "fsdp":
        return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG),
                "--num_processes", "1", "--main_process_port", "29571", *genenv]
    return [sys.executable, *genenv]


def plan(shape: Any, variant: dict[str, Any], prep: dict[str, Any], dry: bool) -> dict[str, float]:
    """memory_plan's parts for the run, GB."""
    from genenv_cli.core.memory_plan import GB, Workload, training_bytes

    longest, completion = prep["lengths"]
    lora = variant["method"] == "lora"
    w = Workload(batch_size=prep["batch"], seq_len=longest, completion_len=completion, gradient_checkpointing=True,
                 reference=not lora, lora_r=16, loss="grpo" if variant["role"] == "agent" else "rwr",
                 compute_bytes=4 if dry else 2, expandable_segments=variant["alloc"] == "expandable")
    return {k: round(v / GB, 2) for k, v in training_bytes(shape, variant["method"], 1, w).items()}


def run_part(check: Any, part: str, model: str) -> dict[str, Any]:
    """Every variant of `part` on `model` (a folder): its probe's figures beside the plan."""
    from genenv_cli.core.memory_plan import GB, PROCESS_HOST_BYTES, shape_of_config

    shape = shape_of_config(json.loads((Path(model) / "config.json").read_text()))
    prepared = check.child("--part", f"prepare-{part}", "--model", model, timeout=check.budget())
    out = {}
    for variant in variants(part, check.dry):
        name, prep = variant["name"], prepared[variant["name"]]
        if check.budget() < 20:
            out[name] = {"status": "skipped", "reason": f"{check.left():.0f} s left of the budget"}
            continue
        probe = check.work / f"probe-{len(out)}-{part}.json"
        env = dict(check.env)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if variant["alloc"] == "plain":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False"
        done = check.run(command(variant, probe, prep["run"]), timeout=check.budget(), env=env)
        if done.returncode != 0 or not probe.exists():
            out[name] = {"status": "failed", "error": ((done.stdout or "") + (done.stderr or ""))[-1500:]}
            continue
        got = json.loads(probe.read_text())
        parts = plan(shape, variant, prep, check.dry)
        reserved = got.get("gpu_reserved_peak_gb")
        out[name] = {"status": "ok", "method": variant["method"], "allocator": variant["alloc"], "rows": prep["rows"],
                     "batch": prep["batch"], "longest_tokens": prep["lengths"][0],
                     "completion_tokens": prep["lengths"][1], "predicted_gpu_gb": parts["total"], "plan_gb": parts,
                     "predicted_host_gb": round((PROCESS_HOST_BYTES + 4 * shape.vocab * shape.hidden) / GB, 2),
                     "reserved_over_plan": round(reserved / parts["total"], 3) if reserved else None, **got}
    return {"runs": out, "failed": [k for k, v in out.items() if v["status"] == "failed"]}
