"""Game backends for the ALFWorld benchmark: one small interface, two implementations.

`GameBackend` is what the episode loop in `benchmark.py` talks to:

    reset() -> (observation, info)          info = {"admissible_commands": [str, ...], "won": bool}
    step(action) -> (observation, done, info)

1. `TextWorldGame` wraps ALFWorld's own TextWorld environment for an official `game.tw-pddl` file, as
   alfworld 0.4.2 builds it (alfworld/alfworld `scripts/alfworld-play-tw`,
   `alfworld/agents/environment/alfred_tw_env.py`): `textworld.start(gamefile, EnvInfos(won=True,
   admissible_commands=True), wrappers=[Filter, AlfredDemangler()])`. TextWorld's `PddlEnv.step` matches the
   command exactly (after `strip()`) against the admissible commands and answers "Nothing happens." to anything
   else; `done` is `won`. textworld and alfworld are imported only when such a game is opened, so the
   `genenv-cli[alfworld]` extra stays optional.
2. `ScriptedGame` is a tiny deterministic text game written for this project's tests, played from a JSON file
   (`game.scripted.json`, format below). It imitates ALFWorld 0.4.2's rules and wording (alfworld
   `alfworld/data/alfred.pddl` preconditions, `alfworld/data/alfred.twl2` feedback): receptacles you `go to`,
   `open`/`close`; one object held at a time (`take O from R` needs empty hands and an open receptacle,
   `move O to R` puts it down); `heat`/`cool`/`clean O with R` at a microwave/fridge/sinkbasin; `use O` turns a
   lamp on; `examine`, `look`, `inventory`, `help`; admissible commands sorted as PddlEnv sorts them; anything
   else gets "Nothing happens.". Every pickable object can be heated, cooled and cleaned (a simplification).

Scripted game file (`<split>/<task folder>/<trial>/game.scripted.json`), all names lower case "<type> <n>":

    {"format": "genenv-alfworld-scripted-1",
     "task_type": "pick_heat_then_place_in_recep",          # one of the six ALFWorld task types
     "task": "heat some egg and put it in diningtable.",    # shown as "Your task is to: ..."
     "receptacles": [{"name": "countertop 1", "contents": ["egg 1"]},
                     {"name": "microwave 1", "openable": true, "heats": true},   # or "cools" / "cleans"
                     {"name": "diningtable 1"}],
     "toggleable": ["desklamp 1"],                          # objects that `use` turns on (never picked up)
     "fixed": ["houseplant 1"],                             # optional: objects seen but never picked up
     "goal": {"object": "egg", "receptacle": "diningtable", "state": "hot", "count": 1},
     "expert_plan": ["go to countertop 1", "take egg 1 from countertop 1", ...]}

A goal is either a placement (`object` type, `receptacle` type, optional `state` clean/hot/cool, `count`
objects of that type in one receptacle of that type: ALFWorld's pick-and-place goals) or a light goal
(`{"object": "book", "light": "desklamp"}`: hold a book where a turned-on desklamp stands, ALFWorld's
look_at_obj_in_light goal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_document

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
NOTHING_HAPPENS = "Nothing happens."
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
SCRIPTED_FORMAT = "genenv-alfworld-scripted-1"
SCRIPTED_FILE = "game.scripted.json"
INSTALL_HINT = ("Install the extra with `pip install 'genenv-cli[alfworld]'` (alfworld 0.4.2), fetch the game "
                "files with `alfworld-download` (into $ALFWORLD_DATA, default ~/.cache/alfworld), and pass the "
                "folder holding json_2.1.1/ with --data PATH (or set ALFWORLD_DATA).")


class GameBackend(Protocol):
    """What the episode loop needs from a game."""

    def reset(self) -> tuple[str, dict[str, Any]]:
        """Start (or restart) the game: the first observation and {"admissible_commands", "won"}."""
        ...

    def step(self, action: str) -> tuple[str, bool, dict[str, Any]]:
        """Play one command: the game's feedback, whether the episode is over, and the same info keys."""
        ...


def english_list(items: list[str]) -> str:
    """TextWorld's list rendering in ALFWorld's grammar: "nothing", "a x", "a x, and a y", "a x, a y, and a z"."""
    items = [f"a {i}" for i in items]
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


def entity_type(name: str) -> str:
    """'desklamp 1' -> 'desklamp' (ALFWorld's demangled names are '<type> <n>')."""
    return re.sub(r"\s+\d+$", "", name.strip())


# ---------------------------------------------------------------------------------------------- scripted game

@dataclass
class _Receptacle:
    name: str
    openable: bool = False
    opened: bool = False
    contents: list[str] = field(default_factory=list)
    heats: bool = False
    cools: bool = False
    cleans: bool = False

    @property
    def visible(self) -> bool:
        return not self.openable or self.opened


