"""API-Bank (Li et al., EMNLP 2023): API-call accuracy on the level-1/2 dialogues (level 3 when given).

Official source followed: AlibabaResearch/DAMO-ConvAI, folder `api-bank/` — `evaluator.py` (samples and chat
prompt), `evaluator_by_json.py` (error kinds), `api_call_extraction.py` (the `[ApiName(key='value')]` form),
`tool_manager.py` (parameter typing), `apis/*.py` (the API docs and each API's `check_api_call_correctness`),
`lv3_evaluator.py` (level 3). Paper protocol: qiancheng0/ToolRL `benchmarks/API-Bank/evaluate.py`.

**Data.** `--data` may be the api-bank release folder (holding `lv1-lv2-samples/`, optionally `apis/` and
`test-data/level-3.json`), the `lv1-lv2-samples` folder, one level folder (`level-1-given-desc` -> level 1,
`level-2-toolsearcher` -> level 2, as `evaluator.py` decides by the folder name), one dialogue `.jsonl`, or
the level-3 file (`level-3.json`: a JSON list of `{"requirement", "response", "apis": [{"api_name", "input",
"output"}]}`). A dialogue file holds one JSON object per line: `{"role": "User"|"AI", "text"}` or
`{"role": "API", "api_name", "param_dict", "result": {"input", "output", "exception"}}`. Without `--data` the
files are downloaded once, file by file, from GitHub raw at a pinned commit (the folder listings come from the
GitHub contents API: three requests) plus `test-data/level-3.json` from the Hugging Face dataset
`liminghao1630/API-Bank` at a pinned revision, and cached under GENENV_CACHE; a marker file records a
complete download, so an interrupted one resumes. `--split` picks `level-1`, `level-2`, `level-3` or `all`.

**Samples and ids.** As `evaluator.py`'s `Sample.from_chat_history`: every API turn of a dialogue is one
evaluation point, with the dialogue before it as history. Id `<file name without .jsonl>#<k>`, k the 0-based
index of the API turn in its dialogue (ToolSearcher turns counted); level 3: `level-3-<i>#<k>`, i the 0-based
sample of `level-3.json`, k the index in its `apis` list (= `sample_id`/`api_id` of `lv3_evaluator.py`).

**Prompt (official).** `evaluator.py`'s chat layout: a system message with its API-call instruction (output
`[ApiName(key1='value1', key2='value2', ...)]`, "This year is 2023") followed by the API descriptions, one
JSON object per line (`{"name", "description", "input_parameters", "output_parameters"}`, as
`ToolManager.get_api_description`); then the history: User -> user, AI -> assistant, API -> a system
message `[ApiName(key='value', ...)] Response: <output>`. Level 1 describes every API the dialogue uses;
levels 2 and 3 describe only ToolSearcher (the model must search first). The descriptions are read from the
release's `apis/*.py` (parsed with `ast`, literal class attributes only, never imported); without that
folder, from ToolSearcher results seen in the data, else a stub naming the parameters the data uses. An API a
dialogue's own ToolSearcher call returned is described as that result describes it (level 3's APIs differ
from level 1/2's of the same name). `EvalSample.tools` holds the same APIs as OpenAI-style function schemas,
for export only: the descriptions are already in the system message.

**Answer parser (official).** `<think>...</think>` blocks are dropped. genenv's `<tool_call>{"name",
"arguments"}</tool_call>` form is read first (`parse_tool_calls`); otherwise the first `[Name(...)]` span
that parses as Python call syntax (`parse_python_calls`, literals only) — the span `get_api_call`'s regex
`\\[(\\w+)\\((.*)\\)\\]` finds. Exactly one call is expected: none -> "no_call", several -> "extra_call" (the
official regex would merge them into one call with unknown parameters, which fails).

**Scoring (official).** The official evaluator executes the API on its database and calls the API's own
`check_api_call_correctness(result, ground_truth_result)`. The API implementations (databases, a sentence
embedding model for ToolSearcher, web services) are not run here; the call is judged by its arguments, using
the rule each API's check applies to its inputs (its output being a deterministic function of them):
name equal; the set of parameter names equal to the gold `param_dict`'s (a missing one raises "missing
required positional argument", an unknown one "invalid parameter name"); each value equal after the tool
manager's typing (quoting does not matter: `room_count=2` == `room_count='2'`; values of int/float parameters
compare as numbers, others as text, `'007'` != `'7'`; list parameters compared as lists; strings stripped)
unless the API's check is more lenient, in which case its rule is applied (table `_RULES`): free-text
content/meeting topics pass when the word sets' Jaccard overlap is > 0.5 (lower-cased for reminders); names,
receivers, symptoms, stock codes, user ids and keywords compare case-insensitively; dates/times compare after
the check's `format_check` (zero-padded year, parsed with `%Y-%m-%d` / `%Y-%m-%d %H:%M:%S`);
QueryHistoryToday compares month-day only; Calculator formulas ignore spaces; scene devices compare as a set
by lower-cased name; values the check ignores are not compared (Delete* check only the time, RecordHealthData
ignores `health_data`). DeleteMeeting's official check reads a `time` key the API does not have (a KeyError
the evaluator counts as wrong); here its sibling DeleteAgenda's rule is applied to `start_time`.
Level 3 applies the level-3 APIs' checks (`lv3_apis/*.py`): exact inputs, except AddMeeting's topic (word
overlap), Calculator's formula (spaces) and EmailReminder's content (ignored).
ToolSearcher (judged officially by which tool the embedding search returns) passes when the keyword words
(camel case split, lower-cased) overlap the gold keywords' with Jaccard > 0.5, or contain every word of the
tool the gold search returned (`AddAgenda` -> "add agenda").
Metric: API-call accuracy per level and overall (micro over all API calls), as `evaluator.py` prints it.

**Paper protocol** (`protocol="paper"`, the ToolRL evaluation the GenEnv paper cites): ToolSearcher turns
are removed (as items and from the history); each remaining API call is one item, the tools offered are those
the dialogue's ToolSearcher calls returned plus any other API the dialogue calls (level 1: the dialogue's
APIs), listed as `N. Name: / Description: / Parameters:`; the
history is one user message (`<user>`, `<response>`, `<tool_call>` + `<obs>` lines) ending with "please only
make one tool call". The model answers `<think>..</think><tool_call>{"name", "parameters"}</tool_call>`.
As ToolRL's soft match, an item is correct when any parsed call has exactly the gold name and exactly equal
parameters (Python `==`: `"2"` != `2`; extra calls allowed); a JSON object without name/parameters is taken as
the parameters of the gold API (ToolRL does so). Differences: every `<tool_call>` block is read (ToolRL: the
last), "arguments" is accepted beside "parameters", and the `[Name(...)]` form is read when no JSON call is
found; ToolRL built its items from the Hugging Face JSON test files (399 / 67 / 131 items per level), these
come from the dialogue files (389 / 74 / 131 in the release). Accuracy per level and overall (micro over all
items). Paper's Table 1: GenEnv 7B 79.1, Qwen2.5-7B-Instruct 61.6.
"""

