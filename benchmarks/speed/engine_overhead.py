"""Engine overhead: `genenv rollout` tokens/s against the bare engine it wraps, over the same prompts, model,
sampling settings and seeds, measured in one process. Goal: ratio >= 0.95.

    python -m benchmarks.speed.engine_overhead [--engine hf] [--domain arith] [--tasks 32] [--k 4] [--max-new-tokens 32]
    python -m benchmarks.speed.engine_overhead --engine vllm --tasks 16 --k 8 --max-new-tokens 48

--engine hf (the default): a bare transformers `generate` loop. Both sides load the model from the same folder
(`--model`, the embedded model by default) onto the same device in the same dtype (genenv's `auto`: float32 on CPU,
bfloat16 on a GPU), batch the same sequences in the same order (longest prompt first) and sample with temperature
1, top-p 1, no top-k; `generate` seeds each batch, genenv's engine each sample (a generator per row, so that a
sample's tokens do not depend on its batch), so the two draw different tokens from the same distributions and the
comparison is of tokens per second; timed: model load + generation.

--engine vllm: a bare `LLM.generate` over the same token ids with the SamplingParams the engine builds (n = k, one
seed per prompt, the sampled token's logprob) and the same LLM arguments. Engine start-up (30-100 s on two cores,
the same `LLM(...)` call on both sides) is timed apart and left out of the ratio: the rollout stage's time less its
engine's start, against `LLM.generate`'s. vLLM spawns processes: run it as a script.

Both record every sampled token's logprob; the rollout side also writes rollouts.parquet. Runs alternate (bare,
genenv, bare, genenv ...) and the best of each is kept. Writes benchmarks/speed/results/engine_overhead/engine_overhead-<domain>.json
(engine_overhead-vllm-<domain>.json for vLLM).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import left_padded, write_result


def bare_loop(model_dir: str, conversations: list, k: int, batch_size: int, max_new_tokens: int, seed: int) -> int:
    """What a user would write with transformers alone, on the device and in the dtype genenv's engine picks;
    returns the number of generated tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv_cli.machinery.models import pick_device, pick_dtype

    device = pick_device("auto")
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=pick_dtype("auto", device)).to(device)
    model.eval()
    return generate_batches(model, tok, conversations, k, batch_size, max_new_tokens, seed)


def generate_batches(model, tok, conversations: list, k: int, batch_size: int, max_new_tokens: int, seed: int) -> int:
    """k samples of every conversation with `model.generate`, batch_size sequences at a time (longest prompt
    first, left-padded, each batch seeded seed + its index); returns the number of generated tokens."""
    import torch

    eos = tok.eos_token_id
    prompts = [tok(tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for c in conversations]
    jobs = sorted(((i, s) for i in range(len(prompts)) for s in range(k)), key=lambda j: (-len(prompts[j[0]]), j))
    total = 0
    for b, start in enumerate(range(0, len(jobs), batch_size)):
        batch = [prompts[i] for i, _ in jobs[start:start + batch_size]]
        ids, mask = left_padded(batch, tok.pad_token_id)
        ids, mask = ids.to(model.device), mask.to(model.device)
        width = ids.shape[1]
        torch.manual_seed(seed + b)
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                                 top_k=0, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=eos)
        for row in out[:, width:].tolist():
            total += next((j + 1 for j, t in enumerate(row) if t == eos), len(row))
    return total


def vllm_arguments(model_dir: str, seed: int) -> dict:
    """The `LLM(...)` arguments genenv's engine passes on this machine, for the auto dtype and memory share."""
    from genenv_cli.catalogue.settings import VLLMConfig
    from genenv_cli.machinery.engines import vllm_device, vllm_dtype, vllm_memory_share

    where = vllm_device()
    args = {"model": model_dir, "tokenizer": model_dir, "dtype": vllm_dtype("auto", where), "seed": seed,
            "enable_lora": False, "max_lora_rank": VLLMConfig().max_lora_rank, "logprobs_mode": "processed_logprobs",
            "generation_config": "vllm", "gpu_memory_utilization": vllm_memory_share(0.0, where),
            "tensor_parallel_size": 1}
    if where == "cpu":
        args["enable_chunked_prefill"] = False  # as the engine, for per-request seeds on CPU
        args["enforce_eager"] = True            # as the engine under vllm.compile = "auto" on CPU
    return args


