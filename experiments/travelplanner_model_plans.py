"""Model-written TravelPlanner answers to compare genenv's checks with the official evaluator on: the embedded
model's answers to the release's 45 training queries, where the prompt fits its context.

The prompt is `genenv evaluate`'s (the suite's messages under the model's chat template, through genenv's
transformers engine). Arms, each with at most `--max-new-tokens` (512, the suite's default) new tokens:

- `plain`: greedy, the prompt alone: what `genenv evaluate --model embedded` answers;
- `json-prefix`: greedy, the answer begun with the opening of the ```json block the prompt asks for
  (PREFIX). A departure from the protocol, named as such: the plain answers of this model hold no plan, and
  these give both checkers model-written plans (the model writes every day, city and place);
- `json-prefix-sample`: the same opening, `--samples` answers sampled at temperature 0.8, top-p 0.95.

A query whose prompt plus the new tokens exceeds the context gets no answer (recorded as skipped). Queries run
shortest prompt first; each query's answers are appended to `--out` as `{"id", "arm", "output", ...}` lines (the
output includes the prefix), so a rerun skips the queries there and `--stop-after` leaves a usable file.
`experiments/travelplanner_official.py --outputs FILE` then scores every answer with both checkers.

    python -m experiments.travelplanner_model_plans --data DIR [--samples 2] [--stop-after SECONDS]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from genenv_cli.families.travelplanner import TravelPlanner
from genenv_cli.machinery.engines.base import SamplingParams

OUT = Path(__file__).parent / "results" / "travelplanner_official" / "model_outputs" / "embedded.jsonl"
PREFIX = "```json\n["


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the release's folder (std_travelplanner.jsonl, ...)")
    ap.add_argument("--samples", type=int, default=2, help="sampled json-prefix answers per query")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--stop-after", type=float, default=None, help="start no query after this many seconds")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import ModelRef, embedded_identity, ensure_embedded

    samples = TravelPlanner().load(data=args.data, split="train", version=None, protocol="official",
                                   cache_dir=Path(tempfile.gettempdir())).samples
    engine = HFEngine(ModelRef("embedded", str(ensure_embedded())), dtype="auto", batch_size=16)
    limit = engine.context_limit()
    prefix_ids = engine.tokenizer.encode(PREFIX, add_special_tokens=False)
    prompts = {s.id: engine.prompt_ids(s.messages) for s in samples}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(x)["id"] for x in args.out.read_text().splitlines()} if args.out.exists() else set()
    skipped = [s.id for s in samples if len(prompts[s.id]) + len(prefix_ids) + args.max_new_tokens > limit]
    todo = sorted((s for s in samples if s.id not in done and s.id not in skipped), key=lambda s: len(prompts[s.id]))
    greedy = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)
    sampled = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=args.max_new_tokens, n=args.samples)
    start = time.perf_counter()
    for s in todo:
        if args.stop_after is not None and time.perf_counter() - start > args.stop_after:
            print(f"stopping after {args.stop_after} s", flush=True)
            break
        t0 = time.perf_counter()
        ids = prompts[s.id]
        # one call for both greedy arms: the engine reads their common prompt once (engines/shared_prefix.py)
        plain, prefixed = engine.generate_ids([ids, ids + prefix_ids], greedy, seeds=[0, 0])
        answers = [("plain", "", plain[0]), ("json-prefix", PREFIX, prefixed[0])]
        if args.samples:
            (drawn,) = engine.generate_ids([ids + prefix_ids], sampled, seeds=[int(s.id)])
            answers += [(f"json-prefix-sample{k}", PREFIX, g) for k, g in enumerate(drawn)]
        seconds = round(time.perf_counter() - t0, 1)
        with args.out.open("a") as fh:
            for arm, prefix, g in answers:
                fh.write(json.dumps({"id": s.id, "arm": arm, "output": prefix + g.text, "prompt_tokens": len(ids),
                                     "new_tokens": len(g.token_ids), "finish": g.finish_reason,
                                     "query_seconds": seconds}) + "\n")
        print(f"query {s.id}: {len(ids)} prompt tokens, {seconds} s", flush=True)
    record: dict[str, Any] = {
        "what": "the embedded model's answers to the release's training queries (see the module docstring)",
        "model": embedded_identity(), "engine": "hf (genenv's transformers engine), dtype auto (float32 on CPU)",
        "context_limit": limit, "max_new_tokens": args.max_new_tokens, "prefix": PREFIX,
        "sampled": {"n": args.samples, "temperature": 0.8, "top_p": 0.95, "seed": "the query's idx"},
        "skipped_too_long": sorted(skipped, key=int),
        "answered": sorted({json.loads(x)["id"] for x in args.out.read_text().splitlines()}, key=int)
        if args.out.exists() else [],
        "machine": machine(), "versions": versions(), "commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    args.out.with_suffix(".settings.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("skipped_too_long", "answered")}))


if __name__ == "__main__":
    main()
