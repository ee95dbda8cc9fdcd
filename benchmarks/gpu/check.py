"""The GPU check: what a CUDA GPU shows of genenv, in one call of at most 6 minutes on one H100 or H200.

    python -m benchmarks.gpu.pack                                   # here, once: fills .whl/ (pack.py)
    python3 -m benchmarks.gpu.check [--pack .whl] [--budget-s 330]  # there (README.md beside this file: the call)
    python -m benchmarks.gpu.check --dry-run                        # here: the same steps, toy sizes, on CPU
    python -m benchmarks.gpu.check --plan                           # the plan: each part's cap, and the sum

The check keeps its own deadline: `--budget-s` (330 s by default: with the install, about 15 s, one call of at most
360 s). Each part has a cap (PLAN); it starts only when its cap fits in what is left of the budget, its processes are
killed at the cap, and the caps of the default parts, with the time kept back for the results, add up to at most the
budget, so a slow part costs its own cap and never the parts after it. The results file is written after every part,
so whatever a part measured is recorded even when the call is cut short. Parts, most important first:

1. models: randomly initialised models of real shapes around the carried tokenizer (models.py): SmolLM2-135M's,
   taught the arith formats for a few steps, the same shape untaught, and Qwen2.5-0.5B's;
2. gpu_tests: the test suite's GPU tests (`pytest -m gpu tests/engines/test_on_gpu.py`);
3. precision: the FSDP route over one process against the plain one-GPU route, full fine-tuning in bf16: the dtypes
   each trainer held, gradient norms and losses per step, final weights; and FSDP2's gradient accumulation over 4
   micro-batches with `reduce_dtype` float32 (genenv's policy) against bf16 (precision.py);
4. updates: update-agent with LoRA in one process and update-env with full fine-tuning under `accelerate launch
   --num_processes 1` with the FSDP config (cpu_ram_efficient_loading), on the 0.5B shape (updates.py): peak memory
   during `Accelerator.prepare` and over the whole update against memory_plan's plan, the dtype the loss was handed;
5. epoch: a whole co-evolution epoch (`genenv run --epochs 1`) in bf16 on the hf engine, the 135M shape as agent
   and environment, arith; each stage's seconds from its manifest;
6. rollout_speed: `genenv rollout` tokens/s against a bare `generate` on the same prompts (the untaught 135M shape,
   bf16; benchmarks/speed/engine_overhead.py);
7. mismatch: the sampler/trainer gap on the GPU: the epoch's rollouts (sampled in bf16) against update-agent's old
   policy (float32 weights under bf16 autocast).

Two more parts run only when named (`--parts`, a second call, optional): big (the 7B shape's one-GPU LoRA route,
about 200 s) and shard_agreement (`genenv rollout` in one process against 2 shards).

Writes benchmarks/speed/results/gpu/gpu_check-<device>.json (GENENV_BENCH_RESULTS=DIR: DIR/gpu/ instead) and
prints one table. A part that fails is recorded with its error's last lines and the others still run; the exit
status is 1 when any part failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESERVE_S = 15  # kept back for writing the results and the table
BUDGET_S = 330  # the check's own deadline: with the install (about 15 s) one call of at most 360 s

# name: (cap on a GPU, cap in the dry run, in the default plan), most important first. A part starts only when its cap
# fits in what is left; its processes are killed at the cap. The GPU caps are estimates from the parts' earlier runs
# on one H200 at the sizes below (scaled where a size changed); the dry run's are generous (2 shared CPU cores).
PLAN = {"models": (45, 300, True), "gpu_tests": (50, 120, True), "precision": (65, 1200, True),
        "updates": (55, 300, True), "epoch": (55, 400, True), "rollout_speed": (30, 150, True),
        "mismatch": (15, 120, True), "big": (200, 300, False), "shard_agreement": (50, 150, False)}

GPU_SIZES = {"teach_steps": 150, "teach_batch": 32,
             "epoch": {"tasks": 16, "variations": 4, "k": 8, "rollout_tokens": 32, "generate_tokens": 24,
                       "train_batch": 16},
             "rollout_speed": ["--tasks", "8", "--k", "4", "--max-new-tokens", "256", "--batch-size", "32",
                               "--repeat", "1"],
             "shards": {"tasks": 8, "k": 8, "max_new_tokens": 512, "batch": 64}}
DRY_SIZES = {"teach_steps": 10, "teach_batch": 8,
             "epoch": {"tasks": 4, "variations": 2, "k": 2, "rollout_tokens": 6, "generate_tokens": 8,
                       "train_batch": 8},
             "rollout_speed": ["--tasks", "2", "--k", "2", "--max-new-tokens", "4", "--batch-size", "4",
                               "--repeat", "1"],
             "shards": {"tasks": 3, "k": 2, "max_new_tokens": 6, "batch": 4}}


def default_parts() -> list[str]:
    return [name for name, (_, _, default) in PLAN.items() if default]


def plan_seconds(dry: bool = False) -> dict[str, float]:
    """The default plan's caps, their sum with the reserve, and the budget they must fit."""
    caps = {name: PLAN[name][1 if dry else 0] for name in default_parts()}
    return {**caps, "reserve": RESERVE_S, "total": sum(caps.values()) + RESERVE_S, "budget": BUDGET_S}


