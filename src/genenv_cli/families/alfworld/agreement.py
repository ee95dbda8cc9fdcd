"""The scripted engine (`games.ScriptedGame`) measured against ALFWorld's own TextWorld environment on real games.

`scripted_spec(game_file)` opens an official `game.tw-pddl` in the real environment, reads its initial state from
TextWorld's facts (already in AlfredDemangler's "<type> <n>" names) and writes it as a scripted game: the
receptacles in the order the opening lists them, each one's contents in PDDL id order (TextWorld's), which are openable, which
heat (microwave), cool (fridge) or clean (sinkbasin, bathtubbasin), the toggleable objects, and the goal read from
the task folder's name (`pick_heat_then_place_in_recep-Egg-None-DiningTable-905`: a hot egg in a diningtable). A
game the scripted engine cannot express is refused with the reason (`NotExpressible`): an object inside another
object, or receptacles sharing one place (going to one reaches all of them in ALFWorld). Objects that can be
neither taken nor used (a houseplant) become the scripted game's `fixed` objects.

`compare(game_file)` then plays the stored walkthrough in both engines side by side and records, at the reset and
after every command, whether the admissible commands (as sets, and in order), the observation and `won` agree.
Where they differ the real engine is right: the figures measure how far the tests' scripted games can stand for
real ones. textworld and alfworld are imported only inside these functions (the `alfworld` extra).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.core.jsonio import json_document
from genenv_cli.families.alfworld.games import (
    SCRIPTED_FORMAT,
    TASK_TYPES,
    WELCOME,
    ScriptedGame,
    require_alfworld,
)

HEATS, COOLS, CLEANS = {"microwave"}, {"fridge"}, {"sinkbasin", "bathtubbasin"}
STATES = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "hot",
          "pick_cool_then_place_in_recep": "cool"}
ROOM = "Looking quickly around you, you see "


class NotExpressible(ValueError):
    """The game uses something the scripted engine does not model."""


def _type(name: str) -> str:
    return name.rsplit(" ", 1)[0]


def goal_from_folder(task_folder: str) -> tuple[str, dict[str, Any]]:
    """(task type, scripted goal) from `<type>-<Object>-<MRecep>-<Recep>-<scene>`."""
    parts = task_folder.split("-")
    task_type, obj, mrecep, recep = parts[0], parts[1].lower(), parts[2], parts[3].lower()
    if task_type not in TASK_TYPES:
        raise NotExpressible(f"task folder {task_folder!r} names no ALFWorld task type")
    if mrecep != "None":
        raise NotExpressible("a movable receptacle task (an object carried in another)")
    if task_type == "look_at_obj_in_light":
        return task_type, {"object": obj, "light": recep}
    return task_type, {"object": obj, "receptacle": recep, "state": STATES.get(task_type),
                       "count": 2 if task_type == "pick_two_obj_and_place" else 1}


def _open_real(game_file: Path, facts: bool = False) -> Any:
    textworld, Filter, AlfredDemangler = require_alfworld()
    infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=facts)
    return textworld.start(str(game_file), infos, wrappers=[Filter, AlfredDemangler()])


def _listed(opening: str) -> list[str]:
    """The receptacles the opening lists, in its order ("a bed 1, a desk 2, ..., and a shelf 1.")."""
    line = next((ln for ln in opening.splitlines() if ROOM in ln), "")
    text = line.split(ROOM, 1)[1].rstrip(".") if line else ""
    items = [i.strip() for i in text.replace(", and ", ", ").split(", ")] if text else []
    return [i[2:] if i.startswith("a ") else i for i in items]


def spec_from_state(opening: str, facts: list[Any], task_folder: str, walkthrough: list[str],
                    ids: dict[str, str] | None = None) -> dict[str, Any]:
    """The scripted game for a real game's opening text and initial facts (see the module docstring); `ids` maps
    each demangled name to its PDDL id, the order TextWorld lists a receptacle's contents in."""
    ids = ids or {}
    by: dict[str, list[tuple[str, ...]]] = {}
    for f in facts:
        by.setdefault(f.name, []).append(tuple(v.name for v in f.arguments))
    receptacles = [a[0] for a in by.get("receptacletype", [])]
    order = _listed(opening)
    if sorted(order) != sorted(receptacles):
        raise NotExpressible("the opening does not list exactly the game's receptacles")
    pickable = {a[0] for a in by.get("pickupable", [])}
    places: dict[str, list[str]] = {}
    for rec, loc in by.get("receptacleatlocation", []):
        places.setdefault(loc, []).append(rec)
    shared = next((sorted(rs) for rs in places.values() if len(rs) > 1), None)
    if shared:
        raise NotExpressible(f"receptacles at one place ({', '.join(shared)}): going to one reaches the others")
    toggleable = {a[0] for a in by.get("toggleable", [])}
    contents: dict[str, list[str]] = {r: [] for r in receptacles}
    for obj, rec in by.get("inreceptacle", []):
        if rec not in contents:
            raise NotExpressible(f"{obj} lies in {rec}, an object (objects inside objects are not modelled)")
        contents[rec].append(obj)
    for objs in contents.values():
        objs.sort(key=lambda o: ids.get(o, o))
    placed = {o for c in contents.values() for o in c}
    openable = {a[0] for a in by.get("openable", [])}
    opened = {a[0] for a in by.get("opened", [])}
    task_type, goal = goal_from_folder(task_folder)
    task = opening.split("Your task is to: ", 1)[1].strip() if "Your task is to: " in opening else ""
    return {"format": SCRIPTED_FORMAT, "task_type": task_type, "task": task,
            "receptacles": [{"name": r, "contents": contents[r], "openable": r in openable, "opened": r in opened,
                             "heats": _type(r) in HEATS, "cools": _type(r) in COOLS, "cleans": _type(r) in CLEANS}
                            for r in order],
            "toggleable": sorted(toggleable & placed),
            "fixed": sorted(placed - toggleable - pickable),
            "goal": goal, "expert_plan": list(walkthrough)}


