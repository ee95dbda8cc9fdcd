"""Where an embedded curriculum epoch's time goes, and how far it is from what the machine can do.

    python -m benchmarks.speed.epoch_profile                          # one epoch, stage by stage, then generation inside
    python -m benchmarks.speed.epoch_profile --from-run DIR --label before   # a finished run's epoch 1, recorded

The epoch is the curriculum experiment's (experiments/curriculum.py, arm `genenv`, arith: 48 tasks x K 8, both
updates, then the 240-exercise held-out evaluation), on the embedded model, with the machine otherwise idle.
Recorded per stage: the stage's own seconds (its manifest) and the rest of the epoch (the evaluation and the
stages' start-up). Then, on that epoch's rollout workload (its tasks, the base agent, K 8, 16 tokens), generation
inside: model load; transformers' `generate()` over left-padded batches of 64 (what the engine did before), its
prefill timed apart and its padded row-steps counted; genenv's engine, its shared-prefix prefill timed apart and
its row-steps counted (finished rows leave the batch).

The limit: the arithmetic each stage cannot avoid, divided by what this machine measures (an fp32 matmul of the
model's shapes for FLOP/s, a large copy for memory bandwidth). Generation: 2 x (non-embedding parameters) FLOPs
per prompt token (the shared prefix once per batch, each prompt's own tokens once) and per generated token, plus
the LM head per generated token; a decode step cannot be faster than reading the weights once. Training: per
token, a forward (2N), the backward through the activations (2N; LoRA's weight gradients are negligible), and the
no-grad forwards of the old policy (once per sample) and of the reference (every micro-batch, KL > 0).
Writes results/epoch_profile/epoch_profile-<label>.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.speed.common import left_padded, write_result

STAGES = ["generate-tasks", "rollout", "score", "update-agent", "update-env"]


def stage_seconds(run_root: Path, epoch: int = 1) -> dict[str, float]:
    out = {}
    for stage in STAGES:
        data = json.loads((run_root / "epochs" / f"{epoch:04d}" / "manifests" / f"{stage}.json").read_text())
        out[stage] = round(data["seconds"], 1)
    return out


def run_epoch(work: Path, seed: int) -> tuple[Path, float, float]:
    """The curriculum experiment's genenv arm, epoch 1: (run folder, base evaluation seconds, epoch seconds)."""
    from lab.arms import CURRICULUM
    from lab.runs import heldout, make_run, run_epochs

    from genenv_cli.core.ui import UI

    ui = UI(quiet=True)
    run = make_run(work / f"arith-genenv-s{seed}", "arith", CURRICULUM["genenv"], seed, "embedded", [])
    t = time.perf_counter()
    heldout(run, None, ui)
    base = time.perf_counter() - t
    t = time.perf_counter()
    for _ in run_epochs(run, 1, ui, "curriculum-timings.json"):
        pass
    return run.root, base, time.perf_counter() - t


def machine_peaks() -> dict[str, float]:
    """fp32 matmul FLOP/s on the model's shapes (the best of a few) and memory bandwidth of a 1 GiB copy."""
    import torch

    a, b = torch.randn(4096, 576), torch.randn(576, 1536)
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        best = max(best, 10 * 2 * 4096 * 576 * 1536 / (time.perf_counter() - t))
    src = torch.empty(2**28, dtype=torch.float32).fill_(1.0)  # 1 GiB
    dst = torch.empty_like(src)
    bw = 0.0
    for _ in range(3):
        t = time.perf_counter()
        dst.copy_(src)
        bw = max(bw, 2 * src.numel() * 4 / (time.perf_counter() - t))  # read + write
    return {"matmul_gflops": round(best / 1e9, 1), "copy_gb_s": round(bw / 1e9, 1), "threads": torch.get_num_threads()}


def model_sizes() -> dict[str, int]:
    from transformers import AutoConfig

    from genenv_cli.machinery.models import ensure_embedded

    c = AutoConfig.from_pretrained(ensure_embedded())
    d, layers, inter, vocab = c.hidden_size, c.num_hidden_layers, c.intermediate_size, c.vocab_size
    kv = d * c.num_key_value_heads // c.num_attention_heads
    per_layer = d * d * 2 + d * kv * 2 + 3 * d * inter
    return {"non_embedding": layers * per_layer, "lm_head": d * vocab, "all": layers * per_layer + d * vocab}


