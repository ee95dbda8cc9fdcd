"""The teacher-forced p (curriculum.p_estimator = "teacher_forced") against an independent sampled estimate, task by
task, on arith exercises across the difficulty range, with the embedded agent.

    python -m experiments.p_estimator_check                        # 16 shapes' pool, 60 kept, K = 32
    python -m experiments.p_estimator_check --kept 200 --k 64      # more and tighter
    python -m experiments.p_estimator_check --report-only          # tables from what is finished

A pool of exercises is drawn uniformly from each shape's space (`shape_table.draw`; more of the one-digit shapes,
where p spreads), and the teacher-forced p of every one is computed (one forward pass each). Most of the pool lies
near p = 0, so the exercises kept for sampling are stratified by that p: up to a tenth of `--kept` from each tenth
of [0, 1] (then sampled in a seeded random order, so that a run stopped early holds a subset spread over the range). Selecting on a noise-free
quantity does not bias the comparison (there is no noise in it to regress). Each kept exercise is then sampled K
times with the rollouts' settings (the experiments' `rollout.*`: temperature 1.0, top-p 1.0, 16 new tokens) and
scored by the domain, giving two sampled shares per exercise:
- success: what the `rollouts` estimator reads (the scorer accepts `592`, `Answer: 592.` ...);
- exact: the completion is exactly the reference `Answer: N` and ended, the one event the teacher-forced p is the
  probability of. Its share is an unbiased estimate of that p, so it tests the computation; success minus exact is
  the lower bound's gap.
Agreement per pair of estimates: Pearson correlation, mean absolute and mean signed difference, the share of
exercises whose sampled count lies in the central 95% of Binomial(K, p_tf), and calibration in bins of p_tf.

Sampled exercises are appended to `--work` as they finish (a rerun goes on where it stopped; other settings are
refused). Results go to results/p_estimator/ with the settings, versions, machine and commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from experiments import shape_table

RESULTS = Path(__file__).parent / "results" / "p_estimator"
BINS = [0.0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 1.0001]


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"agent": args.model, "per_shape_pool": args.pool, "per_1d_shape_pool": args.pool_1d, "kept": args.kept, "k": args.k, "seed": args.seed,
            "temperature": args.temperature, "top_p": args.top_p, "max_new_tokens": args.max_new_tokens,
            "dtype": "float32", "shapes": shape_table.SHAPES}


def pool(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The drawn exercises (distinct within a shape), in a fixed order: `--pool` of each shape, then more of each
    one-operation one-digit shape (the frontier, where p spreads), up to `--pool-1d`, from a second stream."""
    from genenv_cli.domains.arith import evaluate_expression

    out = []
    seen: dict[str, set[str]] = {shape: set() for shape in shape_table.SHAPES}
    for rng, shapes, want in ((random.Random(args.seed), shape_table.SHAPES, args.pool),
                              (random.Random(args.seed + 2), ["add-1d", "sub-1d", "mul-1d"], args.pool_1d)):
        for shape in shapes:
            for _ in range(want * 20):
                if len(seen[shape]) >= want:
                    break
                text = shape_table.draw(shape, rng)
                if text not in seen[shape]:
                    seen[shape].add(text)
                    out.append({"shape": shape, "expression": text, "answer": evaluate_expression(text)[0]})
    return out