def _spec_of(env: Any, obs: str, infos: dict[str, Any], game_file: Path) -> dict[str, Any]:
    walk = json_document(game_file, "an ALFWorld game file").get("walkthrough") or []
    ids = {info.name: key for key, info in getattr(env, "_entity_infos", {}).items()}
    return spec_from_state(obs, list(infos["facts"]), game_file.parent.parent.name, list(walk), ids)


def scripted_spec(game_file: Path) -> dict[str, Any]:
    """The scripted game standing for the real `game_file` (NotExpressible when it cannot)."""
    game_file = Path(game_file)
    env = _open_real(game_file, facts=True)
    try:
        obs, infos = env.reset()
        return _spec_of(env, obs, infos, game_file)
    finally:
        env.close()


@dataclass
class Agreement:
    """One game's comparison, step 0 being the reset."""
    game: str
    steps: int = 0
    admissible_set: int = 0      # steps whose admissible commands are the same set
    admissible_order: int = 0    # ... and in the same order
    observation: int = 0
    won: int = 0
    all_three: int = 0           # admissible set, observation and won together
    differences: list[dict[str, Any]] = field(default_factory=list)   # the first few, for the record

    def add(self, step: int, command: str | None, real: tuple[str, list[str], bool],
            scripted: tuple[str, list[str], bool]) -> None:
        same_set = set(real[1]) == set(scripted[1])
        same_obs, same_won = real[0] == scripted[0], real[2] == scripted[2]
        self.steps += 1
        self.admissible_set += same_set
        self.admissible_order += real[1] == scripted[1]
        self.observation += same_obs
        self.won += same_won
        self.all_three += same_set and same_obs and same_won
        if not (same_set and same_obs and same_won) and len(self.differences) < 3:
            diff: dict[str, Any] = {"step": step, "command": command}
            if not same_obs:
                diff["observation"] = {"real": real[0], "scripted": scripted[0]}
            if not same_set:
                diff["admissible_only_real"] = sorted(set(real[1]) - set(scripted[1]))[:8]
                diff["admissible_only_scripted"] = sorted(set(scripted[1]) - set(real[1]))[:8]
            if not same_won:
                diff["won"] = {"real": real[2], "scripted": scripted[2]}
            self.differences.append(diff)


def _text(obs: str) -> str:
    return obs.replace(WELCOME, "").strip()


_AT = re.compile(r"\(receptacleAtLocation\s+(\S+)\s+(\S+)\)")


def shared_places(game_file: Path) -> int:
    """How many places hold more than one receptacle, read from the PDDL problem's text (no game started)."""
    problem = json_document(Path(game_file), "an ALFWorld game file").get("pddl_problem") or ""
    places: dict[str, int] = {}
    for _rec, loc in _AT.findall(problem):
        places[loc] = places.get(loc, 0) + 1
    return sum(n > 1 for n in places.values())


def compare(game_file: Path) -> Agreement:
    """Play the stored walkthrough in both engines, the scripted game read from the real one's reset (see the
    module docstring); NotExpressible when the scripted engine cannot stand for the game (receptacles sharing a
    place are seen in the PDDL text first, without starting the game)."""
    game_file = Path(game_file)
    if shared_places(game_file):
        raise NotExpressible("receptacles at one place: going to one reaches the others")
    real = _open_real(game_file, facts=True)
    out = Agreement(game_file.parent.parent.name + "/" + game_file.parent.name)
    try:
        r_obs, r_info = real.reset()
        spec = _spec_of(real, r_obs, r_info, game_file)
        scripted = ScriptedGame(spec)
        s_obs, s_info = scripted.reset()
        out.add(0, None, (_text(r_obs), list(r_info["admissible_commands"]), bool(r_info["won"])),
                (_text(s_obs), s_info["admissible_commands"], s_info["won"]))
        for k, command in enumerate(spec["expert_plan"], start=1):
            r_obs, _score, _done, r_info = real.step(command)
            s_obs, _done, s_info = scripted.step(command)
            out.add(k, command, (_text(r_obs), list(r_info["admissible_commands"]), bool(r_info["won"])),
                    (_text(s_obs), s_info["admissible_commands"], s_info["won"]))
    finally:
        real.close()
    return out
