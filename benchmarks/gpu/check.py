"""The GPU check: what a CUDA GPU shows of genenv, in one command that fits in 8 minutes on one H100 or H200.

    python -m benchmarks.gpu.pack                                   # here, once: fills .whl/ (pack.py)
    python3 -m benchmarks.gpu.check [--pack .whl] [--budget-s 430]  # there (README.md beside this file: the call)
    python -m benchmarks.gpu.check --dry-run                        # here: the same steps, toy sizes, on CPU

Parts, in this order (the first ones are what the last GPU run left open), each in its own processes, each skipped
(and said so) when the time left is less than it needs (`--parts` runs a subset, to finish the rest in a second call):

1. models: randomly initialised models of real shapes around the carried tokenizer (models.py): SmolLM2-135M's,
   taught the arith formats for a few hundred steps, the same shape untaught, and Qwen2.5-0.5B's;
2. updates: update-agent and update-env on the 0.5B shape with synthetic pools of realistic lengths (updates.py):
   LoRA in one process, and full fine-tuning under `accelerate launch --num_processes 1` with the FSDP config; each
   a `genenv` process under benchmarks/gpu/probe.py: its allocated and reserved peaks against memory_plan's plan for
   the same shape, method and workload, the dtype its loss was handed, its host memory;
3. big: the same on Qwen2.5-7B's shape (random weights, built here), the one-GPU LoRA route: update-env at 8 x 2,560
   output tokens and update-agent at 8 x 9,000 tokens, with and without the allocator's expandable segments;
4. rollout_speed: `genenv rollout` tokens/s against a bare `generate` on the same prompts at realistic lengths (64
   sequences x 512 new tokens of the untaught 135M shape, bf16; benchmarks/speed/engine_overhead.py);
5. shard_agreement: `genenv rollout` in one process against 2 shards, the share of sampled tokens that agree
   (agreement.py);
6. gpu_tests: the test suite's GPU tests (`pytest -m gpu tests/engines/test_on_gpu.py`);
7. epoch: a whole co-evolution epoch (`genenv run --epochs 1`) in bf16 on the hf engine, the 135M shape as agent
   and environment, arith; each stage's seconds from its manifest;
8. mismatch: the sampler/trainer gap on the GPU: the epoch's rollouts (sampled in bf16) against update-agent's old
   policy (float32 weights under bf16 autocast), as benchmarks/speed/sampler_mismatch.py measures it on CPU.

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

# (what the part needs, in seconds, on the GPU / in the dry run); a part starts only when that much is left
NEEDS = {"models": (60, 60), "updates": (150, 120), "big": (200, 90), "rollout_speed": (60, 60),
         "shard_agreement": (50, 40), "gpu_tests": (90, 30), "epoch": (110, 150), "mismatch": (30, 40)}

GPU_SIZES = {"teach_steps": 300, "teach_batch": 32,
             "epoch": {"tasks": 32, "variations": 4, "k": 8, "rollout_tokens": 32, "generate_tokens": 24,
                       "train_batch": 16},
             "rollout_speed": ["--tasks", "8", "--k", "8", "--max-new-tokens", "512", "--batch-size", "64",
                               "--repeat", "2"],
             "shards": {"tasks": 8, "k": 8, "max_new_tokens": 512, "batch": 64}}
DRY_SIZES = {"teach_steps": 10, "teach_batch": 8,
             "epoch": {"tasks": 4, "variations": 2, "k": 2, "rollout_tokens": 6, "generate_tokens": 8,
                       "train_batch": 8},
             "rollout_speed": ["--tasks", "2", "--k", "2", "--max-new-tokens", "4", "--batch-size", "4",
                               "--repeat", "1"],
             "shards": {"tasks": 3, "k": 2, "max_new_tokens": 6, "batch": 4}}


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
    from genenv_cli.machinery.training.grpo import make_trainer, sample_mismatch
    from genenv_cli.machinery.training.policy import load_policy, training_arguments
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
        trainer = make_trainer(policy, training_arguments(tmp, u, seed=0, device="auto"), rows, clip_eps=u.clip_eps,
                               kl_coef=0.0, loss_type=u.loss_type, temperature=temperature,
                               replay_clip=u.replay_clip, is_cap=u.is_cap)
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
        need = NEEDS[name][1 if self.dry else 0]
        if self.left() - RESERVE_S < need:
            self.parts[name] = {"status": "skipped", "reason": f"{self.left():.0f} s left of the budget, {need} s needed"}
            return
        t = time.monotonic()
        try:
            result = fn()
            self.parts[name] = {"status": "failed" if result.get("failed") else "ok", **result}
        except subprocess.TimeoutExpired:
            self.parts[name] = {"status": "failed", "error": "ran past the time left of the budget"}
        except Exception as exc:  # noqa: BLE001 - one part's failure is recorded; the others still run
            self.parts[name] = {"status": "failed", "error": str(exc)[-1500:]}
        self.parts[name]["seconds"] = round(time.monotonic() - t, 1)
        print(f"[{time.monotonic() - self.start:5.0f} s] {name}: {self.parts[name]['status']}", flush=True)

    def budget(self) -> float:
        return self.left() - RESERVE_S

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
        chosen = self.args.parts.split(",") if self.args.parts else list(NEEDS)
        unknown = sorted(set(chosen) - set(NEEDS))
        if unknown:
            raise SystemExit(f"--parts: unknown {', '.join(unknown)}; the parts are {', '.join(NEEDS)}")
        for name in NEEDS:
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
    ap.add_argument("--budget-s", type=float, default=430.0, help="seconds the whole check may take")
    ap.add_argument("--out", help="where the result goes (default benchmarks/speed/results/gpu/)")
    ap.add_argument("--dry-run", action="store_true", help="toy sizes on CPU, to check the check itself")
    ap.add_argument("--parts", help=f"a comma-separated subset of {','.join(NEEDS)} (models always runs)")
    for hidden in ("--part", "--work", "--result", "--model", "--run-dir"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.part:
        work = Path(args.work)
        if args.part == "models":
            result = part_models(work, Path(args.pack), args.dry_run)
        elif args.part in ("prepare-updates", "prepare-big"):
            from benchmarks.gpu.updates import prepare_all

            result = prepare_all(work, args.model, args.part.removeprefix("prepare-"), args.dry_run)
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
