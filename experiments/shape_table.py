"""The frozen agent's success per task shape, measured once with enough attempts that every shape's 95% interval is
narrower than +-0.1: the exact target the environment-only experiments aim at.

    python -m experiments.shape_table                       # 100 attempts per shape, results/env_control/
    python -m experiments.shape_table --per-shape 400       # tighter
    python -m experiments.shape_table --from-heldout EVAL.json --out results/env_control/heldout-table.json

`--from-heldout` writes the other table the recorded runs used: a base model's success per shape in a `genenv evaluate
--bench heldout` result (greedy, 30 validation exercises a shape; `heldout-table.json` here, the reward table of the
recorded `control-lr1e-3` and `control-lr1e-4` runs and the frontier of the env-only records). experiments/README.md
gives the commands that remake it.

Each attempt draws one exercise uniformly from its shape's space (`draw`: the operands of a one-operation shape
uniform over the numbers of at most d digits with at least one of exactly d, the operators of a several-operation
shape uniform over + - *, no parentheses; with replacement, since a one-digit shape has only 100 exercises), and
the agent attempts it once as a rollout attempts it (the embedded model, `rollout.temperature` 1.0,
`rollout.max_new_tokens` 16, the domain's prompt, exact-answer success). Each attempt is then an independent
Bernoulli draw with the shape's mean success over its space, so the Wilson interval of k of n is the interval of
that mean. The table is a measurement, never training data.

The environment does not draw its exercises uniformly (it likes `2 + 3`), so p_shape is the shape's success over
its space, not over what an environment writes; it is what "the frontier" means here: shapes the agent solves
25-75% of the time.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

RESULTS = Path(__file__).parent / "results" / "env_control"
TABLE = RESULTS / "shape_table-arith.json"
FRONTIER = (0.25, 0.75)
OPS = ["+", "-", "*"]
KIND_OP = {"add": "+", "sub": "-", "mul": "*"}
# The shapes the environment writes (99.3% of the recorded runs' tasks); the others (four-digit numbers, three or
# four operations on three-digit ones) are not measured and count as never solved
SHAPES = ([f"{k}-{d}d" for k in KIND_OP for d in range(1, 4)] + [f"2op-{d}d" for d in range(1, 4)]
          + [f"{n}op-{d}d" for n in (3, 4) for d in range(1, 3)])


def draw(shape: str, rng: random.Random) -> str:
    """One exercise of `shape`, uniform over its space as the module docstring says (checked by the domain's own
    shape function)."""
    from genenv_cli.domains.arith import ArithError, expression_shape

    head, d = shape.split("-")
    digits = int(d[:-1])
    n_ops = 1 if head in KIND_OP else int(head[0])
    while True:
        nums = [rng.randrange(10 ** digits) for _ in range(n_ops + 1)]
        ops = [KIND_OP[head]] if head in KIND_OP else [rng.choice(OPS) for _ in range(n_ops)]
        text = " ".join(str(nums[0]) if i == 0 else f"{ops[i - 1]} {nums[i]}" for i in range(n_ops + 1))
        try:
            if expression_shape(text) == shape:
                return text
        except ArithError:  # a product past the domain's bound: drawn again
            continue


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def exercises(per_shape: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """per_shape exercises of every shape, each drawn uniformly from the shape's space (with replacement)."""
    from genenv_cli.domains.arith import evaluate_expression

    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {}
    for shape in SHAPES:
        texts = [draw(shape, rng) for _ in range(per_shape)]
        out[shape] = [{"expression": t, "answer": evaluate_expression(t)[0]} for t in texts]
    return out


