"""ALFWorld's game files: finding the playable games under a split folder (`collect_games`, as alfworld's own
collector does), and opening and closing one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.core.jsonio import json_document
from genenv_cli.families.alfworld.games import (
    SCRIPTED_FILE,
    TASK_TYPES,
    GameBackend,
    ScriptedGame,
    TextWorldGame,
    load_scripted_spec,
)


@dataclass
class GameRef:
    id: str                      # path relative to the split folder
    path: Path                   # the game file
    task_type: str
    kind: str                    # "scripted" | "textworld"
    expert_plan: list[str] | None
    files: list[Path]            # what the fingerprint covers


def _read_json(path: Path) -> Any:
    return json_document(path, "an ALFWorld data file (alfworld-download writes them)")


def has_games(folder: Path) -> bool:
    """Whether a folder holds any game (a scripted one or a `game.tw-pddl`) at any depth."""
    return any(folder.rglob(SCRIPTED_FILE)) or any(folder.rglob("game.tw-pddl"))


def folder_task_type(trial: Path) -> str | None:
    """The task type a trial folder's parent names (`pick_two_obj_and_place-CD-None-Safe-307`), or None."""
    head = trial.parent.name.split("-", 1)[0]
    return head if head in TASK_TYPES else None


def collect_games(split_dir: Path) -> list[GameRef]:
    """The playable games under a split folder, sorted by id (filters as AlfredTWEnv.collect_game_files; a
    `game.tw-pddl` without `traj_data.json` beside it, as in the training split's archive, takes its task type from
    its task folder's name, where alfworld's collector would skip it)."""
    refs: list[GameRef] = []
    for root, _dirs, files in os.walk(split_dir):
        folder = Path(root)
        if SCRIPTED_FILE in files:
            path = folder / SCRIPTED_FILE
            spec = load_scripted_spec(path)
            refs.append(GameRef(path.relative_to(split_dir).as_posix(), path, spec["task_type"], "scripted",
                                list(spec["expert_plan"]), [path]))
            continue
        if "traj_data.json" not in files and "game.tw-pddl" not in files:
            continue
        if "movable" in root or "Sliced" in root:
            continue
        task_type = folder_task_type(folder)
        if "traj_data.json" in files:
            traj = _read_json(folder / "traj_data.json")
            task_type = traj.get("task_type") if isinstance(traj, dict) else None
        if task_type not in TASK_TYPES:
            continue
        game_file = folder / "game.tw-pddl"
        if not game_file.exists():
            continue
        game = _read_json(game_file)
        if not isinstance(game, dict) or not game.get("solvable"):
            continue
        walk = game.get("walkthrough")
        plan = list(walk) if isinstance(walk, list) and all(isinstance(a, str) for a in walk) and walk else None
        refs.append(GameRef(game_file.relative_to(split_dir).as_posix(), game_file, task_type, "textworld", plan,
                            [game_file, folder / "traj_data.json"]))
    refs.sort(key=lambda r: r.id)
    return refs


def close_game(game: GameBackend) -> None:
    """Close a game whose backend has anything to close."""
    close = getattr(game, "close", None)
    if callable(close):
        close()


def open_game(kind: str, path: Path, walkthrough: bool = False) -> GameBackend:
    """A game of the given kind ("scripted" or "textworld") from its file."""
    if kind == "scripted":
        return ScriptedGame.from_file(path)
    return TextWorldGame(path, walkthrough=walkthrough)