def rollout_workload(run_root: Path) -> list[Any]:
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.rundir.datafiles import read_jsonl

    dom = get_domain("arith")
    return [dom.agent_messages(t["payload"]) for t in read_jsonl(run_root / "epochs/0001/tasks.jsonl", "tasks")]


def profile_generation(convs: list[Any], k: int, max_new: int, batch: int, seed: int) -> dict[str, Any]:
    import torch

    from genenv_cli.machinery.engines import SamplingParams, shared_prefix
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    t = time.perf_counter()
    engine = HFEngine(resolve("embedded"), device="cpu", dtype="float32", batch_size=batch)
    load = time.perf_counter() - t
    model, prompts = engine.model, [engine.prompt_ids(c) for c in convs]
    # transformers' generate() over left-padded batches, each prompt repeated K times (the engine before)
    jobs = sorted(((i, s) for i in range(len(prompts)) for s in range(k)), key=lambda j: (-len(prompts[j[0]]), j))
    gen_s = prefill_s = 0.0
    row_steps = tokens = prefill_tokens = 0
    for b, start in enumerate(range(0, len(jobs), batch)):
        rows = [prompts[i] for i, _ in jobs[start:start + batch]]
        ids, mask = left_padded(rows, engine.pad_id)
        width = ids.shape[1]
        with torch.inference_mode():
            t = time.perf_counter()
            model(input_ids=ids, attention_mask=mask, logits_to_keep=1)
            prefill_s += time.perf_counter() - t
            torch.manual_seed(seed + b)
            t = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                                 top_k=0, max_new_tokens=max_new, eos_token_id=engine.eos_ids,
                                 pad_token_id=engine.pad_id)
            gen_s += time.perf_counter() - t
        new = out[:, width:]
        row_steps += new.numel()
        prefill_tokens += ids.numel()
        tokens += sum(next((j + 1 for j, x in enumerate(r) if x in engine.eos_ids), len(r)) for r in new.tolist())
    before = {"seconds": round(gen_s, 2), "prefill_s": round(prefill_s, 2), "decode_s": round(gen_s - prefill_s, 2),
              "prefill_tokens_computed": prefill_tokens, "decode_row_steps": row_steps, "tokens": tokens,
              "padded_row_steps_share": round(1 - tokens / row_steps, 3), "tokens_per_s": round(tokens / gen_s, 1)}
    # genenv's engine, its prefill timed by wrapping the shared-prefix forward
    real = shared_prefix.forward
    spent: list[float] = []
    counted: list[int] = []

    def timed(model_, prefix, rows, *a, **kw):
        t0 = time.perf_counter()
        try:
            return real(model_, prefix, rows, *a, **kw)
        finally:
            spent.append(time.perf_counter() - t0)
            counted.append(len(prefix) + sum(len(r) for r in rows))

    shared_prefix.forward = timed
    try:
        t = time.perf_counter()
        outs = engine.generate(convs, SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=max_new, n=k,
                                                     seed=seed))
        ours_s = time.perf_counter() - t
    finally:
        shared_prefix.forward = real
    ours_tokens = sum(len(g.token_ids) for gens in outs for g in gens)
    after = {"seconds": round(ours_s, 2), "prefill_s": round(sum(spent), 2), "decode_s": round(ours_s - sum(spent), 2),
             "prefill_tokens_computed": sum(counted), "decode_row_steps": ours_tokens, "tokens": ours_tokens,
             "padded_row_steps_share": 0.0, "tokens_per_s": round(ours_tokens / ours_s, 1)}
    engine.close()
    return {"model_load_s": round(load, 2), "transformers_generate": before, "genenv_engine": after,
            "speedup": round(gen_s / ours_s, 2), "prompts": len(prompts), "k": k, "max_new_tokens": max_new,
            "batch_size": batch, "mean_prompt_tokens": round(sum(map(len, prompts)) / len(prompts), 1),
            "shared_prefix_tokens": shared_prefix.common_length(prompts)}


