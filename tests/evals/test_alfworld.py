"""ALFWorld: the episode loop, replay scoring and the paper's step decomposition, on the scripted fixture games.

Fixture games (tests/fixtures/alfworld/json_2.1.1/valid_unseen, written for this project) and their expert plan
lengths: pick_and_place_simple x2 (5 and 4 steps), look_at_obj_in_light (4), pick_clean_then_place_in_recep (7),
pick_heat_then_place_in_recep (6), pick_cool_then_place_in_recep (6), pick_two_obj_and_place (10): 7 games,
42 expert steps. Expected numbers below are worked out by hand from those.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from genenv_cli.core.errors import InputError
from genenv_cli.families.alfworld.benchmark import ALFWorld
from genenv_cli.families.alfworld.commands import normalize, parse_action, parse_action_list
from genenv_cli.families.alfworld.games import NOTHING_HAPPENS, ScriptedGame
from paths import FIXTURES

FIX = FIXTURES / "alfworld"
SPLIT = FIX / "json_2.1.1" / "valid_unseen"

MUG = "pick_and_place_simple-Mug-None-Desk-901/trial_T20250101_090101_000001/game.scripted.json"
PENCIL = "pick_and_place_simple-Pencil-None-Shelf-902/trial_T20250101_090202_000002/game.scripted.json"
LOOK = "look_at_obj_in_light-Book-None-DeskLamp-903/trial_T20250101_090303_000003/game.scripted.json"
CLEAN = "pick_clean_then_place_in_recep-Plate-None-CounterTop-904/trial_T20250101_090404_000004/game.scripted.json"
HEAT = "pick_heat_then_place_in_recep-Egg-None-DiningTable-905/trial_T20250101_090505_000005/game.scripted.json"
COOL = "pick_cool_then_place_in_recep-Apple-None-CounterTop-906/trial_T20250101_090606_000006/game.scripted.json"
TWO = "pick_two_obj_and_place-CD-None-Safe-907/trial_T20250101_090707_000007/game.scripted.json"

PLANS = {
    MUG: ["go to drawer 1", "open drawer 1", "take mug 1 from drawer 1", "go to desk 1", "move mug 1 to desk 1"],
    PENCIL: ["go to desk 1", "take pencil 1 from desk 1", "go to shelf 1", "move pencil 1 to shelf 1"],
    LOOK: ["go to bed 1", "take book 1 from bed 1", "go to sidetable 1", "use desklamp 1"],
    CLEAN: ["go to cabinet 1", "open cabinet 1", "take plate 1 from cabinet 1", "go to sinkbasin 1",
            "clean plate 1 with sinkbasin 1", "go to countertop 1", "move plate 1 to countertop 1"],
    HEAT: ["go to countertop 1", "take egg 1 from countertop 1", "go to microwave 1", "heat egg 1 with microwave 1",
           "go to diningtable 1", "move egg 1 to diningtable 1"],
    COOL: ["go to diningtable 1", "take apple 1 from diningtable 1", "go to fridge 1", "cool apple 1 with fridge 1",
           "go to countertop 1", "move apple 1 to countertop 1"],
    TWO: ["go to desk 1", "take cd 1 from desk 1", "go to safe 1", "open safe 1", "move cd 1 to safe 1",
          "go to drawer 1", "open drawer 1", "take cd 2 from drawer 1", "go to safe 1", "move cd 2 to safe 1"],
}
TASK_OF = {MUG: "pick_and_place_simple", PENCIL: "pick_and_place_simple", LOOK: "look_at_obj_in_light",
           CLEAN: "pick_clean_then_place_in_recep", HEAT: "pick_heat_then_place_in_recep",
           COOL: "pick_cool_then_place_in_recep", TWO: "pick_two_obj_and_place"}


@pytest.fixture(scope="module")
def bench():
    return ALFWorld()


def _load(bench, protocol="official", data=FIX):
    return bench.load(data=data, split=None, version=None, protocol=protocol, cache_dir=Path("/nonexistent"))


@pytest.fixture(scope="module")
def official(bench):
    return _load(bench)


@pytest.fixture(scope="module")
def paper(bench):
    return _load(bench, "paper")


def _score_all(bench, loaded, outputs, protocol="official"):
    samples = [s for s in loaded.samples if s.id in outputs]
    verdicts = [bench.score(s, outputs[s.id], protocol) for s in samples]
    return samples, verdicts, bench.summarize(samples, verdicts, protocol)


# --------------------------------------------------------------------------------------------------- loading

def test_load_official_ids_categories_gold(official):
    assert [s.id for s in official.samples] == sorted(PLANS)
    for s in official.samples:
        assert s.category == TASK_OF[s.id]
        assert s.gold == PLANS[s.id]
        assert [m["role"] for m in s.messages] == ["system"]
    assert official.version == "scripted games (valid_unseen)"
    assert len(official.fingerprint) == 64


def test_data_may_name_the_split_folder(bench):
    assert [s.id for s in _load(bench, data=SPLIT).samples] == sorted(PLANS)


# ------------------------------------------------------------------------------------- official: replay score

def test_gold_plans_win_every_game(bench, official):
    outs = {gid: "\n".join(plan) for gid, plan in PLANS.items()}
    _, verdicts, summary = _score_all(bench, official, outs)
    assert all(v.correct for v in verdicts)
    assert summary["overall"] == {"success_rate": 100.0, "won": 7, "n": 7}
    for cat, n in [("pick_and_place_simple", 2), ("look_at_obj_in_light", 1), ("pick_two_obj_and_place", 1)]:
        assert summary["categories"][cat] == {"success_rate": 100.0, "won": n, "n": n}
    assert len(summary["categories"]) == 6


def test_json_list_and_prompt_marked_logs_replay_too(bench, official):
    outs = {MUG: json.dumps(PLANS[MUG]), PENCIL: "\n".join(f"> {a}" for a in PLANS[PENCIL]),
            HEAT: "\n".join(f"ACTION: {a}" for a in PLANS[HEAT])}
    _, verdicts, _ = _score_all(bench, official, outs)
    assert [v.correct for v in verdicts] == [True, True, True]
    assert verdicts[1].parsed == PLANS[PENCIL]         # a log's "> " marker is not part of the command


def test_commands_go_to_the_game_as_written_unless_the_lenient_rule_is_chosen(official):
    """The official protocol's default rule (`exact`, ReAct's): upper case, a trailing period, doubled spaces or
    quotes make a command the game does not know ("Nothing happens.", a turn used); `lenient`, the named option,
    forgives them and is recorded in the summary."""
    awkward = {"upper": str.upper, "period": lambda a: a + ".", "spaces": lambda a: "  ".join(a.split()),
               "title": str.title, "quoted": lambda a: f"`{a}`"}
    sample = next(s for s in official.samples if s.id == HEAT)
    for rule, wins in (("exact", False), ("lenient", True)):
        bench = ALFWorld(commands=rule)
        for name, spell in awkward.items():
            v = bench.score(sample, "\n".join(f"ACTION: {spell(a)}" for a in PLANS[HEAT]), "official")
            assert v.correct is wins, (rule, name)
            assert v.parsed == (PLANS[HEAT] if wins else [spell(a).strip() for a in PLANS[HEAT]]), (rule, name)
        # the same rule plays episodes: the first turn's upper-case command changes nothing in the exact game
        episode = bench.start_episode(sample)
        try:
            episode.advance(f"ACTION: {PLANS[HEAT][0].upper()}")
            after = episode.prompt()[-1]["content"]
        finally:
            episode.close()
        assert after.startswith(NOTHING_HAPPENS) is not wins, rule
        assert bench.summarize([sample], [v], "official")["commands"] == rule
    # surrounding blanks are not the command's (ReAct strips the model's text), a trailing period is
    exact = ALFWorld()
    assert exact.score(sample, "\n".join(f"ACTION:   {a}  " for a in PLANS[HEAT]), "official").correct


def test_one_defect_per_game_exact_per_task_type(bench, official):
    outs = {
        # missing step: the drawer is never opened, so the mug cannot be taken
        MUG: "\n".join(a for a in PLANS[MUG] if a != "open drawer 1"),
        PENCIL: "\n".join(PLANS[PENCIL]),                                    # correct
        # wrong value: the lamp is examined, not turned on
        LOOK: "\n".join(PLANS[LOOK][:3] + ["examine desklamp 1"]),
        # broken constraint: the plate is put down without being cleaned
        CLEAN: "\n".join(a for a in PLANS[CLEAN] if not a.startswith("clean")),
        # case and spacing differences: commands ALFWorld does not know, as in ALFWorld itself
        HEAT: "\n".join("  ".join(a.title().split()) for a in PLANS[HEAT]),
        # swapped order: cooling before taking the apple
        COOL: "\n".join(["go to fridge 1", "cool apple 1 with fridge 1", "go to diningtable 1",
                         "take apple 1 from diningtable 1", "go to countertop 1", "move apple 1 to countertop 1"]),
        # only one of the two CDs placed: the actions run out
        TWO: "\n".join(PLANS[TWO][:5]),
    }
    samples, verdicts, summary = _score_all(bench, official, outs)
    won = {s.id: v.correct for s, v in zip(samples, verdicts, strict=True)}
    assert won == {MUG: False, PENCIL: True, LOOK: False, CLEAN: False, HEAT: False, COOL: False, TWO: False}
    assert summary["overall"]["won"] == 1
    assert summary["overall"]["success_rate"] == pytest.approx(100 / 7)
    cats = {c: v["success_rate"] for c, v in summary["categories"].items()}
    assert cats == {"pick_and_place_simple": 50.0, "look_at_obj_in_light": 0.0,
                    "pick_clean_then_place_in_recep": 0.0, "pick_heat_then_place_in_recep": 0.0,
                    "pick_cool_then_place_in_recep": 0.0, "pick_two_obj_and_place": 0.0}
    two = verdicts[[s.id for s in samples].index(TWO)]
    assert "ended after 5 steps" in two.reason


def test_step_limit_is_50(bench, official):
    sample = next(s for s in official.samples if s.id == MUG)
    at_limit = bench.score(sample, "\n".join(["look"] * 45 + PLANS[MUG]), "official")      # 45 + 5 = 50
    over = bench.score(sample, "\n".join(["look"] * 46 + PLANS[MUG]), "official")          # 46 + 5 = 51
    assert at_limit.correct and at_limit.scores["steps"] == 50
    assert not over.correct and over.scores["steps"] == 50 and "50-step limit" in over.reason


def test_garbage_output_fails(bench, official):
    sample = next(s for s in official.samples if s.id == PENCIL)
    v = bench.score(sample, "I think I should look for the pencil somewhere.", "official")
    assert not v.correct and v.scores["won"] == 0.0


# -------------------------------------------------------------------------------------------- episode loop

def _admissible(messages):
    text = messages[-1]["content"]
    assert "AVAILABLE ACTIONS:\n" in text
    return text.split("AVAILABLE ACTIONS:\n", 1)[1].splitlines()


def test_run_episode_with_agent_following_admissible_commands(bench, official):
    styles = [lambda a: f"ACTION: {a}", lambda a: f"> {a}", lambda a: f"<think>next</think>\n<action>{a}</action>",
              lambda a: f"{a}\nbecause it is the next step"]
    for k, sample in enumerate(official.samples):
        plan = list(PLANS[sample.id])
        seen = []

        def act(messages, plan=plan, seen=seen, style=styles[k % len(styles)]):
            seen.append(messages)
            admissible = _admissible(messages)
            action = plan.pop(0)
            assert action in admissible                  # the expert only uses offered commands
            return style(action)

        transcript, verdict = bench.run_episode(sample, act)
        assert verdict.correct, (sample.id, verdict.reason)
        assert verdict.parsed == PLANS[sample.id]
        assert verdict.scores["steps"] == len(PLANS[sample.id])
        first = seen[0]
        assert [m["role"] for m in first] == ["system", "user"]
        assert first[1]["content"].startswith("Here is your task.\nYou are in the middle of a room.")
        assert "-= Welcome" not in first[1]["content"]
        # only the latest user turn carries the command list
        assert sum("AVAILABLE ACTIONS:\n" in m["content"] for m in seen[-1] if m["role"] == "user") == 1
        roles = [m["role"] for m in transcript]
        assert roles == ["system"] + ["user", "assistant"] * len(PLANS[sample.id]) + ["user"]


def test_run_episode_wrong_actions_and_step_limit(bench, official):
    sample = next(s for s in official.samples if s.id == MUG)
    transcript, verdict = bench.run_episode(sample, lambda m: "take mug 1 from drawer 1", max_steps=4)
    assert not verdict.correct and verdict.scores["steps"] == 4 and "4-step limit" in verdict.reason
    assert transcript[2]["content"] == "take mug 1 from drawer 1"
    assert transcript[3]["content"] == NOTHING_HAPPENS

    plan = list(PLANS[MUG])
    _, verdict = bench.run_episode(sample, lambda m: plan.pop(0), max_steps=3)
    assert not verdict.correct and verdict.parsed == PLANS[MUG][:3]


# ------------------------------------------------------------------------------------------- paper protocol

def test_paper_decomposition_one_sample_per_expert_step(paper):
    assert len(paper.samples) == 42
    by_game: dict[str, list] = {}
    for s in paper.samples:
        by_game.setdefault(s.id.split("#")[0], []).append(s)
    assert set(by_game) == set(PLANS)
    for gid, samples in by_game.items():
        assert [s.id for s in samples] == [f"{gid}#step{k}" for k in range(len(PLANS[gid]))]
        assert [s.gold for s in samples] == PLANS[gid]
        for k, s in enumerate(samples):
            assert s.category == TASK_OF[gid]
            roles = [m["role"] for m in s.messages]
            assert roles == ["system"] + ["user", "assistant"] * k + ["user"]
            history = [m["content"] for m in s.messages if m["role"] == "assistant"]
            assert history == [f"ACTION: {a}" for a in PLANS[gid][:k]]
            assert s.gold in s.messages[-1]["content"].split("AVAILABLE ACTIONS:\n")[1].splitlines()
    heat2 = next(s for s in paper.samples if s.id == f"{HEAT}#step2")
    assert heat2.messages[-1]["content"].startswith("You pick up the egg 1 from the countertop 1.")


def test_paper_gold_scores_100(bench, paper):
    outs = {s.id: s.gold for s in paper.samples}
    _, _, summary = _score_all(bench, paper, outs, "paper")
    assert summary["overall"]["accuracy"] == 100.0 and summary["overall"]["n"] == 42
    assert summary["overall"]["games"] == 7
    assert all(c["accuracy"] == 100.0 for c in summary["categories"].values())
    assert summary["paper_reference"]["GenEnv 7B"] == 54.5


def test_paper_one_defect_per_game(bench, paper):
    wrong = {  # one wrong step per game
        f"{MUG}#step1": "go to desk 1",                       # skips opening the drawer
        f"{PENCIL}#step3": "move pencil 1 to shelf 2",        # wrong receptacle
        f"{LOOK}#step3": "examine desklamp 1",                # wrong verb
        f"{CLEAN}#step4": "clean plate 2 with sinkbasin 1",   # wrong object
        f"{HEAT}#step0": "go to microwave 1",                 # swapped with a later step
        f"{COOL}#step5": "",                                  # no action at all
        f"{TWO}#step9": "move cd 1 to safe 1",                # wrong object id
    }
    outs = {}
    for k, s in enumerate(paper.samples):
        if s.id in wrong:
            outs[s.id] = wrong[s.id]
        else:   # correct answers in the accepted surface forms
            outs[s.id] = [s.gold, f"ACTION: {s.gold}", f"> {s.gold.upper()}.", f"<action> {s.gold} </action>",
                          f"{s.gold}\nThought: this moves me closer to the goal."][k % 5]
    samples, verdicts, summary = _score_all(bench, paper, outs, "paper")
    bad = {s.id for s, v in zip(samples, verdicts, strict=True) if not v.correct}
    assert bad == set(wrong)
    assert summary["overall"]["correct"] == 35
    assert summary["overall"]["accuracy"] == pytest.approx(100 * 35 / 42)
    cats = {c: v["accuracy"] for c, v in summary["categories"].items()}
    assert cats == pytest.approx({"pick_and_place_simple": 100 * 7 / 9, "look_at_obj_in_light": 75.0,
                                  "pick_clean_then_place_in_recep": 100 * 6 / 7,
                                  "pick_heat_then_place_in_recep": 100 * 5 / 6,
                                  "pick_cool_then_place_in_recep": 100 * 5 / 6,
                                  "pick_two_obj_and_place": 90.0})


def test_paper_run_episode_is_one_turn(bench, paper):
    s = next(s for s in paper.samples if s.id == f"{TWO}#step3")
    transcript, verdict = bench.run_episode(s, lambda m: "ACTION: open safe 1")
    assert verdict.correct and transcript[-1] == {"role": "assistant", "content": "ACTION: open safe 1"}


# ------------------------------------------------------------------------------------------------- parsing

@pytest.mark.parametrize(("text", "action"), [
    ("go to desk 1", "go to desk 1"),
    ("> go to desk 1\n> open drawer 1", "go to desk 1"),
    ("THOUGHT: the mug may be in the drawer.\nACTION: open drawer 1", "open drawer 1"),
    ("Action:   take  mug 1   from drawer 1.", "take mug 1 from drawer 1"),
    ("<think>hmm</think><action>`use desklamp 1`</action>", "use desklamp 1"),
    ("\n\n  \"look\"  \n", "look"),
    ("", ""),
])
def test_parse_action(text, action):
    assert parse_action(text) == action


def test_parse_action_list_and_normalize():
    assert parse_action_list('["go to desk 1", "> look"]') == ["go to desk 1", "look"]
    assert parse_action_list("go to desk 1\n\n  look \n") == ["go to desk 1", "look"]
    assert parse_action_list("[not json") == ["[not json"]
    log = "You are in the middle of a room.\n> go to desk 1\nOn the desk 1, you see a pen 1.\n> ACTION: look\n"
    assert parse_action_list(log) == ["go to desk 1", "look"]
    assert normalize("  Go  To Desk 1 ") == "go to desk 1"


# ------------------------------------------------------------------------------------------ scripted game

def test_scripted_game_rules():
    g = ScriptedGame.from_file(SPLIT / MUG)
    obs, info = g.reset()
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.")
    assert obs.endswith("Your task is to: put some mug on desk.")
    assert info["admissible_commands"] == sorted(info["admissible_commands"])
    assert "take mug 1 from drawer 1" not in info["admissible_commands"]
    assert g.step("open drawer 1")[0] == NOTHING_HAPPENS        # not there yet
    obs, done, _ = g.step("go to drawer 1")
    assert obs == "You arrive at drawer 1. The drawer 1 is closed." and not done
    obs, _, _ = g.step("open drawer 1")
    assert obs == "You open the drawer 1. The drawer 1 is open. In it, you see a mug 1, and a pencil 1."
    g.step("take mug 1 from drawer 1")
    _, _, info = g.step("take pencil 1 from drawer 1")            # one object at a time
    assert g.held == "mug 1" and "take pencil 1 from drawer 1" not in info["admissible_commands"]
    assert g.step("inventory")[0] == "You are carrying: a mug 1."
    g.step("go to desk 1")
    obs, done, info = g.step("move mug 1 to desk 1")
    assert obs == "You move the mug 1 to the desk 1." and done and info["won"]


# ------------------------------------------------------------------------------------------------- errors

def test_no_data_error_names_install_download_and_data(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nothing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(InputError) as exc:
        bench.load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    msg = str(exc.value)
    assert "pip install 'genenv-cli[alfworld]'" in msg and "alfworld-download" in msg and "--data" in msg
    with pytest.raises(InputError, match="alfworld-download"):
        bench.load(data=tmp_path, split=None, version=None, protocol="official", cache_dir=tmp_path)


def _write_real_format(root: Path, spec_source: Path) -> Path:
    """An official-layout split folder whose game.tw-pddl embeds a scripted game (for the fake textworld)."""
    split = root / "json_2.1.1" / "valid_unseen"
    spec = json.loads(spec_source.read_text())
    games = {
        "pick_heat_then_place_in_recep-Egg-None-DiningTable-905/trial_T1": ("pick_heat_then_place_in_recep", True),
        "pick_heat_then_place_in_recep-Egg-None-DiningTable-905/trial_T2": ("pick_heat_then_place_in_recep", False),
        "pick_and_place_with_movable_recep-Egg-Bowl-DiningTable-905/trial_T3": ("pick_heat_then_place_in_recep", True),
        "pick_heat_then_place_in_recep-EggSliced-None-DiningTable-905/trial_T4": ("pick_heat_then_place_in_recep", True),
        "pick_heat_then_place_in_recep-Egg-None-DiningTable-906/trial_T5": ("pick_and_place_with_movable_recep", True),
    }
    for folder, (task_type, solvable) in games.items():
        d = split / folder
        d.mkdir(parents=True)
        (d / "traj_data.json").write_text(json.dumps({"task_type": task_type}))
        (d / "game.tw-pddl").write_text(json.dumps({"pddl_domain": "", "grammar": "", "pddl_problem": "",
                                                    "solvable": solvable, "walkthrough": spec["expert_plan"],
                                                    "fake_scripted_game": spec}))
    return split


def test_real_games_without_alfworld_give_the_install_error(bench, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "alfworld", None)       # import fails even where alfworld is installed
    _write_real_format(tmp_path, SPLIT / HEAT)
    with pytest.raises(InputError) as exc:
        bench.load(data=tmp_path, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert "pip install 'genenv-cli[alfworld]'" in str(exc.value) and "alfworld-download" in str(exc.value)


def test_bad_scripted_game_is_named(bench, tmp_path):
    d = tmp_path / "valid_unseen" / "pick_and_place_simple-X-None-Y-1" / "trial_T1"
    d.mkdir(parents=True)
    spec = json.loads((SPLIT / MUG).read_text())
    spec["expert_plan"] = spec["expert_plan"][:-1]
    (d / "game.scripted.json").write_text(json.dumps(spec))
    with pytest.raises(InputError, match="does not win"):
        bench.load(data=tmp_path, split=None, version=None, protocol="official", cache_dir=tmp_path)
    spec["task_type"] = "pick_three"
    (d / "game.scripted.json").write_text(json.dumps(spec))
    with pytest.raises(InputError, match="game.scripted.json.*task_type"):
        bench.load(data=tmp_path, split=None, version=None, protocol="official", cache_dir=tmp_path)


# ------------------------------------------------------------- the TextWorld backend against a fake textworld

@pytest.fixture
def fake_textworld(monkeypatch):
    """Stand-ins for textworld / alfworld with the API alfworld 0.4.2 uses, playing the embedded scripted game."""
    calls = []

    class EnvInfos:
        def __init__(self, **kw):
            self.kw = kw

    class Filter:
        pass

    class AlfredDemangler:
        pass

    class Env:
        def __init__(self, path, infos):
            data = json.loads(Path(path).read_text())
            self.game = ScriptedGame(data["fake_scripted_game"])
            self.walkthrough = data["walkthrough"]
            self.infos = infos

        def _infos(self, info):
            out = {"won": info["won"], "admissible_commands": info["admissible_commands"]}
            if "walkthrough" in self.infos.kw.get("extras", []):
                out["extra.walkthrough"] = self.walkthrough
            return out

        def reset(self):
            obs, info = self.game.reset()
            return obs, self._infos(info)

        def step(self, command):
            obs, done, info = self.game.step(command)
            return obs, int(info["won"]), done, self._infos(info)

    def start(path, infos, wrappers):
        assert infos.kw["won"] and infos.kw["admissible_commands"]
        assert wrappers[0] is Filter and isinstance(wrappers[1], AlfredDemangler)
        calls.append(path)
        return Env(path, infos)

    tw = types.ModuleType("textworld")
    tw.EnvInfos, tw.start = EnvInfos, start
    envs, wrappers_mod = types.ModuleType("textworld.envs"), types.ModuleType("textworld.envs.wrappers")
    wrappers_mod.Filter = Filter
    alf_env = types.ModuleType("alfworld.agents.environment.alfred_tw_env")
    alf_env.AlfredDemangler = AlfredDemangler
    for name, mod in {"textworld": tw, "textworld.envs": envs, "textworld.envs.wrappers": wrappers_mod,
                      "alfworld": types.ModuleType("alfworld"), "alfworld.agents": types.ModuleType("a"),
                      "alfworld.agents.environment": types.ModuleType("b"),
                      "alfworld.agents.environment.alfred_tw_env": alf_env}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def test_real_layout_filters_and_plays_through_textworld(bench, tmp_path, fake_textworld):
    _write_real_format(tmp_path, SPLIT / HEAT)
    loaded = bench.load(data=tmp_path, split="valid_unseen", version=None, protocol="official", cache_dir=tmp_path)
    gid = "pick_heat_then_place_in_recep-Egg-None-DiningTable-905/trial_T1/game.tw-pddl"
    assert [s.id for s in loaded.samples] == [gid]             # unsolvable, movable, Sliced, other type skipped
    assert loaded.version.startswith("ALFWorld json_2.1.1/valid_unseen game files")
    sample = loaded.samples[0]
    assert sample.gold == PLANS[HEAT] and sample.meta["kind"] == "textworld"
    assert bench.score(sample, "\n".join(PLANS[HEAT]), "official").correct
    assert not bench.score(sample, "\n".join(PLANS[HEAT][:-1]), "official").correct
    plan = list(PLANS[HEAT])
    _, verdict = bench.run_episode(sample, lambda m: f"ACTION: {plan.pop(0)}")
    assert verdict.correct

    steps = bench.load(data=tmp_path, split=None, version=None, protocol="paper", cache_dir=tmp_path).samples
    assert [s.id for s in steps] == [f"{gid}#step{k}" for k in range(6)]
    assert [s.gold for s in steps] == PLANS[HEAT]
    assert fake_textworld and all(p.endswith("game.tw-pddl") for p in fake_textworld)


def test_degenerate_action_lists_are_commands_never_a_crash():
    for output in ["[" + "1" * 5000 + "]", "[" * 3000 + "]" * 3000]:
        assert isinstance(parse_action_list(output), list)


def test_scoring_a_replay_is_not_cut_by_the_parse_limit(bench, monkeypatch):
    """`evaluate --predictions` scores each output under score.item_timeout_s, a limit on parsing model text; an
    official ALFWorld verdict loads the game and replays it (3-5 s for a real game, a minute on a loaded machine),
    which the suite's engine_seconds adds to the limit. Without it a winning walkthrough scored 0 (seen: a real
    game under load, past the 10 s default)."""
    import time

    from genenv_cli.stages.eval_samples import score_safely

    sample = next(s for s in _load(bench).samples if s.id == MUG)
    reset = ScriptedGame.reset
    monkeypatch.setattr(ScriptedGame, "reset", lambda self: (time.sleep(0.15), reset(self))[1])
    assert score_safely(bench, sample, "\n".join(PLANS[MUG]), "official", 0.1).correct
    monkeypatch.setattr(ALFWorld, "engine_seconds", 0.0)
    verdict = score_safely(bench, sample, "\n".join(PLANS[MUG]), "official", 0.1)
    assert not verdict.correct and "0.1" in verdict.reason, verdict