from __future__ import annotations

import ast
import contextlib
import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from genenv_cli.callparse import (
    MAX_SOURCE,
    Call,
    CallParseError,
    literal_value,
    load_json,
    parse_literal,
    parse_literal_source,  # noqa: F401 - importable from here, as before the split
    parse_python_calls,
    parse_tool_calls,
)
from genenv_cli.errors import InputError
from genenv_cli.evals import toolrl
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, Verdict
from genenv_cli.evals.datasource import no_data_error, sha256_paths, try_download
from genenv_cli.pools import json_lines, json_records

LEVELS = ("level-1", "level-2", "level-3")
LEVEL_DIRS = {"level-1": "level-1-given-desc", "level-2": "level-2-toolsearcher"}

REPO = "AlibabaResearch/DAMO-ConvAI"
COMMIT = "483554eae102996f5ec1f4feab4e78ef29c2a394"
HF_REPO = "liminghao1630/API-Bank"
HF_REVISION = "12e8158b7628c168f07e8f31fbbe3445e99f44cf"
VERSION = f"DAMO-ConvAI@{COMMIT[:7]} + HF {HF_REPO}@{HF_REVISION[:7]}"
_LIST_URL = "https://api.github.com/repos/{repo}/contents/{path}?ref={ref}"
_RAW_URL = "https://raw.githubusercontent.com/{repo}/{ref}/{path}"
_LEVEL3_URL = f"https://huggingface.co/datasets/{HF_REPO}/resolve/{HF_REVISION}/test-data/level-3.json"
_DOWNLOAD_DIRS = ("api-bank/lv1-lv2-samples/level-1-given-desc", "api-bank/lv1-lv2-samples/level-2-toolsearcher",
                  "api-bank/apis")

PAPER_REFERENCE = {"GenEnv 7B": 79.1, "Qwen2.5-7B-Instruct": 61.6}

# The official chat prompt (evaluator.py's api_call_prompt), followed by the API descriptions.
OFFICIAL_PROMPT = """Based on the given API description and the existing conversation history 1..t, please \
generate the API request that the AI should call in step t+1 and output it in the format of \
[ApiName(key1='value1', key2='value2', ...)], replace the ApiName with the actual API name, and replace the key \
and value with the actual parameters.
Your output should start with a square bracket "[" and end with a square bracket "]". Do not output any other \
explanation or prompt or the result of the API call in your output.
This year is 2023.
Input:
User: [User's utterence]
AI: [AI's utterence]

Expected output:
[ApiName(key1='value1', key2='value2', ...)]

API descriptions:
"""

