"""`alfworld`: the next action of an ALFWorld household game, given the trajectory so far (the paper's step
decomposition), scored by the `alfworld` evaluation suite's paper protocol.

**Task** (`payload`): one expert step, the parts the suite's step sample is built from (`ALFWorld.step_sample`),
one to one:

    {"task_type": "<one of ALFWorld's six>",        -> the sample's category
     "observation": "<the opening: room + 'Your task is to: ...'>",                    -> first user turn
     "trajectory": [{"action": "<command>", "observation": "<the game's answer>"}, ...] -> the turns between
     "admissible_commands": ["<command>", ...],     -> the last user turn's AVAILABLE ACTIONS (meta too)
     "action": "<the expert's next command>"}       -> gold

`trajectory[j].action` becomes the assistant turn "ACTION: <action>" and its `observation` the next user turn, as
the suite builds its history from the expert's run. Shapes are the task types, the categories the suite reports
accuracy by: they separate difficulty (published per-type success rates differ several-fold, and the two-object,
heat and cool games are the long ones), while prefix length mostly tracks position within one game and would let
the environment change an item's shape by cutting its prefix.

**Agent prompt and R_agent**: the suite's paper protocol: the system prompt, the history, the current observation
with the admissible commands; the answer `ACTION: <command>` is parsed by `parse_action` and must equal the gold
command ignoring case and spacing (reward 1, else 0). `valid`: some action was parsed.

**Self-consistency** (`check_payload`, seeds and generated items alike), by ALFWorld's rules: the task type is one
of the six; the opening states "Your task is to: ..." and the task's wording fits the type (ALFWorld's templates:
"two" for pick_two, a lamp or light for look_at_obj_in_light, clean/heat or hot/cool or cold for the state tasks,
none of these for pick_and_place_simple); every command (admissible, prefix, gold) has the form of an ALFWorld
0.4.2 command over "<type> <n>" names (`go to`, `open`, `close`, `take O from R`, `move O to R`, `examine`, `use`,
`heat/cool/clean/slice O with R`, `look`, `inventory`, `help`); the admissible commands are distinct (after the
suite's normalisation) and the gold action is one of them; the prefix is a list of action/observation pairs,
shorter than the suite's 50-step limit. Not checked: that the prefix could really be played in a game (the
commands' preconditions), that the observations are what ALFWorld would answer, or that the gold action is a good
move -- only that it is an available one.

**Seeds**: the built-in `data/alfworld_seeds.jsonl` (hand-written step items), or `genenv init --seeds PATH` with
an ALFWorld game file (`game.tw-pddl`, needing the alfworld extra, or the project's `game.scripted.json`) or a
folder of them: ALFWorld's training split, `json_2.1.1/train` (3,553 games; the folder holding `json_2.1.1/` is
taken too). The suite's loader plays each game's expert walkthrough in alfworld's TextWorld environment and each
expert step becomes one base task, with the real observations. The import refuses any game among ALFWorld's 274
evaluation games (valid_seen, valid_unseen; their trial names are listed in `data/alfworld_eval_games.json`), so
a run never trains on what `genenv evaluate --bench alfworld` scores.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import EnvContext, Reject, SeedTask
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.alfworld.benchmark import MAX_STEPS
from genenv_cli.families.alfworld.commands import normalize, resolve
from genenv_cli.families.alfworld.game_files import collect_games
from genenv_cli.families.alfworld.games import SCRIPTED_FILE, TASK_TYPES

SHAPES = TASK_TYPES
GAME_FILES = ("game.tw-pddl", SCRIPTED_FILE)
TASK_MARK = "Your task is to: "
MAX_ADMISSIBLE = 200
FIRST_TURN = "Here is your task.\n"
ACTIONS_HEADER = "\n\nAVAILABLE ACTIONS:\n"

_E = r"[a-z]+ \d+"   # an ALFWorld name after AlfredDemangler: "<type> <n>"
_COMMAND = re.compile(rf"look|inventory|help|go to {_E}|(?:open|close|examine|use) {_E}|take {_E} from {_E}"
                      rf"|move {_E} to {_E}|(?:heat|cool|clean|slice) {_E} with {_E}")
_MARKS = {  # the word that ALFWorld's task templates use for each type (pick_and_place_simple: none of them)
    "pick_two_obj_and_place": r"\btwo\b",
    "look_at_obj_in_light": r"lamp\b|\blight\b",
    "pick_clean_then_place_in_recep": r"\bclean\b",
    "pick_heat_then_place_in_recep": r"\b(?:heat|hot)\b",
    "pick_cool_then_place_in_recep": r"\b(?:cool|cold)\b",
}

ENV_SYSTEM = """You write test items for an agent that plays ALFWorld, the text household game. An item is one \
moment of a game: the opening text, the actions taken so far with the game's answers, the actions the game \
accepts now, and the best next action. Write one JSON object and nothing else:
{"task_type": "pick_and_place_simple | look_at_obj_in_light | pick_clean_then_place_in_recep | \
pick_heat_then_place_in_recep | pick_cool_then_place_in_recep | pick_two_obj_and_place",
"observation": "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a fridge 1, \
and a countertop 1.\\nYour task is to: <the task, worded to fit its type>",
"trajectory": [{"action": "<an action>", "observation": "<what the game answered>"}, ...],
"admissible_commands": ["<every action the game accepts now>", ...],
"action": "<the next action of an expert, one of admissible_commands>"}
Names are "<type> <n>" in lower case (mug 1, countertop 2). Actions: look, inventory, help, go to R, open R, \
close R, take O from R, move O to R, examine X, use O, heat O with R, cool O with R, clean O with R."""


def is_command(text: Any) -> bool:
    """Whether `text` has the form of an ALFWorld 0.4.2 command (the admissible commands' grammar)."""
    return isinstance(text, str) and _COMMAND.fullmatch(text) is not None


def task_text(observation: str) -> str | None:
    i = observation.find(TASK_MARK)
    return observation[i + len(TASK_MARK):].strip() if i >= 0 else None


def type_problem(task_type: str, task: str) -> str | None:
    """Why the task's wording does not fit its type under ALFWorld's templates, or None."""
    found = [t for t, pat in _MARKS.items() if re.search(pat, task.lower())]
    if task_type == "pick_and_place_simple":
        return None if not found else f"a pick_and_place_simple task does not say what a {found[0]} task says"
    if task_type not in found:
        return f"the task {task!r} is not worded as a {task_type} task"
    if len(found) > 1:
        return f"the task {task!r} is worded as more than one task type ({', '.join(found)})"
    return None


def _pair_problem(j: int, pair: Any) -> str | None:
    if not isinstance(pair, dict) or set(pair) != {"action", "observation"}:
        return f"trajectory[{j}] must be {{\"action\", \"observation\"}} (the prefix alternates action, observation)"
    if not is_command(pair["action"]):
        return f"trajectory[{j}].action {pair['action']!r} is not an ALFWorld command"
    if not isinstance(pair["observation"], str) or not pair["observation"].strip():
        return f"trajectory[{j}].observation must be the game's answer (a non-empty string)"
    return None


def payload_problem(p: Any) -> str | None:
    """Why `p` is not a self-consistent step item under ALFWorld's rules (module docstring), or None."""
    if not isinstance(p, dict):
        return "payload must be a JSON object"
    if p.get("task_type") not in TASK_TYPES:
        return f"task_type {p.get('task_type')!r} is not one of ALFWorld's: {', '.join(TASK_TYPES)}"
    obs = p.get("observation")
    task = task_text(obs) if isinstance(obs, str) else None
    if not task:
        return f"observation must be the game's opening, ending with \"{TASK_MARK}<task>\""
    problem = type_problem(p["task_type"], task)
    if problem:
        return problem
    traj = p.get("trajectory")
    if not isinstance(traj, list):
        return "trajectory must be a list of {\"action\", \"observation\"} pairs ([] at the first step)"
    if len(traj) >= MAX_STEPS:
        return f"the trajectory has {len(traj)} steps; ALFWorld episodes end at {MAX_STEPS}"
    for j, pair in enumerate(traj):
        problem = _pair_problem(j, pair)
        if problem:
            return problem
    adm = p.get("admissible_commands")
    if not isinstance(adm, list) or len(adm) < 2 or len(adm) > MAX_ADMISSIBLE:
        return f"admissible_commands must be a list of 2 to {MAX_ADMISSIBLE} commands"
    bad = [c for c in adm if not is_command(c)]
    if bad:
        return f"admissible command {bad[0]!r} is not an ALFWorld command"
    if len({normalize(c) for c in adm}) != len(adm):
        return "admissible_commands lists a command twice"
    gold = p.get("action")
    if not isinstance(gold, str) or normalize(gold) not in {normalize(c) for c in adm}:
        return f"the gold action {gold!r} is not one of the admissible commands"
    return None


EVAL_GAMES = Path(__file__).parent / "data" / "alfworld_eval_games.json"
TRAIN_SPLIT = ("json_2.1.1", "train")


def evaluation_trials() -> dict[str, str]:
    """ALFWorld's evaluation games by trial folder name (`trial_T20190909_044715_250790`) -> "<split>/<task>/<trial>".
    Trial names are ALFRED's recording times, unique across ALFWorld's splits."""
    listed = json.loads(EVAL_GAMES.read_text(encoding="utf-8"))["splits"]
    return {game.rsplit("/", 1)[1]: f"{split}/{game}" for split, games in listed.items() for game in games}


def refuse_evaluation_games(source: Path, trials: list[Path]) -> None:
    """InputError when any of the trial folders is one of ALFWorld's evaluation games."""
    known = evaluation_trials()
    hits = [known[t.name] for t in trials if t.name in known]
    if hits:
        raise InputError(f"--seeds {source}: {len(hits)} of its {len(trials)} games are ALFWorld evaluation games "
                         f"(first: {hits[0]}). Training seeds come from the training split (json_2.1.1/train), "
                         f"never from valid_seen or valid_unseen, which `genenv evaluate --bench alfworld` scores.")


def game_folder(path: Path) -> Path:
    """The folder of games a `--seeds` folder means: itself, or its json_2.1.1/train when it holds one."""
    inner = path.joinpath(*TRAIN_SPLIT)
    return inner if inner.is_dir() else path


class ALFWorldDomain(FamilyDomain):
    name = "alfworld"
    description = "ALFWorld: the next action of a household text game given the trajectory so far (paper protocol)."
    shapes = SHAPES
    benchmark = "alfworld"
    protocol = "paper"
    seed_file = "alfworld_seeds.jsonl"
    seed_folders = True
    env_system = ENV_SYSTEM
    seed_format = ("an ALFWorld game file, game.tw-pddl (alfworld-download's json_2.1.1/train/<task>/<trial>/, "
                   "needs the alfworld extra) or game.scripted.json, or a folder of them (json_2.1.1/train): each "
                   "step of a game's expert trajectory is a task; evaluation games are refused")

    # ------------------------------------------------------------ suite bridge

    def sample(self, payload: dict[str, Any]) -> EvalSample:
        traj = payload["trajectory"]
        shown = [payload["observation"], *(t["observation"] for t in traj)]
        return self.suite.step_sample(str(payload.get("id", "item")), payload["task_type"], shown,
                                      [t["action"] for t in traj], payload["admissible_commands"], payload["action"])

    def valid(self, verdict: Any) -> bool:
        return bool(verdict.parsed)

    def seed_from_sample(self, sample: EvalSample) -> SeedTask:
        """The inverse of `sample` on one of the suite's step samples (its messages read back)."""
        adm = list(sample.meta["admissible_commands"])
        turns = sample.messages[1:]
        shown = [m["content"] for m in turns[0::2]]
        shown[0] = shown[0].removeprefix(FIRST_TURN)
        shown[-1] = shown[-1].removesuffix(ACTIONS_HEADER + "\n".join(adm))
        actions = [m["content"].removeprefix("ACTION: ") for m in turns[1::2]]
        payload = {"task_type": sample.category, "observation": shown[0],
                   "trajectory": [{"action": a, "observation": o} for a, o in zip(actions, shown[1:], strict=True)],
                   "admissible_commands": adm, "action": sample.gold}
        return SeedTask(f"alfworld-{sample.id}", "", sample.category, payload)

    def read_seeds(self, path: Path) -> list[SeedTask]:
        """The suite's loader plays the game file's trial folder, or every game of a folder (bad files are named
        there, with the line); evaluation games are refused first. Ids are `alfworld-<task>/<trial>/<file>#step<k>`
        either way."""
        from genenv_cli.core.paths import cache_dir

        path = Path(path)
        if path.is_dir():
            folder = game_folder(path)
            refs = collect_games(folder)
            if not refs:
                raise InputError(f"--seeds {path}: no ALFWorld games in it (expected {self.seed_format}).")
            refuse_evaluation_games(path, [r.path.parent for r in refs])
            data, where = folder, ""
        elif path.name in GAME_FILES:
            refuse_evaluation_games(path, [path.parent])
            data, where = path.parent, f"{path.parent.parent.name}/{path.parent.name}/"  # unique across files
        else:
            raise InputError(f"{path}: expected {self.seed_format}.")
        loaded = self.suite.load(data=data, split=None, version=None, protocol=self.protocol,
                                 cache_dir=cache_dir() / "benchmarks" / self.benchmark)
        return self.checked_seeds(path, loaded.samples, lambda s: f"alfworld-{where}{s.id}", what="steps")

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        if path.is_dir():
            folder = game_folder(path)
            return [(f, f.relative_to(folder).as_posix()) for r in collect_games(folder) for f in r.files
                    if f.is_file()]
        traj = path.parent / "traj_data.json"
        return [(path, path.name)] + ([(traj, traj.name)] if path.name == "game.tw-pddl" and traj.is_file() else [])

    # ------------------------------------------------------------ environment

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return f"ACTION: {payload['action']}"

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return "ACTION: " + next(c for c in payload["admissible_commands"] if c != payload["action"])

    def render_item(self, payload: dict[str, Any]) -> str:
        keys = ("task_type", "observation", "trajectory", "admissible_commands", "action")
        return json.dumps({k: payload[k] for k in keys}, ensure_ascii=False)

    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        missing = [k for k in ("task_type", "observation", "trajectory", "admissible_commands", "action")
                   if k not in obj]
        if missing:
            raise Reject(f"parse: the item has no {', '.join(missing)}")
        payload = {"task_type": obj["task_type"], "observation": obj["observation"], "trajectory": obj["trajectory"],
                   "admissible_commands": obj["admissible_commands"], "action": obj["action"]}
        problem = self.check_payload(payload)
        if problem:
            raise Reject(f"invalid: {problem}")
        payload["action"] = resolve(payload["action"], payload["admissible_commands"])  # the game's own spelling
        return payload, payload["task_type"]

    def check_payload(self, payload: Any) -> str | None:
        return payload_problem(payload)

    def dedup_text(self, payload: dict[str, Any]) -> str:
        """The task, the current observation and the gold action: two steps of one game differ in the last two."""
        traj = payload["trajectory"]
        now = traj[-1]["observation"] if traj else ""
        return f"{task_text(payload['observation'])} | {now} | {payload['action']}"