_HELP = ("\nAvailable commands:\n  look:                             look around your current location\n"
         "  inventory:                        check your current inventory\n"
         "  go to (receptacle):               move to a receptacle\n"
         "  open (receptacle):                open a receptacle\n"
         "  close (receptacle):               close a receptacle\n"
         "  take (object) from (receptacle):  take an object from a receptacle\n"
         "  move (object) to (receptacle):    place an object in or on a receptacle\n"
         "  examine (something):              examine a receptacle or an object\n"
         "  use (object):                     use an object\n"
         "  heat (object) with (receptacle):  heat an object using a receptacle\n"
         "  clean (object) with (receptacle): clean an object using a receptacle\n"
         "  cool (object) with (receptacle):  cool an object using a receptacle\n")


def _bad(path: str, what: str) -> InputError:
    return InputError(f"{path}: not a valid scripted ALFWorld game ({what}). Expected the JSON object described "
                      f"in genenv_cli/families/alfworld/games.py: format {SCRIPTED_FORMAT!r}, task_type, task, "
                      f"receptacles, goal, expert_plan.")


def load_scripted_spec(path: Path) -> dict[str, Any]:
    """Read and check a `game.scripted.json` file; raises InputError naming the file and the problem."""
    return check_scripted_spec(json_document(path, "a scripted ALFWorld game (a JSON object)"), str(path))


# A scripted game's size caps (docs/domains.md, "alfworld-game"): checking a game plays its expert plan, each step
# listing the admissible commands over every receptacle, so unbounded a game of n receptacles and an n-step plan
# cost n^2. Within the caps one game checks in at most about 0.1 s, so a seed file in time linear in its size. ALFWorld's
# own games have at most a few dozen receptacles and an expert plan shorter than an episode's 50 steps.
MAX_RECEPTACLES = 100
MAX_NAMES = 1000          # receptacles and objects together
MAX_PLAN = 100            # commands of the expert plan
MAX_TEXT = 500            # characters of a name, a command or the task


def _check_sizes(spec: dict[str, Any], where: str) -> None:
    receps, plan = spec.get("receptacles"), spec.get("expert_plan")
    if isinstance(receps, list) and len(receps) > MAX_RECEPTACLES:
        raise _bad(where, f"{len(receps):,} receptacles; a scripted game has at most {MAX_RECEPTACLES}")
    if isinstance(plan, list) and len(plan) > MAX_PLAN:
        raise _bad(where, f"an expert plan of {len(plan):,} commands; a scripted game's has at most {MAX_PLAN}")
    names = 0
    for r in receps if isinstance(receps, list) else []:
        contents = r.get("contents", []) if isinstance(r, dict) else []
        names += 1 + (len(contents) if isinstance(contents, list) else 0)
        texts = [r.get("name") if isinstance(r, dict) else None, *(contents if isinstance(contents, list) else [])]
        if any(isinstance(t, str) and len(t) > MAX_TEXT for t in texts):
            raise _bad(where, f"a name longer than {MAX_TEXT} characters")
    if names > MAX_NAMES:
        raise _bad(where, f"{names:,} receptacles and objects; a scripted game has at most {MAX_NAMES}")
    texts = [spec.get("task"), *(plan if isinstance(plan, list) else [])]
    if any(isinstance(t, str) and len(t) > MAX_TEXT for t in texts):
        raise _bad(where, f"a task or command longer than {MAX_TEXT} characters")


def check_scripted_spec(spec: Any, where: str) -> dict[str, Any]:
    """`spec` when it is a well-formed scripted game within the size caps; raises InputError saying at `where`
    what is wrong."""
    if not isinstance(spec, dict):
        raise _bad(where, "the file is not a JSON object")
    _check_sizes(spec, where)
    if spec.get("format") != SCRIPTED_FORMAT:
        raise _bad(where, f"format is {spec.get('format')!r}")
    if spec.get("task_type") not in TASK_TYPES:
        raise _bad(where, f"task_type {spec.get('task_type')!r} is not one of {', '.join(TASK_TYPES)}")
    if not isinstance(spec.get("task"), str) or not spec["task"].strip():
        raise _bad(where, "task must be a non-empty string")
    receps = spec.get("receptacles")
    if not isinstance(receps, list) or not receps:
        raise _bad(where, "receptacles must be a non-empty list")
    names: set[str] = set()
    for k, r in enumerate(receps):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise _bad(where, f"receptacles[{k}] needs a name")
        if not isinstance(r.get("contents", []), list) or not all(isinstance(o, str) for o in r.get("contents", [])):
            raise _bad(where, f"receptacles[{k}].contents must be a list of object names")
        for n in [r["name"], *r.get("contents", [])]:
            if n in names:
                raise _bad(where, f"the name {n!r} is used twice")
            names.add(n)
    for key in ("toggleable", "fixed"):
        listed = spec.get(key, [])
        if not isinstance(listed, list) or not all(isinstance(t, str) and t in names for t in listed):
            raise _bad(where, f"{key} must list objects placed in the receptacles")
    goal = spec.get("goal")
    if not isinstance(goal, dict) or not isinstance(goal.get("object"), str):
        raise _bad(where, "goal needs an object type")
    if "light" in goal:
        if not isinstance(goal["light"], str):
            raise _bad(where, "goal.light must be an object type")
    else:
        if not isinstance(goal.get("receptacle"), str):
            raise _bad(where, "goal needs a receptacle type (or a light)")
        if goal.get("state") not in (None, "clean", "hot", "cool"):
            raise _bad(where, "goal.state must be clean, hot, cool or null")
        if not isinstance(goal.get("count", 1), int) or goal.get("count", 1) < 1:
            raise _bad(where, "goal.count must be a positive integer")
    plan = spec.get("expert_plan")
    if not isinstance(plan, list) or not plan or not all(isinstance(a, str) for a in plan):
        raise _bad(where, "expert_plan must be a non-empty list of commands")
    return spec


