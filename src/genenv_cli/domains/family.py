"""The shared base of benchmark-family domains (`bfcl`, `api-bank`, `bamboogle`, ...): train on what you evaluate.

A family domain's task payload is one item in its benchmark's own format, and it has no prompt or scorer of its
own: `sample(payload)` builds the `EvalSample` its `evaluate` suite would build from that item (the suite's
prompt code), and `score` is the suite's item-level `score` on it (`Verdict.correct` -> reward 1 or 0). So
training and `genenv evaluate` agree, item for item, on what "correct" means.

Base tasks come from the domain's built-in seed file (`data/<name>_seeds.jsonl`: `{"id", "split", "shape",
"payload"}` per line, written by hand in the benchmark's format) or, with `genenv init --seeds FILE`, from the
benchmark's own files, read by the suite's loader (`read_seeds` -> `suite.load(data=FILE)` -> `seed_from_sample`).
A malformed record stops the import (the loader names its file and line); a well-formed item that fails the
domain's self-consistency check is left out, and its id and reason are recorded (`seed_skips`, then the run's
seeds/manifest.json), since real releases hold items a checker cannot use (BFCL's live_relevance, for one).

The environment is shown the example item (and items near the frontier) rendered in the benchmark's format, with
the agent's recent statistics, and answers with one new item as a JSON object; `parse_env_output` reads the first
JSON object of its output (as data) and the subclass checks the item under the benchmark's own rules
(`item_from_json`), raising `Reject("parse: ...")` / `Reject("invalid: ...")` with the reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from abc import abstractmethod
from functools import cached_property
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import ConfigError, InputError
from genenv_cli.domains.base import Domain, EnvContext, Reject, SeedTask, TaskVerdict, stats_lines

MAX_ITEM_CHARS = 20_000   # an environment item longer than this is a runaway generation, not a task


def first_json_object(text: str, what: str = "item") -> dict[str, Any]:
    """The first JSON object in model text (code fences and prose around it are ignored); Reject otherwise."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start >= 0 and tries < 20:
        tries += 1
        try:
            obj, _ = decoder.raw_decode(text[start:start + MAX_ITEM_CHARS])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        except (ValueError, RecursionError):  # a 5,000-digit number, a thousand brackets: a bad generation
            raise Reject(f"parse: the {what} cannot be read as JSON") from None
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    raise Reject(f"parse: no JSON object ({what}) in the output")


