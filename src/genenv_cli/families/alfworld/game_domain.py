"""`alfworld-game`: whole ALFWorld games as multi-turn episodes (an environment), rewarded 1 when the game is won.

**Task** (`payload`): `{"task_type": "<one of ALFWorld's six>", "game": GAME, "max_steps": N}`, where GAME is a
path to a real game file (`game.tw-pddl`, played by alfworld's TextWorld environment, needing the alfworld
extra) or a scripted game written inline (the JSON object `families/alfworld/games.py` describes, played by the
project's own deterministic engine). `max_steps` caps the agent's turns (ALFWorld's official cap is 50).

**Episode**: the first observation is the `alfworld` suite's system prompt and the room with the task and the
AVAILABLE ACTIONS; each agent turn is parsed as the suite parses it (`ACTION: <command>`, matched to an
admissible command ignoring case and spacing), played in the game, and the game's answer comes back as the next
user message with the commands admissible now. The episode ends when the game is won (reward 1), or at
`max_steps` turns (`turn_cap`, reward 0), or when the next prompt would not fit the model (`context_overflow`).

**Why the prompts are not the evaluation protocol's, turn for turn.** `genenv evaluate --bench alfworld` rebuilds
every turn's prompt: the current observation carries the AVAILABLE ACTIONS and the earlier ones are shown without
theirs. A training episode is one token sequence the trainer scores as the sampler drew it (machinery/episodes.py),
so its conversation may only grow: a prompt that rewrites an earlier turn would have the trainer score tokens the
sampler never conditioned on, and the episode engine refuses it (`observation_ids`). Here every observation keeps
its command list, so the conversation only appends. The agent so trains on the evaluation's system prompt, the
game's own words and the same action format and parser, with longer histories than evaluation shows.

**Seeds**: built-in, a few scripted games written for the project (both splits); or `genenv init --seeds PATH`
with ALFWorld's training games: a `game.tw-pddl`, a folder of them (`json_2.1.1/train`, or the folder holding
it), or a JSON-lines file of this domain's own records (`{"id", "split", "shape", "task_type", "game",
"max_steps"}`, to choose games and caps). ALFWorld's 274 evaluation games are refused, by trial name, from any of
these. **The environment model** writes new scripted games: a JSON object in the scripted format, kept only when
it is well formed and its own expert plan wins it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import (
    Domain,
    DomainEpisode,
    EnvContext,
    Environment,
    Reject,
    SeedTask,
    Step,
    TaskVerdict,
    stats_lines,
)
from genenv_cli.domains.family import first_json_object
from genenv_cli.families.alfworld.benchmark import MAX_STEPS
from genenv_cli.families.alfworld.commands import parse_action, resolve
from genenv_cli.families.alfworld.domain import game_folder, refuse_evaluation_games
from genenv_cli.families.alfworld.game_files import collect_games
from genenv_cli.families.alfworld.games import ScriptedGame, TextWorldGame, check_scripted_spec
from genenv_cli.families.alfworld.prompt import SYSTEM_PROMPT, process_observation, user_turn

SHAPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep",
          "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep", "pick_two_obj_and_place")
NOTHING = "Nothing happens."

ENV_SYSTEM = """You write household text games for an agent to play. A game is one JSON object in this format:
{"format": "genenv-alfworld-scripted-1", "task_type": "<one of: """ + ", ".join(SHAPES) + """>",
"task": "<what the agent must do, e.g. put a clean mug in coffeemachine.>",
"receptacles": [{"name": "<type> <n>", "contents": ["<object type> <n>", ...], "openable": true|false,
"heats"|"cools"|"cleans": true}, ...], "toggleable": [<lamps>], "goal": {"object": "<type>", "receptacle": "<type>",
"state": "clean"|"hot"|"cool"|null, "count": 1}, "expert_plan": ["go to ...", "take ... from ...", ...]}
The expert plan must win the game. Write one new game like the example, with other rooms and objects, and
nothing else."""


def refuse_evaluation_game(source: Path, game: str) -> None:
    refuse_evaluation_games(source, [Path(game).parent])


class ALFWorldGameEnvironment(Environment):
    """One game: the agent's turns are played in it; its answers, with the commands admissible next, are the
    observations."""

    def __init__(self, domain: Any, payload: dict[str, Any]) -> None:
        super().__init__(domain, payload)
        game = payload["game"]
        self.game: Any = ScriptedGame(game) if isinstance(game, dict) else TextWorldGame(Path(game))
        obs, self.info = self.game.reset()
        self.opening = process_observation(obs, first=True)

    def first_messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM_PROMPT.format(max_steps=self.payload["max_steps"])},
                {"role": "user", "content": user_turn(self.opening, self.info["admissible_commands"], first=True)}]

    def step(self, action: str) -> Step:
        command = resolve(parse_action(action), self.info["admissible_commands"])
        obs, _done, self.info = self.game.step(command)
        if self.info["won"]:
            return Step(None, True, 1.0, TaskVerdict(1.0, 1.0, True, None))
        return Step(user_turn(process_observation(obs), self.info["admissible_commands"]), False)

    def close(self) -> None:
        close = getattr(self.game, "close", None)
        if callable(close):
            close()


