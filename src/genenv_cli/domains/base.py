"""What a domain (a task family) knows: its seeds, both prompts, parsing the environment's output, scoring.

The environment model is shown a conditioning context (a task to vary, the agent's recent statistics,
examples near the frontier) through `env_messages`, and writes a task in the domain's text format;
`parse_env_output` turns that text into a task or raises `Reject` with a reason (counted and kept in the
rejects file). The agent sees `agent_messages(payload)`; `score` grades its completion. Both parsers treat
model text as data.

A domain also says how its own answers look (`gold_answer`, `wrong_answer`, `render_task`): the domain contract
(`domains/checks.py`, run by `genenv domains check NAME` and by the project's tests) grades them. What shapes a
stage's output is fingerprinted into its manifest: the seed data (`data_fingerprint`), the source of the modules
that define the domain (`code_files`) and the rendered prompts (`domains/fingerprints.py`), so an edited parser
or prompt makes the stages that used it stale. docs/domains.md, "Writing a domain", is the author's guide.

A domain is also an environment: `environment(payload)` gives an `Environment` whose `first_messages` start an
episode of the task and whose `step(action)` answers each agent turn with the next observation, done and the reward.
By default it is `OneStep` (the agent's prompt, then `score` on the one answer): a single-turn domain is a one-step
episode. A multi-turn domain returns its own and raises `max_turns`. `DomainEpisode` steps an environment from
outside, as the episode engine (machinery/episodes.py) steps every episode, in `rollout` and in `evaluate`, and records
why it ended (`done`, `turn_cap`, or `context_overflow` from the engine), its turns and its verdict.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from genenv_cli.core.curriculum import is_success
from genenv_cli.core.plugin_guard import Reject  # noqa: F401 - the domain protocol's rejection, defined below the guard
from genenv_cli.evals.base import CONTEXT_OVERFLOW, Episode, Verdict


@dataclass(frozen=True)
class SeedTask:
    id: str
    split: str          # train | validation ("" from a seed file that states no split: init draws one)
    shape: str
    payload: dict[str, Any]


class TaskVerdict(NamedTuple):
    """The verdict on one completion of a training task: what a domain's `score` returns and the score stage
    records. A benchmark's verdict on one of its samples is `evals.base.Verdict`; a family domain makes its
    TaskVerdict from that one, so the two agree item by item. A named tuple, not a dataclass: the score stage
    grades hundreds of thousands of them a second, and a tuple is several times cheaper to make and to send
    between its worker processes."""

    reward: float               # R_agent in [0, 1]
    partial: float              # partial credit, recorded only
    valid: bool                 # parsed and followed the output schema
    error: str | None = None    # why it is not a success


@dataclass(frozen=True)
class EnvContext:
    """The conditioning context of one task batch."""

    parent_id: str
    parent_shape: str
    parent: dict[str, Any]               # payload of the task to vary
    parent_p: float | None               # its success rate last time it was attempted, if known
    stats: dict[str, Any] | None         # agent_statistics() of the previous epoch (None at epoch 1)
    frontier: list[dict[str, Any]]       # payloads of tasks near p = alpha

    def to_json(self) -> dict[str, Any]:
        return {"parent_id": self.parent_id, "parent_shape": self.parent_shape, "parent_p": self.parent_p,
                "stats": self.stats, "frontier": self.frontier}


Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Step:
    """What the environment answers to one agent action. `observation` is the next user message (None when `done`);
    `reward` is the episode's R_agent in [0, 1] when `done`; `verdict` may add partial credit, validity and a reason
    (without one, the verdict is (reward, reward, valid, None))."""

    observation: str | None
    done: bool
    reward: float = 0.0
    verdict: TaskVerdict | None = None


class Environment(ABC):
    """One episode of one task: how it starts and how it answers the agent. An episode starts from the task's
    first observation (chat messages ending where the agent answers); each agent answer goes to `step`, which gives
    the next observation (a user message), whether the episode is over, and its reward once it is."""

    def __init__(self, domain: Any, payload: dict[str, Any]) -> None:
        self.domain = domain
        self.payload = payload

    @abstractmethod
    def first_messages(self) -> Messages:
        """The first observation: chat messages, ending where the agent answers."""

    @abstractmethod
    def step(self, action: str) -> Step:
        """Take the agent's answer; return the next observation, done and reward."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free what the episode holds."""


class OneStep(Environment):
    """A single-turn domain as a one-step episode: its prompt, and its scorer's verdict on the answer."""

    def first_messages(self) -> Messages:
        return self.domain.agent_messages(self.payload)

    def step(self, action: str) -> Step:
        verdict = self.domain.score(self.payload, action)
        return Step(None, True, verdict.reward, verdict)


