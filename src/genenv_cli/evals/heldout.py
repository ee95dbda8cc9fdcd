"""`heldout`: the run's own domain, on its seed validation split — the agent's held-out success.

    genenv evaluate --bench heldout --epoch 3

Samples are the domain's `validation` seeds (never used for training: generate-tasks draws base tasks from
`train`), prompted exactly as `rollout` prompts the agent and scored by the domain's own `score`
(R_agent >= curriculum.success_threshold is a success). Ids are the seed ids; categories are the shapes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from genenv_cli.curriculum import is_success
from genenv_cli.domains.seedfiles import domain_for_run
from genenv_cli.errors import ConfigError
from genenv_cli.evals.base import Benchmark, EvalSample, LoadedData, Verdict


class HeldOut(Benchmark):
    name = "heldout"
    description = "The run's domain on its seed validation split (held-out success rate)."
    categories = ["per domain shape"]
    sources = ["the domain's shipped seed set (validation split)"]
    splits = ["validation", "train"]
    versions = []

    def __init__(self) -> None:
        self.domain: Any = None
        self.threshold = 1.0

    def configure(self, cfg: Any, run_root: Path | None = None) -> None:
        self.domain = domain_for_run(cfg, run_root)
        self.threshold = cfg.curriculum.success_threshold

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if self.domain is None:
            raise ConfigError("heldout needs a run (its domain); pass --run DIR.")
        if data is not None:
            raise ConfigError("heldout reads the domain's own seeds; --data does not apply.")
        split = split or "validation"
        if split not in self.splits:
            raise ConfigError(f"--split {split!r}: heldout knows {', '.join(self.splits)}.")
        seeds = self.domain.seeds(split)
        samples = [EvalSample(id=s.id, category=s.shape, messages=self.domain.agent_messages(s.payload),
                              gold=s.payload) for s in seeds]
        blob = json.dumps([s.payload for s in seeds], sort_keys=True).encode()
        return LoadedData(samples, f"{self.domain.name} seeds ({self.domain.data_fingerprint()})",
                          f"domain {self.domain.name}, {split} split", hashlib.sha256(blob).hexdigest())

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        s = self.domain.score(sample.gold, output)
        ok = is_success(s.reward, self.threshold)
        return Verdict(ok, None, "" if ok else (s.error or "wrong"), {"reward": s.reward, "partial": s.partial})

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        cats: dict[str, list[bool]] = {}
        for s, v in zip(samples, verdicts, strict=True):
            cats.setdefault(s.category, []).append(v.correct)
        n = len(verdicts)
        return {"overall": {"success_rate": 100.0 * sum(v.correct for v in verdicts) / n if n else 0.0, "n": n},
                "categories": {c: {"success_rate": 100.0 * sum(v) / len(v), "n": len(v)} for c, v in sorted(cats.items())}}
