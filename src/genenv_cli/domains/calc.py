"""`calc`: the `arith` exercises with a calculator the agent may call, a multi-turn domain (an environment).

The agent may answer a turn with a call, `calc(37 * (4 + 12))`; the environment replies with the exact result as
the next user message, `calc(37 * (4 + 12)) = 592`, and the agent goes on. A turn without a call ends the episode,
graded as `arith` grades an answer (the number after the last `Answer:`): R_agent 1 for the exact integer. An episode
has at most `max_turns` = 3 agent turns (two calls and an answer); one still calling at its third turn ends as
`turn_cap`, unanswered.

The calculator is real code and bounded: it parses the call's text with `arith`'s recursive-descent parser over
integers, `+`, `-`, `*` and parentheses (never `eval` of model text), refuses a call longer than
`MAX_CALL_CHARS` characters, and a call it cannot read gets `calc error: <why>` back instead of a number.
The environment model writes the tasks exactly as for `arith` (same prompts, parser and seeds), so co-evolution runs
unchanged; only the agent's side is an episode. The prompt shows one worked episode (a call, its result, the answer)
before the exercise, as `arith` shows one worked answer.
"""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.domains.arith import ArithDomain, ArithError, evaluate_expression
from genenv_cli.domains.base import Environment, Messages, Step

MAX_CALL_CHARS = 200
CALC_SYSTEM = ("Solve the arithmetic exercise. You may use a calculator: reply with calc(<expression>) alone and you "
               "get the result. Then reply with the final answer only, as: Answer: <integer>")
_CALL = re.compile(r"calc\s*\(", re.IGNORECASE)


def find_call(text: str) -> str | None:
    """The expression inside the first `calc(...)` of `text` (parentheses balanced), None when there is no call;
    raises ArithError for a call that does not close or is too long."""
    m = _CALL.search(text)
    if m is None:
        return None
    depth, start = 1, m.end()
    for pos in range(start, min(len(text), start + MAX_CALL_CHARS + 1)):
        ch = text[pos]
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return text[start:pos]
    if len(text) - start > MAX_CALL_CHARS:
        raise ArithError(f"a call longer than {MAX_CALL_CHARS} characters")
    raise ArithError("the call's parenthesis does not close")


def calculate(expression: str) -> str:
    """The calculator's reply to a call of `expression`: `calc(<expression>) = <value>`, or `calc error: <why>`."""
    try:
        value, _, _ = evaluate_expression(expression)
    except ArithError as exc:
        return f"calc error: {exc}"
    return f"calc({expression.strip()}) = {value}"


class CalcEnvironment(Environment):
    """One exercise: each turn with a call gets the calculator's reply; the first turn without one is graded."""

    def first_messages(self) -> Messages:
        return self.domain.agent_messages(self.payload)

    def step(self, action: str) -> Step:
        try:
            expression = find_call(action)
        except ArithError as exc:
            return Step(f"calc error: {exc}", False)
        if expression is not None and "answer" not in action.lower():
            return Step(calculate(expression), False)
        verdict = self.domain.score(self.payload, action)
        return Step(None, True, verdict.reward, verdict)


class CalcDomain(ArithDomain):
    name = "calc"
    description = ("Integer arithmetic with a calculator the agent may call, calc(<expression>): a multi-turn "
                   "domain (the agent acts, the calculator answers, the agent answers).")
    max_turns = 3
    teacher_forced = ""  # its answer comes after calls to the calculator: no single reference completion

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        """The first observation: the instruction, one worked episode, then the exercise."""
        return [{"role": "system", "content": CALC_SYSTEM}, {"role": "user", "content": "Compute 12 * 3"},
                {"role": "assistant", "content": "calc(12 * 3)"}, {"role": "user", "content": "calc(12 * 3) = 36"},
                {"role": "assistant", "content": "Answer: 36"},
                {"role": "user", "content": f"Compute {payload['expression']}"}]

    def environment(self, payload: dict[str, Any]) -> Environment:
        return CalcEnvironment(self, payload)

    def call_valid(self, observation: str) -> bool | None:
        """Every observation is the calculator's reply to a call: valid unless it is `calc error: ...`."""
        return not observation.startswith("calc error")
