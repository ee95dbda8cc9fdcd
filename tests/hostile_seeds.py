"""Plugin domains whose seeds are not seed tasks (a payload that is not an object, an id that is not text), for the
stages' check of what `seeds()` returns (core/plugin_values.py, seed_tasks)."""

from __future__ import annotations

from genenv_cli.domains.arith import ArithDomain
from genenv_cli.domains.base import SeedTask


class PayloadNotObject(ArithDomain):
    def seeds(self, split: str = "train"):
        return [SeedTask("s1", split, "1op-1d", None)]  # type: ignore[arg-type]


class IdNotText(ArithDomain):
    def seeds(self, split: str = "train"):
        return [SeedTask(7, split, "1op-1d", {"expression": "1 + 1", "answer": 2})]  # type: ignore[arg-type]