def sizes(dry: bool) -> dict[str, Any]:
    return DRY_SIZES if dry else GPU_SIZES


# ---------------------------------------------------------------- parts that run in a child process (--part)

def part_models(work: Path, pack: Path, dry: bool) -> dict[str, Any]:
    import torch

    from benchmarks.gpu.models import build, teach_arith, unpack_tokenizer

    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    t = time.perf_counter()
    tok = unpack_tokenizer(pack, work)
    smol = build("smollm2-135m", tok, work / "smollm2-135m", device=device, tiny=dry)
    untaught = build("smollm2-135m", tok, work / "smollm2-135m-random", device=device, tiny=dry, seed=1)
    qwen = build("qwen2-0.5b", tok, work / "qwen2-0.5b", device=device, tiny=dry)
    built = time.perf_counter() - t
    t = time.perf_counter()
    taught = teach_arith(smol, steps=sizes(dry)["teach_steps"], batch=sizes(dry)["teach_batch"], device=device)
    info = {"device": device, "build_s": round(built, 1), "teach_s": round(time.perf_counter() - t, 1), **taught,
            "models": {"smollm2-135m": str(smol), "smollm2-135m-random": str(untaught), "qwen2-0.5b": str(qwen)}}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info["device_name"] = torch.cuda.get_device_name(0)
        info["device_memory_gb"] = round(props.total_memory / 1e9, 1)
        info["bf16"] = torch.cuda.is_bf16_supported()
    info["torch"] = torch.__version__
    return info


def part_build_7b(work: Path, dry: bool) -> dict[str, Any]:
    """Qwen2.5-7B's shape with random weights, in bf16, saved beside the tokenizer of the 0.5B model."""
    import torch

    from benchmarks.gpu.models import build

    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    t = time.perf_counter()
    path = build("qwen2-7b", work / "qwen2-0.5b", work / "qwen2-7b", device=device, tiny=dry)
    return {"model": str(path), "build_s": round(time.perf_counter() - t, 1)}