class FamilyDomain(Domain):
    benchmark: str = ""          # the `evaluate` suite (evals registry name) whose prompt and scorer are used
    protocol: str = "official"   # the suite protocol whose prompt and scorer the domain uses
    seed_file: str = ""          # built-in seeds under domains/data; "" = none (init needs --seeds)
    env_system: str = ""         # the environment's instructions (the item format)
    seed_skips: list[tuple[str, str]] = []  # (id, reason) of the items the last read_seeds left out

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.builtin_seeds = bool(cls.seed_file)

    @cached_property
    def suite(self) -> Any:
        from genenv_cli.catalogue.suites import get_benchmark

        return get_benchmark(self.benchmark)

    # ------------------------------------------------------------ the item <-> suite bridge

    @abstractmethod
    def sample(self, payload: dict[str, Any]) -> Any:
        """The suite's EvalSample for this item (its messages built by the suite's own prompt code)."""

    def seed_from_sample(self, sample: Any) -> SeedTask:
        """A base task from one of the suite's loaded samples (split "" unless the file states one). The default
        `read_seeds` needs it; a domain whose item is more than one sample holds overrides `read_seeds` instead."""
        raise TypeError(f"{type(self).__name__} defines neither seed_from_sample nor its own read_seeds")

    @abstractmethod
    def render_item(self, payload: dict[str, Any]) -> str:
        """The item as the environment sees and writes it: one JSON object in the benchmark's format."""

    @abstractmethod
    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        """(payload, shape) of a JSON item the environment wrote, checked under the benchmark's rules, or Reject."""

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        return self.sample(payload).messages

    def verdict(self, payload: dict[str, Any], completion: str) -> Any:
        """The suite's verdict on one completion (what `genenv evaluate` would record)."""
        return self.suite.score(self.sample(payload), completion, self.protocol)

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        v = self.verdict(payload, completion)
        partial = float(v.scores.get("f1", v.correct)) if isinstance(v.scores, dict) else float(v.correct)
        return TaskVerdict(1.0 if v.correct else 0.0, partial, self.valid(v), None if v.correct else (v.reason or "wrong"))

    def valid(self, verdict: Any) -> bool:
        """Whether the completion parsed in the benchmark's answer format (default: the suite parsed something)."""
        return verdict.parsed is not None

    # ------------------------------------------------------------ seeds

    @cached_property
    def _builtin(self) -> list[SeedTask]:
        from genenv_cli.domains.seedfiles import load_run_seeds

        return load_run_seeds(self, self.seed_path())

    def seeds(self, split: str = "train") -> list[SeedTask]:
        if not self.seed_file:
            raise ConfigError(f"domain {self.name} ships no seed tasks: create the run with `genenv init --domain "
                              f"{self.name} --seeds FILE` ({self.seed_format}).")
        return [s for s in self._builtin if s.split == split]

    @functools.cache  # noqa: B019 - one instance per process (get_domain)
    def data_fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.name}/{self.benchmark}/{self.protocol}".encode())
        if self.seed_file:
            h.update(self.seed_path().read_bytes())
        return h.hexdigest()[:16]

    def code_files(self) -> list[Path]:
        """The domain's modules and its suite's: the suite's prompt and scorer are the domain's."""
        suite = Path(sys.modules[type(self.suite).__module__].__file__ or ".").parent
        return super().code_files() + sorted(suite.glob("*.py"))

    def render_task(self, payload: dict[str, Any]) -> str:
        return "Here is a new item:\n```json\n" + self.render_item(payload) + "\n```"

    def read_seeds(self, path: Path) -> list[SeedTask]:
        from genenv_cli.core.paths import cache_dir

        loaded = self.suite.load(data=Path(path), split=None, version=None, protocol=self.protocol,
                                 cache_dir=cache_dir() / "benchmarks" / self.benchmark)
        return self.checked_seeds(Path(path), loaded.samples)

    def checked_seeds(self, path: Path, samples: list[Any], task_id: Any = None, what: str = "items") -> list[SeedTask]:
        """Base tasks from a file's loaded samples: those failing `check_payload` are left out with their reason
        (`seed_skips`), and a file with no usable one is refused (`what`: the file's items, in that message).
        `task_id(sample)`, when given, names each task."""
        out = []
        self.seed_skips = []
        for s in samples:
            task = self.seed_from_sample(s)
            if task_id is not None:
                task = SeedTask(task_id(s), task.split, task.shape, task.payload)
            problem = self.check_payload(task.payload)
            if problem:
                self.seed_skips.append((task.id, problem))
            else:
                out.append(task)
        if not out and self.seed_skips:
            first = self.seed_skips[0]
            raise InputError(f"{path}: none of its {len(self.seed_skips)} {what} is a usable {self.name} task "
                             f"(e.g. {first[0]}: {first[1]}).")
        return out

    # ------------------------------------------------------------ the environment

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        """Statistics and the difficulty hint in the system message, the example item last in the user message
        (as tool_call and arith do: small models otherwise repeat the statistics instead of writing a task)."""
        system = self.env_system + "\n\n" + " ".join(stats_lines(ctx))
        user = ["An item at the right difficulty:\n" + self.render_item(ex) for ex in ctx.frontier]
        user.append("Example item:\n" + self.render_item(ctx.parent))
        user.append("Write one new item like the example, as one JSON object in the same format, on a different "
                    "topic with different values.")
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(user)}]

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        obj = first_json_object(text)
        payload, shape = self.item_from_json(obj, ctx)
        problem = self.check_payload(payload)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, shape
