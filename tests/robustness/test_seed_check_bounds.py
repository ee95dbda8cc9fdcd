"""Checking a seed costs time linear in its size: an `alfworld-game` seed whose scripted game is past the size caps
(receptacles, the expert plan's commands, docs/domains.md) is refused at once, where playing its plan against every
receptacle at each step cost time quadratic in its size (1.4 s for a 27 KB game, minutes for a 0.6 MB one)."""

from __future__ import annotations

import json
import time

import pytest

from genenv_cli.core.errors import InputError
from genenv_cli.families.alfworld.game_domain import ALFWorldGameDomain

MAX_PLAN, MAX_RECEPTACLES = 100, 100  # the caps docs/domains.md gives (families/alfworld/games.py)


def _game(n: int) -> dict:
    """A winnable scripted game with n receptacles and an expert plan that visits each."""
    receps = [{"name": f"shelf {i}", "contents": [f"pen {i}"]} for i in range(1, n - 1)]
    receps += [{"name": "desk 1", "contents": []}, {"name": "drawer 1", "contents": ["mug 1"]}]
    plan = [f"go to shelf {i}" for i in range(1, n - 1)]
    plan += ["go to drawer 1", "take mug 1 from drawer 1", "go to desk 1", "move mug 1 to desk 1"]
    return {"format": "genenv-alfworld-scripted-1", "task_type": "pick_and_place_simple", "task": "put some mug on desk.",
            "receptacles": receps, "goal": {"object": "mug", "receptacle": "desk", "state": None, "count": 1},
            "expert_plan": plan}


def _seed_file(tmp_path, games: list[dict]):
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps({"id": f"g{i}", "split": "train", "shape": "pick_and_place_simple",
                                        "task_type": "pick_and_place_simple", "game": g, "max_steps": 50}) + "\n"
                            for i, g in enumerate(games)))
    return path


def test_a_seed_game_past_the_caps_is_refused_at_once(tmp_path):
    path = _seed_file(tmp_path, [_game(800)])  # 54 KB
    started = time.perf_counter()
    with pytest.raises(InputError) as err:
        ALFWorldGameDomain().read_seeds(path)
    assert time.perf_counter() - started < 0.5
    assert f"at most {MAX_RECEPTACLES}" in str(err.value) and "seed g0" in str(err.value)


def test_seed_games_within_the_caps_check_in_time_linear_in_the_file(tmp_path):
    one = _game(MAX_PLAN - 4)  # the largest plan the caps allow, and as many receptacles
    assert len(one["expert_plan"]) == MAX_PLAN - 2 and len(one["receptacles"]) <= MAX_RECEPTACLES
    started = time.perf_counter()
    assert len(ALFWorldGameDomain().read_seeds(_seed_file(tmp_path, [one] * 2))) == 2
    two = time.perf_counter() - started
    started = time.perf_counter()
    assert len(ALFWorldGameDomain().read_seeds(_seed_file(tmp_path, [one] * 8))) == 8
    eight = time.perf_counter() - started
    assert eight < 2.0 and eight < 4 * two * 3, (two, eight)  # four times the games: about four times the time