def part_mismatch(run_dir: Path, model: str) -> dict[str, Any]:
    """The epoch's rollouts (sampled by the hf engine in the run's dtype) against update-agent's old-policy pass:
    float32 weights with a fresh LoRA adapter under the trainer's autocast."""
    import torch

    from genenv_cli.catalogue.config import Config
    from genenv_cli.machinery.models import dtype_name, pick_device
    from genenv_cli.machinery.training.grpo import sample_mismatch
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.policy_loading import load_policy
    from genenv_cli.machinery.training.training_loop import training_arguments
    from genenv_cli.rundir.datafiles import read_parquet

    df = read_parquet(run_dir / "epochs" / "0001" / "rollouts.parquet", "rollouts")
    rows = [{"prompt_ids": r["prompt_token_ids"], "completion_ids": r["completion_token_ids"],
             "sampler_logps": r["logprobs"], "advantage": 1.0, "replay": False}
            for r in df.iter_rows(named=True) if r["completion_token_ids"]]
    u = Config().agent_update
    device = pick_device("auto")
    compute = dtype_name("auto", device)
    policy = load_policy(model, "base", base_name=model, train=u, need_reference=False, device="auto", dtype="auto",
                         trust_remote_code=False, seed=1)
    temperature = float(df["temperature"][0])
    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=0.0, loss_type=u.loss_type, temperature=temperature,
                            replay_clip=u.replay_clip, is_cap=u.is_cap)
        trainer = GRPOTrainer(policy, training_arguments(tmp, u, seed=0, device="auto"), rows, config)
        kind = "cuda" if device.startswith("cuda") else "cpu"
        with torch.autocast(kind, dtype=getattr(torch, compute), enabled=compute != "float32"):
            table = trainer._old_policy(trainer.model, torch.device(device))
    per, deltas = [], []
    for i, r in enumerate(rows):
        old = table[i, :len(r["completion_ids"])].double().cpu()
        sampler = torch.tensor(r["sampler_logps"], dtype=torch.float64)
        per.append(sample_mismatch(old, sampler, u.is_cap))
        deltas.append(old - sampler)
    d = torch.cat(deltas)
    tokens = sum(p["tokens"] for p in per)
    ratio = torch.exp(-d)

    def weighted(key: str) -> float:
        return float(f"{sum(p[key] * p['tokens'] for p in per) / max(tokens, 1):.6g}")

    trainer_kind = "float32" if compute == "float32" else f"float32 weights, {compute} autocast"
    return {"sampler_dtype": compute, "trainer": trainer_kind, "samples": len(rows),
            "tokens": tokens, "mean_abs_delta_logprob": weighted("logp_abs_diff"),
            "kl_sampler_trainer": weighted("sampler_kl"), "share_truncated": weighted("truncated_share"),
            "max_abs_delta_logprob": float(f"{d.abs().max().item():.6g}"),
            "share_outside_clip_band": float(f"{((ratio < 0.8) | (ratio > 1.2)).double().mean():.6g}")}


# ---------------------------------------------------------------- the parent: budget, processes, table