def spaced(idx: list[int], n: int) -> list[int]:
    """n of `idx` (sorted) at evenly spaced ranks."""
    if n >= len(idx):
        return list(idx)
    if n <= 1:
        return idx[len(idx) // 2:len(idx) // 2 + n]
    return sorted({idx[round(j * (len(idx) - 1) / (n - 1))] for j in range(n)})


def stratified(rows: list[dict[str, Any]], kept: int, bins: int = 10) -> list[dict[str, Any]]:
    """`kept` rows spread over the range of p_tf: up to kept / bins from each of `bins` equal-width bins of p_tf (at
    evenly spaced ranks within the bin), the slots a thin bin leaves taken at evenly spaced ranks of the rest."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["p_tf"], i))
    picks: set[int] = set()
    for b in range(bins):
        inside = [i for i in order if min(int(rows[i]["p_tf"] * bins), bins - 1) == b]
        picks.update(spaced(inside, kept // bins))
    rest = [i for i in order if i not in picks]
    picks.update(spaced(rest, kept - len(picks)))
    return [rows[i] for i in sorted(picks, key=lambda i: (rows[i]["p_tf"], i))]


def measure(args: argparse.Namespace, work: Path) -> None:
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines.base import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.machinery.teacher_forced import task_probabilities

    domain = get_domain("arith")
    head = work / "settings.json"
    if head.is_file() and json.loads(head.read_text()) != settings(args):
        raise SystemExit(f"{work}: made with other settings; use another --work or the same settings")
    work.mkdir(parents=True, exist_ok=True)
    head.write_text(json.dumps(settings(args), indent=1) + "\n")
    engine = HFEngine(resolve(args.model), device="cpu", dtype="float32", batch_size=args.batch_size)
    pool_path = work / "pool.jsonl"
    if not pool_path.is_file():
        rows = pool(args)
        # exercises whose p_tf an earlier pool of this folder computed (same model and sampling settings) are kept
        cache_path = work / "tf_cache.jsonl"
        cache = {json.loads(x)["expression"]: json.loads(x)["p_tf"] for x in cache_path.read_text().splitlines()} \
            if cache_path.is_file() else {}
        new = [r for r in rows if r["expression"] not in cache]
        t0 = time.time()
        ps = task_probabilities(engine.model, engine.tokenizer, engine.eos_ids, {"arith": domain},
                                [{"domain": "arith", "payload": {"expression": r["expression"], "answer": r["answer"]}}
                                 for r in new], temperature=args.temperature, top_p=args.top_p,
                                max_new_tokens=args.max_new_tokens, batch_size=16)
        seconds = time.time() - t0
        with cache_path.open("a") as f:
            for r, p in zip(new, ps, strict=True):
                cache[r["expression"]] = p
                f.write(json.dumps({"expression": r["expression"], "p_tf": p}) + "\n")
        timing_path = work / "pool_seconds.json"
        timing = json.loads(timing_path.read_text()) if timing_path.is_file() else {"exercises": 0, "seconds": 0.0}
        timing = {"exercises": timing["exercises"] + len(new), "seconds": round(timing["seconds"] + seconds, 1)}
        timing_path.write_text(json.dumps(timing) + "\n")
        for r in rows:
            r["p_tf"] = cache[r["expression"]]
        tmp = pool_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.replace(pool_path)
    rows = [json.loads(x) for x in pool_path.read_text().splitlines()]
    kept = stratified(rows, args.kept)
    done_path = work / "sampled.jsonl"
    done = {json.loads(x)["expression"] for x in done_path.read_text().splitlines()} if done_path.is_file() else set()
    # sampled in a seeded shuffle of the kept exercises, so that a run stopped early has sampled a subset spread
    # over the whole range of p_tf rather than its first shapes
    order = kept[:]
    random.Random(args.seed + 1).shuffle(order)
    todo = [r for r in order if r["expression"] not in done]
    for start in range(0, len(todo), args.chunk):
        part = todo[start:start + args.chunk]
        t0 = time.time()
        params = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                                n=args.k, seed=args.seed + len(done) + start)
        gens = engine.generate([domain.agent_messages(r) for r in part], params)
        seconds = time.time() - t0
        with done_path.open("a") as f:
            for r, group in zip(part, gens, strict=True):
                ref = domain.reference_completion(r)
                succ = sum(domain.score(r, g.text).reward >= 1.0 for g in group)
                exact = sum(g.text == ref and g.finish_reason == "stop" for g in group)
                f.write(json.dumps({**r, "k": args.k, "successes": succ, "exact": exact,
                                    "seconds": round(seconds / len(part), 2)}) + "\n")
        print(f"{len(done) + start + len(part)}/{len(kept)} sampled ({seconds:.0f} s for {len(part)})", flush=True)
        if args.stop_after and time.time() - START > args.stop_after:
            print("stopping: --stop-after reached", flush=True)
            return


def pearson(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def binomial_central(k: int, n: int, p: float) -> bool:
    """Whether k lies in the central 95% of Binomial(n, p): both tails beyond it hold at least 2.5% each."""
    pmf = [math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(n + 1)]
    return sum(pmf[:k + 1]) >= 0.025 and sum(pmf[k:]) >= 0.025


def noise_mad(p: float, k: int) -> float:
    """E|X/k - p| for X ~ Binomial(k, p): the mean absolute difference sampling alone makes when p is exact."""
    return sum(math.comb(k, i) * p ** i * (1 - p) ** (k - i) * abs(i / k - p) for i in range(k + 1))


def agreement(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    tf = [r["p_tf"] for r in rows]
    s = [r[key] / r["k"] for r in rows]
    return {"n": len(rows), "pearson": _r(pearson(tf, s)),
            "mean_abs_diff_if_exact": _r(sum(noise_mad(r["p_tf"], r["k"]) for r in rows) / len(rows)),
            "mean_abs_diff": _r(sum(abs(a - b) for a, b in zip(tf, s, strict=True)) / len(rows)),
            "mean_diff_sampled_minus_tf": _r(sum(b - a for a, b in zip(tf, s, strict=True)) / len(rows)),
            "inside_binomial_95": _r(sum(binomial_central(r[key], r["k"], r["p_tf"]) for r in rows) / len(rows))}


def calibration(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        b = [r for r in rows if lo <= r["p_tf"] < hi]
        if b:
            out.append({"bin": f"[{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'}", "n": len(b),
                        "mean_p_tf": _r(sum(r["p_tf"] for r in b) / len(b)),
                        "mean_exact": _r(sum(r["exact"] / r["k"] for r in b) / len(b)),
                        "mean_success": _r(sum(r["successes"] / r["k"] for r in b) / len(b))})
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def summarize(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rows = [json.loads(x) for x in (work / "sampled.jsonl").read_text().splitlines()] \
        if (work / "sampled.jsonl").is_file() else []
    pool_rows = [json.loads(x) for x in (work / "pool.jsonl").read_text().splitlines()] \
        if (work / "pool.jsonl").is_file() else []
    per_shape = {}
    for shape in shape_table.SHAPES:
        b = [r for r in rows if r["shape"] == shape]
        pb = [r["p_tf"] for r in pool_rows if r["shape"] == shape]
        per_shape[shape] = {"pool": len(pb), "pool_mean_p_tf": _r(sum(pb) / len(pb)) if pb else None,
                            "pool_share_025_075": _r(sum(0.25 <= p <= 0.75 for p in pb) / len(pb)) if pb else None,
                            "sampled": len(b)}
    timing = json.loads((work / "pool_seconds.json").read_text()) if (work / "pool_seconds.json").is_file() else {}
    return {"experiment": "p-estimator-check", "domain": "arith", "date": time.strftime("%Y-%m-%d"),
            "commit": git_commit(), "machine": machine(), "versions": versions(), "settings": settings(args),
            "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
            "complete": len(rows) >= min(args.kept, len(pool_rows)) if pool_rows else False,
            "teacher_forced_seconds": timing, "sampling_seconds": round(sum(r["seconds"] for r in rows), 1),
            "exact_vs_tf": agreement(rows, "exact") if rows else None,
            "success_vs_tf": agreement(rows, "successes") if rows else None,
            "calibration": calibration(rows), "per_shape": per_shape, "exercises": rows,
            "pool": [{k: r[k] for k in ("shape", "expression", "answer", "p_tf")} for r in pool_rows]}


def markdown(rec: dict[str, Any]) -> str:
    s = rec["settings"]
    t = rec["teacher_forced_seconds"]
    lines = ["# The teacher-forced p against K sampled attempts, task by task (arith)", "",
             f"{rec['date']}, commit {rec['commit']}, {rec['machine'].get('cpu')} ({rec['machine'].get('cpus')} cores, "
             f"shared with other work), torch {rec['versions'].get('torch')}, transformers "
             f"{rec['versions'].get('transformers')}; agent `{s['agent']}` ({s['dtype']}), temperature "
             f"{s['temperature']}, top-p {s['top_p']}, {s['max_new_tokens']} new tokens; {s['per_shape_pool']} "
             f"exercises drawn per shape, {s['per_1d_shape_pool']} per one-digit one-operation shape (seed {s['seed']}), "
             f"{s['kept']} kept, stratified over tenths of p_tf, each "
             f"sampled K = {s['k']} times. {'Complete' if rec['complete'] else 'PARTIAL'}: "
             f"{len(rec['exercises'])} exercises sampled. Teacher-forced p of the pool: {t.get('exercises')} exercises "
             f"in {t.get('seconds')} s; sampling: {rec['sampling_seconds']} s.", "",
             "exact: the completion is exactly the reference `Answer: N`, then the end of turn (the event p_tf is the "
             "probability of); success: the domain's scorer says right (what the rollouts estimator reads). Inside: "
             "share of exercises whose count lies in the central 95% of Binomial(K, p_tf) (about 0.95 if p_tf is "
             "the event's probability).", "",
             "| sampled share | n | Pearson with p_tf | mean abs diff | same, from K draws alone if p_tf were exact | "
             "mean diff (sampled - p_tf) | inside |", "|---|---|---|---|---|---|---|"]
    for name, key in (("exact", "exact_vs_tf"), ("success", "success_vs_tf")):
        a = rec.get(key)
        if a:
            lines.append(f"| {name} | {a['n']} | {a['pearson']} | {a['mean_abs_diff']} | {a['mean_abs_diff_if_exact']} | "
                         f"{a['mean_diff_sampled_minus_tf']} | {a['inside_binomial_95']} |")
    lines += ["", "Calibration in bins of p_tf (means over the exercises of the bin):", "",
              "| p_tf bin | n | mean p_tf | mean exact share | mean success share |", "|---|---|---|---|---|"]
    for b in rec["calibration"]:
        lines.append(f"| {b['bin']} | {b['n']} | {b['mean_p_tf']} | {b['mean_exact']} | {b['mean_success']} |")
    lines += ["", "The pool per shape: its mean p_tf and the share of its exercises with p_tf in [0.25, 0.75] (uniform "
              "draws, before the stratified selection):", "", "| shape | pool | mean p_tf | p_tf in [0.25, 0.75] | "
              "sampled |", "|---|---|---|---|---|"]
    for shape, r in rec["per_shape"].items():
        lines.append(f"| {shape} | {r['pool']} | {r['pool_mean_p_tf']} | {r['pool_share_025_075']} | {r['sampled']} |")
    return "\n".join(lines) + "\n"


START = time.time()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--pool", type=int, default=16, help="exercises drawn per shape")
    ap.add_argument("--pool-1d", type=int, default=48, help="exercises drawn per one-digit one-operation shape")
    ap.add_argument("--kept", type=int, default=60, help="exercises sampled, stratified by p_tf")
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=4, help="exercises per generation call (each K samples)")
    ap.add_argument("--stop-after", type=float, default=0, help="stop between chunks after this many seconds")
    ap.add_argument("--work", type=Path, default=Path(".p-estimator-work"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--tag", default="arith-embedded")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    work = args.work / args.tag
    if not args.report_only:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        measure(args, work)
    rec = summarize(args, work)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (args.out / f"{args.tag}.md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
