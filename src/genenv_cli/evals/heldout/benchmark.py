"""`heldout`: the run's own domain, on its seed validation split — the agent's held-out success.

    genenv evaluate --bench heldout --epoch 3

Samples are the domain's `validation` seeds (never used for training: generate-tasks draws base tasks from
`train`), prompted exactly as `rollout` prompts the agent and scored by the domain's own `score`
(R_agent >= curriculum.success_threshold is a success). Ids are the seed ids; categories are the shapes. A
multi-turn domain's items are episodes, played as rollout plays them: the same environment, turn cap and episode
engine (machinery/episodes.py), so a task's evaluation episode and its training episode take the same turns.

A mixed run is evaluated on every domain's validation seeds, each prompted and scored by its own domain: ids
and categories are prefixed with the domain (`arith/a12`, `arith/2op-1d`), the overall rate pools every item,
and the summary adds one rate per domain (`domains`), since the pooled rate weighs domains by their seed
counts rather than by the run's shares.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from genenv_cli.core.curriculum import is_success
from genenv_cli.core.errors import ConfigError
from genenv_cli.evals.base import Benchmark, EvalSample, LoadedData, Verdict


class HeldOut(Benchmark):
    name = "heldout"
    description = "The run's domain on its seed validation split (held-out success rate)."
    categories = ["per domain shape"]
    sources = ["the domain's shipped seed set (validation split)"]
    splits = ["validation", "train"]
    versions = []

    def __init__(self) -> None:
        self.domains: dict[str, Any] = {}
        self.mixed = False
        self.threshold = 1.0

    uses_run_domains = True

    def needed_tokens(self, cfg: Any) -> int:
        """The run's rollout.max_new_tokens: the length the agent answered its tasks in while it trained (a greedy
        model given more room can run on past its answer, `Answer: 5000000...`, where the domain reads the last
        number)."""
        return int(cfg.rollout.max_new_tokens)

    def configure(self, cfg: Any, run_root: Path | None = None, domains: dict[str, Any] | None = None) -> None:
        self.domains = dict(domains or {})
        self.mixed = bool(cfg.run.mixed)
        self.threshold = cfg.curriculum.success_threshold
        # a multi-turn domain's items are episodes, played as rollout plays them (the domain's environment and turn
        # cap): `evaluate` steps them with the same episode engine
        self.interactive = any(d.episodic for d in self.domains.values())

    def start_episode(self, sample: EvalSample, max_steps: int) -> Any:
        """An episode of a multi-turn domain's item: its environment, capped at the domain's `max_turns` (the cap
        its training episodes have; `evaluate.max_steps` is for the benchmarks' own games)."""
        return self.domains[sample.meta["domain"]].start_episode(sample.gold, self.threshold)

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if not self.domains:
            raise ConfigError("heldout needs a run (its domain); pass --run DIR.")
        if data is not None:
            raise ConfigError("heldout reads the domain's own seeds; --data does not apply.")
        split = split or "validation"
        if split not in self.splits:
            raise ConfigError(f"--split {split!r}: heldout knows {', '.join(self.splits)}.")
        samples, payloads = [], []
        for name, domain in self.domains.items():
            prefix = f"{name}/" if self.mixed else ""
            for s in domain.seeds(split):
                meta = {"domain": name, "episode": True} if domain.episodic else {"domain": name}
                samples.append(EvalSample(id=prefix + s.id, category=prefix + s.shape, gold=s.payload,
                                          messages=domain.agent_messages(s.payload), meta=meta))
                payloads.append([name, s.payload] if self.mixed else s.payload)
        blob = json.dumps(payloads, sort_keys=True).encode()
        names = ", ".join(self.domains)
        source = ", ".join(f"{n} seeds ({d.data_fingerprint()})" for n, d in self.domains.items())
        return LoadedData(samples, source, f"domain{'s' if self.mixed else ''} {names}, {split} split",
                          hashlib.sha256(blob).hexdigest())

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        s = self.domains[sample.meta["domain"]].score(sample.gold, output)
        ok = is_success(s.reward, self.threshold)
        return Verdict(ok, None, "" if ok else (s.error or "wrong"), {"reward": s.reward, "partial": s.partial})

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        cats: dict[str, list[bool]] = {}
        doms: dict[str, list[bool]] = {}
        for s, v in zip(samples, verdicts, strict=True):
            cats.setdefault(s.category, []).append(v.correct)
            doms.setdefault(s.meta["domain"], []).append(v.correct)
        summary = {"overall": rate([v.correct for v in verdicts]),
                   "categories": {c: rate(v) for c, v in sorted(cats.items())}}
        if self.mixed:
            summary["domains"] = {d: rate(v) for d, v in sorted(doms.items())}
        return summary


def rate(correct: list[bool]) -> dict[str, Any]:
    return {"success_rate": 100.0 * sum(correct) / len(correct) if correct else 0.0, "n": len(correct)}