class ScriptedGame:
    """A deterministic household text game following ALFWorld's rules (see the module docstring)."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.expert_plan: list[str] = list(spec["expert_plan"])
        self.reset()

    @classmethod
    def from_file(cls, path: Path) -> ScriptedGame:
        return cls(load_scripted_spec(path))

    # state -------------------------------------------------------------------------------------------------
    def reset(self) -> tuple[str, dict[str, Any]]:
        self.receptacles = {r["name"]: _Receptacle(
            name=r["name"], openable=bool(r.get("openable", False)), opened=bool(r.get("opened", False)),
            contents=list(r.get("contents", [])), heats=bool(r.get("heats", False)),
            cools=bool(r.get("cools", False)), cleans=bool(r.get("cleans", False)))
            for r in self.spec["receptacles"]}
        self.toggleable = set(self.spec.get("toggleable", []))
        self.fixed = set(self.spec.get("fixed", []))
        self.toggled: set[str] = set()
        self.location: str | None = None
        self.held: str | None = None
        self.props: dict[str, set[str]] = {}   # object -> {"clean", "hot", "cool"}
        self.won = False
        obs = f"{WELCOME}\n\n{self._look()}\n\nYour task is to: {self.spec['task']}"
        return obs, self._info()

    def _info(self) -> dict[str, Any]:
        return {"admissible_commands": self._admissible(), "won": self.won}

    def _here(self) -> _Receptacle | None:
        return self.receptacles[self.location] if self.location else None

    def _admissible(self) -> list[str]:
        cmds = {"help", "inventory", "look"}
        for name in self.receptacles:
            if name != self.location:
                cmds.add(f"go to {name}")
        here = self._here()
        if self.held:
            cmds.add(f"examine {self.held}")
        if here is not None:
            cmds.add(f"examine {here.name}")
            if here.openable:
                cmds.add(f"close {here.name}" if here.opened else f"open {here.name}")
            for obj in here.contents:  # ALFWorld offers `examine` for the held object and the receptacle only
                if obj in self.toggleable:
                    cmds.add(f"use {obj}")
                if here.visible and self.held is None and obj not in self.toggleable and obj not in self.fixed:
                    cmds.add(f"take {obj} from {here.name}")
            if self.held:
                if here.visible:
                    cmds.add(f"move {self.held} to {here.name}")
                if here.heats:
                    cmds.add(f"heat {self.held} with {here.name}")
                if here.cools:
                    cmds.add(f"cool {self.held} with {here.name}")
                if here.cleans:
                    cmds.add(f"clean {self.held} with {here.name}")
        return sorted(cmds)

    # feedback ----------------------------------------------------------------------------------------------
    def _look(self) -> str:
        if self.location is None:
            return ("You are in the middle of a room. Looking quickly around you, you see "
                    f"{english_list(list(self.receptacles))}.")
        return f"You are facing the {self.location}. Next to it, you see nothing."

    def _examine_receptacle(self, r: _Receptacle) -> str:
        if r.openable and r.opened:
            return f"The {r.name} is open. In it, you see {english_list(r.contents)}."
        if r.openable:
            return f"The {r.name} is closed."
        return f"On the {r.name}, you see {english_list(r.contents)}."

    def _examine_object(self, o: str) -> str:
        p = self.props.get(o, set())
        if "clean" in p and "hot" in p:
            return f"This is a hot and clean {o}."
        if "clean" in p and "cool" in p:
            return f"This is a cool and clean {o}."
        if "hot" in p:
            return f"This is a hot {o}."
        if "clean" in p:
            return f"This is a clean {o}."
        if "cool" in p:
            return f"This is a cold {o}."
        if o in self.toggleable:
            return f"This {o} is {'on' if o in self.toggled else 'off'}."
        return f"There's nothing special about {o}."

    def _check_goal(self) -> bool:
        goal = self.spec["goal"]
        if "light" in goal:
            here = self._here()
            if here is None or self.held is None or entity_type(self.held) != goal["object"]:
                return False
            return any(o in self.toggled and entity_type(o) == goal["light"] for o in here.contents)
        state, need = goal.get("state"), goal.get("count", 1)
        for r in self.receptacles.values():
            if entity_type(r.name) != goal["receptacle"]:
                continue
            ok = [o for o in r.contents if entity_type(o) == goal["object"]
                  and (state is None or state in self.props.get(o, set()))]
            if len(ok) >= need:
                return True
        return False

    def step(self, action: str) -> tuple[str, bool, dict[str, Any]]:
        command = action.strip()
        if command not in self._admissible():
            return NOTHING_HAPPENS, self.won, self._info()
        here = self._here()
        if command == "look":
            obs = self._look()
        elif command == "help":
            obs = _HELP
        elif command == "inventory":
            obs = f"You are carrying: {english_list([self.held])}." if self.held else "You are not carrying anything."
        elif command.startswith("go to "):
            self.location = command[len("go to "):]
            obs = f"You arrive at {self.location}. {self._examine_receptacle(self.receptacles[self.location])}"
        elif command.startswith("open "):
            here.opened = True
            obs = f"You open the {here.name}. {self._examine_receptacle(here)}"
        elif command.startswith("close "):
            here.opened = False
            obs = f"You close the {here.name}."
        elif command.startswith("take "):
            obj = command[len("take "):-len(f" from {here.name}")]
            here.contents.remove(obj)
            self.held = obj
            obs = f"You pick up the {obj} from the {here.name}."
        elif command.startswith("move "):
            obj, self.held = self.held, None
            here.contents.append(obj)
            obs = f"You move the {obj} to the {here.name}."
        elif command.startswith("use "):
            obj = command[len("use "):]
            self.toggled.add(obj)   # ALFWorld's ToggleObject always leaves isToggled set
            obs = f"You turn on the {obj}."
        elif command.startswith("examine "):
            target = command[len("examine "):]
            obs = (self._examine_receptacle(self.receptacles[target]) if target in self.receptacles
                   else self._examine_object(target))
        else:  # heat / cool / clean <held> with <here>
            verb = command.split(" ", 1)[0]
            p = self.props.setdefault(self.held, set())
            if verb == "heat":
                p.discard("cool")
                p.add("hot")
            elif verb == "cool":
                p.discard("hot")
                p.add("cool")
            else:
                p.add("clean")
            obs = f"You {verb} the {self.held} using the {here.name}."
        self.won = self.won or self._check_goal()
        return obs, self.won, self._info()


# ------------------------------------------------------------------------------------------ TextWorld (real)

def require_alfworld() -> tuple[Any, Any, Any]:
    """(textworld, Filter, AlfredDemangler), or InputError with the install/download hint."""
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
        from textworld.envs.wrappers import Filter
    except ImportError as exc:
        raise InputError(f"ALFWorld game files need the alfworld package, which is not importable ({exc}). "
                         f"{INSTALL_HINT}") from exc
    return textworld, Filter, AlfredDemangler


def alfworld_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("alfworld")
    except Exception:  # noqa: BLE001 - not installed or broken metadata
        return None


class TextWorldGame:
    """An official ALFWorld `game.tw-pddl`, played in alfworld's TextWorld environment (text only)."""

    def __init__(self, game_file: Path, walkthrough: bool = False):
        textworld, Filter, AlfredDemangler = require_alfworld()
        extras = ["walkthrough"] if walkthrough else []
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=extras)
        self._env = textworld.start(str(game_file), infos, wrappers=[Filter, AlfredDemangler()])
        self.walkthrough: list[str] | None = None

    @staticmethod
    def _info(infos: dict[str, Any]) -> dict[str, Any]:
        return {"admissible_commands": list(infos.get("admissible_commands") or []),
                "won": bool(infos.get("won"))}

    def reset(self) -> tuple[str, dict[str, Any]]:
        obs, infos = self._env.reset()
        if infos.get("extra.walkthrough"):
            self.walkthrough = list(infos["extra.walkthrough"])
        return obs, self._info(infos)

    def step(self, action: str) -> tuple[str, bool, dict[str, Any]]:
        obs, _score, done, infos = self._env.step(action)
        return obs, bool(done), self._info(infos)

    def close(self) -> None:
        close = getattr(self._env, "close", None)
        if close is not None:
            close()