class Check:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.dry = args.dry_run
        self.start = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="genenv-gpu-check-"))
        self.parts: dict[str, dict[str, Any]] = {}
        self.part_deadline = float("inf")
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", GENENV_CACHE=str(self.work / "cache"), GENENV_OFFLINE="1",
                        HF_HUB_OFFLINE="1")
        if self.dry:
            self.env["CUDA_VISIBLE_DEVICES"] = ""

    def left(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.start)

    def run(self, cmd: list[str], *, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env or self.env,
                              timeout=max(5.0, timeout))

    def child(self, *args: str, timeout: float) -> dict[str, Any]:
        """A part run as `python -m benchmarks.gpu.check --part ...` in its own process; its JSON result."""
        out = self.work / f"part-{len(list(self.work.glob('part-*.json')))}.json"
        cmd = [sys.executable, "-m", "benchmarks.gpu.check", "--work", str(self.work), "--pack", self.args.pack,
               "--result", str(out), *(["--dry-run"] if self.dry else []), *args]
        done = self.run(cmd, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(_tail(done))
        return json.loads(out.read_text())

    def part(self, name: str, fn) -> None:
        need = PLAN[name][1 if self.dry else 0]
        if self.left() - RESERVE_S < need:
            self.parts[name] = {"status": "skipped", "reason": f"{self.left():.0f} s left of the budget, {need} s needed"}
            return
        t = time.monotonic()
        self.part_deadline = t + need
        try:
            result = fn()
            self.parts[name] = {"status": "failed" if result.get("failed") else "ok", **result}
        except subprocess.TimeoutExpired:
            self.parts[name] = {"status": "failed", "error": f"ran past its cap of {need} s (killed)"}
        except Exception as exc:  # noqa: BLE001 - one part's failure is recorded; the others still run
            self.parts[name] = {"status": "failed", "error": str(exc)[-1500:]}
        self.parts[name]["seconds"] = round(time.monotonic() - t, 1)
        self.parts[name]["cap_s"] = need
        self.write()   # what this part measured is recorded now, whatever happens to the call after it
        print(f"[{time.monotonic() - self.start:5.0f} s] {name}: {self.parts[name]['status']}", flush=True)

    def budget(self) -> float:
        """Seconds the running part's processes may still take: to its cap, within the whole budget."""
        return min(self.left() - RESERVE_S, self.part_deadline - time.monotonic())

    # -- the parts
    def models(self) -> dict[str, Any]:
        return self.child("--part", "models", timeout=self.budget())

    def gpu_tests(self) -> dict[str, Any]:
        done = self.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                         "tests/engines/test_on_gpu.py"], timeout=self.budget())
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", summary)}
        result = {"summary": summary, **counts}
        if done.returncode not in (0, 5) and counts.get("failed", 0) + counts.get("errors", 0) + counts.get("error", 0):
            result["failures"] = _tail(done, 3000)
            raise RuntimeError(json.dumps(result))
        return result

    def updates(self) -> dict[str, Any]:
        from benchmarks.gpu.updates import run_part

        return run_part(self, "updates", self.parts["models"]["models"]["qwen2-0.5b"])

    def big(self) -> dict[str, Any]:
        from benchmarks.gpu.updates import run_part

        built = self.child("--part", "build-7b", timeout=self.budget())
        return {**run_part(self, "big", built["model"]), "build_s": built["build_s"]}

    def precision(self) -> dict[str, Any]:
        from benchmarks.gpu.precision import compare_routes

        model = self.parts["models"]["models"]["smollm2-135m-random"]
        prepared = self.child("--part", "prepare-precision", "--model", model, timeout=self.budget())
        reduce = self.child("--part", "reduce", "--model", model, timeout=self.budget())
        return {"reduce": reduce, "routes": compare_routes(self, prepared["run"], model)}

    def shard_agreement(self) -> dict[str, Any]:
        return self.child("--part", "shards", "--model", self.parts["models"]["models"]["smollm2-135m-random"],
                          timeout=self.budget())

    def epoch(self) -> dict[str, Any]:
        s = sizes(self.dry)["epoch"]
        model = self.parts["models"]["models"]["smollm2-135m"]
        run = self.work / "epoch-run"
        sets = ["run.engine=hf", f"generate.tasks_per_epoch={s['tasks']}", f"generate.variations={s['variations']}",
                "generate.seed_share=0.5", "generate.max_rounds=2", f"generate.max_new_tokens={s['generate_tokens']}",
                f"rollout.group_size={s['k']}", f"rollout.max_new_tokens={s['rollout_tokens']}",
                "rollout.batch_size=64", "generate.batch_size=64", f"agent_update.batch_size={s['train_batch']}",
                f"env_update.batch_size={s['train_batch']}", "curriculum.k_min=0.5", "env_update.kl_max=100"]
        genenv = [sys.executable, "-m", "genenv_cli"]
        done = self.run([*genenv, "init", str(run), "--domain", "arith", "--agent-model", model, "--env-model", model,
                         *[a for x in sets for a in ("--set", x)]], timeout=60)
        if done.returncode != 0:
            raise RuntimeError(_tail(done))
        t = time.monotonic()
        done = self.run([*genenv, "run", "--epochs", "1", "--run", str(run), "--quiet"], timeout=self.budget())
        wall = time.monotonic() - t
        if done.returncode != 0:
            raise RuntimeError(_tail(done))
        stages = {}
        for stage in ("generate-tasks", "rollout", "score", "update-agent", "update-env"):
            m = json.loads((run / "epochs" / "0001" / "manifests" / f"{stage}.json").read_text())
            stages[stage] = {"seconds": m["seconds"], "counts": {k: v for k, v in m.get("counts", {}).items()
                                                                 if isinstance(v, int | float)}}
        self.epoch_run = run
        return {"run_wall_s": round(wall, 1), "stages": stages, "dtype": "bfloat16 (auto)" if not self.dry else
                "float32 (auto, CPU)", "settings": sets}

    def mismatch(self) -> dict[str, Any]:
        if not hasattr(self, "epoch_run"):
            raise RuntimeError("needs the epoch's rollouts, and the epoch did not run")
        return self.child("--part", "mismatch", "--run-dir", str(self.epoch_run), "--model",
                          self.parts["models"]["models"]["smollm2-135m"], timeout=self.budget())

    def rollout_speed(self) -> dict[str, Any]:
        results = self.work / "bench"
        env = dict(self.env, GENENV_BENCH_RESULTS=str(results))
        done = self.run([sys.executable, "-m", "benchmarks.speed.engine_overhead", "--domain", "arith", "--model",
                         self.parts["models"]["models"]["smollm2-135m-random"], "--name", "engine_overhead-gpu",
                         *sizes(self.dry)["rollout_speed"]], timeout=self.budget(), env=env)
        if done.returncode != 0:
            raise RuntimeError(_tail(done))
        record = json.loads((results / "engine_overhead" / "engine_overhead-gpu.json").read_text())
        return {**record["figures"], "settings": record["settings"]}

    def go(self) -> int:
        chosen = self.args.parts.split(",") if self.args.parts else default_parts()
        unknown = sorted(set(chosen) - set(PLAN))
        if unknown:
            raise SystemExit(f"--parts: unknown {', '.join(unknown)}; the parts are {', '.join(PLAN)}")
        for name in PLAN:
            if name not in chosen and name != "models":
                continue
            if name != "models" and self.parts.get("models", {}).get("status") != "ok":
                self.parts[name] = {"status": "skipped", "reason": "the models were not built"}
                continue
            if name == "mismatch" and "epoch" not in chosen:
                self.parts[name] = {"status": "skipped", "reason": "needs the epoch part's rollouts"}
                continue
            self.part(name, getattr(self, name))
        path = self.write()
        print(table(self.parts, self.device()))
        print(f"results: {path}")
        return 1 if any(p["status"] == "failed" for p in self.parts.values()) else 0

    def device(self) -> str:
        m = self.parts.get("models", {})
        return m.get("device_name") or m.get("device") or "unknown"

    def write(self) -> Path:
        from lab.record import git_commit, machine, versions

        from benchmarks.speed.common import RESULTS

        slug = re.sub(r"[^a-z0-9]+", "-", self.device().lower()).strip("-") + ("-dry-run" if self.dry else "")
        folder = Path(self.args.out) if self.args.out else RESULTS / "gpu"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"gpu_check-{slug}.json"
        manifest = Path(self.args.pack) / "MANIFEST.json"
        pack = json.loads(manifest.read_text()) if manifest.exists() else None
        record = {"benchmark": "gpu_check", "date": time.strftime("%Y-%m-%d"), "device": self.device(),
                  "dry_run": self.dry, "commit": (pack or {}).get("commit") or git_commit(), "machine": machine(),
                  "versions": versions(), "pack": pack,
                  "budget_s": self.args.budget_s, "seconds": round(time.monotonic() - self.start, 1),
                  "parts": self.parts}
        path.write_text(json.dumps(record, indent=2) + "\n")
        return path


