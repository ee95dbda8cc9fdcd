"""Plugin domains that break inside the stages, registered at run time as a user's plugin would be: multi-turn
environments whose `step` hangs, raises, exits or returns bad values, a scorer that exits, a parser that raises, a
payload check that raises, and modules that fail at import. `BREAKS` names each by what it does; `register(name)`
adds its row (and `unregister` takes it away)."""

from __future__ import annotations

import math
import os
import time

from episode_domains import ThreeTurnsDomain, ThreeTurnsEnvironment
from genenv_cli.catalogue.domains import DOMAINS
from genenv_cli.domains.arith import ArithDomain
from genenv_cli.domains.base import Step, TaskVerdict
from genenv_cli.domains.calc import CalcDomain


def in_child(fn):
    """`fn()` (returning JSON-able data, e.g. (exit code, output)) in a forked child: a plugin's os._exit that the
    guard let through would end pytest itself with status 0 and the test would pass unseen; here the child's end
    without an answer fails the test."""
    import json
    import select

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        real_exit = os._exit
        try:
            os.close(read_fd)
            os.write(write_fd, json.dumps(fn()).encode())
        finally:
            real_exit(0)
    os.close(write_fd)
    data = b""
    with os.fdopen(read_fd, "rb") as pipe:
        while select.select([pipe], [], [], 120)[0]:
            chunk = pipe.read()
            if not chunk:
                break
            data += chunk
    os.waitpid(pid, 0)
    assert data, "the command ended its process without an exit status: the plugin's os._exit went through"
    return json.loads(data)

def _step_breaking(how):
    class Env(ThreeTurnsEnvironment):
        def step(self, action):
            return how(self, action)

    class Dom(ThreeTurnsDomain):
        def environment(self, payload):
            return Env(self, payload)

    return Dom


def _hang(env, action):
    while True:
        time.sleep(0.01)


def _raise(env, action):
    raise RuntimeError("the environment tripped")


def _system_exit(env, action):
    raise SystemExit(0)


def _os_exit(env, action):
    os._exit(0)


StepHangs = _step_breaking(_hang)
StepRaises = _step_breaking(_raise)
StepExits = _step_breaking(_system_exit)
StepOsExits = _step_breaking(_os_exit)
RewardNaN = _step_breaking(lambda env, action: Step(None, True, math.nan))
RewardFive = _step_breaking(lambda env, action: Step(None, True, 5.0))
PartialSevenAndAHalf = _step_breaking(lambda env, action: Step(None, True, 1.0, TaskVerdict(1.0, 7.5, True, None)))
ObservationNotText = _step_breaking(lambda env, action: Step(123, False))  # type: ignore[arg-type]
ObservationHuge = _step_breaking(lambda env, action: Step("x" * 2_000_001, False))


class ScoreExits(ArithDomain):  # single-turn: the score stage grades its completions
    def score(self, payload, completion):
        raise SystemExit(0)


class ScoreOsExits(ArithDomain):
    def score(self, payload, completion):
        os._exit(0)


class ParserRaises(CalcDomain):
    def parse_env_output(self, text, ctx):
        raise RuntimeError("the parser tripped")


class PayloadCheckRaises(CalcDomain):
    def check_payload(self, payload):
        if payload.get("expression") == "9 + 9":  # only the hand-edited task
            raise RuntimeError("the payload check tripped")
        return super().check_payload(payload)


BREAKS = {
    "step-hangs": "hostile_plugins:StepHangs", "step-raises": "hostile_plugins:StepRaises",
    "step-exits": "hostile_plugins:StepExits", "step-os-exits": "hostile_plugins:StepOsExits",
    "reward-nan": "hostile_plugins:RewardNaN", "reward-five": "hostile_plugins:RewardFive",
    "partial-seven": "hostile_plugins:PartialSevenAndAHalf", "observation-int": "hostile_plugins:ObservationNotText",
    "observation-huge": "hostile_plugins:ObservationHuge",
    "score-exits": "hostile_plugins:ScoreExits", "score-os-exits": "hostile_plugins:ScoreOsExits",
    "parser-raises": "hostile_plugins:ParserRaises", "payload-check-raises": "hostile_plugins:PayloadCheckRaises",
    "exits-at-import": "plugin_exits_at_import:Domain", "fails-at-import": "plugin_fails_at_import:Domain",
}


def register(name: str) -> None:
    DOMAINS.register(name, BREAKS[name])


def unregister(name: str) -> None:
    DOMAINS.unregister(name)


class _Tokenizer:
    """Characters as tokens, and a chat template that only appends: enough for the episode engine's traces."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<{m['role']}>{m['content']}</>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % 50_000 for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class EpisodeEngine:
    """An engine that answers every turn with `answer` (no model): what the rollout stage's episodes need."""

    name = "replay-episodes"
    model_tag = "replay"

    def __init__(self, answer: str = "calc(1 + 1)"):
        self.answer, self.tokenizer, self.turns = answer, _Tokenizer(), 0

    def prompt_ids(self, messages):
        return self.tokenizer(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True))["input_ids"]

    def context_limit(self):
        return 0

    def _gen(self, prompt_ids):
        from genenv_cli.machinery.engines.base import Generation

        ids = self.tokenizer(self.answer)["input_ids"]
        return Generation(text=self.answer, token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop",
                          prompt_token_ids=list(prompt_ids))

    def generate_ids(self, prompts, params, on_progress=None, seeds=None):
        self.turns += 1
        return [[self._gen(p) for _ in range(params.n)] for p in prompts]

    def generate(self, conversations, params, on_progress=None, seeds=None):
        return [[self._gen(self.prompt_ids(c)) for _ in range(params.n)] for c in conversations]

    def close(self):
        pass


def patch_episode_engine(monkeypatch, engine: EpisodeEngine) -> None:
    import genenv_cli.machinery.engines as engines
    import genenv_cli.machinery.training.policy_loading  # noqa: F401 - imported now, it binds the real `resolve`, not the patch

    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: engine)
    monkeypatch.setattr("genenv_cli.machinery.models.resolve", lambda name, tag=None: None)
