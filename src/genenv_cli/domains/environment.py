"""Playing a domain's environment (`Environment`, `Step`, `OneStep` in domains/base.py) as an episode.

An episode starts from the task's first observation (`Environment.first_messages`: chat messages, ending where the
agent answers); each agent answer goes to `Environment.step`, which returns the next observation (a user message the
agent answers next), whether the episode is over, and the episode's reward once it is. A single-turn domain is a
one-step episode (`OneStep`): its prompt, then its scorer's verdict on the one answer. A domain becomes a multi-turn
environment by overriding `Domain.environment` and raising `Domain.max_turns`; docs/domains.md shows how.

`DomainEpisode` steps an environment from outside, as the episode engine (evals/episodes.py) steps an evaluation
suite's episodes, so rollout and evaluate play episodes with the same loop. It records why the episode ended
(`END_DONE`, `END_TURN_CAP`, or `context_overflow` from the engine), its turns and its verdict.
"""

from __future__ import annotations

import math

from genenv_cli.curriculum import is_success
from genenv_cli.domains.base import Environment, Messages, TaskVerdict
from genenv_cli.evals.base import CONTEXT_OVERFLOW, Episode, Verdict

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