# ToolRL's system prompt (tools listed, think / tool_call / response output format); {tools} is filled per item.
PAPER_SYSTEM = toolrl.system_prompt(
    "In your response, you can use the following tools:\n{tools}",
    """<think> Your thoughts and reasoning </think>
<tool_call>
{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter content", "... ...": "... ..."}}}}
{{"name": "... ...", "parameters": {{"... ...": "... ...", "... ...": "... ..."}}}}
...
</tool_call>
<response> AI's final response </response>""",
    """1. You must always include the `<think>` field to outline your reasoning. Provide at least one of \
`<tool_call>` or `<response>`. Decide whether to use `<tool_call>` (possibly multiple times), `<response>`, or both.
2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each tool call should be a JSON \
object with a "name" field and a "parameters" field containing a dictionary of parameters. If no parameters are \
needed, leave the "parameters" field an empty dictionary.
3. Refer to the previous dialogue records in the history, including the user's queries, previous `<tool_call>`, \
`<response>`, and any tool feedback noted as `<obs>` (if exists).""")

PAPER_FINAL_USER = "<user> Based on our conversation above, please only make one tool call to solve my need.</user>"

# ToolSearcher's interface (the search API levels 2 and 3 offer), used when no apis/ folder is given.
TOOL_SEARCHER_DOC = {
    "name": "ToolSearcher",
    "description": "Searches for relevant tools in library based on the keywords.",
    "input_parameters": {"keywords": {"type": "str", "description": "The keyword to search for."}},
    "output_parameters": {"best_matchs": {"type": "Union[List[dict], dict]",
                                          "description": "The best match tool(s)."}},
}

# Per-API value rules, from each API's check_api_call_correctness (apis/*.py). Default: "exact".
_RULES: dict[str, dict[str, str]] = {
    "AddAgenda": {"content": "words"},
    "ModifyAgenda": {"content": "words"},
    "QueryAgenda": {"content": "words"},
    "DeleteAgenda": {"content": "any", "location": "any"},
    "AddMeeting": {"meeting_topic": "words"},
    "ModifyMeeting": {"meeting_topic": "words"},
    "QueryMeeting": {"meeting_topic": "words"},
    "DeleteMeeting": {"meeting_topic": "any", "end_time": "any", "location": "any", "attendees": "any"},
    "AddReminder": {"content": "words_ci"},
    "ModifyReminder": {"content": "words_ci"},
    "QueryReminder": {"content": "words_ci"},
    "DeleteReminder": {"content": "any"},
    "AddScene": {"name": "ci", "devices": "devices"},
    "ModifyScene": {"name": "ci", "devices": "devices"},
    "DeleteScene": {"name": "ci"},
    "QueryScene": {"name": "ci"},
    "AppointmentRegistration": {"date": "date"},
    "QueryRegistration": {"date": "date"},
    "ModifyRegistration": {"new_appointment_date": "date"},
    "TimedSwitch": {"name": "ci", "time": "datetime"},
    "CancelTimedSwitch": {"name": "ci", "time": "datetime"},
    "Calculator": {"formula": "nospace"},
    "Dictionary": {"keyword": "ci_underscore"},
    "Wiki": {"keyword": "ci_underscore"},
    "PlayMusic": {"music_name": "ci"},
    "SearchEngine": {"keyword": "ci"},
    "EmergencyKnowledge": {"symptom": "ci"},
    "SymptomSearch": {"symptom": "ci"},
    "QueryHealthData": {"user_id": "ci", "start_time": "datetime", "end_time": "datetime"},
    "RecordHealthData": {"user_id": "ci", "time": "datetime", "health_data": "any"},
    "QueryStock": {"stock_code": "ci", "date": "date"},
    "QueryHistoryToday": {"date": "monthday"},
    "SendEmail": {"receiver": "ci"},
    "Translate": {"src_lang": "ci", "tgt_lang": "ci"},
    "ToolSearcher": {"keywords": "toolsearch"},
}
# Level 3 runs other API implementations (lv3_apis/*.py); their checks compare inputs exactly except these.
_RULES_LV3: dict[str, dict[str, str]] = {
    "AddMeeting": {"meeting_topic": "words"},
    "Calculator": {"formula": "nospace"},
    "EmailReminder": {"content": "any"},
    "ToolSearcher": {"keywords": "toolsearch"},
}


# ---------------------------------------------------------------- data reading

@dataclass
class _Point:
    """One API call to predict, with the dialogue before it."""
    id: str
    level: str
    source: str                      # dialogue file name (or level-3 sample)
    k: int                           # index of the API turn within its dialogue
    history: list[dict[str, Any]]    # official-format turns before the call
    call: dict[str, Any]             # the API turn itself
    dialogue_apis: list[str]         # APIs the whole dialogue uses, in order of first use
    found_docs: dict[str, dict[str, Any]]  # API docs the dialogue's ToolSearcher calls returned, in order
    requirement: str | None = None   # level 3: the user's requirement


@dataclass
class _Layout:
    level_files: dict[str, list[Path]] = field(default_factory=dict)
    level3: Path | None = None
    apis_dir: Path | None = None


def _level_of_folder(name: str) -> str | None:
    if name.endswith("given-desc") or name.startswith("level-1"):
        return "level-1"
    if "toolsearcher" in name or name.startswith("level-2"):
        return "level-2"
    return None


def _find_level3(*dirs: Path) -> Path | None:
    for d in dirs:
        for rel in ("test-data/level-3.json", "json_test_data/level-3.json", "level-3.json"):
            if (d / rel).is_file():
                return d / rel
    return None


