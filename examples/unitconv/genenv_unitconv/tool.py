"""`unitconv-tool`: the `unitconv` exercises as an environment, the agent able to look up a conversion factor.
An example of a multi-turn domain plugin, written as docs/domains.md ("7. A multi-turn domain") describes.

The agent may answer a turn with a lookup, `factor(km, m)`; the environment replies with the factor as the next user
message, `1 km = 1000 m`, and the agent goes on. A turn without a lookup ends the episode and is graded by unitconv's
scorer. At most three turns. The lookup is read with a regular expression and answered from the unit table: model text
is data, never evaluated.

Everything else (seeds, the environment's prompt and parser, the scorer) is unitconv's, so the environment model
writes the same tasks; only the agent's side became an episode.
"""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.domains.base import Environment, Step
from genenv_unitconv.domain import UNITS, UnitConvDomain

AGENT_SYSTEM = ("Convert the quantity to the unit asked for. You may look up a conversion factor: reply with "
                "factor(<unit>, <unit>) alone and you get it. Then reply with the number only, as: Answer: <number>")
_LOOKUP = re.compile(r"factor\(\s*([a-z]{1,8})\s*,\s*([a-z]{1,8})\s*\)", re.IGNORECASE)


def lookup(unit: str, to: str) -> str:
    """The environment's reply to `factor(unit, to)`: the factor, or why there is none."""
    unit, to = unit.lower(), to.lower()
    if unit not in UNITS or to not in UNITS:
        return f"factor error: unknown unit {unit if unit not in UNITS else to!r}"
    (dim, size), (dim_to, size_to) = UNITS[unit], UNITS[to]
    if dim != dim_to:
        return f"factor error: {unit} is a {dim} and {to} a {dim_to}"
    return f"1 {unit} = {size / size_to} {to}"   # a Fraction prints as 1000 or 1/1000


class FactorLookup(Environment):
    """One exercise: a turn with a lookup gets the factor back; the first turn without one is graded."""

    def first_messages(self) -> list[dict[str, str]]:
        return self.domain.agent_messages(self.payload)

    def step(self, action: str) -> Step:
        m = _LOOKUP.search(action)
        if m is not None and "answer" not in action.lower():
            return Step(observation=lookup(m.group(1), m.group(2)), done=False)
        verdict = self.domain.score(self.payload, action)
        return Step(observation=None, done=True, reward=verdict.reward, verdict=verdict)


class UnitConvToolDomain(UnitConvDomain):
    name = "unitconv-tool"
    description = "Unit conversions with a factor lookup the agent may call: an example multi-turn domain plugin."
    max_turns = 3               # the most agent turns an episode may take; more than 1 makes the domain multi-turn

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        """The first observation: the instruction, one worked episode, then the exercise."""
        return [{"role": "system", "content": AGENT_SYSTEM},
                {"role": "user", "content": "Convert 2 m to cm"}, {"role": "assistant", "content": "factor(m, cm)"},
                {"role": "user", "content": "1 m = 100 cm"}, {"role": "assistant", "content": "Answer: 200"},
                {"role": "user", "content": f"Convert {payload['value']} {payload['unit']} to {payload['to']}"}]

    def environment(self, payload: dict[str, Any]) -> Environment:
        return FactorLookup(self, payload)
