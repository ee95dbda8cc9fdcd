"""`api-bank`: predict the next API call of an API-Bank dialogue, scored by the `api-bank` evaluation suite.

**Task** (`payload`): one API-Bank evaluation point in the release's own terms: `{"level": "level-1" | "level-2" |
"level-3", "dialogue": [turns as in the release's .jsonl files: {"role": "User"|"AI", "text"} or {"role": "API",
"api_name", "param_dict", "result"}], "k": index of the API turn to predict among the dialogue's API turns,
"apis": [API descriptions {"name", "description", "input_parameters", "output_parameters"}, as apis/*.py declare
them], "requirement": level 3's user requirement (level 3 only)}`. The shape is the level.

**Agent prompt and R_agent**: the `api-bank` suite's official protocol (`families/api_bank/`): the point is built
with the suite's own `_points_from_dialogue` and turned into its prompt by `point_sample` (API-call
instruction, the descriptions, the history); the answer `[ApiName(key='value')]` (or a `<tool_call>` block) is
judged by `APIBank.score` with each API's own correctness rule. Reward 1 when correct, else 0.

**Environment format**: one JSON object, a level-1 item: `{"apis": [API descriptions], "dialogue": [User/AI
turns, ..., the API turn to predict last: {"role": "API", "api_name", "param_dict"}]}` (earlier API turns may
carry a `result`). Generated items are level 1 (the descriptions are given); level-2/3 items come from seeds.

**Self-consistency** (`check_payload`): the descriptions are well formed (names unique, typed parameters), the
dialogue has User turns and the API turn to predict, every API the dialogue calls is described (ToolSearcher is
built in), every call's parameters are parameters of its API, with values of the declared type (ints and floats
as numbers or number text, as the tool manager converts them; lists as lists or list text), a generated call gives
every declared parameter; and -- the benchmark's own rule -- the expected call, written as an answer, is judged
correct by the suite's scorer.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import EnvContext, Reject, SeedTask
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.api_bank.apis import TOOL_SEARCHER_DOC, _catalog
from genenv_cli.families.api_bank.benchmark import point_sample
from genenv_cli.families.api_bank.release_files import (
    LEVELS,
    _layout,
    _points_from_dialogue,
    _read_dialogue,
    _read_level3,
)

TYPES = ("str", "int", "float", "bool", "list", "list(str)", "dict", "datetime")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

ENV_SYSTEM = """You write test items for an assistant that calls APIs, in the format of the API-Bank benchmark. \
An item is one JSON object with two keys:
"apis": a list of API descriptions, each {"name": "<ApiName>", "description": ..., "input_parameters": \
{"<param>": {"type": "str|int|float|bool|list", "description": ...}}, "output_parameters": {...}},
"dialogue": the conversation so far, a list of turns {"role": "User", "text": ...} or {"role": "AI", "text": ...}, \
ending with the API call the assistant should make next: {"role": "API", "api_name": "<ApiName>", "param_dict": \
{"<param>": "<value>", ...}}.
The last call must give every input parameter of its API, with values the user stated. Write the JSON object \
and nothing else."""


def _value_ok(value: Any, typ: str) -> bool:
    """A parameter value the tool manager would accept for a declared type (dialogue files write most values as
    text: "2" for an int, "['a', 'b']" for a list)."""
    if typ == "int":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and bool(_INT.match(value.strip())))
    if typ == "float":
        return (isinstance(value, int | float) and not isinstance(value, bool)) or (
            isinstance(value, str) and bool(_FLOAT.match(value.strip())))
    if typ == "bool":
        return isinstance(value, bool) or (isinstance(value, str) and value.strip() in ("True", "False", "true", "false"))
    if typ.startswith("list"):
        if isinstance(value, list):
            return True
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                return isinstance(ast.literal_eval(value.strip()[:2000]), list)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return False
        return False
    if typ == "str":
        return isinstance(value, str)
    return True


def gold_answer(payload: dict[str, Any]) -> str:
    """The expected call as an answer the suite reads (genenv's <tool_call> form; values exactly as the gold)."""
    call = _api_turns(payload["dialogue"])[payload["k"]]
    return "<tool_call>" + json.dumps({"name": call["api_name"], "arguments": call["param_dict"]},
                                      ensure_ascii=False) + "</tool_call>"


def _api_turns(dialogue: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in dialogue if t.get("role") == "API"]


class APIBankDomain(FamilyDomain):
    name = "api-bank"
    description = "API-Bank: the next API call of a dialogue (levels 1-3), scored by the api-bank suite's per-API rules."
    shapes = LEVELS
    benchmark = "api-bank"
    seed_file = "api_bank_seeds.jsonl"
    seed_folders = True
    env_system = ENV_SYSTEM
    seed_format = ("API-Bank's release files, as `genenv evaluate --bench api-bank --data PATH` reads them: a "
                   "dialogue .jsonl inside level-1-given-desc/ or level-2-toolsearcher/ (apis/ two levels up is "
                   "used when present), a level folder, the lv1-lv2-samples or api-bank folder, or "
                   "test-data/level-3.json")

    # ------------------------------------------------------------ suite bridge

    def sample(self, payload: dict[str, Any]) -> EvalSample:
        points = _points_from_dialogue(str(payload.get("id", "item")), payload["level"], payload["dialogue"])
        p = points[payload["k"]]
        p.requirement = payload.get("requirement")
        docs = {d["name"]: d for d in payload["apis"]}
        docs.setdefault("ToolSearcher", dict(TOOL_SEARCHER_DOC))
        return point_sample(p, docs, self.protocol)

    def valid(self, verdict: Any) -> bool:
        return isinstance(verdict.parsed, dict) and verdict.parsed.get("error") not in ("parse", "no_call", "extra_call")

    def read_seeds(self, path: Path) -> list[SeedTask]:
        """The suite's loader reads and checks the files (bad lines are named there); the dialogues are then read
        with the same functions to keep each point's whole dialogue as the payload. A dialogue file without API
        calls (the release has a few, one of them empty) is left out and listed (`seed_skipped_files`), as
        `evaluate` passes over it in a folder."""
        from genenv_cli.core.paths import cache_dir

        path = Path(path)
        lay = _layout(path)
        self.seed_skips = []
        self.seed_skipped_files = []
        dialogues: list[tuple[str, str, list[dict[str, Any]], str | None]] = []
        points = []
        for level in ("level-1", "level-2"):
            for f in lay.level_files.get(level, []):
                turns = _read_dialogue(f)
                if not _api_turns(turns):
                    self.seed_skipped_files.append((str(f), "no API calls in the dialogue"))
                    continue
                dialogues.append((f.stem, level, turns, None))
                points += _points_from_dialogue(f.stem, level, turns)
        if lay.level3 is not None:
            last: dict[str, Any] = {}
            for p in _read_level3(lay.level3):
                last[p.source] = p
                points.append(p)
            for name, p in last.items():
                dialogues.append((name, "level-3", [*p.history, p.call], p.requirement))
        if not dialogues:
            return []
        loaded = self.suite.load(data=path, split=None, version=None, protocol=self.protocol,
                                 cache_dir=cache_dir() / "benchmarks" / self.benchmark)
        docs, _, _ = _catalog(points, lay.apis_dir)
        by_id = {s.id: s for s in loaded.samples}
        out = []
        for name, level, turns, requirement in dialogues:
            used = list(dict.fromkeys(t["api_name"] for t in _api_turns(turns)))
            apis = [docs[a] for a in used if a in docs]
            for k in range(len(_api_turns(turns))):
                sid = f"{name}#{k}"
                if sid not in by_id:
                    continue
                payload: dict[str, Any] = {"level": level, "dialogue": turns, "k": k, "apis": apis}
                if requirement is not None:
                    payload["requirement"] = requirement
                problem = self.check_payload(payload)
                if problem:
                    self.seed_skips.append((sid, problem))
                else:
                    out.append(SeedTask(sid, "", level, payload))
        if not out and self.seed_skips:
            raise InputError(f"{path}: none of its {len(self.seed_skips)} API calls is a usable {self.name} task "
                             f"(e.g. {self.seed_skips[0][0]}: {self.seed_skips[0][1]}).")
        return out

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        """The dialogue files (and level-3 file) of the source; the API descriptions come once per import from
        `shared_seed_files`."""
        path = Path(path)
        if path.is_file():
            return [(path, f"{path.parent.name}/{path.name}" if path.suffix == ".jsonl" else path.name)]
        lay = _layout(path)
        files = [f for level in ("level-1", "level-2") for f in lay.level_files.get(level, [])]
        files += [lay.level3] if lay.level3 is not None else []
        return [(f, str(f.relative_to(path))) for f in files]

    def shared_seed_files(self, paths: list[Path], tasks: list[SeedTask]) -> list[tuple[Path, str]]:
        """The apis/*.py files that declare an API the imported tasks call (each once, whatever the number of
        dialogue files), as `apis/<file>`."""
        from genenv_cli.families.api_bank.apis import api_files

        used = {t["api_name"] for task in tasks for t in _api_turns(task.payload["dialogue"])}
        out: dict[str, Path] = {}
        for path in paths:
            apis_dir = _layout(Path(path)).apis_dir
            if apis_dir is None:
                continue
            for name, py in api_files(apis_dir).items():
                if name in used:
                    out.setdefault(f"apis/{py.name}", py)
        return [(py, rel) for rel, py in sorted(out.items())]

    # ------------------------------------------------------------ environment

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return gold_answer(payload)

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        """Another API with the same arguments (a mangled value may pass a lenient per-API rule)."""
        call = [t for t in payload["dialogue"] if t["role"] == "API"][payload["k"]]
        args = ", ".join(f"{k}='{v}'" for k, v in call["param_dict"].items())
        return f"[{call['api_name']}Other({args})]"

    def render_item(self, payload: dict[str, Any]) -> str:
        calls = _api_turns(payload["dialogue"])
        end = payload["dialogue"].index(calls[payload["k"]])
        shown = [{k: v for k, v in t.items() if k != "result"} if i == end else t
                 for i, t in enumerate(payload["dialogue"][:end + 1])]
        return json.dumps({"apis": payload["apis"], "dialogue": shown}, ensure_ascii=False)

    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        missing = [k for k in ("apis", "dialogue") if k not in obj]
        if missing:
            raise Reject(f"parse: the item has no {', '.join(missing)}")
        dialogue = obj["dialogue"]
        if not isinstance(dialogue, list) or not dialogue or not isinstance(dialogue[-1], dict) \
                or dialogue[-1].get("role") != "API":
            raise Reject("invalid: the dialogue must end with the API call to predict ({\"role\": \"API\", ...})")
        payload = {"level": "level-1", "dialogue": dialogue, "k": len(_api_turns(dialogue)) - 1, "apis": obj["apis"]}
        problem = self.check_payload(payload, generated=True)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, "level-1"

    # ------------------------------------------------------------ self-consistency

    def check_payload(self, payload: Any, generated: bool = False) -> str | None:
        if not isinstance(payload, dict):
            return "payload must be a JSON object"
        if payload.get("level") not in LEVELS:
            return f"level must be one of {', '.join(LEVELS)}"
        apis = payload.get("apis")
        if not isinstance(apis, list):
            return "apis must be a list of API descriptions"
        docs: dict[str, dict] = {}
        if problem := _api_docs_problem(apis, docs, generated):
            return problem
        docs.setdefault("ToolSearcher", TOOL_SEARCHER_DOC)
        dialogue = payload.get("dialogue")
        if not isinstance(dialogue, list) or not dialogue:
            return "dialogue must be a non-empty list of turns"
        if problem := _dialogue_problem(dialogue):
            return problem
        calls = _api_turns(dialogue)
        k = payload.get("k")
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(calls):
            return f"k must index one of the dialogue's {len(calls)} API turns"
        if payload["level"] != "level-3" and not any(t["role"] == "User" for t in dialogue[:dialogue.index(calls[k])]):
            return "the dialogue has no User turn before the call"
        if problem := _calls_problem(calls, docs, k, generated):
            return problem
        if payload["level"] == "level-3" and not isinstance(payload.get("requirement"), str):
            return "a level-3 item needs its \"requirement\""
        try:
            verdict = self.verdict(payload, gold_answer(payload))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            return f"the suite cannot build this item ({type(exc).__name__}: {exc})"
        if not verdict.correct:
            return f"the expected call fails the suite's own check: {verdict.reason}"
        return None

    def dedup_text(self, payload: dict[str, Any]) -> str:
        calls = _api_turns(payload["dialogue"])
        end = payload["dialogue"].index(calls[payload["k"]])
        text = [t["text"] for t in payload["dialogue"][:end] if t["role"] == "User"]
        return " ".join([payload.get("requirement") or "", *text, calls[payload["k"]]["api_name"]])


def _api_docs_problem(apis: list, docs: dict[str, dict], generated: bool) -> str | None:
    """What is wrong with a payload's API descriptions, or None; fills `docs` ({name: description}) on the way."""
    for i, d in enumerate(apis, 1):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not re.fullmatch(r"[A-Za-z_]\w*", d["name"]):
            return f"API description {i} needs a \"name\" that is an identifier"
        if d["name"] in docs:
            return f"API {d['name']} is described twice"
        params = d.get("input_parameters")
        if not isinstance(params, dict) or not all(
                isinstance(s, dict) and isinstance(s.get("type"), str) for s in params.values()):
            return f"{d['name']}: input_parameters must map each parameter to {{\"type\", \"description\"}}"
        if generated and any(s["type"] not in TYPES for s in params.values()):
            return f"{d['name']}: parameter types must be one of {', '.join(TYPES)}"
        if not isinstance(d.get("description", ""), str):
            return f"{d['name']}: description must be text"
        docs[d["name"]] = d
    return None


def _dialogue_problem(dialogue: list) -> str | None:
    """What is wrong with one of a dialogue's turns, or None."""
    for i, t in enumerate(dialogue, 1):
        role = t.get("role") if isinstance(t, dict) else None
        if role in ("User", "AI"):
            if not isinstance(t.get("text"), str) or not t["text"].strip():
                return f"turn {i}: a {role} turn needs a non-empty \"text\""
        elif role == "API":
            if not isinstance(t.get("api_name"), str) or not isinstance(t.get("param_dict"), dict):
                return f"turn {i}: an API turn needs \"api_name\" and an object \"param_dict\""
            if t.get("result") is not None and not isinstance(t["result"], dict):
                return f"turn {i}: \"result\" must be an object"
        else:
            return f"turn {i}: role must be User, AI or API"
    return None


def _calls_problem(calls: list[dict], docs: dict[str, dict], k: int, generated: bool) -> str | None:
    """Whether each API turn calls a described API with declared, well-typed parameters (and, in a generated item,
    whether the expected call, turn k, gives every parameter), or None."""
    for i, call in enumerate(calls):
        doc = docs.get(call["api_name"])
        if doc is None:
            return f"the dialogue calls {call['api_name']}, which no API description describes"
        params = doc.get("input_parameters", {})
        for key, value in call["param_dict"].items():
            if key not in params:
                return f"{call['api_name']} has no input parameter {key!r}"
            if not _value_ok(value, str(params[key].get("type"))):
                return f"{call['api_name']}.{key} is declared {params[key].get('type')}, got {json.dumps(value)[:40]}"
        if generated and i == k:
            left = [p for p in params if p not in call["param_dict"]]
            if left:
                return f"the expected call leaves out {call['api_name']}'s parameter(s) {', '.join(left)}"
    return None