def _layout(path: Path) -> _Layout:
    if not path.exists():
        raise InputError(f"api-bank data path {path} does not exist. Pass the api-bank release folder, its "
                         f"lv1-lv2-samples folder, one level folder, a dialogue .jsonl or level-3.json.")
    lay = _Layout()
    if path.is_file():
        if path.suffix == ".json":
            lay.level3 = path
        elif path.suffix == ".jsonl":
            level = _level_of_folder(path.parent.name)
            if level is None:
                raise InputError(f"{path}: cannot tell the API-Bank level of a dialogue in folder "
                                 f"`{path.parent.name}`; put it in `level-1-given-desc` or `level-2-toolsearcher`.")
            lay.level_files[level] = [path]
        else:
            raise InputError(f"{path}: expected a dialogue .jsonl, level-3.json or a folder of them.")
        return lay
    if (path / "lv1-lv2-samples").is_dir():
        root, samples = path, path / "lv1-lv2-samples"
    elif any(_level_of_folder(p.name) for p in path.iterdir() if p.is_dir()):
        root, samples = path.parent, path
    elif any(path.glob("*.jsonl")):
        level = _level_of_folder(path.name)
        if level is None:
            raise InputError(f"{path}: cannot tell the API-Bank level of this folder of dialogues; name it "
                             f"`level-1-given-desc` or `level-2-toolsearcher` as the official release does.")
        lay.level_files[level] = sorted(path.glob("*.jsonl"))
        lay.apis_dir = path.parent.parent / "apis" if (path.parent.parent / "apis").is_dir() else None
        return lay
    else:
        root, samples = path, path
    for sub in sorted(p for p in samples.iterdir() if p.is_dir()):
        level = _level_of_folder(sub.name)
        if level is not None:
            lay.level_files.setdefault(level, []).extend(sorted(sub.glob("*.jsonl")))
    lay.apis_dir = root / "apis" if (root / "apis").is_dir() else None
    lay.level3 = _find_level3(root, samples)
    if not lay.level_files and lay.level3 is None:
        raise InputError(f"{path}: no API-Bank data found. Expected the release layout "
                         f"(lv1-lv2-samples/level-1-given-desc/*.jsonl, lv1-lv2-samples/level-2-toolsearcher/"
                         f"*.jsonl, optionally apis/*.py and test-data/level-3.json).")
    return lay


def _read_dialogue(path: Path) -> list[dict[str, Any]]:
    turns = []
    for where, turn in json_lines(path, "one JSON object per line (an API-Bank dialogue)"):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role in ("User", "AI"):
            if not isinstance(turn.get("text"), str):
                raise InputError(f"{where}: a {role} turn needs a string `text`.")
        elif role == "API":
            if not isinstance(turn.get("api_name"), str) or not isinstance(turn.get("param_dict"), dict):
                raise InputError(f"{where}: an API turn needs a string `api_name` and an object `param_dict`.")
            if turn.get("result") is not None and not isinstance(turn["result"], dict):
                raise InputError(f"{where}: `result` of an API turn must be an object "
                                 f"(api_name, input, output, exception).")
        else:
            raise InputError(f"{where}: expected an object with role User, AI or API, got {str(turn)[:80]!r}.")
        turns.append(turn)
    return turns


def _found_tools(output: Any) -> list[dict[str, Any]]:
    """The API docs a ToolSearcher result holds (one dict or a list of them)."""
    items = output if isinstance(output, list) else [output]
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)]


def _doc_from_found(doc: dict[str, Any]) -> dict[str, Any]:
    return {"name": doc["name"], "description": doc.get("description", ""),
            "input_parameters": doc.get("input_parameters", {}), "output_parameters": doc.get("output_parameters", {})}


def _points_from_dialogue(name: str, level: str, turns: list[dict[str, Any]]) -> list[_Point]:
    apis: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    for t in turns:
        if t["role"] == "API":
            if t["api_name"] not in apis:
                apis.append(t["api_name"])
            if t["api_name"] == "ToolSearcher":
                for doc in _found_tools((t.get("result") or {}).get("output")):
                    found.setdefault(doc["name"], _doc_from_found(doc))
    points = []
    k = 0
    for i, t in enumerate(turns):
        if t["role"] == "API":
            points.append(_Point(f"{name}#{k}", level, name, k, turns[:i], t, apis, found))
            k += 1
    return points


def _read_level3(path: Path) -> list[_Point]:
    points = []
    for i, (_, item) in enumerate(json_records(path, "level-3 samples (requirement, response, apis)", array=True)):
        where = f"{path}, sample {i}"
        if not isinstance(item, dict) or not isinstance(item.get("requirement"), str) or not isinstance(
                item.get("apis"), list):
            raise InputError(f"{where}: expected an object with a string `requirement` and a list `apis`.")
        turns = []
        for j, api in enumerate(item["apis"]):
            if not isinstance(api, dict) or not isinstance(api.get("api_name"), str) or not isinstance(
                    api.get("input") or {}, dict):
                raise InputError(f"{where}, api {j}: expected an object with `api_name`, `input` and `output`.")
            result = api.get("output")
            if not (isinstance(result, dict) and "output" in result):
                result = {"output": result}
            turns.append({"role": "API", "api_name": api["api_name"], "param_dict": api.get("input") or {},
                          "result": result})
        name = f"level-3-{i}"
        for p in _points_from_dialogue(name, "level-3", turns):
            p.requirement = item["requirement"].strip()
            points.append(p)
    return points


