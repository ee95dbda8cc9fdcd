"""A domain whose base tasks come from the run (`genenv init --seeds`) instead of the package.

Everything but `seeds` and `data_fingerprint` is the wrapped domain's: prompts, parsers and the scorer stay the
ones the domain (and its `evaluate` suite) define.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.domains.base import Domain, EnvContext, SeedTask, TaskVerdict


class SeededDomain(Domain):
    def __init__(self, inner: Domain, seeds: list[SeedTask], fingerprint: str):
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.shapes = inner.shapes
        self.seed_format = inner.seed_format
        self.seed_folders = inner.seed_folders
        self._seeds = list(seeds)
        self._fingerprint = fingerprint

    def seeds(self, split: str = "train") -> list[SeedTask]:
        return [s for s in self._seeds if s.split == split]

    def data_fingerprint(self) -> str:
        return self._fingerprint

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        return self.inner.agent_messages(payload)

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        return self.inner.env_messages(ctx)

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        return self.inner.parse_env_output(text, ctx)

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        return self.inner.score(payload, completion)

    def score_many(self, payloads: list[dict[str, Any]], completions: list[str]) -> list[TaskVerdict]:
        return self.inner.score_many(payloads, completions)

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return self.inner.dedup_text(payload)

    def exact_key(self, payload: dict[str, Any]) -> str:
        return self.inner.exact_key(payload)

    def near_key(self, payload: dict[str, Any]) -> frozenset:
        return self.inner.near_key(payload)

    def check_payload(self, payload: Any) -> str | None:
        return self.inner.check_payload(payload)

    def read_seeds(self, path):
        return self.inner.read_seeds(path)

    def seed_files(self, path):
        return self.inner.seed_files(path)

    def shared_seed_files(self, paths, tasks):
        return self.inner.shared_seed_files(paths, tasks)