END_DONE = "done"             # the environment said the episode is over
END_TURN_CAP = "turn_cap"     # the agent used `max_turns` turns without ending it
ENDS = (END_DONE, END_TURN_CAP, CONTEXT_OVERFLOW)


class DomainEpisode(Episode):
    """An environment stepped from outside (evals.base.Episode), with the record the rollout stage keeps."""

    def __init__(self, env: Environment, max_turns: int, name: str = "", threshold: float = 1.0) -> None:
        self.env = env
        self.threshold = threshold  # the reward that counts as a success in `result()`
        self.max_turns = max(1, int(max_turns))
        self.name = name or getattr(env.domain, "name", "")
        self.messages = [dict(m) for m in env.first_messages()]
        self.actions: list[str] = []
        self.observations: list[str] = []
        self.over = False
        self.end = ""
        self.verdict: TaskVerdict | None = None

    @property
    def turns(self) -> int:
        return len(self.actions)

    def prompt(self) -> Messages | None:
        return None if self.over else [dict(m) for m in self.messages]

    def advance(self, output: str) -> None:
        self.actions.append(output)
        step = self.env.step(output)
        self.messages.append({"role": "assistant", "content": output})
        if step.done:
            verdict = step.verdict if step.verdict is not None else TaskVerdict(float(step.reward),
                                                                                float(step.reward), True, None)
            if not (isinstance(verdict.reward, (int, float)) and math.isfinite(verdict.reward)
                    and 0.0 <= verdict.reward <= 1.0):
                raise ValueError(f"domain {self.name!r}: step() ended an episode with the reward {verdict.reward!r}; "
                                 f"expected a finite number in [0, 1]")
            self.over, self.end, self.verdict = True, END_DONE, verdict
            return
        if not isinstance(step.observation, str):
            raise ValueError(f"domain {self.name!r}: step() returned done = False with the observation "
                             f"{step.observation!r}; expected the text of the next user message")
        self.observations.append(step.observation)
        self.messages.append({"role": "user", "content": step.observation})
        if self.turns >= self.max_turns:
            self.stop(END_TURN_CAP, f"not over after {self.turns} turns (the domain's max_turns)")

    def stop(self, end: str, reason: str) -> None:
        self.over, self.end, self.verdict = True, end, TaskVerdict(0.0, 0.0, False, reason)

    def result(self) -> tuple[Messages, Verdict]:
        v = self.verdict or TaskVerdict(0.0, 0.0, False, "not played")
        correct = is_success(v.reward, self.threshold)
        return [dict(m) for m in self.messages], Verdict(correct=correct, parsed=self.actions or None,
                                                         reason="" if correct else (v.error or "wrong"), end=self.end,
                                                         scores={"reward": v.reward, "partial": v.partial,
                                                                 "turns": float(self.turns)})

    def close(self) -> None:
        self.env.close()


_WORD = re.compile(r"[a-z0-9]+")


def trigrams(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) < 3:
        return frozenset([tuple(words)])
    return frozenset(zip(words, words[1:], words[2:], strict=False))


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def stats_lines(ctx: EnvContext, thing: str = "item", aim: str = "an item it") -> list[str]:
    """The agent's recent statistics and the difficulty hint, in words, for the environment's system message
    (`thing`: what the domain calls one task in its prompts; `aim`: the last sentence's object)."""
    out = []
    if ctx.stats and ctx.stats.get("tasks"):
        s = ctx.stats
        per = ", ".join(f"{k} {v['success_rate']:.0%}" for k, v in s.get("per_shape", {}).items())
        out.append(f"The assistant solved {s['success_rate']:.0%} of last epoch's tasks ({per}); "
                   f"{s.get('too_easy', 0)} tasks were always solved, {s.get('too_hard', 0)} never.")
    if ctx.parent_p is not None:
        hint = "harder" if ctx.parent_p > 0.6 else "easier" if ctx.parent_p < 0.4 else "about as hard"
        out.append(f"It solved the example {thing} {ctx.parent_p:.0%} of the time; make yours {hint}.")
    out.append(f"Aim for {aim} solves about half the time.")
    return out


def package_folder(cls: type, attribute: str) -> Path:
    """The folder of the package holding the module whose class (in `cls`'s MRO) sets `attribute`: a plugin's
    `seed_file` is found in its own package, a built-in domain's in genenv_cli/domains, and a plugin subclassing a
    built-in domain without setting `seed_file` keeps the built-in seeds."""
    owner = next((k for k in cls.__mro__ if attribute in vars(k)), cls)
    module = sys.modules[owner.__module__]
    package = sys.modules.get(module.__package__ or "")
    if package is not None and getattr(package, "__path__", None):
        return Path(list(package.__path__)[0])  # a regular or a namespace package: its (first) folder
    return Path(module.__file__ or ".").parent  # a top-level module (no package): the folder it sits in


