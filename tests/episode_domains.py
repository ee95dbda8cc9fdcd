"""A multi-turn test domain whose episodes always take three turns, whatever a random tiny model writes: `calc`'s
tasks and prompts, an environment that answers the agent's first two turns with an observation and grades the
third. Registered by the tests that play it (`register()`), as a plugin domain would be."""

from __future__ import annotations

from genenv_cli.catalogue.domains import DOMAINS
from genenv_cli.domains.base import Environment, Step
from genenv_cli.domains.calc import CalcDomain

NAME = "three-turns"


class ThreeTurnsEnvironment(Environment):
    def first_messages(self):
        return self.domain.agent_messages(self.payload)

    def step(self, action):
        self.turn = getattr(self, "turn", 0) + 1
        if self.turn < 3:
            return Step(f"calc(1 + {self.turn}) = {1 + self.turn}", False)
        verdict = self.domain.score(self.payload, action)
        return Step(None, True, verdict.reward, verdict)


class ThreeTurnsDomain(CalcDomain):
    name = NAME
    max_turns = 3

    def environment(self, payload):
        return ThreeTurnsEnvironment(self, payload)


def register() -> None:
    if NAME not in DOMAINS.names():
        DOMAINS.register(NAME, "episode_domains:ThreeTurnsDomain",
                         test_answers="genenv_cli.domains.answers.calc:contract_answers")
