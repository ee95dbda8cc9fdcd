"""ALFWorld's official protocol sends commands as ALFWorld's own agents do (ReAct: the model's text, stripped): action
lists written awkwardly (upper case, a trailing period, doubled spaces, title case) played through ALFWorld's own
environment (textworld.gym with alfworld's AlfredDemangler, as alfworld's AlfredTWEnv builds it, not genenv's game
wrapper) and through genenv's episode loop and `score` agree on every step: the same observations, the same `won`,
the same number of steps. The `lenient` rule, a named option, is shown to differ from ALFWorld on the same lists.

Marked `alfworld` (CI: `nox -s alfworld`); skipped, with the reason, without the alfworld extra or the real games in
../shared/data."""

from __future__ import annotations

from pathlib import Path

import pytest

from alfworld_real import need_alfworld

pytestmark = [pytest.mark.alfworld, pytest.mark.slow]
GAMES = (0, 77)  # valid_unseen in sorted order: two games of different task types

AWKWARD = (str.upper, lambda c: c + ".", lambda c: "  ".join(c.split()), str.title)


def _lists(plan: list[str]) -> dict[str, list[str]]:
    """Two lists per game: every walkthrough command first written awkwardly, then as it should be (exact: the game
    is won, one wasted turn per command); and the walkthrough with every command written awkwardly (exact: never
    won)."""
    fixed = [x for j, c in enumerate(plan) for x in (AWKWARD[j % len(AWKWARD)](c), c)]
    return {"awkward_then_right": fixed, "awkward_only": [AWKWARD[j % len(AWKWARD)](c) for j, c in enumerate(plan)]}


def _alfworld_itself(game: Path, commands: list[str]) -> list[tuple[str, bool]]:
    """(observation, won) after each command, in ALFWorld's own environment; each command `.strip()`ped as ReAct's
    loop sends it."""
    import textworld
    import textworld.gym
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

    infos = textworld.EnvInfos(won=True, admissible_commands=True)
    env = textworld.gym.make(textworld.gym.register_game(str(game), infos, wrappers=[AlfredDemangler()]))
    try:
        env.reset()
        out = []
        for c in commands:
            obs, _score, _done, info = env.step(c.strip())
            out.append((obs, bool(info["won"])))
            if info["won"]:
                break
        return out
    finally:
        env.close()


def _genenv_episode(bench, sample, commands: list[str]) -> list[tuple[str, bool]]:
    """(observation shown, won) after each command, played through genenv's episode as a model's answers."""
    from genenv_cli.families.alfworld.prompt import process_observation

    episode = bench.start_episode(sample)
    out = []
    try:
        for c in commands:
            if episode.prompt() is None:
                break
            episode.advance(f"ACTION: {c}")
            out.append((episode.shown, bool(episode.info["won"])))
    finally:
        episode.close()
    assert all(shown == process_observation(shown) for shown, _ in out)
    return out


@pytest.mark.parametrize("index", GAMES)
def test_awkward_commands_fare_in_genenv_as_in_alfworld_itself(alfworld_valid, index):
    need_alfworld()
    from genenv_cli.families.alfworld.benchmark import ALFWorld
    from genenv_cli.families.alfworld.prompt import process_observation

    exact, lenient = ALFWorld(), ALFWorld(commands="lenient")
    loaded = exact.load(data=alfworld_valid, split="valid_unseen", version=None, protocol="official",
                        cache_dir=Path("/nonexistent"))
    sample = sorted(loaded.samples, key=lambda s: s.id)[index]
    game = Path(sample.meta["game"])
    for name, commands in _lists(list(sample.gold)).items():
        itself = _alfworld_itself(game, commands)
        ours = _genenv_episode(exact, sample, commands)
        # every step: the same observation (as the prompt shows it) and the same `won`
        assert [(process_observation(o), w) for o, w in itself] == ours, name
        nothing = sum(o.strip() == "Nothing happens." for o, _ in itself)
        assert nothing == len(sample.gold), (name, nothing)  # every awkward command was refused by ALFWorld
        verdict = exact.score(sample, "\n".join(commands), "official")
        assert (verdict.correct, int(verdict.scores["steps"])) == (itself[-1][1], len(itself)), name
        assert verdict.correct is (name == "awkward_then_right")
        # the named lenient option forgives what ALFWorld refuses: on the awkward commands alone it wins
        if name == "awkward_only":
            assert lenient.score(sample, "\n".join(commands), "official").correct
            assert lenient.summarize([sample], [verdict], "official")["commands"] == "lenient"
