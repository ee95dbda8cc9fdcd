"""The `arith` seed set, drawn once with a fixed seed and shipped as `data/arith_seeds.jsonl`.

    python -m genenv_cli.domains.arith_seeds --write src/genenv_cli/domains/data/arith_seeds.jsonl

Eight shapes straddle the embedded agent's frontier (measured on SmolLM2-135M-Instruct, 12 exercises a shape, 8
samples each at temperature 1: one-digit sums 0.74, one-digit differences 0.31, one-digit products 0.31,
two-digit by one-digit products 0.24, sums with a two-digit number 0.06–0.10, two operations on one-digit numbers
0.05, two-digit differences 0.00). Each shape gets `TRAIN` train and `VALIDATION` validation exercises; no
expression appears twice. A test keeps the shipped file equal to this module's output.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

TRAIN = 16
VALIDATION = 30
SEED = 20261122


def _num(rng: random.Random, digits: int, low: int | None = None) -> int:
    lo = 10 ** (digits - 1) if digits > 1 else 1
    return rng.randint(max(lo, low or lo), 10**digits - 1)


def _two_op(rng: random.Random, digits: int) -> str:
    nums = [_num(rng, 1) for _ in range(3)]
    if digits == 2:
        nums[rng.randrange(3)] = _num(rng, 2)
    a, b, c = (str(n) for n in nums)
    o1, o2 = rng.choice("+-*"), rng.choice("+-")
    return rng.choice([f"{a} {o1} {b} {o2} {c}", f"({a} {o2} {b}) {o1} {c}"])


def _ordered(rng: random.Random, a: int, b: int, op: str) -> str:
    if op == "-" and b > a:
        a, b = b, a  # differences stay non-negative in the seeds (the environment may write negative ones)
    return f"{a} {op} {b}" if op == "-" or rng.random() < 0.5 else f"{b} {op} {a}"


MAKERS: dict[str, Callable[[random.Random], str]] = {
    "add-1d": lambda r: f"{_num(r, 1)} + {_num(r, 1)}",
    "sub-1d": lambda r: _ordered(r, _num(r, 1), r.randint(0, 9), "-"),  # 54 distinct: enough for 46
    "mul-1d": lambda r: f"{_num(r, 1, 2)} * {_num(r, 1, 2)}",
    "add-2d": lambda r: _ordered(r, _num(r, 2), _num(r, r.choice([1, 2])), "+"),
    "sub-2d": lambda r: _ordered(r, _num(r, 2), _num(r, r.choice([1, 2])), "-"),
    "mul-2d": lambda r: _ordered(r, _num(r, 2), _num(r, 1, 2), "*"),
    "2op-1d": lambda r: _two_op(r, 1),
    "2op-2d": lambda r: _two_op(r, 2),
}


def draw() -> list[dict]:
    from genenv_cli.domains.arith import evaluate_expression, expression_shape

    rng = random.Random(SEED)
    seen: set[str] = set()
    rows: list[dict] = []
    for shape, make in MAKERS.items():
        for split, count in (("train", TRAIN), ("validation", VALIDATION)):
            made = tries = 0
            while made < count:
                tries += 1
                if tries > 100_000:
                    raise RuntimeError(f"{shape}: fewer than {count} distinct exercises left to draw")
                expr = make(rng)
                key = "".join(expr.split())
                if key in seen or expression_shape(expr) != shape:
                    continue
                seen.add(key)
                rows.append({"split": split, "shape": shape, "expression": expr,
                             "answer": evaluate_expression(expr)[0]})
                made += 1
    rng.shuffle(rows)
    return [{"id": f"ar-{i:04d}", **r} for i, r in enumerate(rows, 1)]


def render() -> str:
    return "".join(json.dumps(r) + "\n" for r in draw())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", type=Path, help="write the seed file here (default: print it)")
    args = ap.parse_args()
    if args.write:
        args.write.write_text(render())
    else:
        print(render(), end="")


if __name__ == "__main__":
    main()