class Domain(ABC):
    name: str = ""
    description: str = ""
    shapes: tuple[str, ...] = ()
    builtin_seeds: bool = True          # False: `genenv init` needs `--seeds FILE`
    seed_format: str = ""               # what `--seeds FILE` takes, in words ("" = it takes none)
    seed_folders: bool = False          # whether `--seeds` also takes a folder of the benchmark's files
    # the packaged seed set, in the `data/` folder of the package that defines the domain (genenv_cli/domains/data/
    # for the built-in ones, a plugin's own package for a plugin): JSON lines of {id, split, shape, *payload_keys}
    seed_file: str = ""
    payload_keys: tuple[str, ...] = ()
    # modules besides the domain's own whose code shapes its output (a shared parser, a scorer): fingerprinted
    code_modules: tuple[str, ...] = ()
    # the most agent turns an episode of the domain may take (1: single-turn; a multi-turn environment overrides
    # `environment` and raises it; `Environment` below)
    max_turns: int = 1
    # whether a task's success rate can be read off one teacher-forced pass over its reference answer
    # (`curriculum.p_estimator = "teacher_forced"`, machinery/teacher_forced.py): "" no; "exact" when the scorer
    # accepts that answer and nothing else, so the probability of writing it is the success rate; "lower_bound"
    # when the scorer accepts other forms too, whose probability the estimate leaves out
    teacher_forced: str = ""

    def seed_path(self) -> Path:
        """Where the packaged seed set is: `data/<seed_file>` in the defining package's folder."""
        if not self.seed_file:
            raise TypeError(f"domain {self.name!r} names no seed_file; it must override seeds()")
        return package_folder(type(self), "seed_file") / "data" / self.seed_file

    @cached_property
    def _seeds(self) -> list[SeedTask]:
        from genenv_cli.core.errors import InputError
        from genenv_cli.core.jsonio import json_lines
        from genenv_cli.core.sizecaps import SEEDS

        path = self.seed_path()
        expected = '{"id", "split", "shape", ' + ", ".join(f'"{k}"' for k in self.payload_keys) + "}"
        if not path.is_file():
            raise InputError(f"{path}: the seed file of domain {self.name!r} (seed_file = {self.seed_file!r}) is not "
                             f"there; a domain's seed file goes in the data/ folder of its package, shipped as "
                             f"package data.")
        out = []
        for where, r in json_lines(path, expected, SEEDS):
            missing = [k for k in ("id", "split", "shape", *self.payload_keys) if not isinstance(r, dict) or k not in r]
            if missing:
                raise InputError(f"{where}: missing {', '.join(missing)}; expected {expected}.")
            if r["split"] not in ("train", "validation") or not isinstance(r["id"], str) \
                    or not isinstance(r["shape"], str):
                raise InputError(f"{where}: expected a string id and shape, and split train or validation; got "
                                 f"id {r['id']!r}, split {r['split']!r}, shape {r['shape']!r}.")
            out.append(SeedTask(r["id"], r["split"], r["shape"], {k: r[k] for k in self.payload_keys}))
        return out

    def seeds(self, split: str = "train") -> list[SeedTask]:
        """The domain's seed tasks of a split (`train` feeds epochs; `validation` is held out)."""
        return [s for s in self._seeds if s.split == split]

    def data_fingerprint(self) -> str:
        """A hash of the domain's data, recorded in manifests: by default its seed file (override it to add more,
        such as a tool library read from a file)."""
        return hashlib.sha256(self.seed_path().read_bytes()).hexdigest()[:16]

    def code_files(self) -> list[Path]:
        """The source files whose code shapes this domain's output, fingerprinted into the manifests
        (`domains/fingerprints.py`): the module of every class from this one down to `Domain` (excluded), and
        `code_modules`."""
        import importlib

        modules = [k.__module__ for k in type(self).__mro__ if issubclass(k, Domain) and k is not Domain]
        modules += [importlib.import_module(m).__name__ for m in self.code_modules]
        files = []
        for name in dict.fromkeys(modules):
            path = getattr(sys.modules.get(name), "__file__", None)
            if path and path.endswith(".py"):
                files.append(Path(path))
        return files

    @abstractmethod
    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        """The chat messages the agent answers."""

    @abstractmethod
    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        """The chat messages the environment answers with one new task."""

    @abstractmethod
    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        """(payload, shape) of the task in the environment's output, or raise Reject(reason)."""

    @abstractmethod
    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        """Grade one agent completion."""

    @abstractmethod
    def dedup_text(self, payload: dict[str, Any]) -> str:
        """The text compared for exact and near duplicates."""

    def exact_key(self, payload: dict[str, Any]) -> str:
        """Two tasks with the same key are duplicates (default: the dedup text's lowercase words)."""
        return " ".join(_WORD.findall(self.dedup_text(payload).lower()))

    def near_key(self, payload: dict[str, Any]) -> frozenset:
        """Compared by Jaccard similarity for near duplicates (default: word trigrams of the dedup text)."""
        return trigrams(self.dedup_text(payload))

    def check_payload(self, payload: Any) -> str | None:
        """None when `payload` is a well-formed task of this domain, else what is wrong (for tasks.jsonl
        validation)."""
        return None if isinstance(payload, dict) else "payload must be a JSON object"

    def environment(self, payload: dict[str, Any]) -> Environment:
        """An episode of the task (`Environment`): by default a one-step episode, the agent's prompt then
        `score` on its answer. A multi-turn domain returns its own `Environment`."""
        return OneStep(self, payload)

    def start_episode(self, payload: dict[str, Any], threshold: float = 1.0) -> DomainEpisode:
        """An episode of the task, stepped from outside (`evaluate` and `rollout` play it with the episode engine);
        `threshold`: the reward that counts as a success in its result."""
        return DomainEpisode(self.environment(payload), self.max_turns, self.name, threshold=threshold)

    def call_valid(self, observation: str) -> bool | None:
        """Whether the agent's turn that got `observation` back was a call (or command) the environment could carry
        out, for the report's tool-call validity; None, the default, when the domain does not say."""
        return None

    @property
    def episodic(self) -> bool:
        """Whether the domain's tasks are played as multi-turn episodes (its rollouts record every turn)."""
        return self.max_turns > 1

    def score_many(self, payloads: list[dict[str, Any]], completions: list[str]) -> list[TaskVerdict]:
        return [self.score(p, c) for p, c in zip(payloads, completions, strict=True)]

    # ------------------------------------------------------------ the domain's own answers, for its contract

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        """The right answer to a task as the agent should write it (it must score 1), or None where the task
        carries no answer that can be written out. `genenv domains check` grades it."""
        raise NotImplementedError(f"domain {self.name!r} does not declare gold_answer(payload)")

    def reference_completion(self, payload: dict[str, Any]) -> str | None:
        """The one completion whose probability is the teacher-forced estimate of the task's success rate: by default
        `gold_answer`, the answer in the domain's canonical form (None: the task has none)."""
        return self.gold_answer(payload)

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        """An answer to the task that must score 0, with a reason."""
        raise NotImplementedError(f"domain {self.name!r} does not declare wrong_answer(payload)")

    def render_task(self, payload: dict[str, Any]) -> str:
        """The task written as the environment should write it: `parse_env_output` must read it back as the same
        task."""
        raise NotImplementedError(f"domain {self.name!r} does not declare render_task(payload)")

    # ------------------------------------------------------------ base tasks from the user's files

    def read_seeds(self, path: Path) -> list[SeedTask]:
        """Base tasks from `path`, a file in this domain's own format (`genenv init --seeds`), read by the loader
        `genenv evaluate --data` uses where the domain has a benchmark. Bad records raise InputError naming the
        file and the line; a task whose file states no split has split "" (init draws one with the run's seed)."""
        from genenv_cli.core.errors import ConfigError

        raise ConfigError(f"domain {self.name} reads no seed files; it uses its built-in seeds.")

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        """(file, name relative to the copy's folder) for every file the seed source `path` consists of, copied
        into the run so it can be reread without the original (a BFCL question file brings its possible answers)."""
        return [(path, path.name)]

    def shared_seed_files(self, paths: list[Path], tasks: list[SeedTask]) -> list[tuple[Path, str]]:
        """(file, name) of the files the seed sources share (API-Bank's apis/*.py), copied once per import into
        the copy's `shared/` folder; only those the imported `tasks` need."""
        return []


def __getattr__(name: str) -> Any:
    """`Score`, TaskVerdict's earlier name, still imports for plugins written against it, with a warning."""
    if name == "Score":
        import warnings

        warnings.warn("genenv_cli.domains.base.Score is now TaskVerdict; import that name", FutureWarning,
                      stacklevel=2)
        return TaskVerdict
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
