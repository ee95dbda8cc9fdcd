"""What every evaluation suite provides, so `genenv evaluate` can run or score any of them alike.

A benchmark turns its official data into `EvalSample`s (complete chat messages: the benchmark builds its own
prompt, tools included, as its official prompt does), scores one raw model output against a sample as a
`Verdict` (parsing the output as data, never evaluating it), and summarises the verdicts into the
benchmark's published metrics. Interactive suites (ALFWorld) also play episodes: `start_episode` gives an
`Episode` that is stepped from outside (its next prompt, then the agent's answer), so that `genenv evaluate` can
advance every live episode with one batched generate call per turn and end one whose next prompt would not fit
the model's context; `run_episode` plays one episode with a callback.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOLS = ("official", "paper")
DEFAULT_ANSWER_TOKENS = 512  # a suite that measured nothing shorter: room for a reasoned answer


@dataclass
class EvalSample:
    id: str                               # stable id, documented per benchmark (joins across tools)
    category: str                         # the benchmark's category / level / task type
    messages: list[dict[str, str]]        # chat messages for the agent, ending before its answer
    gold: Any                             # JSON-serialisable reference answer(s)
    tools: list[dict[str, Any]] | None = None   # tool schemas offered, when the benchmark has tools
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    correct: bool                         # the sample's headline pass/fail
    parsed: Any = None                    # JSON-serialisable parsed form of the output
    reason: str = ""                      # why it failed ("" when correct)
    scores: dict[str, float] = field(default_factory=dict)  # per-sample metric values (em, f1, checks ...)
    end: str = ""                         # episodes: how it ended, in the training episodes' words (domains/base.py:
    #                                       "done", "turn_cap", "context_overflow"; "actions_ended" for predictions)


@dataclass(frozen=True)
class PaperColumn:
    """A suite's column in the GenEnv paper's Table 1: `genenv paper-table` orders its columns by `position`
    (1 = first), heads them with `title` and prints `reference` ({model: value}) as the paper's rows."""

    position: int
    title: str
    reference: dict[str, float]


@dataclass
class LoadedData:
    samples: list[EvalSample]
    version: str                          # data version, e.g. "v4 (bfcl-eval 2026.3.23)"
    source: str                           # where it was read from: a path, a URL, a wheel
    fingerprint: str                      # sha256 over the data files read


class Benchmark(ABC):
    name: str = ""
    description: str = ""
    categories: list[str] = []            # what summarize() reports per category
    sources: list[str] = []               # where the data comes from, one line each (for --list and errors)
    splits: list[str] = []                # splits the loader knows; the first is the default
    versions: list[str] = []              # data versions the loader knows; the first is the default
    interactive: bool = False             # True: samples are episodes played with run_episode
    paper_column: PaperColumn | None = None  # the suite's column in the paper's Table 1 (None: not in it)
    answer_tokens: int = DEFAULT_ANSWER_TOKENS  # the longest answer per turn it needs (evaluate.max_new_tokens = 0)
    # seconds a verdict may take on top of score.item_timeout_s (the limit on parsing a model's text) because scoring
    # runs a game engine: ALFWorld's official score replays the commands in a freshly loaded game
    engine_seconds: float = 0.0

    def needed_tokens(self, cfg: Any) -> int:
        """New tokens per turn when `evaluate.max_new_tokens` is 0 (its default): what the suite's answers need."""
        return self.answer_tokens

    @abstractmethod
    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        """Read the official data from `data` (a file or folder in the official format), else from the
        official public source cached under `cache_dir`, else a shipped copy; raise InputError naming the
        sources and `--data` when none is reachable."""

    @abstractmethod
    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        """Score one raw model output. For interactive suites the output is the episode's actions, one per line
        (or a JSON list of strings), replayed in the game."""

    @abstractmethod
    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        """{"overall": {metric: value, ...}, "categories": {category: {metric: value, "n": count}}, ...}.
        Percentages are on a 0-100 scale, as the benchmarks publish them."""

    # True for a suite made of the run's own tasks (heldout): the caller then resolves the run's domains (with
    # their imported seeds) and hands them to `configure`, so no suite imports the domains built on the suites
    uses_run_domains: bool = False

    def configure(self, cfg: Any, run_root: Path | None = None,  # noqa: B027 - optional hook
                  domains: dict[str, Any] | None = None) -> None:
        """Called with the run's Config (and its directory, when there is a run) before `load` (most suites need
        nothing from it); `domains`: the run's domains by name, for a suite that `uses_run_domains`."""

    def start_episode(self, sample: EvalSample, max_steps: int) -> Episode:
        """Interactive suites: a fresh episode of `sample`, stepped from outside."""
        raise NotImplementedError(f"{self.name} is not interactive")

    def run_episode(self, sample: EvalSample, act: Callable[[list[dict[str, str]]], str],
                    max_steps: int) -> tuple[list[dict[str, str]], Verdict]:
        """Interactive suites: play one episode, calling `act(messages)` for each agent turn. Returns the
        transcript (messages) and the verdict."""
        episode = self.start_episode(sample, max_steps)
        try:
            while (messages := episode.prompt()) is not None:
                episode.advance(act(messages))
        finally:
            episode.close()
        return episode.result()


CONTEXT_OVERFLOW = "context_overflow"


class Episode(ABC):
    """One interactive episode, stepped from outside: `prompt()` is the next agent turn's messages (None once
    the episode is over), `advance(output)` plays the agent's answer to it, `stop(end, reason)` ends it early
    as a failure (e.g. `CONTEXT_OVERFLOW` when the next prompt would not fit the model), `result()` is the
    transcript and the verdict once it is over. `close()` frees the game; it is called once the episode ends."""

    @abstractmethod
    def prompt(self) -> list[dict[str, str]] | None: ...

    @abstractmethod
    def advance(self, output: str) -> None: ...

    @abstractmethod
    def stop(self, end: str, reason: str) -> None: ...

    @abstractmethod
    def result(self) -> tuple[list[dict[str, str]], Verdict]: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free what the episode holds (a game process)."""
