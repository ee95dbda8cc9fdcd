"""What the plugin guard costs a multi-turn rollout: the same episodes played with a plugin domain bare and under
the guard the stages put it in (core/plugin_guard.py's `StageDomain`: every call and every environment step under a
SIGALRM time limit, `os._exit` replaced for the call, every value checked).

    python -m benchmarks.speed.plugin_guard_overhead [--model embedded|tiny|PATH] [--tasks 8] [--k 4] [--turns 3]
                                                     [--tokens 8] [--repeat 3] [--calls 20000] [--name NAME]

Two measurements:
- per call: `--calls` steps of an environment whose step does nothing (it returns a fixed observation), bare and
  guarded, and as many `score` calls of the calc domain: the guard's own cost in microseconds, free of sampling;
- per rollout: `--tasks` calc exercises, `--k` episodes each, `--turns` turns of `--tokens` sampled tokens (the end
  of turn disabled, so every turn costs the same), played through the rollout stage's episode code
  (stages/rollout_episodes.py) with the hf engine; the two arms alternate, the fastest of `--repeat` runs of each is
  kept. On a shared machine the rollouts' own spread is larger than the guard, so the record also gives the guard's
  share estimated from the first measurement: (guarded calls per rollout x microseconds per call) / rollout time.

Writes results/plugin_guard_overhead/<NAME>.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchmarks.speed.common import fixed_turns_calc, write_result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=8, help="sampled tokens per turn")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--name", default="plugin_guard_overhead")
    args = ap.parse_args()

    import torch

    from genenv_cli.core.plugin_guard import GuardedEnvironment, StageDomain
    from genenv_cli.domains.base import Environment, Step
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    FixedTurnsCalc = fixed_turns_calc(args.turns)

    class Idle(Environment):
        def first_messages(self):
            return [{"role": "user", "content": "x"}]

        def step(self, action):
            return Step("calc(1 + 1) = 2", False)

    owner, limit = "plugin `calc-bench` (the benchmark's)", 10.0
    plugin = FixedTurnsCalc()
    payload = plugin.seeds("validation")[0].payload

    # ---- per call: the guard's own cost
    def per_call(fn, n):
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, time.perf_counter() - t)
        return best / n * 1e6

    bare_env, guarded_env = Idle(plugin, payload), GuardedEnvironment(Idle(plugin, payload), owner, limit)
    guarded_dom = StageDomain(plugin, owner, limit)
    micro = {"step_bare_us": per_call(lambda: bare_env.step("calc(1 + 1)"), args.calls),
             "step_guarded_us": per_call(lambda: guarded_env.step("calc(1 + 1)"), args.calls),
             "score_bare_us": per_call(lambda: plugin.score(payload, "<answer>2</answer>"), args.calls // 4),
             "score_guarded_us": per_call(lambda: guarded_dom.score(payload, "<answer>2</answer>"), args.calls // 4)}
    guard_us = max(micro["step_guarded_us"] - micro["step_bare_us"], 0.0)
    print(f"per call: {micro}", flush=True)

    # ---- per rollout
    model = args.model
    if model == "tiny":
        from tests.tiny import build_tiny_model  # the test suite's tiny model (run from the repository root)

        model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="genenv-tiny-")) / "model"))
    engine = HFEngine(resolve(model), device="cpu", dtype="float32", batch_size=64)
    engine.eos_ids = [-1]  # no end-of-turn: every turn samples its whole budget
    tasks = [{"domain": "calc", "payload": s.payload} for s in plugin.seeds("validation")[:args.tasks]]
    seeds = [1000 + j * args.k for j in range(len(tasks))]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.tokens, n=args.k, seed=0)
    arms = {"bare": {"calc": plugin}, "guarded": {"calc": StageDomain(plugin, owner, limit)}}
    runs: dict[str, list[float]] = {name: [] for name in arms}
    rows = {}
    for _ in range(args.repeat):
        for name, domains in arms.items():
            t = time.perf_counter()
            rows[name] = [r for task_rows in play_tasks(engine, domains, tasks, params, seeds) for r in task_rows]
            runs[name].append(time.perf_counter() - t)
            print(f"rollout {name}: {runs[name][-1]:.2f} s", flush=True)
    assert [r["completion_token_ids"] for r in rows["bare"]] == [r["completion_token_ids"] for r in rows["guarded"]]
    best = {k: min(v) for k, v in runs.items()}
    episodes = len(rows["bare"])
    steps = sum(r["turns"] for r in rows["bare"])
    # guarded calls per rollout: each step, and per episode start_episode, its first messages and close
    calls = steps + 3 * episodes
    figures = {
        "episodes": episodes, "steps": steps, "guarded_calls": calls,
        "per_call_us": {k: round(v, 2) for k, v in micro.items()},
        "guard_us_per_step": round(guard_us, 2),
        "rollout_bare_s": round(best["bare"], 3), "rollout_guarded_s": round(best["guarded"], 3),
        "rollout_overhead_measured_pct": round(100 * (best["guarded"] - best["bare"]) / best["bare"], 2),
        "rollout_overhead_estimated_pct": round(100 * calls * guard_us * 1e-6 / best["bare"], 3),
        "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
    }
    write_result("plugin_guard_overhead", args.name, figures,
                 settings=vars(args) | {"model_path": engine.ref.path if args.model != "tiny" else
                                        "tests/tiny.py build_tiny_model", "engine": "hf", "device": "cpu",
                                        "torch_threads": torch.get_num_threads(),
                                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                                        "note": "machine shared with other agents' work while it ran"})


if __name__ == "__main__":
    main()
