"""ALFWorld (text): household tasks played as multi-turn text games; success rate overall and per task type.

Data. The official games (alfworld/alfworld, fetched by `alfworld-download` into $ALFWORLD_DATA, default
~/.cache/alfworld) lie in `json_2.1.1/<split>/<task-type>-<obj>-<mrecep>-<recep>-<scene>/<trial>/` with
`traj_data.json` and `game.tw-pddl` (a JSON file: PDDL domain, problem, grammar, `solvable`, `walkthrough`).
Games are collected as alfworld 0.4.2's `AlfredTWEnv.collect_game_files`
(`alfworld/agents/environment/alfred_tw_env.py`) does: folders with a `traj_data.json`, not 'movable' or 'Sliced',
`task_type` one of the six below, a `game.tw-pddl` marked solvable. `valid_unseen` (the default split, the one
ReAct and the papers report; 134 games) and `valid_seen` are known. `--data` names the folder that holds
`json_2.1.1/` (or the split folder itself); without it ALFWORLD_DATA, then ~/.cache/alfworld, are tried. The
games are played by alfworld's TextWorld environment, so the `genenv-cli[alfworld]` extra (alfworld==0.4.2,
scores changed between releases) is needed; it is imported only then. A folder may instead hold a
`game.scripted.json`, a small game this project's tests play without alfworld (see `games.py`).
Task types (categories): pick_and_place_simple, look_at_obj_in_light, pick_clean_then_place_in_recep,
pick_heat_then_place_in_recep, pick_cool_then_place_in_recep, pick_two_obj_and_place.

Sample ids: the game file's path relative to the split folder, as AgentBench lists them
(`pick_and_place_simple-Pencil-None-Shelf-308/trial_T20190908_121952_610012/game.tw-pddl`); with the paper
protocol, `<that path>#step<k>`, k the 0-based index of the expert action.

Prompt (official protocol): this project's own zero-shot prompt with the admissible commands, in ReAct's
alfworld.ipynb loop (ReAct itself gives two worked examples of the task type and no command list; AgentBench's
prompt adds a one-shot example and ends an episode on an answer without "ACTION:": neither is what is done here).
A system message explains the game and the answer format; the first user turn is
"Here is your task.\\n" + the game's opening text without TextWorld's "-= Welcome ... =-" banner (ReAct strips it
the same way) + "\n\nAVAILABLE ACTIONS:\n" + the admissible commands, one per line (ALFWorld's TextWorld env
computes them each step). Each later user turn is the game's feedback to the last
command followed by the admissible commands; only the latest user turn keeps its list.
An episode ends when the game reports `won` (success, `"end": "done"` in the samples file) or after `max_steps`
agent turns (`evaluate.max_steps`, 50; ReAct's loop, `for i in range(1, 50)`, allows 49; `"end": "turn_cap"`), the
words a training episode's end has in rollouts.parquet;
`genenv evaluate` also ends it, as a failure, when its next prompt would not fit the model's context
(machinery/episodes.py, `"end": "context_overflow"`). Scored predictions whose actions run out before either end as
`"actions_ended"`.

Answer parser (one command per turn; commands.py): the text inside the first `<action>...</action>` if any; else
the rest of the first line that starts with "ACTION:"; else the first non-empty line. It is sent to the game as
ReAct sends the model's text, stripped of surrounding whitespace and nothing more (`evaluate.alfworld_commands =
"exact"`, the default): a command ALFWorld does not know, "Go to desk 1." among them, gets "Nothing happens." and
uses a turn. `evaluate.alfworld_commands = "lenient"` instead forgives case, a trailing ".", quotes and spacing
(commands.py says exactly what); the rule is recorded in the result's summary.

`score` for predictions files replays the episode: the output is a JSON list of commands, or one command per
non-empty line, each read as above (when some lines start with ">", only those: a ReAct-style log with the
observations between its "> command" lines replays as is); at most 50 are played; the game must report won.
Metrics: success rate (%) overall and per task type.

Paper protocol (GenEnv, arXiv 2512.19682, Table 1: "ALFWorld official validation set with multi-turn tasks
decomposed into single steps"). Each game's expert trajectory (the handcoded expert's `walkthrough` stored in
`game.tw-pddl` by `alfworld-generate`; else TextWorld's `extra.walkthrough`;
`expert_plan` for scripted games) is played once, every command checked admissible and the game won; step k
becomes one sample whose messages are the prompt above with the expert's history: user turns holding the real
observations, assistant turns "ACTION: <expert command>", the last user turn holding the current observation and
admissible commands. The prediction is parsed as above and must equal the expert's command after
lower-casing and collapsing whitespace. Reported: step accuracy (%) overall and per task type. The paper's
numbers for reference: GenEnv 7B 54.5, Qwen2.5-7B-Instruct 14.2.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import ConfigError, InputError
from genenv_cli.domains.base import END_DONE, END_TURN_CAP
from genenv_cli.evals.base import PROTOCOLS, Benchmark, Episode, EvalSample, LoadedData, PaperColumn, Verdict
from genenv_cli.evals.datasource import sha256_paths
from genenv_cli.families.alfworld.commands import (
    COMMAND_RULES,
    action_items,
    command_of,
    normalize,
    parse_action,
)
from genenv_cli.families.alfworld.game_files import GameRef, close_game, collect_games, has_games, open_game
from genenv_cli.families.alfworld.games import (
    INSTALL_HINT,
    TASK_TYPES,
    GameBackend,
    alfworld_version,
    require_alfworld,
)
from genenv_cli.families.alfworld.prompt import SYSTEM_PROMPT, process_observation, user_turn

MAX_STEPS = 50
SPLITS = ["valid_unseen", "valid_seen"]
VERSIONS = ["alfworld-0.4.2"]
PAPER_REFERENCE = {"GenEnv 7B": 54.5, "Qwen2.5-7B-Instruct": 14.2}


# ----------------------------------------------------------------------------------------------- benchmark

class ALFWorld(Benchmark):
    name = "alfworld"
    paper_column = PaperColumn(1, "ALFWorld", PAPER_REFERENCE)
    description = ("ALFWorld text games (alfworld 0.4.2): multi-turn household tasks, success rate on "
                   "valid_unseen (134 games) per task type")
    categories = list(TASK_TYPES)
    sources = [
        "`pip install 'genenv-cli[alfworld]'` then `alfworld-download` (game files from "
        "https://github.com/alfworld/alfworld/releases into $ALFWORLD_DATA, default ~/.cache/alfworld)",
        "--data PATH: the folder holding json_2.1.1/<split>/<task>/<trial>/game.tw-pddl (or the split folder)",
    ]
    splits = SPLITS
    versions = VERSIONS
    interactive = True
    engine_seconds = 300.0  # `score` loads the game and replays up to 50 commands: 3-5 s idle, a minute under load

    def __init__(self, max_steps: int = MAX_STEPS, commands: str = "exact"):
        self.max_steps = max_steps
        self.commands = commands  # how a turn's command is sent to the game (commands.COMMAND_RULES)

    def configure(self, cfg: Any, run_root: Path | None = None, domains: dict[str, Any] | None = None) -> None:
        rule = getattr(getattr(cfg, "evaluate", None), "alfworld_commands", "exact")
        if rule not in COMMAND_RULES:
            raise ConfigError(f"evaluate.alfworld_commands = {rule!r}: expected one of {', '.join(COMMAND_RULES)}")
        self.commands = rule

    # data ------------------------------------------------------------------------------------------------
    @staticmethod
    def _split_dir(base: Path, split: str, itself: bool) -> Path | None:
        """`base`/json_2.1.1/`split`, `base`/`split`, or (when `itself`) `base` when it holds games directly."""
        for cand in (base / "json_2.1.1" / split, base / split):
            if cand.is_dir():
                return cand
        if itself and base.is_dir() and has_games(base):
            return base
        return None

    def _find_split(self, data: Path | None, split: str) -> Path:
        tried: list[str] = []
        if data is not None:
            data = Path(data).expanduser()
            if not data.exists():
                raise InputError(f"--data {data}: no such file or folder. Expected the folder holding "
                                 f"json_2.1.1/{split}/ (alfworld-download writes it). {INSTALL_HINT}")
            found = self._split_dir(data, split, itself=True)
            if found is None:
                raise InputError(f"--data {data}: no ALFWorld games for split {split!r} in it (looked for "
                                 f"json_2.1.1/{split}/<task>/<trial>/game.tw-pddl with traj_data.json, or "
                                 f"game.scripted.json). {INSTALL_HINT}")
            return found
        bases = []
        if os.environ.get("ALFWORLD_DATA"):
            bases.append(("ALFWORLD_DATA", Path(os.environ["ALFWORLD_DATA"]).expanduser()))
        bases.append(("alfworld's default cache", Path("~/.cache/alfworld").expanduser()))
        for label, base in bases:
            found = self._split_dir(base, split, itself=False) if base.is_dir() else None
            if found is not None and has_games(found):
                return found
            tried.append(f"{label} {base}: no json_2.1.1/{split}")
        raise InputError(f"no ALFWorld game files found ({'; '.join(tried)}). The games cannot be downloaded "
                         f"by genenv itself. {INSTALL_HINT}")

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if protocol not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {protocol!r} for alfworld; expected one of {', '.join(PROTOCOLS)}")
        split = split or SPLITS[0]
        if version not in (None, *VERSIONS):
            raise ConfigError(f"unknown alfworld data version {version!r}; known: {', '.join(VERSIONS)}")
        split_dir = self._find_split(data, split)
        refs = collect_games(split_dir)
        if not refs:
            raise InputError(f"{split_dir}: no playable ALFWorld games in it (folders with traj_data.json and a "
                             f"solvable game.tw-pddl, or game.scripted.json). {INSTALL_HINT}")
        kinds = {r.kind for r in refs}
        if "textworld" in kinds:
            require_alfworld()
        if protocol == "official":
            for r in refs:
                if r.kind == "scripted":   # cheap: check the expert plan wins, so `gold` is a real solution
                    self._expert_run(r)
            samples = [self._episode_sample(r) for r in refs]
        else:
            samples = [s for r in refs for s in self._step_samples(r)]
        parts = []
        if "textworld" in kinds:
            parts.append(f"ALFWorld json_2.1.1/{split} game files (alfworld {alfworld_version() or '?'})")
        if "scripted" in kinds:
            parts.append(f"scripted games ({split})")
        files = [f for r in refs for f in r.files if f.exists()]
        return LoadedData(samples=samples, version=" + ".join(parts), source=str(split_dir),
                          fingerprint=sha256_paths(files))

    def _system(self, max_steps: int | None = None) -> dict[str, str]:
        return {"role": "system", "content": SYSTEM_PROMPT.format(max_steps=max_steps or self.max_steps)}

    def _episode_sample(self, ref: GameRef) -> EvalSample:
        return EvalSample(id=ref.id, category=ref.task_type, messages=[self._system()], gold=ref.expert_plan,
                          meta={"protocol": "official", "game": str(ref.path), "kind": ref.kind,
                                "max_steps": self.max_steps,
                                "note": "interactive: observations come from the game in run_episode"})

    def _expert_run(self, ref: GameRef) -> list[tuple[str, list[str], str]]:
        """Play the expert trajectory once: [(observation shown, admissible commands, expert command), ...]."""
        game = open_game(ref.kind, ref.path, walkthrough=ref.expert_plan is None)
        try:
            obs, info = game.reset()
            plan = ref.expert_plan or getattr(game, "walkthrough", None)
            if not plan:
                raise InputError(f"{ref.path}: the game has no expert walkthrough; the paper protocol needs one "
                                 f"(alfworld-download's json_2.1.2 tw-pddl files carry it).")
            steps = []
            shown = process_observation(obs, first=True)
            for k, command in enumerate(plan):
                admissible = info["admissible_commands"]
                if command not in admissible:
                    raise InputError(f"{ref.path}: expert step {k} {command!r} is not an admissible command "
                                     f"there (admissible: {', '.join(admissible)}).")
                steps.append((shown, list(admissible), command))
                obs, _done, info = game.step(command)
                shown = process_observation(obs)
        finally:
            close_game(game)
        if not info["won"]:
            raise InputError(f"{ref.path}: the expert trajectory ({len(plan)} steps) does not win the game.")
        return steps

    def _step_samples(self, ref: GameRef) -> list[EvalSample]:
        steps = self._expert_run(ref)
        return [self.step_sample(f"{ref.id}#step{k}", ref.task_type, [s[0] for s in steps[:k + 1]],
                                 [s[2] for s in steps[:k]], admissible, command,
                                 game=str(ref.path), kind=ref.kind, game_id=ref.id, steps=len(steps))
                for k, (_obs, admissible, command) in enumerate(steps)]

    def step_sample(self, sample_id: str, task_type: str, shown: list[str], actions: list[str],
                    admissible: list[str], gold: str, steps: int | None = None, **meta: Any) -> EvalSample:
        """One paper-protocol step: `shown[j]` is the observation before expert action `actions[j]`, `shown[-1]`
        the current one (len(shown) == len(actions) + 1), `admissible` the commands offered now, `gold` the
        expert's next command. Also builds the `alfworld` training domain's items (families/alfworld/domain.py)."""
        k = len(actions)
        messages = [self._system()]
        for j in range(k):
            messages.append({"role": "user", "content": user_turn(shown[j], None, first=j == 0)})
            messages.append({"role": "assistant", "content": f"ACTION: {actions[j]}"})
        messages.append({"role": "user", "content": user_turn(shown[k], admissible, first=k == 0)})
        info: dict[str, Any] = {"protocol": "paper", **meta, "step": k}
        if steps is not None:
            info["steps"] = steps
        info["admissible_commands"] = list(admissible)
        return EvalSample(id=sample_id, category=task_type, messages=messages, gold=gold, meta=info)

    # scoring ---------------------------------------------------------------------------------------------
    def _check_protocol(self, sample: EvalSample, protocol: str) -> None:
        if protocol not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {protocol!r} for alfworld; expected one of {', '.join(PROTOCOLS)}")
        have = sample.meta.get("protocol", "official")
        if have != protocol:
            raise ConfigError(f"sample {sample.id} was loaded with the {have} protocol, scored with {protocol}")

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        self._check_protocol(sample, protocol)
        if protocol == "paper":
            action = parse_action(output)
            if not action:
                return Verdict(False, parsed=action, reason="no action in the output",
                               scores={"correct": 0.0})
            ok = normalize(action) == normalize(sample.gold)
            return Verdict(ok, parsed=action, reason="" if ok else f"expected {sample.gold!r}, got {action!r}",
                           scores={"correct": float(ok)})
        items = action_items(output)
        game = open_game(sample.meta["kind"], Path(sample.meta["game"]))
        played: list[str] = []
        limit = int(sample.meta.get("max_steps", self.max_steps))
        try:
            _obs, info = game.reset()
            for item in items[:limit]:  # only the actions played are read
                command = command_of(item, self.commands, info["admissible_commands"])
                played.append(command)
                _obs, _done, info = game.step(command)
                if info["won"]:
                    break
        finally:
            close_game(game)
        return self._episode_verdict(info["won"], played, len(items), limit)

    @staticmethod
    def _episode_verdict(won: bool, played: list[str], given: int | None, limit: int) -> Verdict:
        steps = len(played)
        end = END_DONE if won else END_TURN_CAP if steps >= limit else "actions_ended"
        if won:
            reason = ""
        elif given is not None and given > limit and steps >= limit:
            reason = f"not won within the {limit}-step limit ({given} actions given)"
        elif steps >= limit:
            reason = f"not won within the {limit}-step limit"
        else:
            reason = f"the actions ended after {steps} steps before the task was done"
        return Verdict(bool(won), parsed=played, reason=reason,
                       scores={"won": float(bool(won)), "steps": float(steps)}, end=end)

    def start_episode(self, sample: EvalSample, max_steps: int = MAX_STEPS) -> Episode:
        """A game of `sample`, stepped from outside (base.Episode), the messages built as the module docstring
        says. A paper-protocol sample is one turn: its messages are asked once and the answer scored."""
        if sample.meta.get("protocol") == "paper":
            return _OneTurn(self, sample)
        return _GameEpisode(self, sample, max_steps)

    def run_episode(self, sample: EvalSample, act: Callable[[list[dict[str, str]]], str],
                    max_steps: int = MAX_STEPS) -> tuple[list[dict[str, str]], Verdict]:
        """Play one game with `act(messages) -> text` (see start_episode)."""
        return super().run_episode(sample, act, max_steps)

    # summary ---------------------------------------------------------------------------------------------
    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        metric = "success_rate" if protocol == "official" else "accuracy"
        count = "won" if protocol == "official" else "correct"
        tally: dict[str, list[int]] = {}
        for s, v in zip(samples, verdicts, strict=True):
            t = tally.setdefault(s.category, [0, 0])
            t[0] += int(bool(v.correct))
            t[1] += 1
        ok = sum(t[0] for t in tally.values())
        n = sum(t[1] for t in tally.values())

        def block(k: int, m: int) -> dict[str, Any]:
            return {metric: 100.0 * k / m if m else 0.0, count: k, "n": m}

        order = [c for c in TASK_TYPES if c in tally] + sorted(c for c in tally if c not in TASK_TYPES)
        out: dict[str, Any] = {"overall": block(ok, n), "categories": {c: block(*tally[c]) for c in order}}
        if protocol == "paper":
            out["overall"]["games"] = len({s.meta.get("game_id", s.id.split("#")[0]) for s in samples})
            out["paper_reference"] = dict(PAPER_REFERENCE)
            out["decomposition"] = ("each expert step of each game is one sample: the expert's history given, "
                                    "the next command scored by exact match (case and spacing ignored)")
        else:
            out["max_steps"] = self.max_steps
            out["commands"] = self.commands
        return out


# ------------------------------------------------------------------------------------------------- episodes

class _GameEpisode(Episode):
    """An official-protocol game: each agent turn sees the history (earlier observations without their command
    lists, its own raw answers) and the current observation with the admissible commands. Over when the game
    is won, after `max_steps` turns, or when stopped from outside (its verdict then says why)."""

    def __init__(self, bench: ALFWorld, sample: EvalSample, max_steps: int):
        self.bench, self.max_steps = bench, max_steps
        self.game: GameBackend | None = open_game(sample.meta["kind"], Path(sample.meta["game"]))
        try:
            obs, self.info = self.game.reset()
        except BaseException:
            self.close()
            raise
        self.history: list[tuple[str, str]] = []     # (observation shown, raw agent output)
        self.shown = process_observation(obs, first=True)
        self.played: list[str] = []
        self.stopped: tuple[str, str] | None = None  # (end, reason)

    @property
    def over(self) -> bool:
        return self.stopped is not None or bool(self.info["won"]) or len(self.played) >= self.max_steps

    def _messages(self, current: str, admissible: list[str] | None) -> list[dict[str, str]]:
        msgs = [self.bench._system(self.max_steps)]
        for j, (o, out) in enumerate(self.history):
            msgs.append({"role": "user", "content": user_turn(o, None, first=j == 0)})
            msgs.append({"role": "assistant", "content": out})
        msgs.append({"role": "user", "content": user_turn(current, admissible, first=not self.history)})
        return msgs

    def prompt(self) -> list[dict[str, str]] | None:
        return None if self.over else self._messages(self.shown, self.info["admissible_commands"])

    def advance(self, output: str) -> None:
        if self.over or self.game is None:
            raise RuntimeError("advance() on an episode that is over")
        command = command_of(output, self.bench.commands, self.info["admissible_commands"])
        self.played.append(command)
        obs, _done, self.info = self.game.step(command)
        self.history.append((self.shown, output))
        self.shown = process_observation(obs)
        if self.over:
            self.close()

    def stop(self, end: str, reason: str) -> None:
        self.stopped = (end, reason)
        self.close()

    def result(self) -> tuple[list[dict[str, str]], Verdict]:
        transcript = self._messages(self.shown, None)
        if self.stopped is not None and not self.info["won"]:
            end, reason = self.stopped
            return transcript, Verdict(False, parsed=list(self.played), reason=reason,
                                       scores={"won": 0.0, "steps": float(len(self.played))}, end=end)
        return transcript, self.bench._episode_verdict(self.info["won"], self.played, None, self.max_steps)

    def close(self) -> None:
        if self.game is not None:
            game, self.game = self.game, None
            close_game(game)


class _OneTurn(Episode):
    """A paper-protocol step: one turn, the sample's own messages, the answer scored against the expert's."""

    def __init__(self, bench: ALFWorld, sample: EvalSample):
        self.bench, self.sample = bench, sample
        self.output: str | None = None
        self.stopped: tuple[str, str] | None = None

    def prompt(self) -> list[dict[str, str]] | None:
        if self.output is not None or self.stopped is not None:
            return None
        return [dict(m) for m in self.sample.messages]

    def advance(self, output: str) -> None:
        self.output = output

    def stop(self, end: str, reason: str) -> None:
        self.stopped = (end, reason)

    def result(self) -> tuple[list[dict[str, str]], Verdict]:
        if self.output is None:
            end, reason = self.stopped or ("no_answer", "no answer was given")
            return list(self.sample.messages), Verdict(False, parsed="", reason=reason, scores={"correct": 0.0},
                                                       end=end)
        verdict = self.bench.score(self.sample, self.output, "paper")
        return [*self.sample.messages, {"role": "assistant", "content": self.output}], verdict
