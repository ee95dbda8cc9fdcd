"""What a domain or an environment returns, checked where it crosses into genenv (the plugin guard calls these
after every guarded call, single-turn and multi-turn alike): a value of the wrong type or out of range is the
plugin's error, named with the method, never a number genenv goes on to train on.

- a verdict (`score`, a finished step's) is a TaskVerdict: reward and partial credit finite numbers in [0, 1],
  `valid` a bool, `error` None or text;
- a step (`Environment.step`) has `observation`, `done`, `reward` and `verdict`; an episode that goes on has an
  observation that is text of at most OBSERVATION_CAP characters; one that ends has a reward as above;
- chat messages (`agent_messages`, `first_messages`, `env_messages`) are a list of {"role", "content"} text, of at
  most MESSAGES_CAP characters in all;
- a parsed task (`parse_env_output`) is (payload, shape): a JSON object and a text;
- `check_payload` says None or what is wrong, as text;
- seed tasks (`seeds`, `read_seeds`) are a list of tasks with a text id, split and shape and a JSON object payload,
  at most SEEDS_CAP of them.

The checks read the values' fields by name (this floor knows no domain classes) and cost a few microseconds.
"""

from __future__ import annotations

import math
from typing import Any

OBSERVATION_CAP = 1_000_000   # characters of one observation an environment may answer with
MESSAGES_CAP = 4_000_000      # characters of all the chat messages a domain renders for one prompt
SEEDS_CAP = 10_000_000        # seed tasks one call may return (a seed file's own caps: core/sizecaps.py)
VERDICT_FIELDS = ("reward", "partial", "valid", "error")


class BadValue(Exception):
    """What a plugin returned is not what its method promises; the message says what was expected."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def unit_number(value: Any, what: str) -> float:
    """`value` as a float when it is a finite real number in [0, 1] (a bool is not one), else BadValue."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise BadValue(f"{what} {_short(value)}, which is not a number; expected a finite number in [0, 1]")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BadValue(f"{what} {_short(value)}, which is not a number; expected a finite number in [0, 1]") from None
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise BadValue(f"{what} {_short(value)}; expected a finite number in [0, 1]")
    return number


def verdict(value: Any) -> Any:
    """A TaskVerdict as the method promises it (BadValue otherwise); returned as it came."""
    if getattr(value, "_fields", None) != VERDICT_FIELDS:
        raise BadValue(f"returned {_short(value)}; expected a TaskVerdict(reward, partial, valid, error)")
    unit_number(value.reward, "returned the reward")
    unit_number(value.partial, "returned the partial credit")
    if not isinstance(value.valid, bool) and type(value.valid).__name__ != "bool_":
        raise BadValue(f"returned valid = {_short(value.valid)}; expected True or False")
    if value.error is not None and not isinstance(value.error, str):
        raise BadValue(f"returned error = {_short(value.error)}; expected None or a text")
    return value


def verdicts(value: Any, n: int) -> list[Any]:
    """`score_many`'s list: one verdict per pair."""
    out = list(value) if isinstance(value, (list, tuple)) and getattr(value, "_fields", None) is None else None
    if out is None or len(out) != n:
        raise BadValue(f"returned {_short(value)}; expected a list of {n} TaskVerdicts, one per completion")
    for v in out:
        verdict(v)
    return out


def step(value: Any) -> Any:
    """An environment's step, checked: an episode that goes on has a text observation under the cap; one that ends
    has a reward (and a verdict, if any) in range."""
    if not all(hasattr(value, f) for f in ("observation", "done", "reward", "verdict")):
        raise BadValue(f"returned {_short(value)}; expected a Step(observation, done, reward, verdict)")
    if not isinstance(value.done, bool):
        raise BadValue(f"returned done = {_short(value.done)}; expected True or False")
    if value.done:
        unit_number(value.reward, "ended the episode with the reward")
        if value.verdict is not None:
            verdict(value.verdict)
        return value
    if not isinstance(value.observation, str):
        raise BadValue(f"returned done = False with the observation {_short(value.observation)}; expected the text "
                       f"of the next user message")
    if len(value.observation) > OBSERVATION_CAP:
        raise BadValue(f"returned an observation of {len(value.observation):,} characters; at most "
                       f"{OBSERVATION_CAP:,} are taken")
    return value


def messages(value: Any) -> Any:
    """Chat messages: a list of {"role": text, "content": text}, at most MESSAGES_CAP characters in all."""
    if not isinstance(value, list) or not value:
        raise BadValue(f"returned {_short(value)}; expected a non-empty list of chat messages")
    total = 0
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise BadValue(f"returned the message {_short(m)}; expected {{'role': text, 'content': text}}")
        total += len(m["content"])
    if total > MESSAGES_CAP:
        raise BadValue(f"returned messages of {total:,} characters; at most {MESSAGES_CAP:,} are taken")
    return value


def parsed_task(value: Any) -> Any:
    """`parse_env_output`'s (payload, shape)."""
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict)
            and isinstance(value[1], str)):
        raise BadValue(f"returned {_short(value)}; expected (payload: a dict, shape: a text)")
    return value


def payload_problem(value: Any) -> Any:
    """`check_payload`'s None or text."""
    if value is not None and not isinstance(value, str):
        raise BadValue(f"returned {_short(value)}; expected None or a text saying what is wrong")
    return value


def seed_tasks(value: Any) -> Any:
    """`seeds`' and `read_seeds`' list of SeedTasks, each checked in constant time (a payload's content is the
    domain's `check_payload`'s to judge)."""
    if not isinstance(value, (list, tuple)):
        raise BadValue(f"returned {_short(value)}; expected a list of SeedTasks")
    if len(value) > SEEDS_CAP:
        raise BadValue(f"returned {len(value):,} seed tasks; at most {SEEDS_CAP:,} are taken")
    for t in value:
        if not (isinstance(getattr(t, "id", None), str) and isinstance(getattr(t, "split", None), str)
                and isinstance(getattr(t, "shape", None), str) and isinstance(getattr(t, "payload", None), dict)):
            raise BadValue(f"returned the seed task {_short(t)}; expected a SeedTask(id: text, split: text, shape: "
                           f"text, payload: a dict)")
    return value