# ---------------------------------------------------------------- API descriptions

def _literal(node: ast.AST) -> Any:
    """A class attribute of apis/*.py as data: a literal, strings possibly joined with `+` (never evaluated)."""
    return literal_value(node, concat=True)


def _docs_from_apis_dir(apis_dir: Path) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    docs: dict[str, dict[str, Any]] = {}
    files = []
    for py in sorted(apis_dir.glob("*.py")):
        if py.name in ("__init__.py", "api.py"):
            continue
        try:
            tree = ast.parse(py.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        files.append(py)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            attrs: dict[str, Any] = {}
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    key = stmt.targets[0].id
                    if key in ("description", "input_parameters", "output_parameters"):
                        with contextlib.suppress(CallParseError, RecursionError):
                            attrs[key] = _literal(stmt.value)
            if {"description", "input_parameters", "output_parameters"} <= set(attrs):
                docs[cls.name] = {"name": cls.name, "description": attrs["description"],
                                  "input_parameters": attrs["input_parameters"],
                                  "output_parameters": attrs["output_parameters"]}
    return docs, files


def _catalog(points: list[_Point], apis_dir: Path | None) -> tuple[dict[str, dict[str, Any]], list[Path], str]:
    docs: dict[str, dict[str, Any]] = {}
    files: list[Path] = []
    origin = "apis/ folder"
    if apis_dir is not None:
        docs, files = _docs_from_apis_dir(apis_dir)
    if not docs:
        origin = "reconstructed from the dialogues (no apis/ folder)"
    for p in points:  # ToolSearcher results carry full docs (level 2 and 3)
        for name, doc in p.found_docs.items():
            docs.setdefault(name, doc)
    docs.setdefault("ToolSearcher", dict(TOOL_SEARCHER_DOC))
    used: dict[str, dict[str, Any]] = {}
    for p in points:
        for t in [*p.history, p.call]:
            if t["role"] == "API":
                params = used.setdefault(t["api_name"], {})
                for key in t["param_dict"]:
                    params.setdefault(key, {"type": "str", "description": ""})
    for api, params in used.items():
        docs.setdefault(api, {"name": api, "description": "", "input_parameters": params, "output_parameters": {}})
    return docs, files, origin


_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
               "list(str)": "array"}


