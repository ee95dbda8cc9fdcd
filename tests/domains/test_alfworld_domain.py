"""The `alfworld` domain: step items (the next action given the trajectory so far) checked under ALFWorld's rules,
built as the `alfworld` suite's paper protocol builds its step samples, seeds from game files through the suite's
loader, and the built-in seeds. The contract every domain keeps (seeds self-consistent, gold scores 1, the score
equal to the suite's verdict item for item) is test_domain_contract.py."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.families.alfworld.games import TASK_TYPES
from paths import FIXTURES

DOMAIN = "alfworld"
FIX = FIXTURES / "alfworld"
SPLIT = FIX / "json_2.1.1" / "valid_unseen"
HEAT = SPLIT / "pick_heat_then_place_in_recep-Egg-None-DiningTable-905" / "trial_T20250101_090505_000005"
runner = CliRunner()

GOOD = {
    "task_type": "pick_cool_then_place_in_recep",
    "observation": "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a fridge 1, "
                   "and a countertop 1.\nYour task is to: put a cool tomato in countertop.",
    "trajectory": [{"action": "go to cabinet 1", "observation": "You arrive at cabinet 1. The cabinet 1 is closed."},
                   {"action": "open cabinet 1", "observation": "You open the cabinet 1. The cabinet 1 is open. In it, "
                                                               "you see a tomato 1."}],
    "admissible_commands": ["close cabinet 1", "examine cabinet 1", "examine tomato 1", "go to countertop 1",
                            "go to fridge 1", "help", "inventory", "look", "take tomato 1 from cabinet 1"],
    "action": "take tomato 1 from cabinet 1",
}


def ctx() -> EnvContext:
    return EnvContext("p", GOOD["task_type"], GOOD, None, None, [])


def parse(dom, obj) -> tuple[dict, str]:
    text = obj if isinstance(obj, str) else "Here is a new item:\n```json\n" + json.dumps(obj) + "\n```"
    return dom.parse_env_output(text, ctx())


def broken(**change) -> dict:
    item = copy.deepcopy(GOOD)
    item.update(change)
    return item


# ------------------------------------------------------------------------------- parser and self-consistency

def test_a_consistent_item_is_accepted_with_its_task_type_as_shape(dom):
    payload, shape = parse(dom, broken(action="Take  Tomato 1 from Cabinet 1."[:-1]))
    assert shape == "pick_cool_then_place_in_recep"
    assert payload["action"] == "take tomato 1 from cabinet 1"   # the admissible spelling is kept
    assert payload["trajectory"] == GOOD["trajectory"] and dom.check_payload(payload) is None
    first = broken(trajectory=[], admissible_commands=["go to cabinet 1", "go to fridge 1", "look"],
                   action="go to fridge 1")
    assert parse(dom, first)[0]["trajectory"] == []
    assert json.loads(dom.render_item(payload)) == payload


CASES = [
    ("gold not admissible", broken(action="take tomato 2 from cabinet 1"),
     "invalid: the gold action 'take tomato 2 from cabinet 1' is not one of the admissible commands"),
    ("unknown task type", broken(task_type="pick_and_slice"), "invalid: task_type 'pick_and_slice' is not one of"),
    ("task worded as another type", broken(task_type="pick_heat_then_place_in_recep"),
     "invalid: the task 'put a cool tomato in countertop.' is not worded as a pick_heat_then_place_in_recep task"),
    ("simple task with a state", broken(task_type="pick_and_place_simple"),
     "invalid: a pick_and_place_simple task does not say"),
    ("prefix pair without its observation", broken(trajectory=[{"action": "go to cabinet 1"}]),
     "invalid: trajectory[0] must be {\"action\", \"observation\"}"),
    ("prefix as a flat list", broken(trajectory=["go to cabinet 1", "You arrive at cabinet 1."]),
     "invalid: trajectory[0] must be"),
    ("prefix action not a command", broken(trajectory=[{"action": "walk to the cabinet", "observation": "ok"}]),
     "invalid: trajectory[0].action 'walk to the cabinet' is not an ALFWorld command"),
    ("prefix not a list", broken(trajectory="go to cabinet 1"), "invalid: trajectory must be a list"),
    ("admissible not a command", broken(admissible_commands=[*GOOD["admissible_commands"], "grab the tomato"]),
     "invalid: admissible command 'grab the tomato' is not an ALFWorld command"),
    ("admissible in capitals", broken(admissible_commands=[*GOOD["admissible_commands"], "Look"]),
     "invalid: admissible command 'Look' is not an ALFWorld command"),
    ("admissible repeated", broken(admissible_commands=[*GOOD["admissible_commands"], "look"]),
     "invalid: admissible_commands lists a command twice"),
    ("no task in the opening", broken(observation="You are in the middle of a room."),
     "invalid: observation must be the game's opening"),
    ("missing key", {k: v for k, v in GOOD.items() if k != "admissible_commands"},
     "parse: the item has no admissible_commands"),
    ("not JSON", "task_type: pick, action: take tomato 1", "parse: no JSON object"),
]


@pytest.mark.parametrize(("why", "item", "reason"), CASES, ids=[c[0] for c in CASES])
def test_inconsistent_items_are_rejected_with_the_reason(dom, why, item, reason):
    with pytest.raises(Reject) as err:
        parse(dom, item)
    assert str(err.value).startswith(reason), str(err.value)


def test_too_long_a_prefix_is_rejected(dom):
    step = {"action": "look", "observation": "You are in the middle of a room."}
    with pytest.raises(Reject, match="invalid: the trajectory has 50 steps"):
        parse(dom, broken(trajectory=[step] * 50))


# ------------------------------------------------------------------------------- the suite's prompt and scorer

@pytest.fixture(scope="module")
def steps(dom):
    return dom.suite.load(data=FIX, split=None, version=None, protocol="paper", cache_dir=Path("/nonexistent")).samples


def test_items_map_one_to_one_onto_the_suites_step_samples(dom, steps):
    assert len(steps) == 42
    for s in steps:
        payload = dom.seed_from_sample(s).payload
        assert dom.check_payload(payload) is None, s.id
        built = dom.sample(payload)
        assert built.messages == s.messages and built.gold == s.gold and built.category == s.category
        assert built.meta["admissible_commands"] == s.meta["admissible_commands"]
        assert len(payload["trajectory"]) == s.meta["step"]


def test_the_action_is_matched_as_the_suite_matches_it(dom, steps):
    """Case, a leading `>` and a closing full stop do not matter; an empty answer is not a valid one."""
    for s in steps:
        payload = dom.seed_from_sample(s).payload
        assert dom.score(payload, f"> {s.gold.upper()}.").reward == 1.0, s.id
    assert dom.score(GOOD, "").valid is False and dom.score(GOOD, "ACTION: look").valid is True


# ------------------------------------------------------------------------------- seeds

def test_builtin_seeds_cover_every_task_type_on_games_apart(dom):
    train, val = dom.seeds("train"), dom.seeds("validation")
    assert len(train) == 18 and len(val) == 6
    assert {s.shape for s in train} == set(TASK_TYPES)
    assert len({s.id for s in train + val}) == 24
    for s in train + val:
        assert s.shape == s.payload["task_type"]
        assert dom.sample(s.payload).messages[-1]["content"].endswith("\n".join(s.payload["admissible_commands"]))
    train_games = {s.payload["observation"] for s in train}
    assert not train_games & {s.payload["observation"] for s in val}   # validation games are not trained on


def invoke(*args, ok=True):
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output + str(result.exception)
    return result


def game_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "games" / HEAT.parent.name / HEAT.name
    shutil.copytree(HEAT, dest)
    return dest / "game.scripted.json"


def test_init_seeds_from_a_game_file_one_task_per_expert_step(tmp_path):
    game = game_copy(tmp_path)
    invoke("init", tmp_path / "run", "--domain", "alfworld", "--seeds", game, "--set", "run.seed=5")
    seeds = [json.loads(x) for x in (tmp_path / "run" / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert [len(s["payload"]["trajectory"]) for s in seeds] == list(range(6))
    assert seeds[0]["id"] == f"alfworld-{HEAT.parent.name}/{HEAT.name}/game.scripted.json#step0"
    assert {s["shape"] for s in seeds} == {"pick_heat_then_place_in_recep"}
    assert [s["payload"]["action"] for s in seeds][3] == "heat egg 1 with microwave 1"
    assert (tmp_path / "run" / "seeds" / "files" / "0" / "game.scripted.json").is_file()


def test_init_with_a_malformed_game_file_names_file_and_line_and_writes_nothing(tmp_path):
    game = game_copy(tmp_path)
    lines = game.read_text().splitlines()
    game.write_text("\n".join(lines[:3] + ['  "task": "heat some egg",,'] + lines[4:]) + "\n")
    result = invoke("init", tmp_path / "run", "--domain", "alfworld", "--seeds", game, ok=False)
    assert f"{game}, line 4" in result.output
    assert not (tmp_path / "run" / "genenv.toml").exists() and not (tmp_path / "run" / "seeds").exists()
    other = tmp_path / "notes.json"
    other.write_text("{}")
    assert "expected an ALFWorld game file" in invoke("init", tmp_path / "run2", "--domain", "alfworld",
                                                      "--seeds", other, ok=False).output


def test_a_game_whose_task_does_not_fit_its_type_gives_no_tasks(tmp_path):
    game = game_copy(tmp_path)
    spec = json.loads(game.read_text())
    spec["task"] = "put some egg in diningtable."          # a heat game worded as a plain pick-and-place
    game.write_text(json.dumps(spec))
    result = invoke("init", tmp_path / "run", "--domain", "alfworld", "--seeds", game, ok=False)
    assert "none of its 6 steps is a usable alfworld task" in result.output
    assert "is not worded as a pick_heat_then_place_in_recep task" in result.output


def test_init_seeds_from_a_folder_of_games_takes_every_game(tmp_path):
    games = tmp_path / "data" / "json_2.1.1" / "train"
    shutil.copytree(SPLIT, games)
    invoke("init", tmp_path / "run", "--domain", "alfworld", "--seeds", tmp_path / "data")  # json_2.1.1/train inside
    seeds = [json.loads(x) for x in (tmp_path / "run" / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert {s["shape"] for s in seeds} == set(TASK_TYPES)
    heat = [s for s in seeds if s["id"].startswith(f"alfworld-{HEAT.parent.name}/{HEAT.name}/")]
    assert [s["id"].rsplit("#", 1)[1] for s in heat] == [f"step{k}" for k in range(6)]
    copied = tmp_path / "run" / "seeds" / "files" / "0" / HEAT.parent.name / HEAT.name / "game.scripted.json"
    assert copied.read_bytes() == (HEAT / "game.scripted.json").read_bytes()


def _as_evaluation_game(tmp_path: Path, trial: str) -> Path:
    """The scripted heat game under the trial name of one of ALFWorld's evaluation games."""
    dest = tmp_path / "mixed" / HEAT.parent.name / trial
    shutil.copytree(HEAT, dest)
    mug = "pick_and_place_simple-Mug-None-Desk-901"
    shutil.copytree(SPLIT / mug, tmp_path / "mixed" / mug)
    return dest / "game.scripted.json"


def test_the_import_refuses_evaluation_games_as_a_folder_or_a_file(tmp_path):
    from genenv_cli.families.alfworld.domain import evaluation_trials

    trials = evaluation_trials()
    assert len(trials) == 274 and sum(v.startswith("valid_unseen/") for v in trials.values()) == 134
    trial = sorted(trials)[0]
    game = _as_evaluation_game(tmp_path, trial)
    for source in (tmp_path / "mixed", game):
        result = invoke("init", tmp_path / "run", "--domain", "alfworld", "--seeds", source, ok=False)
        assert "ALFWorld evaluation games" in result.output and trials[trial] in result.output, result.output
        assert "never from valid_seen or valid_unseen" in result.output
        assert not (tmp_path / "run" / "genenv.toml").exists() and not (tmp_path / "run" / "seeds").exists()