def _tail(done: subprocess.CompletedProcess, n: int = 1500) -> str:
    return ((done.stdout or "") + (done.stderr or ""))[-n:]


def table(parts: dict[str, dict[str, Any]], device: str) -> str:
    """One table of every part's figures."""
    rows = [("part", "measured", "against", "status")]

    def add(part: str, measured: str, against: str = "", status: str | None = None) -> None:
        rows.append((part, measured, against, status if status is not None else parts[part.split(" ")[0]]["status"]))

    for name, p in parts.items():
        if p["status"] != "ok":
            rows.append((name, p.get("reason") or p.get("error", "")[:60].replace("\n", " "), "", p["status"]))
            continue
        if name == "models":
            add(name, f"built in {p['build_s']} s; 135M taught {p['steps']} steps, loss {p['first_loss']} -> "
                f"{p['last_loss']}", p.get("device_name", p["device"]))
        elif name == "gpu_tests":
            add(name, p["summary"])
        elif name in ("updates", "big"):
            for label, r in p["runs"].items():
                if r["status"] != "ok":
                    rows.append((label, r.get("reason") or r.get("error", "")[:60], "", r["status"]))
                    continue
                gpu, res = r["gpu_allocated_peak_gb"], r["gpu_reserved_peak_gb"]
                seen = r.get("loss_inputs") or {}
                measured = (f"GPU peak {gpu:.1f} / {res:.1f} GB reserved" if gpu is not None else
                            "GPU peak n/a (CPU)") + f", host {r['host_anon_peak_gb']:.1f} GB, {r['seconds']} s, " \
                    f"loss: {seen.get('route', '?')} {seen.get('output_dtype', '?')}"
                rows.append((label, measured, f"plan {r['predicted_gpu_gb']:.1f} GB GPU, "
                                              f"{r['predicted_host_gb']:.1f} GB host", "ok"))
        elif name == "shard_agreement":
            add(name, f"{p['token_agreement']:.1%} of tokens, {p['samples_identical']}/{p['samples']} samples "
                f"identical", f"1 process vs 2 shards, {p['dtype']}")
        elif name == "epoch":
            stages = ", ".join(f"{k} {v['seconds']:.0f} s" for k, v in p["stages"].items())
            add(name, f"{p['run_wall_s']} s ({stages})", p["dtype"])
        elif name == "mismatch":
            add(name, f"mean |d logp| {p['mean_abs_delta_logprob']:.3g}, KL {p['kl_sampler_trainer']:.2g}, "
                f"outside clip band {p['share_outside_clip_band']:.2%}", f"{p['samples']} samples, {p['trainer']}")
        elif name == "precision":
            r, red = p["routes"], p["reduce"]
            norms = ", ".join(f"{x['grad_norm_one_gpu']:.4g}/{x['grad_norm_fsdp']:.4g}" for x in r["steps"])
            held = (r["precision"].get("fsdp") or {})
            add(name, f"FSDP weights {held.get('weights')}, compute {held.get('compute')}, reduce "
                f"{held.get('reduce')}; grad norms one GPU/FSDP {norms}; weights differ "
                f"{r['weights_mean_diff_over_mean_move']} of the move", "one-GPU route, bf16")
            add("precision accumulation", f"reduce float32: error {red['reduce_float32']['relative_error_vs_float64_sum']} "
                f"({','.join(red['reduce_float32']['accumulated_in'])}); bf16: error "
                f"{red['reduce_bfloat16']['relative_error_vs_float64_sum']} "
                f"({','.join(red['reduce_bfloat16']['accumulated_in'])})", "4 micro-batches, float64 sum")
        elif name == "rollout_speed":
            add(name, f"genenv {p['genenv_rollout_tokens_per_s']} tok/s, generate {p['bare_generate_tokens_per_s']} "
                f"tok/s: ratio {p['ratio']}", "goal >= 0.95")
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"GPU check on {device}"]
    for i, r in enumerate(rows):
        lines.append(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if i == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", default=str(ROOT / ".whl"), help="the folder pack.py filled (the tokenizer is read there)")
    ap.add_argument("--budget-s", type=float, default=float(BUDGET_S), help="seconds the whole check may take")
    ap.add_argument("--plan", action="store_true", help="print the default plan's caps and their sum, and exit")
    ap.add_argument("--out", help="where the result goes (default benchmarks/speed/results/gpu/)")
    ap.add_argument("--dry-run", action="store_true", help="toy sizes on CPU, to check the check itself")
    ap.add_argument("--parts", help=f"a comma-separated subset of {','.join(PLAN)} (models always runs)")
    for hidden in ("--part", "--work", "--result", "--model", "--run-dir"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.plan:
        print(json.dumps(plan_seconds(args.dry_run), indent=1))
        return
    if args.part:
        work = Path(args.work)
        if args.part == "models":
            result = part_models(work, Path(args.pack), args.dry_run)
        elif args.part in ("prepare-updates", "prepare-big"):
            from benchmarks.gpu.updates import prepare_all

            result = prepare_all(work, args.model, args.part.removeprefix("prepare-"), args.dry_run)
        elif args.part == "prepare-precision":
            from benchmarks.gpu.updates import prepare

            variant = {"name": "precision", "role": "agent", "method": "precision", "pool": "agent",
                       "alloc": "expandable"}
            result = prepare(work, args.model, variant, args.dry_run)
        elif args.part == "reduce":
            from benchmarks.gpu.precision import part_reduce

            result = part_reduce(args.model, args.dry_run)
        elif args.part == "build-7b":
            result = part_build_7b(work, args.dry_run)
        elif args.part == "shards":
            from benchmarks.gpu.agreement import part_shards

            result = part_shards(work, args.model, sizes(args.dry_run)["shards"])
        elif args.part == "mismatch":
            result = part_mismatch(Path(args.run_dir), args.model)
        else:
            raise SystemExit(f"unknown part {args.part!r}")
        Path(args.result).write_text(json.dumps(result))
        return
    sys.exit(Check(args).go())


if __name__ == "__main__":
    main()