class ALFWorldGameDomain(Domain):
    name = "alfworld-game"
    description = ("ALFWorld household games played whole: the agent acts turn by turn and is rewarded when the "
                   "game is won (a multi-turn domain).")
    shapes = SHAPES
    seed_file = "alfworld_game_seeds.jsonl"
    payload_keys = ("task_type", "game", "max_steps")
    seed_folders = True
    seed_format = ("an ALFWorld training game (game.tw-pddl, needs the alfworld extra), a folder of them "
                   "(json_2.1.1/train), or JSON lines of this domain's records; evaluation games are refused")
    code_modules = ("genenv_cli.families.alfworld.benchmark", "genenv_cli.families.alfworld.games")
    max_turns = MAX_STEPS

    # ------------------------------------------------------------ the agent's side: an episode per game

    def environment(self, payload: dict[str, Any]) -> Environment:
        return ALFWorldGameEnvironment(self, payload)

    def start_episode(self, payload: dict[str, Any], threshold: float = 1.0) -> DomainEpisode:
        turns = min(self.max_turns, int(payload["max_steps"]))
        return DomainEpisode(self.environment(payload), turns, self.name, threshold=threshold)

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        env = self.environment(payload)
        try:
            return env.first_messages()
        finally:
            env.close()

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        """A completion alone is the game's first move: 1 when that one action wins it."""
        env = self.environment(payload)
        try:
            step = env.step(completion)
        finally:
            env.close()
        if step.done:
            return TaskVerdict(1.0, 1.0, True, None)
        return TaskVerdict(0.0, 0.0, bool(parse_action(completion)), "the game is not won")

    def call_valid(self, observation: str) -> bool | None:
        """The game answers "Nothing happens." to a command it cannot carry out."""
        return not observation.startswith(NOTHING)

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        """None: a game is won by a plan of many actions, not by one answer given at every turn."""
        return None

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return "ACTION: inventory"  # never changes the room, so it never wins a game

    def render_task(self, payload: dict[str, Any]) -> str:
        if not isinstance(payload["game"], dict):
            raise ValueError("a real ALFWorld game file cannot be written out as the environment writes games")
        return json.dumps(payload["game"], ensure_ascii=False)

    # ------------------------------------------------------------ the environment's side: scripted games

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        example = ctx.parent["game"] if isinstance(ctx.parent.get("game"), dict) else self.seeds()[0].payload["game"]
        context = " ".join(stats_lines(ctx, "game", "a game it"))
        return [{"role": "system", "content": ENV_SYSTEM + ("\n" + context if context else "")},
                {"role": "user", "content": "Example game:\n" + json.dumps(example, ensure_ascii=False)
                 + "\n\nWrite one new game."}]

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        spec = first_json_object(text, "game")
        problem = self._game_problem(spec)
        if problem is not None:
            raise Reject(f"invalid: {problem}")
        steps = int(ctx.parent.get("max_steps", MAX_STEPS)) if isinstance(ctx.parent, dict) else MAX_STEPS
        return {"task_type": spec["task_type"], "game": spec, "max_steps": steps}, spec["task_type"]

    @staticmethod
    def _game_problem(spec: Any) -> str | None:
        """Why a scripted game cannot be a task (malformed, or its expert plan does not win it), else None."""
        try:
            check_scripted_spec(spec, "the game")
        except InputError as exc:
            return str(exc).split(" Expected the JSON object")[0]
        game = ScriptedGame(spec)
        for command in spec["expert_plan"]:
            if command not in game._info()["admissible_commands"]:
                return f"its expert plan's {command!r} is not admissible where the plan has led"
            game.step(command)
        return None if game._info()["won"] else "its expert plan does not win it"

    def check_payload(self, payload: Any) -> str | None:
        if not isinstance(payload, dict) or set(payload) != set(self.payload_keys):
            return f"expected an object with {', '.join(self.payload_keys)}"
        if payload["task_type"] not in SHAPES:
            return f"task_type {payload['task_type']!r} is not one of ALFWorld's six"
        steps = payload["max_steps"]
        if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= MAX_STEPS:
            return f"max_steps must be an integer from 1 to {MAX_STEPS}"
        game = payload["game"]
        if isinstance(game, dict):
            problem = self._game_problem(game)
            if problem is None and game["task_type"] != payload["task_type"]:
                problem = "task_type differs from the game's"
            return problem
        if not isinstance(game, str) or Path(game).name != "game.tw-pddl":
            return "game must be a scripted game (an object) or the path of a game.tw-pddl"
        try:
            refuse_evaluation_game(Path(game), game)
        except InputError as exc:
            return str(exc)
        return None

    def dedup_text(self, payload: dict[str, Any]) -> str:
        game = payload["game"]
        return json.dumps(game, sort_keys=True) if isinstance(game, dict) else str(game)

    def exact_key(self, payload: dict[str, Any]) -> str:
        return self.dedup_text(payload)

    # ------------------------------------------------------------ seeds: ALFWorld's training games

    def read_seeds(self, path: Path) -> list[SeedTask]:
        """Training games as tasks: a game file, a folder of them, or JSON lines of records; evaluation games are
        refused first. Ids are `alfworld-game-<task folder>/<trial>`."""
        path = Path(path)
        if path.suffix == ".jsonl":
            from genenv_cli.core.jsonio import json_lines
            from genenv_cli.core.sizecaps import SEEDS

            expected = '{"id", "split", "shape", "task_type", "game", "max_steps"}'
            seeds = []
            for where, r in json_lines(path, expected, SEEDS):
                missing = [k for k in ("id", "shape", *self.payload_keys) if not isinstance(r, dict) or k not in r]
                if missing:
                    raise InputError(f"{where}: missing {', '.join(missing)}; expected {expected}.")
                seeds.append(SeedTask(str(r["id"]), str(r.get("split", "")), str(r["shape"]),
                                      {k: r[k] for k in self.payload_keys}))
            for s in seeds:
                if isinstance(s.payload["game"], str):
                    refuse_evaluation_game(path, s.payload["game"])
            return self._checked(path, seeds)
        if path.is_dir():
            folder = game_folder(path)
            refs = [r for r in collect_games(folder) if r.kind == "textworld"]
            if not refs:
                raise InputError(f"--seeds {path}: no ALFWorld games in it (expected {self.seed_format}).")
        elif path.name == "game.tw-pddl":
            refs = [r for r in collect_games(path.parent) if r.path == path]
            if not refs:
                raise InputError(f"--seeds {path}: not a playable ALFWorld game (its task type is not known from "
                                 f"its folder's name, or it is not solvable).")
        else:
            raise InputError(f"{path}: expected {self.seed_format}.")
        refuse_evaluation_games(path, [r.path.parent for r in refs])
        seeds = [SeedTask(f"alfworld-game-{'/'.join(r.path.parent.parts[-2:])}", "", r.task_type,
                          {"task_type": r.task_type, "game": str(r.path.resolve()), "max_steps": MAX_STEPS})
                 for r in refs]
        return self._checked(path, seeds)

    def _checked(self, path: Path, seeds: list[SeedTask]) -> list[SeedTask]:
        for s in seeds:
            problem = self.check_payload(s.payload)
            if problem is not None:
                raise InputError(f"{path}: seed {s.id}: {problem}")
        return seeds

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        path = Path(path)
        if path.is_dir():
            folder = game_folder(path)
            return [(r.path, r.path.relative_to(folder).as_posix()) for r in collect_games(folder)
                    if r.kind == "textworld"]
        return [(path, path.name)]
