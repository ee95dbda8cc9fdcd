"""A benchmark suite registered by a plugin, as `genenv evaluate` and `eval-agent` call it: under the same guard as
a plugin domain in the stages (plugin_guard.py), with what it returns checked where it crosses into genenv.

`StageSuite` wraps the suite: loading its data, configuring it and summarising get at least LOAD_LIMIT_S (they
read a whole data set); scoring one output and starting an episode get the per-item limit (`score.item_timeout_s`,
plus the suite's own `engine_seconds` for a game engine); every episode it starts is a `GuardedEpisode`, each of
its calls limited the same way. A failure, a `SystemExit` or an `os._exit` inside the suite's code, a call past
its limit, or a value of the wrong kind becomes a `PluginError` naming the suite, the method and the message: exit
2, nothing committed (the result is written only after every sample is scored). A scorer that raises an ordinary
exception on a model's output passes through, as a built-in scorer's does: `evaluate` counts that output as
unscorable, a wrong answer (model output is data). Built-in suites are genenv's own code and are not wrapped.

The checks read fields by name (this floor knows no suite classes), and cost a few microseconds per call.
"""

from __future__ import annotations

import json
import math
from typing import Any

from genenv_cli.core.errors import GenenvError
from genenv_cli.core.plugin_guard import LOAD_LIMIT_S, PluginError, Reject, guard
from genenv_cli.core.plugin_values import BadValue, _short, messages

_ALWAYS = (Reject, NotImplementedError, GenenvError)  # the suite protocol's own: handled or named by the caller


def _json_value(value: Any, what: str) -> None:
    """BadValue unless `value` is plain JSON with finite numbers (what genenv writes to the result files)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise BadValue(f"returned {what} {_short(value)}, which is not JSON with finite numbers ({exc})") from None


def loaded(value: Any) -> Any:
    """`load`'s LoadedData: samples with a text id and category and chat messages; text version, source and
    fingerprint."""
    samples = getattr(value, "samples", None)
    if not isinstance(samples, list):
        raise BadValue(f"returned {_short(value)}; expected LoadedData(samples: a list, version, source, fingerprint)")
    for field in ("version", "source", "fingerprint"):
        if not isinstance(getattr(value, field, None), str):
            raise BadValue(f"returned {field} = {_short(getattr(value, field, None))}; expected a text")
    for s in samples:
        if not isinstance(getattr(s, "id", None), str) or not isinstance(getattr(s, "category", None), str):
            raise BadValue(f"returned the sample {_short(s)}; expected an EvalSample with a text id and category")
        if not isinstance(s.messages, list):
            raise BadValue(f"returned sample {s.id!r} with messages {_short(s.messages)}; expected a list of chat "
                           f"messages")
        if s.messages:
            messages(s.messages)
    return value


def verdict(value: Any) -> Any:
    """A suite's Verdict: `correct` a bool, `scores` {text: finite number}, `reason` and `end` text, `parsed` JSON."""
    if not all(hasattr(value, f) for f in ("correct", "parsed", "reason", "scores", "end")):
        raise BadValue(f"returned {_short(value)}; expected a Verdict(correct, parsed, reason, scores, end)")
    if not isinstance(value.correct, bool):
        raise BadValue(f"returned correct = {_short(value.correct)}; expected True or False")
    if not isinstance(value.scores, dict):
        raise BadValue(f"returned scores = {_short(value.scores)}; expected {{metric: number}}")
    for k, v in value.scores.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise BadValue(f"returned the score {k!r}: {_short(v)}; expected a finite number")
    if not isinstance(value.reason, str) or not isinstance(value.end, str):
        raise BadValue(f"returned reason {_short(value.reason)} and end {_short(value.end)}; expected texts")
    _json_value(value.parsed, "parsed =")
    return value


def summary(value: Any) -> Any:
    """`summarize`'s {"overall": {...}, ...}: plain JSON with finite numbers."""
    if not isinstance(value, dict) or not isinstance(value.get("overall"), dict):
        raise BadValue(f"returned {_short(value)}; expected {{\"overall\": {{metric: value}}, ...}}")
    _json_value(value, "the summary")
    return value


def prompt(value: Any) -> Any:
    """An episode's next prompt: None once it is over, else chat messages (text under the caps)."""
    return value if value is None else messages(value)