def bare_vllm(model_dir: str, conversations: list, k: int, max_new_tokens: int, seed: int, engine_seed: int,
              dtype: str | None = None, seeded: bool = True) -> tuple[int, float, float]:
    """What a user would write with vLLM alone: (generated tokens, generation seconds, engine start seconds).
    `seeded`: a seed per prompt, as the engine under vllm.seeding = "request"; else the engine's seed only."""
    import gc

    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    from genenv_cli.machinery.engines.vllm import request_seeds

    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = [{"prompt_token_ids": tok(tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
                                        add_special_tokens=False)["input_ids"]} for c in conversations]
    args = vllm_arguments(model_dir, engine_seed)
    if dtype:
        args["dtype"] = dtype
    t = time.perf_counter()
    llm = LLM(**args)
    start = time.perf_counter() - t
    if not seeded:
        args.pop("enable_chunked_prefill", None)  # the engine keeps chunked prefill without per-request seeds
    params = [SamplingParams(n=k, temperature=1.0, top_p=1.0, max_tokens=max_new_tokens, logprobs=0,
                             seed=s if seeded else None) for s in request_seeds(seed, len(prompts), k)]
    t = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - t
    tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
    del llm, outs
    gc.collect()
    return tokens, seconds, start


def timed_rollout(run, cfg, epoch: int = 1) -> tuple[int, float, float]:
    """The rollout stage, whole: (completion tokens, seconds, of which opening the engine). The engine's opening is
    timed by wrapping `open_engine`, which the stage looks up when it runs."""
    import genenv_cli.machinery.engines as engines
    from genenv_cli.stages import rollout

    opened: list[float] = []
    real = engines.open_engine

    def timed_open(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            opened.append(time.perf_counter() - t0)

    engines.open_engine = timed_open
    try:
        t = time.perf_counter()
        result = rollout.run(run, cfg, epoch, force=True)
        seconds = time.perf_counter() - t
    finally:
        engines.open_engine = real
    return result.manifest["counts"]["completion_tokens"], seconds, sum(opened)


def prepare_run(root: Path, domain: str, tasks: int, k: int, max_new_tokens: int, batch_size: int, engine: str):
    """A run directory whose epoch 1 has `tasks` tasks (the domain's seeds, no environment model): (run, cfg,
    conversations, rollout seed)."""
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.checkpoints import derive_seed
    from genenv_cli.rundir import RunDir
    from genenv_cli.rundir.datafiles import read_jsonl
    from genenv_cli.stages import generate_tasks

    root.mkdir()
    data = apply_overrides({"run": {"domain": domain, "engine": engine}, "env": {"mode": "seeds"}}, [
        f"generate.tasks_per_epoch={tasks}", f"rollout.group_size={k}",
        f"rollout.max_new_tokens={max_new_tokens}", f"rollout.batch_size={batch_size}",
        "rollout.temperature=1.0", "rollout.top_p=1.0"])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "bench")))
    run = RunDir(root)
    cfg = run.load_config()
    generate_tasks.run(run, cfg, 1)
    dom = get_domain(domain)
    convs = [dom.agent_messages(t["payload"]) for t in read_jsonl(run.epoch_dir(1) / "tasks.jsonl", "tasks")]
    return run, cfg, convs, derive_seed(cfg.run.seed, "rollout", 1)


