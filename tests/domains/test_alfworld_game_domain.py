"""The `alfworld-game` domain: whole games as episodes rewarded when won. Its built-in scripted games are won by their
expert plans and never by standing still; the conversation only grows, so the rollout stage records games as
token-level episodes (the evaluation protocol's prompts, which drop earlier turns' command lists, cannot be); the
environment's games are kept only when their own plan wins them; evaluation games are refused as seeds. The real
training games (marked `alfworld`) are read from a json_2.1.1/train folder and won by their walkthroughs."""

from __future__ import annotations

import copy
import json

import pytest

from alfworld_real import TRAIN_TYPES, need_alfworld
from genenv_cli.catalogue.domains import get_domain
from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import END_DONE, END_TURN_CAP, EnvContext, Reject
from genenv_cli.machinery.episodes import observation_ids


@pytest.fixture
def dom():
    return get_domain("alfworld-game")


def _ctx(dom):
    s = dom.seeds("train")[0]
    return EnvContext(s.id, s.shape, s.payload, None, None, [])


def test_every_builtin_game_is_won_by_its_plan_and_never_by_standing_still(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert {s.shape for s in seeds} == set(TRAIN_TYPES)
    for s in seeds:
        plan = s.payload["game"]["expert_plan"]
        e = dom.start_episode(s.payload)
        for command in plan:
            e.advance(f"Thought: next.\nACTION: {command.upper()}")  # the suite's parser: any case, spacing
        assert (e.end, e.verdict.reward, e.turns) == (END_DONE, 1.0, len(plan))
        assert all("AVAILABLE ACTIONS:" in o for o in e.observations)
        short = {**s.payload, "max_steps": 4}
        e = dom.start_episode(short)
        while e.prompt() is not None:
            e.advance("ACTION: inventory")
        assert (e.end, e.verdict.reward, e.turns) == (END_TURN_CAP, 0.0, 4)


def test_a_command_the_game_cannot_carry_out_is_an_invalid_call(dom):
    e = dom.start_episode(dom.seeds("train")[0].payload)
    e.advance("ACTION: fly to the moon")
    e.advance("ACTION: look")
    assert [dom.call_valid(o) for o in e.observations] == [False, True]


def test_the_conversation_only_grows_so_episodes_are_token_level(dom, tiny_model):
    """observation_ids accepts every turn of a game (each prompt extends the last); the evaluation protocol's next
    prompt rewrites the earlier turn (its command list dropped), which it refuses."""
    from transformers import AutoTokenizer

    from genenv_cli.families.alfworld.prompt import user_turn
    from genenv_cli.machinery.engines.base import Generation

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    e = dom.start_episode(dom.seeds("train")[0].payload)
    before = e.prompt()
    e.advance("ACTION: look")
    ids = tok("ACTION: look")["input_ids"]
    gen = Generation(text="ACTION: look", token_ids=ids, logprobs=[0.0] * len(ids), finish_reason="length",
                     prompt_token_ids=[])
    assert observation_ids(tok, before, e.prompt(), gen)
    rebuilt = copy.deepcopy(e.prompt())
    rebuilt[1]["content"] = rebuilt[1]["content"].split("\n\nAVAILABLE ACTIONS:")[0]  # as evaluation shows history
    assert rebuilt[1]["content"] != e.prompt()[1]["content"] and user_turn("x", None) == "x"
    with pytest.raises(ValueError, match="growing conversation"):
        observation_ids(tok, before, rebuilt, gen)


def test_the_rollout_stage_records_games_as_episodes(dom, tiny_model):
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    engine = HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32")
    payload = {**dom.seeds("train")[0].payload, "max_steps": 3}
    rows = play_tasks(engine, {"alfworld-game": dom}, [{"domain": "alfworld-game", "payload": payload}],
                      SamplingParams(max_new_tokens=5, n=2, seed=3), [0])[0]
    for r in rows:
        assert r["turns"] == 3 and r["end"] == END_TURN_CAP and r["reward"] == 0.0  # a random model never wins
        assert len(r["agent_mask"]) == len(r["completion_token_ids"]) and 0 < sum(r["agent_mask"]) <= 15
        assert len(json.loads(r["observations"])) == 3


def test_the_environment_writes_games_that_its_plan_wins(dom):
    spec = copy.deepcopy(dom.seeds("train")[0].payload["game"])
    payload, shape = dom.parse_env_output("Here it is:\n" + json.dumps(spec) + "\nEnjoy.", _ctx(dom))
    assert payload == {"task_type": spec["task_type"], "game": spec, "max_steps": 50} and shape == spec["task_type"]
    assert dom.check_payload(payload) is None
    losing = {**spec, "expert_plan": spec["expert_plan"][:-1]}
    with pytest.raises(Reject, match="does not win"):
        dom.parse_env_output(json.dumps(losing), _ctx(dom))
    wrong_turn = {**spec, "expert_plan": ["take book 1 from bed 1", *spec["expert_plan"]]}
    with pytest.raises(Reject, match="not admissible"):
        dom.parse_env_output(json.dumps(wrong_turn), _ctx(dom))
    with pytest.raises(Reject, match="invalid: .*task_type"):
        dom.parse_env_output(json.dumps({**spec, "task_type": "dance"}), _ctx(dom))
    with pytest.raises(Reject, match="parse"):
        dom.parse_env_output("no game today", _ctx(dom))


def test_evaluation_games_are_refused_as_seeds(dom, tmp_path):
    from genenv_cli.families.alfworld.domain import evaluation_trials

    trial, where = next(iter(evaluation_trials().items()))
    game = tmp_path / "json_2.1.1" / where / "game.tw-pddl"
    records = tmp_path / "games.jsonl"
    records.write_text(json.dumps({"id": "g", "split": "train", "shape": "pick_and_place_simple",
                                   "task_type": "pick_and_place_simple", "game": str(game), "max_steps": 10}) + "\n")
    with pytest.raises(InputError, match="evaluation games"):
        dom.read_seeds(records)
    assert "evaluation games" in dom.check_payload({"task_type": "pick_and_place_simple", "game": str(game),
                                                    "max_steps": 10})
    assert dom.check_payload({"task_type": "pick_and_place_simple", "game": "/x/game.json", "max_steps": 10})
    assert dom.check_payload({**dom.seeds("train")[0].payload, "max_steps": 51})


@pytest.mark.alfworld
@pytest.mark.slow
def test_real_training_games_are_read_and_won_by_their_walkthroughs(dom, alfworld_train_sample):
    need_alfworld()
    from genenv_cli.families.alfworld.game_files import collect_games

    seeds = dom.read_seeds(alfworld_train_sample)
    assert sorted(s.shape for s in seeds) == sorted(TRAIN_TYPES) and all(s.split == "" for s in seeds)
    plans = {str(r.path.resolve()): r.expert_plan
             for r in collect_games(alfworld_train_sample / "json_2.1.1" / "train")}
    s = seeds[0]
    plan = plans[s.payload["game"]]
    assert plan, "the training game's file carries its walkthrough"
    e = dom.start_episode(s.payload)
    try:
        assert "AVAILABLE ACTIONS:" in e.prompt()[-1]["content"]
        e.advance("ACTION: inventory")
        for command in plan:
            e.advance(f"ACTION: {command}")
            if e.prompt() is None:
                break
    finally:
        e.close()
    assert (e.end, e.verdict.reward) == (END_DONE, 1.0)
