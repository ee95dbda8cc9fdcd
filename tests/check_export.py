"""Checks a `genenv export` of a run's agent against the run itself (the demo and `nox -s vllm` run it): the exported
folder loads with transformers' AutoModelForCausalLM and generates, greedy, the same tokens as the run's own engine
on the checkpoint, for the agent prompts of the epoch's tasks; with --vllm, vLLM loads the folder and generates
too. Prints what it found; exits 1 naming what differs.

    python tests/check_export.py RUN_DIR EPOCH EXPORT_DIR [--vllm] [--prompts 8] [--max-new-tokens 32]

Token for token is required where the run generates with the `hf` engine in float32 (the same arithmetic on the same
weights). Where the run's engine is vLLM, its kernels and batching differ from transformers', so two greedy
decodings may part at a near tie: the agreement is printed, and vLLM must load the export and answer every prompt.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def agent_prompts(run, cfg, epoch: int, limit: int) -> list[list[dict[str, str]]]:
    """The agent's messages for the first `limit` tasks of the epoch, as `rollout` renders them."""
    from genenv_cli.catalogue.domains import run_domains

    domains = run_domains(cfg)
    tasks = [json.loads(line) for line in run.file("tasks", epoch).read_text().splitlines() if line.strip()]
    return [domains[t["domain"]].agent_messages(t["payload"]) for t in tasks[:limit]]


def run_engine_tokens(run, cfg, epoch: int, prompts, max_new_tokens: int) -> tuple[str, list[list[int]]]:
    from genenv_cli.machinery.engines import SamplingParams, open_engine
    from genenv_cli.machinery.models import resolve

    folder = run.checkpoint_dir(epoch, "agent")
    engine = open_engine(resolve(str(folder), tag=run.rel(folder)), engine=cfg.run.engine, device="cpu",
                         dtype=cfg.run.dtype, seed=cfg.run.seed, vllm_settings=cfg.vllm)
    try:
        outs = engine.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens))
        return engine.name, [o[0].token_ids for o in outs]
    finally:
        engine.close()


def transformers_tokens(export: Path, prompts, max_new_tokens: int) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, greedy completion ids) of plain transformers on the export, one prompt at a time."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(export)
    prompt_ids, out = [], []
    for messages in prompts:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=max_new_tokens)
        prompt_ids.append(ids[0].tolist())
        out.append(gen[0, ids.shape[1]:].tolist())
    return prompt_ids, [_to_eos(t, tok.eos_token_id) for t in out]


def vllm_tokens(export: Path, prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=str(export), dtype="float32", enforce_eager=True, gpu_memory_utilization=0.1, max_model_len=2048,
              seed=0)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompt_ids],
                        SamplingParams(temperature=0.0, max_tokens=max_new_tokens))
    return [list(o.outputs[0].token_ids) for o in outs]


def _to_eos(tokens: list[int], eos: int | None) -> list[int]:
    return tokens[:tokens.index(eos) + 1] if eos is not None and eos in tokens else tokens


def main() -> int:
    from genenv_cli.rundir import RunDir

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("epoch", type=int)
    ap.add_argument("export", type=Path)
    ap.add_argument("--vllm", action="store_true", help="also load the export in vLLM")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()
    run = RunDir(args.run)
    cfg = run.load_config()
    prompts = agent_prompts(run, cfg, args.epoch, args.prompts)
    print(f"export check: {len(prompts)} prompts, greedy, through the run's engine on the checkpoint ...", flush=True)
    engine, ours = run_engine_tokens(run, cfg, args.epoch, prompts, args.max_new_tokens)
    print(f"export check: the same prompts through transformers on {args.export} ...", flush=True)
    prompt_ids, theirs = transformers_tokens(args.export, prompts, args.max_new_tokens)
    eos = _eos(args.export)
    ours = [_to_eos(t, eos) for t in ours]
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    tokens = sum(len(t) for t in ours)
    print(f"export check: {len(prompts)} prompts of epoch {args.epoch}'s tasks, {tokens} greedy tokens from the run's "
          f"engine ({engine}) on {run.rel(run.checkpoint_dir(args.epoch, 'agent'))}")
    print(f"export check: transformers on {args.export}: {same} of {len(prompts)} completions identical token for token")
    print("export check: the same prompts through the base model ...", flush=True)
    _, base = transformers_tokens(_base_folder(cfg), prompts, args.max_new_tokens)
    print(f"export check: the base model ({cfg.agent.model}) gives {sum(a != b for a, b in zip(base, theirs, strict=True))} "
          f"of {len(prompts)} completions other than the export's")
    moved = weight_change(_base_folder(cfg), args.export)
    print(f"export check: the export's weights differ from the base's in {moved[0]} tensors (largest change {moved[1]:.3g})")
    problems = []
    if engine == "hf" and same != len(prompts):
        first = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        problems.append(f"prompt {first}: the run's engine gave {ours[first]}, the export {theirs[first]}")
    if args.vllm:
        got = vllm_tokens(args.export, prompt_ids, args.max_new_tokens)
        got = [_to_eos(t, eos) for t in got]
        agree = sum(a == b for a, b in zip(got, theirs, strict=True))
        print(f"export check: vLLM loaded {args.export}: {agree} of {len(prompts)} greedy completions identical to "
              f"transformers', {sum(a == b for a, b in zip(got, ours, strict=True))} to the run's engine")
        if any(not t for t in got):
            problems.append("vLLM returned an empty completion")
    for p in problems:
        print(f"export check: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


def weight_change(base: Path, export: Path) -> tuple[int, float]:
    """(tensors that differ, the largest absolute change) between two folders' safetensors weights."""
    import numpy as np
    from safetensors.numpy import load_file

    def weights(folder: Path) -> dict:
        out = {}
        for f in sorted(folder.glob("*.safetensors")):
            out.update(load_file(str(f)))
        return out

    a, b = weights(base), weights(export)
    diffs = [float(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)).max()) for k in a if k in b]
    return sum(d > 0 for d in diffs), max(diffs, default=0.0)


def _base_folder(cfg) -> Path:
    from genenv_cli.machinery.models import resolve

    return Path(resolve(cfg.agent.model).path)


def _eos(export: Path) -> int | None:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(export).eos_token_id


if __name__ == "__main__":
    sys.exit(main())