def vllm_main(args) -> None:
    from genenv_cli.machinery.models import ensure_embedded

    model_dir = str(ensure_embedded())
    bare, ours = [], []
    with tempfile.TemporaryDirectory() as tmp:
        run, cfg, convs, seed = prepare_run(Path(tmp) / "run", args.domain, args.tasks, args.k, args.max_new_tokens,
                                            args.batch_size, "vllm")
        for _ in range(args.repeat):
            bare.append(bare_vllm(model_dir, convs, args.k, args.max_new_tokens, seed, cfg.run.seed))
            ours.append(timed_rollout(run, cfg))
    best_bare = max(n / s for n, s, _ in bare)
    best_ours = max(n / (s - o) for n, s, o in ours)
    figures = {
        "bare_llm_generate_tokens_per_s": round(best_bare, 1),
        "genenv_rollout_tokens_per_s": round(best_ours, 1),
        "ratio": round(best_ours / best_bare, 3),
        "goal_met": best_ours / best_bare >= 0.95,
        "tokens": {"bare": bare[0][0], "genenv": ours[0][0]},
        "runs": {"bare": [{"tokens": n, "generate_s": round(s, 2), "engine_start_s": round(o, 1)} for n, s, o in bare],
                 "genenv": [{"tokens": n, "stage_s": round(s, 2), "engine_start_s": round(o, 1),
                             "stage_less_start_s": round(s - o, 2)} for n, s, o in ours]},
    }
    write_result("engine_overhead", f"engine_overhead-vllm-{args.domain}", figures,
                 goal="genenv rollout tok/s >= 0.95 x bare vLLM LLM.generate",
                 settings=vars(args) | {"model": "embedded (SmolLM2-135M-Instruct)",
                                        "llm_arguments": vllm_arguments("MODEL", cfg.run.seed),
                                        "timed": "generation: LLM.generate on the bare side; the rollout stage less its "
                                                 "engine start (tasks read, prompts built, logprobs taken, "
                                                 "rollouts.parquet written) on the genenv side; engine start-up apart"},
                 note="measured on a shared 2-core machine with other jobs running: absolute figures are noisy, the "
                      "ratio less so (the sides alternate)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", default="arith")
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--engine", choices=["hf", "vllm"], default="hf")
    ap.add_argument("--model", default="embedded", help="hf only: a model folder (default: the embedded model)")
    ap.add_argument("--name", default="", help="the result's name (default: engine_overhead-DOMAIN)")
    args = ap.parse_args()
    if args.engine == "vllm":
        vllm_main(args)
        return

    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.checkpoints import derive_seed
    from genenv_cli.machinery.models import ensure_embedded
    from genenv_cli.rundir import RunDir
    from genenv_cli.rundir.datafiles import read_jsonl
    from genenv_cli.stages import generate_tasks, rollout

    model_dir = str(ensure_embedded()) if args.model == "embedded" else args.model
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        data = apply_overrides({"run": {"domain": args.domain}, "env": {"mode": "seeds"},
                                "agent": {"model": args.model}}, [
            f"generate.tasks_per_epoch={args.tasks}", f"rollout.group_size={args.k}",
            f"rollout.max_new_tokens={args.max_new_tokens}", f"rollout.batch_size={args.batch_size}",
            "rollout.temperature=1.0", "rollout.top_p=1.0"])
        (root / "genenv.toml").write_text(render_config(config_from_dict(data, "bench")))
        run = RunDir(root)
        cfg = run.load_config()
        generate_tasks.run(run, cfg, 1)
        domain = get_domain(args.domain)
        tasks = read_jsonl(run.epoch_dir(1) / "tasks.jsonl", "tasks")
        convs = [domain.agent_messages(t["payload"]) for t in tasks]
        seed = derive_seed(cfg.run.seed, "rollout", 1)
        bare, ours = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            n_bare = bare_loop(model_dir, convs, args.k, args.batch_size, args.max_new_tokens, seed)
            bare.append((n_bare, time.perf_counter() - t))
            t = time.perf_counter()
            result = rollout.run(run, cfg, 1, force=True)
            ours.append((result.manifest["counts"]["completion_tokens"], time.perf_counter() - t))
    best_bare = max(n / s for n, s in bare)
    best_ours = max(n / s for n, s in ours)
    figures = {
        "bare_generate_tokens_per_s": round(best_bare, 1),
        "genenv_rollout_tokens_per_s": round(best_ours, 1),
        "ratio": round(best_ours / best_bare, 3),
        "goal_met": best_ours / best_bare >= 0.95,
        "tokens": {"bare": bare[0][0], "genenv": ours[0][0]},
        "runs": {"bare": [[n, round(s, 2)] for n, s in bare], "genenv": [[n, round(s, 2)] for n, s in ours]},
    }
    from genenv_cli.machinery.models import dtype_name, pick_device

    device = pick_device("auto")
    write_result("engine_overhead", args.name or f"engine_overhead-{args.domain}", figures,
                 goal="genenv rollout tok/s >= 0.95 x bare transformers generate",
                 settings=vars(args) | {"model": "embedded (SmolLM2-135M-Instruct)" if args.model == "embedded"
                                        else args.model, "device": device, "dtype": dtype_name("auto", device),
                                        "timed": "model load + generation (+ rollouts.parquet write on the genenv side)"})


if __name__ == "__main__":
    main()
