"""`genenv domains preview` of a multi-turn domain plays one episode turn by turn: the seed's right answer by
default, scripted answers (--say, --answers) or a model (--model), each turn's action and observation, and the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def preview(*args: str, code: int | None = 0) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "genenv_cli", "domains", "preview", *args], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=300)
    assert r.returncode == code if code is not None else r.returncode in (0, 1), r.stdout + r.stderr
    return r


def test_by_default_the_seeds_right_answer_plays_the_episode():
    out = preview("calc").stdout
    assert "An episode (the seed's right answer at every turn; at most 3 turns):" in out
    assert "  turn 1, the agent: Answer: " in out and "  -> ended: done after 1 turn, reward 1" in out


def test_scripted_answers_play_turn_by_turn():
    out = preview("calc", "--say", "calc(97 - 1)", "--say", "Answer: 96").stdout
    episode = out[out.index("An episode"):].splitlines()
    assert episode == ["An episode (the scripted answers; at most 3 turns):",
                       "  turn 1, the agent: calc(97 - 1)",
                       "  turn 1, the environment: calc(97 - 1) = 96",
                       "  turn 2, the agent: Answer: 96",
                       "  -> ended: done after 2 turns, reward 1"]


def test_an_answers_file_that_never_answers_hits_the_turn_cap(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(["calc(1 + 1)"] * 3))
    r = preview("calc", "--answers", str(path), "--json", code=1)
    ep = json.loads(r.stdout)["episode"]
    assert ep["end"] == "turn_cap" and ep["reward"] == 0.0 and len(ep["turns"]) == 3
    assert all(t["observation"] == "calc(1 + 1) = 2" for t in ep["turns"])


def test_answers_that_run_out_end_the_episode_saying_so(tmp_path):
    path = tmp_path / "answers.txt"
    path.write_text("calc(97 - 1)\n\n")
    out = preview("calc", "--answers", str(path), code=1).stdout
    assert "-> ended: actions_ended after 1 turn, reward 0: the scripted answers ran out after 1 turn" in out


def test_a_single_turn_domain_has_no_episode_to_play():
    r = preview("arith", "--say", "Answer: 3", code=2)
    assert "domain arith is single-turn (max_turns = 1): there is no episode to play" in r.stderr
    assert r.stdout == ""


@pytest.mark.slow
def test_a_model_plays_the_episode(tiny_model):
    r = preview("calc", "--model", str(tiny_model), "--max-new-tokens", "8", "--json", code=None)
    ep = json.loads(r.stdout)["episode"]
    assert ep["from"] == f"the model {tiny_model}, greedy"
    assert 1 <= len(ep["turns"]) <= 3 and ep["end"] in ("done", "turn_cap")
    assert all(isinstance(t["action"], str) for t in ep["turns"])