def measure(per_shape: int, seed: int, dtype: str, batch_size: int) -> dict[str, Any]:
    from lab.arms import COMMON

    from genenv_cli.catalogue.config import apply_overrides, config_from_dict
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.engines.base import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    # the rollouts' settings as the experiments set them (rollout.max_new_tokens 16, not the default)
    cfg = config_from_dict(apply_overrides({"run": {"domain": "arith"}}, COMMON), "shape table").rollout
    domain = get_domain("arith")
    tasks = exercises(per_shape, seed)
    engine = HFEngine(resolve("embedded"), device="cpu", dtype=dtype, batch_size=batch_size)
    params = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, n=1,
                            seed=seed)
    flat = [(shape, t) for shape, rows in tasks.items() for t in rows]
    t0 = time.time()
    gens = engine.generate([domain.agent_messages(t) for _, t in flat], params)
    seconds = time.time() - t0
    table: dict[str, Any] = {}
    for (shape, task), (gen,) in zip(flat, gens, strict=True):
        row = table.setdefault(shape, {"n": 0, "successes": 0})
        row["n"] += 1
        row["successes"] += int(domain.score(task, gen.text).reward >= 1.0)
    for row in table.values():
        row["p"] = round(row["successes"] / row["n"], 4)
        low, high = wilson(row["successes"], row["n"])
        row["low"], row["high"] = round(low, 4), round(high, 4)
        row["half_width_max"] = round(max(row["p"] - low, high - row["p"]), 4)
    return {"experiment": "shape-table", "domain": "arith", "date": time.strftime("%Y-%m-%d"),
            "commit": git_commit(), "machine": machine(), "versions": versions(),
            "settings": {"agent": "embedded", "per_shape": per_shape, "attempts_per_exercise": 1, "seed": seed,
                         "temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens,
                         "dtype": dtype, "threads": _threads()},
            "seconds": round(seconds, 1), "frontier_band": list(FRONTIER), "shapes": table}


def from_heldout(path: Path) -> dict[str, Any]:
    """A table in this module's format from a held-out evaluation's result (its success per category = shape)."""
    data = json.loads(path.read_text())
    cats = (data.get("summary") or {}).get("categories") or {}
    if not cats:
        raise SystemExit(f"{path}: no summary.categories; expected a `genenv evaluate --bench heldout` result")
    shapes = {}
    for shape, c in sorted(cats.items()):
        k, n = round(c["success_rate"] * c["n"] / 100.0), c["n"]
        low, high = wilson(k, n)
        # p to 4 decimals, as the recorded runs were paid from (each run file holds the table it read)
        shapes[shape] = {"n": n, "successes": k, "p": round(k / n, 4), "low": round(low, 4), "high": round(high, 4),
                         "half_width_max": round(max(k / n - low, high - k / n), 4)}
    return {"experiment": "shape-table-heldout", "domain": "arith", "source": path.name,
            "settings": {"model": data.get("model"), "config": data.get("config")}, "shapes": shapes}


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def load_table(path: Path = TABLE) -> dict[str, float]:
    """shape -> p_shape from a recorded table."""
    return {k: v["p"] for k, v in json.loads(path.read_text())["shapes"].items()}


def markdown(rec: dict[str, Any]) -> str:
    s = rec["settings"]
    lines = [f"# The frozen agent's success per shape ({rec['domain']})", "",
             f"{rec['date']}, commit {rec['commit']}, {rec['machine'].get('cpu')} ({rec['machine'].get('cpus')} "
             f"cores), {rec['versions'].get('torch')}, transformers {rec['versions'].get('transformers')}; "
             f"agent `{s['agent']}`, {s['per_shape']} exercises per shape drawn uniformly from its space, "
             f"{s['attempts_per_exercise']} attempt each at temperature {s['temperature']} (top_p {s['top_p']}, {s['max_new_tokens']} new "
             f"tokens), {s['dtype']}, seed {s['seed']}; {rec['seconds']} s of generation.", "",
             "p: success share; 95% Wilson interval; frontier: 25% <= p <= 75%.", "",
             "| shape | n | successes | p | 95% interval | half-width | frontier |", "|---|---|---|---|---|---|---|"]
    for shape in SHAPES:
        r = rec["shapes"].get(shape)
        if r:
            front = "yes" if FRONTIER[0] <= r["p"] <= FRONTIER[1] else ""
            lines.append(f"| {shape} | {r['n']} | {r['successes']} | {r['p']:.3f} | [{r['low']:.3f}, {r['high']:.3f}] "
                         f"| {r['half_width_max']:.3f} | {front} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-shape", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", type=Path, default=TABLE)
    ap.add_argument("--from-heldout", type=Path, help="write the table of a held-out evaluation's result instead")
    args = ap.parse_args(argv)
    if args.from_heldout:
        table = from_heldout(args.from_heldout)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=1) + "\n")
        print(json.dumps({k: v["p"] for k, v in table["shapes"].items()}))
        return table
    rec = measure(args.per_shape, args.seed, args.dtype, args.batch_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