def result(value: Any) -> Any:
    """An episode's (transcript, verdict)."""
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], list)):
        raise BadValue(f"returned {_short(value)}; expected (transcript: a list of messages, verdict)")
    if value[0]:
        messages(value[0])
    verdict(value[1])
    return value


def tokens(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadValue(f"returned {_short(value)}; expected a whole number of tokens, at least 1")
    return value


class StageSuite:
    """A plugin's suite with its methods guarded and their values checked; its other attributes (name,
    interactive, categories, ...) pass through. `wrapped` is the suite itself."""

    def __init__(self, bench: Any, owner: str, limit: float):
        self.wrapped, self.owner = bench, owner
        engine = getattr(bench, "engine_seconds", 0.0)
        engine = engine if isinstance(engine, (int, float)) and math.isfinite(engine) and engine >= 0 else 0.0
        self.engine_seconds = float(engine)  # what the caller's per-item watchdog adds (evaluate.score_safely)
        self.limit = float(limit) + self.engine_seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def _call(self, method: str, call: Any, limit: float, passes: tuple = (), check: Any = None) -> Any:
        """`call()` guarded; its value checked outside the guard, so that a bad value is the plugin's error even
        where the method's own exceptions pass (a scorer's, counted as an unscorable output)."""
        value = guard(self.owner, f"{method}()", call, limit, _ALWAYS + passes)
        if check is None:
            return value
        try:
            return check(value)
        except BadValue as exc:
            raise PluginError(f"{self.owner}: {method}() {exc}") from None

    def configure(self, *args: Any, **kwargs: Any) -> None:
        self._call("configure", lambda: self.wrapped.configure(*args, **kwargs), max(self.limit, LOAD_LIMIT_S))

    def load(self, **kwargs: Any) -> Any:
        return self._call("load", lambda: self.wrapped.load(**kwargs), max(self.limit, LOAD_LIMIT_S), check=loaded)

    def needed_tokens(self, cfg: Any) -> int:
        return self._call("needed_tokens", lambda: self.wrapped.needed_tokens(cfg), self.limit, check=tokens)

    def score(self, sample: Any, output: str, protocol: str) -> Any:
        return self._call("score", lambda: self.wrapped.score(sample, output, protocol), self.limit, (Exception,),
                          verdict)

    def summarize(self, samples: Any, verdicts: Any, protocol: str) -> Any:
        return self._call("summarize", lambda: self.wrapped.summarize(samples, verdicts, protocol),
                          max(self.limit, LOAD_LIMIT_S), check=summary)

    def start_episode(self, sample: Any, max_steps: int) -> GuardedEpisode:
        episode = self._call("start_episode", lambda: self.wrapped.start_episode(sample, max_steps), self.limit)
        if not all(callable(getattr(episode, m, None)) for m in ("prompt", "advance", "stop", "result")):
            raise PluginError(f"{self.owner}: start_episode() returned {_short(episode)}, not an Episode (prompt, "
                              f"advance, stop, result; evals/base.py)")
        return GuardedEpisode(episode, self)

    def run_episode(self, sample: Any, act: Any, max_steps: int) -> Any:
        episode = self.start_episode(sample, max_steps)
        try:
            while (msgs := episode.prompt()) is not None:
                episode.advance(act(msgs))
        finally:
            episode.close()
        return episode.result()


class GuardedEpisode:
    """One episode of a plugin's suite, each call under the suite's per-item limit and its values checked."""

    def __init__(self, episode: Any, suite: StageSuite):
        self.wrapped, self.suite = episode, suite

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def prompt(self) -> Any:
        return self.suite._call("episode prompt", self.wrapped.prompt, self.suite.limit, check=prompt)

    def advance(self, output: str) -> None:
        self.suite._call("episode advance", lambda: self.wrapped.advance(output), self.suite.limit)

    def stop(self, end: str, reason: str) -> None:
        self.suite._call("episode stop", lambda: self.wrapped.stop(end, reason), self.suite.limit)

    def result(self) -> Any:
        return self.suite._call("episode result", self.wrapped.result, self.suite.limit, check=result)

    def close(self) -> None:
        close = getattr(self.wrapped, "close", None)
        if callable(close):
            self.suite._call("episode close", close, self.suite.limit)
