"""Plugin benchmark suites that break under `genenv evaluate` and `eval-agent`, registered at run time as a user's
plugin would be: loading that hangs or returns a sample whose message is not text, a scorer that exits or returns
a NaN score, a summary holding NaN, and interactive suites whose episode hangs, exits or answers with a
non-text observation. Each is Bamboogle (the fixture file) with one method broken. `register(name)` adds its row
(and `unregister` takes it away)."""

from __future__ import annotations

import math
import os
import time

from genenv_cli.catalogue.suites import BENCHMARKS
from genenv_cli.evals.base import Episode, Verdict
from genenv_cli.families.bamboogle import Bamboogle


def _hang(*_):
    while True:
        time.sleep(0.01)


class LoadHangs(Bamboogle):
    def load(self, **kwargs):
        _hang()


class LoadExits(Bamboogle):
    def load(self, **kwargs):
        raise SystemExit(3)


class MessageNotText(Bamboogle):
    def load(self, **kwargs):
        loaded = super().load(**kwargs)
        loaded.samples[0].messages = [{"role": "user", "content": 42}]
        return loaded


class ScoreExits(Bamboogle):
    def score(self, sample, output, protocol):
        raise SystemExit(0)


class ScoreOsExits(Bamboogle):
    def score(self, sample, output, protocol):
        os._exit(0)


class ScoreNaN(Bamboogle):
    def score(self, sample, output, protocol):
        v = super().score(sample, output, protocol)
        v.scores = {**v.scores, "f1": math.nan}
        return v


class SummaryNaN(Bamboogle):
    def summarize(self, samples, verdicts, protocol):
        out = super().summarize(samples, verdicts, protocol)
        out["overall"]["em"] = math.nan
        return out


class _Talk(Episode):
    """A one-turn episode; `how` breaks one of its calls."""

    def __init__(self, how: str):
        self.how, self.over = how, False

    def prompt(self):
        if self.over:
            return None
        if self.how == "observation":
            return [{"role": "user", "content": ["not", "text"]}]
        return [{"role": "user", "content": "Say anything."}]

    def advance(self, output):
        if self.how == "hang":
            _hang()
        if self.how == "exit":
            raise SystemExit(0)
        self.over = True

    def stop(self, end, reason):
        self.over = True

    def result(self):
        return [{"role": "user", "content": "Say anything."}], Verdict(True)


def _interactive(how: str):
    class Suite(Bamboogle):
        interactive = True

        def load(self, **kwargs):
            loaded = super().load(**kwargs)
            for s in loaded.samples:
                s.meta["episode"] = True
            return loaded

        def start_episode(self, sample, max_steps):
            return _Talk(how)

    return Suite


EpisodeHangs = _interactive("hang")
EpisodeExits = _interactive("exit")
ObservationNotText = _interactive("observation")
EpisodeFine = _interactive("fine")

BREAKS = ("LoadHangs", "LoadExits", "MessageNotText", "ScoreExits", "ScoreOsExits", "ScoreNaN", "SummaryNaN", "EpisodeHangs",
          "EpisodeExits", "ObservationNotText", "EpisodeFine")


def register(name: str) -> str:
    """The suite `name` of BREAKS as a run-time row (lowercase, `hostile-` before it); returns the row's name."""
    row = "hostile-" + name.lower()
    BENCHMARKS.register(row, f"hostile_suites:{name}")
    return row


def unregister(row: str) -> None:
    BENCHMARKS.unregister(row)