def limits(run_root: Path, gen: dict[str, Any], peaks: dict[str, float], sizes: dict[str, int],
           stages: dict[str, float], evaluation_s: float | None) -> dict[str, Any]:
    """Seconds the rollout, the agent's update and the held-out evaluation cannot go below on this machine with the
    work they must do (see the module docstring), and measured / limit. The arithmetic counts each shared prompt
    prefix once per batch, as the code now does: the limit of the algorithm, not of the code before it."""
    import polars as pl

    flops = peaks["matmul_gflops"] * 1e9
    n, head = sizes["non_embedding"], sizes["lm_head"]
    weight_read = sizes["all"] * 4 / (peaks["copy_gb_s"] * 1e9)  # one pass over the fp32 weights
    shared, batch = gen["shared_prefix_tokens"], gen["batch_size"]
    g = gen["genenv_engine"]
    batches = -(-gen["prompts"] * gen["k"] // batch)

    def generation(prefill_tokens: float, tokens: float, calls: int, steps: int) -> float:
        compute = (2 * n * prefill_tokens + 2 * (n + head) * tokens) / flops
        return max(compute, calls * steps * weight_read)

    rollout = generation(g["prefill_tokens_computed"], g["tokens"], batches, gen["max_new_tokens"])
    e = run_root / "epochs" / "0001"
    metrics = json.loads((e / "metrics.json").read_text())
    prompt, completion = metrics.get("mean_prompt_tokens") or 64, metrics.get("mean_completion_tokens") or 8
    # the held-out evaluation: 240 greedy answers of at most 16 tokens, each prompt's own tokens once
    held = 240
    evaluation = generation(held * (prompt - shared) + -(-held // 64) * shared, held * completion, -(-held // 64), 16)
    upd = pl.read_parquet(e / "agent_update.parquet")
    used = upd.filter(pl.col("used")).height if "used" in upd.columns else upd.height
    micro = 16  # agent_update.batch_size in the experiment
    per_sample = prompt - shared + shared / micro + completion
    passes = 2
    # per pass: forward + backward through the activations (4N) and the reference's forward (2N); once: the old policy
    agent = (passes * used * per_sample * 6 * n + used * per_sample * 2 * n
             + (passes * 3 + 1) * used * completion * 2 * head) / flops
    measured = {"rollout": stages["rollout"], "update-agent": stages["update-agent"]}
    limit = {"rollout": round(rollout, 1), "update-agent": round(agent, 1), "evaluation": round(evaluation, 1)}
    if evaluation_s is not None:
        measured["evaluation"] = round(evaluation_s, 1)
    ratio = {k: round(measured[k] / limit[k], 1) for k in measured if limit.get(k)}
    both = [k for k in measured if limit.get(k)]
    return {"limit_s": limit, "measured_s": measured, "measured_over_limit": ratio,
            "together_measured_over_limit": round(sum(measured[k] for k in both) / sum(limit[k] for k in both), 1),
            "weight_read_s": round(weight_read, 4), "agent_samples_trained": used}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from-run", type=Path, default=None, help="record this finished run's epoch 1 instead")
    ap.add_argument("--label", default="after")
    ap.add_argument("--no-generation", action="store_true", help="stage times only")
    ap.add_argument("--run-commit", default=None, help="with --from-run: the commit the run was made with")
    args = ap.parse_args(argv)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.from_run:
            root = args.from_run
            timings = json.loads((root / "curriculum-timings.json").read_text())
            epoch_s, base_s = float(timings["1"]), None
        else:
            root, base_s, epoch_s = run_epoch(Path(tmp), args.seed)
        stages = stage_seconds(root)
        figures["epoch_s"] = round(epoch_s, 1)
        figures["stages_s"] = stages
        figures["evaluation_and_startup_s"] = round(epoch_s - sum(stages.values()), 1)
        figures["base_evaluation_s"] = round(base_s, 1) if base_s is not None else None
        counts = json.loads((root / "epochs/0001/manifests/update-agent.json").read_text())["counts"]
        figures["update_agent_steps"] = counts.get("steps")
        figures["update_agent_s_per_step"] = round(stages["update-agent"] / max(1, counts.get("steps") or 1), 2)
        if not args.no_generation:
            peaks, sizes = machine_peaks(), model_sizes()
            gen = profile_generation(rollout_workload(root), 8, 16, 64, 7)
            figures.update({"machine_peaks": peaks, "model_parameters": sizes, "generation": gen,
                            "limits": limits(root, gen, peaks, sizes, stages, figures["base_evaluation_s"])})
    extra = {"commit": args.run_commit} if args.run_commit else {}
    write_result("epoch_profile", f"epoch_profile-{args.label}", figures, **extra,
                 settings={"epoch": f"curriculum genenv arm, arith, seed {args.seed}, epoch 1",
                           "from_run": str(args.from_run) if args.from_run else None},
                 note="machine otherwise idle; the from-run record reads a run made with the code of its commit")


if __name__ == "__main__":
    main()