def _tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    props = {}
    for key, spec in (doc.get("input_parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        props[key] = {"type": _JSON_TYPES.get(str(spec.get("type")), "string"),
                      "description": str(spec.get("description", ""))}
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": list(props)}}}


# ---------------------------------------------------------------- prompts

def _call_text(name: str, params: dict[str, Any]) -> str:
    return "[{}({})]".format(name, ", ".join(f"{k}='{v}'" for k, v in params.items()))


def _result_output(turn: dict[str, Any]) -> Any:
    return (turn.get("result") or {}).get("output")


def _doc(p: _Point, docs: dict[str, dict[str, Any]], api: str) -> dict[str, Any]:
    """The doc of `api` as this dialogue's ToolSearcher returned it, else the catalog's (level 3 has its own
    APIs, some named like level-1/2 ones)."""
    return p.found_docs.get(api) or docs[api]


def _official_messages(p: _Point, docs: dict[str, dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    offered = list(p.dialogue_apis) if p.level == "level-1" else ["ToolSearcher"]
    desc = "\n".join(json.dumps(docs[a] if p.level == "level-1" else _doc(p, docs, a)) for a in offered)
    messages = [{"role": "system", "content": OFFICIAL_PROMPT + desc}]
    if p.requirement is not None:
        messages.append({"role": "user", "content": p.requirement})
    for t in p.history:
        if t["role"] == "User":
            messages.append({"role": "user", "content": t["text"]})
        elif t["role"] == "AI":
            messages.append({"role": "assistant", "content": t["text"]})
        else:
            messages.append({"role": "system", "content": "{} Response: {}".format(
                _call_text(t["api_name"], t["param_dict"]), str(_result_output(t)))})
    return messages, offered


def _paper_messages(p: _Point, docs: dict[str, dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    offered = [a for a in dict.fromkeys([*p.found_docs, *p.dialogue_apis]) if a != "ToolSearcher"]
    tools = "\n".join(f"{i}. Name: {a}\nDescription: {_doc(p, docs, a).get('description', '')}\n"
                      f"Parameters: {_doc(p, docs, a).get('input_parameters', {})}" for i, a in enumerate(offered, 1))
    lines = ["**Dialogue Records History**"]
    if p.requirement is not None:
        lines.append(f"<user>{p.requirement}</user>")
    for t in p.history:
        if t["role"] == "User":
            lines.append(f"<user>{t['text']}</user>")
        elif t["role"] == "AI":
            lines.append(f"<response>{t['text']}</response>\n")
        elif t["api_name"] != "ToolSearcher":
            call = json.dumps({"name": t["api_name"], "parameters": t["param_dict"]}, ensure_ascii=False)
            lines.append(f"<tool_call>\n{call}\n</tool_call>\n<obs> {_result_output(t)} </obs>")
    user = "\n".join(lines).rstrip("\n") + "\n\n" + PAPER_FINAL_USER + "\n"
    return [{"role": "system", "content": PAPER_SYSTEM.format(tools=tools)}, {"role": "user", "content": user}], offered


# ---------------------------------------------------------------- parsing model output

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_BRACKET_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


def _strip_think(text: str) -> str:
    return _THINK.sub("", text)


def _bracket_calls(text: str) -> list[Call]:
    """The first `[Name(...)]` span of the text that parses as Python call syntax ([] when none is present)."""
    starts = [m.start() for m in _BRACKET_START.finditer(text)]
    if not starts:
        return []
    budget = 4 * MAX_SOURCE  # characters handed to the parser in all: degenerate text costs bounded time
    for s in starts[:20]:
        ends = [i for i in range(len(text) - 1, s, -1) if text[i] == "]"][:50]
        for e in ends:
            budget -= e + 1 - s
            if budget < 0:
                break
            try:
                return parse_python_calls(text[s:e + 1])
            except CallParseError:
                continue
    raise CallParseError("an [ApiName(...)] call was found but could not be read as key=value literals")


def parse_official(output: str) -> list[Call]:
    """Calls in genenv's <tool_call> form, else the official [ApiName(key='value')] form."""
    text = _strip_think(output)
    calls = parse_tool_calls(text)
    if calls:
        return calls
    return _bracket_calls(text)


_TAG_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def parse_paper(output: str) -> list[dict[str, Any]]:
    """ToolRL's reading: JSON objects, one per line, inside <tool_call> (the whole text when no tag); each
    becomes {"name", "parameters"} or, lacking those keys, {"bare": obj} (ToolRL scores a bare object as the
    gold API's parameters). Falls back to the [Name(...)] form."""
    text = _strip_think(output)
    blocks = _TAG_BLOCK.findall(text) or [text]
    objs: list[Any] = []
    for block in blocks:
        block = block.strip()
        try:
            obj = load_json(block)
            objs.extend(obj if isinstance(obj, list) else [obj])
            continue
        except CallParseError:
            pass
        for line in block.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                obj = load_json(line)
            except CallParseError:
                continue
            objs.extend(obj if isinstance(obj, list) else [obj])
    calls: list[dict[str, Any]] = []
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        params = obj.get("parameters", obj.get("arguments"))
        if isinstance(params, str):
            with contextlib.suppress(CallParseError):
                params = load_json(params)
        if isinstance(obj.get("name"), str) and isinstance(params, dict):
            calls.append({"name": obj["name"], "parameters": params})
        else:
            calls.append({"bare": obj})
    if not any("name" in c for c in calls):
        with contextlib.suppress(CallParseError):
            calls.extend({"name": c.name, "parameters": c.arguments} for c in _bracket_calls(text))
    return calls


# ---------------------------------------------------------------- official value comparison

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _canon(value: Any, numeric: bool = False) -> Any:
    """The tool manager's view of a value: the `[Name(k=v)]` regex reads every value as text (quoted or not),
    list parameters are parsed, and only int/float parameters are converted to numbers."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return float(value) if numeric else str(value)
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "[{" and s[-1:] in "]}":
            try:  # bounded readers: a model's thousand brackets or signs stay a string, never a crash
                return _canon(load_json(s, "argument"))
            except CallParseError:
                try:
                    return _canon(parse_literal(s, "argument"))
                except CallParseError:
                    return s
        if numeric and _NUMBER.match(s):
            return float(s)
        return s
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else json.dumps(value) if isinstance(value, list | dict) else str(
        value).strip()


def _norm_date(value: Any, fmt: str) -> str | None:
    s = _text(value)
    parts = s.split("-")
    if len(parts) == 3 and len(parts[0]) != 4:
        parts[0] = parts[0].zfill(4)
        s = "-".join(parts)
    try:
        return _dt.datetime.strptime(s, fmt).strftime(fmt)
    except ValueError:
        return None


def _month_day(value: Any) -> str | None:
    """QueryHistoryToday's filter_date_format: month-day of `%Y-%m-%d` or `%m-%d`."""
    full = _norm_date(value, "%Y-%m-%d")
    if full is not None:
        return full[5:]
    try:
        return _dt.datetime.strptime(_text(value), "%m-%d").strftime("%m-%d")
    except ValueError:
        return None


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _kw_words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", _CAMEL.sub(" ", text).lower()))


def _devices(value: Any) -> Any:
    items = _canon(value)
    if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
        return items
    out = [{**d, "name": _text(d.get("name", "")).lower(), "description": _text(d.get("description", ""))}
           for d in items]
    return sorted(out, key=lambda d: d["name"])


def _value_ok(rule: str, gold: Any, pred: Any, gold_call: dict[str, Any], numeric: bool = False) -> bool:
    if rule == "any":
        return True
    if rule in ("words", "words_ci"):
        g, p = _text(gold), _text(pred)
        if rule == "words_ci":
            g, p = g.lower(), p.lower()
        return _jaccard(set(g.split(" ")), set(p.split(" "))) > 0.5
    if rule == "ci":
        return _text(gold).lower() == _text(pred).lower()
    if rule == "ci_underscore":
        return _text(gold).replace("_", " ").strip().lower() == _text(pred).replace("_", " ").strip().lower()
    if rule == "nospace":
        return _text(gold).replace(" ", "") == _text(pred).replace(" ", "")
    if rule in ("date", "datetime", "monthday"):
        norm = {"date": lambda v: _norm_date(v, "%Y-%m-%d"), "datetime": lambda v: _norm_date(v, "%Y-%m-%d %H:%M:%S"),
                "monthday": _month_day}[rule]
        g, p = norm(gold), norm(pred)
        if g is None:  # the gold itself is not in the format: compare as written
            return _canon(gold, numeric) == _canon(pred, numeric)
        return g == p
    if rule == "devices":
        return _devices(gold) == _devices(pred)
    if rule == "toolsearch":
        pw, gw = _kw_words(_text(pred)), _kw_words(_text(gold))
        if not pw:
            return False
        if gw and _jaccard(gw, pw) > 0.5:
            return True
        found = gold_call.get("retrieves") or []
        target = [n for n in found if n != "GetUserToken"] or found
        return bool(target) and _kw_words(target[-1]) <= pw
    return _canon(gold, numeric) == _canon(pred, numeric)


def check_official(gold: dict[str, Any], call: Call, level: str = "level-1",
                   types: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(error kind or None, reason) for one parsed call against the gold API call; `types` are the declared
    parameter types (int/float values compare as numbers, others as text)."""
    if call.name != gold["name"]:
        return "name", f"API name mismatch: {call.name} vs {gold['name']}"
    rules = (_RULES_LV3 if level == "level-3" else _RULES).get(gold["name"], {})
    g_args, p_args = gold["arguments"], call.arguments
    missing = [k for k in g_args if k not in p_args]
    if missing:
        return "missing", f"missing parameter(s) {', '.join(missing)}"
    unknown = [k for k in p_args if k not in g_args]
    if unknown:
        return "unknown", f"unexpected parameter(s) {', '.join(unknown)}"
    for key, g in g_args.items():
        numeric = (types or {}).get(key) in ("int", "float")
        if not _value_ok(rules.get(key, "exact"), g, p_args[key], gold, numeric):
            return "value", f"wrong value for {key}: {p_args[key]!r} (expected {g!r})"
    return None, ""


# ---------------------------------------------------------------- the benchmark

class APIBank(Benchmark):
    name = "api-bank"
    description = "API-Bank level-1/2 dialogues (level 3 when given): API-call accuracy per level"
    categories = list(LEVELS)
    sources = [
        f"GitHub {REPO} api-bank/lv1-lv2-samples and api-bank/apis at {COMMIT[:7]} (raw files, one by one)",
        f"Hugging Face dataset {HF_REPO} test-data/level-3.json at {HF_REVISION[:7]}",
        "--data PATH: the api-bank folder, lv1-lv2-samples, one level folder, a dialogue .jsonl or level-3.json",
    ]
    splits = ["all", *LEVELS]
    versions = [VERSION]

    # -- loading

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}.")
        split = split or "all"
        if split not in self.splits:
            raise InputError(f"api-bank has no split {split!r}; expected one of {', '.join(self.splits)}.")
        if version not in (None, VERSION):
            raise InputError(f"api-bank knows data version {VERSION!r} only (got {version!r}); pass other "
                             f"versions of the files with --data.")
        if data is not None:
            lay, source, ver = _layout(Path(data)), str(data), "local files"
        else:
            tried: list[str] = []
            root = self._download(cache_dir, tried)
            if root is None:
                raise no_data_error(self.name, self.sources, tried)
            lay, source, ver = _layout(root), f"{REPO}@{COMMIT[:7]} + {HF_REPO}@{HF_REVISION[:7]}", VERSION
        points: list[_Point] = []
        files: list[Path] = []
        for level in ("level-1", "level-2"):
            for path in lay.level_files.get(level, []):
                points.extend(_points_from_dialogue(path.stem, level, _read_dialogue(path)))
                files.append(path)
        if lay.level3 is not None:
            points.extend(_read_level3(lay.level3))
            files.append(lay.level3)
        docs, doc_files, origin = _catalog(points, lay.apis_dir)
        files.extend(doc_files)
        seen: set[str] = set()
        for p in points:
            if p.id in seen:
                raise InputError(f"{source}: two dialogues give the sample id {p.id!r}; dialogue file names "
                                 f"must be unique across levels.")
            seen.add(p.id)
        if split != "all":
            points = [p for p in points if p.level == split]
        if protocol == "paper":
            points = [p for p in points if p.call["api_name"] != "ToolSearcher"]
        if not points:
            raise InputError(f"{source}: no API calls to evaluate for split {split!r}.")
        samples = [self._sample(p, docs, protocol) for p in points]
        return LoadedData(samples=samples, version=f"{ver}; API docs: {origin}", source=source,
                          fingerprint=sha256_paths(files))

    def _sample(self, p: _Point, docs: dict[str, dict[str, Any]], protocol: str) -> EvalSample:
        if protocol == "paper":
            messages, offered = _paper_messages(p, docs)
        else:
            messages, offered = _official_messages(p, docs)
        gold: dict[str, Any] = {"name": p.call["api_name"], "arguments": p.call["param_dict"]}
        if p.call["api_name"] == "ToolSearcher":
            gold["retrieves"] = [d["name"] for d in _found_tools(_result_output(p.call))]
        spec = _doc(p, docs, p.call["api_name"]).get("input_parameters") or {}
        types = {k: str(v.get("type")) for k, v in spec.items() if isinstance(v, dict)}
        return EvalSample(id=p.id, category=p.level, messages=messages, gold=gold,
                          tools=[_tool_schema(_doc(p, docs, a)) for a in offered],
                          meta={"file": p.source, "api_index": p.k, "offered": offered, "param_types": types})

    def _download(self, cache_dir: Path, tried: list[str]) -> Path | None:
        base = cache_dir / COMMIT[:12]
        marker = base / ".complete"
        if marker.exists():
            return base / "api-bank"
        for folder in _DOWNLOAD_DIRS:
            listing = try_download(_LIST_URL.format(repo=REPO, path=folder, ref=COMMIT),
                                   base / "listings" / (folder.replace("/", "__") + ".json"), tried)
            if listing is None:
                return None
            try:
                entries = json.loads(listing.read_text(encoding="utf-8"))
                names = [e["name"] for e in entries if e.get("type") == "file"
                         and str(e.get("name", "")).endswith((".jsonl", ".py"))]
            except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
                listing.unlink(missing_ok=True)
                tried.append(f"{folder}: the GitHub listing was not the expected JSON")
                return None
            for name in names:
                url = _RAW_URL.format(repo=REPO, ref=COMMIT, path=quote(f"{folder}/{name}"))
                if try_download(url, base / folder / name, tried) is None:
                    return None
        if try_download(_LEVEL3_URL, base / "api-bank" / "test-data" / "level-3.json", tried) is None:
            return None
        marker.write_text(json.dumps({"commit": COMMIT, "hf_revision": HF_REVISION}) + "\n")
        return base / "api-bank"

    # -- scoring

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        if protocol == "paper":
            return self._score_paper(sample, output)
        try:
            calls = parse_official(output)
        except CallParseError as exc:
            return Verdict(False, {"calls": [], "error": "parse"}, f"parse error: {exc}", {"correct": 0.0})
        parsed = {"calls": [c.to_dict() for c in calls], "error": None}
        if not calls:
            kind, reason = "no_call", "no API call found"
        elif len(calls) > 1:
            kind, reason = "extra_call", f"expected one API call, got {len(calls)}"
        else:
            kind, reason = check_official(sample.gold, calls[0], sample.category, sample.meta.get("param_types"))
        parsed["error"] = kind
        return Verdict(kind is None, parsed, reason, {"correct": float(kind is None)})

    def _score_paper(self, sample: EvalSample, output: str) -> Verdict:
        calls = parse_paper(output)
        gold = sample.gold
        ok = False
        for c in calls:
            if "bare" in c:
                ok = c["bare"] == gold["arguments"]
            else:
                ok = c["name"] == gold["name"] and c["parameters"] == gold["arguments"]
            if ok:
                break
        if ok:
            kind, reason = None, ""
        elif not calls:
            kind, reason = "no_call", "no tool call found"
        elif not any(c.get("name") == gold["name"] for c in calls):
            kind, reason = "name", f"no call to {gold['name']}"
        else:
            kind, reason = "value", f"no call to {gold['name']} with exactly the gold parameters"
        return Verdict(ok, {"calls": calls, "error": kind}, reason, {"correct": float(ok)})

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        cats: dict[str, dict[str, Any]] = {}
        errors: dict[str, int] = {}
        for s, v in zip(samples, verdicts, strict=True):
            c = cats.setdefault(s.category, {"correct": 0, "n": 0})
            c["n"] += 1
            c["correct"] += int(v.correct)
            kind = (v.parsed or {}).get("error") if isinstance(v.parsed, dict) else None
            if not v.correct:
                errors[kind or "other"] = errors.get(kind or "other", 0) + 1
        for c in cats.values():
            c["accuracy"] = 100.0 * c["correct"] / c["n"] if c["n"] else 0.0
        n = sum(c["n"] for c in cats.values())
        correct = sum(c["correct"] for c in cats.values())
        out: dict[str, Any] = {
            "overall": {"accuracy": 100.0 * correct / n if n else 0.0, "correct": correct, "n": n},
            "categories": {k: cats[k] for k in LEVELS if k in cats},
            "errors": dict(sorted(errors.items())),
        }
        if protocol == "paper":
            out["paper_reference"] = dict(PAPER_REFERENCE)
        return out
