"""One episode of a multi-turn domain's seed, played turn by turn for `genenv domains preview`: each turn's action,
the environment's observation, and how the episode ended (`done`, `turn_cap`, or `actions_ended` when scripted
answers ran out first), with its reward.

The answers come from a script (`--say TEXT`, once per turn, or `--answers FILE`: a JSON list of strings, else one
answer per line), from a model (`--model NAME`: a Hugging Face id, a folder such as a run's `epochs/0003/agent`, or
`embedded`; greedy, the turn's prompt as the rollout stage builds it), or by default the seed's right answer
(`gold_answer`) at every turn. The environment's code runs under the preview's guard, one step at a time; a model
is loaded and run outside it (the guard's limit is for a domain's code, not for a model).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.plugin_guard import REPORTER, guard

ANSWERS_ENDED = "actions_ended"  # the end of an episode whose scripted answers ran out (ALFWorld's word for it)


def scripted_answers(says: list[str] | None, path: Path | None, text: str | None) -> list[str] | None:
    """The script's answers, one per turn: `--say` values, else the `--answers` file's (`text`, read already): a JSON
    list of strings, else its non-empty lines. None when neither was given."""
    if says:
        return list(says)
    if text is None:
        return None
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            got = json.loads(stripped)
        except ValueError as exc:
            raise InputError(f"{path}: starts with '[' but is not a JSON list ({exc}); --answers expects a JSON list "
                             f"of strings, or one answer per line.") from None
        if not isinstance(got, list) or not all(isinstance(a, str) for a in got):
            raise InputError(f"{path}: a JSON value that is not a list of strings; --answers expects one answer (a "
                             f"string) per turn.")
        return got
    return [line for line in text.splitlines() if line.strip()]


@contextmanager
def _alive(what: str) -> Iterator[None]:
    """While a model loads or generates in the preview's child process, tell the parent it is alive (it stops a
    child that sends nothing for longer than the per-item limit)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            REPORTER.send(at=what)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class ModelPlayer:
    """A model's greedy answer to each turn's prompt."""

    def __init__(self, name: str, max_new_tokens: int):
        from genenv_cli.machinery.engines import SamplingParams, open_engine
        from genenv_cli.machinery.models import resolve

        self.name = name
        with _alive(f"loading the model {name}"):
            self.engine = open_engine(resolve(name), engine="hf", batch_size=1)
        self.params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        with _alive(f"the model {self.name} answering"):
            return self.engine.generate([messages], self.params)[0][0].text

    def close(self) -> None:
        self.engine.close()


def play_preview(dom: Any, owner: str, limit: float, payload: dict[str, Any], *, answers: list[str] | None,
                 act: Callable[[list[dict[str, str]]], str] | None, source: str,
                 say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Play one episode of `payload` with `dom` (a GuardedDomain): `act(messages)` answers each turn, else the next
    of `answers`. `say(line)` is called with each turn's lines as they are played. Returns the episode: its source,
    turns ({turn, action, observation}), end, reward and reason."""
    episode = dom.start_episode(payload)
    turns: list[dict[str, Any]] = []
    out = {"from": source, "max_turns": episode.max_turns, "turns": turns}
    if say:
        say(f"An episode ({source}; at most {episode.max_turns} turns):")
    try:
        while (messages := episode.prompt()) is not None:
            t = episode.turns
            if act is None and (answers is None or t >= len(answers)):
                episode.stop(ANSWERS_ENDED, f"the scripted answers ran out after {_turns(t)}")
                break
            action = act(messages) if act is not None else answers[t]  # type: ignore[index]
            guard(owner, "the environment's step()", lambda a=action: episode.advance(a), limit)
            observation = episode.observations[t] if len(episode.observations) > t else None
            turns.append({"turn": t + 1, "action": action, "observation": observation})
            if say:
                say(f"  turn {t + 1}, the agent: {_one_line(action)}")
                if observation is not None:
                    say(f"  turn {t + 1}, the environment: {_one_line(observation)}")
    finally:
        guard(owner, "the episode's close()", episode.close, limit)
    v = episode.verdict
    out.update(end=episode.end, reward=None if v is None else v.reward,
               reason=None if v is None else (v.error or ""))
    if say:
        reason = f": {out['reason']}" if out["reason"] else ""
        say(f"  -> ended: {episode.end} after {_turns(episode.turns)}, reward {out['reward']:g}{reason}"
            if out["reward"] is not None else f"  -> ended: {episode.end}{reason}")
    return out


def _turns(n: int) -> str:
    return f"{n} turn{'' if n == 1 else 's'}"


def _one_line(text: str) -> str:
    return text.replace("\n", " / ") if text else "(empty)"


def episode_part(dom: Any, owner: str, limit: float, payload: dict[str, Any], play: dict[str, Any],
                 say: Callable[[str], None] | None) -> dict[str, Any]:
    """The preview's episode: played with the model or the script `play` names, else with the seed's right answer
    at every turn (nothing played when the domain declares none)."""
    if say:
        say("")
    if play.get("model"):
        player = ModelPlayer(play["model"], int(play.get("max_new_tokens") or 256))
        try:
            return play_preview(dom, owner, limit, payload, answers=None, act=player,
                                source=f"the model {play['model']}, greedy", say=say)
        finally:
            player.close()
    answers, source = play.get("script"), "the scripted answers"
    if answers is None:
        try:
            gold = dom.gold_answer(payload)
        except NotImplementedError:
            gold = None
        if gold is None:
            if say:
                say("No episode played: the domain declares no right answer for this seed; give --say TEXT (once per "
                    "turn), --answers FILE or --model NAME.")
            return {"from": None, "turns": [], "end": None, "reward": None,
                    "reason": "no answers given and the domain declares none"}
        answers, source = [gold] * dom.max_turns, "the seed's right answer at every turn"
    return play_preview(dom, owner, limit, payload, answers=answers, act=None, source=source, say=say)
