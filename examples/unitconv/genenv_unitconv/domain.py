"""`unitconv`: convert a quantity between two units of one dimension. A complete, minimal genenv domain plugin,
written as docs/domains.md ("Writing a domain") describes.

Task (the payload):             {"value": 3, "unit": "km", "to": "m", "answer": 3000}
The environment writes one line: CONVERT: 3 km TO m
The agent answers:              Answer: 3000

The domain computes every answer itself (exact fractions, never `eval`), and keeps only conversions whose answer is
a whole number. Shapes are the dimension (length, mass, time): the agent's success differs by dimension, and the
environment is told which ones it solves about half the time.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from genenv_cli.domains.base import Domain, EnvContext, Reject, TaskVerdict, stats_lines

# unit -> (dimension, its size in the dimension's base unit)
UNITS: dict[str, tuple[str, Fraction]] = {
    "mm": ("length", Fraction(1, 1000)), "cm": ("length", Fraction(1, 100)), "m": ("length", Fraction(1)),
    "km": ("length", Fraction(1000)),
    "mg": ("mass", Fraction(1, 1000)), "g": ("mass", Fraction(1)), "kg": ("mass", Fraction(1000)),
    "t": ("mass", Fraction(10**6)),
    "s": ("time", Fraction(1)), "min": ("time", Fraction(60)), "h": ("time", Fraction(3600)),
    "day": ("time", Fraction(86400)),
}
MAX_VALUE = 10**6   # a quantity larger than this is a runaway generation, not an exercise
MAX_DIGITS = 12     # digits in one number read from model text (far below Python's int-string limit)

AGENT_SYSTEM = "Convert the quantity to the unit asked for. Reply with the number only, as: Answer: <number>"
ENV_SYSTEM = ("You write unit conversion exercises for a student. Write exactly one line, "
              "CONVERT: <whole number> <unit> TO <unit>, with two units of the same kind from: "
              + ", ".join(UNITS) + ". The answer must be a whole number. Do not give the answer.")

_CONVERT = re.compile(r"CONVERT\s*:\s*(\d{1,12})\s*([a-z]+)\s+TO\s+([a-z]+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+")


def conversion(value: Any, unit: Any, to: Any) -> tuple[int, str]:
    """(answer, dimension) of converting `value` `unit` to `to`; ValueError saying what is wrong otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VALUE:
        raise ValueError(f"the value must be a whole number from 1 to {MAX_VALUE}, got {value!r}")
    if unit not in UNITS or to not in UNITS:
        raise ValueError(f"unknown unit {unit if unit not in UNITS else to!r}; known: {', '.join(UNITS)}")
    (dim, size), (dim_to, size_to) = UNITS[unit], UNITS[to]
    if dim != dim_to:
        raise ValueError(f"{unit} is a {dim} and {to} a {dim_to}")
    if unit == to:
        raise ValueError("the two units are the same")
    answer = value * size / size_to
    if answer.denominator != 1:
        raise ValueError(f"{value} {unit} is {answer} {to}, not a whole number")
    return int(answer), dim


class UnitConvDomain(Domain):
    name = "unitconv"
    description = "Unit conversions (length, mass, time) with whole-number answers: an example domain plugin."
    shapes = ("length", "mass", "time")
    seed_file = "unitconv_seeds.jsonl"          # genenv_unitconv/data/unitconv_seeds.jsonl, shipped in the package
    payload_keys = ("value", "unit", "to", "answer")
    # data_fingerprint() is the base class's: a hash of the seed file, the only data this domain reads

    # ------------------------------------------------------------ the two prompts

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        return [{"role": "system", "content": AGENT_SYSTEM},
                {"role": "user", "content": "Convert 2 m to cm"}, {"role": "assistant", "content": "Answer: 200"},
                {"role": "user", "content": f"Convert {payload['value']} {payload['unit']} to {payload['to']}"}]

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        # the agent's statistics and the difficulty hint in the system message, the example last (the built-in
        # domains found small models otherwise repeat the statistics instead of writing a task)
        context = stats_lines(ctx, thing="exercise", aim="an exercise the student")
        user = [f"An exercise at the right difficulty:\n{self.render_task(ex)}" for ex in ctx.frontier]
        user.append(f"Example exercise:\n{self.render_task(ctx.parent)}")
        user.append("Write one new exercise like the example, with a different number or units.")
        return [{"role": "system", "content": ENV_SYSTEM + "\n" + " ".join(context)},
                {"role": "user", "content": "\n\n".join(user)}]

    # ------------------------------------------------------------ reading what the environment wrote

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        m = _CONVERT.search(text)
        if not m:
            raise Reject("parse: no 'CONVERT: <number> <unit> TO <unit>' line")
        value, unit, to = int(m.group(1)), m.group(2).lower(), m.group(3).lower()
        try:
            answer, dimension = conversion(value, unit, to)
        except ValueError as exc:
            raise Reject(f"invalid: {exc}") from None
        return {"value": value, "unit": unit, "to": to, "answer": answer}, dimension

    def check_payload(self, payload: Any) -> str | None:
        if not isinstance(payload, dict) or set(payload) != set(self.payload_keys):
            return 'payload must be {"value", "unit", "to", "answer"}'
        try:
            answer, _ = conversion(payload["value"], payload["unit"], payload["to"])
        except ValueError as exc:
            return str(exc)
        return None if payload["answer"] == answer else f"answer {payload['answer']!r} is wrong; it is {answer}"

    # ------------------------------------------------------------ grading the agent

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        # the first number after the last "Answer", else the last number in the text (model text is data: read,
        # never evaluated, in linear time)
        at = completion.lower().rfind("answer")
        numbers = _NUMBER.findall(completion, max(at, 0))
        if not numbers:
            return TaskVerdict(0.0, 0.0, False, "no number in the answer")
        raw = numbers[0] if at >= 0 else numbers[-1]
        if len(raw.lstrip("-")) > MAX_DIGITS:
            return TaskVerdict(0.0, 0.0, True, f"answered a number of more than {MAX_DIGITS} digits")
        pred, gold = int(raw), payload["answer"]
        if pred == gold:
            return TaskVerdict(1.0, 1.0, True, None)
        partial = max(0.0, 1.0 - abs(pred - gold) / max(1, abs(gold)))
        return TaskVerdict(0.0, partial, True, f"answered {pred}, expected {gold}")

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return f"{payload['value']} {payload['unit']} to {payload['to']}"

    def near_key(self, payload: dict[str, Any]) -> frozenset:
        return frozenset([self.dedup_text(payload)])  # no "near" for conversions: only identical ones match

    # ------------------------------------------------------------ the domain's own answers, for its contract

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return f"Answer: {payload['answer']}"

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return f"Answer: {payload['answer'] + 1}"

    def render_task(self, payload: dict[str, Any]) -> str:
        return f"CONVERT: {payload['value']} {payload['unit']} TO {payload['to']}"
